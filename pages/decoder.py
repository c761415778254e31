"""The decoder and the look-ahead mask: masked self-attention with the real numbers, the lecture's 4 x 4 example,
and what goes wrong without the mask. (Encoder-decoder attention and the padding mask: pages/cross_attention.py.)"""

from dataclasses import replace

import streamlit as st

from explain.paper import BASE, SECTIONS
from model.checkpoint import CheckpointError
from pages.content import decoder as text
from ui import shell
from ui.models import analysis, cheating, content_key, current_model, load_shipped, no_mask_reference
from ui.state import interventions
from ui.widgets import (
    fold,
    four_steps,
    layer_and_head,
    md,
    metrics_row,
    next_link,
    notice,
    once,
    pick,
    reference_box,
    require_sentence,
    section,
    sentence_header,
    small_table,
    weights_panel,
)
from viz import decoder as vd
from viz.heatmap import shape_text, table

shell.enter(__file__)  # first: re-enter through app.py if Streamlit ran this page bare

a = analysis()
bundle = current_model().bundle
cfg = bundle.config
iv = interventions()
kw = dict(x_title="key (may be looked at)", y_title="query (looking)")


def exact_numbers(steps, labels: list[str], key: str) -> None:  # the four matrices' numbers, one click away
    with fold(text.EXACT, key) as shown:
        if shown:
            for m in (steps.scaled, steps.mask, steps.masked, steps.weights):
                st.dataframe(table(m, labels, labels))


st.title("The decoder and masking")
st.markdown(text.intro(a.out_tokens))
require_sentence(a)
sentence_header(a)
sentence, lab = a.prepared.text, a.tgt_labels
content = content_key(a)  # what the figures and tables below are drawn from: the same for a whole class

st.header("1. One decoder block")
left, right = st.columns([2, 3])
with left:
    once("decoder.block_dot", (cfg.n_dec_layers,), lambda: st.graphviz_chart(vd.block_dot(cfg.n_dec_layers),
                                                                            alt=text.BLOCK_ALT))
with right:
    st.markdown(text.block(cfg.n_dec_layers, len(lab), cfg.d_model))
    layer_b = pick("Block", range(cfg.n_dec_layers), "decoder_block_layer", 0, style="radio",
                   format_func=lambda i: f"decoder layer {i}")


def block() -> None:
    small_table(vd.block_table(a.trace, layer_b), hide_index=True,  # if ever a grid: its last column (a sentence) wide
                column_config={"what it is": st.column_config.TextColumn(width="large")})
    notice(vd.block_notice(a.trace, layer_b))
    st.markdown(text.regularisation(SECTIONS["dropout"], BASE.dropout, cfg.dropout, vd.projection_biases(bundle.model)))


once("decoder.block", (*content, layer_b), block)

section("2. Masked self-attention: scores + mask = masked scores → softmax", text.MASKED)
st.latex(text.MASKED_LATEX)
if not iv.look_ahead_mask:
    st.warning(text.MASK_OFF)
layer, head = layer_and_head("Decoder layer", cfg.n_dec_layers, cfg.n_heads,
                             ("decoder_mask_layer", "decoder_mask_head"))
module = f"dec.{layer}.self_attn"
here = (*content, layer, head)
steps = vd.mask_steps(a.trace, module, head)
four_steps(steps, lab, text.step_titles(module, head), vd.step_shapes(a.trace, module),  # (columns: not in a once)
           ["decoder_scaled", "decoder_mask", "decoder_masked", "decoder_weights"], show_table=False, **kw)
once("decoder.masked", here, lambda: notice(vd.masked_notice(steps.weights, lab)))
exact_numbers(steps, lab, "decoder_exact")


def future() -> None:
    n_up, s_up = vd.above_diagonal(steps.weights)
    with metrics_row():
        st.metric("Weights above the diagonal that are > 0", n_up)
        st.metric("Their sum (attention paid to the future)", f"{s_up:.6f}")
        st.metric("Largest |row sum − 1|", f"{vd.row_sum_error(steps.weights):.1e}")
    st.caption(text.MASKED_CAPTION)
    section("The softmax renormalises over the allowed positions", text.RENORM, level=3)


once("decoder.future", here, future)
row = pick("Query position", range(len(lab)), "decoder_renorm_row", min(len(lab) - 1, 2), format_func=lab.__getitem__)


def renormalised() -> None:
    small_table(vd.renormalisation(steps.scaled[row], steps.mask[row], lab), hide_index=True)
    notice(vd.renorm_notice(steps.scaled[row], steps.mask[row], lab[row]))
    st.latex(text.RENORM_LATEX)


once("decoder.renorm", (*here, row), renormalised)

section("3. Example from the lecture notes: a 4 × 4 look-ahead mask", text.LECTURE)
with fold("Show the lecture's four 4 × 4 matrices", "decoder_fold_lecture") as shown:
    if shown:
        ex, ex_lab = vd.lecture_masking(), [f"t={i}" for i in range(1, 5)]
        four_steps(ex, ex_lab, ["Scaled scores", "Look-ahead mask", "Masked scores", "Weights"], ["[4, 4]"] * 4,
                   ["decoder_ex_scaled", "decoder_ex_mask", "decoder_ex_masked", "decoder_ex_weights"],
                   show_table=False)
        notice(vd.lecture_notice(ex))
        exact_numbers(ex, ex_lab, "decoder_ex_exact")

st.header("4. What goes wrong without the look-ahead mask")
st.subheader("(a) This model with the mask switched off while translating")
with fold("Show the weights with the mask on and off, and the translations", "decoder_fold_off") as shown:
    if shown:
        a_on, a_off = analysis(iv=replace(iv, look_ahead_mask=True)), analysis(iv=replace(iv, look_ahead_mask=False))
        st.markdown(text.mask_off_intro(layer, head))
        ws = [vd.head_weights(an.trace, module, head) for an in (a_on, a_off)]
        for col, an, w, name in zip(st.columns(2), (a_on, a_off), ws, ("mask on", "mask off"), strict=True):
            with col:
                n, s = vd.above_diagonal(w)
                st.markdown(f"**Look-ahead {name}** · translation: {md(an.translation) or '*(empty)*'}")
                weights_panel(w, an.tgt_labels, title=f"{module}.weights, head {head}", key=f"decoder_la_{name[5:]}",
                              shape=shape_text(an.trace[f"{module}.weights"], "B, H, t, t"), **kw)
                st.metric("weights above the diagonal > 0", n, help="strictly above the diagonal")
                st.metric("their sum", f"{s:.4f}")
        notice(vd.future_notice(*ws, a_off.tgt_labels))
        if a_on.translation != a_off.translation:
            st.warning(f"The translation changes: **{md(a_on.translation)}** → **{md(a_off.translation)}**.")
        else:
            st.caption(text.SAME_WORDS)
        st.caption(text.MASK_OFF_CAPTION)

st.subheader("(b) A model trained without the look-ahead mask")
with fold("Show the model trained without the mask: teacher forcing vs generation", "decoder_fold_cheat") as shown:
    if shown:
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
            notice(vd.peek_notice(w_cheat, story.cheat_tf.in_labels))
            with st.expander("Position by position: what it must predict, what it reads"):
                small_table(vd.cheat_table(story.cheat_tf, cheat_b.tgt_vocab.itos, w_cheat), hide_index=True)
            st.markdown(text.TRAINING_FIGURES)
            st.table(vd.training_table({"base model": base_b, "no-mask model": cheat_b}).set_index(""))

st.markdown(text.OUTRO)
next_link(__file__)
