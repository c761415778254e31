"""The decoder and masking: masked self-attention (with the real numbers), the lecture's 4 x 4 example,
what goes wrong without the look-ahead mask, the padding mask, and encoder-decoder attention."""

from dataclasses import replace

import streamlit as st

from model import pipeline
from model.checkpoint import Bundle, CheckpointError
from ui import shell
from ui.models import analysis, current_model, load_shipped, session_cache
from ui.state import interventions
from ui.widgets import matrix, md, page_link, require_sentence, sentence_header
from viz import decoder as vd
from viz.heatmap import shape_text, table

shell.enter(__file__)  # first: re-enter through app.py if Streamlit ran this page bare


@session_cache(max_entries=64)
def _padding(model_key: str, text: str, partner: str, _bundle: Bundle) -> vd.PaddingDemo:
    return vd.padding_demo(_bundle, text, partner)


@session_cache(max_entries=64)
def _base_translation(model_key: str, text: str, _bundle: Bundle) -> str:
    return pipeline.analyse(_bundle, pipeline.prepare(_bundle, text)).translation


@session_cache(max_entries=64)
def _cheating(keys: str, text: str, reference: str, _base: Bundle, _cheat: Bundle) -> vd.Cheating:
    return vd.cheating_story(_base, _cheat, text, reference)


def operator(symbol: str) -> None:
    """A big +, =, → between two matrices."""
    st.markdown(f"<div style='text-align:center;font-size:2.6rem;padding-top:7rem'>{symbol}</div>",
                unsafe_allow_html=True)


def four_steps(s: vd.MaskSteps, labels: list[str], titles: list[str], shapes: list[str], keys: list[str],
               **kw) -> None:
    """scaled + mask = masked -> softmax -> weights, as a 2 x 2 grid with the operators between."""
    g1, g2, g3 = st.columns([10, 1, 10])
    with g1:
        matrix(s.scaled, labels, labels, "scores", title=titles[0], shape=shapes[0], key=keys[0], **kw)
    with g2:
        operator("+")
    with g3:
        matrix(s.mask, labels, labels, "mask", title=titles[1], shape=shapes[1], key=keys[1], **kw)
    g1, g2, g3 = st.columns([10, 1, 10])
    with g1:
        st.markdown("<div style='font-size:2.2rem;line-height:1'>=</div>", unsafe_allow_html=True)
        matrix(s.masked, labels, labels, "scores", title=titles[2], shape=shapes[2], key=keys[2], **kw)
    with g2:
        operator("→")
    with g3:
        st.markdown("<div style='font-size:1.3rem;line-height:1.7'>softmax, row by row</div>", unsafe_allow_html=True)
        matrix(s.weights, labels, labels, "weights", title=titles[3], shape=shapes[3], key=keys[3], **kw)


def keep_valid(key: str, options: list, default) -> None:
    """Reset a widget's stored choice when it is no longer among its options (other sentence or model)."""
    if key in st.session_state and st.session_state[key] not in options:
        st.session_state[key] = default


def picker(label: str, n: int, key: str, average: bool = False, prefix: str = "") -> int | None:
    """Horizontal radio over n layers/heads (optionally with -1 = average); returns the index or None (average)."""
    options = list(range(n)) + ([-1] if average else [])
    keep_valid(key, options, 0)
    choice = st.radio(label, options, key=key, horizontal=True,
                      format_func=lambda i: "average of heads" if i < 0 else f"{prefix}{i}")
    return None if choice < 0 else choice


def reference_default(text: str, bundle: Bundle, fallback) -> str:
    ref = vd.dataset_reference(text, bundle.direction)
    return ref if ref is not None else fallback()


a = analysis()
cur = current_model()
bundle = cur.bundle
cfg = bundle.config
itos = bundle.tgt_vocab.itos
iv = interventions()

st.title("The decoder and masking")
st.markdown(
    "The decoder writes the translation one word at a time. Each of its blocks has **three** sub-layers: "
    "**masked self-attention** over the words written so far, **encoder-decoder attention** over the encoded "
    "source sentence, and a **feed-forward** net; each is wrapped in a residual connection and layer "
    "normalisation (add & norm). Masks decide what each position may look at: the **look-ahead mask** hides "
    "future target words, the **padding mask** hides `<pad>` filler. Everything below is computed on your "
    "sentence by the real model, unless it says *example from the lecture notes*."
)
require_sentence(a)
sentence_header(a)
text = a.prepared.text
T = len(a.tgt_labels)

# --- 1. The block ---------------------------------------------------------------------------------
st.header("1. One decoder block")
left, right = st.columns([2, 3])
with left:
    st.graphviz_chart(vd.block_dot(cfg.n_dec_layers))
with right:
    st.markdown(
        f"- **Masked self-attention**: each target position mixes in the positions *up to itself*.\n"
        f"- **Encoder-decoder attention**: queries from the decoder, keys and values from the encoder output, so "
        f"every target position can read the whole source sentence.\n"
        f"- **Feed-forward**: the same two-layer net at every position.\n"
        f"- Stacked N times: the paper uses N = 6, this model N = {cfg.n_dec_layers}. Every block keeps the shape "
        f"[t, d_model] = [{T}, {cfg.d_model}] for your translation (t = {T} decoder positions)."
    )
    layer_b = picker("Block", cfg.n_dec_layers, "decoder_block_layer", prefix="decoder layer ")
    st.dataframe(vd.block_table(a.trace, layer_b), hide_index=True)

# --- 2. Masked self-attention ---------------------------------------------------------------------
st.header("2. Masked self-attention: scores + mask = masked scores → softmax")
st.markdown(
    "While translating, the word at position *t* is not written yet when position *t − 1* predicts it. In "
    "training the whole reference is fed in at once (teacher forcing), so the decoder must be kept from peeking: "
    "before the softmax, a mask adds **0** where a query may look (itself and earlier positions) and **−∞** where "
    "it may not (later positions). Since e^−∞ = 0, the future gets exactly zero weight."
)
st.latex(r"\mathrm{MaskedAttention}(Q,K,V)=\mathrm{softmax}\!\left(\frac{QK^{\top}}{\sqrt{d_k}}+M\right)V,"
         r"\qquad M_{ij}=\begin{cases}0 & j\le i\\ -\infty & j>i\end{cases}")
if not iv.look_ahead_mask:
    st.warning("The look-ahead mask is switched off in the sidebar: the mask below has no −∞ above the diagonal "
               "and the weights reach into the future.")
c1, c2 = st.columns(2)
with c1:
    layer = picker("Decoder layer", cfg.n_dec_layers, "decoder_mask_layer", prefix="layer ")
with c2:
    head = picker("Head", cfg.n_heads, "decoder_mask_head", prefix="head ")
module = f"dec.{layer}.self_attn"
steps = vd.mask_steps(a.trace, module, head)
lab = a.tgt_labels
kw = dict(x_title="key (may be looked at)", y_title="query (looking)")
four_steps(steps, lab, [f"Scaled scores ({module}.scaled, head {head})", f"Look-ahead mask ({module}.mask)",
                        f"Masked scores ({module}.masked)", f"Weights ({module}.weights)"],
           [shape_text(a.trace[f"{module}.{n}"], "B|1, 1, t|1, t" if n == "mask" else "B, H, t, t")
            for n in ("scaled", "mask", "masked", "weights")],
           ["decoder_scaled", "decoder_mask", "decoder_masked", "decoder_weights"], **kw)
n_up, s_up = vd.above_diagonal(steps.weights)
m1, m2, m3 = st.columns(3)
m1.metric("Weights above the diagonal that are > 0", n_up)
m2.metric("Their sum (attention paid to the future)", f"{s_up:.6f}")
m3.metric("Largest |row sum − 1|", f"{float((steps.weights.sum(-1) - 1).abs().max()):.1e}")
st.caption("Rows are queries (the position that looks), columns are keys. Grey cells are −∞. Each row of the "
           "weights sums to 1; with the mask on, everything above the diagonal is exactly 0.")

st.subheader("The softmax renormalises over the allowed positions")
st.markdown(
    "Masking does not just delete the future's share: the softmax is taken over the allowed keys only, so their "
    "weights again sum to 1. The same numbers come out if you take the softmax over *all* keys and then divide "
    "the allowed ones by their share, as this row shows."
)
keep_valid("decoder_renorm_row", list(range(T)), min(T - 1, 2))
row = st.selectbox("Query position", list(range(T)), index=min(T - 1, 2), key="decoder_renorm_row",
                   format_func=lambda i: lab[i])
st.dataframe(vd.renormalisation(steps.scaled[row], steps.mask[row], lab), hide_index=True)
st.latex(r"\alpha_{ij}=\frac{e^{s_{ij}}}{\sum_{k\le i} e^{s_{ik}}}\quad (j\le i),\qquad \alpha_{ij}=0\quad (j>i)")

# --- 3. The lecture notes' example ------------------------------------------------------------------
st.header("3. Example from the lecture notes: a 4 × 4 look-ahead mask")
st.markdown("*Example from the lecture notes* (made-up scaled scores for 4 positions, not the model): the same "
            "three steps, computed with the model's own `look_ahead_mask`, `additive_mask` and `torch.softmax`.")
ex = vd.lecture_masking()
pos = [f"t={i}" for i in range(1, 5)]
four_steps(ex, pos, ["Scaled scores", "Look-ahead mask", "Masked scores", "Weights"], ["[4, 4]"] * 4,
           ["decoder_ex_scaled", "decoder_ex_mask", "decoder_ex_masked", "decoder_ex_weights"])
st.caption("Row t=2 keeps 0.1 and 0.6 and hides the rest: softmax(0.1, 0.6) = "
           f"({float(ex.weights[1, 0]):.3f}, {float(ex.weights[1, 1]):.3f}).")

# --- 4. Without the look-ahead mask ---------------------------------------------------------------
st.header("4. What goes wrong without the look-ahead mask")
st.subheader("(a) This model with the mask switched off while translating")
a_on = analysis(iv=replace(iv, look_ahead_mask=True))
a_off = analysis(iv=replace(iv, look_ahead_mask=False))
st.markdown(f"Decoder layer {layer}, head {head} (chosen in section 2). Other switches from the sidebar stay as "
            "they are.")
o1, o2 = st.columns(2)
for col, an, name in ((o1, a_on, "mask on"), (o2, a_off, "mask off")):
    with col:
        w = vd.mask_steps(an.trace, module, head).weights
        n, s = vd.above_diagonal(w)
        st.markdown(f"**Look-ahead {name}** · translation: {md(an.translation) or '*(empty)*'}")
        matrix(w, an.tgt_labels, an.tgt_labels, "weights", title=f"{module}.weights, head {head}",
               shape=shape_text(an.trace[f"{module}.weights"], "B, H, t, t"), key=f"decoder_la_{name[5:]}",
               show_table=False, **kw)
        with st.expander("Exact numbers"):
            st.dataframe(table(w, an.tgt_labels, an.tgt_labels))
        st.metric("weights above the diagonal > 0", n, help="strictly above the diagonal")
        st.metric("their sum", f"{s:.4f}")
if a_on.translation != a_off.translation:
    st.warning(f"The translation changes: **{md(a_on.translation)}** → **{md(a_off.translation)}**.")
else:
    st.info("The same words come out here, but the attention weights above differ.")
st.caption("While generating there is no future word to read, yet the earlier positions now read each other in "
           "both directions, something this model never saw in training, so its hidden states shift.")

st.subheader("(b) A model trained without the look-ahead mask")
try:
    base_b = load_shipped("base")
    cheat_b = load_shipped("no_mask")
except (CheckpointError, OSError) as e:
    st.warning(f"The shipped no-mask checkpoint could not be loaded ({md(str(e))}).")
    cheat_b = None
if cheat_b is not None and bundle.direction != cheat_b.direction:
    st.info("The shipped no-mask model translates English → French; pick the shipped model in the sidebar and type "
            "an English sentence to see it.")
    cheat_b = None
if cheat_b is not None:
    st.markdown(
        "The shipped *no-mask* model was trained with the same recipe, but its decoder could see the whole "
        "reference during training. At position *t* it must predict word *t + 1*, which sits right there in its "
        "input, so it learns to **copy the answer**. Teacher forcing with a reference shows it; generating, where "
        "the next word does not exist yet, gives it away."
    )
    ss = st.session_state
    if ss.get("decoder_reference_for") != text or "decoder_reference" not in ss:
        ss["decoder_reference"] = reference_default(
            text, base_b, lambda: _base_translation(base_b.meta.get("weights_sha256", "base"), text, base_b))
        ss["decoder_reference_for"] = text
    reference = st.text_input("Reference translation fed to the decoder (teacher forcing)", key="decoder_reference",
                              help="Defaults to the toy data set's translation of your sentence, or the base "
                                   "model's own translation when the sentence is not in the set.")
    keys = f"{base_b.meta.get('weights_sha256', '')}:{cheat_b.meta.get('weights_sha256', '')}"
    story = _cheating(keys, text, reference, base_b, cheat_b)
    if story.cheat_tf.unknown:
        st.warning("Not in the target vocabulary, fed as <unk>: "
                   + ", ".join(f"**{md(w)}**" for w in story.cheat_tf.unknown))
    t1, t2 = st.columns(2)
    with t1:
        st.markdown("**Teacher forcing** (the reference is in the input)")
        st.table({"": ["no-mask model", "base model"],
                  "accuracy (argmax = next reference word)": [f"{vd.accuracy(story.cheat_tf):.0%}",
                                                              f"{vd.accuracy(story.base_tf):.0%}"],
                  "mean p(next reference word)": [f"{vd.mean_gold_prob(story.cheat_tf):.3f}",
                                                  f"{vd.mean_gold_prob(story.base_tf):.3f}"]})
    with t2:
        st.markdown("**Generation** (greedy: no future to read)")
        st.dataframe({"": ["no-mask model", "base model", "reference"],
                  "translation": [story.cheat.translation or "(empty)", story.base.translation or "(empty)",
                                  reference or "(empty)"]}, hide_index=True)
    if story.cheat.translation != story.base.translation:
        st.error(f"Generating, the no-mask model says **{md(story.cheat.translation) or '(nothing)'}**, "
                 f"the base model **{md(story.base.translation) or '(nothing)'}**.")
    nl = cheat_b.config.n_dec_layers
    peek = vd.peek_scores(story.cheat_tf.trace, nl)
    best = vd.best_peek_head(story.cheat_tf.trace, nl)
    options = [(i, h) for i in range(nl) for h in range(cheat_b.config.n_heads)]
    keep_valid("decoder_cheat_head", options, best)
    lh = st.selectbox("No-mask model: decoder self-attention head", options, index=options.index(best),
                      key="decoder_cheat_head", format_func=lambda x: f"layer {x[0]}, head {x[1]}")
    w_cheat = story.cheat_tf.trace[f"dec.{lh[0]}.self_attn.weights"][0, lh[1]]
    h1, h2 = st.columns([3, 2])
    with h1:
        matrix(w_cheat, story.cheat_tf.in_labels, story.cheat_tf.in_labels, "weights",
               title=f"No-mask model, teacher-forced: dec.{lh[0]}.self_attn.weights, head {lh[1]}",
               shape=shape_text(story.cheat_tf.trace[f"dec.{lh[0]}.self_attn.weights"], "B, H, t, t"),
               key="decoder_cheat_weights", show_table=False, **kw)
        with st.expander("Exact numbers"):
            st.dataframe(table(w_cheat, story.cheat_tf.in_labels, story.cheat_tf.in_labels))
    with h2:
        st.metric("rows whose largest weight is on position t + 1", f"{vd.peek_share(w_cheat):.0%}")
        st.markdown("**Mean weight on position t + 1, per head** (the word to predict)")
        st.dataframe(peek.round(3))
    st.dataframe(vd.cheat_table(story.cheat_tf, cheat_b.tgt_vocab.itos, w_cheat), hide_index=True)
    st.markdown("**Training figures** (from each checkpoint's JSON). Compare the teacher-forced figures (training "
                "loss, held-out cross-entropy), where the answer is in the decoder's input, with the generated ones "
                "(exact match, BLEU), where it is not: the no-mask model looks as good as the base model on the "
                "first and fails on the second.")
    st.table(vd.training_table({"base model": base_b, "no-mask model": cheat_b}).set_index(""))

# --- 5. Padding mask ------------------------------------------------------------------------------
st.header("5. The padding mask")
st.markdown(
    "Training runs on batches, and the sentences of a batch differ in length. Shorter ones are filled up with "
    "`<pad>` tokens so that the batch is a rectangle. The padding mask, shape [B, 1, 1, T], hides the `<pad>` "
    "*keys* from every query (in encoder self-attention, in encoder-decoder attention, and in the decoder), so "
    "a padded sentence is encoded exactly as if it were alone. Here your sentence shares a batch with another one."
)
partner = vd.padding_partner(len(a.prepared.tokens), bundle)
demo = _padding(cur.key, text, partner, bundle)
st.markdown(f"**The batch** (source ids padded with id 0 = `<pad>`) · shape `{shape_text(demo.src, 'B, T')}`")
st.dataframe(vd.batch_table(demo))
rows = [f"sentence {i + 1}" for i in range(demo.src.size(0))]
matrix(vd.mask_grid(demo), [f"pos {t}" for t in range(demo.src.size(1))], rows, "mask",
       title="Padding mask (0 = may be looked at, −inf = <pad> key hidden)", shape=shape_text(demo.mask, "B, 1, 1, T"),
       key="decoder_pad_mask", x_title="key position", y_title="sentence")
st.markdown(f"Sentence {demo.short + 1} is the shorter one: {demo.n_real} real tokens and {demo.n_pad} `<pad>`.")
p1, p2 = st.columns(2)
with p1:
    pl = picker("Encoder layer", cfg.n_enc_layers, "decoder_pad_layer", prefix="layer ")
with p2:
    ph = picker("Head", cfg.n_heads, "decoder_pad_head", prefix="head ")
short_labels = list(demo.labels[demo.short])
q1, q2 = st.columns(2)
for col, on in ((q1, True), (q2, False)):
    with col:
        w = (demo.weights_on if on else demo.weights_off)[pl, ph]
        st.markdown(f"**Padding mask {'on' if on else 'off'}**")
        matrix(w, short_labels, short_labels, "weights",
               title=f"enc.{pl}.self_attn.weights, sentence {demo.short + 1}, head {ph}",
               shape=shape_text(w, "T, T"), key=f"decoder_pad_{'on' if on else 'off'}", x_title="key",
               y_title="query")
        st.metric("most weight a real token gives to <pad>", f"{float(demo.pad_weight(on)[pl, ph].max()):.4f}")
        st.metric("encoder output vs the sentence alone: largest |difference|", f"{demo.out_change(on):.2e}")
        st.markdown(f"Translation in the batch: **{md(demo.translation_on if on else demo.translation_off)}**")
st.markdown(f"Translation of sentence {demo.short + 1} on its own: **{md(demo.translation_alone)}**")
st.caption("With the mask on, the <pad> columns are exactly 0 and the shorter sentence's encoding equals its "
           "encoding alone (up to rounding). With the mask off, its words also attend to <pad>, and its encoding "
           "(and possibly its translation) changes just because it was batched with a longer sentence.")

# --- 6. Encoder-decoder attention -----------------------------------------------------------------
st.header("6. Encoder-decoder attention")
st.markdown(
    "The second sub-layer of every decoder block. Its **queries** come from the decoder (the layer below), its "
    "**keys and values** from the encoder output `enc.out`: each target position asks which source words matter "
    "for the word it is about to write. The weights form a target × source *alignment* matrix."
)
st.latex(r"\mathrm{Attention}(Q_{\text{dec}},K_{\text{enc}},V_{\text{enc}})=\mathrm{softmax}\!\left("
         r"\frac{Q_{\text{dec}}K_{\text{enc}}^{\top}}{\sqrt{d_k}}\right)V_{\text{enc}},\quad "
         r"Q_{\text{dec}}=YW^Q,\; K_{\text{enc}}=\mathrm{enc.out}\,W^K,\; V_{\text{enc}}=\mathrm{enc.out}\,W^V")
c1, c2 = st.columns(2)
with c1:
    cl = picker("Decoder layer", cfg.n_dec_layers, "decoder_cross_layer", prefix="layer ")
with c2:
    chh = picker("Head", cfg.n_heads, "decoder_cross_head", average=True, prefix="head ")
cm = f"dec.{cl}.cross_attn"
tr = a.trace
st.markdown(f"`{cm}.q` {shape_text(tr[cm + '.q'], 'B, H, t, d_k')} from the decoder · "
            f"`{cm}.k`, `{cm}.v` {shape_text(tr[cm + '.k'], 'B, H, m, d_k')} from `enc.out` "
            f"{shape_text(tr['enc.out'], 'B, m, D')}")
cw = vd.cross_attention(tr, cl, chh)
matrix(cw, a.src_labels, a.tgt_labels, "weights",
       title=f"{cm}.weights, {'average of the heads' if chh is None else f'head {chh}'}",
       shape=shape_text(cw, "t, m"), key="decoder_cross", x_title="source word (encoder)",
       y_title="target position (decoder)")
st.caption("Each row is one decoder position (labelled with its input word) while it predicts the next word; "
           f"its weights over the {len(a.src_labels)} source positions sum to 1.")

# --- 7. Who looks where ---------------------------------------------------------------------------
st.header("7. Three kinds of attention: who looks where")
st.dataframe(vd.WHO_LOOKS_WHERE, hide_index=True)
st.markdown("After the last block, a linear layer and a softmax turn each decoder position into a probability "
            "for every word of the target vocabulary:")
page_link("pages/output.py", "Output and decoding")
if iv.active:
    st.caption("Sidebar interventions active: " + "; ".join(iv.describe()))
