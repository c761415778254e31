"""What the pages compute to teach, from model/ only (no streamlit, plotly or pandas)."""
