"""Self-attention, step by step: one word's query against every key, the softmax, the weighted values."""

from __future__ import annotations

import streamlit as st

from model.experiments import dot_product_samples, plain_self_attention, saturation, summarize
from model.textbook import thinking_machines
from pages.content import self_attention as text
from ui import shell
from ui.attention_steps import show_steps
from ui.models import analysis, current_model, saturation_rows, variance_rows
from ui.state import DEFAULT_SENTENCE
from ui.widgets import matrix, md, pick, require_sentence, sentence_header
from viz import attention as va
from viz.heatmap import heatmap
from viz.layers import layer_output

shell.enter(__file__)  # first: re-enter through app.py if Streamlit ran this page bare

P = "self_attention_"  # widget key prefix
TIRED = DEFAULT_SENTENCE
WIDE = "the animal didn't cross the street because it was too wide"
D_KS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
MODES = ("Your sentence, the trained model", "Thinking Machines (textbook example)")
NO_BAR = {"displayModeBar": False}


def _set_sentence(sentence: str) -> None:
    st.session_state["sentence"] = sentence


def square(values, kind: str, title: str, key: str) -> None:
    """A [T, T] matrix over the sentence's `labels` (set below): one row per query, one column per key."""
    matrix(values, labels, labels, kind, title=title, shape=f"[{len(labels)}, {len(labels)}]", key=f"{P}{key}",
           x_title="key", y_title="query")


st.title("Self-attention, step by step")
st.markdown(text.INTRO)

a = analysis()
require_sentence(a)
sentence_header(a)
cfg = current_model().bundle.config
iv = a.interventions

with st.expander(text.QKV_TITLE):
    st.markdown(text.QKV)
with st.expander(text.RNN_TITLE):
    st.markdown(text.RNN)
    for latex in text.RNN_LATEX:
        st.latex(latex)
    st.markdown(text.RNN_AFTER)

st.header("One word through one head")
labels = a.src_labels
c1, c2, c3 = st.columns(3)
with c1:
    layer = pick("Encoder layer", range(cfg.n_enc_layers), f"{P}layer", format_func=lambda i: f"layer {i}")
with c2:
    head = pick("Head", range(cfg.n_heads), f"{P}head", format_func=lambda h: f"head {h}")
with c3:
    word = pick("Query word", range(len(labels)), f"{P}word", default=va.find_word(a.prepared.tokens, "it") or 0,
                format_func=lambda i: labels[i])
module = f"enc.{layer}.self_attn"
mode = st.radio("Numbers from", MODES, key=f"{P}mode", horizontal=True)

if mode == MODES[1]:
    st.info(text.TEXTBOOK)
    tb_labels = va.textbook_labels()
    tb_word = st.radio("Query", [0, 1], key=f"{P}tb_word", horizontal=True, format_func=lambda i: tb_labels[i])
    show_steps(va.textbook_steps(thinking_machines(), tb_word), tb_labels, tb_labels[tb_word], f"{P}tb_", textbook=True)
else:
    st.markdown(f"Query word **{md(labels[word])}**, encoder layer {layer}, head {head}.")
    show_steps(va.word_steps(a.trace, module, head, word), labels, labels[word], f"{P}w_",
               off=(module, head) in iv.heads_off)

st.header("All words at once: the matrix form")
T, d_k = len(labels), cfg.d_k
st.markdown(text.MATRIX_FORM)
st.latex(text.MATRIX_LATEX)
st.latex(text.shapes_latex(T, d_k))
if not iv.scale:
    st.warning(text.UNSCALED)
t = a.trace
c1, c2 = st.columns(2)
with c1:
    square(t[f"{module}.scores"][0, head], "scores", "QKᵀ (scores)", "m_scores")
with c2:
    square(t[f"{module}.scaled"][0, head], "scores", "QKᵀ / √d_k (scaled)", "m_scaled")
c1, c2 = st.columns(2)
with c1:
    square(t[f"{module}.weights"][0, head], "weights", "softmax: attention weights", "m_weights")
with c2:
    matrix(t[f"{module}.z"][0, head], va.dims(d_k), labels, "activations", title="Z = weights · V",
           shape=f"[{T}, {d_k}]", key=f"{P}m_z", x_title="dimension", y_title="word")

st.header("Why divide by √d_k?")
st.markdown(text.WHY_SCALE)
dk = st.select_slider("d_k", options=D_KS, value=cfg.d_k if cfg.d_k in D_KS else 64, key=f"{P}dk")
samples = dot_product_samples(dk, n=4000, seed=0)
chosen = summarize(samples, dk)
var_rows = variance_rows(D_KS)
c1, c2 = st.columns(2)
c1.metric(f"measured Var(q·k), d_k = {dk}", f"{chosen.variance:.1f}", help="theory: d_k")
c2.metric("measured Var(q·k / √d_k)", f"{chosen.variance_scaled:.3f}", help="theory: 1")
st.plotly_chart(va.histogram_figure(samples, dk), key=f"{P}hist", config=NO_BAR)
c1, c2 = st.columns(2)
with c1:
    st.plotly_chart(va.variance_figure(var_rows), key=f"{P}var", config=NO_BAR)
with c2:
    st.dataframe(va.variance_table(var_rows), hide_index=True)
    st.caption(text.RANGE_CAPTION)
st.markdown(text.SATURATION)
sat = saturation(dk, n_keys=8, seed=0)
c1, c2, c3, c4 = st.columns(4)
c1.metric("max weight, no scaling", f"{sat.max_raw:.3f}")
c2.metric("max weight, ÷√d_k", f"{sat.max_scaled:.3f}")
c3.metric("‖Jacobian‖, no scaling", f"{sat.jacobian_raw:.4f}")
c4.metric("‖Jacobian‖, ÷√d_k", f"{sat.jacobian_scaled:.4f}")
st.plotly_chart(va.saturation_figure(sat.weights_raw, sat.weights_scaled, [f"key {j}" for j in range(8)]),
                key=f"{P}sat", config=NO_BAR)
st.dataframe(va.saturation_table(saturation_rows(D_KS)), hide_index=True)
st.caption(text.SATURATION_CAPTION)

st.header("Attention without learned weights")
plain = plain_self_attention(layer_output(t, layer - 1))  # X: the vectors entering this layer (layer 0: embedding + PE)
st.markdown(text.PLAIN)
st.latex(text.PLAIN_LATEX)
st.markdown(text.PLAIN_AFTER)
c1, c2 = st.columns(2)
with c1:
    square(plain.weights, "weights", f"softmax(XXᵀ), X = input of layer {layer}", "plain")
with c2:
    square(t[f"{module}.weights"][0, head], "weights", f"learned: layer {layer}, head {head}", "learned")

st.header("What does “it” refer to?")
st.markdown(text.COREF)
c1, c2 = st.columns(2)
c1.button("Use “… too tired” on this page", on_click=_set_sentence, args=(TIRED,), key=f"{P}load_tired")
c2.button("Use “… too wide” on this page", on_click=_set_sentence, args=(WIDE,), key=f"{P}load_wide")
for col, sentence, name in zip(st.columns(2), (TIRED, WIDE), ("tired", "wide"), strict=True):
    with col:
        ca = analysis(text=sentence)
        it = va.find_word(ca.prepared.tokens, "it")
        st.markdown(f"**“… too {name}”** → {md(ca.translation)}")
        if it is None:
            st.info(text.NO_IT)
            continue
        rows = va.word_across_layers(ca.trace, "enc", "self_attn", cfg.n_enc_layers, it)
        hl = va.head_labels(cfg.n_enc_layers, cfg.n_heads)
        fig = heatmap(rows, ca.src_labels, hl, "weights", x_title="key word", y_title="layer · head")
        st.plotly_chart(fig, key=f"{P}coref_{name}", config=NO_BAR)
        st.dataframe(va.coref_table(rows, hl, ca.src_labels, ca.prepared.tokens, it))
st.caption(text.COREF_CAPTION)
