"""Shared by tests/test_class_store.py and tests/test_class_store_admission.py: a class's state as a teacher
sends it, a question, and student ids."""

from __future__ import annotations

STATE = {
    "page": "positional",
    "sentence": "i am a student",
    "model": "base",
    "heads_off": ["enc.0.self_attn:2"],
    "iv_look_ahead": True,
    "iv_padding": True,
    "iv_scale": False,
    "iv_pos": True,
    "lesson": "attention",
    "step": 3,
}
Q = ("Which word does 'it' attend to most?", ["animal", "street", "tired"], 0)


def sid(n: int = 0) -> str:
    return f"student-{n:04d}"
