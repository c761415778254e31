"""The Classroom page's sections for each role (pages/classroom.py draws one of them):

- **the teacher's lead screen** (`lead`), usually projected: the code, the join link and its QR code, the roster,
  asking, the open question's answers (its votes behind a toggle that says "not on the projector"), pacing and the
  plan, the gallery of snapshots, the class board, the end;
- **the teacher's console** (`console`), the same teacher on a second device (a phone, a laptop beside the
  projector), opened with the teacher key or its link: the plan's Back / Next and pause, the question's votes of
  both rounds and the suggested next move shown at once, Mazur's "show the class the first vote", closing the
  question, the roster, the gallery (Project this moves the projector), the board. It never leads: what it shows is
  not the class's (ui/classroom/session.py `CONSOLE`);
- **a student** (`student`) and **a visitor** (`outside`): join, or start a class, or prepare a plan.

The page's prose is the page's (pages/content/classroom.py), handed in as `text`.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

import streamlit as st

from classroom.plans import PACE_LABELS, PACE_MODES
from model.trace import attention_heads, describe_head
from ui.classroom import asking, board, joining, peer, plan_editor, plans, roster, teacher
from ui.classroom import session as cls
from ui.models import current_model
from ui.widgets import chart, md
from viz.classroom import answers_figure, qr_png


@st.fragment
def live_answers(private: bool = False) -> None:
    """The open question's answers, live: how many, and how they spread; Reveal; then the model's answer. Live
    without a timer: a new answer moves the class's tally, whose event redraws this page (ui/classroom/panels.py,
    `teacher_panel`)."""
    snap = teacher.teacher_snapshot()
    if snap is None:
        if cls.is_teacher():  # the class service is unreachable: say so (the stream redraws the page when it is back)
            st.caption(f":material/cloud_off: {cls.UNREACHABLE_TEXT}")
            return
        st.rerun(scope="app")
    st.session_state[cls.CONSOLE_TALLY] = snap.tally
    if snap.question is None:
        st.caption("No question open.")
        return
    if peer.console(snap, private=private):  # vote, discuss, vote again, reveal
        return
    q = snap.question
    st.markdown(f"**Question {q.id}:** {md(q.text)}")
    st.caption(f"{snap.answered} of {snap.students} students answered")
    chart(
        answers_figure(q.options, snap.counts, snap.answer if snap.revealed else None),
        key="class_answers",
        config={"displayModeBar": False},
    )
    c1, c2 = st.columns(2)
    if not snap.revealed:
        c1.button(
            "Reveal the model's answer",
            key="class_reveal",
            on_click=asking.reveal,
            type="primary",
            icon=":material/visibility:",
        )
    else:
        st.success(f"**The model's answer:** {md(q.options[snap.answer])}", icon=":material/smart_toy:")
        asked = st.session_state.get(cls.ASKED)
        if asked and asked[0] == q.id:
            st.caption(md(asked[1].detail))
    c2.button(
        "Close the question",
        key="class_close_question",
        on_click=peer.move,
        args=("close_question",),
        icon=":material/close:",
    )


def loopback(link: str) -> bool:
    """The join link names this machine by a loopback address (localhost, 127.0.0.1): no phone can open it."""
    host = urlsplit(link).hostname or ""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def console_link(key: str) -> str:
    """The address that opens this class's console on another device (the teacher key in it: private)."""
    return cls.join_link(cls.code()).split("?", 1)[0] + f"?{cls.CONSOLE_PARAM}={key}"


def join_box(text) -> None:
    """The class's code, join link and QR code, large enough for the back of the room."""
    code = cls.code()
    link = cls.join_link(code)
    c1, c2 = st.columns([3, 2])
    with c1:
        st.markdown("Class code")
        st.markdown(f"# `{code}`")
        st.markdown("Join link: open it, or scan the QR code")
        st.code(link, language=None, wrap_lines=True)
        if loopback(link):
            st.warning(text.LOOPBACK, icon=":material/wifi_off:")
    with c2:
        st.image(qr_png(link), caption=f"Scan to join class {code}", width=260)


def private_keys(text) -> None:
    """The teacher key and the console's link, behind a toggle: never on the projector."""
    if st.toggle("Show my teacher key and the console for my phone (not on the projector)", key="class_show_key"):
        st.caption(text.TEACHER_KEY)
        st.code(teacher.teacher_key(), language=None, wrap_lines=True)
        link = console_link(teacher.teacher_key())
        c1, c2 = st.columns([3, 2])
        c1.caption(text.CONSOLE)
        c1.code(link, language=None, wrap_lines=True)
        c2.image(qr_png(link), caption="Scan to open the console", width=200)


def ask(text) -> None:
    """Ask the class a question made from what this session shows, answered by the model."""
    st.subheader("Ask the class")
    st.caption(text.ASK)
    kinds = {**text.KINDS, **text.MORE_KINDS}
    kind = st.radio("Question", list(kinds), format_func=kinds.get, key="class_kind")
    cfg = current_model().bundle.config
    params: dict = {}
    if kind in ("attention", "click", "scaling", "head_zero"):
        a1, a2 = st.columns(2)
        params["layer"] = a1.selectbox("Encoder layer", range(cfg.n_enc_layers), key="class_layer")
        head = a2.selectbox("Head", ["the most decided", *range(cfg.n_heads)], key="class_head")
        params["head"] = None if isinstance(head, str) else head
    elif kind == "next_word":
        params["position"] = st.number_input("Words of the translation given (0: none)", 0, 40, 2, key="class_pos")
    elif kind == "head_off":
        heads = attention_heads(current_model().bundle.config)
        params["off"] = st.selectbox(
            "Head to switch off", heads, format_func=lambda h: describe_head(*h), key="class_off"
        )
    st.button(
        "Ask the class", key="class_ask", type="primary", icon=":material/quiz:", on_click=peer.ask, args=(kind, params)
    )


def pace_and_plan(pause: bool = True) -> None:
    """The teacher's pacing and plan controls on the classroom page (`pause`: with its pause button; the console
    has one at its top already)."""
    p = plans.pace()
    st.subheader("Pace the class")
    c1, c2 = st.columns([3, 2])
    with c1:
        st.session_state["pace_mode"] = p["mode"]
        st.radio(
            "Students",
            list(PACE_MODES),
            key="pace_mode",
            format_func=PACE_LABELS.get,
            on_change=lambda: plans.set_pace(mode=st.session_state["pace_mode"]),
            horizontal=True,
        )
    if pause:
        plans.pause_button(p["paused"], "_main", c2)
        if p["paused"]:
            c2.caption("Every student sees “Eyes on the projector”.")
    plan, stop = plans.class_plan(), plans.current_stop()
    st.subheader("Lesson plan")
    if plan is not None and stop is not None:
        st.markdown(f"The class follows **{md(plan.title)}**, stop **{stop[0] + 1}** of {len(plan.stops)}.")
        st.selectbox(
            "Go to stop",
            range(len(plan.stops)),
            index=stop[0],
            key="plan_jump",
            format_func=lambda i: plans.stop_label(plan, i),
        )
        st.button(
            "Take the class there",
            key="plan_jump_go",
            icon=":material/flag:",
            on_click=lambda: plans.go_to_stop(st.session_state["plan_jump"]),
        )
    with st.expander("Build or load a plan", expanded=plan is None):
        plan_editor.editor()
        if st.session_state.get(plans.DRAFT) is not None:
            st.button(
                "Teach this plan now (the class goes to its first stop)",
                key="plan_use",
                type="primary",
                on_click=plans.use_draft_in_class,
                icon=":material/play_lesson:",
            )


def the_end(text) -> None:
    st.caption(text.ENDS)
    st.button("End the class for everyone", key="class_end", on_click=teacher.end_class, icon=":material/stop_circle:")


def lead(text) -> None:
    join_box(text)
    private_keys(text)
    st.divider()
    roster.section(console=False)
    st.divider()
    ask(text)
    live_answers()
    peer.download()
    st.divider()
    pace_and_plan()
    st.divider()
    plans.gallery()
    st.divider()
    board.board()
    st.divider()
    the_end(text)


def console(text) -> None:
    st.markdown(f"### :material/tablet: Teacher's console · class `{cls.code()}`")
    st.caption(text.CONSOLE_HERE)
    plans.teacher_bar(main=True)
    st.divider()
    st.subheader("The open question")
    live_answers(private=True)
    peer.download()
    st.divider()
    roster.section(console=True)
    st.divider()
    ask(text)
    st.divider()
    plans.gallery()
    st.divider()
    board.board()
    st.divider()
    pace_and_plan(pause=False)
    st.divider()
    the_end(text)


def student(text) -> None:
    code = cls.code()
    if cls.following():
        st.success(
            f"You follow class **{code}**: your screen shows what the teacher shows.",
            icon=":material/cast_for_education:",
        )
    else:
        st.info(f"You are in class **{code}** and explore on your own. {text.PRIVATE}", icon=":material/explore:")
    board.board()
    st.button(
        "Leave the class",
        key="class_leave",
        on_click=cls.leave_class,
        args=("You left the class.",),
        icon=":material/logout:",
    )


def outside(text) -> None:
    st.markdown(text.INTRO)
    c1, c2 = st.columns(2)
    with c1:
        st.subheader("Join a class")
        st.text_input("Class code", max_chars=32, placeholder="e.g. K7M2QX", key="class_join_code")
        st.button("Join", type="primary", key="class_join", icon=":material/login:", on_click=joining.join_typed)
    with c2:
        st.subheader("Teach a class")
        st.button(
            "Start a class",
            key="class_start",
            on_click=teacher.start_class,
            type="primary",
            icon=":material/co_present:",
        )
        st.text_input("Teacher key, to take a class back", type="password", max_chars=200, key="class_resume_key")
        b1, b2 = st.columns(2)
        b1.button("Resume the class", key="class_resume", on_click=teacher.resume_typed, width="stretch")
        b2.button(
            "Open its console here",
            key="class_console",
            on_click=teacher.resume_typed,
            kwargs={"console": True},
            width="stretch",
            help=text.CONSOLE,
        )
    st.caption(text.ENDS)
    st.divider()
    st.subheader("Prepare a lesson plan")
    plan_editor.editor()
    if st.session_state.get(plans.DRAFT) is not None:
        st.button(
            "Start a class with this plan",
            key="plan_start",
            on_click=plans.start_with_plan,
            type="primary",
            icon=":material/play_lesson:",
        )


def page(text) -> None:
    """The Classroom page of this session's role (`text`: the page's prose, pages/content/classroom.py)."""
    if cls.is_console():
        console(text)
    elif cls.is_teacher():
        lead(text)
    elif cls.is_student():
        student(text)
    else:
        outside(text)
