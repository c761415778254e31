"""Encoder-decoder attention: each decoder position reads the source sentence; the source's padding mask; the
three kinds of attention side by side."""

import streamlit as st

from pages.content import cross_attention as text
from ui import shell
from ui.classroom.plans import hidden_head, mystery_box
from ui.models import content_key, current_model, padding_demo
from ui.widgets import (
    figure,
    fold,
    layer_and_head,
    md,
    next_link,
    notice,
    once,
    opening,
    pick,
    section,
    small_table,
)
from viz import decoder as vd
from viz.heatmap import shape_text, table

shell.enter(__file__)  # first: re-enter through app.py if Streamlit ran this page bare

cfg = current_model().bundle.config
a = opening("Encoder-decoder attention", text.INTRO)
tr, src, lab = a.trace, a.src_labels, a.tgt_labels
content = content_key(a)  # what every figure and table below is drawn from: the same for a whole class

st.header("1. Each target position reads the source")
st.latex(text.CROSS_LATEX)
c1, c2 = st.columns(2)
with c1:
    layer = pick(
        "Decoder layer",
        range(cfg.n_dec_layers),
        "cross_layer",
        cfg.n_dec_layers - 1,
        style="radio",
        format_func=lambda i: f"layer {i}",
    )
with c2:
    head = pick(
        "Head",
        [*range(cfg.n_heads), -1],
        "cross_head",
        -1,
        style="radio",
        format_func=lambda i: "average of heads" if i < 0 else f"head {i}",
    )
cm, head = f"dec.{layer}.cross_attn", None if head < 0 else head
mystery = hidden_head()  # a lesson plan's mystery head: hidden until the teacher's reveal, its share of an average too
skip = mystery[1] if mystery is not None and mystery[0] == cm else None


def cross_weights() -> None:
    cw = vd.cross_attention(tr, layer, head, skip=skip)
    st.markdown(
        f"`{cm}.q` {shape_text(tr[cm + '.q'], 'B, H, t, d_k')} from the decoder · "
        f"`{cm}.k`, `{cm}.v` {shape_text(tr[cm + '.k'], 'B, H, m, d_k')} from `enc.out` "
        f"{shape_text(tr['enc.out'], 'B, m, D')}"
    )
    which = (
        f"head {head}"
        if head is not None
        else "average of the heads"
        if skip is None
        else f"average of the heads but head {skip}, the mystery head"
    )
    figure(
        cw,
        src,
        lab,
        "weights",
        shape=shape_text(cw, "t, m"),
        key="cross_weights",
        numbers=False,
        title=f"{cm}.weights, {which}",
        x_title="source word (encoder)",
        y_title="target position (decoder)",
    )
    notice(vd.cross_notice(cw, src, lab, a.next_labels))
    st.caption(text.cross_caption(len(src)))


if skip is not None and head == skip:
    mystery_box(head)
else:
    once("cross.weights", (*content, layer, head, skip), cross_weights)
    with fold(text.ALIGNMENT, "cross_alignment") as shown:
        if shown:
            cw = vd.cross_attention(tr, layer, head, skip=skip)
            small_table(vd.alignment(cw, src, lab, a.next_labels), hide_index=True)
            st.dataframe(table(cw, src, lab))

section("2. The padding mask: which source keys exist", text.PADDING)


def batch() -> None:
    demo = padding_demo(a.prepared)
    st.markdown(f"**The batch** (source ids padded with id 0 = `<pad>`) · shape `{shape_text(demo.src, 'B, T')}`")
    small_table(vd.batch_table(demo))
    figure(
        vd.mask_grid(demo),
        *vd.grid_labels(demo),
        "mask",
        numbers=False,
        title="Padding mask (0 = may be looked at, −inf = <pad> key hidden)",
        shape=shape_text(demo.mask, "B, 1, 1, T"),
        key="cross_pad_mask",
        x_title="key position",
        y_title="sentence",
    )
    notice(vd.mask_grid_notice(demo))


once("cross.batch", content, batch)  # (the demo is of the model and the sentence: computed on a miss only)
pl, ph = layer_and_head("Encoder layer", cfg.n_enc_layers, cfg.n_heads, ("cross_pad_layer", "cross_pad_head"))
with fold("Show the weights with the padding mask on and off", "cross_fold_padding") as shown:
    if shown:
        demo = padding_demo(a.prepared)
        for col, on in zip(st.columns(2), (True, False), strict=True):
            with col:
                w, state = vd.padding_weights(demo, pl, ph, on), "on" if on else "off"
                st.markdown(f"**Padding mask {state}**")
                figure(
                    w,
                    list(demo.labels[demo.short]),
                    list(demo.labels[demo.short]),
                    "weights",
                    numbers=False,
                    title=f"enc.{pl}.self_attn.weights, sentence {demo.short + 1}, head {ph}",
                    shape=shape_text(w, "T, T"),
                    key=f"cross_pad_{state}",
                    x_title="key",
                    y_title="query",
                )
                st.metric("most weight a real token gives to <pad>", f"{vd.max_pad_weight(demo, pl, ph, on):.4f}")
                st.metric("encoder output vs the sentence alone: largest |difference|", f"{demo.out_change(on):.2e}")
                st.markdown(f"Translation in the batch: **{md(demo.translation_on if on else demo.translation_off)}**")
        notice(vd.padding_notice(demo, pl, ph))
        with fold("Exact numbers of both matrices", "cross_pad_numbers") as shown:
            if shown:
                for on in (True, False):
                    st.dataframe(table(vd.padding_weights(demo, pl, ph, on), *[list(demo.labels[demo.short])] * 2))


def alone() -> None:
    demo = padding_demo(a.prepared)
    st.markdown(f"Translation of sentence {demo.short + 1} on its own: **{md(demo.translation_alone)}**")
    st.caption(text.PADDING_CAPTION)


once("cross.alone", content, alone)

section("3. Three kinds of attention: who looks where", text.WHO)
once("cross.who", (), lambda: st.table(vd.WHO_LOOKS_WHERE.set_index("attention")))  # a table wraps its text
st.markdown(text.OUTRO)
next_link(__file__)
