"""The Positional encoding page's longer sections: 1, the formula with real numbers; the two layouts of the table
side by side; 4 and 5, each a fragment (its own widgets rerun only it): PE(pos + k) as a rotation of PE(pos), and
word order with the encoding switched off. `text` is the page's prose
(pages/content/positional.py).
"""

from __future__ import annotations

import functools
from types import ModuleType

import streamlit as st

from explain.positional import block, float64_shift_error, rotation, worked
from model.pipeline import Analysis, token_labels
from model.vocab import EOS
from ui.models import content_key, current_model, permutation_checks
from ui.widgets import figure, fold, md, notice, once, section, small_table
from viz import positional as vp
from viz.heatmap import shape_text, table
from viz.positional import ORDERS, clamp, make_order, shift_check


def formula_section(ref: Analysis, pe_table, text: ModuleType) -> int:
    """Section 1: the formula, then one position and pair index i with real numbers, from the formula, the model's
    PE buffer (`pe_table`, [max_len, D]) and the trace of `ref` (the unmodified model on the sentence). Returns the
    pair index chosen (section 4 uses it)."""
    L, D = pe_table.shape
    T = ref.trace["src.pos"].shape[1]
    st.header("1. The formula")
    st.latex(text.FORMULA)
    st.markdown(text.pairs(D))
    st.subheader("With numbers")
    c1, c2 = st.columns(2)
    pos = int(c1.number_input("Position pos", 0, L - 1, clamp(3, 0, L - 1), key="positional_pos"))
    i = int(
        c2.number_input(
            f"Pair index i (dimensions 2i, 2i+1; 0-{D // 2 - 1})",
            0,
            D // 2 - 1,
            clamp(1, 0, D // 2 - 1),
            key="positional_i",
        )
    )
    traced = ref.trace["src.pos"][0]

    def with_numbers() -> None:
        w = worked(pos, i, pe_table)
        st.latex(
            rf"\text{{angle}} = \frac{{{pos}}}{{10000^{{2 \cdot {i} / {D}}}}} "
            rf"= \frac{{{pos}}}{{10000^{{{w.exponent:.5f}}}}} = \frac{{{pos}}}{{{w.denominator:.5f}}} "
            rf"= {w.angle:.6f}"
        )
        st.latex(
            rf"PE_{{({pos},\,{2 * i})}} = \sin({w.angle:.6f}) = {w.sin:.6f}, \qquad "
            rf"PE_{{({pos},\,{2 * i + 1})}} = \cos({w.angle:.6f}) = {w.cos:.6f}"
        )
        rows = {"formula (float64)": [w.sin, w.cos], "the model's PE buffer (float32)": [w.buffer_sin, w.buffer_cos]}
        if pos < T:
            rows["traced src.pos of your sentence"] = [float(traced[pos, 2 * i]), float(traced[pos, 2 * i + 1])]
        small_table(
            table([v for v in rows.values()], [f"PE({pos}, {2 * i})", f"PE({pos}, {2 * i + 1})"], list(rows), digits=7),
            digits=7,
        )
        st.caption(
            f"Largest difference between the formula and the model's buffer here: {w.error:.1e} "
            "(float32 rounding)."
            + ("" if pos < T else f" Your sentence has only {T} positions, so the trace has no row {pos}.")
        )

    # (drawn once per content and replayed, ui.widgets.once: a class follows the same position of the same sentence;
    # `ref` is the unmodified model on the sentence)
    once("positional.numbers", (*content_key(ref), pos, i), with_numbers)
    return i


def layouts_section(pe_table, dims: list[str], text: ModuleType) -> None:
    """The PE table interleaved (the paper, this model) and in two halves (the Illustrated Transformer), folded."""
    L, D = pe_table.shape
    section("Interleaved or in two halves?", text.LAYOUTS, level=3)
    with fold("Show both layouts side by side", "positional_fold_layouts") as shown:
        if shown:
            rows_shown = [str(q) for q in range(min(L, 32))]
            c1, c2 = st.columns(2)
            with c1:
                figure(
                    pe_table[: len(rows_shown)],
                    dims,
                    rows_shown,
                    "encoding",
                    title="interleaved: sin, cos, sin, cos, … (paper, this model)",
                    key="positional_interleaved",
                    numbers=False,
                )
            with c2:
                figure(
                    vp.concatenated(pe_table[: len(rows_shown)]),
                    dims,
                    rows_shown,
                    "encoding",
                    title="halves: all sin, then all cos (Illustrated Transformer)",
                    key="positional_halves",
                    numbers=False,
                )
            notice(vp.layouts_notice(pe_table))


@st.fragment
def shift(pe_table, D: int, L: int, i: int, dims: list[str], text: ModuleType) -> None:
    """Section 4: the offset k's rotation M_k, checked on every position of the model's PE table."""
    section("4. PE(pos + k) is a linear function of PE(pos)", text.ROTATION)
    k = int(st.number_input("Offset k", 0, L - 1, clamp(2, 0, L - 1), key="positional_k"))
    b = block(k, i, D)
    st.latex(text.ROTATION_LATEX)
    st.latex(
        rf"k = {k},\ i = {i}: \quad \begin{{pmatrix}} {b[0, 0]:.5f} & {b[0, 1]:.5f} \\ {b[1, 0]:.5f} & "
        rf"{b[1, 1]:.5f} \end{{pmatrix}}, \qquad M_k = \mathrm{{diag}}(B_0, B_1, \dots, B_{{{D // 2 - 1}}})"
        rf"\in \mathbb{{R}}^{{{D} \times {D}}}"
    )
    with fold("Show M_k's top-left corner as a heatmap", "positional_fold_M") as shown:
        if shown:
            M = rotation(k, D)
            figure(
                M[:8, :8],
                dims[:8],
                dims[:8],
                "encoding",
                shape=f"[{D}, {D}]",
                key="positional_M",
                digits=3,
                title=f"M_{k}, top-left 8 × 8 corner (2 × 2 blocks, zeros elsewhere)",
                numbers=False,
                note=vp.rotation_notice(M, k, i),
            )
    checks = functools.cache(lambda: shift_check(pe_table, k))  # (the model's PE buffer and k: computed when drawn)
    c1, c2 = st.columns([1, 2])
    with c1:
        once(
            "positional.shift",
            (current_model().key, k),
            lambda: (
                st.metric(f"Largest error over all {len(checks())} positions", f"{checks().iloc[:, 2].max():.1e}"),
                st.caption(text.shift_caption(float64_shift_error(L, D, k))),
            ),
        )
    with c2:
        with fold("Every position, row by row", "positional_checks") as shown:
            if shown:
                small_table(checks(), hide_index=True, height=240)


@st.fragment
def word_order(a, ref, dims: list[str], text: ModuleType) -> None:
    """Section 5: the sentence permuted, the encoder's outputs and translations with PE off and on."""
    st.header("5. Switch it off: word order stops mattering")
    n = len(a.prepared.tokens)
    c1, c2 = st.columns(2)
    how = c1.selectbox("Permute the words", ORDERS, key="positional_order")
    seed = int(c2.number_input("Shuffle seed", 0, 10_000, 0, key="positional_seed", disabled=how != "shuffled"))
    order = make_order(n, how, seed)
    perm_tokens = [a.prepared.tokens[j] for j in order]
    st.markdown(
        "**Permuted sentence:** "
        + " ".join(f":orange-background[{md(t)}]" for t in perm_tokens)
        + " :gray-background[<eos>]"
    )
    checks = functools.cache(lambda: permutation_checks(ref.trace["src.tokens"][0], order))  # (computed when drawn)
    if n < 2:
        st.info("With a single word there is nothing to permute: type a longer sentence.")

    def compared() -> None:
        off, on = checks()
        c1, c2 = st.columns(2)
        for col, check, label in ((c1, off, "Positional encoding OFF"), (c2, on, "Positional encoding ON")):
            with col:
                st.subheader(label)
                st.metric("max |encoder outputs − permuted outputs, put back in order|", f"{check.max_diff:.1e}")
                st.markdown(
                    f"**Translation:** {md(check.translation) or '*(empty)*'}  \n"
                    f"**Translation of the permuted sentence:** {md(check.translation_perm) or '*(empty)*'}"
                )
        st.markdown(text.order_blind(off.translation == off.translation_perm, off.max_diff))

    once("positional.order", (*content_key(ref), tuple(order)), compared)
    with fold("Show the encoder outputs without PE, in both orders", "positional_fold_off") as shown:
        if shown:
            off, _ = checks()
            perm_labels = token_labels([*perm_tokens, EOS])
            c1, c2 = st.columns(2)
            with c1:
                figure(
                    off.enc[:, :16],
                    dims[:16],
                    ref.src_labels,
                    "activations",
                    title="PE off: enc.out, your sentence",
                    key="positional_enc_off",
                    numbers=False,
                    shape=shape_text(off.enc, "T, D") + ", first 16 dims",
                )
            with c2:
                figure(
                    off.enc_perm[:, :16],
                    dims[:16],
                    perm_labels,
                    "activations",
                    title="PE off: enc.out, permuted",
                    shape=shape_text(off.enc_perm, "T, D") + ", first 16 dims",
                    key="positional_enc_off_perm",
                    numbers=False,
                )
            notice(vp.permuted_notice(off.enc, off.enc_perm, off.order, ref.src_labels))
