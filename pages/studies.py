"""Study: create a study of learning (code, link, conditions, retention) and read its report; or take part in one
(consent, a test, the lesson, the test again, questionnaires)."""

import streamlit as st

from pages.content.studies import INTRO
from ui import shell
from ui.state import init_state
from ui.study import page

shell.enter(__file__)  # first: re-enter through app.py if Streamlit ran this page bare

st.title("Study")
init_state()
if "study" not in st.query_params and not st.session_state.get("study_code"):
    st.markdown(INTRO)
page.draw()
