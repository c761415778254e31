"""Classroom: start a class (the teacher) or join one (a student); the teacher's screen with the code, the join
link and QR code, the roster, questions with their live answers, pacing, snapshots and the end; the teacher's
console on a second device. The sections are ui/classroom/console.py's, the prose pages/content/classroom.py's."""

import streamlit as st

from pages.content import classroom as text
from ui import shell
from ui.classroom import console
from ui.classroom import session as cls
from ui.state import init_state
from ui.widgets import md

shell.enter(__file__)  # first: re-enter through app.py if Streamlit ran this page bare

st.title("Classroom")
init_state()
notice = st.session_state.pop(cls.NOTICE, None)  # (in app.py's runs, a toast has shown it already)
if notice:
    st.warning(md(notice), icon=":material/groups:")
console.page(text)
