"""The teacher's roster (classroom/roster.py keeps it): where each student is, the counts at a glance, and "Bring
everyone back". Students are numbers, never names; each student sees their own number in their badge.

A student's session reports its status after each of its runs when it changed (`report`); a student who leaves
follow mode without its button (by changing the sentence, the step or the page) moves the class's tally at once,
so the teacher's sidebar, which redraws on the tally, shows them at once.
"""

from __future__ import annotations

import streamlit as st

from classroom import ClassStoreError
from ui.classroom import plans, teacher
from ui.classroom import session as cls
from ui.page_list import PAGES
from ui.widgets import metrics_row, small_table
from viz.classroom import roster_counts, roster_line, roster_table

TITLES = {p.url_path: p.title for p in PAGES}


def status(here: str) -> dict:
    """This student's status as the roster keeps it (classroom.roster.check_status)."""
    s = cls.ss()
    left = s.get(cls.LEFT)
    if cls.following():
        mode = "following" if plans.leads() else "free"
    else:
        mode = "left" if isinstance(left, list) else "chose"
    page = here if here in cls.PAGE_FILES else None
    out = {
        "mode": mode,
        "page": page,
        "step": s.get(cls.lesson.STEP) if page == "lesson" else None,
        "stop": plans.stop_of(cls.shared_state(page)) if page and page not in cls.NOT_SHARED else None,
        "changed": left if mode == "left" else None,
    }
    return {k: v for k, v in out.items() if v is not None}


def report(here: str) -> None:
    """A student's run: tell the roster how this student stands, when that changed since the last report."""
    s = cls.ss()
    if not cls.is_student():
        return
    now = status(here)
    if now != s.get(cls.REPORTED):
        try:
            cls.store().report(cls.code(), s[cls.STUDENT], now)
            s[cls.REPORTED] = now
        except ClassStoreError:
            pass  # the store is away: told again on the next run


def rows() -> list[dict] | None:
    """The class's roster (the teacher's session only), or None when it cannot be read now."""
    return teacher.teacher_call(cls.store().roster)


def sidebar(roster: list[dict]) -> None:
    """The teacher's sidebar: the roster in one line, and "Bring everyone back" while anyone explores."""
    st.caption(roster_line(roster))
    c = roster_counts(roster)
    bring_back(c, "class_bring_back", help="Every student follows your screen again (also those who chose to explore).")


def bring_back(c: dict[str, int], key: str, **style: str) -> None:
    """The button "Bring everyone back" (every student follows again), while anyone explores or left; `c`: its
    roster_counts."""
    if c["free"] + c["chose"] + c["left"]:
        st.button("Bring everyone back", key=key, icon=":material/group_add:", on_click=plans.bring_back, **style)


def section(console: bool) -> None:
    """The roster on the teacher's console, when it can be read now: counts, then one line per student (those to
    look at first on top)."""
    roster = rows()
    if roster is None:
        return
    c = roster_counts(roster)
    st.subheader(f"Students ({len(roster)})")
    with metrics_row():
        st.metric("Following", c["following"], border=True)
        st.metric("Exploring", c["free"] + c["chose"], border=True)
        st.metric("Left without choosing to", c["left"], border=True)
        st.metric("Away", c["away"], border=True)
    bring_back(c, "class_bring_back_console", type="primary" if c["left"] else "secondary")
    if plans.pace()["paused"]:
        st.caption(":material/pause: The class is paused: every student sees “Eyes on the projector”.")
    if not roster:
        st.caption("Nobody has joined yet: students open the join link or scan the QR code.")
        return
    if console or len(roster) <= 40:
        small_table(roster_table(roster, TITLES), hide_index=True)
    else:
        with st.expander("Every student"):
            small_table(roster_table(roster, TITLES), hide_index=True)
