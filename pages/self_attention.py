"""Self-attention, step by step: one word's query against every key, the softmax, the weighted values."""

from __future__ import annotations

import streamlit as st

from model.experiments import (
    dot_product_samples,
    plain_self_attention,
    saturation,
    saturation_by_dk,
    summarize,
    variance_by_dk,
)
from model.textbook import thinking_machines
from ui import shell
from ui.models import analysis, current_model, session_cache
from ui.state import DEFAULT_SENTENCE
from ui.widgets import matrix, md, require_sentence, sentence_header
from viz.attention import (
    coref_table,
    dims,
    find_word,
    head_labels,
    histogram_figure,
    saturation_figure,
    saturation_table,
    step_table,
    textbook_labels,
    textbook_steps,
    textbook_table,
    variance_figure,
    variance_table,
    word_across_layers,
    word_steps,
    z_table,
)
from viz.heatmap import heatmap
from viz.layers import layer_output

shell.enter(__file__)  # first: re-enter through app.py if Streamlit ran this page bare

P = "self_attention_"  # widget key prefix
TIRED = DEFAULT_SENTENCE
WIDE = "the animal didn't cross the street because it was too wide"
D_KS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
MODES = ("Your sentence, the trained model", "Thinking Machines (textbook example)")


@session_cache()
def _variance(d_ks: tuple[int, ...]):
    return variance_by_dk(list(d_ks), n=4000, seed=0)


@session_cache()
def _saturation(d_ks: tuple[int, ...]):
    return saturation_by_dk(list(d_ks), n_keys=8, trials=200, seed=0)


def _set_sentence(text: str) -> None:
    st.session_state["sentence"] = text


def _pick(label: str, options: list, key: str, default=0, **kw):
    """A selectbox whose remembered value is dropped when it no longer exists (e.g. a shorter sentence)."""
    if key in st.session_state and st.session_state[key] not in options:
        del st.session_state[key]
    index = options.index(default) if default in options else 0
    return st.selectbox(label, options, index=index, key=key, **kw)


def show_steps(s, key_labels: list[str], query_label: str, key: str, textbook: bool = False,
               off: bool = False) -> None:
    """The computation for one query word, in the order the model does it."""
    st.subheader("1 · The query, the keys and the values")
    st.markdown(f"Each word's vector is multiplied by three learned matrices: its **query** q (what this word looks "
                f"for), its **key** k (what it offers to be found by) and its **value** v (what it passes on). In "
                f"one head each has d_k = {s.d_k} numbers.")
    matrix(s.q[None], dims(s.d_k), [query_label], "activations", title=f"q of {md(query_label)}",
           shape=f"[1, {s.d_k}]", key=f"{key}q", x_title="dimension", y_title="query")
    c1, c2 = st.columns(2)
    with c1:
        matrix(s.k, dims(s.d_k), key_labels, "activations", title="k of every word", shape=f"[{len(key_labels)}, "
               f"{s.d_k}]", key=f"{key}k", x_title="dimension", y_title="key")
    with c2:
        matrix(s.v, dims(s.d_k), key_labels, "activations", title="v of every word", shape=f"[{len(key_labels)}, "
               f"{s.d_k}]", key=f"{key}v", x_title="dimension", y_title="value")

    st.subheader(f"2 · Score, divide by √d_k = {s.sqrt_dk:.4g}, softmax")
    st.latex(rf"\text{{score}}_j = q \cdot k_j, \qquad \frac{{q\cdot k_j}}{{\sqrt{{d_k}}}}, \quad "
             rf"\sqrt{{d_k}} = \sqrt{{{s.d_k}}} = {s.sqrt_dk:.4g}, \qquad "
             rf"a_j = \frac{{\exp(q\cdot k_j/\sqrt{{d_k}})}}{{\sum_{{j'}} \exp(q\cdot k_{{j'}}/\sqrt{{d_k}})}}")
    if not s.scale:
        st.warning("Scaling is switched off in the sidebar: the model does not divide by √d_k, so the ÷√d_k "
                   "column below equals the raw score q·k.")
    if textbook:
        st.dataframe(textbook_table(s, key_labels))
        st.markdown(f"**Textbook numbers:** q1·k1 = {float(s.scores[0]):g}, q1·k2 = {float(s.scores[1]):g} → "
                    f"÷ √{s.d_k} = {s.sqrt_dk:g} → {float(s.scaled[0]):g}, {float(s.scaled[1]):g} → softmax → "
                    f"{float(s.weights[0]):.2f}, {float(s.weights[1]):.2f}")
    st.dataframe(step_table(s, key_labels), hide_index=True)
    st.caption("The weights are all ≥ 0 and add up to 1: a weighted average, not a sum that can grow.")

    st.subheader("3 · Weight each value, add them up: z")
    matrix(s.weighted, dims(s.d_k), key_labels, "activations", title="weight × v, one row per word",
           shape=f"[{len(key_labels)}, {s.d_k}]", key=f"{key}wv", x_title="dimension", y_title="word")
    st.latex(r"z = \sum_j a_j\, v_j")
    st.dataframe(z_table(s))
    if off:
        st.info("This head is switched off in the sidebar: the model sets its z to 0 before concatenating the "
                "heads (the weights above are still what it would have used).")


st.title("Self-attention, step by step")
st.markdown("Self-attention lets every word build its new vector from all the words of the sentence: it scores "
            "every word against itself, turns the scores into weights with a softmax, and takes the weighted "
            "average of their values. Below, one word of your sentence goes through one head of the trained "
            "model; every number is read from the model's own forward pass.")

a = analysis()
require_sentence(a)
sentence_header(a)
bundle = current_model().bundle
cfg = bundle.config
iv = a.interventions

with st.expander("Query, key, value: the words come from information retrieval"):
    st.markdown("Think of a film catalogue. Each film is described by attributes (genre, actors, length, "
                "year): those are its **key**. The film itself is its **value**. You search with a **query**; the "
                "catalogue compares the query with every key and hands you the films that match. Attention does a "
                "soft version of this: every key matches a little, and the answer is a weighted mix of all values.")
with st.expander("Where attention comes from: RNN encoder-decoders (Bahdanau et al., 2015)"):
    st.markdown("Attention was first added to RNN translators: at decoder step j, weigh every encoder state "
                "h_i by how well it aligns with the decoder state s_j, and pass the weighted sum on as context.")
    st.latex(r"\alpha_{ij} = \operatorname{align}(h_i, s_j), \qquad c_j = \sum_i \alpha_{ij}\, v_i")
    st.latex(r"q_{:j} = W_Q s_j,\quad k_{:i} = W_K h_i,\quad v_{:i} = W_V h_i,\quad "
             r"\alpha_{:j} = \operatorname{softmax}(K^\top q_{:j})")
    st.markdown("The Transformer keeps the attention and drops the RNN: queries, keys and values are all "
                "computed from the words themselves (C = Attn(X, X)).")

st.header("One word through one head")
c1, c2, c3 = st.columns(3)
with c1:
    layer = _pick("Encoder layer", list(range(cfg.n_enc_layers)), f"{P}layer", format_func=lambda i: f"layer {i}")
with c2:
    head = _pick("Head", list(range(cfg.n_heads)), f"{P}head", format_func=lambda h: f"head {h}")
with c3:
    labels = a.src_labels
    word = _pick("Query word", list(range(len(labels))), f"{P}word",
                 default=find_word(a.prepared.tokens, "it") or 0, format_func=lambda i: labels[i])
module = f"enc.{layer}.self_attn"
mode = st.radio("Numbers from", MODES, key=f"{P}mode", horizontal=True)

if mode == MODES[1]:
    st.info("**Textbook example** (the Illustrated Transformer's “Thinking Machines”, d_k = 64). The vectors are "
            "constructed so that the dot products come out as in the book; they are real tensors sent through the "
            "same attention function as the model, but they are not weights of any trained model.")
    tm = thinking_machines()
    tb_labels = textbook_labels()
    tb_word = st.radio("Query", [0, 1], key=f"{P}tb_word", horizontal=True, format_func=lambda i: tb_labels[i])
    show_steps(textbook_steps(tm, tb_word), tb_labels, tb_labels[tb_word], f"{P}tb_", textbook=True)
else:
    s = word_steps(a.trace, module, head, word)
    st.markdown(f"Query word **{md(labels[word])}**, encoder layer {layer}, head {head}.")
    show_steps(s, labels, labels[word], f"{P}w_", off=(module, head) in iv.heads_off)

st.header("All words at once: the matrix form")
T, d_k = len(labels), cfg.d_k
st.markdown("Stacking every word's q, k and v as rows of Q, K and V, all the dot products are one matrix "
            "product and the whole layer is one line:")
st.latex(r"Z = \operatorname{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}}\right) V")
st.latex(rf"\underbrace{{[{T}, {d_k}]}}_{{Q}} \cdot \underbrace{{[{d_k}, {T}]}}_{{K^\top}} \to [{T}, {T}] "
         rf"\xrightarrow{{\ /\sqrt{{d_k}},\ \mathrm{{softmax}}\ }} [{T}, {T}] \cdot \underbrace{{[{T}, {d_k}]}}_{{V}} "
         rf"\to \underbrace{{[{T}, {d_k}]}}_{{Z}}")
if not iv.scale:
    st.warning("Scaling is switched off: “scaled” below equals the raw scores.")
t = a.trace
c1, c2 = st.columns(2)
with c1:
    matrix(t[f"{module}.scores"][0, head], labels, labels, "scores", title="QKᵀ (scores)", shape=f"[{T}, {T}]",
           key=f"{P}m_scores", x_title="key", y_title="query")
with c2:
    matrix(t[f"{module}.scaled"][0, head], labels, labels, "scores", title="QKᵀ / √d_k (scaled)",
           shape=f"[{T}, {T}]", key=f"{P}m_scaled", x_title="key", y_title="query")
c1, c2 = st.columns(2)
with c1:
    matrix(t[f"{module}.weights"][0, head], labels, labels, "weights", title="softmax: attention weights",
           shape=f"[{T}, {T}]", key=f"{P}m_weights", x_title="key", y_title="query")
with c2:
    matrix(t[f"{module}.z"][0, head], dims(d_k), labels, "activations", title="Z = weights · V",
           shape=f"[{T}, {d_k}]", key=f"{P}m_z", x_title="dimension", y_title="word")

st.header("Why divide by √d_k?")
st.markdown("If the entries of q and k are independent with mean 0 and variance 1, q·k is a sum of d_k "
            "products of variance 1, so **Var(q·k) = d_k**: the longer the vectors, the larger the scores. Dividing "
            "by the standard deviation √d_k brings the variance back to 1. Try it with random vectors:")
default_dk = cfg.d_k if cfg.d_k in D_KS else 64
dk = st.select_slider("d_k", options=D_KS, value=default_dk, key=f"{P}dk")
samples = dot_product_samples(dk, n=4000, seed=0)
chosen = summarize(samples, dk)
var_rows = _variance(tuple(D_KS))
c1, c2 = st.columns(2)
c1.metric(f"measured Var(q·k), d_k = {dk}", f"{chosen.variance:.1f}", help="theory: d_k")
c2.metric("measured Var(q·k / √d_k)", f"{chosen.variance_scaled:.3f}", help="theory: 1")
st.plotly_chart(histogram_figure(samples, dk), key=f"{P}hist", config={"displayModeBar": False})
c1, c2 = st.columns(2)
with c1:
    st.plotly_chart(variance_figure(var_rows), key=f"{P}var", config={"displayModeBar": False})
with c2:
    st.dataframe(variance_table(var_rows), hide_index=True)
    st.caption("The range of the raw scores widens like √d_k (last column): with d_k in the hundreds, scores of "
               "±50 are ordinary, and the softmax of such numbers is all-or-nothing.")
st.markdown("Large scores make the softmax **saturate**: almost all the weight goes to one word, the others get "
            "almost none. There the softmax is flat, its Jacobian ∂a/∂s = diag(a) − aaᵀ is nearly 0, and hardly "
            "any gradient reaches Q and K during training. One query against 8 random keys:")
sat = saturation(dk, n_keys=8, seed=0)
c1, c2, c3, c4 = st.columns(4)
c1.metric("max weight, no scaling", f"{sat.max_raw:.3f}")
c2.metric("max weight, ÷√d_k", f"{sat.max_scaled:.3f}")
c3.metric("‖Jacobian‖, no scaling", f"{sat.jacobian_raw:.4f}")
c4.metric("‖Jacobian‖, ÷√d_k", f"{sat.jacobian_scaled:.4f}")
st.plotly_chart(saturation_figure(sat.weights_raw, sat.weights_scaled, [f"key {j}" for j in range(8)]),
                key=f"{P}sat", config={"displayModeBar": False})
st.dataframe(saturation_table(_saturation(tuple(D_KS))), hide_index=True)
st.caption("Averages over 200 random queries, 8 keys each. ‖Jacobian‖ is the Frobenius norm of the softmax's "
           "Jacobian: how strongly the weights react to a change of the scores.")

st.header("Attention without learned weights")
x = layer_output(t, layer - 1)  # the vectors entering this layer (layer 0: embedding + positional encoding)
plain = plain_self_attention(x)
st.markdown("The simplest self-attention uses the input vectors themselves as queries, keys and values "
            "(“dot-product self-attention”):")
st.latex(r"a_{nm} = \frac{\exp(x_n^\top x_m)}{\sum_{m'} \exp(x_n^\top x_{m'})}, \qquad "
         r"y_n = \sum_m a_{nm}\, x_m, \qquad Y = \operatorname{softmax}(XX^\top)\,X")
st.markdown("Each a_nm ≥ 0 and each row sums to 1. Nothing is learned: every feature of a word counts equally "
            "when matching, and a word usually matches itself best. Learned W_Q, W_K, W_V let each head choose "
            "which features to compare and what to pass on.")
c1, c2 = st.columns(2)
with c1:
    matrix(plain.weights, labels, labels, "weights", title=f"softmax(XXᵀ), X = input of layer {layer}",
           shape=f"[{T}, {T}]", key=f"{P}plain", x_title="key", y_title="query")
with c2:
    matrix(t[f"{module}.weights"][0, head], labels, labels, "weights",
           title=f"learned: layer {layer}, head {head}", shape=f"[{T}, {T}]", key=f"{P}learned",
           x_title="key", y_title="query")

st.header("What does “it” refer to?")
st.markdown("In “…because **it** was too tired”, *it* is the animal; in “…too **wide**”, it is the street. "
            "Where does *it* look, in every head of every encoder layer? (Same model, both sentences.)")
c1, c2 = st.columns(2)
c1.button("Use “… too tired” on this page", on_click=_set_sentence, args=(TIRED,), key=f"{P}load_tired")
c2.button("Use “… too wide” on this page", on_click=_set_sentence, args=(WIDE,), key=f"{P}load_wide")
cols = st.columns(2)
for col, text, name in zip(cols, (TIRED, WIDE), ("tired", "wide"), strict=True):
    with col:
        ca = analysis(text=text)
        it = find_word(ca.prepared.tokens, "it")
        st.markdown(f"**“… too {name}”** → {md(ca.translation)}")
        if it is None:
            st.info("This model's vocabulary splits the sentence differently: no “it” to follow.")
            continue
        rows = word_across_layers(ca.trace, "enc", "self_attn", cfg.n_enc_layers, it)
        hl = head_labels(cfg.n_enc_layers, cfg.n_heads)
        fig = heatmap(rows, ca.src_labels, hl, "weights", x_title="key word", y_title="layer · head")
        st.plotly_chart(fig, key=f"{P}coref_{name}", config={"displayModeBar": False})
        st.dataframe(coref_table(rows, hl, ca.src_labels, ca.prepared.tokens, it))
st.caption("The translations (il / elle) show whether the model resolved *it*. Attention need not point at the "
           "referent itself: a head may read the adjective (tired / wide) that decides it, and later layers mix what "
           "each word has gathered. A small model trained on a toy set need not do it the way a person would.")
