"""The Decoder page's last section, what goes wrong without the look-ahead mask: (a) this model with the mask
switched off while translating, (b) a model trained without it, teacher-forced (it reads the word it must predict)
and generating (there is nothing to read), with the heads that peek. `text` is the page's prose
(pages/content/decoder.py).
"""

from __future__ import annotations

from dataclasses import replace
from types import ModuleType

import streamlit as st

from model.checkpoint import Bundle, CheckpointError
from model.trace import Interventions
from ui.models import analysis, cheating, load_shipped, no_mask_reference
from ui.widgets import figure, fold, md, notice, pick, reference_box, small_table
from viz import decoder as vd
from viz.heatmap import shape_text


def mask_off_section(iv: Interventions, layer: int, head: int, text: ModuleType, kw: dict) -> None:
    """Section 4(a), folded: `head` of decoder `layer`'s self-attention with the mask on and off (the other
    interventions `iv` kept), the weights above the diagonal and the two translations (`kw`: the axes' titles)."""
    module = f"dec.{layer}.self_attn"
    st.subheader("(a) This model with the mask switched off while translating")
    with fold("Show the weights with the mask on and off, and the translations", "decoder_fold_off") as shown:
        if not shown:
            return
        a_on, a_off = analysis(iv=replace(iv, look_ahead_mask=True)), analysis(iv=replace(iv, look_ahead_mask=False))
        st.markdown(text.mask_off_intro(layer, head))
        ws = [vd.head_weights(an.trace, module, head) for an in (a_on, a_off)]
        for col, an, w, name in zip(st.columns(2), (a_on, a_off), ws, ("mask on", "mask off"), strict=True):
            with col:
                n, s = vd.above_diagonal(w)
                st.markdown(f"**Look-ahead {name}** · translation: {md(an.translation) or '*(empty)*'}")
                figure(
                    w,
                    an.tgt_labels,
                    an.tgt_labels,
                    "weights",
                    title=f"{module}.weights, head {head}",
                    key=f"decoder_la_{name[5:]}",
                    shape=shape_text(an.trace[f"{module}.weights"], "B, H, t, t"),
                    **kw,
                )
                st.metric("weights above the diagonal > 0", n, help="strictly above the diagonal")
                st.metric("their sum", f"{s:.4f}")
        notice(vd.future_notice(*ws, a_off.tgt_labels))
        if a_on.translation != a_off.translation:
            st.warning(f"The translation changes: **{md(a_on.translation)}** → **{md(a_off.translation)}**.")
        else:
            st.caption(text.SAME_WORDS)
        st.caption(text.MASK_OFF_CAPTION)


def no_mask_section(sentence: str, bundle: Bundle, text: ModuleType, kw: dict) -> None:
    """Section 4(b), folded: the shipped no-mask model beside the base one on `sentence` (`kw`: the axes' titles)."""
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
                reference = reference_box(
                    text.REFERENCE_LABEL,
                    "decoder_reference",
                    sentence,
                    lambda: no_mask_reference(sentence, base_b),
                    text.REFERENCE_HELP,
                )
                story = cheating(sentence, reference, base_b, cheat_b)
                if story.cheat_tf.unknown:
                    st.warning(
                        "Not in the target vocabulary, fed as <unk>: "
                        + ", ".join(f"**{md(w)}**" for w in story.cheat_tf.unknown)
                    )
                t1, t2 = st.columns(2)
                t1.markdown("**Teacher forcing** (the reference is in the input)")
                t1.table(vd.teacher_forcing_table(story))
                t2.markdown("**Generation** (greedy: no future to read)")
                t2.dataframe(vd.generation_table(story), hide_index=True)
                if story.cheat.translation != story.base.translation:
                    st.error(
                        f"Generating, the no-mask model says **{md(story.cheat.translation) or '(nothing)'}**, "
                        f"the base model **{md(story.base.translation) or '(nothing)'}**."
                    )
                tr_c, nl = story.cheat_tf.trace, cheat_b.config.n_dec_layers
                lh = pick(
                    "No-mask model: decoder self-attention head",
                    [(i, h) for i in range(nl) for h in range(cheat_b.config.n_heads)],
                    "decoder_cheat_head",
                    vd.best_peek_head(tr_c, nl),
                    format_func=lambda x: f"layer {x[0]}, head {x[1]}",
                )
                w_cheat = vd.head_weights(tr_c, f"dec.{lh[0]}.self_attn", lh[1])
                h1, h2 = st.columns([3, 2])
                with h1:
                    figure(
                        w_cheat,
                        story.cheat_tf.in_labels,
                        story.cheat_tf.in_labels,
                        "weights",
                        key="decoder_cheat_weights",
                        **kw,
                        title=f"No-mask model, teacher-forced: dec.{lh[0]}.self_attn.weights, head {lh[1]}",
                        shape=shape_text(tr_c[f"dec.{lh[0]}.self_attn.weights"], "B, H, t, t"),
                    )
                with h2:
                    st.metric("rows whose largest weight is on position t + 1", f"{vd.peek_share(w_cheat):.0%}")
                    st.markdown("**Mean weight on position t + 1, per head** (the word to predict)")
                    st.dataframe(vd.peek_scores(tr_c, nl).round(3))
                notice(vd.peek_notice(w_cheat, story.cheat_tf.in_labels))
                with st.expander("Position by position: what it must predict, what it reads"):
                    small_table(vd.cheat_table(story.cheat_tf, cheat_b.tgt_vocab.itos, w_cheat), hide_index=True)
                st.markdown(text.TRAINING_FIGURES)
                st.table(vd.training_table({"base model": base_b, "no-mask model": cheat_b}).set_index(""))
