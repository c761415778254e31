"""Shared by tests/test_notice_rules.py and tests/test_notice_rules_pages.py: the toy set's held-out sentences, the
shipped model, and every held-out sentence through it (computed once per test process)."""

from __future__ import annotations

from functools import cache

from model import checkpoint, pipeline
from model.data import load_dataset

HELD = load_dataset()["heldout"]


@cache
def bundle():
    return checkpoint.load(checkpoint.SHIPPED)


@cache
def analyses() -> tuple[pipeline.Analysis, ...]:
    """Every held-out sentence through the shipped model (about 600; 10-20 s once per session)."""
    b = bundle()
    return tuple(pipeline.analyse(b, pipeline.prepare(b, p.src)) for p in HELD)


def w(label: str) -> str:
    return label.split(" ", 1)[1] if " " in label and label.split(" ", 1)[0].isdigit() else label
