"""Self-attention, step by step: one word's query against every key, the softmax, the weighted values."""

from __future__ import annotations

import math

import streamlit as st

from explain.experiments import plain_self_attention
from explain.textbook import thinking_machines
from model.examples import COREFERENCE_WIDE
from pages.content import self_attention as text
from ui import shell
from ui.attention_steps import coref_section, show_steps, show_why_scale
from ui.classroom.plans import hidden_head, mystery_box
from ui.models import analysis, content_key, coref_defaults, current_model, projection
from ui.state import DEFAULT_SENTENCE
from ui.widgets import figure, fold, md, next_link, notice, pick, require_sentence, section, sentence_header
from viz import attention as va
from viz import coref as vc
from viz import heads as vh
from viz.layers import layer_output

shell.enter(__file__)  # first: re-enter through app.py if Streamlit ran this page bare

P = "self_attention_"  # widget key prefix
TIRED = DEFAULT_SENTENCE
WIDE = COREFERENCE_WIDE
MODES = ("Your sentence, the trained model", "Thinking Machines (textbook example)")
KEYS = (f"{P}layer", f"{P}head", f"{P}word")


def square(values, kind: str, title: str, key: str, note: str) -> None:
    """A [T, T] matrix over the sentence's `labels` (set below): one row per query, one column per key."""
    figure(values, labels, labels, kind, title=title, shape=f"[{len(labels)}, {len(labels)}]", key=f"{P}{key}",
           note=note, x_title="key", y_title="query")


st.title("Self-attention, step by step")
st.markdown(text.INTRO)

a = analysis()
require_sentence(a)
sentence_header(a)
cfg = current_model().bundle.config
ss = st.session_state

with fold(text.QKV_TITLE, f"{P}fold_qkv") as shown:
    if shown:
        st.markdown(text.QKV)
with fold(text.RNN_TITLE, f"{P}fold_rnn") as shown:
    if shown:
        st.markdown(text.RNN)
        for latex in text.RNN_LATEX:
            st.latex(latex)
        st.markdown(text.RNN_AFTER)

labels = a.src_labels
focus = coref_defaults(a, KEYS, cfg.n_enc_layers)  # before the fragment: a new sentence moves the pickers


@st.fragment
def one_head(a, cfg, focus) -> None:
    """Everything that follows the layer / head / query-word pickers (and the d_k slider): a change of one of them
    reruns only this part of the page, not the sidebar, the prose above or the coreference section below. A new
    sentence, another model or an intervention is a full run, which calls this again with the new analysis."""
    iv, labels = a.interventions, a.src_labels
    st.header("One word through one head")
    mode = st.radio("Numbers from", MODES, key=f"{P}mode", horizontal=True)
    if mode == MODES[1]:  # the pickers belong to the trained model: hidden, their choices kept for later
        for k in KEYS:
            if k in ss:
                ss[k] = ss[k]
        layer = ss.get(KEYS[0], 0) if ss.get(KEYS[0], 0) in range(cfg.n_enc_layers) else 0
        head = ss.get(KEYS[1], 0) if ss.get(KEYS[1], 0) in range(cfg.n_heads) else 0
        word = ss.get(KEYS[2], 0) if ss.get(KEYS[2], 0) in range(len(labels)) else 0
        st.info(text.TEXTBOOK)
        tb_labels = va.textbook_labels()
        tb_word = st.radio("Query", [0, 1], key=f"{P}tb_word", horizontal=True, format_func=lambda i: tb_labels[i])
        show_steps(va.textbook_steps(thinking_machines(), tb_word), tb_labels, tb_labels[tb_word], f"{P}tb_",
                   textbook=True, query=tb_word)
    else:
        c1, c2, c3 = st.columns(3)
        with c1:
            layer = pick("Encoder layer", range(cfg.n_enc_layers), KEYS[0], format_func=lambda i: f"layer {i}")
        with c2:
            head = pick("Head", range(cfg.n_heads), KEYS[1], format_func=lambda h: f"head {h}")
        with c3:
            word = pick("Query word", range(len(labels)), KEYS[2], default=vh.find_word(a.prepared.tokens, "it") or 0,
                        format_func=lambda i: labels[i])
        if focus is not None:
            c = vc.coref_parts(a.prepared.tokens)
            st.markdown(text.focus(focus.layer, focus.head, *(md(va.word_of(labels[j])) for j in (c.referent, c.other,
                                   c.adjective)), focus.weight, focus.other))
        st.markdown(f"Query word **{md(labels[word])}**, encoder layer {layer}, head {head}.")
        if hidden_head() == (f"enc.{layer}.self_attn", head):  # the class's mystery head: hidden until the reveal
            mystery_box(head)
            return
        show_steps(va.word_steps(a.trace, f"enc.{layer}.self_attn", head, word), labels, labels[word], f"{P}w_",
                   off=(f"enc.{layer}.self_attn", head) in iv.heads_off, proj=projection(a, layer, head, word),
                   content=(*content_key(a), layer, head, word))
    module = f"enc.{layer}.self_attn"

    st.header("All words at once: the matrix form")
    if mode == MODES[1]:
        st.info(text.below_trained(layer, head), icon=":material/swap_horiz:")
    T, d_k = len(labels), cfg.d_k
    st.markdown(text.MATRIX_FORM)
    st.latex(text.MATRIX_LATEX_QKV)
    st.latex(text.MATRIX_LATEX)
    st.latex(text.shapes_latex(T, d_k))
    if not iv.scale:
        st.warning(text.UNSCALED)
    t = a.trace
    sc, w = t[f"{module}.scores"][0, head], t[f"{module}.weights"][0, head]
    with fold("Show the four matrices of this head (QKᵀ, ÷√d_k, softmax, Z) and the column form C = Attn(X, X)",
              f"{P}fold_matrix") as shown:
        if shown:
            c1, c2 = st.columns(2)
            with c1:
                square(sc, "scores", f"QKᵀ (scores), layer {layer}, head {head}", "m_scores",
                       va.scores_notice(sc, labels))
            with c2:
                scaled = t[f"{module}.scaled"][0, head]
                square(scaled, "scores", "QKᵀ / √d_k (scaled)", "m_scaled",
                       va.scores_notice(sc, labels, scaled, math.sqrt(d_k) if iv.scale else 1.0))
            c1, c2 = st.columns(2)
            with c1:
                square(w, "weights", "softmax: attention weights", "m_weights", va.matrix_notice(w, labels, labels))
            with c2:
                figure(t[f"{module}.z"][0, head], va.dims(d_k), labels, "activations", title="Z = weights · V",
                       shape=f"[{T}, {d_k}]", key=f"{P}m_z", x_title="dimension", y_title="word",
                       note=va.z_matrix_notice(t[f"{module}.z"][0, head], w, t[f"{module}.v"][0, head], labels))
            st.markdown(text.COLUMN_FORM)
            st.latex(text.COLUMN_LATEX)
            cf = va.column_form(t, module, head, iv.scale)
            c1, c2 = st.columns(2)
            with c1:
                figure(cf.alpha, labels, labels, "weights", title="α_:j, one column per query word j",
                       shape=f"[{T}, {T}]", key=f"{P}col_alpha", x_title="query word j", y_title="key word i",
                       numbers=False)
            with c2:
                figure(cf.C, labels, va.dims(d_k), "activations", title="C = [c_:1 … c_:T], c_:j = V·α_:j",
                       shape=f"[{d_k}, {T}]", key=f"{P}col_C", x_title="word j", y_title="dimension", numbers=False)
            notice(va.column_notice(cf, labels, word, (module, head) in iv.heads_off))

    st.header("Why divide by √d_k?")
    with fold("Show the experiment: Var(q·k) grows with d_k, and the softmax saturates", f"{P}fold_scale") as shown:
        if shown:
            show_why_scale(cfg.d_k, P, text)

    section("Attention without learned weights", text.PLAIN)
    st.latex(text.PLAIN_LATEX)
    st.markdown(text.PLAIN_AFTER)
    with fold("Show softmax(XXᵀ) beside the learned weights of this head", f"{P}fold_plain") as shown:
        if shown:
            plain = plain_self_attention(layer_output(t, layer - 1))  # X entering this layer (layer 0: embedding + PE)
            c1, c2 = st.columns(2)
            with c1:
                square(plain.weights, "weights", f"softmax(XXᵀ), X = input of layer {layer}", "plain",
                       va.matrix_notice(plain.weights, labels, labels))
            with c2:
                square(w, "weights", f"learned: layer {layer}, head {head}", "learned",
                       va.plain_notice(plain.weights, w, labels))


one_head(a, cfg, focus)

coref_section((TIRED, WIDE), cfg, P, text)

next_link(__file__)
