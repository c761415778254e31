"""How good is a model? Exact match, BLEU and il/elle accuracy on held-out sentence pairs.

- Exact match: the share of sentences translated token for token like the reference. On a grammar
  with one right answer per sentence this is the clearest figure.
- BLEU (Papineni et al. 2002; the paper's Table 2): n-gram overlap of the translations with the
  references over the whole corpus, 0-100, computed by sacreBLEU on detokenized text.
- il/elle accuracy: on the ``coref`` pairs ("the animal didn't cross the street because it was too
  tired / wide"), the share where the French pronoun is the right one. Getting it right needs the
  model to link "it" to the noun the adjective fits: what the lecture's attention picture shows.

Translations are greedy (`model.decoding.greedy_batch`), the held-out sentences in length-sorted
batches. `translate_pairs` decodes only the pairs the model does not already get right under teacher
forcing (one forward pass tells which): a trained model's evaluation then costs little more than
that pass.

    python -m model.evaluate [--checkpoint assets/checkpoints/base] [--split heldout]
    python -m model.evaluate --checkpoint assets/checkpoints/rnn      # the recurrent model (model/rnn.py)
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import cast

import sacrebleu
import torch
from torch import Tensor

from model.checkpoint import Bundle
from model.data import Pair, encode_pairs, pad
from model.decoding import greedy_batch, max_output_len
from model.trace import Interventions, Trace
from model.vocab import EOS_ID, PAD_ID, detokenize, tokenize

COREF_TAG = "coref"
PRONOUNS = ("il", "elle")  # the French pronoun that "it" becomes in a coref sentence


@dataclass(frozen=True)
class Metrics:
    """exact_match and coref_accuracy are shares in [0, 1]; bleu is 0-100 (sacreBLEU's scale)."""

    exact_match: float
    bleu: float
    coref_accuracy: float | None  # None: no coref pairs with an il/elle reference (or target not French)
    n: int  # pairs scored
    n_coref: int = 0  # coref pairs scored for il/elle


def translate_batch(
    bundle: Bundle, sources: list[str], interventions: Interventions | None = None, batch_size: int = 256
) -> list[list[str]]:
    """Greedy translations (token lists) of many sentences, batched by length; order kept.

    Sources longer than the model accepts are cut to fit (one position stays for <eos>).
    """
    src_lang, _ = bundle.langs
    limit = bundle.config.max_len - 1
    encoded = [bundle.src_vocab.encode(tokenize(s, src_lang)[:limit])[0] + [EOS_ID] for s in sources]
    order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))  # similar lengths, little padding
    out: list[list[str]] = [[] for _ in encoded]
    for start in range(0, len(order), batch_size):
        chunk = order[start : start + batch_size]
        width = max(len(encoded[i]) for i in chunk)
        src = torch.full((len(chunk), width), PAD_ID, dtype=torch.long)  # [B, Ts]
        for row, i in enumerate(chunk):
            src[row, : len(encoded[i])] = torch.tensor(encoded[i])
        for i, ids in zip(chunk, greedy_batch(bundle.model, src, interventions), strict=True):
            out[i] = bundle.tgt_vocab.decode(ids)
    return out


def solved(logits: Tensor, gold: Tensor) -> Tensor:
    """[B] True where, under teacher forcing, the most probable next token is the reference's at every
    position (<eos> included; <pad> positions ignored). logits [B, T, V], gold [B, T]."""
    return ((logits.argmax(-1) == gold) | (gold == PAD_ID)).all(dim=-1)  # [B]


@torch.no_grad()
def translate_pairs(
    bundle: Bundle,
    pairs: Sequence[Pair],
    interventions: Interventions | None = None,
    batch_size: int = 256,
    encoded: Sequence[tuple[list[int], list[int]]] | None = None,
    on_batch: Callable[[Tensor, Tensor], None] | None = None,
) -> list[list[str]]:
    """Greedy translations (token lists) of pairs that have a reference: what `translate_batch` gives, cheaper.

    Greedy decoding feeds the model its own previous words. If, fed the reference's previous words
    instead (teacher forcing, one pass for a whole batch), the model's most probable next word is the
    reference's at every position, then greedy decoding sees the reference's prefix at every step and
    writes exactly the reference, then <eos>. So a `solved` pair's translation is its reference (as the
    model's vocabulary spells it), and only the other pairs are decoded step by step. Both paths compute
    the same numbers in different batches, so they can differ only where two words' scores tie to
    float rounding. The argument needs a decoder that cannot see ahead: with the look-ahead mask (or
    the padding mask) switched off every pair is decoded.

    `encoded`: the pairs as `model.data.encode_pairs` gives them, if already at hand. `on_batch(logits,
    gold)` sees each teacher-forced batch (the trainer takes its held-out loss from it).
    """
    model, cfg = bundle.model, bundle.config
    iv = interventions or Interventions()
    causal = iv.look_ahead_mask and iv.padding_mask  # position t sees the reference's words before t only
    if encoded is None:
        src_lang, tgt_lang = bundle.langs
        encoded = encode_pairs(pairs, bundle.src_vocab, bundle.tgt_vocab, src_lang, tgt_lang)
    out: list[list[str] | None] = [None] * len(encoded)
    fits = [
        i
        for i, (s, t) in enumerate(encoded)
        if len(s) <= cfg.max_len and len(t) - 1 <= min(cfg.max_len, max_output_len(model, len(s)))
    ]
    fits.sort(key=lambda i: (len(encoded[i][0]), len(encoded[i][1])))  # similar lengths, little padding
    if not (causal or on_batch):
        fits = []
    trace = Trace(iv, record=False)
    for start in range(0, len(fits), batch_size):
        chunk = fits[start : start + batch_size]
        src, tgt = pad([encoded[i][0] for i in chunk]), pad([encoded[i][1] for i in chunk])  # [B, Ts], [B, Tt]
        logits = model(src, tgt[:, :-1], trace)  # [B, Tt - 1, V]
        gold = tgt[:, 1:]  # [B, Tt - 1]
        if on_batch is not None:
            on_batch(logits, gold)
        for row, ok in zip(chunk, solved(logits, gold).tolist(), strict=True):
            if ok and causal:
                out[row] = bundle.tgt_vocab.decode(encoded[row][1][1:-1])
    rest = [i for i, hyp in enumerate(out) if hyp is None]
    for i, hyp in zip(
        rest, translate_batch(bundle, [pairs[i].src for i in rest], interventions, batch_size), strict=True
    ):
        out[i] = hyp
    return cast(list[list[str]], out)  # every slot is filled now: solved above, or translated just now


def pronoun(tokens: list[str]) -> str | None:
    """The first il/elle in a French token list ("qu'" "il" counts: the tokenizer splits the elision)."""
    return next((t for t in tokens if t in PRONOUNS), None)


def score(pairs: Sequence[Pair], hypotheses: list[list[str]], tgt_lang: str) -> Metrics:
    """Score hypothesis token lists against the pairs' references (`pair.tgt`, `pair.tag`)."""
    if len(pairs) != len(hypotheses):
        raise ValueError(f"{len(pairs)} pairs but {len(hypotheses)} hypotheses")
    refs = [tokenize(p.tgt, tgt_lang) for p in pairs]
    n = len(pairs)
    exact = sum(h == r for h, r in zip(hypotheses, refs, strict=True))
    # BLEU on detokenized strings, as sacreBLEU wants; references normalised by the same tokenizer
    # (lower case), so a capitalised user corpus is not penalised for the model's lower-case output.
    hyp_text = [detokenize(h, tgt_lang) for h in hypotheses]
    ref_text = [detokenize(r, tgt_lang) for r in refs]
    bleu = sacrebleu.corpus_bleu(hyp_text, [ref_text]).score if n else 0.0
    coref_right = coref_n = 0
    if tgt_lang == "fr":
        for p, h, r in zip(pairs, hypotheses, refs, strict=True):
            if getattr(p, "tag", None) == COREF_TAG and pronoun(r) is not None:
                coref_n += 1
                coref_right += pronoun(h) == pronoun(r)
    return Metrics(exact / n if n else 0.0, float(bleu), coref_right / coref_n if coref_n else None, n, coref_n)


def evaluate(bundle: Bundle, pairs: Sequence[Pair], interventions: Interventions | None = None) -> Metrics:
    """Greedy-translate `pairs` (sources in the bundle's source language) and score them."""
    _, tgt_lang = bundle.langs
    return score(pairs, translate_pairs(bundle, pairs, interventions), tgt_lang)


if __name__ == "__main__":  # python -m model.evaluate: the command line is model/cli.py's
    from model.cli import evaluate as main

    sys.exit(main())
