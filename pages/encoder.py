"""The encoder layer: residual connections, LayerNorm in two steps, the feed-forward net, the stack."""

from __future__ import annotations

import streamlit as st

from ui import shell
from ui.models import analysis, current_model, encoder_layer
from ui.widgets import matrix, md, require_sentence, sentence_header
from viz.heatmap import table
from viz.layers import (
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

POST_LN_DOT = """digraph { rankdir=BT; node [shape=box, style="rounded,filled", fillcolor="#eef3fb", fontsize=11];
x [label="x", shape=plaintext, fillcolor=white]; s [label="Sublayer\\n(attention or FFN)"];
add [label="+", shape=circle, fillcolor="#fff3cd"]; ln [label="LayerNorm", fillcolor="#e8f5e9"];
out [label="output", shape=plaintext, fillcolor=white];
x -> s -> add -> ln -> out; x -> add [style=dashed, label=" residual"]; }"""
PRE_LN_DOT = """digraph { rankdir=BT; node [shape=box, style="rounded,filled", fillcolor="#eef3fb", fontsize=11];
x [label="x", shape=plaintext, fillcolor=white]; ln [label="LayerNorm", fillcolor="#e8f5e9"];
s [label="Sublayer\\n(attention or FFN)"]; add [label="+", shape=circle, fillcolor="#fff3cd"];
out [label="output (a final LayerNorm\\nafter the last layer)", shape=plaintext, fillcolor=white];
x -> ln -> s -> add -> out; x -> add [style=dashed, label=" residual"]; }"""


def _pick(label: str, options: list, key: str, default=0, **kw):
    """A selectbox whose remembered value is dropped when it no longer exists (e.g. a shorter sentence)."""
    if key in st.session_state and st.session_state[key] not in options:
        del st.session_state[key]
    return st.selectbox(label, options, index=options.index(default) if default in options else 0, key=key, **kw)


st.title("The encoder layer")
a = analysis()
cfg = current_model().bundle.config
st.markdown(f"One encoder block is **self-attention followed by a small feed-forward net** (“dense” layer), each "
            f"wrapped in a residual connection and a LayerNorm. The encoder stacks N such blocks with the same shape "
            f"and different weights: the paper uses N = 6, this model N = {cfg.n_enc_layers}. Every word enters as "
            f"a {cfg.d_model}-number vector and leaves as one.")
require_sentence(a)
sentence_header(a)
pre = cfg.norm_first
if pre:
    st.info("This model is **pre-LN** (LayerNorm before each sublayer, one more at the end of the stack), not the "
            "paper's post-LN; the steps below follow what this model does.")

labels = a.src_labels
c1, c2, c3 = st.columns(3)
with c1:
    layer = _pick("Encoder layer", list(range(cfg.n_enc_layers)), f"{P}layer", format_func=lambda i: f"layer {i}")
with c2:
    sub = st.radio("Sublayer", list(SUBLAYERS), key=f"{P}sub", format_func=lambda s: f"{s} · {SUBLAYERS[s]}",
                   horizontal=True)
with c3:
    word = _pick("Word", list(range(len(labels))), f"{P}word", format_func=lambda i: labels[i])
name = f"enc.{layer}.add_norm{sub}"

st.header("Residual connection: x + Sublayer(x)")
st.latex(r"\text{post-LN (paper, this model):}\quad \mathrm{LayerNorm}\big(x + \mathrm{Sublayer}(x)\big)"
         if not pre else r"\text{pre-LN:}\quad x + \mathrm{Sublayer}\big(\mathrm{LayerNorm}(x)\big)")
st.markdown("The sublayer's output is **added** to its input, so each sublayer only has to learn a correction, "
            "and gradients have a direct path down the stack. Adding needs both vectors to have the same size: "
            f"that is why every sublayer maps d_model = {cfg.d_model} back to d_model = {cfg.d_model}.")
r = residual(a.trace, layer, sub)
st.markdown(f"**{md(labels[word])}**, layer {layer}, sublayer {sub} ({SUBLAYERS[sub]}): the first 8 of "
            f"{cfg.d_model} dimensions")
st.dataframe(residual_table(r, word))

st.header("LayerNorm, step 1: normalise each word")
ln, f = encoder_layer(a, layer, sub)
st.latex(r"\hat x = \frac{x - \mu}{\sqrt{\sigma^2 + \epsilon}}, \qquad \mu = \frac1D\sum_i x_i, \quad "
         r"\sigma^2 = \frac1D \sum_i (x_i - \mu)^2")
st.markdown("Each word's vector separately (over its features, not over the sentence) is shifted to mean 0 and "
            "scaled to variance 1." + (" Here x = x + Sublayer(x) from above." if not pre else
                                         " In pre-LN, x is the sublayer's input."))
st.dataframe(norm_stats(ln, labels), hide_index=True)
c1, c2 = st.columns(2)
with c1:
    matrix(ln.x, dims(cfg.d_model), labels, "activations", title="before: x", shape=f"[{len(labels)}, "
           f"{cfg.d_model}]", key=f"{P}ln_x", x_title="dimension", y_title="word", show_table=False)
with c2:
    matrix(ln.normed, dims(cfg.d_model), labels, "activations", title="after: x̂ (mean 0, variance 1)",
           shape=f"[{len(labels)}, {cfg.d_model}]", key=f"{P}ln_normed", x_title="dimension", y_title="word",
           show_table=False)
with st.expander("Exact numbers of x and x̂"):
    st.dataframe(table(ln.x, dims(cfg.d_model), labels))
    st.dataframe(table(ln.normed, dims(cfg.d_model), labels))

st.header("LayerNorm, step 2: scale and shift with learned γ and β")
st.latex(r"\mathrm{LayerNorm}(x) = \gamma \odot \hat x + \beta")
st.markdown(f"γ and β are {cfg.d_model} learned numbers each, the same for every word: after forcing mean 0 and "
            "variance 1, the layer may give each feature back its own scale and offset.")
matrix(ln_params(ln), dims(cfg.d_model), ["γ (weight)", "β (bias)"], "activations",
       title=f"γ and β of {name}.norm", shape=f"2 × [{cfg.d_model}]", key=f"{P}gamma_beta", x_title="dimension")
st.markdown(f"**{md(labels[word])}**: the first 8 dimensions")
st.dataframe(affine_table(ln, word))

st.header("The feed-forward net")
st.latex(r"\mathrm{FFN}(x) = \max(0,\ xW_1 + b_1)\,W_2 + b_2")
T, D, F = len(labels), cfg.d_model, cfg.d_ff
st.latex(rf"[{T},\ {D}] \xrightarrow{{W_1\ [{D},\ {F}],\ \mathrm{{ReLU}}}} [{T},\ {F}] "
         rf"\xrightarrow{{W_2\ [{F},\ {D}]}} [{T},\ {D}]")
st.markdown(f"The same two-layer net (d_model = {cfg.d_model} → d_ff = {cfg.d_ff} → d_model) is applied to every "
            "word on its own: attention mixes information between words, the FFN transforms each word. Why is it "
            "needed? Attention's output for a word is a weighted average of value vectors, so it stays in the span "
            "of the values; the ReLU net adds the non-linear capacity to compute new features.")
c1, c2 = st.columns(2)
c1.metric("hidden units set to 0 by the ReLU", f"{f.zero_fraction:.1%}")
c2.metric("largest |difference| when recomputed from W_1, b_1", f"{f.max_difference:.1e}")
matrix(f.hidden, units(cfg.d_ff), labels, "activations", title=f"hidden layer max(0, xW_1 + b_1) of layer {layer}",
       shape=f"[{len(labels)}, {cfg.d_ff}]", key=f"{P}hidden", x_title="hidden unit", y_title="word",
       show_table=False)
c1, c2 = st.columns([2, 3])
with c1:
    st.dataframe(zero_table(f, labels), hide_index=True)
with c2:
    with st.expander("Exact numbers of the hidden layer"):
        st.dataframe(table(f.hidden, units(cfg.d_ff), labels))

st.header("One word through the whole stack")
st.markdown(f"**{md(labels[word])}** after the embedding and after every sublayer of every layer. LayerNorm keeps "
            "the size of the vector in check; the cosine similarity shows how far each step moves it.")
stages = word_stages(a.trace, word)
matrix(stages.vectors, dims(cfg.d_model), stages.labels, "activations", title=f"{md(labels[word])}, stage by stage",
       shape=f"[{len(stages.labels)} stages, {cfg.d_model}]", key=f"{P}stages", x_title="dimension",
       y_title="stage", show_table=False)
st.dataframe(stage_table(stages), hide_index=True)
with st.expander("Exact numbers, stage by stage"):
    st.dataframe(table(stages.vectors, dims(cfg.d_model), stages.labels))

st.header("Post-LN or pre-LN?")
c1, c2 = st.columns(2)
with c1:
    st.subheader("Post-LN (the paper" + (", this model)" if not pre else ")"))
    st.latex(r"\mathrm{LayerNorm}\big(x + \mathrm{Sublayer}(x)\big)")
    st.latex(r"Z = \mathrm{LayerNorm}\big[Y(X) + X\big]")
    st.latex(r"\tilde X = \mathrm{LayerNorm}\big[\mathrm{MLP}[Z] + Z\big]")
    st.caption("The same in the lecture notes' letters: Y = self-attention, MLP = the feed-forward net.")
    st.graphviz_chart(POST_LN_DOT)
    st.markdown("Every layer's output is normalised. Deep post-LN stacks need a learning-rate warm-up to train "
                "stably.")
with c2:
    st.subheader("Pre-LN" + (" (this model)" if pre else ""))
    st.latex(r"x + \mathrm{Sublayer}\big(\mathrm{LayerNorm}(x)\big)")
    st.graphviz_chart(PRE_LN_DOT)
    st.markdown("The residual path is never normalised, so gradients pass straight through: more stable for deep "
                "stacks. Since nothing normalises the last layer's output, a final LayerNorm follows the stack.")
