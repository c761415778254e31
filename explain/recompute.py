"""The attention pages' formulas, recomputed from a trace (or the lecture notes' numbers) to set beside what the
model recorded: the column form c_:j = V · softmax(Kᵀ q_:j / √d_k), the recurrent model's encoder-decoder attention,
the masked scores and their softmax, label smoothing's loss, and one word's q, k, v from its vector and a head's
weights, and one word's steps through one head (its scores, ÷ √d_k, softmax, weighted values and z). Pure PyTorch;
viz/ draws the results.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from copy import deepcopy
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from explain.embeddings import one_hot
from explain.textbook import ThinkingMachines
from model.trace import Interventions, Trace
from model.transformer import additive_mask, look_ahead_mask
from model.vocab import BOS_ID


def as_array(values: Tensor) -> np.ndarray:
    """A tensor as a float64 numpy copy."""
    return values.detach().cpu().to(torch.float64).numpy().copy()


# --- One word through one head: q·k, ÷ √d_k, softmax, Σ weight × v -------------------------------------------


@dataclass(frozen=True)
class WordSteps:
    """Every step of attention for one query word in one head, as real tensors."""

    q: torch.Tensor  # [d_k] the word's query
    k: torch.Tensor  # [Tk, d_k] every word's key
    v: torch.Tensor  # [Tk, d_k] every word's value
    scores: torch.Tensor  # [Tk] q·k
    scaled: torch.Tensor  # [Tk] q·k / sqrt(d_k) (= scores when scaling is off)
    masked: torch.Tensor  # [Tk] scaled + mask (-inf where the word may not look)
    weights: torch.Tensor  # [Tk] softmax, sums to 1
    weighted: torch.Tensor  # [Tk, d_k] weight_j × v_j
    z_sum: torch.Tensor  # [d_k] sum of the weighted values
    z_model: torch.Tensor | None  # [d_k] the model's z for this word and head (0 when the head is off)
    d_k: int
    scale: bool  # was the score divided by sqrt(d_k)?

    @property
    def sqrt_dk(self) -> float:
        return math.sqrt(self.d_k)

    @property
    def has_mask(self) -> bool:
        return bool(torch.isinf(self.masked).any())


def word_steps(trace: Trace, module: str, head: int, word: int) -> WordSteps:
    """Read one word's query, all keys and values, and each step of the softmax from the trace."""
    t = trace.tensors
    q = t[f"{module}.q"][0, head, word]  # [d_k]
    k = t[f"{module}.k"][0, head]  # [Tk, d_k]
    v = t[f"{module}.v"][0, head]  # [Tk, d_k]
    weights = t[f"{module}.weights"][0, head, word]  # [Tk]
    weighted = weights[:, None] * v  # [Tk, d_k]
    return WordSteps(
        q=q,
        k=k,
        v=v,
        scores=t[f"{module}.scores"][0, head, word],
        scaled=t[f"{module}.scaled"][0, head, word],
        masked=t[f"{module}.masked"][0, head, word],
        weights=weights,
        weighted=weighted,
        z_sum=weighted.sum(0),
        z_model=t[f"{module}.z"][0, head, word],
        d_k=q.numel(),
        scale=trace.interventions.scale,
    )


def textbook_steps(tm: ThinkingMachines, word: int = 0) -> WordSteps:
    """The same steps for the Illustrated Transformer's example (query of "Thinking" by default)."""
    weights = tm.weights[word]  # [2]
    weighted = weights[:, None] * tm.v  # [2, 64]
    return WordSteps(
        q=tm.q[word],
        k=tm.k,
        v=tm.v,
        scores=tm.scores[word],
        scaled=tm.scaled[word],
        masked=tm.scaled[word],
        weights=weights,
        weighted=weighted,
        z_sum=weighted.sum(0),
        z_model=tm.z[word],
        d_k=tm.q.shape[-1],
        scale=True,
    )


# --- Wang's column form: c_:j = V · softmax(Kᵀ q_:j / √d_k), C = Attn(X, X) -------------------------------


@dataclass(frozen=True)
class ColumnForm:
    """One head of one attention module in the lecture's column layout: q_:j, k_:i, v_:i are columns."""

    module: str
    head: int
    alpha: np.ndarray  # [Tk, Tq] column j = α_:j = softmax(Kᵀ q_:j / √d_k (+ mask))
    C: np.ndarray  # [d_k, Tq] column j = c_:j = V · α_:j
    z: np.ndarray  # [Tq, d_k] the model's recorded z of this head (0 when the head is switched off)

    @property
    def error(self) -> float:
        return float(np.abs(self.C.T - self.z).max())


def column_form(trace: Trace, module: str, head: int, scale: bool = True) -> ColumnForm:
    """Recompute one head column by column from the traced q, k, v (and mask), in float64: for each query j,
    α_:j = softmax(Kᵀ q_:j / √d_k) and c_:j = V α_:j, with K, V [d_k, Tk] holding one column per key word."""
    Q = trace[f"{module}.q"][0, head].double().T  # [d_k, Tq]
    K = trace[f"{module}.k"][0, head].double().T  # [d_k, Tk]
    V = trace[f"{module}.v"][0, head].double().T  # [d_k, Tk]
    d_k, Tq = Q.shape
    mask = torch.broadcast_to(trace[f"{module}.mask"][0, 0].double(), (Tq, K.shape[1]))  # [Tq, Tk], 0 / -inf
    s = math.sqrt(d_k) if scale else 1.0
    alpha, C = [], []
    for j in range(Tq):
        a_j = torch.softmax(K.T @ Q[:, j] / s + mask[j], dim=0).nan_to_num(0.0)  # [Tk]
        alpha.append(a_j)
        C.append(V @ a_j)  # [d_k]: c_:j
    return ColumnForm(
        module, head, torch.stack(alpha, 1).numpy(), torch.stack(C, 1).numpy(), as_array(trace[f"{module}.z"][0, head])
    )


# --- The recurrent model's encoder-decoder attention (Bahdanau), recomputed ---------------------------


@dataclass(frozen=True)
class CrossAttention:
    """One head of dec.{layer}.cross_attn, with α and C recomputed from K, V and the queries."""

    module: str
    q: np.ndarray  # [Tt, d_k] queries from the decoder (rows q_:j)
    k: np.ndarray  # [Ts, d_k] keys from the encoder output
    v: np.ndarray  # [Ts, d_k] values from the encoder output
    scores: np.ndarray  # [Tt, Ts] Kᵀq_:j (÷ √d_k when the model scales)
    alpha: np.ndarray  # [Tt, Ts] softmax of each row, recomputed
    c: np.ndarray  # [Tt, d_k] c_:j = V·α_:j, recomputed
    recorded_alpha: np.ndarray  # the model's own weights
    recorded_z: np.ndarray  # the model's own z
    scale: float  # √d_k, or 1 when scaling is off

    @property
    def alpha_error(self) -> float:
        return float(np.abs(self.alpha - self.recorded_alpha).max())

    @property
    def c_error(self) -> float:
        return float(np.abs(self.c - self.recorded_z).max())


def cross_attention(trace: Trace, layer: int, head: int, scale: bool = True) -> CrossAttention:
    m = f"dec.{layer}.cross_attn"
    q = trace[f"{m}.q"][0, head].double()  # [Tt, d_k]
    k = trace[f"{m}.k"][0, head].double()  # [Ts, d_k]
    v = trace[f"{m}.v"][0, head].double()  # [Ts, d_k]
    s = math.sqrt(q.shape[-1]) if scale else 1.0
    scores = q @ k.T / s  # [Tt, Ts]: row j is Kᵀ q_:j
    alpha = torch.softmax(scores, dim=-1)
    c = alpha @ v  # [Tt, d_k]: row j is c_:j = Σ_i α_ij v_:i
    return CrossAttention(
        m,
        q.numpy(),
        k.numpy(),
        v.numpy(),
        scores.numpy(),
        alpha.numpy(),
        c.numpy(),
        as_array(trace[f"{m}.weights"][0, head]),
        as_array(trace[f"{m}.z"][0, head]),
        s,
    )


# --- The recurrent model's alignment beside the Transformer's heads: which head is closest ---------------------


def decoder_layers_and_heads(trace: Trace) -> tuple[int, int]:
    """(decoder layers, heads) of the Transformer whose trace this is."""
    layers = sum(1 for name in trace.tensors if name.startswith("dec.") and name.endswith(".cross_attn.weights"))
    return layers, int(trace["dec.0.cross_attn.weights"].shape[1])


def agreement(rnn_alpha: Tensor, tf_alpha: Tensor) -> int:
    """Output words whose strongest source word is the same in both [Tt, Ts] weight matrices."""
    return int((rnn_alpha.argmax(1) == tf_alpha.argmax(1)).sum())


def closest_head(trace: Trace, rnn_alpha: Tensor, same_rows: bool) -> tuple[int, int]:
    """(layer, head) of the encoder-decoder attention that best matches the RNN's alignment: the most
    output words with the same strongest source word (when both translations are the same words), else
    the sharpest head (largest mean of each row's maximum)."""
    layers, heads = decoder_layers_and_heads(trace)
    best, best_score = (layers - 1, 0), -1.0
    for layer in range(layers):
        w = trace[f"dec.{layer}.cross_attn.weights"][0]  # [H, Tt, Ts]
        for head in range(heads):
            score = agreement(rnn_alpha, w[head]) if same_rows else float(w[head].max(-1).values.mean())
            if score > best_score:
                best, best_score = (layer, head), score
    return best


# --- The look-ahead mask: scaled + mask = masked -> softmax -------------------------------------------

LECTURE_SCALED = (
    (0.7, 0.1, 0.1, 0.1),
    (0.1, 0.6, 0.2, 0.1),
    (0.1, 0.3, 0.6, 0.1),
    (0.1, 0.3, 0.3, 0.3),
)


@dataclass(frozen=True)
class MaskSteps:
    """scaled + mask = masked -> softmax -> weights, all [Tq, Tk]."""

    scaled: Tensor
    mask: Tensor  # additive: 0 = may attend, -inf = hidden
    masked: Tensor
    weights: Tensor


def lecture_masking() -> MaskSteps:
    """The lecture notes' scaled scores, the 4 x 4 look-ahead mask, their sum and its softmax."""
    scaled = torch.tensor(LECTURE_SCALED, dtype=torch.float32)  # [4, 4]
    mask = additive_mask(look_ahead_mask(4))[0, 0]  # [4, 4]: 0 on and below the diagonal, -inf above
    masked = scaled + mask
    return MaskSteps(scaled, mask, masked, torch.softmax(masked, dim=-1))


def mask_steps(trace: Trace, module: str, head: int) -> MaskSteps:
    """The four matrices of one head of `module` (e.g. "dec.0.self_attn") for sentence 0 of the batch."""
    scaled = trace[f"{module}.scaled"]  # [B, H, Tq, Tk]
    mask = trace[f"{module}.mask"].expand(scaled.shape)  # [B|1, 1, Tq|1, Tk] -> [B, H, Tq, Tk]
    return MaskSteps(
        scaled[0, head], mask[0, head], trace[f"{module}.masked"][0, head], trace[f"{module}.weights"][0, head]
    )


@dataclass(frozen=True)
class MaskedRow:
    """One query's row: the plain softmax over every key beside the masked one over the allowed keys."""

    allowed: Tensor  # [Tk] bool: the mask is 0 there
    full: Tensor  # [Tk] softmax over every key
    share: float  # the allowed keys' part of `full`
    renormalised: Tensor  # [Tk] `full` on the allowed keys ÷ share, 0 elsewhere
    masked: Tensor  # [Tk] softmax(scaled + mask): the weights

    @property
    def n_allowed(self) -> int:
        return int(self.allowed.sum())


def masked_row(scaled_row: Tensor, mask_row: Tensor) -> MaskedRow:
    """The masked softmax equals the full softmax restricted to the allowed keys and divided by their share: the
    probability mass of the hidden keys is handed back to the allowed ones."""
    allowed = mask_row == 0
    full = torch.softmax(scaled_row, dim=-1)
    share = float(full[allowed].sum())
    masked = torch.softmax(scaled_row + mask_row, dim=-1).nan_to_num(0.0)
    renorm = torch.where(allowed, full / share if share > 0 else full * 0, torch.zeros_like(full))
    return MaskedRow(allowed, full, share, renorm, masked)


# --- Label smoothing (paper 5.4) ------------------------------------------------------------------------


def smoothed_target(gold: int, vocab_size: int, eps: float) -> Tensor:
    """The paper's label smoothing (Szegedy et al.): q = (1 − ε)·one-hot(gold) + ε/V, i.e. ε spread evenly over
    the whole vocabulary, the gold word included (gold gets 1 − ε + ε/V). Sums to 1. This is exactly the target of
    torch's `cross_entropy(..., label_smoothing=ε)`, which model/train.py uses."""
    q = torch.full((vocab_size,), eps / vocab_size, dtype=torch.float64)
    q[gold] += 1.0 - eps
    return q


@dataclass(frozen=True)
class Smoothing:
    eps: float
    rows: list[dict[str, float | int | str]]  # per position (viz/decoding.py smoothing_table)
    plain: float  # mean -log p(gold): loss against the one-hot target
    smoothed: float  # mean -Σ q log p: loss against the smoothed target
    floor: float  # entropy of the smoothed target: the smallest smoothed loss possible
    torch_loss: float  # F.cross_entropy(logits, gold, label_smoothing=ε): what training computes


def label_smoothing(logits: Tensor, gold: Sequence[int], eps: float, itos: list[str]) -> Smoothing:
    """Loss against the one-hot target vs against the smoothed target, with the model's real outputs.

    logits: [T, V] the model's scores (log-probabilities are log_softmax(logits), no underflow); gold: T ids.
    """
    logits = logits.to(torch.float64)
    T, V = logits.shape
    logp = torch.log_softmax(logits, dim=-1)  # [T, V]
    rows: list[dict[str, float | int | str]] = []
    plain, smooth = [], []
    for t, g in enumerate(gold):
        q = smoothed_target(g, V, eps)
        lp, ls = float(-logp[t, g]), float(-(q * logp[t]).sum())
        plain.append(lp)
        smooth.append(ls)
        rows.append(
            {
                "position": t,
                "gold word": itos[g],
                "q(gold)": float(q[g]),
                "q(each other word)": eps / V,
                "p(gold)": float(logp[t, g].exp()),
                "loss vs one-hot": lp,
                "loss vs smoothed": ls,
            }
        )
    q0 = smoothed_target(0, V, eps)
    floor = float(-(q0 * q0.clamp_min(1e-300).log()).sum())
    ref = float(F.cross_entropy(logits, torch.tensor(list(gold)), label_smoothing=eps))
    return Smoothing(eps, rows, sum(plain) / T, sum(smooth) / T, floor, ref)


DROPOUT_PASSES = 20  # passes `gold_probability_in_training` averages


def gold_probability_in_training(
    model: nn.Module, src: Tensor, gold: Sequence[int], passes: int = DROPOUT_PASSES, seed: int = 0
) -> float:
    """Mean p(gold) over the reference's positions as training sees the model: dropout on (its P_drop), averaged over
    `passes` teacher-forced passes drawn from `seed` (`gold`: the reference's ids and EOS; the decoder reads BOS and
    the reference). A copy of the model runs in training mode (the shared one stays in eval mode, as every page's run
    needs), and torch's random state is put back afterwards."""
    copy = deepcopy(model).train()
    ids = torch.tensor(list(gold))  # [Tt]
    tgt_in = torch.tensor([[BOS_ID, *ids[:-1].tolist()]])  # [1, Tt]: shifted right
    total = 0.0
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        torch.manual_seed(seed)
        for _ in range(passes):
            trace = Trace(Interventions())
            copy(src, tgt_in, trace)
            total += float(trace["probs"][0].gather(1, ids[:, None]).mean())  # [Tt, V] -> [Tt, 1]
    return total / passes


# --- q = x · W^Q + b^Q: one word's projection, beside what the model recorded ------------------------------------


@dataclass(frozen=True)
class Projection:
    """One word's query, key and value computed from its input vector and the head's weights."""

    x: Tensor  # [D] the word's vector entering the attention
    W: dict[str, Tensor]  # "q"/"k"/"v" -> [D, d_k] this head's columns of W^Q, W^K, W^V (x · W convention)
    b: dict[str, Tensor]  # "q"/"k"/"v" -> [d_k] biases
    traced: dict[str, Tensor]  # "q"/"k"/"v" -> [d_k] what the model recorded for this word

    def computed(self, which: str) -> Tensor:
        return self.x @ self.W[which] + self.b[which]  # [1, D]·[D, d_k] + [d_k] = [d_k]

    def error(self, which: str) -> float:
        return float((self.computed(which) - self.traced[which]).abs().max())


def projection(
    trace: Trace,
    module: str,
    head: int,
    word: int,
    x: Tensor,
    weights: dict[str, Tensor],
    biases: dict[str, Tensor],
) -> Projection:
    """x [D] of `word`, this head's W [D, d_k] and b [d_k] per "q"/"k"/"v", and the traced q, k, v of the word."""
    traced = {w: trace[f"{module}.{w}"][0, head, word] for w in ("q", "k", "v")}
    return Projection(
        x.double(),
        {w: m.double() for w, m in weights.items()},
        {w: b.double() for w, b in biases.items()},
        {w: t.double() for w, t in traced.items()},
    )


# --- what backpropagation starts from: the loss's gradient with respect to the logits -----------------------------


def logit_gradient(probs: Tensor, gold: int) -> Tensor:
    """∂(−log p_gold)/∂logits = p − one-hot(gold) ([V]): what backpropagation starts from at this position."""
    return probs - one_hot([gold], probs.numel())[0].to(probs.dtype)
