"""Which model a page uses, loaded once per server, and the cached analysis of a sentence.

The shipped checkpoints are loaded with `st.cache_resource`: one copy per server process, shared
read-only by every session (the model is in eval mode with gradients off, and a forward pass never
stores anything on it). A session's own model lives in its `st.session_state` only.

Heavy work is cached with `st.cache_data` keyed on (model key, sentence, interventions): the model
key names the weights (the shipped file's hash, or a per-session random id), so two sessions only
ever share a cache entry when they use the very same shipped weights.
"""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from model import checkpoint, pipeline
from model.checkpoint import Bundle
from model.trace import Interventions
from ui.state import init_state, interventions

SHIPPED = {"base": checkpoint.SHIPPED, "no_mask": checkpoint.SHIPPED_NO_MASK}


@st.cache_resource(show_spinner="Loading the model…")
def load_shipped(name: str) -> Bundle:
    return checkpoint.load(SHIPPED[name])


def available_shipped() -> list[str]:
    """The shipped checkpoints present on disk ("base" first)."""
    return [name for name, stem in SHIPPED.items() if stem.with_suffix(".safetensors").is_file()]


@dataclass(frozen=True)
class Current:
    bundle: Bundle
    key: str  # cache key naming these weights
    label: str


def current_model() -> Current:
    """The model chosen in the sidebar (the shipped one when the choice is unavailable)."""
    init_state()
    ss = st.session_state
    if ss["model"] == "mine" and ss.get("my_model") is not None:
        return Current(ss["my_model"], ss["my_model_key"], "my model")
    name = ss["model"] if ss["model"] in available_shipped() else "base"
    bundle = load_shipped(name)
    return Current(bundle, f"{name}:{bundle.meta.get('weights_sha256', '')[:16]}", name)


@st.cache_data(max_entries=512, show_spinner=False)
def _analyse(model_key: str, text: str, iv: Interventions, _bundle: Bundle) -> pipeline.Analysis:
    return pipeline.analyse(_bundle, pipeline.prepare(_bundle, text), iv)


def analysis(iv: Interventions | None = None, text: str | None = None) -> pipeline.Analysis:
    """The current sentence through the current model under the current (or given) interventions."""
    cur = current_model()
    text = st.session_state["sentence"] if text is None else text
    return _analyse(cur.key, text, interventions() if iv is None else iv, cur.bundle)


@st.cache_data(max_entries=256, show_spinner=False)
def _teacher_forced(model_key: str, text: str, target: str, iv: Interventions,
                    _bundle: Bundle) -> pipeline.TeacherForced:
    return pipeline.teacher_forced(_bundle, pipeline.prepare(_bundle, text), target, iv)


def teacher_forced(target: str, iv: Interventions | None = None) -> pipeline.TeacherForced:
    cur = current_model()
    return _teacher_forced(cur.key, st.session_state["sentence"], target,
                           interventions() if iv is None else iv, cur.bundle)


@st.cache_data(max_entries=256, show_spinner=False)
def _beam(model_key: str, text: str, k: int, alpha: float, iv: Interventions, _bundle: Bundle):
    return pipeline.beam(_bundle, pipeline.prepare(_bundle, text), k, alpha, iv)


def beam(k: int, alpha: float = 0.6, iv: Interventions | None = None):
    cur = current_model()
    return _beam(cur.key, st.session_state["sentence"], k, alpha, interventions() if iv is None else iv, cur.bundle)
