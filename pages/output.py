"""Output and decoding: final linear + softmax, one-hot targets and cross-entropy, label smoothing,
greedy decoding and beam search step by step."""

import functools

import streamlit as st

from explain import recompute
from explain.paper import SECTIONS
from model.data import dataset_reference
from pages.content import output as text
from ui import shell
from ui.decoding_steps import CHART, beam_section, greedy_section, linear_section
from ui.models import content_key, current_model, teacher_forced, used_text
from ui.widgets import (
    chart,
    fold,
    md,
    metrics_row,
    next_link,
    notice,
    once,
    opening,
    pick,
    reference_box,
    section,
    small_table,
)
from viz import decoding as vo
from viz.embeddings import textbook_one_hot

shell.enter(__file__)  # first: re-enter through app.py if Streamlit ran this page bare

bundle = current_model().bundle
itos = bundle.tgt_vocab.itos
V = len(itos)

a = opening("Output and decoding", text.intro(V))

here = content_key(a)  # the analysis: what the figures below are of (drawn once, replayed to a class)
linear_section(a, bundle, here, text)


def one_hot() -> None:  # the textbook's example: the same for everyone
    section("2. Training: the one-hot target and the cross-entropy loss", text.ONE_HOT)
    small_table(textbook_one_hot("am"))
    st.markdown(text.CROSS_ENTROPY)
    st.latex(text.CROSS_ENTROPY_LATEX)


once("output.one_hot", (), one_hot)


def default_reference() -> str:
    ref = dataset_reference(a.prepared.text, bundle.direction)
    return ref if ref is not None else a.translation


reference = reference_box(
    text.REFERENCE_LABEL, "output_reference", a.prepared.text, default_reference, text.REFERENCE_HELP
)
tf = teacher_forced(reference)
forced = (*here, used_text(reference))  # what the teacher-forced run is of


def loss() -> None:
    if tf.unknown:
        st.warning(
            "Not in the target vocabulary, fed as <unk> (the model cannot produce these): "
            + ", ".join(f"**{md(w)}**" for w in tf.unknown)
        )
    small_table(vo.loss_table(tf, itos), hide_index=True)
    notice(vo.loss_notice(tf, itos))
    with metrics_row():
        st.metric("mean cross-entropy L (nats per token)", f"{tf.loss:.4f}")
        st.metric("positions where the argmax is the gold word", f"{vo.n_right(tf)} / {len(tf.gold)}")


once("output.loss", forced, loss)


def gold_position(label: str, key: str) -> int:
    return pick(
        label, range(len(tf.gold)), key, 0, format_func=lambda t: f"{tf.in_labels[t]}  →  gold {itos[tf.gold[t]]}"
    )


st.subheader("Gradient and update, in brief")
gpos = gold_position("Position", "output_grad_pos")
once(
    "output.gradient",
    (*forced, gpos),
    lambda: (
        st.markdown(text.GRADIENT),
        small_table(vo.gradient_table(vo.output_probs(tf.trace, gpos), tf.gold[gpos], itos), hide_index=True),
    ),
)

st.header("3. Label smoothing")
eps = st.slider(
    "ε (label smoothing)",
    0.0,
    0.5,
    0.1,
    0.01,
    key="output_eps",
    help="The paper and the training of this model use ε = 0.1.",
)
smoothed = (*forced, eps)
sm = functools.cache(lambda: recompute.label_smoothing(vo.output_logits(tf.trace), tf.gold, eps, itos))  # when drawn


def smoothing() -> None:
    st.markdown(text.smoothing(SECTIONS["label smoothing"]))
    st.latex(text.SMOOTHING_LATEX)
    st.latex(text.smoothing_latex(V, eps))
    with metrics_row():
        st.metric("loss vs one-hot", f"{sm().plain:.4f}")
        st.metric("loss vs smoothed target", f"{sm().smoothed:.4f}")
        st.metric("lowest possible smoothed loss (entropy of q)", f"{sm().floor:.4f}")
    p_drop = bundle.config.dropout
    trained = recompute.gold_probability_in_training(bundle.model, a.prepared.src(), tf.gold) if p_drop else None
    notice(vo.confidence_notice(tf.gold_probs, trained, eps, V, p_drop))


once("output.smoothing", smoothed, smoothing)
lpos = gold_position("Position to plot", "output_ls_pos")
with fold("Show the targets at this position", "output_fold_targets") as shown:
    if shown:
        chart(
            vo.target_figure(vo.output_probs(tf.trace, lpos), tf.gold[lpos], eps, itos),
            key="output_targets",
            config=CHART,
        )
        notice(vo.smoothing_notice(vo.output_probs(tf.trace, lpos), tf.gold[lpos], eps, itos))
        with st.expander("Every position: targets and losses"):
            small_table(vo.smoothing_table(sm()), hide_index=True)

once("output.torch_smoothing", smoothed, lambda: st.caption(text.torch_smoothing(eps, sm().smoothed, sm().torch_loss)))

section("4. Greedy decoding, step by step", text.GREEDY)
greedy_section(a, itos, here)
section("5. Beam search", text.BEAM)
st.latex(text.BEAM_LATEX)
beam_section(a, bundle, here, text)
next_link(__file__)
