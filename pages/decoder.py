"""The decoder and masking: masked self-attention (with the real numbers), the lecture's 4 x 4 example,
what goes wrong without the look-ahead mask, the padding mask, and encoder-decoder attention."""

from dataclasses import replace

import streamlit as st

from model.checkpoint import CheckpointError
from pages.content import decoder as text
from ui import shell
from ui.models import analysis, cheating, current_model, load_shipped, no_mask_reference, padding_demo
from ui.state import interventions
from ui.widgets import (
    four_steps,
    matrix,
    md,
    page_link,
    pick,
    reference_box,
    require_sentence,
    sentence_header,
    weights_panel,
)
from viz import decoder as vd
from viz.heatmap import shape_text

shell.enter(__file__)  # first: re-enter through app.py if Streamlit ran this page bare


def index(label: str, n: int, key: str, prefix: str, average: bool = False) -> int | None:
    """Horizontal buttons over n layers/heads (optionally "average of heads" = None)."""
    choice = pick(label, list(range(n)) + ([-1] if average else []), key, 0, style="radio",
                  format_func=lambda i: "average of heads" if i < 0 else f"{prefix}{i}")
    return None if choice < 0 else choice


def layer_and_head(layer_label: str, n_layers: int, key: str, average: bool = False) -> tuple[int, int | None]:
    """Two pickers side by side: `<key>_layer` and `<key>_head`."""
    c1, c2 = st.columns(2)
    with c1:
        layer = index(layer_label, n_layers, f"{key}_layer", "layer ")
    with c2:
        return layer, index("Head", cfg.n_heads, f"{key}_head", "head ", average)


a = analysis()
bundle = current_model().bundle
cfg = bundle.config
iv = interventions()

st.title("The decoder and masking")
st.markdown(text.INTRO)
require_sentence(a)
sentence_header(a)
sentence = a.prepared.text
lab = a.tgt_labels

st.header("1. One decoder block")
left, right = st.columns([2, 3])
left.graphviz_chart(vd.block_dot(cfg.n_dec_layers))
with right:
    st.markdown(text.block(cfg.n_dec_layers, len(lab), cfg.d_model))
    layer_b = index("Block", cfg.n_dec_layers, "decoder_block_layer", "decoder layer ")
    st.dataframe(vd.block_table(a.trace, layer_b), hide_index=True)

st.header("2. Masked self-attention: scores + mask = masked scores → softmax")
st.markdown(text.MASKED)
st.latex(text.MASKED_LATEX)
if not iv.look_ahead_mask:
    st.warning(text.MASK_OFF)
layer, head = layer_and_head("Decoder layer", cfg.n_dec_layers, "decoder_mask")
module = f"dec.{layer}.self_attn"
steps = vd.mask_steps(a.trace, module, head)
kw = dict(x_title="key (may be looked at)", y_title="query (looking)")
four_steps(steps, lab, text.step_titles(module, head), vd.step_shapes(a.trace, module),
           ["decoder_scaled", "decoder_mask", "decoder_masked", "decoder_weights"], **kw)
n_up, s_up = vd.above_diagonal(steps.weights)
m1, m2, m3 = st.columns(3)
m1.metric("Weights above the diagonal that are > 0", n_up)
m2.metric("Their sum (attention paid to the future)", f"{s_up:.6f}")
m3.metric("Largest |row sum − 1|", f"{vd.row_sum_error(steps.weights):.1e}")
st.caption(text.MASKED_CAPTION)
st.subheader("The softmax renormalises over the allowed positions")
st.markdown(text.RENORM)
row = pick("Query position", range(len(lab)), "decoder_renorm_row", min(len(lab) - 1, 2), format_func=lab.__getitem__)
st.dataframe(vd.renormalisation(steps.scaled[row], steps.mask[row], lab), hide_index=True)
st.latex(text.RENORM_LATEX)

st.header("3. Example from the lecture notes: a 4 × 4 look-ahead mask")
st.markdown(text.LECTURE)
ex = vd.lecture_masking()
four_steps(ex, [f"t={i}" for i in range(1, 5)], ["Scaled scores", "Look-ahead mask", "Masked scores", "Weights"],
           ["[4, 4]"] * 4, ["decoder_ex_scaled", "decoder_ex_mask", "decoder_ex_masked", "decoder_ex_weights"])
st.caption(vd.lecture_notice(ex))
st.header("4. What goes wrong without the look-ahead mask")
st.subheader("(a) This model with the mask switched off while translating")
a_on, a_off = analysis(iv=replace(iv, look_ahead_mask=True)), analysis(iv=replace(iv, look_ahead_mask=False))
st.markdown(text.mask_off_intro(layer, head))
for col, an, name in zip(st.columns(2), (a_on, a_off), ("mask on", "mask off"), strict=True):
    with col:
        w = vd.head_weights(an.trace, module, head)
        n, s = vd.above_diagonal(w)
        st.markdown(f"**Look-ahead {name}** · translation: {md(an.translation) or '*(empty)*'}")
        weights_panel(w, an.tgt_labels, title=f"{module}.weights, head {head}", key=f"decoder_la_{name[5:]}",
                      shape=shape_text(an.trace[f"{module}.weights"], "B, H, t, t"), **kw)
        st.metric("weights above the diagonal > 0", n, help="strictly above the diagonal")
        st.metric("their sum", f"{s:.4f}")
if a_on.translation != a_off.translation:
    st.warning(f"The translation changes: **{md(a_on.translation)}** → **{md(a_off.translation)}**.")
else:
    st.info(text.SAME_WORDS)
st.caption(text.MASK_OFF_CAPTION)

st.subheader("(b) A model trained without the look-ahead mask")
try:
    base_b, cheat_b = load_shipped("base"), load_shipped("no_mask")
except (CheckpointError, OSError) as e:
    st.warning(f"The shipped no-mask checkpoint could not be loaded ({md(str(e))}).")
    cheat_b = None
if cheat_b is not None and bundle.direction != cheat_b.direction:
    st.info(text.WRONG_DIRECTION)
    cheat_b = None
if cheat_b is not None:
    st.markdown(text.CHEAT)
    reference = reference_box(text.REFERENCE_LABEL, "decoder_reference", sentence,
                              lambda: no_mask_reference(sentence, base_b), text.REFERENCE_HELP)
    story = cheating(sentence, reference, base_b, cheat_b)
    if story.cheat_tf.unknown:
        st.warning("Not in the target vocabulary, fed as <unk>: "
                   + ", ".join(f"**{md(w)}**" for w in story.cheat_tf.unknown))
    t1, t2 = st.columns(2)
    t1.markdown("**Teacher forcing** (the reference is in the input)")
    t1.table(vd.teacher_forcing_table(story))
    t2.markdown("**Generation** (greedy: no future to read)")
    t2.dataframe(vd.generation_table(story), hide_index=True)
    if story.cheat.translation != story.base.translation:
        st.error(f"Generating, the no-mask model says **{md(story.cheat.translation) or '(nothing)'}**, "
                 f"the base model **{md(story.base.translation) or '(nothing)'}**.")
    tr_c, nl = story.cheat_tf.trace, cheat_b.config.n_dec_layers
    lh = pick("No-mask model: decoder self-attention head",
              [(i, h) for i in range(nl) for h in range(cheat_b.config.n_heads)], "decoder_cheat_head",
              vd.best_peek_head(tr_c, nl), format_func=lambda x: f"layer {x[0]}, head {x[1]}")
    w_cheat = vd.head_weights(tr_c, f"dec.{lh[0]}.self_attn", lh[1])
    h1, h2 = st.columns([3, 2])
    with h1:
        weights_panel(w_cheat, story.cheat_tf.in_labels, key="decoder_cheat_weights", **kw,
                      title=f"No-mask model, teacher-forced: dec.{lh[0]}.self_attn.weights, head {lh[1]}",
                      shape=shape_text(tr_c[f"dec.{lh[0]}.self_attn.weights"], "B, H, t, t"))
    with h2:
        st.metric("rows whose largest weight is on position t + 1", f"{vd.peek_share(w_cheat):.0%}")
        st.markdown("**Mean weight on position t + 1, per head** (the word to predict)")
        st.dataframe(vd.peek_scores(tr_c, nl).round(3))
    st.dataframe(vd.cheat_table(story.cheat_tf, cheat_b.tgt_vocab.itos, w_cheat), hide_index=True)
    st.markdown(text.TRAINING_FIGURES)
    st.table(vd.training_table({"base model": base_b, "no-mask model": cheat_b}).set_index(""))

st.header("5. The padding mask")
st.markdown(text.PADDING)
demo = padding_demo(a.prepared)
st.markdown(f"**The batch** (source ids padded with id 0 = `<pad>`) · shape `{shape_text(demo.src, 'B, T')}`")
st.dataframe(vd.batch_table(demo))
matrix(vd.mask_grid(demo), *vd.grid_labels(demo), "mask",
       title="Padding mask (0 = may be looked at, −inf = <pad> key hidden)", shape=shape_text(demo.mask, "B, 1, 1, T"),
       key="decoder_pad_mask", x_title="key position", y_title="sentence")
st.markdown(f"Sentence {demo.short + 1} is the shorter one: {demo.n_real} real tokens and {demo.n_pad} `<pad>`.")
pl, ph = layer_and_head("Encoder layer", cfg.n_enc_layers, "decoder_pad")
for col, on in zip(st.columns(2), (True, False), strict=True):
    with col:
        w, state = vd.padding_weights(demo, pl, ph, on), "on" if on else "off"
        st.markdown(f"**Padding mask {state}**")
        matrix(w, list(demo.labels[demo.short]), list(demo.labels[demo.short]), "weights",
               title=f"enc.{pl}.self_attn.weights, sentence {demo.short + 1}, head {ph}",
               shape=shape_text(w, "T, T"), key=f"decoder_pad_{state}", x_title="key", y_title="query")
        st.metric("most weight a real token gives to <pad>", f"{vd.max_pad_weight(demo, pl, ph, on):.4f}")
        st.metric("encoder output vs the sentence alone: largest |difference|", f"{demo.out_change(on):.2e}")
        st.markdown(f"Translation in the batch: **{md(demo.translation_on if on else demo.translation_off)}**")
st.markdown(f"Translation of sentence {demo.short + 1} on its own: **{md(demo.translation_alone)}**")
st.caption(text.PADDING_CAPTION)

st.header("6. Encoder-decoder attention")
st.markdown(text.CROSS)
st.latex(text.CROSS_LATEX)
cl, chh = layer_and_head("Decoder layer", cfg.n_dec_layers, "decoder_cross", average=True)
cm, tr = f"dec.{cl}.cross_attn", a.trace
st.markdown(f"`{cm}.q` {shape_text(tr[cm + '.q'], 'B, H, t, d_k')} from the decoder · "
            f"`{cm}.k`, `{cm}.v` {shape_text(tr[cm + '.k'], 'B, H, m, d_k')} from `enc.out` "
            f"{shape_text(tr['enc.out'], 'B, m, D')}")
cw = vd.cross_attention(tr, cl, chh)
matrix(cw, a.src_labels, lab, "weights", shape=shape_text(cw, "t, m"), key="decoder_cross",
       title=f"{cm}.weights, {'average of the heads' if chh is None else f'head {chh}'}",
       x_title="source word (encoder)", y_title="target position (decoder)")
st.caption(text.cross_caption(len(a.src_labels)))

st.header("7. Three kinds of attention: who looks where")
st.dataframe(vd.WHO_LOOKS_WHERE, hide_index=True)
st.markdown(text.OUTRO)
page_link("pages/output.py", "Output and decoding")
if iv.active:
    st.caption("Sidebar interventions active: " + "; ".join(iv.describe()))
