"""Classroom: start a class (the teacher) or join one (a student); the teacher's console with the code,
the join link and QR code, questions with their live answers, the reveal and the end."""

import streamlit as st

from model import questions as Q
from pages.content import classroom as text
from ui import shell
from ui.classroom import asking, board, peer, plans
from ui.classroom import session as cls
from ui.models import current_model
from ui.state import init_state
from ui.widgets import chart, md
from viz.classroom import answers_figure, qr_png

shell.enter(__file__)  # first: re-enter through app.py if Streamlit ran this page bare

st.title("Classroom")
init_state()
notice = st.session_state.pop(cls.NOTICE, None)  # (in app.py's runs, a toast has shown it already)
if notice:
    st.warning(md(notice), icon=":material/groups:")


@st.fragment
def live_answers() -> None:
    """The open question's answers, live: how many, and how they spread; Reveal; then the model's answer. Live
    without a timer: a new answer moves the class's tally, whose event redraws this page (ui/classroom/panels.py,
    `teacher_panel`)."""
    snap = cls.teacher_snapshot()
    if snap is None:
        if cls.is_teacher():  # the class service is unreachable: say so (the stream redraws the page when it is back)
            st.caption(f":material/cloud_off: {cls.UNREACHABLE_TEXT}")
            return
        st.rerun(scope="app")
    st.session_state[cls.CONSOLE_TALLY] = snap.tally
    st.metric("Students in the class", snap.students)
    if snap.question is None:
        st.caption("No question asked yet.")
        return
    if peer.console(snap):  # vote, discuss, vote again, reveal
        return
    q = snap.question
    st.markdown(f"**Question {q.id}:** {md(q.text)}")
    st.caption(f"{snap.answered} of {snap.students} students answered")
    chart(answers_figure(q.options, snap.counts, snap.answer if snap.revealed else None),
          key="class_answers", config={"displayModeBar": False})
    if not snap.revealed:
        st.button("Reveal the model's answer", key="class_reveal", on_click=asking.reveal, type="primary",
                  icon=":material/visibility:")
    else:
        st.success(f"**The model's answer:** {md(q.options[snap.answer])}", icon=":material/smart_toy:")
        asked = st.session_state.get(cls.ASKED)
        if asked and asked[0] == q.id:
            st.caption(md(asked[1].detail))


def teacher() -> None:
    code = cls.code()
    link = cls.join_link(code)
    c1, c2 = st.columns([3, 2])
    with c1:
        st.markdown("Class code")
        st.markdown(f"# `{code}`")
        st.markdown("Join link: open it, or scan the QR code")
        st.code(link, language=None)
        if st.toggle("Show my teacher key (not on the projector)", key="class_show_key"):
            st.caption(text.TEACHER_KEY)
            st.code(cls.teacher_key(), language=None)
    with c2:
        st.image(qr_png(link), caption=f"Scan to join class {code}", width=260)
    st.divider()
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
        heads = Q.all_heads(current_model().bundle)
        params["off"] = st.selectbox("Head to switch off", heads, format_func=lambda h: Q.head_label(*h),
                                     key="class_off")
    st.button("Ask the class", key="class_ask", type="primary", icon=":material/quiz:", on_click=peer.ask,
              args=(kind, params))
    live_answers()
    peer.download()
    st.divider()
    plans.console()
    st.divider()
    plans.gallery()
    st.divider()
    board.board()
    st.divider()
    st.caption(text.ENDS)
    st.button("End the class for everyone", key="class_end", on_click=cls.end_class, icon=":material/stop_circle:")


def student() -> None:
    code = cls.code()
    if cls.following():
        st.success(f"You follow class **{code}**: your screen shows what the teacher shows.",
                   icon=":material/cast_for_education:")
    else:
        st.info(f"You are in class **{code}** and explore on your own. {text.PRIVATE}", icon=":material/explore:")
    board.board()
    st.button("Leave the class", key="class_leave", on_click=cls.leave_class, args=("You left the class.",),
              icon=":material/logout:")


def outside() -> None:
    st.markdown(text.INTRO)
    c1, c2 = st.columns(2)
    with c1:
        st.subheader("Join a class")
        st.text_input("Class code", max_chars=32, placeholder="e.g. K7M2QX", key="class_join_code")
        st.button("Join", type="primary", key="class_join", icon=":material/login:", on_click=cls.join_typed)
    with c2:
        st.subheader("Teach a class")
        st.button("Start a class", key="class_start", on_click=cls.start_class, type="primary",
                  icon=":material/co_present:")
        st.text_input("Teacher key, to take a class back", type="password", max_chars=200, key="class_resume_key")
        st.button("Resume the class", key="class_resume", on_click=cls.resume_typed)
    st.caption(text.ENDS)
    st.divider()
    st.subheader("Prepare a lesson plan")
    plans.editor()
    if st.session_state.get(plans.DRAFT) is not None:
        st.button("Start a class with this plan", key="plan_start", on_click=plans.start_with_plan, type="primary",
                  icon=":material/play_lesson:")


if cls.is_teacher():
    teacher()
elif cls.is_student():
    student()
else:
    outside()
