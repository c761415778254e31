"""Positional encoding: the formula with real numbers, the table, PE(pos+k) = M_k PE(pos), word order."""


import streamlit as st

from model.trace import Interventions
from pages.content import positional as text
from ui import shell
from ui.models import analysis, content_key, current_model
from ui.positional_steps import shift, word_order
from ui.state import interventions
from ui.widgets import (
    chart,
    figure,
    fold,
    md,
    next_link,
    notice,
    once,
    require_sentence,
    section,
    sentence_header,
    small_table,
)
from viz import positional as vp
from viz.heatmap import shape_text, table
from viz.positional import clamp, curves_figure, worked

shell.enter(__file__)  # first: re-enter through app.py if Streamlit ran this page bare


st.title("Positional encoding")
st.markdown(text.INTRO)

a = analysis()
require_sentence(a)
cur = current_model()
bundle, cfg = cur.bundle, cur.bundle.config
D, L = cfg.d_model, cfg.max_len
pe_table = bundle.model.src_embed.pe  # [max_len, D], the model's own buffer
ref = analysis(iv=Interventions())  # the unmodified model: src.pos is recorded even when PE is switched off
T = ref.trace["src.pos"].shape[1]
dims = [f"d{j}" for j in range(D)]

sentence_header(a, show_translation=False)
if not interventions().positional_encoding:
    st.warning(text.PE_OFF)

st.header("1. The formula")
st.latex(text.FORMULA)
st.markdown(text.pairs(D))
st.subheader("With numbers")
c1, c2 = st.columns(2)
pos = int(c1.number_input("Position pos", 0, L - 1, clamp(3, 0, L - 1), key="positional_pos"))
i = int(c2.number_input(f"Pair index i (dimensions 2i, 2i+1; 0-{D // 2 - 1})", 0, D // 2 - 1, clamp(1, 0, D // 2 - 1),
                        key="positional_i"))
traced = ref.trace["src.pos"][0]


def with_numbers() -> None:
    w = worked(pos, i, pe_table)
    st.latex(rf"\text{{angle}} = \frac{{{pos}}}{{10000^{{2 \cdot {i} / {D}}}}} "
             rf"= \frac{{{pos}}}{{10000^{{{w.exponent:.5f}}}}} = \frac{{{pos}}}{{{w.denominator:.5f}}} = {w.angle:.6f}")
    st.latex(rf"PE_{{({pos},\,{2 * i})}} = \sin({w.angle:.6f}) = {w.sin:.6f}, \qquad "
             rf"PE_{{({pos},\,{2 * i + 1})}} = \cos({w.angle:.6f}) = {w.cos:.6f}")
    rows = {"formula (float64)": [w.sin, w.cos], "the model's PE buffer (float32)": [w.buffer_sin, w.buffer_cos]}
    if pos < T:
        rows["traced src.pos of your sentence"] = [float(traced[pos, 2 * i]), float(traced[pos, 2 * i + 1])]
    small_table(table([v for v in rows.values()], [f"PE({pos}, {2 * i})", f"PE({pos}, {2 * i + 1})"], list(rows),
                      digits=7), digits=7)
    st.caption(f"Largest difference between the formula and the model's buffer here: {w.error:.1e} "
               "(float32 rounding)." + ("" if pos < T else f" Your sentence has only {T} positions, so the trace "
                                                            f"has no row {pos}."))


# (drawn once per content and replayed, ui.widgets.once: a class follows the same position of the same sentence;
# `ref` is the unmodified model on the sentence)
once("positional.numbers", (*content_key(ref), pos, i), with_numbers)

st.header("2. The encoding of your sentence")
figure(traced, dims, ref.src_labels, "encoding", title="src.pos: PE rows added to the embeddings",
       shape=shape_text(ref.trace["src.pos"], "1, T, D"), key="positional_sentence", x_title="dimension",
       y_title="position", note=vp.sentence_notice(traced))
st.caption(text.SENTENCE_CAPTION)
st.subheader(f"Every position the model accepts (0-{L - 1})")
with fold("Show the whole PE table", "positional_fold_all") as shown:
    if shown:
        figure(pe_table, dims, [str(q) for q in range(L)], "encoding", title="The model's PE table",
               shape=shape_text(pe_table, "max_len, D"), key="positional_all", x_title="dimension", y_title="position",
               note=vp.table_notice(pe_table))

section("Interleaved or in two halves?", text.LAYOUTS, level=3)
with fold("Show both layouts side by side", "positional_fold_layouts") as shown:
    if shown:
        rows_shown = [str(q) for q in range(min(L, 32))]
        c1, c2 = st.columns(2)
        with c1:
            figure(pe_table[: len(rows_shown)], dims, rows_shown, "encoding",
                   title="interleaved: sin, cos, sin, cos, … (paper, this model)", shape=f"[{len(rows_shown)}, {D}]",
                   key="positional_interleaved", numbers=False)
        with c2:
            figure(vp.concatenated(pe_table[: len(rows_shown)]), dims, rows_shown, "encoding",
                   title="halves: all sin, then all cos (Illustrated Transformer)", shape=f"[{len(rows_shown)}, {D}]",
                   key="positional_halves", numbers=False)
        notice(vp.layouts_notice(pe_table))

# Sections 3-5 are fragments: their own widgets (dimensions, offset k, permutation) rerun only their section. A
# new sentence, model or intervention, and the pair index i of section 1 (used in section 4), rerun the page.
@st.fragment
def one_dimension(pe_table, D: int) -> None:
    st.header("3. One dimension across positions")
    chosen = st.multiselect("Dimensions", list(range(D)), default=vp.default_dims(D), key="positional_dims")
    if chosen:
        once("positional.curves", (current_model().key, tuple(chosen)), lambda: (  # the model's PE, these dimensions
            chart(curves_figure(pe_table, chosen), key="positional_curves", config={"displayModeBar": False}),
            notice(vp.curves_notice(pe_table, chosen))))
    else:
        st.info("Pick at least one dimension.")


one_dimension(pe_table, D)
shift(pe_table, D, L, i, dims, text)
word_order(a, ref, dims, text)


def switched() -> None:  # (the analysis without PE is made, or copied, only when this is drawn)
    pe_off = analysis(iv=Interventions(positional_encoding=False))
    c1, c2 = st.columns(2)
    c1.markdown(f"**With positional encoding:** {md(ref.translation) or '*(empty)*'}")
    c2.markdown(f"**Without (sidebar switch off):** {md(pe_off.translation) or '*(empty)*'}")
    st.caption(text.SWITCH_CAPTION)


st.subheader("The sidebar switch changes the whole model")
once("positional.switch", content_key(ref), switched)

section("6. Other choices", text.OTHER_CHOICES)

next_link(__file__)
