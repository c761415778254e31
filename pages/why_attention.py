"""Why attention: the paper's Table 1 with a calculator, path lengths, the n x n memory, and Table 2."""

import streamlit as st

from model.paper import CITATION, TABLE1, TABLE1_CAPTION
from ui import shell
from ui.models import analysis, current_model
from viz.complexity import (
    attention_matrix_bytes,
    bleu_display,
    bleu_figure,
    bleu_frame,
    cheaper_than_recurrence,
    costs_figure,
    human_bytes,
    layer_costs,
)
from viz.heatmap import shape_text

shell.enter(__file__)  # first: re-enter through app.py if Streamlit ran this page bare

st.title("Why attention?")
st.markdown(
    "Before the Transformer, translation models read a sentence with a **recurrent network** (RNN, LSTM): one "
    "word after the other, each step waiting for the previous one. Attention was first added to RNNs to reach "
    "back to distant words. The paper's question: since attention can reach *any* word directly, do we still "
    "need the recurrence? This page compares the layer types the way the paper does, then shows its results."
)

a = analysis()
cfg = current_model().bundle.config
if a.prepared.empty:
    st.info("Type a sentence in the sidebar (for example *i am a student*) to see its own attention matrices "
            "below; the tables on this page do not need one.")

st.header("1. Three ways to mix information between positions")
rows = "\n".join(f"| {t.name} | ${t.complexity}$ | ${t.sequential}$ | ${t.path}$ |" for t in TABLE1)
st.markdown("| Layer type | Complexity per layer | Sequential operations | Maximum path length |\n"
            "|---|---|---|---|\n" + rows)
st.caption(f"Table 1 of the paper ({CITATION}). {TABLE1_CAPTION}")
st.markdown(
    "- **Sequential operations**: how many steps must wait for each other. An RNN needs O(n) steps for a "
    "sentence of n words, so it cannot be spread over a GPU's thousands of cores; self-attention handles all "
    "positions at once.\n"
    "- **Maximum path length**: how many layers a signal crosses between two words. In an RNN the first word "
    "reaches the last through n steps, and long-range dependencies fade on the way (even with LSTM/GRU, RNNs "
    "needed attention for them). In self-attention every word is one step from every other: O(1).\n"
    "- **Complexity per layer**: self-attention compares all n² pairs of words; a recurrent layer multiplies "
    "a d × d matrix at each of n steps."
)

st.header("2. Calculator")
c = st.columns(4)
n = int(c[0].number_input("n: sequence length", 1, 100_000, 50, key="why_n"))
d = int(c[1].number_input("d: representation size", 1, 100_000, 512, key="why_d"))
k = int(c[2].number_input("k: kernel size", 1, 1_000, 3, key="why_k"))
r = int(c[3].number_input("r: neighbourhood (restricted)", 1, 100_000, 8, key="why_r"))
costs = layer_costs(n, d, k, r)
attn_ops, rnn_ops = int(costs["count"][0]), int(costs["count"][1])
st.dataframe(costs, hide_index=True)
st.plotly_chart(costs_figure(costs), key="why_costs", config={"displayModeBar": False})
if cheaper_than_recurrence(n, d):
    st.success(f"n = {n} < d = {d}: self-attention ({attn_ops:,} operations) is cheaper than a recurrent layer "
               f"({rnn_ops:,}). This is the usual case in translation, where sentences are shorter than the "
               "representation size.")
else:
    st.warning(f"n = {n} ≥ d = {d}: self-attention ({attn_ops:,} operations) costs at least as much as a "
               f"recurrent layer ({rnn_ops:,}). For very long sequences the paper suggests restricted "
               f"self-attention over a neighbourhood of r positions, at the price of a path length of n/r.")
st.caption("Counts are the formulas inside the O(·), constant factors dropped. The convolution's path length "
           "⌈log_k n⌉ is for dilated convolutions (contiguous kernels need ⌈n/k⌉ layers).")

st.header("3. The price: an n × n matrix per head")
st.markdown("Self-attention stores a weight for every pair of positions: an n × n matrix per head and per layer. "
            "Memory grows with the square of the sentence length.")
c = st.columns(3)
heads = int(c[0].number_input("heads", 1, 256, 8, key="why_heads"))
layers = int(c[1].number_input("attention layers", 1, 1_000, 6, key="why_layers"))
c[2].metric(f"attention weights for n = {n} (float32)", human_bytes(attention_matrix_bytes(n, heads, layers)))
st.caption(f"{n} × {n} × {heads} heads × {layers} layers × 4 bytes = "
           f"{attention_matrix_bytes(n, heads, layers):,} bytes, for one sentence. Doubling n multiplies it by 4.")
if not a.prepared.empty:
    w = a.trace["enc.0.self_attn.weights"]
    m = w.shape[-1]
    per_layer = w.numel() * w.element_size()
    st.markdown(
        f"**Your sentence in this model:** enc.0.self_attn.weights is {shape_text(w, 'B, H, m, m')}: "
        f"{per_layer:,} bytes for one encoder layer; {cfg.n_enc_layers} encoder layers hold "
        f"{human_bytes(per_layer * cfg.n_enc_layers)}."
    )

st.header("4. The results: better translations for less training")
frame = bleu_frame()
st.plotly_chart(bleu_figure(frame), key="why_bleu", config={"displayModeBar": False})
st.dataframe(bleu_display(frame), hide_index=True)
st.caption(f"From the paper ({CITATION}), Table 2: BLEU on the newstest2014 English-German and English-French "
           "test sets, and the estimated training cost in floating-point operations. \"-\": not reported.")

st.header("5. Summary")
st.markdown(
    "- **Upside:** the big Transformer outperformed every earlier model on both tasks, recurrent and "
    "convolutional, single models and ensembles, at a fraction of the ensembles' training cost: all positions "
    "are processed in parallel.\n"
    "- **Downside:** it is expensive: large models, and time and memory that grow quadratically with the "
    "sequence length (the n × n attention matrices).\n"
    "- **Decoding is still one word at a time**: the decoder must see its previous words before choosing the "
    "next, so generation stays sequential (greedy or beam search).\n"
    "- **Recent trends:** stacked Transformer blocks became the general-purpose sequence (and set) encoder; "
    "pre-trained with self-supervision and transferred to many tasks (BERT, GPT-2, GPT-3, XLNet, ALBERT, "
    "RoBERTa, Reformer, T5, ...), and adopted beyond language: vision, recommender systems, drug discovery."
)
