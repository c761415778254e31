"""Self-attention, step by step: one word's query against every key, the softmax, the weighted values."""

from __future__ import annotations

import streamlit as st

from explain.recompute import textbook_steps
from explain.textbook import thinking_machines
from model.examples import COREFERENCE_WIDE
from pages.content import self_attention as text
from ui import shell
from ui.attention_steps import coref_section, focus_line, show_steps, show_why_scale
from ui.classroom.plans import hidden_head, mystery_box
from ui.models import analysis, content_key, coref_defaults, current_model, one_word
from ui.self_attention_steps import matrix_section, plain_section
from ui.state import DEFAULT_SENTENCE
from ui.widgets import fold, intro, keep_valid, md, next_link, once, pick, require_sentence, sentence_header
from viz import attention as va
from viz import heads as vh

shell.enter(__file__)  # first: re-enter through app.py if Streamlit ran this page bare

P = "self_attention_"  # widget key prefix
TIRED = DEFAULT_SENTENCE
WIDE = COREFERENCE_WIDE
MODES = ("Your sentence, the trained model", "Thinking Machines (textbook example)")
KEYS = (f"{P}layer", f"{P}head", f"{P}word")


a = analysis()
once(
    "self_attention.top",
    content_key(a),
    lambda: (
        st.title("Self-attention, step by step"),
        intro(text.INTRO),
        require_sentence(a),
        sentence_header(a),
    ),
)  # (empty: stops)
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
    keep_valid(f"{P}mode", MODES, MODES[0])  # (a class's shared choice: one of these)
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
        keep_valid(f"{P}tb_word", [0, 1], 0)
        tb_word = st.radio("Query", [0, 1], key=f"{P}tb_word", horizontal=True, format_func=lambda i: tb_labels[i])
        show_steps(
            textbook_steps(thinking_machines(), tb_word),
            tb_labels,
            tb_labels[tb_word],
            f"{P}tb_",
            textbook=True,
            query=tb_word,
        )
    else:
        c1, c2, c3 = st.columns(3)
        with c1:
            layer = pick("Encoder layer", range(cfg.n_enc_layers), KEYS[0], format_func=lambda i: f"layer {i}")
        with c2:
            head = pick("Head", range(cfg.n_heads), KEYS[1], format_func=lambda h: f"head {h}")
        with c3:
            word = pick(
                "Query word",
                range(len(labels)),
                KEYS[2],
                default=vh.find_word(a.prepared.tokens, "it") or 0,
                format_func=lambda i: labels[i],
            )
        if focus is not None:
            focus_line(text, focus, a.prepared.tokens, labels)
        st.markdown(f"Query word **{md(labels[word])}**, encoder layer {layer}, head {head}.")
        if hidden_head() == (f"enc.{layer}.self_attn", head):  # the class's mystery head: hidden until the reveal
            mystery_box(head)
            return
        steps, proj = one_word(a, layer, head, word)
        show_steps(
            steps,
            labels,
            labels[word],
            f"{P}w_",
            off=(f"enc.{layer}.self_attn", head) in iv.heads_off,
            proj=proj,
            content=(*content_key(a), layer, head, word),
        )
    matrix_section(a, cfg.d_k, layer, head, word, mode == MODES[1], mode, text)

    once("self_attention.why_scale", (), lambda: st.header("Why divide by √d_k?"))
    with fold("Show the experiment: Var(q·k) grows with d_k, and the softmax saturates", f"{P}fold_scale") as shown:
        if shown:
            show_why_scale(cfg.d_k, P, text)

    plain_section(a, layer, head, text)


one_head(a, cfg, focus)

coref_section((TIRED, WIDE), cfg, P, text)

next_link(__file__)
