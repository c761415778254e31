"""The Encoder layer page's middle sections: LayerNorm in its two steps (normalise each word, then γ and β) and the
feed-forward net (its hidden layer, the ReLU's zeros, and why it is there: leaving the span of the values). `text`
is the page's prose (pages/content/encoder.py); widget keys start with the page's prefix `P`.
"""

from __future__ import annotations

from types import ModuleType

import streamlit as st

from model.pipeline import Analysis
from model.transformer import Config
from ui.models import content_key, span
from ui.widgets import chart, figure, fold, md, metrics_row, notice, once, small_table
from viz import layers as vl
from viz import span as vs
from viz.layers import affine_table, dims, ln_params, norm_stats, units, zero_table

P = "encoder_"  # widget key prefix (the page's)


def layer_norm_section(
    a: Analysis, cfg: Config, ln: vl.Norm, layer: int, sub: int, word: int, text: ModuleType
) -> None:
    """LayerNorm `ln` of encoder `layer`'s sublayer `sub`: x before and after normalising, then γ and β, with
    `word`'s first 8 dimensions."""
    labels, D, pre = a.src_labels, cfg.d_model, cfg.norm_first
    name = f"enc.{layer}.add_norm{sub}"
    here = (*content_key(a), layer, sub)  # what this layer's tables are of (ui.widgets.once)
    st.header("LayerNorm, step 1: normalise each word")
    st.latex(text.NORMALISE_LATEX)
    st.markdown(text.normalise(pre))
    once("encoder.norm", here, lambda: small_table(norm_stats(ln, labels), hide_index=True))
    before_after = ((ln.x, "before: x", "ln_x", True), (ln.normed, "after: x̂ (mean 0, variance 1)", "ln_normed", False))
    for column, (values, title, suffix, before) in zip(st.columns(2), before_after, strict=True):
        with column:
            figure(
                values,
                dims(D),
                labels,
                "activations",
                title=title,
                key=f"{P}{suffix}",
                x_title="dimension",
                y_title="word",
                note=vl.norm_notice(ln, labels, before=before),
            )

    st.header("LayerNorm, step 2: scale and shift with learned γ and β")
    st.latex(r"\mathrm{LayerNorm}(x) = \gamma \odot \hat x + \beta")
    st.markdown(text.scale_shift(D))
    figure(
        ln_params(ln),
        dims(D),
        ["γ (weight)", "β (bias)"],
        "activations",
        title=f"γ and β of {name}.norm",
        shape=f"2 × [{D}]",
        key=f"{P}gamma_beta",
        x_title="dimension",
        note=vl.gamma_beta_notice(ln),
    )
    st.markdown(f"**{md(labels[word])}**: the first 8 dimensions")
    once("encoder.affine", (*here, word), lambda: small_table(affine_table(ln, word)))


def ffn_section(a: Analysis, cfg: Config, f: vl.FFN, layer: int, text: ModuleType) -> None:
    """The feed-forward net `f` of encoder `layer`: its shapes, the ReLU's zeros, the hidden layer folded; then
    how far the attention output and the FFN's output leave the span of the values."""
    labels, D = a.src_labels, cfg.d_model
    st.header("The feed-forward net")
    st.latex(text.FFN_LATEX)
    st.latex(text.ffn_shapes(len(labels), D, cfg.d_ff))
    st.markdown(text.ffn(D, cfg.d_ff))
    with metrics_row():
        st.metric("hidden units set to 0 by the ReLU", f"{f.zero_fraction:.1%}")
        st.metric("largest |difference| when recomputed from W_1, b_1", f"{f.max_difference:.1e}")
    with fold("Show the hidden layer and the ReLU's zeros per word", f"{P}fold_hidden") as shown:
        if shown:
            figure(
                f.hidden,
                units(cfg.d_ff),
                labels,
                "activations",
                title=f"hidden layer max(0, xW_1 + b_1) of layer {layer}",
                key=f"{P}hidden",
                x_title="hidden unit",
                y_title="word",
                note=vl.hidden_notice(f, labels),
            )
            small_table(zero_table(f, labels), hide_index=True)

    st.header("Why the FFN: leaving the span of the values")
    st.latex(text.SPAN_LATEX)
    st.markdown(text.span(cfg.n_heads, cfg.d_k, D))
    check = span(a, layer)
    once(
        "encoder.span",
        (*content_key(a), layer),
        lambda: chart(vs.span_figure(check, labels), key=f"{P}span", config={"displayModeBar": False}),
    )
    notice(vs.span_notice(check, labels))
    with fold("Exact numbers · the share outside the span, per word and step", f"{P}fold_span") as shown:
        if shown:
            small_table(vs.span_table(check, labels))
