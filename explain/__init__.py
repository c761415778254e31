"""What the pages compute to teach, from model/ only (no Streamlit, no drawing)."""
