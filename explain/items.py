"""Concept-test items, written from the model's tensors on a given sentence and answered by the model.

Every item is plain data (`Item`): a question, 3-4 options, the index of the option the model's own numbers make
right, one line that explains the answer with those numbers, and per option the misconception it stands for
(`MISCONCEPTIONS`; None for the right option and for a wrong one that is no known misconception). A *transfer*
item has a grid instead (`Item.grid`: a head's row for an unseen sentence, answered by clicking a cell, as the
classroom's click questions; `explain.questions.attention_grid` makes it).

An item is made by a *template* (`TEMPLATES`, one function each) from the shipped models and a few parameters
(a sentence, a word). The correct option always states this sentence's numbers (a weight, a length, a
translation), so two forms built on different sentences share no correct option text: remembering the pre-test's
answers does not answer the post-test. Distractors apply a known misconception to the same numbers (softmax values
in [-1, 1]; attention spread evenly; dividing by √d_k sharpens a row; the mask matters while generating; greedy =
sampling; a head switched off hands its weight to the others; LayerNorm makes a unit vector ...).

A template raises `ValueError` when the sentence does not give a clear item (an answer the options cannot tell
apart); the instruments (explain/instrument.py) use sentences for which none does, and a test holds that.

The templates of objectives 1-6 and the transfer item are here, those of 7-10 in explain/items_decoding.py; the
record, the misconceptions and the helpers they share in explain/items_base.py.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import torch

from explain import questions
from explain.items_base import MISCONCEPTIONS, Item, Models, Wrong, _analysis, _item, _n, _q, _words
from explain.items_decoding import decoder_input, greedy_beam, greedy_pick, layer_norm, smoothed_target
from explain.lesson import n_layers
from explain.questions import plain, quote
from model.pipeline import analyse, prepare
from model.trace import Interventions, describe_head
from model.vocab import BOS, EOS

__all__ = ["MISCONCEPTIONS", "TEMPLATES", "Item", "Models", "make"]  # the study's imports


# -- 1. a row of weights sums to 1 ---------------------------------------------------------------------------
def row_rest(m: Models, sentence: str, word: int) -> Item:
    a = _analysis(m.base, sentence)
    head = questions.most_decided_head(a, 0, word)
    w = a.trace["enc.0.self_attn.weights"][0, head, word]  # [Ts]
    words, top = _words(a), int(w.argmax())
    n, big = len(words), float(w[top])
    rest = float(w.sum()) - big
    return _item(
        "row_sum",
        "row_rest",
        f"Encoder layer 0, head {head}: the word {_q(words[word])} of {quote(a.prepared.tokens)} gives its "
        f"largest weight, {_n(big)}, to {_q(words[top])}. What do its weights on the other {n - 1} "
        "positions (EOS included) add up to?",
        f"{_n(rest)}: a row of weights adds up to 1",
        [
            (f"It cannot be told: each weight is any number from −1 to 1 ({_n(big)} is one)", "softmax_range"),
            (f"{_n((n - 1) / n)}: each of the other {n - 1} positions gets 1/{n}", "uniform"),
            (f"{_n(n - 1 - big)}: each weight is up to 1 on its own", None),
        ],
        f"The row's weights: {', '.join(f'{x} {_n(float(v))}' for x, v in zip(words, w, strict=True))}; "
        f"they add up to {_n(float(w.sum()), 3)}.",
        f"row_rest|{sentence}",
    )


# -- 2. ÷√d_k flattens a row ----------------------------------------------------------------------------------
def scaling_row(m: Models, sentence: str, word: int) -> Item:
    a = _analysis(m.base, sentence)
    head = questions.most_decided_head(a, 0, word)
    s = a.trace["enc.0.self_attn.scores"][0, head, word]  # [Ts]: q·k, not yet divided
    d_k = a.trace["enc.0.self_attn.q"].shape[-1]
    root = math.sqrt(d_k)
    raw, scaled, sharp = s.softmax(-1), (s / root).softmax(-1), (s * root).softmax(-1)
    words = _words(a)
    if int(raw.argmax()) != int(scaled.argmax()) or float(raw.max() - scaled.max()) < 0.02:
        raise ValueError("on this sentence ÷√d_k changes too little to ask")
    top = words[int(raw.argmax())]
    return _item(
        "scaling",
        "scaling_row",
        f"Encoder layer 0, head {head}, the row of {_q(words[word])} in {quote(a.prepared.tokens)}: "
        f"softmax of the raw scores q·k gives {_q(top)} {_n(float(raw.max()))}. What does dividing the "
        f"scores by √d_k = {root:.1f} before the softmax do to that weight?",
        f"It falls to {_n(float(scaled.max()))}: the row gets flatter",
        [
            (f"It rises to {_n(float(sharp.max()))}: the row gets sharper", "scaling_sharpens"),
            (f"It becomes {_n(float(raw.max()) / root)}: every weight is divided by {root:.1f}", "scale_after"),
            (f"It stays {_n(float(raw.max()))}: softmax ignores a common factor", None),
        ],
        f"Largest weight without ÷√d_k {_n(float(raw.max()), 3)}, with it {_n(float(scaled.max()), 3)} "
        f"(both on {_q(top)}); dividing the scores by a number above 1 brings them closer together.",
        f"scaling_row|{sentence}",
    )


# -- 3. the look-ahead mask -----------------------------------------------------------------------------------
def mask_zeroes(m: Models, sentence: str, row: int) -> Item:
    a = _analysis(m.base, sentence)
    w = a.trace["dec.0.self_attn.weights"][0, 0]  # [Tt, Tt]
    words = [BOS, *a.out_tokens]
    t = len(words)
    if not 1 <= row <= t - 2:
        raise ValueError("the translation is too short for this row")
    zero = [j for j in range(t) if float(w[row, j]) == 0.0]
    if zero != list(range(row + 1, t)):
        raise ValueError("this model's weights are not the masked pattern")

    def names(js: Iterable[int]) -> str:
        return ", ".join(_q(words[j]) for j in js)

    return _item(
        "look_ahead",
        "mask_zeroes",
        f"The decoder reads {quote(words)} (BOS, then the model's translation of "
        f"{quote(a.prepared.tokens)}). In decoder layer 0's self-attention, head 0, which weights of the "
        f"row of {_q(words[row])} are exactly 0?",
        f"Those on {names(range(row + 1, t))}: the words after it",
        [
            (f"Those on {names(range(row))}: the words before it", "mask_backwards"),
            (f"The one on {_q(words[row])} itself", None),
            ("None: the mask only matters while generating", "mask_decoding"),
        ],
        f"Row {_q(words[row])}: " + ", ".join(f"{words[j]} {_n(float(w[row, j]))}" for j in range(t)) + ".",
        f"mask_zeroes|{sentence}",
    )


def mask_training(m: Models, sentence: str) -> Item:
    good = _analysis(m.base, sentence).translation
    other = analyse(m.no_mask, prepare(m.no_mask, sentence)).translation
    if other == good:
        raise ValueError("the model trained without the mask translates this sentence well")
    return _item(
        "look_ahead",
        "mask_training",
        f"A copy of this model was trained with the same recipe but without the look-ahead mask. The "
        f"shipped model translates {quote(sentence.split())} as {_q(good)}. What does the copy write, "
        "generating word by word?",
        f"{_q(other)}: in training it copied the next word from its input, which generating does not have",
        [
            (f"{_q(good)} too: the mask only hides words, the model learns the same", "mask_harmless"),
            (f"{_q(good)} too, only faster: without the mask it reads the whole translation at once", "mask_decoding"),
            ("An error: a decoder trained without the mask cannot generate", None),
        ],
        f"The copy trained without the mask writes {_q(other)}; the shipped model {_q(good)}.",
        f"mask_training|{sentence}",
    )


# -- 4. encoder-decoder attention -----------------------------------------------------------------------------
def cross_shape(m: Models, sentence: str, row: int) -> Item:
    a = _analysis(m.base, sentence)
    w = a.trace["dec.0.cross_attn.weights"][0, 0]  # [Tt, Ts]
    t, s = w.shape
    d_k = a.trace["dec.0.cross_attn.q"].shape[-1]
    inputs = [BOS, *a.out_tokens]
    if len({s, t, d_k, s * t}) < 4 or not 0 <= row < t:
        raise ValueError("the sizes cannot be told apart on this sentence")
    return _item(
        "cross",
        "cross_shape",
        f"Translating {quote(a.prepared.tokens)}, the decoder is at {_q(inputs[row])}. In encoder-decoder "
        "attention its query meets keys: how many weights does its row have?",
        f"{s}: one per English position (EOS included): keys and values come from the encoder",
        [
            (f"{t}: one per French word so far: keys come from the decoder", "cross_from_decoder"),
            (f"{d_k}: one per number of the query (d_k)", None),
            (f"{s * t}: one per pair of English and French words", None),
        ],
        f"dec.0.cross_attn.weights has shape [heads, {t}, {s}]: {t} decoder rows, {s} encoder columns.",
        f"cross_shape|{sentence}",
    )


def cross_top(m: Models, sentence: str, row: int) -> Item:
    a = _analysis(m.base, sentence)
    layer = n_layers(a, "dec") - 1
    w = a.trace[f"dec.{layer}.cross_attn.weights"][0].mean(0)[row]  # [Ts]: head average
    src, outs = _words(a), [*a.out_tokens, EOS]
    top = int(w.argmax())
    if top == len(src) - 1 or float(w[top]) < 0.4:
        raise ValueError("this row reads no English word clearly")
    same = min(row, len(src) - 2)
    nouns = [i + 1 for i, x in enumerate(src[:-2]) if x in questions.DETERMINERS and i + 1 not in (top, same)]
    wrong: Wrong = [(f"{_q(src[same])}, the English word at the same position", "cross_aligned")] if same != top else []
    wrong += [(f"{_q(src[i])}, the sentence's noun", "importance") for i in nouns[:1]]
    wrong += [
        (f"{_q(src[i])}", None)
        for i in w.argsort(descending=True).tolist()
        if i not in (top, same, *nouns[:1], len(src) - 1)
    ][: 3 - len(wrong)]
    return _item(
        "cross",
        "cross_top",
        f"Decoder layer {layer}'s encoder-decoder attention (heads averaged): writing {_q(outs[row])} in "
        f"the translation of {quote(a.prepared.tokens)}, which English word does the decoder read most?",
        f"{_q(src[top])} ({_n(float(w[top]))} of the row)",
        wrong,
        "Weights: " + ", ".join(f"{x} {_n(float(v))}" for x, v in zip(src, w, strict=True)) + ".",
        f"cross_top|{sentence}",
    )


# -- 5. positional encoding -----------------------------------------------------------------------------------
def pos_permutation(m: Models, sentence: str, other: str, word: str) -> Item:
    off = Interventions(positional_encoding=False)
    a, b = _analysis(m.base, sentence, off), _analysis(m.base, other, off)
    if sorted(a.prepared.tokens) != sorted(b.prepared.tokens) or a.prepared.tokens == b.prepared.tokens:
        raise ValueError("the two sentences must have the same words in another order")
    i, j = a.prepared.tokens.index(word), b.prepared.tokens.index(word)
    if i == j:
        raise ValueError("the word must move")
    x, y = a.trace["enc.out"][0, i], b.trace["enc.out"][0, j]  # [D]
    diff = float((x - y).abs().max())
    size = float(x.abs().max())
    if diff > 1e-3 * size:
        raise ValueError("the encoder told the orders apart")
    return _item(
        "positional",
        "pos_permutation",
        f"Positional encoding is switched off. The encoder reads {quote(a.prepared.tokens)}, then "
        f"{quote(b.prepared.tokens)}: the same words in another order. How do its two output vectors for "
        f"{_q(word)} compare?",
        f"The same for {_q(word)} ({'exactly' if diff == 0 else f'up to {diff:.0e}'}): without positions the "
        "encoder reads a bag of words",
        [
            (f"Different: {_q(word)} is word {i + 1} in one and word {j + 1} in the other", "order_known"),
            ("Different: attention reads the words in order, left to right", "order_known"),
            ("They cannot be compared: without positions the encoder stops", None),
        ],
        f"Largest difference between the two vectors of {_q(word)}: {diff:.1e} (their largest number: {size:.2f}).",
        f"pos_permutation|{sentence}",
    )


# -- 6. switching one head off --------------------------------------------------------------------------------
def head_zero(m: Models, sentence: str, head: int) -> Item:
    q = questions.head_zero(m.base, prepare(m.base, sentence), Interventions(), 0, head)
    right = q.options[q.answer]
    if q.answer != 0:
        raise ValueError("the traces show another case")
    change = q.detail.rsplit("moves by ", 1)[1].split(" ")[0]
    return _item(
        "head_off",
        "head_zero",
        f"Switch off head {head} of encoder layer 0's self-attention for {quote(sentence.split())}. What "
        "changes inside the layer?",
        f"{right.split(';')[0]}, its weights stay as they were; the layer's output moves by {change}",
        [
            ("Its weights become equal on every word", "off_uniform"),
            ("The other heads' weights change to make up for it", "heads_compensate"),
            ("The whole layer's output becomes zero", None),
        ],
        q.detail,
        f"head_zero|{sentence}",
    )


def head_translation(m: Models, sentence: str, module: str, head: int) -> Item:
    q = questions.head_off(m.base, prepare(m.base, sentence), Interventions(), (module, head))
    before = _analysis(m.base, sentence).translation
    after = analyse(m.base, prepare(m.base, sentence), Interventions().with_head(module, head, on=False)).translation
    where = describe_head(module, head)
    wrong: Wrong
    if after == before:
        right, wrong = (
            f"It stays {_q(before)}: the other heads carry what this sentence needs",
            [("It changes: every head is needed for every word", None), ("It becomes empty: the layer stops", None)],
        )
    else:
        right, wrong = (
            f"It becomes {_q(after)}",
            [
                (f"It stays {_q(before)}: one head never matters", "head_irrelevant"),
                ("It becomes empty: the layer stops", None),
            ],
        )
    wrong.append(("The other heads take over its weights, so nothing can change", "heads_compensate"))
    return _item(
        "head_off",
        "head_translation",
        f"{quote(sentence.split())} translates as {_q(before)}. Switch off {where}: what happens to the translation?",
        right,
        wrong,
        q.detail,
        f"head_translation|{sentence}",
    )


# -- transfer: predict a head's row with the click grid --------------------------------------------------------
def transfer_row(m: Models, sentence: str, layer: int, head: int, word: int) -> Item:
    a = _analysis(m.base, sentence)
    g = questions.attention_grid(a, layer, head, word)
    w = a.trace[f"enc.{layer}.self_attn.weights"][0, head, word]  # [Ts]
    words, top = _words(a), int(w.argmax())
    if float(w[top]) < 0.3:
        raise ValueError("this head has no clear favourite for the word")
    if top == word:
        raise ValueError("the word attends to itself: too easy a transfer")
    labels = tuple(f"{g['rows'][word]} → {c}" for c in g["cols"])  # the asked row's cells (choice = its column)
    tags = tuple(
        "importance" if 0 < i < len(words) - 1 and words[i - 1] in questions.DETERMINERS and i != top else None
        for i in range(len(words))
    )
    grid: questions.ClickGrid = {**g, "row": word}
    return Item(
        "",
        "transfer",
        "transfer_row",
        plain(
            f"A sentence you have not seen: {quote(a.prepared.tokens)}. In encoder layer {layer}, head "
            f"{head}, which word does {_q(words[word])} (the shaded row) give its largest weight to? "
            "Click that cell.",
            500,
        ),
        labels,
        top,
        plain(
            "Weights of the row: " + ", ".join(f"{x} {_n(float(v))}" for x, v in zip(words, w, strict=True)) + ".", 500
        ),
        tuple(tags),
        grid,
    )


TEMPLATES = {
    f.__name__: f
    for f in (
        row_rest,
        scaling_row,
        mask_zeroes,
        mask_training,
        cross_shape,
        cross_top,
        pos_permutation,
        head_zero,
        head_translation,
        greedy_pick,
        greedy_beam,
        layer_norm,
        smoothed_target,
        decoder_input,
        transfer_row,
    )
}


def make(models: Models, template: str, params: Mapping[str, Any], item_id: str) -> Item:
    """The item of `template` on `params` (a sentence and the template's own), numbered `item_id`."""
    with torch.no_grad():
        item = TEMPLATES[template](models, **params)
    return Item(
        item_id,
        *[getattr(item, f) for f in ("objective", "template", "text", "options", "answer", "explain", "tags", "grid")],
    )
