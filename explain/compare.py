"""Measuring the recurrent model against the Transformer: what "Before the Transformer" draws.

Each function returns plain data (dicts and lists of numbers) for assets/rnn_comparison.json, which
`python -m bench.bench_rnn --write` produces:

- `sequential_steps`: steps that wait for each other, per source length, on the toy set's real pairs;
- `encode_times`: wall time to encode a batch, both models, as the sentence grows (medians, the two
  models alternating so machine noise hits both);
- `accuracy_by_length`: held-out exact match per source-length bucket, and il/elle on the coref family;
- `gradient_by_distance`: ‖∂out_t/∂x_i‖ against t − i in each model's encoder (the long-term
  dependency problem), relative to distance 0, medians over real held-out sentences.
"""

from __future__ import annotations

import statistics
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any, TypedDict

import torch
from torch import Tensor

from model.checkpoint import Bundle
from model.data import Pair
from model.evaluate import score, translate_batch
from model.rnn import RNNSeq2Seq
from model.trace import NO_TRACE
from model.transformer import Transformer
from model.vocab import EOS_ID, tokenize

# --- Sequential steps --------------------------------------------------------------------------------


class StepsRow(TypedDict):
    m: int  # source tokens, <eos> included
    t: int  # mean target tokens, <eos> included
    n: int  # pairs of that source length
    rnn: int
    transformer_decode: int
    transformer_train: int


def sequential_steps(pairs: list[Pair], src_lang: str = "en", tgt_lang: str = "fr") -> list[StepsRow]:
    """Per source length m (tokens the encoder reads, <eos> included): the mean target length t (tokens the
    decoder outputs, <eos> included) and the steps that must wait for each other:

    - RNN: m encoder steps, then t decoder steps (training and translating alike);
    - Transformer translating: 1 encoder pass (all positions at once), then t decoder steps;
    - Transformer training: 1 encoder pass and 1 decoder pass (teacher forcing with the look-ahead mask).

    The fixed number of layers (2 + 2 here) is the same at every length and is not counted.
    """
    by_m: dict[int, list[int]] = defaultdict(list)
    for p in pairs:
        by_m[len(tokenize(p.src, src_lang)) + 1].append(len(tokenize(p.tgt, tgt_lang)) + 1)
    rows: list[StepsRow] = []
    for m in sorted(by_m):
        t = round(statistics.mean(by_m[m]))
        rows.append(
            {"m": m, "t": t, "n": len(by_m[m]), "rnn": m + t, "transformer_decode": 1 + t, "transformer_train": 2}
        )
    return rows


# --- Wall time to encode -----------------------------------------------------------------------------


class TimesRow(TypedDict):
    length: int
    rnn_ms: float
    transformer_ms: float


@torch.no_grad()
def encode_times(
    rnn: RNNSeq2Seq, tf: Transformer, lengths: list[int], batch: int = 64, repeats: int = 7, seed: int = 0
) -> list[TimesRow]:
    """Median ms to encode `batch` random sentences of each length, the two models alternating."""
    g = torch.Generator().manual_seed(seed)
    vocab = min(rnn.cfg.src_vocab, tf.cfg.src_vocab)
    rows: list[TimesRow] = []
    for length in lengths:
        src = torch.randint(4, vocab, (batch, length), generator=g)  # [B, L], no padding
        src[:, -1] = EOS_ID
        times: dict[str, list[float]] = {"rnn": [], "transformer": []}
        for _ in range(2):  # warm-up
            rnn.encode(src)
            tf.encode(src)
        for _ in range(repeats):
            for name, model in (("rnn", rnn), ("transformer", tf)):
                t0 = time.perf_counter()
                model.encode(src)
                times[name].append(1000 * (time.perf_counter() - t0))
        rows.append(
            {
                "length": length,
                "rnn_ms": round(statistics.median(times["rnn"]), 3),
                "transformer_ms": round(statistics.median(times["transformer"]), 3),
            }
        )
    return rows


# --- Accuracy by length and on the coreference family ----------------------------------------------------

BUCKETS = ((3, 5), (6, 8), (9, 11), (12, 99))


def bucket_name(lo: int, hi: int) -> str:
    return f"{lo}+ words" if hi >= 99 else f"{lo}-{hi} words"


def accuracy_by_length(rnn: Bundle, tf: Bundle, pairs: list[Pair]) -> dict[str, Any]:
    """Exact match per source-length bucket (words, without <eos>) and il/elle accuracy, both models."""
    src_lang, tgt_lang = rnn.langs
    sources = [p.src for p in pairs]
    hyps = {"rnn": translate_batch(rnn, sources), "transformer": translate_batch(tf, sources)}
    refs = [tokenize(p.tgt, tgt_lang) for p in pairs]
    lengths = [len(tokenize(p.src, src_lang)) for p in pairs]
    rows: list[dict[str, str | int | float]] = []  # bucket, n, then exact match per model
    for lo, hi in BUCKETS:
        idx = [i for i, n in enumerate(lengths) if lo <= n <= hi]
        if not idx:
            continue
        row: dict[str, str | int | float] = {"bucket": bucket_name(lo, hi), "n": len(idx)}
        for name, h in hyps.items():
            row[name] = sum(h[i] == refs[i] for i in idx) / len(idx)
        rows.append(row)
    m = {name: score(pairs, h, tgt_lang) for name, h in hyps.items()}
    return {
        "rows": rows,
        "coref": {
            "n": m["rnn"].n_coref,
            "rnn": m["rnn"].coref_accuracy,
            "transformer": m["transformer"].coref_accuracy,
        },
        "exact_match": {name: x.exact_match for name, x in m.items()},
    }


# --- Gradients against distance ---------------------------------------------------------------------------


def _transformer_encoder(tf: Transformer) -> Callable[[Tensor], Tensor]:
    def run(x: Tensor) -> Tensor:  # x [Ts, D]: embeddings + positional encoding -> encoder output [Ts, D]
        y = x[None]  # [1, Ts, D]
        for layer in tf.encoder:
            y = layer(y, None, NO_TRACE)  # one unpadded sentence: nothing to mask
        if tf.enc_norm is not None:
            y = tf.enc_norm(y)
        return y[0]

    return run


def _rnn_encoder(rnn: RNNSeq2Seq) -> Callable[[Tensor], Tensor]:
    def run(x: Tensor) -> Tensor:  # x [Ts, E] word vectors -> states [Ts, H]
        return rnn.recur(x[None])[0]

    return run


def jacobian_norms(fn: Callable[[Tensor], Tensor], x: Tensor) -> Tensor:
    """[T, T] matrix of ‖∂fn(x)_t / ∂x_i‖ (Frobenius norm of each [D_out, D_in] block)."""
    # torch's jacobian has no annotations; one tensor in, one out: a tensor
    jac: Tensor = torch.autograd.functional.jacobian(fn, x, vectorize=True)  # type: ignore[no-untyped-call]
    return jac.pow(2).sum(dim=(1, 3)).sqrt()  # [T, D_out, T, D_in] -> [T, T]


class Gradients(TypedDict):
    distance: list[int]  # t − i
    rnn: list[float]  # median ratio at each distance
    transformer: list[float]
    count: list[int]  # (sentence, t, i) triples at each distance
    n_pairs: int
    n_sentences: int


def gradient_by_distance(rnn: Bundle, tf: Bundle, sentences: list[str], max_distance: int = 10) -> Gradients:
    """Median over (sentence, t, i ≤ t) of ‖∂out_t/∂x_i‖ / ‖∂out_t/∂x_t‖, per distance t − i."""
    assert isinstance(rnn.model, RNNSeq2Seq) and isinstance(tf.model, Transformer), "an RNN, then a Transformer"
    src_lang = rnn.langs[0]
    ratios: dict[str, dict[int, list[float]]] = {"rnn": defaultdict(list), "transformer": defaultdict(list)}
    n_pairs = 0
    for text in sentences:
        tokens = tokenize(text, src_lang)
        ids = torch.tensor([[*rnn.src_vocab.encode(tokens)[0], EOS_ID]])  # [1, Ts]
        x_rnn = rnn.model.src_embed(ids)[0].detach()  # [Ts, E]
        x_tf = (tf.model.src_embed.lut(ids) * tf.model.cfg.d_model**0.5 + tf.model.src_embed.pe[: ids.size(1)])[
            0
        ].detach()  # [Ts, D], as the model's src.input
        for name, fn, x in (
            ("rnn", _rnn_encoder(rnn.model), x_rnn),
            ("transformer", _transformer_encoder(tf.model), x_tf),
        ):
            norms = jacobian_norms(fn, x)  # [Ts, Ts]
            for t in range(norms.size(0)):
                for i in range(max(0, t - max_distance), t + 1):
                    ratios[name][t - i].append(float(norms[t, i] / norms[t, t]))
        n_pairs += sum(min(t, max_distance) + 1 for t in range(ids.size(1)))
    distances = sorted(set(ratios["rnn"]) & set(ratios["transformer"]))
    return {
        "distance": distances,
        "rnn": [statistics.median(ratios["rnn"][d]) for d in distances],
        "transformer": [statistics.median(ratios["transformer"][d]) for d in distances],
        "count": [len(ratios["rnn"][d]) for d in distances],
        "n_pairs": n_pairs,
        "n_sentences": len(sentences),
    }
