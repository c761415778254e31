"""Causal tracing: which part of the model carries the difference between two sentences one word apart.

A page of its own, not a section of the attention pages: it patches the encoder, the encoder-decoder heads and
the decoder alike (every part the walkthrough has met by now), its four grids need the room, and it works on
any pair a reader types. The coreference sections (self-attention page, lesson step 19) show its summary at
the pronoun and link here.
"""

from __future__ import annotations

import streamlit as st

from explain.coref import partner
from model.examples import COREFERENCE, COREFERENCE_WIDE
from model.trace import attention_modules
from pages.content import tracing as text
from ui import shell
from ui import tracing as ut
from ui.models import analysis, current_model
from ui.widgets import intro, next_link, notice, reference_box, require_sentence, section, sentence_header
from viz import tracing as vt

shell.enter(__file__)  # first: re-enter through app.py if Streamlit ran this page bare

P = "tracing_"


def _load_pair() -> None:
    st.session_state["sentence"] = COREFERENCE
    st.session_state[f"{P}other"] = COREFERENCE_WIDE
    st.session_state[f"{P}other_for"] = COREFERENCE


st.title("Causal tracing: where the model carries a difference")
intro(text.INTRO)
st.latex(text.SHARE_LATEX)
st.markdown(text.SHARE)

a = analysis()
require_sentence(a)
sentence_header(a)
cfg = current_model().bundle.config
st.button("Load the coreference pair (“…too tired” / “…too wide”)", on_click=_load_pair, key=f"{P}load")
other = reference_box(
    text.OTHER, f"{P}other", a.prepared.text, lambda: partner(" ".join(a.prepared.tokens)) or "", text.OTHER_HELP
)
if not other.strip():
    st.info(text.EMPTY_OTHER)
    st.stop()
p = ut.pair(a.prepared.text, other)
if isinstance(p, str):
    st.warning(p)
    st.stop()
if a.interventions.active:
    st.caption(text.SWITCHES)
position = ut.follow(p, text.FOLLOW)
p = ut.pair(a.prepared.text, other, position)
notice(vt.pair_notice(p))
if p.traceable:
    ut.show_tracing(p, text)
    section("One head, part by part", text.HEAD)
    ut.show_head(p, attention_modules(cfg), cfg.n_heads)

next_link(__file__)
