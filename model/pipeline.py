"""From typed text to everything the app shows: prepare, translate, trace.

`prepare` turns any string into source ids (never raises), noting unknown words and truncation.
`analyse` decodes greedily under the given interventions and then runs one traced, teacher-forced
pass over the model's own output, so every tensor of the translation the user sees is recorded.
`teacher_forced` does the same for a reference translation the user types (loss, per-position
predictions). Pure Python/PyTorch: the app caches these results per (model, sentence, interventions).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import torch

from model.checkpoint import Bundle
from model.decoding import BeamResult, Greedy, beam_search, greedy_decode
from model.trace import Interventions, Trace
from model.transformer import traced
from model.vocab import BOS, BOS_ID, EOS, EOS_ID, detokenize, tokenize

MAX_CHARS = 2_000  # text beyond this is not even tokenized (a 10,000-character paste stays fast)


@dataclass(frozen=True)
class Prepared:
    """A sentence ready for the encoder."""

    text: str  # what was typed
    tokens: tuple[str, ...]  # source tokens fed to the model (after truncation), without EOS
    ids: tuple[int, ...]  # their ids followed by EOS_ID
    unknown: tuple[str, ...]  # words not in the vocabulary (fed as <unk>), in order of appearance
    truncated: int  # how many tokens were cut off to fit the model's limit (0: none)

    @property
    def empty(self) -> bool:
        return not self.tokens

    @property
    def labels(self) -> list[str]:
        """Axis labels for the encoder positions, position-prefixed so repeated words stay distinct."""
        return token_labels([*self.tokens, EOS])

    def src(self) -> torch.Tensor:
        return torch.tensor([self.ids])  # [1, Ts]


def token_labels(tokens: list[str]) -> list[str]:
    """["the", "cat", "the"] -> ["0 the", "1 cat", "2 the"]: unique labels for plot axes."""
    return [f"{i} {t}" for i, t in enumerate(tokens)]


def label_word(label: str) -> str:
    """The token of a `token_labels` label, "3 the" -> "the"; any other text is returned as it is."""
    position, space, token = label.partition(" ")
    return token if space and position.isdigit() else label


def source_limit(bundle: Bundle) -> int:
    """Most source tokens the model accepts (one position is kept for EOS)."""
    return bundle.config.max_len - 1


def prepare(bundle: Bundle, text: str) -> Prepared:
    """Tokenize, cut to the model's limit, map to ids. Never raises for any str."""
    text = text if isinstance(text, str) else str(text)
    src_lang, _ = bundle.langs
    tokens = tokenize(text[:MAX_CHARS], src_lang)
    limit = source_limit(bundle)
    truncated = max(0, len(tokens) - limit) + (1 if len(text) > MAX_CHARS else 0)
    tokens = tokens[:limit]
    ids, unknown = bundle.src_vocab.encode(tokens)
    return Prepared(text, tuple(tokens), (*ids, EOS_ID), tuple(dict.fromkeys(unknown)), truncated)


@dataclass(frozen=True)
class Analysis:
    """One sentence through the model: its translation and the trace of the teacher-forced pass."""

    prepared: Prepared
    interventions: Interventions
    greedy: Greedy
    out_tokens: tuple[str, ...]  # the translation's tokens (no BOS/EOS)
    translation: str  # detokenized
    trace: Trace  # teacher-forced over tgt_in = BOS + out_tokens

    @property
    def src_labels(self) -> list[str]:
        return self.prepared.labels

    @property
    def tgt_labels(self) -> list[str]:
        """Decoder input positions: "0 <bos>", "1 je", ..."""
        return token_labels([BOS, *self.out_tokens])

    @property
    def next_labels(self) -> list[str]:
        """What each decoder position predicts: the next token ("je", ..., "<eos>")."""
        return token_labels([*self.out_tokens, EOS])


def analyse(bundle: Bundle, prepared: Prepared, interventions: Interventions | None = None) -> Analysis:
    """Greedy translation under `interventions`, then one traced pass over it."""
    iv = interventions or Interventions()
    src = prepared.src()
    greedy = greedy_decode(bundle.model, src, iv)
    out_tokens = tuple(bundle.tgt_vocab.decode(greedy.tokens))
    tgt_in = torch.tensor([[BOS_ID, *greedy.tokens]])  # [1, Tt]
    trace = traced(bundle.model, src, tgt_in, iv)
    return Analysis(prepared, iv, greedy, out_tokens, detokenize(list(out_tokens), bundle.langs[1]), trace)


def beam(
    bundle: Bundle, prepared: Prepared, k: int, alpha: float = 0.6, interventions: Interventions | None = None
) -> BeamResult:
    return beam_search(bundle.model, prepared.src(), k, alpha, interventions)


def decode_text(bundle: Bundle, ids: Iterable[int]) -> str:
    return detokenize(bundle.tgt_vocab.decode(ids), bundle.langs[1])


@dataclass(frozen=True)
class TeacherForced:
    """A reference translation fed to the decoder (training-style) and what the model made of it."""

    target_tokens: tuple[str, ...]  # reference tokens (no BOS/EOS)
    unknown: tuple[str, ...]  # reference words missing from the target vocabulary
    gold: tuple[int, ...]  # ids the model should predict: reference + EOS
    predicted: tuple[int, ...]  # argmax at each position
    gold_probs: tuple[float, ...]  # p(gold token) at each position
    loss: float  # mean cross-entropy (no label smoothing), nats per token
    trace: Trace

    @property
    def in_labels(self) -> list[str]:
        return token_labels([BOS, *self.target_tokens])

    @property
    def gold_labels(self) -> list[str]:
        return token_labels([*self.target_tokens, EOS])


def teacher_forced(
    bundle: Bundle, prepared: Prepared, target_text: str, interventions: Interventions | None = None
) -> TeacherForced:
    """Feed BOS + reference to the decoder; the loss is the cross-entropy of reference + EOS."""
    iv = interventions or Interventions()
    tokens = tokenize(target_text[:MAX_CHARS], bundle.langs[1])[: bundle.config.max_len - 1]
    ids, unknown = bundle.tgt_vocab.encode(tokens)
    tgt_in = torch.tensor([[BOS_ID, *ids]])  # [1, Tt]
    gold = torch.tensor([*ids, EOS_ID])  # [Tt]
    trace = traced(bundle.model, prepared.src(), tgt_in, iv)
    probs = trace["probs"][0]  # [Tt, V]
    gold_probs = probs.gather(1, gold[:, None])[:, 0]  # [Tt]
    loss = float(-gold_probs.clamp_min(1e-12).log().mean())
    return TeacherForced(
        tuple(tokens),
        tuple(dict.fromkeys(unknown)),
        tuple(gold.tolist()),
        tuple(probs.argmax(-1).tolist()),
        tuple(gold_probs.tolist()),
        loss if math.isfinite(loss) else float("inf"),
        trace,
    )
