"""Classroom mode's drawing, and `run`, the entry point app.py wraps every run in (ui/classroom/session.py
explains the flow and the session keys).

- the student's sidebar badge (following / exploring, the code);
- the open question above the page, with an answer button per option, then the model's answer beside
  the student's own;
- the teacher's sidebar: the code, the number of students and answers (a fragment, redrawn when a student
  joins or answers: its own event stream watches the class's `tally`);
- the end of every run of a class member (`end_of_run`): the class's counters read once more (a change made
  while the run ran reruns it at once), then the page's event stream and the counter it shows
  (ui/classroom/push.py), the last element of the run.

AppTest runs no JavaScript: a test reruns, or sends the component's trigger itself.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import streamlit as st
from streamlit.navigation.page import StreamlitPage

from classroom import ClassSnapshot, ClassStoreError
from ui import shell
from ui.classroom import board, peer, plans, push, roster
from ui.classroom.joining import join_from_link
from ui.classroom.session import (
    CLASS_PAGE,
    CONSOLE,
    CONSOLE_TALLY,
    ENDED,
    EVENTS,
    MAX_RERUNS,
    NOT_SHARED,
    NOTICE,
    NUMBER,
    OWN_MODEL_STUDENT,
    PUBLISHED,
    PUBLISHED_V,
    RERUNS,
    SHOWS,
    SNAP,
    STUDENT,
    TEACHER_PAGE,
    TOUCH_SECONDS,
    TOUCHED,
    UNREACHABLE,
    UNREACHABLE_TEXT,
    code,
    follow_on_run,
    following,
    hold_page,
    is_student,
    is_teacher,
    notify,
    own_model_notice,
    role,
    set_following,
    ss,
    store,
    write_url,
)
from ui.classroom.teacher import (
    adopt,
    console_from_link,
    on_page,
    publish,
    restore_teacher,
    teacher_call,
    teacher_snapshot,
)
from ui.session_info import fair_share
from ui.sidebar import settle_shared
from ui.state import MODELS, interventions, sync_query_params
from ui.widgets import md

TALLY_DRAWN = "_class_tally_drawn"  # the teacher's panel: the counters its last complete run drew (seq + tally)
TEACHER_WATCH = "seq+tally"  # what a teacher's page watches: the sum of two counters (each only grows)


def student_badge() -> None:
    """The sidebar badge (following / exploring, the code) and its button. Drawn by full runs only: what it
    shows changes only with one (the button's click is one), so a poll draws nothing."""
    snap = ss().get(SNAP)
    if snap is None:
        return
    if ss().get(UNREACHABLE):  # (the last read of the class failed: the page shows what it had)
        st.caption(f":material/cloud_off: {UNREACHABLE_TEXT}")
    if ss().get(NUMBER):
        st.caption(f"You are **student {ss()[NUMBER]}** (your teacher sees numbers, never names).")
    if following() and not plans.leads():  # the teacher lets the class explore: nobody is moved
        st.badge(f"Exploring · class {snap.code} (your teacher's choice)", icon=":material/explore:", color="gray")
        st.caption("You follow the teacher again when they take the class back.")
        st.button(
            "Stop following", key="class_detach", icon=":material/explore_off:", on_click=set_following, args=(False,)
        )
    elif following():
        st.badge(f"Following class {snap.code}", icon=":material/cast_for_education:", color="green")
        st.button(
            "Explore on my own", key="class_detach", icon=":material/explore:", on_click=set_following, args=(False,)
        )
        if snap.state.get("own_model"):
            st.caption(board.own_model_note() or OWN_MODEL_STUDENT)
    else:
        st.badge(f"Exploring · class {snap.code}", icon=":material/explore:", color="gray")
        st.button(
            "Follow the teacher",
            key="class_follow",
            icon=":material/cast_for_education:",
            type="primary",
            on_click=set_following,
            args=(True,),
        )


def explorer_bar() -> None:
    """Above an exploring student's page: the way back to the class, where a phone's collapsed sidebar would hide
    it."""
    snap = ss().get(SNAP)
    if not is_student() or following() or snap is None:
        return
    with st.container(horizontal=True, vertical_alignment="center", key="class_explorer_bar"):
        st.caption(f":material/explore: You explore on your own · class {snap.code}")
        st.button(
            "Follow the teacher",
            key="class_follow_main",
            icon=":material/cast_for_education:",
            on_click=set_following,
            args=(True,),
            type="primary",
        )


def ended_notice() -> None:
    """Above the page, once this session's class has ended, until dismissed: a toast fades before a student who
    looks at the projector reads it."""
    text = ss().get(ENDED)
    if text:
        with st.container(border=True, key="class_ended"):
            st.info(md(text), icon=":material/event_busy:")
            st.button("OK", key="class_ended_ok", on_click=lambda: ss().pop(ENDED, None), icon=":material/check:")


def end_of_run(watch: str, drawn: int, recheck: bool = True, scope: str = "app") -> None:
    """The end of a class member's completed run: rerun at once if the class's counter `watch` moved past
    `drawn` while the run ran (`recheck`; at most MAX_RERUNS times in a row), else draw the page's end: its
    event stream and what it shows (the last element of the run)."""
    s = ss()
    now = None
    if recheck:
        h = push.hub()  # what this process's events told (no read of the store: a hundred followers ask at once)
        now = h.latest(code()) if h is not None else None
        if now is None:
            try:
                now = store().counters(code())
            except ClassStoreError:
                pass  # the store is away: the page's stream says so, and asks again when it is back
    if now is not None and (push.counter(now, watch) > drawn or now.ended) and s.get(RERUNS, 0) < MAX_RERUNS:
        s[RERUNS] = s.get(RERUNS, 0) + 1
        st.rerun(scope=scope)
    s[RERUNS] = 0
    member = "teacher" if is_teacher() else s[STUDENT]
    s[EVENTS] = push.events_url(code(), member)
    page = s.get(TEACHER_PAGE) if is_teacher() else s.get(plans.LAST_PAGE)
    push.sync(s[EVENTS], watch, drawn, view=f"{page}:{s.get('lesson_step') if page == 'lesson' else ''}")


def close_events() -> None:
    """A page that listened to a class and left it: its stream closes (the end of the run, drawn once)."""
    if ss().pop(EVENTS, None) is not None:
        push.sync(None, "seq", None)


def answer(qid: int, option: int) -> None:
    """Callback of an answer button (its arguments are the server's, not the browser's)."""
    try:
        poll = store().votes(code(), student_id=ss()[STUDENT])
        if poll is not None and poll.qid == qid:  # drawn just before the teacher's question opened its vote
            peer.vote(qid, option)
            return
        store().answer(code(), ss()[STUDENT], qid, option)
        ss()[SNAP] = store().snapshot(code(), student_id=ss()[STUDENT]) or ss()[SNAP]
    except ClassStoreError as e:
        notify(str(e))


@st.fragment
def question_panel() -> None:
    """The teacher's open question above the page: answer buttons; after the reveal, the model's answer
    beside the student's own."""
    with fair_share():  # (a fragment's run: its CPU counts against the client's share too, as app.py's runs do)
        _question_panel()


HIDDEN_Q = "_class_hidden_question"  # a revealed question this student put away (its id)


def shown_question(snap: ClassSnapshot | None):
    """The class's open question as this student's page shows it: None once revealed and put away."""
    if snap is None or snap.question is None:
        return None
    if snap.revealed and ss().get(HIDDEN_Q) == snap.question.id:
        return None
    return snap.question


def hide_question(qid: int) -> None:
    ss()[HIDDEN_Q] = qid


def _question_panel() -> None:
    snap: ClassSnapshot | None = ss().get(SNAP)
    q = shown_question(snap)
    if q is None:
        return
    with st.container(border=True, key="class_question"):
        st.markdown(f":material/quiz: **Question from your teacher:** {md(q.text)}")
        if snap.revealed:
            st.button(
                "Put this question away",
                key=f"class_hide_{q.id}",
                icon=":material/close:",
                on_click=hide_question,
                args=(q.id,),
            )
        if peer.student_panel(q):  # a peer-instruction question: vote, discuss, vote again, reveal
            return
        if not snap.revealed:
            peer.option_buttons(st.columns(len(q.options)), q.id, q.options, snap.my_answer, answer)
            st.caption(
                "Your answer: "
                + (
                    f"**{md(q.options[snap.my_answer])}** (you can change it until the teacher reveals the model's)"
                    if snap.my_answer is not None
                    else "none yet"
                )
            )
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
        if is_teacher():  # the store cannot be reached (not an ended class): say so, no rerun loop; the page's
            st.caption(f":material/cloud_off: {UNREACHABLE_TEXT}")  # stream reruns this when the store is back
            end_of_run(TEACHER_WATCH, ss().get(TALLY_DRAWN, 0), recheck=False)
            return
        st.rerun(scope="app")
    drawn = ss().get(CONSOLE_TALLY)  # (the class page's console sets it as it draws; None on another page)
    if drawn is not None and drawn != snap.tally:  # an answer, a vote, a student, a snapshot: the console redraws
        st.rerun(scope="app")
    if time.monotonic() - ss().get(TOUCHED, 0.0) > TOUCH_SECONDS:
        teacher_call(store().touch)
        ss()[TOUCHED] = time.monotonic()
    if snap.version > ss().get(PUBLISHED_V, snap.version):
        st.rerun(scope="app")  # another device of the teacher moved the class: this screen shows it (`adopt`)
    st.badge(
        f"Teaching class {snap.code}" + (" · console" if ss().get(CONSOLE) else ""),
        icon=":material/co_present:",
        color="blue",
    )
    people = roster.rows()
    if people is not None:
        roster.sidebar(people)
    if snap.question is not None:
        n = peer.answered(snap)
        st.caption(f"Question: {n} answer{'s' if n != 1 else ''}" + (" (revealed)" if snap.revealed else ""))
    if drawn is None:  # (another page than the class page, whose gallery shows them)
        plans.new_shots()
    notice = own_model_notice(ss().get(PUBLISHED))
    notice = notice and (board.shared_model_notice() or notice)
    if notice:
        st.warning(notice, icon=":material/visibility_off:")
    ss()[TALLY_DRAWN] = snap.seq + snap.tally
    # redrawn when a student joins, answers or leaves follow mode (tally), and when the class's state moves (seq:
    # another device of the teacher may have moved it)
    end_of_run(TEACHER_WATCH, snap.seq + snap.tally, recheck=False)


def presents() -> bool:
    """This session teaches a class, its reload's restore included (app.py asks before the navigation is built:
    a projector reloaded with ?presenter=1 got the sidebar's page list on its first run, which is its only one)."""
    restore_teacher()
    return is_teacher()


# The teacher's panel reruns on its own when a student joins or answers (its stream's trigger reruns this
# fragment only; on the class page, whose console shows the answers, the whole page), and once a minute to touch
# the class while the teacher's page is open.
teacher_poller = st.fragment(run_every=TOUCH_SECONDS)(teacher_panel)


def run(page: StreamlitPage, sidebar: Callable[..., None]) -> None:
    """One run of app.py: join from the link, follow the teacher, draw the class's sidebar and question,
    then the page (`sidebar()`, then the page: ui/shell.py), then publish (teacher), keep the URL (student)
    and, for a student, end the page (`end_of_run`). A student who follows gets the page in `followed_page`, a
    fragment that the class's events rerun alone."""
    here = page.url_path or "home"
    ss().pop(CONSOLE_TALLY, None)  # the class page sets it again as it draws its console
    ss().pop(FULL_RUN, None)
    console_from_link()  # /classroom?console=KEY: this device is the class's console
    restore_teacher()  # a reload of a teacher's screen: still the teacher (once per session)
    join_from_link()
    plans.on_run(here)  # a plan link, the class's pace, a move asked for by Next / a stop / a snapshot
    if is_teacher():
        adopt(here)  # the class's state, when another device of the teacher moved it (or after a reload)
        plans.hold_shown()  # a late request does not take the teacher back to the stop before
    board.read_run()  # the teacher's training run, as the class follows it
    if is_student():
        follow_on_run(here)
    hold_page(here)  # nor a teacher or a student back to the page before
    if is_teacher():
        on_page(here)  # (the plan's bar and the stop's banner below say whether the teacher is at the stop)
    if is_student():
        roster.report(here)
    teacher_slot = None
    with st.sidebar:
        if is_student():
            student_badge()
            plans.student_bar()
        elif is_teacher():
            teacher_slot = st.container()  # the teacher's panel, drawn once this run has published (below)
            plans.teacher_bar()
    toast_notice(here)
    ended_notice()
    explorer_bar()
    alone = redraws_alone(here)
    if alone:
        if shell.guarded(page, lambda: sidebar(shared=False)):
            with st.sidebar:
                push.sync_frame(push.events_url(code(), ss()[STUDENT]))
            ss()[AROUND], ss()[FULL_RUN] = around(here), True
            try:
                followed_page(page)
            finally:
                write_url()
        return
    # A led student drawn by a full run (an open question, a first run): the teacher's line above the page and the
    # sidebar without the controls, as in `followed_page` (the controls here were live, and the line was gone).
    led_here = plans.led() and here not in NOT_SHARED
    body = lambda: shell.run(page, (lambda: sidebar(shared=False)) if led_here else sidebar)  # noqa: E731
    if plans.paused():  # every student's screen: eyes on the projector, until the teacher resumes
        body = plans.pause_screen
    else:
        if led_here:
            teacher_line()
        if is_student() and shown_question(ss().get(SNAP)) is not None:
            question_panel()
    if here != CLASS_PAGE and not plans.paused():
        plans.stop_banner()
        board.class_run_panel()  # the teacher's training run, live, on every following student's page
    if is_teacher():  # the widgets' new values are in the session already: the class sees them now,
        publish(warn=False)  # not after the teacher's page has drawn (and again after it)
        toast_notice(here)  # (a change the store refused says so in this very run)
    completed = False
    try:
        body()
        completed = True
    finally:  # (a RerunException, e.g. a newer request cutting this run short, is not a completed run; after
        # st.stop() nothing can be drawn: the page keeps its stream, and asks again until a run ends whole)
        if is_teacher() and completed:  # (a run cut short: the next one publishes before its page; publishing here
            publish()  # would apply a sentence the page asked for after the sidebar's box was drawn: an error)
        write_url()
    if teacher_slot is not None and completed:
        with teacher_slot:  # after `publish`: the counters its stream compares include this run's own change (drawn
            teacher_poller()  # before it, every move of the teacher's reran the panel at once, twice)
    with st.sidebar:
        if is_student() and completed and SHOWS in ss():
            end_of_run(*ss()[SHOWS])
        elif role() is None:
            close_events()


def toast_notice(here: str) -> None:
    """The session's notice (a callback's, a change the store refused), once, as a toast (the class page shows its
    notices itself)."""
    if NOTICE in ss() and here != CLASS_PAGE:
        st.toast(md(ss().pop(NOTICE)), icon=":material/groups:")


# -- a follower's page, redrawn alone -----------------------------------------------------------------------
# In a lecture hall every change of the teacher redraws a hundred pages, and a full run of the app (navigation,
# stylesheet, sidebar, page) costs the server about a third more than the page alone (bench/README.md, "A follower's
# page redrawn alone"). So a student who follows gets the page inside a fragment, `followed_page`, whose last
# element is the page's end (`end_of_run`): the class's event reruns that fragment only. Its sidebar holds
# nothing the teacher changes (`render_sidebar(shared=False)`: the sentence, the model and the switches are one
# line above the page, `teacher_line`), and whatever the full run drew around the page (`around`: following or
# not, the pace, a pause, a question, the badge's state) is compared after the fragment's own reads of the
# class: when it moved, the fragment asks for a full run. The full run also draws `push.sync_frame` outside the
# fragment: a page that asked once in vain asks again with a full run (ui/classroom/push.py).
AROUND, FULL_RUN = "_class_around", "_class_full_run"


def redraws_alone(here: str) -> bool:
    """This run's page goes in `followed_page`: a student who follows the teacher's lead, on a shared page, with
    no pause and no open question (those are drawn around the page, by full runs)."""
    snap = ss().get(SNAP)
    return (
        plans.led()
        and not plans.paused()
        and here not in NOT_SHARED
        and snap is not None
        and shown_question(snap) is None
        and SHOWS in ss()
    )


def around(here: str) -> tuple:
    """What a full run of a follower draws around its page, as data: a fragment's run that finds it moved
    asks for a full run."""
    snap = ss().get(SNAP)
    return (
        here,
        redraws_alone(here),
        bool(ss().get(UNREACHABLE)),
        plans.pace(),
        (ss().get(plans.PLAN) or (None,))[0],
        snap.code if snap else None,
        bool(snap and snap.state.get("own_model")),
        NOTICE in ss(),
    )


@st.fragment
def followed_page(page: StreamlitPage) -> None:
    """A following student's page: the teacher's line, the plan's stop, the teacher's training run, the page,
    and the page's end. Rerun alone by the class's events (see above)."""
    here = page.url_path or "home"
    with fair_share():  # (a fragment's run: its CPU counts against the client's share too, as app.py's runs do)
        alone = not ss().pop(FULL_RUN, False)
        if alone:  # a rerun of this fragment alone: the class's reads of a full run
            plans.on_run(here)
            board.read_run()
            follow_on_run(here)
            roster.report(here)
            if around(here) != ss().get(AROUND):
                st.rerun(scope="app")
            sync_query_params()  # (the address stays a link to what the page shows)
        teacher_line()
        plans.stop_banner()
        board.class_run_panel()
        shell.run_page(page, alone=alone)
        end_of_run(*ss()[SHOWS], scope="fragment" if alone else "app")  # (inside a full run: "app" only)


def teacher_line() -> None:
    """Above a follower's page: the teacher's sentence, model and switches (the sidebar's controls, while
    following)."""
    settle_shared()
    off = interventions().describe()
    st.caption(
        f":material/cast_for_education: Your teacher's view · sentence “{md(ss().get('sentence') or '')}” · "
        f"{MODELS.get(ss().get('model'), ss().get('model'))} · "
        + (md("; ".join(off)) if off else "nothing switched off")
    )
