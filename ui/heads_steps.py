"""The Multi-head attention page's sections: every head of a layer side by side (each with its switch), one
word's weights in every head, the heads concatenated and multiplied by W_O, and what switching heads off changes
(the translation, its probabilities, the attention output). `text` is the page's prose
(pages/content/multi_head.py); widget keys start with the page's prefix.
"""

from __future__ import annotations

from types import ModuleType

import streamlit as st

from model.pipeline import Analysis
from model.trace import Interventions
from model.transformer import Config
from ui.classroom.plans import hidden_head, mystery_box
from ui.models import analysis, teacher_forced
from ui.state import set_head
from ui.style import presenter
from ui.widgets import chart, exact_numbers, figure, fold, md, notice, once, section, small_table
from viz import heads as vh
from viz.attention import dims
from viz.heads import block_figure, head_figure
from viz.heatmap import table

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
            st.markdown(
                f"**Concat(Z_1 … Z_{H})** · shape `[{T}, {D}]` — heads side by side, borders marked"
                + (f"; heads {', '.join(map(str, off))} are off (all zeros)" if off else "")
            )
            chart(block_figure(concat, y_labels, H, off=off), key=f"{P}concat", config=NO_BAR)
            notice(vh.concat_notice(concat, H, off))
            st.markdown(f"**Concat · W_O** · shape `[{T}, {D}]` — every output dimension mixes the heads")
            chart(block_figure(out, y_labels, 1), key=f"{P}out", config=NO_BAR)
            notice(vh.out_notice(concat, out, y_labels, off))
            exact_numbers(
                "Exact numbers: concat and output",
                f"{P}concat_numbers",
                [(concat, dims(D), y_labels), (out, dims(D), y_labels)],
            )


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
                section(
                    "Before: the unmodified model", f"**Translation:** {md(a0.translation) or '*(empty)*'}", level=3
                )
                small_table(vh.greedy_probs(a0), hide_index=True)
            with c2:
                section(
                    "After: with your interventions", f"**Translation:** {md(a.translation) or '*(empty)*'}", level=3
                )
                small_table(vh.greedy_probs(a), hide_index=True)
            st.caption(text.GREEDY_CAPTION)

            tf_before = teacher_forced(a0.translation, iv=Interventions())
            tf_after = teacher_forced(a0.translation)
            st.subheader("The same output tokens, scored by both")
            small_table(
                vh.compare_probs(tf_before.trace, tf_after.trace, tf_before.gold, tf_before.gold_labels),
                hide_index=True,
            )
            st.subheader(f"The attention output of {module}, before and after")
            out_labels = tf_before.in_labels if stack == "dec" else a.src_labels
            c1, c2 = st.columns(2)
            with c1:
                small_table(vh.output_change(tf_before.trace, tf_after.trace, module, out_labels), hide_index=True)
            with c2:
                st.markdown("‖z‖ of each head (after): a head that is off is 0 everywhere")
                small_table(vh.head_z_norms(tf_after.trace, module, out_labels))


def _toggle(module: str, head: int, key: str) -> None:
    set_head(module, head, bool(st.session_state[key]))


def check_key(module: str, head: int) -> str:
    return f"{P}on_{module}_{head}"


def heads_grid(
    a: Analysis, module: str, weights, labels: tuple[list[str], list[str]], mark: int | None, content: tuple
) -> None:
    """Every head's weights of attention module `module` ([H, Tq, Tk]; `labels`: keys, queries) in a grid, each with
    its on/off switch, row `mark` outlined; the notice, and the exact numbers folded. A lesson plan's mystery head
    is a box until the reveal, and while it is in this layer the notice is not shown (it would tell its pattern)."""
    x_labels, y_labels = labels
    H, off, mystery = weights.shape[0], a.interventions.heads_off_in(module), hidden_head()
    per_row = min(H, 2 if presenter() else 4)  # on a projector two heads a row: each large enough to read
    for start in range(0, H, per_row):
        row = list(range(start, min(start + per_row, H)))
        first = next((h for h in row if mystery != (module, h)), None)  # writes the row's query words
        cols = st.columns([1.5] + [1] * (per_row - 1) if per_row > 1 else 1)  # the first's words take room
        for h, col in zip(row, cols, strict=False):
            with col:
                if mystery == (module, h):
                    mystery_box(h, height=300)
                else:
                    once(
                        "multi_head.grid",
                        (*content, module, h, h == first, mark),
                        lambda h=h, first=first: chart(
                            head_figure(
                                weights[h],
                                x_labels,
                                y_labels,
                                h,
                                h in off,
                                height=300,
                                row_labels=h == first,
                                mark_row=mark,
                            ),
                            key=f"{P}grid_{h}",
                            config=NO_BAR,
                        ),
                    )
                key = check_key(module, h)
                st.session_state[key] = h not in off  # follow the shared state (the sidebar may have changed it)
                st.checkbox(
                    f"head {h} on",
                    key=key,
                    on_change=_toggle,
                    args=(module, h, key),
                    help="Switch this head off: its z becomes 0 before the concatenation.",
                )
    if mystery is None or mystery[0] != module:  # (the notice would tell the mystery head's pattern)
        once("multi_head.notice", (*content, module), lambda: notice(vh.heads_notice(weights, x_labels, off)))
    with fold("Exact weights of every head", f"{P}grid_numbers") as shown:
        if shown:
            for h in (h for h in range(H) if mystery != (module, h)):
                st.markdown(f"**head {h}**" + (" (off)" if h in off else ""))
                st.dataframe(table(weights[h], x_labels, y_labels))


def word_heads_section(weights, word: int, labels: tuple[list[str], list[str]], off, hidden: bool) -> None:
    """Where query `word` looks in every head (bars and a [H, Tk] grid), folded; not while the layer has a mystery
    head (`hidden`)."""
    x_labels, y_labels = labels
    H = weights.shape[0]
    with fold("Show this word's weights in every head", f"{P}fold_word") as shown:
        if shown and hidden:
            st.caption("Hidden while this layer has a mystery head: your teacher reveals it.")
        elif shown:
            rows = vh.word_heads(weights, word)  # [H, Tk]
            chart(
                vh.heads_bars_figure(rows, x_labels, (1, 2, 0) if H > 2 else (1, 0), off=off),
                key=f"{P}bars",
                config=NO_BAR,
            )
            figure(
                rows,
                x_labels,
                [f"head {h}" for h in range(H)],
                "weights",
                title=f"where {md(y_labels[word])} looks, per head",
                key=f"{P}word_heads",
                x_title="key",
                y_title="head",
                note=vh.word_heads_notice(rows, x_labels, y_labels[word]),
            )
