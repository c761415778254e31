"""Why the encoder layer needs its feed-forward net: attention never leaves the span of its values.

Self-attention's output for word i in one head is z_i = Σ_j a_ij v_j, a weighted average of that head's value
vectors, so z_i lies in span{v_1, …, v_T} whatever the weights a are (the lecture notes: "output vectors are
constrained to lie in the subspace spanned by the input vectors"). Exactly what stays in which span, in this
model's encoder layer (post-LN, as in the paper; pre-LN models in brackets):

1. Concat(z^1 … z^H) row i lies in the span of the H·T vectors "v_j^h in head h's block of d_k columns".
2. W^O is linear: out_i − b^O lies in the span of those vectors times W^O (H·T vectors in d_model dimensions).
3. The residual adds the layer's input x_i, which is not a value; the sum lies in span{x_j, v_j^h W^O_h, b^O}
   (T + H·T + 1 vectors). LayerNorm subtracts the row's mean (a fixed projection P), divides the row by its own
   standard deviation (a number per row: the row keeps its direction) and multiplies by γ: so LN(·)_i − β lies in
   the span of γ ⊙ P(those vectors). [Pre-LN: no LayerNorm after the residual; the sum itself is measured.]
4. The FFN, max(0, x W_1 + b_1) W_2 + b_2: without its ReLU it would be one linear map, and its output minus b_2
   would stay in the span of {s W_1 W_2 : s spanning its possible inputs (step 3's span and β)} and b_1 W_2.
   The ReLU, applied number by number, leaves that span.

`span_check` measures each step on a traced sentence: for every word, the share of the row's length outside the
span (‖row − its projection‖ / ‖row‖). Steps 1-3 come out at float error (about 1e-7); step 4 does not. The test
only means something while the spanning vectors do not fill the whole space: with T ≥ d_model / H words step 2's
H·T vectors span everything (`SpanStep.confining` is then False).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from model.trace import Trace
from model.transformer import EncoderLayer, Transformer

STEPS = ("Concat(z¹…zᴴ)", "attention output − b^O", "after the residual and LayerNorm", "FFN output − b₂")


@dataclass(frozen=True)
class SpanStep:
    """One stage of the layer: its rows against the span of vectors fixed before the attention weights."""

    name: str
    share: Tensor  # [T] ‖row − projection‖ / ‖row‖ (0 for an all-zero row), float64
    vectors: int  # how many vectors span the subspace
    rank: int  # its dimension
    dims: int  # the dimension of the space the rows live in

    @property
    def confining(self) -> bool:
        """The span is a proper subspace: only then can "inside" mean anything."""
        return self.rank < self.dims


@dataclass(frozen=True)
class SpanCheck:
    layer: int
    n_heads: int
    n_words: int
    steps: tuple[SpanStep, ...]  # in the order of STEPS


def _rank_basis(vectors: Tensor) -> Tensor:
    """An orthonormal basis [r, D] of the rows' span (float64; singular values under float32 noise dropped)."""
    _, s, vh = torch.linalg.svd(vectors.double(), full_matrices=False)
    tol = float(s.max()) * max(vectors.shape) * torch.finfo(torch.float32).eps if s.numel() else 0.0
    basis: Tensor = vh[: int((s > tol).sum())]
    return basis


def outside_share(rows: Tensor, basis: Tensor) -> Tensor:
    """For each row [T, D]: ‖row − its projection onto span(basis rows)‖ / ‖row‖ (0 when the row is 0)."""
    x = rows.double()
    rest = x - (x @ basis.T) @ basis
    n = x.norm(dim=-1)
    return torch.where(n > 0, rest.norm(dim=-1) / n.clamp_min(1e-300), torch.zeros_like(n))


def _step(name: str, rows: Tensor, vectors: Tensor) -> SpanStep:
    basis = _rank_basis(vectors)
    return SpanStep(name, outside_share(rows, basis), vectors.shape[0], basis.shape[0], rows.shape[-1])


def _layer_input(trace: Trace, layer: int, pre_ln: bool) -> Tensor:
    if layer == 0:
        return trace["src.input"][0]
    return trace[f"enc.{layer - 1}.add_norm2.{'resid' if pre_ln else 'out'}"][0]


def span_check(model: Transformer, trace: Trace, layer: int) -> SpanCheck:
    """The four steps above for encoder layer `layer` of `model` on the traced sentence (batch row 0)."""
    enc = model.encoder[layer]
    assert isinstance(enc, EncoderLayer)  # nn.ModuleList types its items as plain modules
    pre = model.cfg.norm_first
    H, d_k = model.cfg.n_heads, model.cfg.d_k
    n = f"enc.{layer}"
    with torch.no_grad():
        v = trace[f"{n}.self_attn.v"][0].double()  # [H, T, d_k]
        T, D = v.shape[1], H * d_k
        blocks = torch.zeros(H, T, D, dtype=torch.float64)  # v_j^h placed in head h's columns
        for h in range(H):
            blocks[h, :, h * d_k : (h + 1) * d_k] = v[h]
        blocks = blocks.reshape(H * T, D)  # [H·T, D]
        W_o = enc.self_attn.W_o.weight.double().T  # [D, D], x·W form
        b_o = enc.self_attn.W_o.bias.double()
        values_out = blocks @ W_o  # [H·T, D]
        x = _layer_input(trace, layer, pre).double()  # [T, D]
        summed = torch.cat([x, values_out, b_o[None]])  # [T + H·T + 1, D]: spans x + attention(x)

        # γ ⊙ P(summed), β: what a LayerNorm of the sum can give
        def normed(norm: nn.LayerNorm) -> tuple[Tensor, Tensor]:
            g, beta = norm.weight.double(), norm.bias.double()
            return (summed - summed.mean(-1, keepdim=True)) * g, beta

        if pre:
            third = _step(STEPS[2].replace(" and LayerNorm", ""), trace[f"{n}.add_norm1.resid"][0], summed)
            ffn_in, beta = normed(enc.add_norm2.norm)
        else:
            ffn_in, beta = normed(enc.add_norm1.norm)
            third = _step(STEPS[2], trace[f"{n}.add_norm1.out"][0].double() - beta, ffn_in)
        W_1, b_1 = enc.ffn.W_1.weight.double().T, enc.ffn.W_1.bias.double()  # [D, d_ff], [d_ff]
        W_2, b_2 = enc.ffn.W_2.weight.double().T, enc.ffn.W_2.bias.double()  # [d_ff, D], [D]
        linear = torch.cat([torch.cat([ffn_in, beta[None]]) @ W_1 @ W_2, (b_1 @ W_2)[None]])  # the FFN without ReLU
        steps = (
            _step(STEPS[0], trace[f"{n}.self_attn.concat"][0], blocks),
            _step(STEPS[1], trace[f"{n}.self_attn.out"][0].double() - b_o, values_out),
            third,
            _step(STEPS[3], trace[f"{n}.ffn.out"][0].double() - b_2, linear),
        )
    return SpanCheck(layer, H, T, steps)
