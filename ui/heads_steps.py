"""The Multi-head attention page's later sections: the heads concatenated and multiplied by W_O, and what switching
heads off changes (the translation, its probabilities, the attention output). `text` is the page's prose
(pages/content/multi_head.py); widget keys start with the page's prefix.
"""

from __future__ import annotations

from types import ModuleType

import streamlit as st

from model.pipeline import Analysis
from model.trace import Interventions
from model.transformer import Config
from ui.models import analysis, teacher_forced
from ui.widgets import chart, exact_numbers, fold, md, notice, section, small_table
from viz import heads as vh
from viz.attention import dims
from viz.heads import block_figure

P = "multi_head_"  # widget key prefix (the page's)
NO_BAR = {"displayModeBar": False}


def concat_section(a: Analysis, cfg: Config, module: str, y_labels: list[str], off, text: ModuleType) -> None:
    """Concat(Z_1 ... Z_H), then Concat · W_O, of attention module `module` (heads `off` switched off)."""
    st.header("Concatenate the heads, multiply by W_O")
    H, D, d_k, T = cfg.n_heads, cfg.d_model, cfg.d_k, len(y_labels)
    st.latex(text.concat_latex(H, T, d_k, D))
    with fold("Show Concat(Z_1 … Z_H) and Concat · W_O", f"{P}fold_concat") as shown:
        if shown:
            concat, out = a.trace[f"{module}.concat"][0], a.trace[f"{module}.out"][0]
            st.markdown(f"**Concat(Z_1 … Z_{H})** · shape `[{T}, {D}]` — heads side by side, borders marked"
                        + (f"; heads {', '.join(map(str, off))} are off (all zeros)" if off else ""))
            chart(block_figure(concat, y_labels, H, off=off), key=f"{P}concat", config=NO_BAR)
            notice(vh.concat_notice(concat, H, off))
            st.markdown(f"**Concat · W_O** · shape `[{T}, {D}]` — every output dimension mixes all heads")
            chart(block_figure(out, y_labels, 1), key=f"{P}out", config=NO_BAR)
            notice(vh.out_notice(concat, out, y_labels))
            exact_numbers("Exact numbers: concat and output", f"{P}concat_numbers",
                          [(concat, dims(D), y_labels), (out, dims(D), y_labels)])


def switch_off_section(a: Analysis, module: str, stack: str, text: ModuleType) -> None:
    """The heads switched off (the sidebar's and the page's), and the translation and scores before and after."""
    section("Switch heads off", text.SWITCH_OFF)
    if not a.interventions.heads_off:
        st.info(text.ALL_ON)
    else:
        st.warning("Switched off: " + "; ".join(a.interventions.describe()))
    with fold("Show the translation and the probabilities before and after", f"{P}fold_off") as shown:
        if shown:
            a0 = analysis(iv=Interventions())
            c1, c2 = st.columns(2)
            with c1:
                section("Before: the unmodified model", f"**Translation:** {md(a0.translation) or '*(empty)*'}",
                        level=3)
                small_table(vh.greedy_probs(a0), hide_index=True)
            with c2:
                section("After: with your interventions", f"**Translation:** {md(a.translation) or '*(empty)*'}",
                        level=3)
                small_table(vh.greedy_probs(a), hide_index=True)
            st.caption(text.GREEDY_CAPTION)

            tf_before = teacher_forced(a0.translation, iv=Interventions())
            tf_after = teacher_forced(a0.translation)
            st.subheader("The same output tokens, scored by both")
            small_table(vh.compare_probs(tf_before.trace, tf_after.trace, tf_before.gold, tf_before.gold_labels),
                        hide_index=True)
            st.subheader(f"The attention output of {module}, before and after")
            out_labels = tf_before.in_labels if stack == "dec" else a.src_labels
            c1, c2 = st.columns(2)
            with c1:
                small_table(vh.output_change(tf_before.trace, tf_after.trace, module, out_labels), hide_index=True)
            with c2:
                st.markdown("‖z‖ of each head (after): a head that is off is 0 everywhere")
                small_table(vh.head_z_norms(tf_after.trace, module, out_labels))
