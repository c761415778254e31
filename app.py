"""Glass Transformer: page config, navigation in sections, and the shared sidebar.

Run with `./dev.sh app` (or `streamlit run app.py`). Each page in pages/ also runs on its own.
"""

import streamlit as st

from ui.sidebar import render_sidebar
from ui.state import keep_widget_state

st.set_page_config(page_title="Glass Transformer", page_icon=":material/visibility:", layout="wide")

PAGES = {
    "Start": [
        st.Page("pages/overview.py", title="Overview", icon=":material/account_tree:", url_path="overview",
                default=True),
    ],
    "Encoder": [
        st.Page("pages/tokens.py", title="Tokens and embeddings", icon=":material/token:", url_path="tokens"),
        st.Page("pages/positional.py", title="Positional encoding", icon=":material/waves:", url_path="positional"),
        st.Page("pages/self_attention.py", title="Self-attention, step by step", icon=":material/visibility:",
                url_path="self-attention"),
        st.Page("pages/multi_head.py", title="Multi-head attention", icon=":material/view_column:",
                url_path="multi-head"),
        st.Page("pages/encoder.py", title="The encoder layer", icon=":material/layers:", url_path="encoder"),
    ],
    "Decoder": [
        st.Page("pages/decoder.py", title="Decoder and masking", icon=":material/masks:", url_path="decoder"),
        st.Page("pages/output.py", title="Output and decoding", icon=":material/output:", url_path="output"),
    ],
    "Context": [
        st.Page("pages/why_attention.py", title="Why attention", icon=":material/speed:", url_path="why-attention"),
    ],
    "Train": [
        st.Page("pages/training.py", title="Train your own", icon=":material/model_training:", url_path="training"),
    ],
}

page = st.navigation(PAGES)
keep_widget_state()
render_sidebar()
page.run()
