"""Predict, then reveal: the teacher's questions, made from what the teacher shows and answered by the model
(explain/questions.py), asked through the class store with the teacher's secret (ui/classroom/session.py)."""

from __future__ import annotations

from explain import questions as Q
from ui.classroom.session import ASKED, notify, ss, store
from ui.classroom.teacher import teacher_call
from ui.models import analysis, current_model, load_shipped
from ui.state import interventions


def make_question(kind: str, layer: int = 0, head: int | None = None, position: int | None = None,
                  off: tuple[str, int] | None = None) -> Q.Question:
    """A question about the teacher's current sentence, model and interventions, answered by that model."""
    a, bundle = analysis(), current_model().bundle
    if kind == "attention":
        return Q.attention(a, layer, head)
    if kind == "next_word":
        return Q.next_word(a, bundle.tgt_vocab.itos, position)
    if kind == "head_off":
        return Q.head_off(bundle, a.prepared, interventions(), off or Q.all_heads(bundle)[0])
    if kind == "no_mask":
        return Q.no_mask(load_shipped("base"), load_shipped("no_mask"), a.prepared)
    raise ValueError(f"no question of kind {kind!r}")


def ask(q: Q.Question) -> int | None:
    """Ask the class `q` (replaces the open question); returns its id."""
    qid = teacher_call(store().ask, q.text, list(q.options), q.answer)
    if qid is not None:
        ss()[ASKED] = (qid, q)
    return qid


def ask_new(kind: str, params: dict) -> None:
    """Callback of the Ask button: a question of `kind` from the teacher's current state."""
    try:
        ask(make_question(kind, **params))
    except ValueError as e:
        notify(str(e))


def reveal() -> None:
    teacher_call(store().reveal)
