"""The guided lesson's "Check yourself" (the last step of each part: a few items on the student's own sentence, with
feedback that explains each answer with this model's numbers; kept in the session only) and, for a study's
participants in the predict-before-reveal condition, a prediction before a step's figure is shown."""

from __future__ import annotations

import hashlib

import streamlit as st

from explain.instrument import PARTS, check_items, part_ending_at, part_steps
from explain.items import MISCONCEPTIONS, Item, Models, make
from ui.models import load_shipped
from ui.study import session
from ui.widgets import md

ANSWERS = "_check_answers"  # {(part or step, sentence, item id): the option chosen}: this session only
PREDICT = {
    "scale": ("scaling_row", "word"),
    "softmax": ("row_rest", "word"),
    "masked": ("mask_zeroes", "row"),
    "cross": ("cross_shape", "row"),
    "chosen": ("greedy_pick", "position"),
}


def _models() -> Models:
    return Models(load_shipped("base"), load_shipped("no_mask"))


@st.cache_resource(max_entries=256, show_spinner=False)
def _items(part_title: str, sentence: str, words: int) -> tuple[Item, ...]:
    part = next(p for p in PARTS if p.title == part_title)
    return tuple(check_items(_models(), part, sentence, words))


@st.cache_resource(max_entries=256, show_spinner=False)
def _predict_item(step_key: str, sentence: str, words: int) -> Item | None:
    template, key = PREDICT[step_key]
    try:
        return make(_models(), template, {"sentence": sentence, key: min(max(words // 2, 1), words - 1)}, "P01")
    except (ValueError, IndexError, KeyError):
        return None


def _feedback(item: Item, choice: int) -> None:
    if choice == item.answer:
        st.success(f"Right: **{md(item.options[item.answer])}**. {md(item.explain)}", icon=":material/check:")
        return
    tag = item.tags[choice] if choice < len(item.tags) else None
    why = f" That answer is a common belief: “{MISCONCEPTIONS[tag]}”; the model's numbers say otherwise." if tag else ""
    st.error(
        f"Not what the model does.{why} The model's answer: **{md(item.options[item.answer])}**. {md(item.explain)}",
        icon=":material/close:",
    )


def answered(key: tuple, item_key: str, item: Item, step: int, verb: str) -> None:
    """Callback of Check / Predict: the choice kept in the session (and, for a participant, one event)."""
    choice = st.session_state.get(item_key)
    if choice is None:
        return
    st.session_state.setdefault(ANSWERS, {})[key] = choice
    session.record(
        verb,
        f"{verb}/{step}/{item.template}",
        {"choice": int(choice), "correct": choice == item.answer},
        step=step,
        page="lesson",
    )


def _ask(key: tuple, item: Item, step: int, verb: str, label: str, n: int) -> bool:
    """One item: its options, then its feedback once answered. True once answered."""
    chosen = st.session_state.get(ANSWERS, {}).get(key)
    st.markdown(f"**{n}.** {md(item.text)}")
    if chosen is not None:
        _feedback(item, chosen)
        return True
    widget = "check_" + hashlib.sha256(repr(key).encode()).hexdigest()[:12]
    st.radio(
        "Your answer",
        range(len(item.options)),
        format_func=lambda i: item.options[i],
        index=None,
        key=widget,
        label_visibility="collapsed",
    )
    st.button(label, key=widget + "_go", on_click=answered, args=(key, widget, item, step, verb))
    return False


def panel(step_key: str, step: int, sentence: str, words: int) -> None:
    """ "Check yourself" at the end of a part of the lesson, on the sentence the student follows."""
    part = part_ending_at(step_key)
    if part is None or not words:
        return
    items = _items(part.title, sentence, words)
    if not items:
        return
    steps = part_steps(part)
    with st.expander(
        f"Check yourself: {len(items)} question(s) on part {PARTS.index(part) + 1}, “{part.title}” "
        f"(steps {steps[0]}-{steps[-1]})",
        icon=":material/quiz:",
    ):
        st.caption("Written and answered by the shipped model on your sentence. Nothing is kept beyond this session.")
        for n, item in enumerate(items, start=1):
            _ask((part.title, sentence, item.template), item, step, "checked", "Check", n)


def predicted_first(step_key: str, step: int, sentence: str, words: int) -> bool:
    """Predict before reveal (a study's condition): False while this step's prediction is not made (the page then
    leaves its figure out)."""
    if not session.predict_first() or step_key not in PREDICT or words < 2:
        return True
    item = _predict_item(step_key, sentence, words)
    if item is None:
        return True
    st.markdown("**Predict first, then see the figure.**")
    return _ask((step_key, sentence, item.template), item, step, "predicted", "Predict and reveal", 1)
