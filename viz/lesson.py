"""The guided lesson's figures and "notice" lines: one focused figure per step, one sentence that says
what to look at, computed from the tensors the figure draws (explain/lesson.py reads them). Steps 0-4 (the
sentence to the encoder's input) are here, steps 5-14 (inside an encoder layer) in viz/lesson_encoder.py, the
decoder's in viz/lesson_decoder.py; `VIEWS` here holds them all.

Pure: plotly figures, pandas tables and plain strings, no Streamlit. `view(key, ctx)` gives a step's
`View`; each `notice_*` function takes the numbers of one step (a dataclass of explain/lesson.py) and is
tested against the tensors. Notices are plain text (the page escapes them): words are written in
“quotes”, weights and probabilities with 3 decimals, scores with 2.
"""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from explain import lesson, paper
from explain import lesson_training as LT
from model.pipeline import Analysis
from model.vocab import UNK_ID
from viz import lesson_decoder, lesson_encoder
from viz.heatmap import count, heatmap, table
from viz.lesson_base import (  # noqa: F401 - CONFIG, context, PARKING_WHY: the page's and the tests' imports
    CONFIG,
    GREY,
    PARKING_WHY,
    Context,
    View,
    bars,
    context,
    indices,
    plain_table,
    q,
    vectors,
)

# --- 0. why a Transformer -----------------------------------------------------------------------------


def notice_why(x: LT.Sequential) -> str:
    """Steps that wait for each other on this sentence. No judging words: three counts and one path length. Step 1
    comes before the words it would need (tokens, <eos>, encoder, decoder, self-attention are defined in steps 2 and
    6): it speaks of words, an end mark and attention only."""
    return (
        f"On this sentence ({x.m - 1} English words and an end mark, {x.t - 1} French words and an end mark) a "
        f"recurrent translator takes {x.rnn} steps one after the other ({x.m} to read, {x.t} to write); the "
        f"Transformer takes {x.translating} to translate (it reads all {x.m} in one step) and "
        f"{x.training} to train on the pair (reading, then writing, each over every word at once, whatever the "
        f"length). In the recurrent translator the first word reaches the last through {x.rnn_path} steps; with "
        "attention every word reads every other word directly, in one step."
    )


TRAINING_LABEL = "Transformer, training: 2 stages, whatever the length"


def _why(c: Context) -> View:
    x = LT.sequential(c.a)
    labels = ["recurrent (RNN), translating", "Transformer, translating", TRAINING_LABEL]
    fig = bars(
        labels,
        [x.rnn, x.translating, x.training],
        "steps that must wait for each other, on this sentence",
        "steps",
        GREY,
        highlight=1,
        digits=0,
    )
    tab = pd.DataFrame({"model": labels, "sequential steps": [x.rnn, x.translating, x.training]})
    return View(
        fig,
        notice_why(x),
        tab,
        textbook="The paper's Table 1: a recurrent layer needs O(n) sequential operations and a path of "
        "length O(n) between two words; self-attention O(1) and O(1).",
    )


# --- 1. the sentence --------------------------------------------------------------------------------


def notice_sentence(a: Analysis) -> str:
    n_in, n_out = len(a.prepared.tokens), len(a.out_tokens)
    runs = len(a.greedy.steps)
    text = (
        f"{count(n_in, 'English token')} (and <eos>) go in, {count(n_out, 'French token')} (and <eos>) come out: "
        f"“{a.translation}”. The encoder runs once; the decoder ran {count(runs, 'time')}, once per word it wrote"
        + (" plus once for <eos>." if a.greedy.finished else " (it stopped at the length limit, without <eos>).")
    )
    if a.prepared.unknown:
        n = len(a.prepared.unknown)
        text += (
            f" {count(n, 'word')} {'is' if n == 1 else 'are'} not in the vocabulary and "
            f"go{'es' if n == 1 else ''} in as <unk>."
        )
    return text


def _sentence(c: Context) -> View:
    a = c.a
    fig = plain_table(
        {
            "English, in (encoder)": list(a.prepared.tokens) + ["<eos>"],
            "French, out (decoder)": list(a.out_tokens) + (["<eos>"] if a.greedy.finished else []),
        }
    )
    tab = pd.DataFrame({"sentence": [a.prepared.text], "translation": [a.translation]})
    return View(fig, notice_sentence(a), tab)


# --- 2. tokens and ids --------------------------------------------------------------------------------


def notice_tokens(t: lesson.Tokens, vocab_size: int) -> str:
    pairs = ", ".join(f"“{w}” → {i}" for w, i in list(zip(t.tokens, t.ids, strict=True))[:4])
    more = f" (and {len(t.ids) - 4} more)" if len(t.ids) > 4 else ""
    text = f"{pairs}{more}: {len(t.ids)} ids from a vocabulary of {vocab_size} English tokens."
    if t.unknown:
        text += f" Unknown: {', '.join(f'“{w}”' for w in t.unknown)} → id {UNK_ID} (<unk>)."
    if t.truncated:
        was = "was" if t.truncated == 1 else "were"
        text += f" {count(t.truncated, 'token')} beyond the model's limit {was} cut off."
    return text


def _tokens(c: Context) -> View:
    t = lesson.tokens(c.a)
    fig = plain_table(
        {
            "position": list(range(len(t.ids))),
            "token": list(t.tokens),
            "id": list(t.ids),
            "in vocabulary": ["no → <unk>" if w in t.unknown else "yes" for w in t.tokens],
        }
    )
    tab = pd.DataFrame({"token": t.tokens, "id": t.ids})
    return View(fig, notice_tokens(t, c.src_vocab), tab)


# --- 3. embedding -----------------------------------------------------------------------------------


def notice_embedding(e: lesson.Embedding, position: int = 0) -> str:
    """`position`: where the followed word stands; a word other than the first is announced (the coreference
    sentence follows "it", the pronoun of its step)."""
    pe = e.factor / 2**0.5  # every PE row has length √(d_model / 2)
    watch = (
        f"From here on the lesson watches {q(e.word)} (position {position}): which noun a pronoun stands for "
        f"is the question of step {lesson.step_index('coref')}. "
        if position
        else ""
    )
    return watch + (
        f"The row of {q(e.word)} (id {e.token_id}) has length {e.raw_norm:.3f}; "
        f"× √d_model = {e.factor:.3f} makes it {e.scaled_norm:.3f}, comparable to the positional encoding "
        f"added next (every PE row has length √(d_model/2) = {pe:.3f})."
    )


def _embedding(c: Context) -> View:
    a = c.a
    e = lesson.embedding(a, c.f.word)
    x = a.trace["src.embed"][0]
    fig = vectors(
        x,
        a.src_labels,
        "dimension",
        "token",
        title="the rows after × √d_model (src.embed)",
        height=max(240, min(540, 90 + 30 * x.shape[0])),
    )
    return View(
        fig,
        notice_embedding(e, c.f.word),
        table(x, indices(x.shape[1]), a.src_labels),
        textbook=f"The paper's base model uses d_model = {paper.BASE.d_model}, so √d_model = "
        f"{paper.BASE.d_model**0.5:.2f} there; this model uses d_model = {x.shape[1]}.",
    )


# --- 4. positional encoding -------------------------------------------------------------------------


def notice_positional(p: lesson.Positional, label: str, followed: str | None = None) -> str:
    """`followed`: the word the lesson follows. Rule: "the lesson follows … instead" only when this step shows
    another position than the followed word's (position 0 is sin 0 = 0 and cos 0 = 1 throughout)."""
    moved = (
        f"The lesson follows {q(followed)}, at position 0, where every sine is 0 and every cosine 1 (sin 0 and "
        "cos 0, the same in every pair of dimensions); this step looks at the next position instead. "
        if followed and followed != label
        else ""
    )
    if not p.on:
        return moved + (
            f"Positional encoding is switched off: {q(label)} enters the encoder as its embedding "
            f"alone (length {p.input_norm:.3f}), so the model cannot tell word order apart."
        )
    pos = p.position
    return moved + (
        f"{q(label)} is at position {pos}: PE[{pos}, 0] = sin({pos}) = {p.first[0]:.3f} and "
        f"PE[{p.position}, 1] = cos({p.position}) = {p.first[1]:.3f}. Every PE row has length {p.pe_norm:.3f}; "
        f"embedding (length {p.embed_norm:.3f}) + PE gives the encoder input X (length {p.input_norm:.3f})."
    )


def _positional(c: Context) -> View:
    a = c.a
    pos = lesson.pe_position(c.f, len(a.src_labels))
    p = lesson.positional(a, pos)
    labels = a.src_labels
    if not p.on:
        x = a.trace["src.input"][0]
        fig = vectors(x, labels, "dimension", "position")
        return View(
            fig,
            notice_positional(p, labels[pos], labels[c.f.word]),
            table(x, indices(x.shape[1]), labels),
            warning="Positional encoding is switched off in the sidebar: the figure shows the encoder's "
            "input, which is now the embedding alone.",
        )
    pe = a.trace["src.pos"][0]
    fig = heatmap(
        pe,
        indices(pe.shape[1]),
        labels,
        "encoding",
        x_title="dimension (even: sin, odd: cos)",
        y_title="position",
        height=max(220, min(520, 60 + 30 * pe.shape[0])),
    )
    return View(fig, notice_positional(p, labels[pos], labels[c.f.word]), table(pe, indices(pe.shape[1]), labels))


VIEWS: dict[str, Callable[[Context], View]] = {
    "why": _why,
    "sentence": _sentence,
    "tokens": _tokens,
    "embedding": _embedding,
    "positional": _positional,
    **lesson_encoder.VIEWS,
    **lesson_decoder.VIEWS,
}


def view(key: str, c: Context) -> View:
    """The figure, notice, exact numbers and textbook line of step `key`."""
    return VIEWS[key](c)
