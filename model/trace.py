"""Seeing inside the model: one `Trace` per call, passed down explicitly.

The shipped model is shared by every browser session, so nothing about a call may live on the
module. Instead a caller builds a `Trace`, hands it to `Transformer.forward` (or `encode` /
`decode`), and reads the recorded tensors from `trace.tensors` afterwards. Every interesting tensor
in the model passes through `trace(name, x)`, which records it (detached, by reference) and returns
it unchanged.

`Interventions` are plain, frozen, hashable data (usable as a cache key) that the model reads while
it runs: heads switched off, masks off, no sqrt(d_k) scaling, no positional encoding.

Naming scheme: ``<stack>.<layer>.<sublayer>.<tensor>``, 0-indexed, dots only. `tensor_names`
returns the complete list for a given depth; `tests/test_trace.py` holds it as a golden list.

=====================================  ==================  ==========================================
name                                   shape               what it is
=====================================  ==================  ==========================================
src.tokens / tgt.tokens                [B, T]              token ids (tgt: shifted right, starts BOS)
src.embed / tgt.embed                  [B, T, D]           embedding row * sqrt(d_model)
src.pos / tgt.pos                      [1, T, D]           PE rows (sin/cos, or learned)
src.input / tgt.input                  [B, T, D]           embed + pos (just embed when PE is off)
{A}.q, {A}.k, {A}.v                    [B, H, T, d_k]      per-head q, k, v (v: d_v, see Config)
{A}.scores                             [B, H, Tq, Tk]      Q K^T
{A}.scaled                             [B, H, Tq, Tk]      Q K^T / sqrt(d_k) (= scores if scaling off)
{A}.mask                               [B|1, 1, Tq, Tk]    additive mask: 0 = may attend, -inf = not
{A}.masked                             [B, H, Tq, Tk]      scaled + mask
{A}.weights                            [B, H, Tq, Tk]      softmax(masked); rows sum to 1
{A}.z                                  [B, H, Tq, d_v]     weights @ V, per head (0 for heads off)
{A}.concat                             [B, Tq, D]          heads side by side
{A}.out                                [B, Tq, D]          concat @ W_o
{N}.resid                              [B, T, D]           x + sublayer(x)          (post-LN)
{N}.normed                             [B, T, D]           (resid - mean) / std     (before gamma, beta)
{N}.out                                [B, T, D]           gamma * normed + beta
{F}.hidden                             [B, T, d_ff]        ReLU(x W_1 + b_1)
{F}.out                                [B, T, D]           hidden W_2 + b_2
enc.out                                [B, Ts, D]          encoder output ("memory")
dec.out                                [B, Tt, D]          decoder output
logits / probs                         [B, Tt, V]          final linear / softmax over target vocab
=====================================  ==================  ==========================================

where {A} is ``enc.{i}.self_attn``, ``dec.{i}.self_attn`` or ``dec.{i}.cross_attn`` (cross: Tk =
source length), {N} is ``enc.{i}.add_norm{1,2}`` or ``dec.{i}.add_norm{1,2,3}``, {F} is
``enc.{i}.ffn`` or ``dec.{i}.ffn``. With pre-LN (`Config.norm_first`), {N}.resid is x +
sublayer(LayerNorm(x)), {N}.normed / {N}.out are the LayerNorm applied *before* the sublayer, and
``enc.norm.*`` / ``dec.norm.*`` hold the final LayerNorm of each stack.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import torch


def attention_modules(cfg) -> list[str]:
    """Every attention module of a model with `cfg`'s depth (anything with `n_enc_layers`, `n_dec_layers`), as
    the trace and `Interventions.heads_off` name them: ``enc.{i}.self_attn``, then per decoder layer
    ``dec.{i}.self_attn`` and ``dec.{i}.cross_attn``."""
    return ([f"enc.{i}.self_attn" for i in range(cfg.n_enc_layers)]
            + [f"dec.{i}.{kind}" for i in range(cfg.n_dec_layers) for kind in ("self_attn", "cross_attn")])


@dataclass(frozen=True)
class Interventions:
    """What the user switched off. Frozen and hashable: a valid cache key.

    heads_off: set of (attention module name, head index), e.g. ("enc.0.self_attn", 2).
    A head that is off contributes nothing: its output z is zero before concatenation (its
    weights are still computed and recorded so the app can show what it would have done).
    """

    heads_off: frozenset[tuple[str, int]] = frozenset()
    look_ahead_mask: bool = True
    padding_mask: bool = True
    scale: bool = True
    positional_encoding: bool = True

    def with_head(self, module: str, head: int, on: bool) -> Interventions:
        heads = set(self.heads_off)
        (heads.discard if on else heads.add)((module, head))
        return replace(self, heads_off=frozenset(heads))

    def heads_off_in(self, module: str) -> list[int]:
        return sorted(h for m, h in self.heads_off if m == module)

    @property
    def active(self) -> bool:
        """True when anything differs from the unmodified model."""
        return self != Interventions()

    def describe(self) -> list[str]:
        """Short human-readable list of what is switched off."""
        out = [f"{m} head {h} off" for m, h in sorted(self.heads_off)]
        if not self.look_ahead_mask:
            out.append("look-ahead mask off")
        if not self.padding_mask:
            out.append("padding mask off")
        if not self.scale:
            out.append("no √d_k scaling")
        if not self.positional_encoding:
            out.append("positional encoding off")
        return out


@dataclass
class Trace:
    """Records named tensors during one forward call and carries the interventions.

    `Trace(record=False)` applies interventions without keeping anything. Tensors are stored
    detached and by reference (the model never modifies a tensor in place after tracing it).
    """

    interventions: Interventions = field(default_factory=Interventions)
    record: bool = True
    tensors: dict[str, torch.Tensor] = field(default_factory=dict)

    def __call__(self, name: str, x: torch.Tensor) -> torch.Tensor:
        if self.record:
            self.tensors[name] = x.detach()
        return x

    def __getitem__(self, name: str) -> torch.Tensor:
        return self.tensors[name]

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.tensors.values())


# Used when the caller passes no trace: default interventions, nothing recorded.
NO_TRACE = Trace(record=False)


def tensor_names(n_enc_layers: int, n_dec_layers: int, norm_first: bool = False) -> list[str]:
    """Every name a full forward pass records, in the order the model produces them."""

    def attn(p: str) -> list[str]:
        return [f"{p}.{t}" for t in ("q", "k", "v", "scores", "scaled", "mask", "masked",
                                     "weights", "z", "concat", "out")]

    def norm(p: str) -> list[str]:
        return [f"{p}.{t}" for t in ("resid", "normed", "out")]

    def ffn(p: str) -> list[str]:
        return [f"{p}.hidden", f"{p}.out"]

    names = [f"src.{t}" for t in ("tokens", "embed", "pos", "input")]
    for i in range(n_enc_layers):
        p = f"enc.{i}"
        names += attn(f"{p}.self_attn") + norm(f"{p}.add_norm1") + ffn(f"{p}.ffn") + norm(f"{p}.add_norm2")
    if norm_first:
        names += ["enc.norm.normed", "enc.norm.out"]
    names += ["enc.out"]
    names += [f"tgt.{t}" for t in ("tokens", "embed", "pos", "input")]
    for i in range(n_dec_layers):
        p = f"dec.{i}"
        names += (attn(f"{p}.self_attn") + norm(f"{p}.add_norm1") + attn(f"{p}.cross_attn")
                  + norm(f"{p}.add_norm2") + ffn(f"{p}.ffn") + norm(f"{p}.add_norm3"))
    if norm_first:
        names += ["dec.norm.normed", "dec.norm.out"]
    names += ["dec.out", "logits", "probs"]
    return names
