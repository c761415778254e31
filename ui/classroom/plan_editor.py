"""The lesson-plan editor (the Classroom page, in a class or not): "Add this view as a stop" takes the session's
state on the last page of the walkthrough it showed (ui/classroom/plans.py `LAST_PAGE`), with a caption, optionally
a question made from that view (frozen with the model's answer) and a mystery head; the draft (`plans.DRAFT`) is
saved as a JSON file or a link (``/classroom?plan=TOKEN``), and loaded from either, or from the plans shipped in
assets/plans/. The checks of a plan are classroom/plans.py's; nothing of a plan is drawn as HTML (`ui.widgets.md`).
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

import classroom.plans
from classroom import InvalidInput
from classroom.rules import check_text
from ui.classroom import session as cls
from ui.classroom.plans import DRAFT, PLAN_PARAM, STOP_PAGES, describe, heads, ss, view_state
from ui.page_list import ROOT
from ui.widgets import md

PLANS_DIR = ROOT / "assets" / "plans"


def read_file(raw: bytes) -> classroom.plans.Plan:
    return classroom.plans.read_plan(raw, STOP_PAGES, heads())


def shipped() -> dict[str, classroom.plans.Plan]:
    """The plans in assets/plans/, by title (each checked as an uploaded file is)."""
    out = {}
    for path in sorted(Path(PLANS_DIR).glob("*.json")):
        plan = read_file(path.read_bytes())
        out[plan.title] = plan
    return out


STOP_QUESTIONS = {  # ui/classroom/asking.make_question's kinds, with their default parameters
    "attention": "Which word does a word attend to most (encoder layer 0, its most decided head)?",
    "next_word": "Halfway through the translation, which word does the decoder pick next?",
    "head_off": "Does switching the model's first head off change the translation?",
    "no_mask": "Does the model trained without the look-ahead mask translate this sentence correctly?",
}


def stop_question(kind: str | None) -> dict | None:
    """The question of kind `kind` (pages/content/classroom.py's KINDS) about this view, answered by the model."""
    if not kind:
        return None
    from ui.classroom.asking import make_question

    if ss().get("model") == "mine":
        raise InvalidInput("A plan's questions are answered by a shipped model: choose one in the sidebar first.")
    try:
        q, _ = make_question(kind)
    except ValueError as e:
        raise InvalidInput(f"No question of this kind for this view: {e}") from None
    return {"text": q.text, "options": list(q.options), "answer": q.answer}


def add_stop() -> None:
    """Callback: the current view becomes the draft's next stop (caption, question and mystery head from the
    editor)."""
    s = ss()
    try:
        question = stop_question(s.get("plan_question"))
        caption = check_text(
            str(s.get("plan_caption", "")), classroom.plans.MAX_CAPTION, "the caption", allow_empty=True
        )
        head = s.get("plan_hidden") or None
        stop = classroom.plans.check_stop(
            {
                "caption": caption,
                "state": view_state(),
                **({"question": question} if question else {}),
                **({"hidden": {"head": head}} if head else {}),
            },
            "The new stop",
            STOP_PAGES,
            heads(),
        )
        title = check_text(str(s.get("plan_title") or "My lesson plan"), classroom.plans.MAX_TITLE, "the title")
        draft = s.get(DRAFT) or classroom.plans.Plan(title, ())
        s[DRAFT] = classroom.plans.Plan(title, draft.stops).with_stop(stop)
        s["plan_caption"] = ""
    except InvalidInput as e:
        cls.notify(str(e))


def remove_stop(i: int) -> None:
    draft = ss().get(DRAFT)
    if draft is not None:
        ss()[DRAFT] = draft.without(i)


def uploaded() -> None:
    """Callback of the plan file uploader."""
    f = ss().get("plan_file")
    if f is None:
        return
    try:
        ss()[DRAFT] = read_file(f.getvalue())
        cls.notify(f"Lesson plan “{ss()[DRAFT].title}” loaded: {len(ss()[DRAFT].stops)} stops.")
    except InvalidInput as e:
        cls.notify(f"This file cannot be used as a lesson plan: {e}")


def pick_shipped() -> None:
    name = ss().get("plan_shipped")
    plans = shipped()
    if name in plans:
        ss()[DRAFT] = plans[name]


def plan_link(plan: classroom.plans.Plan) -> str:
    """This server's classroom page with the plan in its address (as the join link is built)."""
    base = cls.join_link("-").split("?", 1)[0]
    return f"{base}?{PLAN_PARAM}={classroom.plans.plan_to_link(plan)}"


def editor() -> None:
    """The plan editor: load (shipped, file, link), the draft's stops, add this view, save as file and link."""
    s = ss()
    st.caption(
        "A lesson plan is a list of stops, each a view of the app (page, sentence, model, switched-off "
        "parts, lesson step) with a caption, and optionally a question and a mystery head. Build one by "
        "visiting a page, setting it up, and adding it here as a stop; or start from a shipped plan."
    )
    c1, c2 = st.columns(2)
    with c1:
        names = list(shipped())
        st.selectbox(
            "Start from a shipped plan",
            names,
            index=None,
            key="plan_shipped",
            on_change=pick_shipped,
            placeholder="choose a plan…",
        )
    with c2:
        st.file_uploader(
            "Or open a plan file (.json)", type=["json"], key="plan_file", on_change=uploaded, max_upload_size=1
        )
    draft: classroom.plans.Plan | None = s.get(DRAFT)
    if draft is None:
        st.info("No plan yet: add the first stop below, or choose a shipped plan.", icon=":material/flag:")
    else:
        st.markdown(f"**{md(draft.title)}** · {len(draft.stops)} stop{'s' if len(draft.stops) != 1 else ''}")
        for i, stop in enumerate(draft.stops):
            with st.container(border=True, key=f"plan_stop_{i}"):
                c1, c2 = st.columns([6, 1])
                c1.markdown(f"**{i + 1}.** {md(stop.caption) or '*(no caption)*'}")
                c1.caption(
                    describe(stop.state)
                    + (f" · question: {md(stop.question['text'])}" if stop.question else "")
                    + (f" · mystery head {md(stop.hidden_head)}" if stop.hidden_head else "")
                )
                c2.button("Remove", key=f"plan_remove_{i}", on_click=remove_stop, args=(i,), width="stretch")
    with st.container(border=True, key="plan_add"):
        st.markdown("**Add this view as a stop**")
        st.caption(
            "This view: " + describe(view_state()) + ". Change it on any page (the sidebar, the lesson, "
            "the page's own switches), then come back here."
        )
        if draft is None:
            st.text_input(
                "The plan's title", max_chars=classroom.plans.MAX_TITLE, key="plan_title", placeholder="My lesson plan"
            )
        st.text_input(
            "Caption: what the class should notice here", max_chars=classroom.plans.MAX_CAPTION, key="plan_caption"
        )
        st.selectbox(
            "Question at this stop (made from this view, answered by the model)",
            [None, *STOP_QUESTIONS],
            key="plan_question",
            format_func=lambda k: "none" if k is None else STOP_QUESTIONS[k],
        )
        st.selectbox(
            "Mystery head (its weights hidden on the multi-head page until you reveal them)",
            [None, *heads()],
            key="plan_hidden",
            format_func=lambda h: "none" if h is None else h,
        )
        st.button("Add this view as a stop", key="plan_add_stop", icon=":material/add_location:", on_click=add_stop)
    if draft is not None and draft.stops:
        c1, c2 = st.columns(2)
        c1.download_button(
            "Save the plan as a file",
            draft.to_json(),
            file_name="lesson-plan.json",
            mime="application/json",
            key="plan_download",
            icon=":material/download:",
        )
        try:
            link = plan_link(draft)
        except InvalidInput as e:
            c2.caption(str(e))
        else:
            with c2:
                st.caption("Or share it as a link (opening it loads the plan here):")
                st.code(link, language=None, wrap_lines=True)
