"""Classroom mode's drawing, and `run`, the entry point app.py wraps every run in (ui/classroom/session.py
explains the flow and the session keys).

- the student's sidebar badge (following / exploring, the code), from a fragment that polls the class
  every second (`st.fragment(run_every=1)`) and reruns the app when anything changed;
- the open question above the page, with an answer button per option, then the model's answer beside
  the student's own;
- the teacher's sidebar: the code, the number of students and answers (polled every 5 s).

AppTest never fires `run_every`: a test calls `student_panel()` / `teacher_panel()` or reruns.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import streamlit as st
from streamlit.navigation.page import StreamlitPage
from streamlit.runtime.scriptrunner import StopException

from ui.classroom import ClassSnapshot, ClassStoreError
from ui.classroom.session import (
    CLASS_PAGE,
    NOTICE,
    OWN_MODEL_STUDENT,
    PENDING,
    POLL_SECONDS,
    PUBLISHED,
    SEEN,
    SNAP,
    STUDENT,
    TEACHER_POLL_SECONDS,
    TOUCH_SECONDS,
    TOUCHED,
    code,
    follow_on_run,
    following,
    is_student,
    is_teacher,
    join_from_link,
    notify,
    own_model_notice,
    poll,
    publish,
    seen_key,
    set_following,
    ss,
    store,
    teacher_call,
    teacher_snapshot,
    write_url,
)
from ui.widgets import md


def student_panel() -> None:
    """The sidebar badge, polled each second; a change (new state, question, reveal, end) reruns the app."""
    if not is_student():
        return
    full_run = ss().pop("_class_fresh", False)  # drawn by a full run: its snapshot, and it reruns nothing
    snap = ss().get(SNAP) if full_run else poll()
    if snap is None:
        st.rerun(scope="app")
    if following():
        st.badge(f"Following class {snap.code}", icon=":material/cast_for_education:", color="green")
        st.button("Explore on my own", key="class_detach", icon=":material/explore:", on_click=set_following,
                  args=(False,))
        if snap.state.get("own_model"):
            st.caption(OWN_MODEL_STUDENT)
    else:
        st.badge(f"Exploring · class {snap.code}", icon=":material/explore:", color="gray")
        st.button("Follow the teacher", key="class_follow", icon=":material/cast_for_education:", type="primary",
                  on_click=set_following, args=(True,))
    if not full_run and (ss().pop("_class_rerun", False) or seen_key(snap) != ss().get(SEEN)):
        st.rerun(scope="app")
    if not full_run and just_missed():
        st.rerun(scope="app")


RACE_SECONDS = 0.5


def just_missed() -> bool:
    """This poll started right after a full run ended: the browser may never have got that run's end.

    Streamlit starts a new script runner for a fragment request that arrives as the previous runner
    stops, and the stopped runner's last messages (the rest of the page, "finished") are then dropped
    (the race described in streamlit/runtime/app_session.py, Streamlit issue 9921). Measured without this:
    up to 11 of 400 updates (100 students on 2 processes, bench/classroom_load.py) left a page half drawn.
    One more full run fixes it; at most one per class state the student has seen."""
    s = ss()
    if time.monotonic() - s.get("_class_done_at", 0.0) > RACE_SECONDS or s.get("_class_resent") == s.get(SEEN):
        return False
    s["_class_resent"] = s.get(SEEN)
    return True


student_poller = st.fragment(run_every=POLL_SECONDS)(student_panel)


def answer(qid: int, option: int) -> None:
    """Callback of an answer button (its arguments are the server's, not the browser's)."""
    try:
        store().answer(code(), ss()[STUDENT], qid, option)
        ss()[SNAP] = store().snapshot(code(), student_id=ss()[STUDENT]) or ss()[SNAP]
    except ClassStoreError as e:
        notify(str(e))


@st.fragment
def question_panel() -> None:
    """The teacher's open question above the page: answer buttons; after the reveal, the model's answer
    beside the student's own."""
    snap: ClassSnapshot | None = ss().get(SNAP)
    if snap is None or snap.question is None:
        return
    q = snap.question
    with st.container(border=True, key="class_question"):
        st.markdown(f":material/quiz: **Question from your teacher:** {md(q.text)}")
        if not snap.revealed:
            cols = st.columns(len(q.options))
            for i, (col, option) in enumerate(zip(cols, q.options, strict=True)):
                col.button(md(option), key=f"class_answer_{q.id}_{i}", on_click=answer, args=(q.id, i),
                           type="primary" if snap.my_answer == i else "secondary", width="stretch")
            st.caption("Your answer: " + (f"**{md(q.options[snap.my_answer])}** (you can change it until the "
                                          "teacher reveals the model's)" if snap.my_answer is not None
                                          else "none yet"))
        else:
            model, mine = q.options[snap.answer], snap.my_answer
            st.success(f"**The model's answer:** {md(model)}", icon=":material/smart_toy:")
            if mine is None:
                st.info("You did not answer this one.")
            elif mine == snap.answer:
                st.markdown(f"**Yours:** {md(q.options[mine])}: the same as the model's.")
            else:
                st.markdown(f"**Yours:** {md(q.options[mine])}: not what the model does.")


def teacher_panel() -> None:
    """The teacher's sidebar: the code, how many students, the open question's answers; touches the class."""
    if not is_teacher():
        return
    snap = teacher_snapshot()
    if snap is None:
        st.rerun(scope="app")
    if time.monotonic() - ss().get(TOUCHED, 0.0) > TOUCH_SECONDS:
        teacher_call(store().touch)
        ss()[TOUCHED] = time.monotonic()
    st.badge(f"Teaching class {snap.code}", icon=":material/co_present:", color="blue")
    line = f"{snap.students} student{'s' if snap.students != 1 else ''} joined"
    if snap.question is not None:
        line += f" · question: {snap.answered} answer{'s' if snap.answered != 1 else ''}"
        line += " (revealed)" if snap.revealed else ""
    st.caption(line)
    notice = own_model_notice(ss().get(PUBLISHED))
    if notice:
        st.warning(notice, icon=":material/visibility_off:")


teacher_poller = st.fragment(run_every=TEACHER_POLL_SECONDS)(teacher_panel)


def run(page: StreamlitPage, body: Callable[[], None]) -> None:
    """One run of app.py: join from the link, follow the teacher, draw the class's sidebar and question,
    then `body()` (the sidebar and the page), then publish (teacher) and keep the URL (student)."""
    here = page.url_path or "home"
    join_from_link()
    if is_student():
        follow_on_run(here)
        ss()["_class_fresh"] = True  # the poller's first call in this run reuses this run's snapshot
    with st.sidebar:
        if is_student():
            student_poller()
        elif is_teacher():
            teacher_poller()
    if NOTICE in ss() and here != CLASS_PAGE:  # the class page shows its notices itself
        st.toast(md(ss().pop(NOTICE)), icon=":material/groups:")
    if is_student() and ss().get(SNAP) is not None and ss()[SNAP].question is not None:
        question_panel()
    if is_teacher():  # the widgets' new values are in the session already: the class sees them now,
        publish(here, warn=False)  # not after the teacher's page has drawn (and again after it)
    completed = False
    try:
        body()
        completed = True
    except StopException:  # a page that stops early has completed its run
        completed = True
        raise
    finally:  # (a RerunException, e.g. a newer request cutting this run short, is not a completed run)
        if is_teacher():
            publish(here)
        if completed and PENDING in ss():
            ss()[SEEN] = ss().pop(PENDING)
            ss()["_class_done_at"] = time.monotonic()
        write_url()
