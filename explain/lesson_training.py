"""The guided lesson's first and last steps: why a Transformer (steps that wait for each other) and how it is
trained (the loss on this sentence, the recipe this model was trained with). Pure Python/PyTorch; the
numbers feed the notices of viz/lesson_decoder.py."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from model.pipeline import Analysis

TRAINING_STAGES = 2  # the encoder, then the decoder (explain.compare writes the same number for the Before page)


@dataclass(frozen=True)
class Sequential:
    """Steps that must wait for each other on this sentence (m source tokens with <eos>, t output tokens)."""

    m: int
    t: int

    @property
    def rnn(self) -> int:
        return self.m + self.t  # encode word by word, then decode word by word

    @property
    def translating(self) -> int:
        return 1 + self.t  # encode all words at once, then decode word by word

    @property
    def training(self) -> int:
        """2 stages whatever the length: the encoder's stack over every word at once, then the decoder's over every
        position at once (teacher forcing); each stage is a fixed stack of layers, with no loop over positions."""
        return TRAINING_STAGES

    @property
    def rnn_path(self) -> int:
        return self.m - 1  # steps from the first source word's state to the last one's


def sequential(a: Analysis) -> Sequential:
    return Sequential(len(a.src_labels), len(a.greedy.steps))


@dataclass(frozen=True)
class Loss:
    """The training loss on this sentence, teacher-forced on the model's own translation (+ <eos>)."""

    words: tuple[str, ...]  # the right next word at every position
    probs: tuple[float, ...]  # p(right word)
    eps: float  # label smoothing
    vocab: int
    smoothed: tuple[float, ...]  # -Σ q log p against the smoothed target, per position

    @property
    def terms(self) -> tuple[float, ...]:
        return tuple(-math.log(max(p, 1e-300)) for p in self.probs)

    @property
    def mean(self) -> float:
        return sum(self.terms) / len(self.terms)

    @property
    def worst(self) -> int:
        return max(range(len(self.terms)), key=self.terms.__getitem__)


def loss(a: Analysis, eps: float) -> Loss:
    """Cross-entropy of every position against the one-hot of its next word, and against the smoothed target
    q = (1 - ε)·one-hot + ε/V (the target this model's training used, torch's label_smoothing=ε)."""
    logp = torch.log_softmax(a.trace["logits"][0].double(), dim=-1)  # [Tt, V]
    gold = [int(st.chosen) for st in a.greedy.steps]
    if len(gold) < logp.shape[0]:  # stopped at the length limit: no <eos> position to score
        logp = logp[: len(gold)]
    V = logp.shape[-1]
    smoothed = tuple(float(-((1 - eps) * logp[t, g] + eps / V * logp[t].sum())) for t, g in enumerate(gold))
    return Loss(
        tuple(a.next_labels[: len(gold)]), tuple(float(logp[t, g].exp()) for t, g in enumerate(gold)), eps, V, smoothed
    )


@dataclass(frozen=True)
class Recipe:
    """How this model was trained (its checkpoint's record), for the training step."""

    steps: int
    warmup: int
    batch: int  # sentence pairs per step
    lr_scale: float
    d_model: int
    label_smoothing: float
    dropout: float
    seconds: float | None

    def lr(self, step: int, d_model: int | None = None, warmup: int | None = None, scale: float | None = None) -> float:
        """The paper's schedule: scale · d_model^-0.5 · min(step^-0.5, step · warmup^-1.5)."""
        d, w, k = d_model or self.d_model, warmup or self.warmup, self.lr_scale if scale is None else scale
        step = max(1, step)
        lrate: float = k * d**-0.5 * min(step**-0.5, step * w**-1.5)
        return lrate


def recipe(meta: Mapping[str, Any], d_model: int) -> Recipe:
    """From a checkpoint's record (`Bundle.meta`); the paper's values where it records nothing."""
    t = meta.get("training", {}) or {}
    return Recipe(
        int(t.get("steps_done", t.get("steps", 0)) or 0),
        int(t.get("warmup", 4000) or 4000),
        int(t.get("batch_size", 0) or 0),
        float(t.get("lr_scale", 1.0) or 1.0),
        d_model,
        float(t.get("label_smoothing", 0.1)),
        float(t.get("dropout", 0.1)),
        t.get("train_seconds"),
    )
