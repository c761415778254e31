"""The decoder and the look-ahead mask: masked self-attention with the real numbers, the lecture's 4 x 4 example,
and what goes wrong without the mask. (Encoder-decoder attention and the padding mask: pages/cross_attention.py.)"""

import streamlit as st

from explain import recompute
from explain.paper import BASE, SECTIONS
from pages.content import decoder as text
from ui import shell
from ui.mask_steps import mask_off_section, no_mask_section
from ui.models import content_key, current_model
from ui.state import interventions
from ui.widgets import (
    fold,
    four_steps,
    layer_and_head,
    metrics_row,
    next_link,
    notice,
    once,
    opening,
    pick,
    section,
    small_table,
)
from viz import decoder as vd
from viz.heatmap import table

shell.enter(__file__)  # first: re-enter through app.py if Streamlit ran this page bare

bundle = current_model().bundle
cfg = bundle.config
iv = interventions()
kw = dict(x_title="key (may be looked at)", y_title="query (looking)")


def exact_numbers(steps, labels: list[str], key: str) -> None:  # the four matrices' numbers, one click away
    with fold(text.EXACT, key) as shown:
        if shown:
            for m in (steps.scaled, steps.mask, steps.masked, steps.weights):
                st.dataframe(table(m, labels, labels))


a = opening("The decoder and masking", lambda a: text.intro(a.out_tokens))
sentence, lab = a.prepared.text, a.tgt_labels
content = content_key(a)  # what the figures and tables below are drawn from: the same for a whole class

st.header("1. One decoder block")
left, right = st.columns([2, 3])
with left:
    once(
        "decoder.block_dot",
        (cfg.n_dec_layers,),
        lambda: st.graphviz_chart(vd.block_dot(cfg.n_dec_layers), alt=text.BLOCK_ALT),
    )
with right:
    st.markdown(text.block(cfg.n_dec_layers, len(lab), cfg.d_model))
    layer_b = pick(
        "Block",
        range(cfg.n_dec_layers),
        "decoder_block_layer",
        0,
        style="radio",
        format_func=lambda i: f"decoder layer {i}",
    )


def block() -> None:
    small_table(
        vd.block_table(a.trace, layer_b),
        hide_index=True,  # if ever a grid: its last column (a sentence) wide
        column_config={"what it is": st.column_config.TextColumn(width="large")},
    )
    notice(vd.block_notice(a.trace, layer_b))
    st.markdown(text.regularisation(SECTIONS["dropout"], BASE.dropout, cfg.dropout, vd.projection_biases(bundle.model)))


once("decoder.block", (*content, layer_b), block)

section("2. Masked self-attention: scores + mask = masked scores → softmax", text.MASKED)
st.latex(text.MASKED_LATEX)
if not iv.look_ahead_mask:
    st.warning(text.MASK_OFF)
layer, head = layer_and_head(
    "Decoder layer", cfg.n_dec_layers, cfg.n_heads, ("decoder_mask_layer", "decoder_mask_head")
)
module = f"dec.{layer}.self_attn"
here = (*content, layer, head)
steps = recompute.mask_steps(a.trace, module, head)
four_steps(
    steps,
    lab,
    text.step_titles(module, head),
    vd.step_shapes(a.trace, module),  # (columns: not in a once)
    ["decoder_scaled", "decoder_mask", "decoder_masked", "decoder_weights"],
    **kw,
)
once("decoder.masked", here, lambda: notice(vd.masked_notice(steps.weights, lab)))
exact_numbers(steps, lab, "decoder_exact")


def future() -> None:
    n_up, s_up = vd.above_diagonal(steps.weights)
    with metrics_row():
        st.metric("Weights above the diagonal that are > 0", n_up)
        st.metric("Their sum (attention paid to the future)", f"{s_up:.6f}")
        st.metric("Largest |row sum − 1|", f"{vd.row_sum_error(steps.weights):.1e}")
    st.caption(text.MASKED_CAPTION)
    section("The softmax renormalises over the allowed positions", text.RENORM, level=3)


once("decoder.future", here, future)
row = pick("Query position", range(len(lab)), "decoder_renorm_row", min(len(lab) - 1, 2), format_func=lab.__getitem__)


def renormalised() -> None:
    small_table(vd.renormalisation(steps.scaled[row], steps.mask[row], lab), hide_index=True)
    notice(vd.renorm_notice(steps.scaled[row], steps.mask[row], lab[row]))
    st.latex(text.RENORM_LATEX)


once("decoder.renorm", (*here, row), renormalised)

section("3. Example from the lecture notes: a 4 × 4 look-ahead mask", text.LECTURE)
with fold("Show the lecture's four 4 × 4 matrices", "decoder_fold_lecture") as shown:
    if shown:
        ex, ex_lab = recompute.lecture_masking(), [f"t={i}" for i in range(1, 5)]
        four_steps(
            ex,
            ex_lab,
            ["Scaled scores", "Look-ahead mask", "Masked scores", "Weights"],
            ["[4, 4]"] * 4,
            ["decoder_ex_scaled", "decoder_ex_mask", "decoder_ex_masked", "decoder_ex_weights"],
        )
        notice(vd.lecture_notice(ex))
        exact_numbers(ex, ex_lab, "decoder_ex_exact")

st.header("4. What goes wrong without the look-ahead mask")
mask_off_section(iv, layer, head, text, kw)

no_mask_section(sentence, bundle, text, kw)

st.markdown(text.OUTRO)
next_link(__file__)
