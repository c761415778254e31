"""Cached computations for "Before the Transformer" (pages/before.py).

The shipped recurrent model (assets/checkpoints/rnn) is loaded once per server and shared read-only,
like the shipped Transformers in ui/models.py. `view()` is the page's one call: the sentence through
the recurrent model (greedy translation, then one traced teacher-forced pass over it) next to the same
sentence through the Transformer chosen in the sidebar. `comparison()` reads the measured comparison
shipped in assets/rnn_comparison.json (written by `python -m bench.bench_rnn --write`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from model import checkpoint, pipeline
from model.checkpoint import Bundle
from ui.models import analysis, used_text
from ui.session_cache import session_cache
from ui.state import init_state

RNN_STEM = checkpoint.ASSETS / "checkpoints" / "rnn"
# The shipped recurrent models, by attention form (both GRU, same data and recipe: `python -m model.train
# --arch rnn [--attention qkv] --out ...`). "additive" is the one the measurements use.
RNN_MODELS = {"additive": RNN_STEM, "qkv": checkpoint.ASSETS / "checkpoints" / "rnn_qkv"}
RNN_LABELS = {"additive": "additive attention (Bahdanau et al.)", "qkv": "key/query/value attention (the lecture)"}
COMPARISON = checkpoint.ASSETS / "rnn_comparison.json"
STATE_KEY = "before_attention"  # st.session_state: the attention form chosen on the page


def available() -> list[str]:
    return [k for k, stem in RNN_MODELS.items() if stem.with_name(stem.name + ".safetensors").is_file()]


@st.cache_resource(show_spinner="Loading the recurrent model…")
def rnn_bundle(kind: str = "additive") -> Bundle:
    return checkpoint.load(RNN_MODELS[kind])


def rnn_key(bundle: Bundle) -> str:
    return f"rnn:{bundle.meta.get('weights_sha256', '')[:16]}"


@session_cache(max_entries=256)
def _rnn_analysis(model_key: str, text: str, _bundle: Bundle) -> pipeline.Analysis:
    return pipeline.analyse(_bundle, pipeline.prepare(_bundle, text))


@dataclass(frozen=True)
class RnnView:
    rnn: pipeline.Analysis  # trace: rnn.* (see model/rnn.py)
    transformer: pipeline.Analysis  # trace: enc.*, dec.* of the sidebar's Transformer
    bundle: Bundle  # the recurrent model

    @property
    def cell(self) -> str:
        return self.bundle.config.cell

    @property
    def attention(self) -> str:
        return self.bundle.config.attention


def view(kind: str = "additive") -> RnnView:
    """The sidebar's sentence through the recurrent model with `kind` attention and through the current
    Transformer."""
    init_state()
    bundle = rnn_bundle(kind if kind in RNN_MODELS else "additive")
    text = st.session_state["sentence"]
    return RnnView(_rnn_analysis(rnn_key(bundle), used_text(text), bundle), analysis(), bundle)


@st.cache_resource
def _comparison(path: str, mtime: float) -> dict:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def comparison_key() -> tuple[str, float] | None:
    """What names the shipped measurements' content (the file and its modification time), or None when it is missing."""
    return (str(COMPARISON), COMPARISON.stat().st_mtime) if COMPARISON.is_file() else None


def comparison() -> dict | None:
    """The shipped measurements, or None when the file is missing."""
    key = comparison_key()
    return None if key is None else _comparison(*key)
