"""Decoding: greedy and beam search, one `encode` and a loop of `decode` + generator calls.

Both honour the interventions (a head switched off changes the translation) and return a record
of every step (the candidates and their probabilities) so the app can replay the search. Decoding
runs untraced; the app runs one traced, teacher-forced pass over the chosen output when it needs
the tensors.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch import Tensor

from model.rnn import RNNSeq2Seq
from model.trace import Interventions, Trace
from model.transformer import Transformer
from model.vocab import BOS_ID, EOS_ID

# Both encoder-decoders decode alike: `encode`, then `decode` + `generator` per step.
Seq2Seq = Transformer | RNNSeq2Seq


@dataclass(frozen=True)
class Candidate:
    token: int
    prob: float


@dataclass(frozen=True)
class GreedyStep:
    """Step t: the model saw `prefix` (BOS + tokens so far) and these were its top candidates."""

    prefix: tuple[int, ...]
    candidates: tuple[Candidate, ...]  # best first; candidates[0] is the token chosen
    chosen: int


@dataclass(frozen=True)
class Greedy:
    tokens: tuple[int, ...]  # the output, without BOS and EOS
    steps: tuple[GreedyStep, ...]
    finished: bool  # True when the model said EOS before the length limit


def max_output_len(model: Seq2Seq, src_len: int) -> int:
    """Decoding stops here at the latest: twice the source plus a margin, within the model's limit."""
    return min(model.cfg.max_len - 1, 2 * src_len + 10)


def _next_log_probs(model: Seq2Seq, memory: Tensor, src: Tensor, prefix: Tensor, trace: Trace) -> Tensor:
    """log p(next token | prefix) for each row of prefix [N, t] -> [N, V]."""
    hidden = model.decode(memory, src, prefix, trace)  # [N, t, D]
    return torch.log_softmax(model.generator(hidden[:, -1]), dim=-1)  # [N, V]


@torch.no_grad()
def greedy_decode(
    model: Seq2Seq, src: Tensor, interventions: Interventions | None = None, max_len: int | None = None, top: int = 5
) -> Greedy:
    """Translate one sentence src [1, Ts], always taking the most probable next token."""
    trace = Trace(interventions or Interventions(), record=False)
    memory = model.encode(src, trace)  # [1, Ts, D]
    max_len = max_len or max_output_len(model, src.size(1))
    out = [BOS_ID]
    steps = []
    for _ in range(max_len):
        log_probs = _next_log_probs(model, memory, src, torch.tensor([out]), trace)[0]  # [V]
        probs, ids = log_probs.exp().topk(min(top, log_probs.numel()))
        chosen = int(ids[0])
        steps.append(
            GreedyStep(tuple(out), tuple(Candidate(int(i), float(p)) for p, i in zip(probs, ids, strict=True)), chosen)
        )
        if chosen == EOS_ID:
            return Greedy(tuple(out[1:]), tuple(steps), True)
        out.append(chosen)
    return Greedy(tuple(out[1:]), tuple(steps), False)


@torch.no_grad()
def greedy_batch(
    model: Seq2Seq, src: Tensor, interventions: Interventions | None = None, max_len: int | None = None
) -> list[list[int]]:
    """Greedy decoding of a padded batch src [B, Ts] at once (for evaluation): token lists without BOS/EOS."""
    trace = Trace(interventions or Interventions(), record=False)
    memory = model.encode(src, trace)  # [B, Ts, D]
    max_len = max_len or max_output_len(model, src.size(1))
    out = torch.full((src.size(0), 1), BOS_ID, dtype=torch.long)  # [B, 1]
    done = torch.zeros(src.size(0), dtype=torch.bool)
    for _ in range(max_len):
        nxt = _next_log_probs(model, memory, src, out, trace).argmax(-1)  # [B]
        out = torch.cat([out, nxt[:, None]], dim=1)  # [B, t+1]
        done |= nxt == EOS_ID
        if done.all():
            break
    result = []
    for row in out[:, 1:].tolist():
        result.append(row[: row.index(EOS_ID)] if EOS_ID in row else row)
    return result


# --- Beam search ----------------------------------------------------------------------------------


def length_penalty(length: int, alpha: float) -> float:
    """GNMT's length normalisation: ((5 + |Y|) / 6) ** alpha. alpha = 0 turns it off."""
    penalty: float = ((5 + length) / 6) ** alpha
    return penalty


@dataclass(frozen=True)
class Hypothesis:
    tokens: tuple[int, ...]  # without BOS (may end with EOS)
    log_prob: float  # sum of the log-probabilities of its tokens
    alpha: float = 0.6

    @property
    def finished(self) -> bool:
        return bool(self.tokens) and self.tokens[-1] == EOS_ID

    @property
    def score(self) -> float:
        """Length-normalised log-probability: what beams are finally ranked by."""
        return self.log_prob / length_penalty(len(self.tokens), self.alpha)

    @property
    def prob(self) -> float:
        return math.exp(self.log_prob)

    @property
    def output(self) -> tuple[int, ...]:
        return self.tokens[:-1] if self.finished else self.tokens


@dataclass(frozen=True)
class Expansion:
    """One candidate considered at a step: hypothesis `parent` of the previous beam + `token`."""

    parent: int
    token: int
    prob: float  # p(token | parent's prefix)
    hypothesis: Hypothesis
    kept: bool  # made it into the new beam (or finished)


@dataclass(frozen=True)
class BeamStep:
    expansions: tuple[Expansion, ...]
    beam: tuple[Hypothesis, ...]  # the live hypotheses after this step, best first


@dataclass(frozen=True)
class BeamResult:
    best: Hypothesis
    steps: tuple[BeamStep, ...]
    finished: tuple[Hypothesis, ...] = field(default=())  # all completed hypotheses, best score first


@torch.no_grad()
def beam_search(
    model: Seq2Seq,
    src: Tensor,
    k: int = 3,
    alpha: float = 0.6,
    interventions: Interventions | None = None,
    max_len: int | None = None,
) -> BeamResult:
    """Keep the k most probable prefixes at every step instead of only the best one.

    Each live hypothesis is expanded by its k best next tokens; of all expansions the best ones by
    total log-probability survive, k minus the number already finished. A hypothesis that produces
    EOS is finished and leaves the beam. Search stops when k hypotheses have finished (or at the
    length limit); the finished hypothesis with the best length-normalised score wins. k = 1 is
    greedy decoding.
    """
    if k < 1:
        raise ValueError(f"beam width must be at least 1 (got {k})")
    trace = Trace(interventions or Interventions(), record=False)
    memory = model.encode(src, trace)  # [1, Ts, D]
    max_len = max_len or max_output_len(model, src.size(1))
    beam = [Hypothesis((), 0.0, alpha)]
    finished: list[Hypothesis] = []
    steps = []
    for _ in range(max_len):
        prefix = torch.tensor([[BOS_ID, *h.tokens] for h in beam])  # [n, t]
        log_probs = _next_log_probs(
            model, memory.expand(len(beam), -1, -1), src.expand(len(beam), -1), prefix, trace
        )  # [n, V]
        top_lp, top_id = log_probs.topk(min(k, log_probs.size(-1)), dim=-1)  # [n, k]
        pool = []
        for parent, h in enumerate(beam):
            for lp, tok in zip(top_lp[parent].tolist(), top_id[parent].tolist(), strict=True):
                pool.append((parent, tok, lp, Hypothesis((*h.tokens, tok), h.log_prob + lp, alpha)))
        pool.sort(key=lambda e: -e[3].log_prob)
        survivors = pool[: k - len(finished)] if len(finished) < k else []
        kept_ids = {id(e) for e in survivors}
        steps_exp = tuple(Expansion(p, t, math.exp(lp), h, id(e) in kept_ids) for e in pool for p, t, lp, h in [e])
        finished += [e[3] for e in survivors if e[3].finished]
        beam = [e[3] for e in survivors if not e[3].finished]
        steps.append(BeamStep(steps_exp, tuple(beam)))
        if not beam:
            break
    ranked = sorted(finished or beam, key=lambda h: -h.score)
    return BeamResult(ranked[0], tuple(steps), tuple(sorted(finished, key=lambda h: -h.score)))
