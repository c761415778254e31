"""The shared sidebar: sentence, model choice, interventions, and the badge that says what is off."""

from __future__ import annotations

import streamlit as st

from model.trace import attention_modules
from model.transformer import Config
from ui.models import available_shipped, current_model
from ui.state import MODELS, TOGGLES, head_key, init_state, interventions, reset_interventions, sync_query_params
from ui.style import PRESENTER_KEY, inject_script


def all_heads(cfg: Config) -> list[str]:
    """Every head of the model, as state strings: encoder self-attention, decoder self- and cross-attention."""
    return [head_key(m, h) for m in attention_modules(cfg) for h in range(cfg.n_heads)]


def head_label(key: str) -> str:
    module, _, head = key.partition(":")
    stack, layer, kind = module.split(".")
    where = {"enc": "encoder", "dec": "decoder"}[stack]
    what = {"self_attn": "self-attn", "cross_attn": "cross-attn"}[kind]
    return f"{where} L{layer} {what} · head {head}"


def render_sidebar() -> None:
    init_state()
    ss = st.session_state
    for notice in ss.pop("_notices", []):
        st.toast(notice, icon=":material/link_off:")
    with st.sidebar:
        st.text_input("Your sentence", key="sentence", placeholder="e.g. i am a student",
                      help="English words from the toy set. Press Enter to apply.")
        options = [*available_shipped(), *(["mine"] if ss.get("my_model") is not None else [])]
        if ss["model"] not in options:
            ss["model"] = "base"
        st.radio("Model", options, key="model", format_func=MODELS.get)
        cfg = current_model().bundle.config
        st.markdown("**Switch parts off**")
        for key, (_, _, label) in TOGGLES.items():
            st.toggle(label, key=key)
        heads = all_heads(cfg)
        ss["heads_off"] = [h for h in ss["heads_off"] if h in heads]
        st.multiselect("Heads switched off", heads, key="heads_off", format_func=head_label,
                       placeholder="all heads on")
        iv = interventions()
        if iv.active:
            st.badge(f"{len(iv.describe())} intervention(s) active", icon=":material/warning:", color="orange")
            st.caption("; ".join(iv.describe()))
            st.button("Reset: switch everything back on", on_click=reset_interventions, key="reset_iv")
        else:
            st.caption("The model as trained: nothing switched off.")
        st.divider()
        st.toggle("Presenter mode (large text)", key=PRESENTER_KEY,
                  help="Larger text and charts for a projector; also `?presenter=1` in the address.")
    inject_script()
    sync_query_params()
