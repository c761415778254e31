"""The Study page's one call: a participant's flow when this session takes part (or opened a study's link), else
the owner's study and report, or the form that creates one; and "Delete my data" for anyone."""

from __future__ import annotations

import streamlit as st

from study import StudyError
from ui.study import owner, participant
from ui.study.session import ACTOR, CODE, NOTICE, OWNER, client, notify, open_link, ss, store, take_link
from ui.widgets import md


def delete_mine() -> None:
    try:
        store().delete_mine(str(ss().get("study_del_code") or ""), str(ss().get("study_del_key") or ""), client())
    except StudyError as e:
        notify(str(e))
        return
    for key in (ACTOR, CODE):
        ss().pop(key, None)
    notify("Everything recorded about you in that study has been deleted.")


def open_typed() -> None:
    """A typed study code: a guess as far as the store knows (failed ones are limited per address)."""
    try:
        open_link(str(ss().get("study_join_code") or ""), None)
    except StudyError as e:
        notify(str(e))


def draw() -> None:
    try:
        _draw()
    except StudyError as e:  # the database out of reach (a refusal of one operation is said where it happens)
        st.error(md(str(e)), icon=":material/database:")


def _draw() -> None:
    take_link()  # (app.py's run has read it already; the page on its own reads it here)
    message = ss().pop(NOTICE, None)
    if message:
        st.warning(md(message), icon=":material/info:")
    code = ss().get(CODE)
    study = store().study(code) if code else None
    if code and study is None:
        ss().pop(CODE, None)
        ss().pop(ACTOR, None)
        st.warning("This study no longer exists (deleted, or past its retention period).")
    if study is not None:
        participant.flow(study)
    elif ss().get(OWNER):
        owner.dashboard()
    else:
        with st.expander("Take part in a study: its code", icon=":material/login:"):
            c1, c2 = st.columns([3, 1], vertical_alignment="bottom")
            c1.text_input("Study code", key="study_join_code", max_chars=16, placeholder="e.g. 2E4JKWUQ")
            c2.button("Open", on_click=open_typed, key="study_join")
        owner.create_form()
    with st.expander("Delete my data from a study"):
        st.caption("With the study's code and the deletion code you were shown when you agreed to take part.")
        c1, c2, c3 = st.columns([2, 2, 1], vertical_alignment="bottom")
        c1.text_input("Study code", key="study_del_code", max_chars=16)
        c2.text_input("Deletion code", key="study_del_key", max_chars=32)
        c3.button("Delete", on_click=delete_mine, key="study_del", icon=":material/delete:")
