"""Predict, then reveal: the teacher's questions, made from what the teacher shows and answered by the model
(explain/questions.py), asked through the class store with the teacher's secret (ui/classroom/session.py)."""

from __future__ import annotations

from explain import questions
from model.trace import attention_heads
from ui.classroom.session import store
from ui.classroom.teacher import teacher_call
from ui.models import analysis, current_model, load_shipped
from ui.state import interventions


def make_question(
    kind: str, layer: int = 0, head: int | None = None, position: int | None = None, off: tuple[str, int] | None = None
) -> tuple[questions.Question, dict | None]:
    """A question of `kind` about the teacher's current sentence, model and interventions, answered by that model,
    and a click question's grid (None for the others): the one place a kind becomes a question (the console's Ask,
    a plan's stop)."""
    a, bundle = analysis(), current_model().bundle
    if kind == "click":
        query = questions.default_query(a)
        head = questions.most_decided_head(a, layer, query) if head is None else head
        q = questions.attention(a, layer, head)
        q = questions.Question("click", "Click the cell you predict. " + q.text, q.options, q.answer, q.detail)
        return q, questions.attention_grid(a, layer, head, query)
    if kind == "attention":
        return questions.attention(a, layer, head), None
    if kind == "next_word":
        return questions.next_word(a, bundle.tgt_vocab.itos, position), None
    if kind == "head_off":
        return questions.head_off(bundle, a.prepared, interventions(), off or attention_heads(bundle.config)[0]), None
    if kind == "no_mask":
        return questions.no_mask(load_shipped("base"), load_shipped("no_mask"), a.prepared), None
    if kind == "scaling":
        return questions.scaling(a, layer, head), None
    if kind == "look_ahead":
        return questions.look_ahead(a), None
    if kind == "pos_column":
        return questions.pos_column(a), None
    if kind == "head_zero":
        return questions.head_zero(bundle, a.prepared, interventions(), layer, head or 0), None
    raise ValueError(f"no question of kind {kind!r}")


def reveal() -> None:
    teacher_call(store().reveal)
