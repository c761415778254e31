"""Probe sentences: snapshots of their attention taken while a model trains.

A training run keeps a few probe sentences (by default the lecture's coreference example and
"i am a student") and, every few steps, runs them through the model being trained and keeps their
attention weights as a `Snapshot`; the training page scrubs through these snapshots to show
attention forming. The decoder reads the reference translation when the data has one (the same
axes at every step, as in training: teacher forcing), else the model's own greedy output.

Memory is bounded: at most `MAX_PROBES` sentences of at most `MAX_PROBE_TOKENS` words, at most
`MAX_SNAPSHOTS` snapshots per probe (a long run takes them further apart).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from model import pipeline
from model.checkpoint import Bundle
from model.data import Pair
from model.decoding import greedy_decode
from model.examples import COREFERENCE, COREFERENCE_FR, STUDENT, STUDENT_FR
from model.trace import Interventions, attention_modules
from model.train import Trainer
from model.transformer import Config
from model.vocab import tokenize

MAX_PROBES = 3
MAX_PROBE_TOKENS = 20  # a probe sentence is cut to this many words
MAX_SNAPSHOTS = 100  # per probe; the snapshot interval grows for long runs

PROBES = {  # default probe sentences per direction: the coreference example and the lecture's "i am a student"
    "en-fr": (COREFERENCE, STUDENT),
    "fr-en": (COREFERENCE_FR, STUDENT_FR),
}


@dataclass(frozen=True)
class Snapshot:
    """The attention of one probe sentence at one step of training.

    enc_self [L, H, Ts, Ts], dec_self [L, H, Tt, Tt], cross [L, H, Tt, Ts] (float32, rows sum to 1).
    The decoder reads the reference translation when there is one (the same axes at every step,
    as in training: teacher forcing), else the model's own greedy output at that step.
    """

    step: int
    probe: int  # index into the job's probes
    translation: str  # the model's greedy translation at this step
    src_labels: tuple[str, ...]
    tgt_labels: tuple[str, ...]
    enc_self: np.ndarray
    dec_self: np.ndarray
    cross: np.ndarray

    def weights(self, kind: str) -> np.ndarray:
        return {"enc_self": self.enc_self, "dec_self": self.dec_self, "cross": self.cross}[kind]

    def labels(self, kind: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(query labels, key labels) of `kind`."""
        return {
            "enc_self": (self.src_labels, self.src_labels),
            "dec_self": (self.tgt_labels, self.tgt_labels),
            "cross": (self.tgt_labels, self.src_labels),
        }[kind]

    @property
    def nbytes(self) -> int:
        return self.enc_self.nbytes + self.dec_self.nbytes + self.cross.nbytes


def probe_snapshot(
    bundle: Bundle,
    text: str,
    reference: str | None,
    step: int,
    probe: int = 0,
    interventions: Interventions | None = None,
) -> Snapshot:
    """Translate `text` greedily and record its attention weights (the model must be in eval mode)."""
    src_lang, _ = bundle.langs
    words = tokenize(text, src_lang)[:MAX_PROBE_TOKENS]
    prepared = pipeline.prepare(bundle, " ".join(words))
    greedy = greedy_decode(bundle.model, prepared.src(), interventions)
    translation = pipeline.decode_text(bundle, greedy.tokens)
    if reference:
        tf = pipeline.teacher_forced(bundle, prepared, reference, interventions)
        trace, tgt_labels = tf.trace, tf.in_labels
    else:
        a = pipeline.analyse(bundle, prepared, interventions)
        trace, tgt_labels = a.trace, a.tgt_labels
    cfg = bundle.config
    assert isinstance(cfg, Config), "probes draw the Transformer's attention heads"

    modules = attention_modules(cfg)

    def stack(stack_name: str, kind: str) -> np.ndarray:  # [L, H, Tq, Tk] of every layer's module of that kind
        return np.stack(
            [
                trace[f"{m}.weights"][0].numpy().astype(np.float32)
                for m in modules
                if m.startswith(f"{stack_name}.") and m.endswith(kind)
            ]
        )

    return Snapshot(
        step,
        probe,
        translation,
        tuple(prepared.labels),
        tuple(tgt_labels),
        stack("enc", "self_attn"),
        stack("dec", "self_attn"),
        stack("dec", "cross_attn"),
    )


def snapshots(
    trainer: Trainer, direction: str, probes: Sequence[str], references: Sequence[str | None]
) -> list[Snapshot]:
    """The probes' attention in `trainer`'s model now (eval mode for the pass, then back to training mode)."""
    out = []
    with trainer.lock:
        model = trainer.model
        was_training = model.training
        model.eval()
        try:
            bundle = Bundle(model, trainer.src_vocab, trainer.tgt_vocab, direction)
            for i, (text, ref) in enumerate(zip(probes, references, strict=True)):
                out.append(probe_snapshot(bundle, text, ref, trainer.step, i, trainer.interventions))
        finally:
            model.train(was_training)
    return out


def find_reference(data: dict[str, list[Pair]], text: str, src_lang: str) -> str | None:
    """The target sentence of the pair whose source is `text` (compared token by token), if any."""
    want = tokenize(text, src_lang)[:MAX_PROBE_TOKENS]
    for split in ("train", "heldout"):
        for p in data.get(split) or []:
            if tokenize(p.src, src_lang) == want:
                return p.tgt
    return None


def default_probes(direction: str, data: dict[str, list[Pair]] | None = None) -> list[str]:
    """The lecture's probe sentences for the toy set; for another corpus, its first held-out sources."""
    if data is None:
        return list(PROBES[direction])
    pool = list(data.get("heldout") or []) + list(data.get("train") or [])
    return [p.src for p in pool[:2]]
