"""Small numerical experiments the attention pages run live (pure PyTorch: random vectors, and the trained model
where a function takes one).

- Why divide by sqrt(d_k): with q, k of independent N(0, 1) entries, q·k is a sum of d_k products
  of variance 1, so Var(q·k) = d_k (`dot_product_samples`, `variance_by_dk`). Large scores make the
  softmax saturate: one weight near 1, the rest near 0, and the softmax's Jacobian
  J = diag(p) - p pᵀ near zero, so almost no gradient flows back (`saturation`, `saturation_by_dk`).
- The parameter-free "dot-product self-attention" Y = softmax(X Xᵀ) X, with no learned weights at all
  (`plain_self_attention`).
- Word order: without positional encoding the encoder cannot see word order: a permuted sentence gives
  the same output vectors, permuted (`permutation_check`, runs the trained model).
- The encoder layer recomputed from the model's own parameters: LayerNorm's γ and β
  (`layer_norm_params`) and the feed-forward net's hidden layer max(0, x W_1 + b_1) (`ffn_hidden`).
- One head is one way for words to interact: every attention layer with all its heads but one switched off,
  one head at a time, and what that does to the translation (`one_head_left`, runs the trained model).

Every random experiment takes a seed and returns the same numbers for the same arguments.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, replace

import torch
from torch import Tensor

from model.checkpoint import Bundle
from model.decoding import greedy_decode
from model.pipeline import Prepared, analyse, decode_text, teacher_forced
from model.trace import Interventions, Trace, attention_modules
from model.transformer import Config, EncoderLayer, Transformer
from model.vocab import EOS


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(int(seed))


def dot_product_samples(d_k: int, n: int = 4000, seed: int = 0) -> Tensor:
    """q·k for n independent pairs of d_k-dimensional vectors with N(0, 1) entries -> [n]."""
    g = _gen(seed)
    q = torch.randn(n, d_k, generator=g)  # [n, d_k] (float32 draws: 4x faster than float64)
    k = torch.randn(n, d_k, generator=g)  # [n, d_k]
    return (q * k).sum(-1).double()  # [n]


@dataclass(frozen=True)
class VarianceRow:
    d_k: int
    variance: float  # measured Var(q·k); theory: d_k
    variance_scaled: float  # measured Var(q·k / sqrt(d_k)); theory: 1
    low: float  # 1st percentile of q·k
    high: float  # 99th percentile of q·k


def variance_by_dk(d_ks: list[int], n: int = 4000, seed: int = 0) -> list[VarianceRow]:
    """Measured spread of q·k for each d_k. One draw of the longest vectors serves every d_k: the dot
    product over the first d_k dimensions is a running sum of the products."""
    g = _gen(seed)
    q = torch.randn(n, max(d_ks), generator=g)  # [n, d_max]
    k = torch.randn(n, max(d_ks), generator=g)  # [n, d_max]
    running = (q * k).cumsum(-1).double()  # [n, d_max]: column d-1 holds q·k over the first d dimensions
    return [summarize(running[:, d_k - 1], d_k) for d_k in d_ks]


def scaled(samples: Tensor, d_k: int) -> Tensor:
    """The dot products as attention uses them: q·k / sqrt(d_k)."""
    return samples / math.sqrt(d_k)


def summarize(samples: Tensor, d_k: int) -> VarianceRow:
    """Variance (raw and divided by sqrt(d_k)) and 1%-99% range of sampled dot products [n]."""
    s = samples.double()
    return VarianceRow(
        d_k, float(s.var()), float(scaled(s, d_k).var()), float(s.quantile(0.01)), float(s.quantile(0.99))
    )


def softmax_jacobian(p: Tensor) -> Tensor:
    """d softmax(s) / d s = diag(p) - p pᵀ for a probability vector p [n] -> [n, n]."""
    return torch.diag(p) - p[:, None] * p[None, :]


@dataclass(frozen=True)
class Saturation:
    """One query against n_keys random keys, softmax with and without the 1/sqrt(d_k) scaling."""

    d_k: int
    scores: Tensor  # [n_keys] q·k
    weights_raw: Tensor  # softmax(q·k)
    weights_scaled: Tensor  # softmax(q·k / sqrt(d_k))

    @property
    def max_raw(self) -> float:
        return float(self.weights_raw.max())

    @property
    def max_scaled(self) -> float:
        return float(self.weights_scaled.max())

    @property
    def jacobian_raw(self) -> float:
        """Frobenius norm of the softmax Jacobian without scaling: near 0 = vanishing gradient."""
        return float(torch.linalg.matrix_norm(softmax_jacobian(self.weights_raw)))

    @property
    def jacobian_scaled(self) -> float:
        return float(torch.linalg.matrix_norm(softmax_jacobian(self.weights_scaled)))


def saturation(d_k: int, n_keys: int = 8, seed: int = 0) -> Saturation:
    g = _gen(seed)
    q = torch.randn(d_k, generator=g, dtype=torch.float64)  # [d_k]
    k = torch.randn(n_keys, d_k, generator=g, dtype=torch.float64)  # [n_keys, d_k]
    scores = k @ q  # [n_keys]
    return Saturation(d_k, scores, torch.softmax(scores, -1), torch.softmax(scores / math.sqrt(d_k), -1))


@dataclass(frozen=True)
class SaturationRow:
    d_k: int
    max_raw: float  # mean over trials of the largest weight, no scaling
    max_scaled: float
    jacobian_raw: float  # mean Frobenius norm of the softmax Jacobian, no scaling
    jacobian_scaled: float


def saturation_by_dk(d_ks: list[int], n_keys: int = 8, trials: int = 200, seed: int = 0) -> list[SaturationRow]:
    """Averages of `saturation` over many random queries, for each d_k."""
    rows = []
    for d_k in d_ks:
        runs = [saturation(d_k, n_keys, seed * 100_003 + t) for t in range(trials)]
        rows.append(
            SaturationRow(
                d_k,
                sum(r.max_raw for r in runs) / trials,
                sum(r.max_scaled for r in runs) / trials,
                sum(r.jacobian_raw for r in runs) / trials,
                sum(r.jacobian_scaled for r in runs) / trials,
            )
        )
    return rows


@dataclass(frozen=True)
class PlainAttention:
    """Y = softmax(X Xᵀ) X: self-attention with no learned weights (and no scaling)."""

    scores: Tensor  # [T, T] x_n · x_m
    weights: Tensor  # [T, T] a_nm, rows sum to 1
    y: Tensor  # [T, D] y_n = sum_m a_nm x_m


def plain_self_attention(x: Tensor) -> PlainAttention:
    """x: [T, D] input vectors (the sentence's embeddings + positional encoding)."""
    x = x.to(torch.float64)
    scores = x @ x.T  # [T, T]
    weights = torch.softmax(scores, dim=-1)  # [T, T]
    return PlainAttention(scores, weights, weights @ x)  # y: [T, D]


# --- Word order: the encoder with and without positional encoding --------------------------------


@dataclass(frozen=True)
class PermutationCheck:
    """The encoder on a sentence and on its permutation (EOS stays last)."""

    positional_encoding: bool
    order: tuple[int, ...]  # over all encoder positions, EOS included (last stays last)
    enc: Tensor  # [T, D] encoder output for the sentence
    enc_perm: Tensor  # [T, D] encoder output for the permuted sentence
    translation: str
    translation_perm: str

    @property
    def unpermuted(self) -> Tensor:
        """enc_perm with its rows put back in the original order: row order[j] <- row j."""
        out = torch.empty_like(self.enc_perm)
        out[list(self.order)] = self.enc_perm
        return out

    @property
    def max_diff(self) -> float:
        """max |unpermuted - enc|: ~1e-6 when order does not matter, large when it does."""
        return float((self.unpermuted - self.enc).abs().max())


def encoder_output(bundle: Bundle, ids: Iterable[int], iv: Interventions) -> Tensor:
    """[T] source ids -> encoder output [T, D] under `iv` (nothing recorded)."""
    with torch.no_grad():
        return bundle.model.encode(torch.tensor([list(ids)]), Trace(iv, record=False))[0]


def permutation_check(
    bundle: Bundle,
    ids: Iterable[int],
    word_order: list[int],
    positional_encoding: bool,
    iv: Interventions | None = None,
) -> PermutationCheck:
    """Encode `ids` (words then EOS) and the words permuted by `word_order`, with PE on or off."""
    ids = list(ids)
    n = len(ids) - 1  # the last id is EOS
    if sorted(word_order) != list(range(n)):
        raise ValueError(f"word_order must be a permutation of range({n})")
    order = (*word_order, n)
    perm_ids = [ids[j] for j in order]
    iv = replace(iv or Interventions(), positional_encoding=positional_encoding)
    translations = [
        decode_text(bundle, greedy_decode(bundle.model, torch.tensor([x]), iv).tokens) for x in (ids, perm_ids)
    ]
    return PermutationCheck(
        positional_encoding, order, encoder_output(bundle, ids, iv), encoder_output(bundle, perm_ids, iv), *translations
    )


# --- The encoder layer, recomputed from its parameters -------------------------------------------


def layer_norm_params(model: Transformer, layer: int, sub: int) -> tuple[Tensor, Tensor]:
    """γ and β ([D] each) of the LayerNorm of encoder layer `layer`, sublayer `sub` (1 or 2)."""
    norm = getattr(model.encoder[layer], f"add_norm{sub}").norm
    return norm.weight.detach(), norm.bias.detach()


def ffn_hidden(model: Transformer, layer: int, x: Tensor) -> Tensor:
    """max(0, x W_1 + b_1) of encoder layer `layer`, recomputed from its own W_1, b_1: [T, D] -> [T, d_ff]."""
    enc = model.encoder[layer]
    assert isinstance(enc, EncoderLayer)  # nn.ModuleList types its items as plain modules
    f = enc.ffn
    with torch.no_grad():
        return torch.relu(x @ f.W_1.weight.T + f.W_1.bias)  # [T, d_ff]


def head_projection(model: Transformer, layer: int, head: int) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
    """This head's slice of W_q, W_k, W_v of encoder layer `layer`, in the paper's x · W form.

    nn.Linear stores weight [D_out, D_in] and computes x @ weight.T + bias; head h owns output columns
    h·d_k .. (h+1)·d_k - 1. Returns ({"q", "k", "v"} -> W [D, d_k], {"q", "k", "v"} -> b [d_k]).
    """
    enc = model.encoder[layer]
    assert isinstance(enc, EncoderLayer)  # nn.ModuleList types its items as plain modules
    attn = enc.self_attn
    d_k = model.cfg.d_model // model.cfg.n_heads
    cols = slice(head * d_k, (head + 1) * d_k)
    weights, biases = {}, {}
    for name, lin in (("q", attn.W_q), ("k", attn.W_k), ("v", attn.W_v)):
        weights[name] = lin.weight.detach()[cols].T  # [D, d_k]
        biases[name] = lin.bias.detach()[cols]  # [d_k]
    return weights, biases


# --- One head left: every attention layer with all but one of its heads switched off -------------------------


@dataclass(frozen=True)
class OneHeadRun:
    module: str  # e.g. "dec.1.cross_attn"
    head: int  # the only head of `module` left on
    translation: str  # greedy, with the other heads of `module` off
    gold_probs: tuple[float, ...]  # teacher-forced: p of each token of the unmodified translation (+ <eos>)


@dataclass(frozen=True)
class OneHeadLeft:
    """The unmodified model's translation, and the same sentence with one head left in one layer at a time."""

    translation: str
    gold_labels: tuple[str, ...]  # what each decoder position should predict: the translation's tokens, <eos>
    gold_probs: tuple[float, ...]  # the unmodified model's p of each
    n_heads: int
    runs: tuple[OneHeadRun, ...]  # module by module, head by head

    @property
    def modules(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(r.module for r in self.runs))

    def run(self, module: str, head: int) -> OneHeadRun:
        return next(r for r in self.runs if r.module == module and r.head == head)


def one_head_left(bundle: Bundle, prepared: Prepared, modules: tuple[str, ...] | None = None) -> OneHeadLeft:
    """For each attention module and each head h: the model with every other head of that module off (z = 0),
    its greedy translation and, teacher-forced on the unmodified translation, the probability of each token."""
    base = analyse(bundle, prepared)
    tf = teacher_forced(bundle, prepared, base.translation)
    cfg = bundle.config
    assert isinstance(cfg, Config), "one head left switches off the Transformer's heads"
    H = cfg.n_heads
    runs = []
    for module in modules or attention_modules(cfg):
        for h in range(H):
            iv = Interventions(frozenset((module, g) for g in range(H) if g != h))
            out = greedy_decode(bundle.model, prepared.src(), iv).tokens
            runs.append(
                OneHeadRun(
                    module,
                    h,
                    decode_text(bundle, out),
                    teacher_forced(bundle, prepared, base.translation, iv).gold_probs,
                )
            )
    return OneHeadLeft(base.translation, (*tf.target_tokens, EOS), tf.gold_probs, H, tuple(runs))
