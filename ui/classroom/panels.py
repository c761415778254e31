"""Classroom mode's drawing, and `run`, the entry point app.py wraps every run in (ui/classroom/session.py
explains the flow and the session keys).

- the student's sidebar badge (following / exploring, the code), and a fragment that draws nothing and
  polls the class every second (`st.fragment(run_every=1)`): it reruns the app when anything changed, or
  when the browser never got the end of the last full run (`missed_end`: the mark each full run ends with);
- the open question above the page, with an answer button per option, then the model's answer beside
  the student's own;
- the teacher's sidebar: the code, the number of students and answers (polled every 5 s).

AppTest never fires `run_every`: a test reruns (a student's full run polls the class too).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import streamlit as st
from streamlit.navigation.page import StreamlitPage
from streamlit.runtime.scriptrunner import StopException

from classroom import ClassSnapshot, ClassStoreError
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


def student_badge() -> None:
    """The sidebar badge (following / exploring, the code) and its button. Drawn by full runs only: what it
    shows changes only with one (the button's click is one), so a poll draws nothing."""
    snap = ss().get(SNAP)
    if snap is None:
        return
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


def student_poll() -> None:
    """A student's poll, each second (a fragment that draws nothing): reruns the app when the class changed
    (new state, question, reveal, end) or the browser never got the end of the last full run; else nothing.
    The class is read with `poll`, which asks the store for a full snapshot only when its stamp moved."""
    if not is_student() or ss().pop("_class_fresh", False):  # (the full run's own call: it polled already)
        return
    snap = poll(full=False)
    if snap is None or seen_key(snap) != ss().get(SEEN) or missed_end():
        st.rerun(scope="app")


# -- did the browser get the end of the last full run? ----------------------------------------------------
# Streamlit starts a new script runner for a fragment request that arrives just as the previous runner
# stops, and then drops the stopped runner's messages not yet sent: the rest of the page and its "finished"
# (streamlit/runtime/app_session.py, `request_rerun`; Streamlit issue 9921). A student's poll each second
# meets that moment after some of the redraws a teacher's change causes: the page stayed half drawn, the new
# sentence in its sidebar and the old figures below it (8 of 600 updates, 100 students on 2 processes).
# So a student's full run ends with a mark, a hidden widget whose value changes every run: the browser keeps
# it and sends it back with every request, the poll compares. A browser that sends an old mark never got the
# end of the last run, and the poll redraws the page; one that got it costs nothing.
#
# A browser sends an old mark for a while after every full run too: the run's messages are still on their way
# when its timer's next request leaves (under load, for a second or more). Redrawing on that (measured: 100
# students on one process) redraws every page again and again, each redraw delaying the next page's messages.
# So the mark must have stayed old for REPAIR_SECONDS after the run ended, and a page is redrawn for it at most
# MAX_REPAIRS times per class state: a lost end is repaired within about 3 to 4 s, and a slow server is never
# sent into a loop of redraws.
MARK = "class_mark"  # the widget's key; its value: this session's full-run counter
MARK_WANT = "_class_mark_want"  # the mark the last full run drew (None: it stopped early and drew none)
MARK_BY, MARK_AT = "_class_mark_by", "_class_mark_at"  # that run's thread, and when it ended (monotonic s)
REPAIRS = "_class_repairs"  # (the class state seen, the redraws made for a lost end while it was seen)
REPAIR_SECONDS = 3.0
MAX_REPAIRS = 2


def draw_mark() -> None:
    """The last element of a student's full run (nothing may be drawn after it)."""
    s = ss()
    s[MARK_WANT] = str(int(s.get(MARK_WANT) or 0) + 1)
    s[MARK] = s[MARK_WANT]  # a widget's value set before it is drawn: sent to the browser with it
    s[MARK_BY], s[MARK_AT] = threading.current_thread(), time.monotonic()
    with st.sidebar:
        st.html(f"<style>.st-key-{MARK} {{display: none}}</style>")
        st.text_input("class sync", key=MARK, label_visibility="collapsed")


def missed_end() -> bool:
    """In a poll: the browser never got the end of this session's last full run (it sends an old mark).

    A poll queued while that run was under way runs in the same script runner (thread) after it: its request
    left the browser before the run's messages arrived, so its mark says nothing, and no message of that run
    can have been dropped (one runner sends all its messages in order)."""
    s = ss()
    if s.get(MARK_BY) is threading.current_thread() or s.get(MARK) == s.get(MARK_WANT):
        return False
    if time.monotonic() - s.get(MARK_AT, 0.0) < REPAIR_SECONDS:  # its messages may still be on their way
        return False
    seen, done = s.get(REPAIRS) or (None, 0)
    done = done if seen == s.get(SEEN) else 0
    if done >= MAX_REPAIRS:
        return False
    s[REPAIRS] = (s.get(SEEN), done + 1)
    return True


student_poller = st.fragment(run_every=POLL_SECONDS)(student_poll)


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
            student_badge()
            student_poller()
        elif is_teacher():
            teacher_poller()
    if NOTICE in ss() and here != CLASS_PAGE:  # the class page shows its notices itself
        st.toast(md(ss().pop(NOTICE)), icon=":material/groups:")
    if is_student() and ss().get(SNAP) is not None and ss()[SNAP].question is not None:
        question_panel()
    if is_teacher():  # the widgets' new values are in the session already: the class sees them now,
        publish(here, warn=False)  # not after the teacher's page has drawn (and again after it)
    completed = stopped = False
    try:
        body()
        completed = True
    except StopException:  # a page that stops early has completed its run
        completed = stopped = True
        raise
    finally:  # (a RerunException, e.g. a newer request cutting this run short, is not a completed run)
        if is_teacher():
            publish(here)
        if completed and PENDING in ss():
            ss()[SEEN] = ss().pop(PENDING)
        write_url()
        if is_student() and completed:
            if stopped:  # nothing can be drawn after st.stop(): no mark this run (the widget's state goes)
                ss()[MARK_WANT], ss()[MARK_BY], ss()[MARK_AT] = None, threading.current_thread(), time.monotonic()
            else:
                draw_mark()
