"""The encoder layer: residual connections, LayerNorm in two steps, the feed-forward net, the stack."""

from __future__ import annotations

import streamlit as st

from pages.content import encoder as text
from ui import shell
from ui.models import analysis, content_key, current_model, encoder_layer, span
from ui.widgets import (
    chart,
    figure,
    fold,
    md,
    metrics_row,
    next_link,
    notice,
    once,
    pick,
    require_sentence,
    section,
    sentence_header,
    small_table,
)
from viz import layers as vl
from viz import span as vs
from viz.layers import (
    POST_LN_DOT,
    PRE_LN_DOT,
    SUBLAYERS,
    affine_table,
    dims,
    ln_params,
    norm_stats,
    residual,
    residual_table,
    stage_table,
    units,
    word_stages,
    zero_table,
)

shell.enter(__file__)  # first: re-enter through app.py if Streamlit ran this page bare

P = "encoder_"  # widget key prefix

st.title("The encoder layer")
a = analysis()
cfg = current_model().bundle.config
st.markdown(text.intro(cfg.n_enc_layers, cfg.d_model))
require_sentence(a)
sentence_header(a)
pre = cfg.norm_first
if pre:
    st.info(text.PRE_LN)

labels = a.src_labels
c1, c2, c3 = st.columns(3)
with c1:
    layer = pick("Encoder layer", range(cfg.n_enc_layers), f"{P}layer", format_func=lambda i: f"layer {i}")
with c2:
    sub = st.radio("Sublayer", list(SUBLAYERS), key=f"{P}sub", format_func=lambda s: f"{s} · {SUBLAYERS[s]}",
                   horizontal=True)
with c3:
    word = pick("Word", range(len(labels)), f"{P}word", format_func=lambda i: labels[i])
name = f"enc.{layer}.add_norm{sub}"
ln, f = encoder_layer(a, layer, sub)
D = cfg.d_model

st.header("Residual connection: x + Sublayer(x)")
st.latex(text.RESIDUAL_PRE if pre else text.RESIDUAL_POST)
st.markdown(text.residual(D))
st.markdown(f"**{md(labels[word])}**, layer {layer}, sublayer {sub} ({SUBLAYERS[sub]}): the first 8 of {D} dimensions")
here = (*content_key(a), layer, sub)  # what this layer's tables are of (ui.widgets.once)
once("encoder.residual", (*here, word), lambda: small_table(residual_table(residual(a.trace, layer, sub), word)))

st.header("LayerNorm, step 1: normalise each word")
st.latex(text.NORMALISE_LATEX)
st.markdown(text.normalise(pre))
once("encoder.norm", here, lambda: small_table(norm_stats(ln, labels), hide_index=True))
c1, c2 = st.columns(2)
with c1:
    figure(ln.x, dims(D), labels, "activations", title="before: x", shape=f"[{len(labels)}, {D}]", key=f"{P}ln_x",
           x_title="dimension", y_title="word", note=vl.norm_notice(ln, labels, before=True))
with c2:
    figure(ln.normed, dims(D), labels, "activations", title="after: x̂ (mean 0, variance 1)",
           shape=f"[{len(labels)}, {D}]", key=f"{P}ln_normed", x_title="dimension", y_title="word",
           note=vl.norm_notice(ln, labels, before=False))

st.header("LayerNorm, step 2: scale and shift with learned γ and β")
st.latex(r"\mathrm{LayerNorm}(x) = \gamma \odot \hat x + \beta")
st.markdown(text.scale_shift(D))
figure(ln_params(ln), dims(D), ["γ (weight)", "β (bias)"], "activations", title=f"γ and β of {name}.norm",
       shape=f"2 × [{D}]", key=f"{P}gamma_beta", x_title="dimension", note=vl.gamma_beta_notice(ln))
st.markdown(f"**{md(labels[word])}**: the first 8 dimensions")
once("encoder.affine", (*here, word), lambda: small_table(affine_table(ln, word)))

st.header("The feed-forward net")
st.latex(text.FFN_LATEX)
st.latex(text.ffn_shapes(len(labels), D, cfg.d_ff))
st.markdown(text.ffn(D, cfg.d_ff))
with metrics_row():
    st.metric("hidden units set to 0 by the ReLU", f"{f.zero_fraction:.1%}")
    st.metric("largest |difference| when recomputed from W_1, b_1", f"{f.max_difference:.1e}")
with fold("Show the hidden layer and the ReLU's zeros per word", f"{P}fold_hidden") as shown:
    if shown:
        figure(f.hidden, units(cfg.d_ff), labels, "activations",
               title=f"hidden layer max(0, xW_1 + b_1) of layer {layer}", shape=f"[{len(labels)}, {cfg.d_ff}]",
               key=f"{P}hidden", x_title="hidden unit", y_title="word", note=vl.hidden_notice(f, labels))
        small_table(zero_table(f, labels), hide_index=True)

st.header("Why the FFN: leaving the span of the values")
st.latex(text.SPAN_LATEX)
st.markdown(text.span(cfg.n_heads, cfg.d_k, D))
check = span(a, layer)
once("encoder.span", (*content_key(a), layer),
     lambda: chart(vs.span_figure(check, labels), key=f"{P}span", config={"displayModeBar": False}))
notice(vs.span_notice(check, labels))
with fold("Exact numbers · the share outside the span, per word and step", f"{P}fold_span") as shown:
    if shown:
        small_table(vs.span_table(check, labels))

section("One word through the whole stack", f"**{md(labels[word])}** " + text.STACK)
stages = word_stages(a.trace, word)
with fold("Show the word's vector at every stage", f"{P}fold_stages") as shown:
    if shown:
        figure(stages.vectors, dims(D), stages.labels, "activations", title=f"{md(labels[word])}, stage by stage",
               shape=f"[{len(stages.labels)} stages, {D}]", key=f"{P}stages", x_title="dimension", y_title="stage",
               note=vl.stages_notice(stages))
        small_table(stage_table(stages), hide_index=True)

st.header("Post-LN or pre-LN?")
c1, c2 = st.columns(2)
with c1:
    st.subheader("Post-LN (the paper" + (", this model)" if not pre else ")"))
    for latex in text.POST_LN_LATEX:
        st.latex(latex)
    st.caption(text.POST_LN_LETTERS)
    st.graphviz_chart(POST_LN_DOT, alt=text.POST_LN_ALT)
    st.markdown(text.POST_LN)
with c2:
    st.subheader("Pre-LN" + (" (this model)" if pre else ""))
    st.latex(text.PRE_LN_LATEX)
    st.graphviz_chart(PRE_LN_DOT, alt=text.PRE_LN_ALT)
    st.markdown(text.PRE_LN_ABOUT)

next_link(__file__)
