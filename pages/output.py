"""Output and decoding: final linear + softmax, one-hot targets and cross-entropy, label smoothing,
greedy decoding and beam search step by step."""

import streamlit as st

from model.data import dataset_reference
from ui import shell
from ui.models import analysis, beam, current_model, teacher_forced
from ui.widgets import md, require_sentence, sentence_header
from viz import decoding as vo
from viz.heatmap import shape_text

shell.enter(__file__)  # first: re-enter through app.py if Streamlit ran this page bare


def keep_valid(key: str, options: list, default) -> None:
    """Reset a widget's stored choice when it is no longer among its options (the sentence changed)."""
    if key in st.session_state and st.session_state[key] not in options:
        st.session_state[key] = default


def step_picker(label: str, n: int, key: str) -> int:
    """1..n with a slider (no slider when there is a single step)."""
    if n <= 1:
        st.caption(f"{label}: 1 (the only step)")
        return 1
    options = list(range(1, n + 1))
    keep_valid(key, options, 1)
    return st.select_slider(label, options, key=key)


a = analysis()
cur = current_model()
bundle = cur.bundle
itos = bundle.tgt_vocab.itos
V = len(itos)
tr = a.trace

st.title("Output and decoding")
st.markdown(
    "The decoder's last block leaves one vector of d_model numbers per position. A **linear layer** turns it into "
    f"one score (*logit*) per word of the target vocabulary ({V} words here), and a **softmax** turns the scores "
    "into probabilities. Training compares them with the right word; translating picks words from them, one at a "
    "time (greedy) or keeping several candidates (beam search)."
)
require_sentence(a)
sentence_header(a)
T = len(a.tgt_labels)

# --- 1. Linear + softmax ---------------------------------------------------------------------------
st.header("1. The final linear layer and softmax")
st.latex(r"\text{logits}_t = h_t W + b \in \mathbb{R}^{V},\qquad p_t = \mathrm{softmax}(\text{logits}_t),"
         r"\qquad \hat y_t = \arg\max_w p_t(w)")
keep_valid("output_pos", list(range(T)), 0)
pos = st.selectbox("Decoder position", list(range(T)), key="output_pos",
                   format_func=lambda t: f"{a.tgt_labels[t]}  →  predicts {a.next_labels[t].split(' ', 1)[1]}")
h, logits, probs = tr["dec.out"][0, pos], tr["logits"][0, pos], tr["probs"][0, pos]
best = int(logits.argmax())
m1, m2, m3, m4 = st.columns(4)
m1.metric("decoder output h_t", f"{h.numel()} numbers", help=f"dec.out is {shape_text(tr['dec.out'], 'B, t, D')}")
m2.metric("logits vector", f"{logits.numel()} numbers", help=f"= target vocabulary size; logits is "
                                                             f"{shape_text(tr['logits'], 'B, t, V')}")
m3.metric("argmax index", best)
m4.metric("which word is that index?", itos[best])
st.caption(f"W is {shape_text(bundle.model.generator.weight.T, 'D, V')}: one column of weights per vocabulary word. "
           f"The index with the highest value is looked up in the vocabulary: index {best} is “{itos[best]}”.")
top = vo.top_candidates(probs, logits, itos, 10)
c1, c2 = st.columns([3, 2])
with c1:
    st.plotly_chart(vo.top_bar(top, f"Top 10 of p_{pos} (softmax over all {V} words)", highlight=itos[best]),
                    key="output_top", config={"displayModeBar": False})
with c2:
    st.dataframe(top, hide_index=True)
    st.metric("probability of these 10 together", f"{float(top['probability'].sum()):.4f}")
st.markdown(f"**All {V} logits at this position** (hover for the word):")
st.plotly_chart(vo.logits_figure(logits, itos), key="output_logits", config={"displayModeBar": False})

# --- 2. One-hot target and cross-entropy -------------------------------------------------------------
st.header("2. Training: the one-hot target and the cross-entropy loss")
st.markdown("*Example from the lecture notes*: an output vocabulary of six words with indices 0-5; the word "
            "“am” as a target is a vector with a single 1 at its index.")
st.dataframe(vo.textbook_one_hot("am"))
st.markdown(
    "In training, the model's output distribution at each position is compared with the one-hot vector of the "
    "right next word. The cross-entropy between them only keeps the log-probability of the right word:"
)
st.latex(r"L_t = -\sum_{w} y_t(w)\,\log p_t(w) = -\log p_t(\text{gold}_t),\qquad L = \frac{1}{T}\sum_t L_t")
ss = st.session_state
if ss.get("output_reference_for") != a.prepared.text or "output_reference" not in ss:
    ref = dataset_reference(a.prepared.text, bundle.direction)
    ss["output_reference"] = ref if ref is not None else a.translation
    ss["output_reference_for"] = a.prepared.text
reference = st.text_input("Reference translation (fed to the decoder: teacher forcing)", key="output_reference",
                          help="Defaults to the toy data set's translation of your sentence, or the model's own "
                               "translation when the sentence is not in the set.")
tf = teacher_forced(reference)
if tf.unknown:
    st.warning("Not in the target vocabulary, fed as <unk> (the model cannot produce these): "
               + ", ".join(f"**{md(w)}**" for w in tf.unknown))
st.dataframe(vo.loss_table(tf, itos), hide_index=True)
l1, l2 = st.columns(2)
l1.metric("mean cross-entropy L (nats per token)", f"{tf.loss:.4f}")
l2.metric("positions where the argmax is the gold word",
          f"{sum(p == g for p, g in zip(tf.predicted, tf.gold, strict=True))} / {len(tf.gold)}")

st.subheader("Gradient and update, in brief")
keep_valid("output_grad_pos", list(range(len(tf.gold))), 0)
gpos = st.selectbox("Position", list(range(len(tf.gold))), key="output_grad_pos",
                    format_func=lambda t: f"{tf.in_labels[t]}  →  gold {itos[tf.gold[t]]}")
st.markdown(
    "1. **Compare** the output distribution p with the one-hot target y.\n"
    "2. **Loss**: the cross-entropy, as above.\n"
    "3. **Gradient**: for softmax + cross-entropy, the gradient of the loss with respect to the logits is simply "
    "p − y (negative on the gold word: raise its logit; positive elsewhere: lower them). Backpropagation carries "
    "it back to every weight.\n"
    "4. **Update** every parameter: θ ← θ − η ∂L/∂θ (this model was trained with Adam, a refined version)."
)
st.dataframe(vo.gradient_table(tf.trace["probs"][0, gpos], tf.gold[gpos], itos), hide_index=True)

# --- 3. Label smoothing -----------------------------------------------------------------------------
st.header("3. Label smoothing")
eps = st.slider("ε (label smoothing)", 0.0, 0.5, 0.1, 0.01, key="output_eps",
                help="The paper and the training of this model use ε = 0.1.")
st.markdown(
    "The paper (section 5.4) trains against a softened target: **1 − ε** on the right word and **ε** shared by "
    "all the others. The model is discouraged from becoming certain, which hurts perplexity but helps accuracy "
    "and BLEU. With the model's real probabilities for your reference:"
)
st.latex(rf"q(w) = \begin{{cases}} 1-\varepsilon & w = \text{{gold}} \\ \varepsilon/(V-1) & \text{{otherwise}}"
         rf"\end{{cases}}\qquad V = {V},\; \varepsilon = {eps:g}:\; q(\text{{gold}}) = {1 - eps:.4g},\;"
         rf" q(\text{{other}}) = {eps / (V - 1):.3g}")
sm = vo.label_smoothing(tf.trace["probs"][0], tf.gold, eps, itos)
s1, s2, s3 = st.columns(3)
s1.metric("loss vs one-hot", f"{sm.plain:.4f}")
s2.metric("loss vs smoothed target", f"{sm.smoothed:.4f}")
s3.metric("lowest possible smoothed loss (entropy of q)", f"{sm.floor:.4f}")
keep_valid("output_ls_pos", list(range(len(tf.gold))), 0)
lpos = st.selectbox("Position to plot", list(range(len(tf.gold))), key="output_ls_pos",
                    format_func=lambda t: f"{tf.in_labels[t]}  →  gold {itos[tf.gold[t]]}")
st.plotly_chart(vo.target_figure(tf.trace["probs"][0, lpos], tf.gold[lpos], eps, itos), key="output_targets",
                config={"displayModeBar": False})
st.dataframe(sm.table, hide_index=True)
st.caption("The training code uses PyTorch's `label_smoothing`, which spreads ε over all V words including the "
           f"gold one (gold gets 1 − ε + ε/V = {1 - eps + eps / V:.4f}): the same idea, a hair different.")

# --- 4. Greedy decoding -----------------------------------------------------------------------------
st.header("4. Greedy decoding, step by step")
st.markdown(
    "Translating, there is no reference. The decoder starts from `<bos>`, takes the most probable word, appends "
    "it to its input and runs again, until it says `<eos>`. Each step is one pass of the decoder over the prefix."
)
g = a.greedy
st.dataframe(vo.greedy_table(g, itos), hide_index=True)
gs = step_picker("Greedy step", len(g.steps), "output_greedy_step")
step = g.steps[gs - 1]
st.markdown(f"**Step {gs}**: the decoder has read {md(vo.prefix_words(step.prefix, itos))} and chooses "
            f"**{md(itos[step.chosen])}**.")
cand = vo.step_candidates(step, itos)
k1, k2 = st.columns([3, 2])
with k1:
    st.plotly_chart(vo.top_bar(cand, f"Top {len(cand)} candidates at step {gs}", highlight=itos[step.chosen]),
                    key="output_greedy_chart", config={"displayModeBar": False})
with k2:
    st.dataframe(cand, hide_index=True)
if not g.finished:
    st.info("The model did not say <eos> before the length limit.")

# --- 5. Beam search --------------------------------------------------------------------------------
st.header("5. Beam search")
st.markdown(
    "Greedy decoding can paint itself into a corner: a likely first word may lead to an unlikely sentence. Beam "
    "search keeps the **k** most probable prefixes at every step, expands each by its k best next words, and keeps "
    "the k best of all expansions (by total log-probability). Finished hypotheses (that said `<eos>`) are ranked by "
    "a **length-normalised** score, so short outputs are not favoured just for having fewer factors < 1."
)
st.latex(r"\log P(y) = \sum_t \log p(y_t \mid y_{<t}, x),\qquad \text{score}(y) = "
         r"\frac{\log P(y)}{\left((5+|y|)/6\right)^{\alpha}}")
b1, b2 = st.columns(2)
with b1:
    k = st.slider("Beam width k", 1, 5, 3, key="output_beam_k")
with b2:
    alpha = st.slider("Length normalisation α", 0.0, 1.5, 0.6, 0.1, key="output_beam_alpha",
                      help="0: plain total log-probability. GNMT's default is 0.6.")
res = beam(k, alpha)
st.plotly_chart(vo.beam_tree(res, itos), key="output_beam_tree", config={"displayModeBar": False})
st.caption("Blue: kept in the beam; green squares: finished (said <eos>); grey: pruned; orange: the path of the "
           "winner. Hover a node for p(word | prefix), the total log-probability and the normalised score.")
bs = step_picker("Beam step", len(res.steps), "output_beam_step")
st.dataframe(vo.beam_step_table(res, bs, itos, bundle.langs[1]), hide_index=True)
st.markdown("**Finished hypotheses**, best normalised score first:")
st.dataframe(vo.finished_table(res, itos, bundle.langs[1]), hide_index=True)

st.subheader("Beam search vs greedy")
g_lp, g_score, g_len = vo.greedy_score(g, alpha)
beam_out = vo.ids_text(res.best.output, itos, bundle.langs[1])
greedy_out = vo.ids_text(g.tokens, itos, bundle.langs[1])
st.dataframe({"": ["greedy", f"beam search (k = {k})"], "output": [greedy_out, beam_out],
              "length (with <eos>)": [g_len, len(res.best.tokens)], "total log-prob": [g_lp, res.best.log_prob],
              "normalised score": [g_score, res.best.score]}, hide_index=True)
if beam_out == greedy_out:
    k1_note = " With k = 1 the beam holds a single hypothesis: beam search *is* greedy decoding."
    st.success("Beam search and greedy decoding agree here." + (k1_note if k == 1 else ""))
else:
    st.warning(f"They differ: greedy says **{md(greedy_out)}**, beam search says **{md(beam_out)}**.")

st.subheader("The lecture notes' “another method”: keep the top two words and run the model twice")
st.markdown("Keeping the two best first words, running the model once on each to get the second word, and keeping "
            "the best two pairs is beam search with k = 2. Here are its first two steps on your sentence:")
st.dataframe(vo.run_twice(beam(2, alpha), itos), hide_index=True)
