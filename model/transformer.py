"""The encoder-decoder Transformer of "Attention Is All You Need", written to be looked into.

Reads top to bottom in the paper's order: embeddings and positional encoding, scaled dot-product
attention, multi-head attention, the position-wise feed-forward net, residual + LayerNorm, the
encoder layer, the decoder layer, the encoder-decoder, the generator (final linear + softmax).

Mask convention (one, everywhere): a boolean mask is True where a query MAY attend to a key.
Masks broadcast to [B, H, Tq, Tk]. Masked scores are set to -inf before the softmax; a row with no
allowed key at all gets all-zero weights instead of NaN.

Every interesting tensor goes through `trace(name, x)`; see `model/trace.py` for the names.
Nothing about a call is ever stored on a module.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from model.trace import NO_TRACE, Interventions, Trace
from model.vocab import PAD_ID

POSITIONS = ("sinusoidal", "learned")  # how positions are encoded: the paper's sinusoids, or a learned table


@dataclass(frozen=True)
class Config:
    """Sizes of the model. The paper's base model is d_model=512, n_heads=8, d_ff=2048, 6+6 layers.

    Two options reproduce rows of the paper's Table 3 and are off by default: `key_size` (row B: queries
    and keys of key_size < d_model / n_heads dimensions per head, values keep d_model / n_heads) and
    `positions="learned"` (row E: a trained table of position vectors instead of the sinusoids).
    """

    src_vocab: int
    tgt_vocab: int
    d_model: int = 128
    n_heads: int = 4
    key_size: int | None = None  # d_k when smaller than d_model / n_heads (Table 3 row B); None: d_model / n_heads
    n_enc_layers: int = 2
    n_dec_layers: int = 2
    d_ff: int = 256
    dropout: float = 0.1
    max_len: int = 64
    positions: str = "sinusoidal"  # "sinusoidal" (paper 3.5) or "learned" (Table 3 row E)
    norm_first: bool = False  # False: post-LN as in the paper, LayerNorm(x + Sublayer(x))
    pad_id: int = PAD_ID

    def __post_init__(self) -> None:
        problems = []
        for name in ("src_vocab", "tgt_vocab", "d_model", "n_heads", "n_enc_layers", "n_dec_layers", "d_ff", "max_len"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                problems.append(f"{name} must be a positive integer (got {value!r})")
        if not problems and self.d_model % self.n_heads:
            problems.append(
                f"d_model ({self.d_model}) must be divisible by n_heads "
                f"({self.n_heads}) so every head gets d_k = d_model / n_heads dimensions"
            )
        if not problems and self.d_model % 2:
            problems.append(f"d_model ({self.d_model}) must be even for the sin/cos positional encoding")
        if (
            self.key_size is not None
            and not problems
            and (
                isinstance(self.key_size, bool)
                or not isinstance(self.key_size, int)
                or not 0 < self.key_size <= self.d_model // self.n_heads
            )
        ):
            problems.append(
                f"key_size must be None or a whole number from 1 to d_model / n_heads = "
                f"{self.d_model // self.n_heads} (got {self.key_size!r})"
            )
        if self.positions not in POSITIONS:
            problems.append(f"positions must be one of {', '.join(POSITIONS)} (got {self.positions!r})")
        if not isinstance(self.norm_first, bool):
            problems.append(f"norm_first must be True or False (got {self.norm_first!r})")
        if isinstance(self.dropout, bool) or not (isinstance(self.dropout, (int, float)) and 0.0 <= self.dropout < 1.0):
            problems.append(f"dropout must be a number in [0, 1) (got {self.dropout!r})")
        if not problems and not 0 <= self.pad_id < min(self.src_vocab, self.tgt_vocab):
            problems.append(f"pad_id must be a valid token id (got {self.pad_id!r})")
        if problems:
            raise ValueError("Invalid Transformer config: " + "; ".join(problems))

    @property
    def d_k(self) -> int:
        """Dimensions per head of queries and keys."""
        return self.key_size or self.d_model // self.n_heads

    @property
    def d_v(self) -> int:
        """Dimensions per head of values: d_model / n_heads, so the heads' outputs concatenate to d_model."""
        return self.d_model // self.n_heads

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# --- Masks (True = may attend) ------------------------------------------------------------------


def padding_mask(tokens: Tensor, pad_id: int = PAD_ID) -> Tensor:
    """[B, T] token ids -> [B, 1, 1, T]: every query may attend to every non-padding key."""
    return (tokens != pad_id)[:, None, None, :]  # [B, 1, 1, T]


def look_ahead_mask(size: int, device: torch.device | None = None) -> Tensor:
    """[1, 1, T, T] lower-triangular: position i may attend to positions 0..i, never the future."""
    return torch.ones(size, size, dtype=torch.bool, device=device).tril()[None, None]  # [1, 1, T, T]


def additive_mask(mask: Tensor) -> Tensor:
    """Boolean mask -> the additive form the lectures draw: 0 where allowed, -inf where masked."""
    return torch.zeros(mask.shape, dtype=torch.float32, device=mask.device).masked_fill(~mask, float("-inf"))


# --- Embeddings and positional encoding ---------------------------------------------------------


def sinusoidal_encoding(max_len: int, d_model: int) -> Tensor:
    """PE[pos, 2i] = sin(pos / 10000^(2i/d_model)), PE[pos, 2i+1] = cos(same angle). -> [max_len, D]"""
    pos = torch.arange(max_len, dtype=torch.float32)[:, None]  # [L, 1]
    two_i = torch.arange(0, d_model, 2, dtype=torch.float32)  # [D/2]
    angle = pos / torch.pow(10000.0, two_i / d_model)  # [L, D/2]
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle)
    return pe


class Embeddings(nn.Module):
    """Token embedding scaled by sqrt(d_model), plus the positional encoding: the sinusoids (a computed buffer),
    or with `positions="learned"` a [max_len, D] table trained like every other weight."""

    def __init__(self, vocab: int, cfg: Config, name: str):
        super().__init__()
        self.name = name  # "src" or "tgt": a fixed label for the trace, not per-call state
        self.d_model = cfg.d_model
        self.lut = nn.Embedding(vocab, cfg.d_model)
        if cfg.positions == "learned":
            self.pe = nn.Parameter(torch.empty(cfg.max_len, cfg.d_model))  # initialised with the other matrices
        else:
            self.register_buffer("pe", sinusoidal_encoding(cfg.max_len, cfg.d_model), persistent=False)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, tokens: Tensor, trace: Trace) -> Tensor:
        n = self.name
        trace(f"{n}.tokens", tokens)  # [B, T]
        x = trace(f"{n}.embed", self.lut(tokens) * math.sqrt(self.d_model))  # [B, T, D]
        if trace.interventions.positional_encoding:
            x = x + trace(f"{n}.pos", self.pe[None, : tokens.size(1)])  # [1, T, D] broadcast over B
        out: Tensor = self.dropout(trace(f"{n}.input", x))  # [B, T, D]
        return out


# --- Scaled dot-product attention ---------------------------------------------------------------


def scaled_dot_product_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    scale: bool = True,
    trace: Trace = NO_TRACE,
    name: str = "attn",
    dropout: nn.Module | None = None,
) -> tuple[Tensor, Tensor]:
    """softmax(Q K^T / sqrt(d_k) + mask) V for [..., Tq, d_k] queries, [..., Tk, d_k] keys, [..., Tk, d_v] values.

    Returns (z [..., Tq, d_v], weights [..., Tq, Tk]). `mask` is boolean, True = may attend.
    """
    d_k = q.size(-1)
    scores = trace(f"{name}.scores", q @ k.transpose(-2, -1))  # [B, H, Tq, Tk]
    scaled = trace(f"{name}.scaled", scores / math.sqrt(d_k) if scale else scores)
    if mask is not None:
        masked = scaled.masked_fill(~mask, float("-inf"))
    else:
        masked = scaled
    if trace.record:  # the additive form, as drawn in the lecture notes (all zeros when no mask)
        trace(f"{name}.mask", additive_mask(mask) if mask is not None else torch.zeros(1, 1, *scaled.shape[-2:]))
    trace(f"{name}.masked", masked)
    weights = torch.softmax(masked, dim=-1)
    if mask is not None:
        weights = weights.nan_to_num(0.0)  # a row with every key masked: all -inf -> NaN -> 0
    weights = trace(f"{name}.weights", weights)  # [B, H, Tq, Tk], rows sum to 1
    if dropout is not None:
        weights = dropout(weights)
    return weights @ v, weights  # [B, H, Tq, d_v]


# --- Multi-head attention -----------------------------------------------------------------------


class MultiHeadAttention(nn.Module):
    """MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W_o, head_i = Attention(Q W_q^i, K W_k^i, V W_v^i).

    W_q, W_k, W_v are linear maps whose output columns are split into n_heads blocks (d_k columns each for
    W_q and W_k, d_v = D / n_heads for W_v): block i is head i's projection. Usually d_k = d_v, so all
    four maps are [D, D].

    When nothing is recorded or rewritten (training, decoding) the same arithmetic runs on fused kernels: one
    matmul for Q, K, V of self-attention and torch's scaled_dot_product_attention. The parameters stay
    separate; tests/test_transformer.py proves both paths give the same numbers.
    """

    def __init__(self, cfg: Config, name: str):
        super().__init__()
        self.name = name  # e.g. "enc.0.self_attn"
        self.n_heads, self.d_k = cfg.n_heads, cfg.d_k
        H = cfg.n_heads
        self.W_q = nn.Linear(cfg.d_model, H * cfg.d_k)
        self.W_k = nn.Linear(cfg.d_model, H * cfg.d_k)
        self.W_v = nn.Linear(cfg.d_model, H * cfg.d_v)
        self.W_o = nn.Linear(H * cfg.d_v, cfg.d_model)
        self.dropout = nn.Dropout(cfg.dropout)

    def split_heads(self, x: Tensor) -> Tensor:
        B, T, _ = x.shape
        return x.reshape(B, T, self.n_heads, -1).transpose(1, 2)  # [B, T, H * d] -> [B, H, T, d]

    def forward(self, x_q: Tensor, x_kv: Tensor, mask: Tensor | None, trace: Trace) -> Tensor:
        n, iv = self.name, trace.interventions
        if x_q is x_kv and not trace.stepwise:  # self-attention, nothing to show: one matmul for Q, K, V
            w = torch.cat([self.W_q.weight, self.W_k.weight, self.W_v.weight])  # [2 H d_k + H d_v, D]
            b = torch.cat([self.W_q.bias, self.W_k.bias, self.W_v.bias])
            sizes = [self.W_q.out_features, self.W_k.out_features, self.W_v.out_features]
            q, k, v = (self.split_heads(t) for t in torch.split(F.linear(x_q, w, b), sizes, dim=-1))  # [B, H, T, d]
        else:
            q = trace(f"{n}.q", self.split_heads(self.W_q(x_q)))  # [B, H, Tq, d_k]
            k = trace(f"{n}.k", self.split_heads(self.W_k(x_kv)))  # [B, H, Tk, d_k]
            v = trace(f"{n}.v", self.split_heads(self.W_v(x_kv)))  # [B, H, Tk, d_v]
        if trace.stepwise:
            z, _ = scaled_dot_product_attention(q, k, v, mask, iv.scale, trace, n, self.dropout)
        else:  # nothing to show: the same formula as one fused kernel (equality tested)
            z = F.scaled_dot_product_attention(
                q,
                k,
                v,
                attn_mask=mask,
                scale=None if iv.scale else 1.0,
                dropout_p=self.dropout.p if self.training else 0.0,
            )
        off = iv.heads_off_in(n) if iv.heads_off else ()
        if off:
            keep = torch.ones(self.n_heads, device=z.device)
            keep[off] = 0.0
            z = z * keep[None, :, None, None]  # a head that is off contributes nothing
        z = trace(f"{n}.z", z)  # [B, H, Tq, d_v]
        B, H, Tq, d_v = z.shape
        concat = trace(f"{n}.concat", z.transpose(1, 2).reshape(B, Tq, H * d_v))  # [B, Tq, D]
        return trace(f"{n}.out", self.W_o(concat))  # [B, Tq, D]


# --- Position-wise feed-forward -----------------------------------------------------------------


class FeedForward(nn.Module):
    """FFN(x) = max(0, x W_1 + b_1) W_2 + b_2, the same two-layer net at every position."""

    def __init__(self, cfg: Config, name: str):
        super().__init__()
        self.name = name
        self.W_1 = nn.Linear(cfg.d_model, cfg.d_ff)
        self.W_2 = nn.Linear(cfg.d_ff, cfg.d_model)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x: Tensor, trace: Trace) -> Tensor:
        hidden = trace(f"{self.name}.hidden", torch.relu(self.W_1(x)))  # [B, T, d_ff]
        return trace(f"{self.name}.out", self.W_2(self.dropout(hidden)))  # [B, T, D]


# --- Residual connection + LayerNorm ------------------------------------------------------------


class LayerNorm(nn.LayerNorm):
    """nn.LayerNorm split in its two steps so both can be seen: normalise, then scale and shift."""

    def __init__(self, d_model: int, name: str):
        super().__init__(d_model)
        self.name = name

    def forward(self, x: Tensor, trace: Trace = NO_TRACE) -> Tensor:
        if not trace.stepwise:  # same numbers, one fused kernel
            return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)
        normed = trace(f"{self.name}.normed", F.layer_norm(x, self.normalized_shape, eps=self.eps))
        return trace(f"{self.name}.out", normed * self.weight + self.bias)  # gamma * x_hat + beta


class AddNorm(nn.Module):
    """Post-LN (paper): LayerNorm(x + Dropout(Sublayer(x))). Pre-LN: x + Dropout(Sublayer(LayerNorm(x)))."""

    def __init__(self, cfg: Config, name: str):
        super().__init__()
        self.name, self.norm_first = name, cfg.norm_first
        self.norm = LayerNorm(cfg.d_model, name)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x: Tensor, sublayer: Callable[[Tensor], Tensor], trace: Trace) -> Tensor:
        if self.norm_first:
            return trace(f"{self.name}.resid", x + self.dropout(sublayer(self.norm(x, trace))))
        resid = trace(f"{self.name}.resid", x + self.dropout(sublayer(x)))
        out: Tensor = self.norm(resid, trace)
        return out


# --- Encoder and decoder layers -----------------------------------------------------------------


class EncoderLayer(nn.Module):
    """Self-attention, then the feed-forward net, each wrapped in residual + LayerNorm."""

    def __init__(self, cfg: Config, i: int):
        super().__init__()
        p = f"enc.{i}"
        self.self_attn = MultiHeadAttention(cfg, f"{p}.self_attn")
        self.add_norm1 = AddNorm(cfg, f"{p}.add_norm1")
        self.ffn = FeedForward(cfg, f"{p}.ffn")
        self.add_norm2 = AddNorm(cfg, f"{p}.add_norm2")

    def forward(self, x: Tensor, src_mask: Tensor | None, trace: Trace) -> Tensor:
        x = self.add_norm1(x, lambda h: self.self_attn(h, h, src_mask, trace), trace)
        out: Tensor = self.add_norm2(x, lambda h: self.ffn(h, trace), trace)
        return out


class DecoderLayer(nn.Module):
    """Masked self-attention, encoder-decoder (cross) attention, feed-forward; each with add & norm.

    Cross-attention takes its queries from the decoder and its keys and values from the encoder output.
    """

    def __init__(self, cfg: Config, i: int):
        super().__init__()
        p = f"dec.{i}"
        self.self_attn = MultiHeadAttention(cfg, f"{p}.self_attn")
        self.add_norm1 = AddNorm(cfg, f"{p}.add_norm1")
        self.cross_attn = MultiHeadAttention(cfg, f"{p}.cross_attn")
        self.add_norm2 = AddNorm(cfg, f"{p}.add_norm2")
        self.ffn = FeedForward(cfg, f"{p}.ffn")
        self.add_norm3 = AddNorm(cfg, f"{p}.add_norm3")

    def forward(
        self, y: Tensor, memory: Tensor, src_mask: Tensor | None, tgt_mask: Tensor | None, trace: Trace
    ) -> Tensor:
        y = self.add_norm1(y, lambda h: self.self_attn(h, h, tgt_mask, trace), trace)
        y = self.add_norm2(y, lambda h: self.cross_attn(h, memory, src_mask, trace), trace)
        out: Tensor = self.add_norm3(y, lambda h: self.ffn(h, trace), trace)
        return out


# --- The encoder-decoder ------------------------------------------------------------------------


class Transformer(nn.Module):
    """encode(src) -> memory; decode(memory, src, tgt_in) -> hidden; generator(hidden) -> logits.

    Greedy decoding is one `encode` and a loop of `decode` + `generator` calls.
    `tgt_in` is the target shifted right: it starts with BOS, and position t predicts token t+1.
    """

    def __init__(self, cfg: Config):
        super().__init__()
        self.cfg = cfg
        self.src_embed = Embeddings(cfg.src_vocab, cfg, "src")
        self.tgt_embed = Embeddings(cfg.tgt_vocab, cfg, "tgt")
        self.encoder = nn.ModuleList(EncoderLayer(cfg, i) for i in range(cfg.n_enc_layers))
        self.decoder = nn.ModuleList(DecoderLayer(cfg, i) for i in range(cfg.n_dec_layers))
        # Pre-LN stacks end with a LayerNorm (their layers' outputs are never normalised otherwise).
        self.enc_norm = LayerNorm(cfg.d_model, "enc.norm") if cfg.norm_first else None
        self.dec_norm = LayerNorm(cfg.d_model, "dec.norm") if cfg.norm_first else None
        self.generator = nn.Linear(cfg.d_model, cfg.tgt_vocab)  # the final linear layer
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    # Masks, honouring the interventions.
    def src_mask(self, src: Tensor, trace: Trace) -> Tensor | None:
        return padding_mask(src, self.cfg.pad_id) if trace.interventions.padding_mask else None  # [B,1,1,Ts]

    def tgt_mask(self, tgt_in: Tensor, trace: Trace) -> Tensor | None:
        iv = trace.interventions
        mask = padding_mask(tgt_in, self.cfg.pad_id) if iv.padding_mask else None  # [B, 1, 1, Tt]
        if iv.look_ahead_mask:
            causal = look_ahead_mask(tgt_in.size(1), tgt_in.device)  # [1, 1, Tt, Tt]
            mask = causal if mask is None else mask & causal  # [B, 1, Tt, Tt]
        return mask

    def check_length(self, tokens: Tensor) -> None:
        if tokens.size(1) > self.cfg.max_len:
            raise ValueError(f"sequence of {tokens.size(1)} tokens is longer than max_len={self.cfg.max_len}")

    def encode(self, src: Tensor, trace: Trace = NO_TRACE) -> Tensor:
        """[B, Ts] source ids -> memory [B, Ts, D]."""
        self.check_length(src)
        mask = self.src_mask(src, trace)
        x = self.src_embed(src, trace)  # [B, Ts, D]
        for layer in self.encoder:
            x = layer(x, mask, trace)
        if self.enc_norm is not None:
            x = self.enc_norm(x, trace)
        return trace("enc.out", x)

    def decode(self, memory: Tensor, src: Tensor, tgt_in: Tensor, trace: Trace = NO_TRACE) -> Tensor:
        """memory [B, Ts, D], source ids [B, Ts] (for its padding mask), tgt_in [B, Tt] -> [B, Tt, D]."""
        self.check_length(tgt_in)
        src_mask, tgt_mask = self.src_mask(src, trace), self.tgt_mask(tgt_in, trace)
        y = self.tgt_embed(tgt_in, trace)  # [B, Tt, D]
        for layer in self.decoder:
            y = layer(y, memory, src_mask, tgt_mask, trace)
        if self.dec_norm is not None:
            y = self.dec_norm(y, trace)
        return trace("dec.out", y)

    def forward(self, src: Tensor, tgt_in: Tensor, trace: Trace = NO_TRACE) -> Tensor:
        """Teacher-forced pass: logits [B, Tt, V] for the next token at every target position."""
        logits = trace("logits", self.generator(self.decode(self.encode(src, trace), src, tgt_in, trace)))
        if trace.record:
            trace("probs", torch.softmax(logits, dim=-1))  # [B, Tt, V]
        return logits


def traced(model: nn.Module, src: Tensor, tgt_in: Tensor, interventions: Interventions | None = None) -> Trace:
    """One recorded forward pass without gradients: the trace holds every tensor.

    `model` is the Transformer, or any network called as ``model(src, tgt_in, trace)`` (model/rnn.py's too).

    The model must already be in eval mode (dropout off). This never switches the mode itself:
    the shipped model is shared by every session, so a call must not change it.
    """
    if model.training:
        raise ValueError("traced() needs a model in eval mode: call model.eval() first")
    trace = Trace(interventions or Interventions())
    with torch.no_grad():
        model(src, tgt_in, trace)
    return trace
