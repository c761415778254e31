"""Before the Transformer: the sentence through a recurrent encoder-decoder with attention, step by step,
then the same attention formulas on the Transformer's encoder-decoder attention, then the measurements."""

import streamlit as st

from explain import recompute
from model.checkpoint import count_parameters
from model.pipeline import label_word
from pages.content import before as text
from ui import shell
from ui.before_steps import P, chart, measured_section, word_slider
from ui.models import content_key
from ui.rnn import RNN_LABELS, STATE_KEY, available, view
from ui.widgets import fold, intro, md, notice, once, page_link, pick, section, sentence_header, small_table
from viz import rnn as vr
from viz.heatmap import table

shell.enter(__file__)  # first: re-enter through app.py if Streamlit ran this page bare


def rnn_chart(build, key: str, *content, note=None) -> None:
    """`chart(build(), key)` and its notice `note()` drawn once per content: a figure of the recurrent model `kind` on
    the sentence (and `content`, the step it shows); a class that follows draws it once."""

    def draw() -> None:
        chart(build(), key)
        if note is not None:
            notice(note())

    once(f"before.{key}", (kind, a.prepared.text, *content), draw)


st.title(text.TITLE)
intro(text.INTRO)
kind = pick("Recurrent model", available(), STATE_KEY, style="radio", format_func=RNN_LABELS.get)
v = view(kind)
a, tf = v.rnn, v.transformer
cfg = v.bundle.config
st.caption(
    text.model_line(cfg.cell, cfg.attention, cfg.hidden, count_parameters(cfg), v.bundle.meta.get("metrics", {}))
)

if a.prepared.empty:
    st.info(text.NO_SENTENCE)
else:
    sentence_header(a, show_translation=False)
    st.markdown(
        f"**Recurrent model:** {md(a.translation) or '*(empty)*'} · **Transformer:** "
        f"{md(tf.translation) or '*(empty)*'}"
    )
    t = a.trace
    src = vr.numbered(a.src_labels)  # positions from 1 on this page, as in its formulas (h_1 … h_m, s_1, ...)

    section("1 · The encoder reads one word at a time", text.ENCODER)
    for line in text.GRU_LATEX if cfg.cell == "gru" else text.LSTM_LATEX:
        st.latex(line)
    step = st.slider("Encoder step i", 1, len(src), len(src), key=f"{P}enc_step") - 1
    rnn_chart(
        lambda: vr.encoder_figure(t, step, src), "enc", step, note=lambda: vr.encoder_notice(t, step, src, cfg.cell)
    )
    st.caption(text.ENCODER_GREY)

    section("2 · One decoder step: scores, α and the context c_t", text.DECODER)
    for line in text.ADDITIVE_LATEX if cfg.attention == "additive" else text.QKV_LATEX:
        st.latex(line)
    st.latex(text.STATE_LATEX)
    out = vr.numbered(a.next_labels)
    dstep = word_slider("Decoder step t (the word it outputs)", out, f"{P}dec_step")
    s = vr.decoder_step(t, dstep, out)
    rnn_chart(lambda: vr.bars_figure(s.scores, s.alpha, src), "step", dstep, note=lambda: vr.step_notice(s, src, dstep))
    with fold("Show the context c_t of this step and its numbers", f"{P}fold_context") as shown:
        if shown:
            chart(vr.context_figure(s, dstep), "context")
            small_table(vr.step_table(s, src), hide_index=True)
    st.caption(text.INDEX_NOTE)

    section("3 · Every step at once: the alignment matrix", text.ALIGNMENT)
    alpha = t["rnn.dec.alpha"][0]
    rnn_chart(lambda: vr.alignment_figure(alpha, src, out), "align", note=lambda: vr.alignment_notice(alpha, src, out))
    with fold("α as a table (rnn.dec.alpha)", f"{P}fold_alpha") as shown:
        if shown:
            st.dataframe(table(alpha, src, out))

    section("4 · Remove the RNN, keep the attention", text.DERIVATION)
    for line in text.DERIVATION_LATEX:
        st.latex(line)
    n_layers, n_heads = recompute.decoder_layers_and_heads(tf.trace)
    same = [label_word(w) for w in out] == [label_word(w) for w in tf.next_labels]
    best_layer, best_head = recompute.closest_head(tf.trace, alpha, same)
    c1, c2 = st.columns(2)
    with c1:
        layer = pick(
            "Decoder layer", list(range(n_layers)), f"{P}layer", default=best_layer, format_func=lambda i: f"layer {i}"
        )
    with c2:
        head = pick("Head", list(range(n_heads)), f"{P}head", default=best_head, format_func=lambda h: f"head {h}")
    st.caption(text.head_note(same))
    x = recompute.cross_attention(tf.trace, layer, head, tf.interventions.scale)
    tf_src, tf_out = vr.numbered(tf.src_labels), vr.numbered(tf.next_labels)
    off = (x.module, head) in tf.interventions.heads_off
    once(
        "before.tf_align",
        (kind, a.prepared.text, *content_key(tf), layer, head),
        lambda: (  # both models' content
            chart(vr.alignment_figure(x.alpha, tf_src, tf_out), "tf_align"),
            notice(vr.cross_notice(x, tf_src, tf_out, head, off)),
            notice(vr.agreement_notice(alpha, x.alpha, out, tf_out, src)),
        ),
    )
    st.caption(text.SCALE_NOTE)
    with fold("Show one output word: Kᵀq, its softmax, and c = V·α beside the model's z", f"{P}fold_word") as shown:
        if shown:
            j = word_slider("Output word j", tf_out, f"{P}j")
            col1, col2 = st.columns(2)
            with col1:
                st.markdown(f"**Kᵀq_:{j + 1} and its softmax** (queries {x.module}.q, keys {x.module}.k)")
                chart(vr.bars_figure(x.scores[j], x.alpha[j], tf_src, "Kᵀq / √d_k"), "tf_step")
            with col2:
                st.markdown(f"**c_:{j + 1} = V·α_:{j + 1}** next to the model's own {x.module}.z")
                chart(vr.context_pair_figure(x, j), "tf_c")
            notice(vr.cross_step_notice(x, j, tf_src, tf_out, off))
    with fold("Show every output word at once: C = [c_:1 … c_:t], V·α for each column", f"{P}fold_C") as shown:
        if shown:
            chart(vr.c_matrix_figure(x, tf_out), "tf_C")
            notice(vr.c_matrix_notice(x, off))
    st.markdown(text.NO_RECURRENCE)

measured_section(text)

st.divider()
page_link("pages/why_attention.py", text.NEXT_WHY)
page_link("pages/tokens.py", text.NEXT_TOKENS)
