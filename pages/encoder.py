"""The encoder layer: residual connections, LayerNorm in two steps, the feed-forward net, the stack."""

from __future__ import annotations

import streamlit as st

from pages.content import encoder as text
from ui import shell
from ui.encoder_steps import ffn_section, layer_norm_section
from ui.models import content_key, current_model, encoder_layer
from ui.widgets import (
    figure,
    fold,
    keep_valid,
    md,
    next_link,
    once,
    opening,
    pick,
    section,
    small_table,
)
from viz import layers as vl
from viz.layers import (
    POST_LN_DOT,
    PRE_LN_DOT,
    SUBLAYERS,
    dims,
    residual,
    residual_table,
    stage_table,
    word_stages,
)

shell.enter(__file__)  # first: re-enter through app.py if Streamlit ran this page bare

P = "encoder_"  # widget key prefix

cfg = current_model().bundle.config
a = opening("The encoder layer", text.intro(cfg.n_enc_layers, cfg.d_model))
pre = cfg.norm_first
if pre:
    st.info(text.PRE_LN)

labels = a.src_labels
c1, c2, c3 = st.columns(3)
with c1:
    layer = pick("Encoder layer", range(cfg.n_enc_layers), f"{P}layer", format_func=lambda i: f"layer {i}")
with c2:
    keep_valid(f"{P}sub", list(SUBLAYERS), 1)  # (a class's shared choice: one of these)
    sub = st.radio(
        "Sublayer", list(SUBLAYERS), key=f"{P}sub", format_func=lambda s: f"{s} · {SUBLAYERS[s]}", horizontal=True
    )
with c3:
    word = pick("Word", range(len(labels)), f"{P}word", format_func=lambda i: labels[i])
ln, f = encoder_layer(a, layer, sub)
D = cfg.d_model

st.header("Residual connection: x + Sublayer(x)")
st.latex(text.RESIDUAL_PRE if pre else text.RESIDUAL_POST)
st.markdown(text.residual(D))
st.markdown(f"**{md(labels[word])}**, layer {layer}, sublayer {sub} ({SUBLAYERS[sub]}): the first 8 of {D} dimensions")
here = (*content_key(a), layer, sub)  # what this layer's tables are of (ui.widgets.once)
once("encoder.residual", (*here, word), lambda: small_table(residual_table(residual(a.trace, layer, sub), word)))

layer_norm_section(a, cfg, ln, layer, sub, word, text)
ffn_section(a, cfg, f, layer, text)

section("One word through the whole stack", f"**{md(labels[word])}** " + text.STACK)
stages = word_stages(a.trace, word)
with fold("Show the word's vector at every stage", f"{P}fold_stages") as shown:
    if shown:
        figure(
            stages.vectors,
            dims(D),
            stages.labels,
            "activations",
            title=f"{md(labels[word])}, stage by stage",
            shape=f"[{len(stages.labels)} stages, {D}]",
            key=f"{P}stages",
            x_title="dimension",
            y_title="stage",
            note=vl.stages_notice(stages),
        )
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
