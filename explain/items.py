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
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from explain import questions
from explain.lesson import n_layers
from explain.questions import plain, quote
from model.checkpoint import Bundle
from model.pipeline import Analysis, analyse, beam, decode_text, prepare, teacher_forced
from model.trace import Interventions
from model.vocab import BOS, EOS

MAX_ITEM_OPTION = 160  # characters of an option (a translation in full)
MISCONCEPTIONS = {
    "softmax_range": "Softmax weights are numbers from −1 to 1 that need not add up to 1",
    "uniform": "Attention spreads evenly over the words",
    "importance": "The largest attention weight goes to the most important word (a noun)",
    "scaling_sharpens": "Dividing the scores by √d_k makes a row sharper",
    "scale_after": "√d_k divides the weights after the softmax",
    "mask_decoding": "The look-ahead mask matters while generating word by word",
    "mask_harmless": "Training without the mask costs nothing: the mask only hides words",
    "mask_backwards": "The mask hides the words before a position",
    "cross_from_decoder": "Encoder-decoder attention weighs the decoder's own words",
    "cross_aligned": "The decoder reads the English word at its own position",
    "order_known": "The encoder knows word order without positional encoding",
    "heads_compensate": "The other heads make up for a head switched off",
    "off_uniform": "A head switched off spreads its weights evenly",
    "head_irrelevant": "One head never changes the translation",
    "greedy_sampling": "Greedy decoding draws each word at random by its probability",
    "beam_always_better": "Beam search always finds another, better translation",
    "layernorm_unit": "LayerNorm divides a vector by its length",
    "layernorm_keeps": "The residual and LayerNorm leave the vector's statistics as they were",
    "onehot_target": "The training target is the one-hot right word",
    "no_shift": "The decoder's input at a position is the word it must predict",
    "free_running": "In training the decoder reads its own predictions",
}


@dataclass(frozen=True)
class Item:
    id: str  # "A03": form and number
    objective: str  # a key of explain.instrument.OBJECTIVES
    template: str
    text: str
    options: tuple[str, ...]  # for a transfer item: its cells' labels ("row → column"), row by row
    answer: int  # index of the right option (a transfer item: its cell)
    explain: str  # the numbers behind the answer, one line
    tags: tuple[str | None, ...] = ()  # per option: a MISCONCEPTIONS key or None
    # transfer items: rows, cols, row, answer, values
    grid: questions.ClickGrid | None = field(default=None, compare=False)

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "objective": self.objective, "template": self.template, "text": self.text,
                "options": list(self.options), "answer": self.answer, "explain": self.explain,
                "tags": list(self.tags), **({"grid": self.grid} if self.grid is not None else {})}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Item:
        return cls(str(d["id"]), str(d["objective"]), str(d["template"]), str(d["text"]),
                   tuple(str(o) for o in d["options"]), int(d["answer"]), str(d["explain"]),
                   tuple(None if t is None else str(t) for t in d.get("tags", ())), d.get("grid"))


@dataclass(frozen=True)
class Models:
    """The shipped models the items are answered by: the base model and the copy trained without the mask."""
    base: Bundle
    no_mask: Bundle


def _q(text: str) -> str:
    return quote([text]) if text else "nothing"


def _n(x: float, places: int = 2) -> str:
    """A number as an option writes it (a true minus sign; never −0.00)."""
    text = f"{x:.{places}f}"
    return text.lstrip("-").replace("-", "−") if float(text) == 0 else text.replace("-", "−")


Wrong = list[tuple[str, str | None]]  # the wrong options: (text, the misconception it shows, or None)


def _item(objective: str, template: str, text: str, right: str, wrong: Wrong,
          explain: str, seed: str) -> Item:
    """Options in an order fixed by `seed` (not always first); distinct texts or ValueError."""
    options = [(plain(right, MAX_ITEM_OPTION), None), *[(plain(t, MAX_ITEM_OPTION), tag) for t, tag in wrong]]
    if len({o for o, _ in options}) != len(options):
        raise ValueError("two options read the same on this sentence")
    random.Random(seed).shuffle(options)
    texts = tuple(o for o, _ in options)
    return Item("", objective, template, plain(text, 500), texts, texts.index(plain(right, MAX_ITEM_OPTION)),
                plain(explain, 500), tuple(tag for _, tag in options))


def _analysis(b: Bundle, sentence: str, iv: Interventions | None = None) -> Analysis:
    a = analyse(b, prepare(b, sentence), iv)
    if a.prepared.empty or a.prepared.unknown:
        raise ValueError(f"{sentence!r}: not a sentence of the toy set")
    return a


def _words(a: Analysis) -> list[str]:
    return [*a.prepared.tokens, EOS]


# -- 1. a row of weights sums to 1 ---------------------------------------------------------------------------
def row_rest(m: Models, sentence: str, word: int) -> Item:
    a = _analysis(m.base, sentence)
    head = questions.most_decided_head(a, 0, word)
    w = a.trace["enc.0.self_attn.weights"][0, head, word]  # [Ts]
    words, top = _words(a), int(w.argmax())
    n, big = len(words), float(w[top])
    rest = float(w.sum()) - big
    return _item("row_sum", "row_rest",
                 f"Encoder layer 0, head {head}: the word {_q(words[word])} of {quote(a.prepared.tokens)} gives its "
                 f"largest weight, {_n(big)}, to {_q(words[top])}. What do its weights on the other {n - 1} "
                 "positions (EOS included) add up to?",
                 f"{_n(rest)}: a row of weights adds up to 1",
                 [(f"It cannot be told: each weight is any number from −1 to 1 ({_n(big)} is one)", "softmax_range"),
                  (f"{_n((n - 1) / n)}: each of the other {n - 1} positions gets 1/{n}", "uniform"),
                  (f"{_n(n - 1 - big)}: each weight is up to 1 on its own", None)],
                 f"The row's weights: {', '.join(f'{x} {_n(float(v))}' for x, v in zip(words, w, strict=True))}; "
                 f"they add up to {_n(float(w.sum()), 3)}.", f"row_rest|{sentence}")


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
    return _item("scaling", "scaling_row",
                 f"Encoder layer 0, head {head}, the row of {_q(words[word])} in {quote(a.prepared.tokens)}: "
                 f"softmax of the raw scores q·k gives {_q(top)} {_n(float(raw.max()))}. What does dividing the "
                 f"scores by √d_k = {root:.1f} before the softmax do to that weight?",
                 f"It falls to {_n(float(scaled.max()))}: the row gets flatter",
                 [(f"It rises to {_n(float(sharp.max()))}: the row gets sharper", "scaling_sharpens"),
                  (f"It becomes {_n(float(raw.max()) / root)}: every weight is divided by {root:.1f}", "scale_after"),
                  (f"It stays {_n(float(raw.max()))}: softmax ignores a common factor", None)],
                 f"Largest weight without ÷√d_k {_n(float(raw.max()), 3)}, with it {_n(float(scaled.max()), 3)} "
                 f"(both on {_q(top)}); dividing the scores by a number above 1 brings them closer together.",
                 f"scaling_row|{sentence}")


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
    return _item("look_ahead", "mask_zeroes",
                 f"The decoder reads {quote(words)} (BOS, then the model's translation of "
                 f"{quote(a.prepared.tokens)}). In decoder layer 0's self-attention, head 0, which weights of the "
                 f"row of {_q(words[row])} are exactly 0?",
                 f"Those on {names(range(row + 1, t))}: the words after it",
                 [(f"Those on {names(range(row))}: the words before it", "mask_backwards"),
                  (f"The one on {_q(words[row])} itself", None),
                  ("None: the mask only matters while generating", "mask_decoding")],
                 f"Row {_q(words[row])}: " + ", ".join(f"{words[j]} {_n(float(w[row, j]))}" for j in range(t)) + ".",
                 f"mask_zeroes|{sentence}")


def mask_training(m: Models, sentence: str) -> Item:
    good = _analysis(m.base, sentence).translation
    other = analyse(m.no_mask, prepare(m.no_mask, sentence)).translation
    if other == good:
        raise ValueError("the model trained without the mask translates this sentence well")
    return _item("look_ahead", "mask_training",
                 f"A copy of this model was trained with the same recipe but without the look-ahead mask. The "
                 f"shipped model translates {quote(sentence.split())} as {_q(good)}. What does the copy write, "
                 "generating word by word?",
                 f"{_q(other)}: in training it copied the next word from its input, which generating does not have",
                 [(f"{_q(good)} too: the mask only hides words, the model learns the same", "mask_harmless"),
                  (f"{_q(good)} too, only faster: without the mask it reads the whole translation at once",
                   "mask_decoding"),
                  ("An error: a decoder trained without the mask cannot generate", None)],
                 f"The copy trained without the mask writes {_q(other)}; the shipped model {_q(good)}.",
                 f"mask_training|{sentence}")


# -- 4. encoder-decoder attention -----------------------------------------------------------------------------
def cross_shape(m: Models, sentence: str, row: int) -> Item:
    a = _analysis(m.base, sentence)
    w = a.trace["dec.0.cross_attn.weights"][0, 0]  # [Tt, Ts]
    t, s = w.shape
    d_k = a.trace["dec.0.cross_attn.q"].shape[-1]
    inputs = [BOS, *a.out_tokens]
    if len({s, t, d_k, s * t}) < 4 or not 0 <= row < t:
        raise ValueError("the sizes cannot be told apart on this sentence")
    return _item("cross", "cross_shape",
                 f"Translating {quote(a.prepared.tokens)}, the decoder is at {_q(inputs[row])}. In encoder-decoder "
                 "attention its query meets keys: how many weights does its row have?",
                 f"{s}: one per English position (EOS included): keys and values come from the encoder",
                 [(f"{t}: one per French word so far: keys come from the decoder", "cross_from_decoder"),
                  (f"{d_k}: one per number of the query (d_k)", None),
                  (f"{s * t}: one per pair of English and French words", None)],
                 f"dec.0.cross_attn.weights has shape [heads, {t}, {s}]: {t} decoder rows, {s} encoder columns.",
                 f"cross_shape|{sentence}")


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
    wrong += [(f"{_q(src[i])}", None) for i in w.argsort(descending=True).tolist()
              if i not in (top, same, *nouns[:1], len(src) - 1)][: 3 - len(wrong)]
    return _item("cross", "cross_top",
                 f"Decoder layer {layer}'s encoder-decoder attention (heads averaged): writing {_q(outs[row])} in "
                 f"the translation of {quote(a.prepared.tokens)}, which English word does the decoder read most?",
                 f"{_q(src[top])} ({_n(float(w[top]))} of the row)", wrong,
                 "Weights: " + ", ".join(f"{x} {_n(float(v))}" for x, v in zip(src, w, strict=True)) + ".",
                 f"cross_top|{sentence}")


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
    return _item("positional", "pos_permutation",
                 f"Positional encoding is switched off. The encoder reads {quote(a.prepared.tokens)}, then "
                 f"{quote(b.prepared.tokens)}: the same words in another order. How do its two output vectors for "
                 f"{_q(word)} compare?",
                 f"The same for {_q(word)} ({'exactly' if diff == 0 else f'up to {diff:.0e}'}): without positions the "
                 "encoder reads a bag of words",
                 [(f"Different: {_q(word)} is word {i + 1} in one and word {j + 1} in the other", "order_known"),
                  ("Different: attention reads the words in order, left to right", "order_known"),
                  ("They cannot be compared: without positions the encoder stops", None)],
                 f"Largest difference between the two vectors of {_q(word)}: {diff:.1e} (their largest number: "
                 f"{size:.2f}).", f"pos_permutation|{sentence}")


# -- 6. switching one head off --------------------------------------------------------------------------------
def head_zero(m: Models, sentence: str, head: int) -> Item:
    q = questions.head_zero(m.base, prepare(m.base, sentence), Interventions(), 0, head)
    right = q.options[q.answer]
    if q.answer != 0:
        raise ValueError("the traces show another case")
    change = q.detail.rsplit("moves by ", 1)[1].split(" ")[0]
    return _item("head_off", "head_zero",
                 f"Switch off head {head} of encoder layer 0's self-attention for {quote(sentence.split())}. What "
                 "changes inside the layer?",
                 f"{right.split(';')[0]}, its weights stay as they were; the layer's output moves by {change}",
                 [("Its weights become equal on every word", "off_uniform"),
                  ("The other heads' weights change to make up for it", "heads_compensate"),
                  ("The whole layer's output becomes zero", None)],
                 q.detail, f"head_zero|{sentence}")


def head_translation(m: Models, sentence: str, module: str, head: int) -> Item:
    q = questions.head_off(m.base, prepare(m.base, sentence), Interventions(), (module, head))
    before = _analysis(m.base, sentence).translation
    after = analyse(m.base, prepare(m.base, sentence), Interventions().with_head(module, head, on=False)).translation
    where = questions.head_label(module, head)
    wrong: Wrong
    if after == before:
        right, wrong = (f"It stays {_q(before)}: the other heads carry what this sentence needs",
                        [("It changes: every head is needed for every word", None),
                         ("It becomes empty: the layer stops", None)])
    else:
        right, wrong = (f"It becomes {_q(after)}", [(f"It stays {_q(before)}: one head never matters",
                                                    "head_irrelevant"),
                                                   ("It becomes empty: the layer stops", None)])
    wrong.append(("The other heads take over its weights, so nothing can change", "heads_compensate"))
    return _item("head_off", "head_translation",
                 f"{quote(sentence.split())} translates as {_q(before)}. Switch off {where}: what happens to the "
                 "translation?", right, wrong, q.detail, f"head_translation|{sentence}")


# -- 7. greedy decoding and beam search ------------------------------------------------------------------------
def greedy_pick(m: Models, sentence: str, position: int) -> Item:
    a = _analysis(m.base, sentence)
    itos = m.base.tgt_vocab.itos
    p = a.trace["probs"][0, position]  # [V]
    top = p.topk(3)
    w = [plain(itos[int(i)]) for i in top.indices]
    so_far = quote(a.out_tokens[:position]) if position else "nothing yet"
    ps = [float(v) for v in top.values]
    if ps[1] < 0.005:
        raise ValueError("the runner-up is too unlikely to ask")
    return _item("decoding", "greedy_pick",
                 f"Translating {quote(a.prepared.tokens)}, the decoder has written {so_far}. Its next-word "
                 f"probabilities: {w[0]} {_n(ps[0])}, {w[1]} {_n(ps[1], 3)}, {w[2]} {_n(ps[2], 3)}, ... What does "
                 "greedy decoding write next?",
                 f"{_q(w[0])}, every time: it takes the most probable word",
                 [(f"{_q(w[0])} about {ps[0]:.0%} of the time, {_q(w[1])} otherwise: it draws by probability",
                   "greedy_sampling"),
                  (f"{_q(w[1])}: greedy keeps the runner-up in reserve and writes it", None),
                  ("It cannot be told before the sentence is finished", "beam_always_better")],
                 f"probs[0, {position}]: " + ", ".join(f"{x} {_n(v, 3)}" for x, v in zip(w, ps, strict=True)) + ".",
                 f"greedy_pick|{sentence}")


def greedy_beam(m: Models, sentence: str, k: int = 4) -> Item:
    a = _analysis(m.base, sentence)
    b = beam(m.base, a.prepared, k)
    best = decode_text(m.base, b.best.output)
    greedy = a.translation
    wrong: Wrong
    if best == greedy:
        right = f"{_q(greedy)}, the same as greedy decoding: its most probable words already make the best sentence"
        wrong = [("Another translation: beam search always improves on greedy decoding", "beam_always_better"),
                 ("A different one on every run: beam search samples its hypotheses", "greedy_sampling")]
    else:
        right = f"{_q(best)}, not greedy's {_q(greedy)}: a less likely word first led to a more likely sentence"
        wrong = [(f"{_q(greedy)}, the same: beam search only checks greedy's choice", None),
                 ("A different one on every run: beam search samples its hypotheses", "greedy_sampling")]
    wrong.append(("Nothing until all the hypotheses are the same length", None))
    return _item("decoding", "greedy_beam",
                 f"Greedy decoding translates {quote(a.prepared.tokens)} as {_q(greedy)}. What does beam search "
                 f"with {k} hypotheses give?", right, wrong,
                 f"Beam search ({k} hypotheses): {_q(best)}, probability {_n(b.best.prob, 3)}.",
                 f"greedy_beam|{sentence}")


# -- 8. residual connection and LayerNorm ---------------------------------------------------------------------
def layer_norm(m: Models, sentence: str, word: int) -> Item:
    a = _analysis(m.base, sentence)
    r = a.trace["enc.0.add_norm1.resid"][0, word]  # [D]: x + Sublayer(x)
    z = a.trace["enc.0.add_norm1.normed"][0, word]  # [D]: before LayerNorm's scale and shift
    mean, sd = float(r.mean()), float(r.std(unbiased=False))
    zm, zs = float(z.mean()), float(z.std(unbiased=False))
    words = _words(a)
    return _item("add_norm", "layer_norm",
                 f"In encoder layer 0, the residual x + Attention(x) of {_q(words[word])} in "
                 f"{quote(a.prepared.tokens)} has {r.numel()} numbers with mean {_n(mean)} and standard deviation "
                 f"{_n(sd)}. What does LayerNorm's first step (before its learned scale and shift) turn them into?",
                 f"Mean {_n(zm)}, standard deviation {_n(zs)} (from {_n(mean)} and {_n(sd)}): the {r.numel()} numbers "
                 "of this one word are centred and scaled",
                 [(f"A vector of length 1 (from {_n(float(r.norm()))}): each vector is divided by its length",
                   "layernorm_unit"),
                  (f"Mean {_n(mean)}, standard deviation {_n(sd)}: the residual only adds, nothing is rescaled",
                   "layernorm_keeps"),
                  (f"Each of the {r.numel()} columns centred over the sentence's {len(words)} words", None)],
                 f"After the first step: mean {_n(zm, 4)}, standard deviation {_n(zs, 4)}.",
                 f"layer_norm|{sentence}")


# -- 9. label smoothing ---------------------------------------------------------------------------------------
def smoothed_target(m: Models, sentence: str, reference: str, position: int, word: str) -> Item:
    eps = float(m.base.meta.get("training", {}).get("label_smoothing", 0.1))
    v = m.base.config.tgt_vocab
    tf = teacher_forced(m.base, prepare(m.base, sentence), reference)
    gold = [*tf.target_tokens, EOS]
    if not 0 <= position < len(gold) or word not in m.base.tgt_vocab.stoi:
        raise ValueError("no such position or word")
    right_word = gold[position]
    target = (1 - eps) + eps / v if word == right_word else eps / v
    other = eps / v if word == right_word else (1 - eps) + eps / v
    is_right = word == right_word
    return _item("label_smoothing", "smoothed_target",
                 f"Training on {quote(sentence.split())} → {quote(tf.target_tokens)} with label smoothing "
                 f"ε = {eps} over the {v} French tokens: the position that must predict {_q(right_word)} is "
                 f"trained towards a target distribution. What probability does that target give {_q(word)}?",
                 f"{target:.4f}" + (" = 1 − ε + ε/V" if is_right else " = ε/V"),
                 [("1" if is_right else "0", "onehot_target"), (f"{other:.4f}", None),
                  (f"{1 / v:.4f} = 1/V", None) if is_right else (f"{eps:.4f} = ε", None)],
                 f"Smoothed target: 1 − ε + ε/V = {(1 - eps) + eps / v:.4f} on the right word, ε/V = {eps / v:.6f} on "
                 f"each of the others (ε = {eps}, V = {v}).", f"smoothed_target|{sentence}|{word}")


# -- 10. teacher forcing --------------------------------------------------------------------------------------
def decoder_input(m: Models, sentence: str, reference: str, position: int) -> Item:
    tf = teacher_forced(m.base, prepare(m.base, sentence), reference)
    itos = m.base.tgt_vocab.itos
    fed = [itos[int(i)] for i in tf.trace["tgt.tokens"][0]]  # what the decoder read: BOS + reference
    gold = [*tf.target_tokens, EOS]
    if not 1 <= position < len(tf.target_tokens):
        raise ValueError("no such position")
    src = sentence.split()
    wrong: Wrong = [(f"{_q(gold[position])}, the word it must predict", "no_shift")]
    own = itos[tf.predicted[position - 1]]
    if own != fed[position]:
        wrong.append((f"{_q(own)}, what the model itself predicted at the position before", "free_running"))
    else:
        wrong.append(("Whatever the model itself predicted at the position before", "free_running"))
    wrong.append((f"{_q(src[min(position, len(src) - 1)])}, the English word at that position", None))
    return _item("teacher_forcing", "decoder_input",
                 f"Training on {quote(src)} → {quote(tf.target_tokens)}: what does the decoder read as its input "
                 f"at the position that must predict {_q(gold[position])}?",
                 f"{_q(fed[position])}, the reference's word before it", wrong,
                 f"Decoder input (BOS + the reference, shifted right): {quote(fed)}.", f"decoder_input|{sentence}")


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
    tags = tuple("importance" if 0 < i < len(words) - 1 and words[i - 1] in questions.DETERMINERS and i != top else None
                 for i in range(len(words)))
    grid: questions.ClickGrid = {**g, "row": word}
    return Item("", "transfer", "transfer_row",
                plain(f"A sentence you have not seen: {quote(a.prepared.tokens)}. In encoder layer {layer}, head "
                        f"{head}, which word does {_q(words[word])} (the shaded row) give its largest weight to? "
                        "Click that cell.", 500),
                labels, top,
                plain("Weights of the row: " + ", ".join(f"{x} {_n(float(v))}" for x, v in zip(words, w, strict=True))
                        + ".", 500), tuple(tags), grid)


TEMPLATES = {f.__name__: f for f in (row_rest, scaling_row, mask_zeroes, mask_training, cross_shape, cross_top,
                                     pos_permutation, head_zero, head_translation, greedy_pick, greedy_beam,
                                     layer_norm, smoothed_target, decoder_input, transfer_row)}


def make(models: Models, template: str, params: Mapping[str, Any], item_id: str) -> Item:
    """The item of `template` on `params` (a sentence and the template's own), numbered `item_id`."""
    with torch.no_grad():
        item = TEMPLATES[template](models, **params)
    return Item(item_id, *[getattr(item, f) for f in ("objective", "template", "text", "options", "answer",
                                                      "explain", "tags", "grid")])
