"""Seeing inside the model: one `Trace` per call, passed down explicitly.

The shipped model is shared by every browser session, so nothing about a call may live on the
module. Instead a caller builds a `Trace`, hands it to `Transformer.forward` (or `encode` /
`decode`), and reads the recorded tensors from `trace.tensors` afterwards. Every interesting tensor
in the model passes through `trace(name, x)`, which records it (detached, by reference) and returns
it unchanged.

`Interventions` are plain, frozen, hashable data (usable as a cache key) that the model reads while
it runs: heads switched off, masks off, no sqrt(d_k) scaling, no positional encoding; and two rewrites of
what flows through `trace(name, x)`: a `Patch` puts numbers recorded in another run (or anywhere) in place
of part of one named tensor (activation patching: a head's z, a residual stream position, an attention
row, a value vector, ...), and a `WeightEdit` sets one attention weight and rescales the rest of its row so
it still sums to 1. Both carry their numbers as plain tuples, so a patched run is still one cache key.

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
from functools import cached_property
from typing import Protocol

import torch


class Depth(Protocol):
    """What `attention_modules` reads of a config: the Transformer's `Config` (model/transformer.py imports this
    module, so this one names it by what it has)."""

    @property
    def n_enc_layers(self) -> int: ...

    @property
    def n_dec_layers(self) -> int: ...


def attention_modules(cfg: Depth) -> list[str]:
    """Every attention module of a model with `cfg`'s depth (anything with `n_enc_layers`, `n_dec_layers`), as
    the trace and `Interventions.heads_off` name them: ``enc.{i}.self_attn``, then per decoder layer
    ``dec.{i}.self_attn`` and ``dec.{i}.cross_attn``."""
    return [f"enc.{i}.self_attn" for i in range(cfg.n_enc_layers)] + [
        f"dec.{i}.{kind}" for i in range(cfg.n_dec_layers) for kind in ("self_attn", "cross_attn")
    ]


class Heads(Depth, Protocol):
    """What `attention_heads` reads of a config: its depth and its heads per module."""

    @property
    def n_heads(self) -> int: ...


def attention_heads(cfg: Heads) -> list[tuple[str, int]]:
    """Every head of every attention module (`attention_modules`), as (module, head): what
    `Interventions.heads_off` holds."""
    return [(m, h) for m in attention_modules(cfg) for h in range(cfg.n_heads)]


def describe_head(module: str, head: int, short: bool = False) -> str:
    """A head in words: "head 2 of decoder layer 1's encoder-decoder attention", or with `short` (a picker's
    option) "decoder L1 cross-attn · head 2"."""
    if short:
        return f"{describe_module(module, short=True)} · head {head}"
    return f"head {head} of {describe_module(module)}"


def describe_module(module: str, short: bool = False) -> str:
    """An attention module's name in words: "dec.1.cross_attn" -> "decoder layer 1's encoder-decoder attention",
    or with `short` (a picker's option) "decoder L1 cross-attn"."""
    stack, layer, kind = module.split(".")
    where = {"enc": "encoder", "dec": "decoder"}[stack]
    if short:
        return f"{where} L{layer} {kind.replace('_attn', '-attn')}"
    what = {"self_attn": "self-attention", "cross_attn": "encoder-decoder attention"}[kind]
    return f"{where} layer {layer}'s {what}"


@dataclass(frozen=True)
class Patch:
    """Put `values` where `name[at]` is, in the run that carries this patch (activation patching).

    name: a traced tensor's name ("enc.1.add_norm2.out", "dec.0.cross_attn.z", "enc.0.self_attn.weights").
    at: an index into that tensor, batch first: (b, t) for a [B, T, D] stream, (b, h, t) for a head's
        [B, H, T, d] z, q, k or v, or its [B, H, Tq, Tk] weights (a whole row).
    values: the numbers of that slice, flattened row by row (float32 survives the round trip exactly).
    """

    name: str
    at: tuple[int, ...]
    values: tuple[float, ...]

    @classmethod
    def take(cls, trace: Trace, name: str, at: tuple[int, ...], into: int = 0) -> Patch:
        """The slice `name[at]` of a recorded run, to be put at batch row `into` of another (at[0] is the
        recorded run's row)."""
        return cls(name, (into, *at[1:]), tuple(trace[name][at].flatten().tolist()))


@dataclass(frozen=True)
class WeightEdit:
    """Set one attention weight to `value`; the other weights of its row are scaled by one factor so the row
    still sums to 1 (blocking a key, value 0, is then exactly masking it: softmax over the keys left).

    module: an attention module ("dec.1.cross_attn"); at: (b, head, query, key); value in [0, 1].
    Several edits of one row are applied together: the edited weights are set, the others share what is left.
    A row with nothing left to scale (its other weights are all 0) keeps only the set values, as the model
    gives a row with every key masked zero weights.
    """

    module: str
    at: tuple[int, int, int, int]
    value: float

    def __post_init__(self) -> None:
        if not 0.0 <= self.value <= 1.0:
            raise ValueError(f"an attention weight is between 0 and 1 (got {self.value!r})")
        if len(self.at) != 4 or min(self.at) < 0:
            raise ValueError(f"a weight is at (batch, head, query, key), each 0 or more (got {self.at!r})")


@dataclass(frozen=True)
class Interventions:
    """What the user switched off. Frozen and hashable: a valid cache key.

    heads_off: set of (attention module name, head index), e.g. ("enc.0.self_attn", 2).
    A head that is off contributes nothing: its output z is zero before concatenation (its
    weights are still computed and recorded so the app can show what it would have done).
    patches / weight_edits: see `Patch` and `WeightEdit`; applied as the tensor passes `trace(name, x)`,
    edits first, then the patches in order (a head switched off is zeroed before its z can be patched).
    """

    heads_off: frozenset[tuple[str, int]] = frozenset()
    look_ahead_mask: bool = True
    padding_mask: bool = True
    scale: bool = True
    positional_encoding: bool = True
    patches: tuple[Patch, ...] = ()
    weight_edits: tuple[WeightEdit, ...] = ()

    @property
    def rewrites(self) -> bool:
        """True when a traced tensor may be replaced on its way through (patches or weight edits)."""
        return bool(self.patches or self.weight_edits)

    @cached_property
    def _by_name(self) -> dict[str, tuple[tuple[Patch, ...], tuple[WeightEdit, ...]]]:
        names = {p.name for p in self.patches} | {f"{e.module}.weights" for e in self.weight_edits}
        return {
            n: (
                tuple(p for p in self.patches if p.name == n),
                tuple(e for e in self.weight_edits if f"{e.module}.weights" == n),
            )
            for n in names
        }

    def rewrite(self, name: str, x: torch.Tensor) -> torch.Tensor:
        """`x` with this run's edits and patches of `name` applied (`x` itself when there are none)."""
        patches, edits = self._by_name.get(name, ((), ()))
        if edits:
            x = edit_weights(x, edits)
        if patches:
            x = x.clone()  # the recorded tensor may be read elsewhere: never write into it
            for p in patches:
                try:
                    part = x[p.at]
                    part[...] = torch.tensor(p.values, dtype=x.dtype).reshape(part.shape)
                except (IndexError, RuntimeError) as e:
                    raise ValueError(
                        f"patch of {name} at {p.at} does not fit its shape {list(x.shape)} "
                        f"({len(p.values)} values): {e}"
                    ) from None
        return x

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
        if self.patches:
            out.append(f"{len(self.patches)} activation(s) patched in from another run")
        if self.weight_edits:
            out.append(f"{len(self.weight_edits)} attention weight(s) edited")
        return out


def edit_weights(weights: torch.Tensor, edits: tuple[WeightEdit, ...]) -> torch.Tensor:
    """[B, H, Tq, Tk] attention weights with `edits` set and each edited row's other weights rescaled so the row
    sums to 1 (see `WeightEdit`); rows without an edit are returned bit for bit."""
    if len({e.at for e in edits}) != len(edits):
        raise ValueError("two edits of the same attention weight")
    at = tuple(torch.tensor(column) for column in zip(*(e.at for e in edits), strict=True))  # (b, h, q, k) indices
    try:
        fixed = torch.zeros_like(weights, dtype=torch.bool)
        fixed[at] = True
    except IndexError as e:
        raise ValueError(f"a weight edit is outside the weights' shape {list(weights.shape)}: {e}") from None
    values = torch.zeros_like(weights)
    values[at] = torch.tensor([e.value for e in edits], dtype=weights.dtype)
    set_sum = values.sum(-1, keepdim=True)  # [B, H, Tq, 1]
    if bool((set_sum > 1 + 1e-6).any()):
        raise ValueError("the edited weights of one row add up to more than 1")
    rest = weights.masked_fill(fixed, 0.0)
    left = rest.sum(-1, keepdim=True)
    scale = torch.where(left > 0, (1 - set_sum).clamp_min(0) / left.clamp_min(torch.finfo(weights.dtype).tiny), 0.0)
    edited = torch.where(fixed, values, rest * scale)
    return torch.where(fixed.any(-1, keepdim=True), edited, weights)


@dataclass
class Trace:
    """Records named tensors during one forward call and carries the interventions.

    `Trace(record=False)` applies interventions without keeping anything. Tensors are stored
    detached and by reference (the model never modifies a tensor in place after tracing it). A tensor
    rewritten by a patch or an edit is recorded as it flows on (rewritten).
    """

    interventions: Interventions = field(default_factory=Interventions)
    record: bool = True
    tensors: dict[str, torch.Tensor] = field(default_factory=dict)

    @property
    def stepwise(self) -> bool:
        """True when the model must run step by step, every named tensor passing `trace(name, x)`: to record it,
        or to rewrite it. Otherwise the same arithmetic may run on fused kernels."""
        return self.record or self.interventions.rewrites

    def __call__(self, name: str, x: torch.Tensor) -> torch.Tensor:
        if self.interventions.rewrites:
            x = self.interventions.rewrite(name, x)
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
        return [
            f"{p}.{t}" for t in ("q", "k", "v", "scores", "scaled", "mask", "masked", "weights", "z", "concat", "out")
        ]

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
        names += (
            attn(f"{p}.self_attn")
            + norm(f"{p}.add_norm1")
            + attn(f"{p}.cross_attn")
            + norm(f"{p}.add_norm2")
            + ffn(f"{p}.ffn")
            + norm(f"{p}.add_norm3")
        )
    if norm_first:
        names += ["dec.norm.normed", "dec.norm.out"]
    names += ["dec.out", "logits", "probs"]
    return names
