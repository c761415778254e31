"""The shared sidebar: sentence, model choice, interventions, and the badge that says what is off."""

from __future__ import annotations

import streamlit as st

from model.trace import attention_heads, describe_head
from model.transformer import Config
from ui.models import available_shipped, current_model
from ui.state import (
    CONTROLS_SHOWN,
    MODELS,
    TOGGLES,
    head_key,
    init_state,
    interventions,
    reset_interventions,
    sync_query_params,
)
from ui.study import session as study
from ui.style import PRESENTER_KEY, inject_script


def head_keys(cfg: Config) -> list[str]:
    """Every head of the model (`model.trace.attention_heads`), as the state's strings ("enc.0.self_attn:2")."""
    return [head_key(m, h) for m, h in attention_heads(cfg)]


def head_label(key: str) -> str:
    """A head's state string as its picker's option: "encoder L0 self-attn · head 2"."""
    module, _, head = key.partition(":")
    return describe_head(module, int(head), short=True)


def settle_shared() -> list[str]:
    """Keep the shared keys within what this session can show: a model it has (else the trained one), heads
    the model has. Returns the model's heads."""
    ss = st.session_state
    if ss["model"] not in model_options():
        ss["model"] = "base"
    heads = head_keys(current_model().bundle.config)
    ss["heads_off"] = [h for h in ss["heads_off"] if h in heads]
    return heads


def model_options() -> list[str]:
    return [*available_shipped(), *(["mine"] if st.session_state.get("my_model") is not None else [])]


def render_sidebar(shared: bool = True) -> None:
    """The sidebar. `shared` False: a student who follows a class, whose sentence, model and switches are the
    teacher's; they are shown in one line above the page instead (ui/classroom/panels.py), which redraws with
    the page alone when the teacher changes them."""
    init_state()
    ss = st.session_state
    ss[CONTROLS_SHOWN] = shared
    for notice in ss.pop("_notices", []):
        st.toast(notice, icon=":material/link_off:")
    with st.sidebar:
        if shared:
            shared_controls()
        else:
            st.caption(
                ":material/cast_for_education: While you follow, the sentence, the model and the switches "
                "are your teacher's: they are shown above the page. “Explore on my own” gives you the "
                "controls, starting from the teacher's."
            )
        st.divider()
        st.toggle(
            "Presenter mode (large text)",
            key=PRESENTER_KEY,
            help="Larger text and charts for a projector; also `?presenter=1` in the address.",
        )
    inject_script()
    sync_query_params()


def shared_controls() -> None:
    """The sentence, the model, and what is switched off (in the sidebar)."""
    heads = settle_shared()
    st.text_input(
        "Your sentence",
        key="sentence",
        placeholder="e.g. i am a student",
        help="English words from the toy set. Press Enter to apply.",
    )
    st.radio("Model", model_options(), key="model", format_func=MODELS.get)
    st.markdown("**Switch parts off**")
    locked = study.view_only()  # a study's view-only condition (ui/study/session.py)
    for key, (_, _, label) in TOGGLES.items():
        st.toggle(label, key=key, disabled=locked)
    st.multiselect(
        "Heads switched off",
        heads,
        key="heads_off",
        format_func=head_label,
        placeholder="all heads on",
        disabled=locked,
    )
    iv = interventions()
    if iv.active:
        st.badge(f"{len(iv.describe())} intervention(s) active", icon=":material/warning:", color="orange")
        st.caption("; ".join(iv.describe()))
        st.button("Reset: switch everything back on", on_click=reset_interventions, key="reset_iv")
    else:
        st.caption("The model as trained: nothing switched off.")
