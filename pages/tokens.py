"""Tokens and embeddings: words -> ids -> one-hot rows -> rows of the embedding table -> x √d_model."""

import streamlit as st

from explain.embeddings import lookup_demo, one_hot
from model.vocab import BOS, EOS
from pages.content import tokens as text
from ui import shell
from ui.models import content_key, current_model
from ui.widgets import (
    figure,
    md,
    metrics_row,
    next_link,
    once,
    opening,
    section,
    small_table,
)
from viz.embeddings import (
    TEXTBOOK_VOCAB,
    column_labels,
    embed_notice,
    lookup_table,
    one_hot_notice,
    textbook_one_hot,
    token_table,
    vocab_window,
)
from viz.heatmap import shape_text

shell.enter(__file__)  # first: re-enter through app.py if Streamlit ran this page bare

a = opening("Tokens and embeddings", text.INTRO, translation=False)
bundle = current_model().bundle
cfg = bundle.config
p = a.prepared
src_ids = [int(i) for i in a.trace["src.tokens"][0]]
src_tokens = [*p.tokens, EOS]
D = cfg.d_model
content = content_key(a)  # what every figure and table below is drawn from: the same for a whole class

section("1. Words to tokens", text.TOKENIZER)

st.header("2. Tokens to ids")
with metrics_row():
    st.metric("Source vocabulary (English)", f"{len(bundle.src_vocab):,} tokens")
    st.metric("Target vocabulary (French)", f"{len(bundle.tgt_vocab):,} tokens")
    st.metric("Tokens in your sentence", f"{len(src_ids)} (with <eos>)")
once(
    "tokens.ids",
    content,
    lambda: small_table(
        token_table(src_tokens, src_ids, bundle.src_vocab, p.unknown), hide_index=True, height="content"
    ),
)
st.caption(text.IDS_CAPTION)

section("3. Ids to one-hot vectors", text.ONE_HOT)
st.subheader("Textbook example (from the lecture notes, not this model)")
word = st.selectbox("Word of the notes' 6-word output vocabulary", TEXTBOOK_VOCAB, index=1, key="tokens_textbook")
once("tokens.textbook", (word,), lambda: small_table(textbook_one_hot(word)))

st.subheader("Your sentence")
window = vocab_window(src_ids)
V = len(bundle.src_vocab)
oh = one_hot(src_ids, V)  # [T, V]
figure(
    oh[:, window],
    column_labels(bundle.src_vocab, window),
    a.src_labels,
    "probs",
    title="One-hot rows of the source tokens",
    shape=f"[{len(src_ids)}, {V}]  (T, V_src)",
    key="tokens_onehot",
    x_title="vocabulary id",
    y_title="token",
    digits=0,
    content=content,
    note=lambda: one_hot_notice(oh, src_ids, a.src_labels),
)
st.caption(text.window_caption(len(window), V))

st.header("4. One-hot × embedding table = one row of the table")
E = bundle.model.src_embed.lut.weight
st.latex(rf"\mathrm{{onehot}}(\text{{id}}) \cdot E = E[\text{{id}}], \qquad E \in \mathbb{{R}}^{{{V} \times {D}}}")
pos = st.selectbox("Token", range(len(src_ids)), format_func=lambda i: a.src_labels[i], key="tokens_position")
demo = lookup_demo(E, src_ids[pos], a.trace["src.embed"][0, pos])
st.markdown(
    f"Token **{md(src_tokens[pos])}** has id **{demo.token_id}**: its one-hot row has "
    f"a single 1 in column {demo.token_id}, so the product keeps row {demo.token_id} of E and nothing "
    f"else. First 8 of {D} dimensions:"
)


def lookup() -> None:
    small_table(lookup_table(demo))
    with metrics_row():
        st.metric("max |onehot · E − E[id]|", f"{demo.lookup_error:.1e}")
        st.metric(f"max |E[id] · √{D} − traced src.embed|", f"{demo.trace_error:.1e}")


once("tokens.lookup", (*content, pos), lookup)
st.caption(text.LOOKUP_CAPTION)

st.header("5. Scaled by √d_model")
st.latex(
    rf"x_{{\text{{embed}}}} = E[\text{{id}}] \cdot \sqrt{{d_{{model}}}} = E[\text{{id}}] \cdot \sqrt{{{D}}} "
    rf"= E[\text{{id}}] \cdot {demo.scale:.4f}"
)
st.markdown(text.SCALE)
lo, last = st.slider("Dimensions shown (first and last)", 0, D - 1, (0, min(31, D - 1)), key="tokens_dims")
hi = last + 1  # the slider's ends are both shown
dims = [f"d{j}" for j in range(lo, hi)]


def embedded(name: str, labels: list[str], ids: list[int], title: str, key: str) -> None:
    """One side's embedding rows × √d_model, dimensions lo..hi-1."""
    rows = a.trace[name][0][:, lo:hi]  # [T, hi - lo]
    figure(
        rows,
        dims,
        labels,
        "activations",
        title=title,
        shape=shape_text(a.trace[name], "B, T, D"),
        key=key,
        x_title="dimension",
        y_title="token",
        content=(*content, lo, hi),
        note=lambda: embed_notice(rows, ids, labels, demo.scale),
    )


embedded(
    "src.embed",
    a.src_labels,
    src_ids,
    f"src.embed: embedding rows × √{D} (dimensions {lo}-{hi - 1})",
    "tokens_src_embed",
)

st.header("6. The decoder side")
tgt_ids = [int(i) for i in a.trace["tgt.tokens"][0]]
tgt_tokens = [BOS, *a.out_tokens]
st.markdown(text.decoder(len(bundle.tgt_vocab), BOS))
once(
    "tokens.tgt_ids",
    content,
    lambda: small_table(token_table(tgt_tokens, tgt_ids, bundle.tgt_vocab), hide_index=True, height="content"),
)
embedded(
    "tgt.embed",
    a.tgt_labels,
    tgt_ids,
    f"tgt.embed: target embedding rows × √{D} (dimensions {lo}-{hi - 1})",
    "tokens_tgt_embed",
)

next_link(__file__)
