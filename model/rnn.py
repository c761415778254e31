"""Before the Transformer: a recurrent encoder-decoder with attention (Bahdanau et al. 2015), written to
be looked into, with the same vocabularies, training loop, checkpoints, decoding and trace as
`model/transformer.py`.

Reads top to bottom in the order the data flows:

1. the recurrent cells, GRU (Cho et al. 2014) or LSTM (Hochreiter & Schmidhuber 1997), each equation
   written out (tests/test_rnn.py checks them against `torch.nn.GRUCell` / `torch.nn.LSTMCell`);
2. attention, two forms with the same three ingredients, a query from the decoder, keys and values
   from the encoder:

   - ``additive`` (Bahdanau et al. 2015):  e_ti = vᵀ tanh(W s_{t-1} + U h_i), values v_i = h_i;
   - ``qkv`` (the lecture's form):  q_t = W_Q s_{t-1}, k_i = W_K h_i, v_i = W_V h_i, e_ti = k_iᵀ q_t
     (no division by √d: the lecture writes softmax(Kᵀq), and so do we);

   then α_t = softmax(e_t) over the source positions and c_t = Σ_i α_ti v_i;
3. the encoder: h_i = cell(x_i, h_{i-1}), one source word at a time, left to right;
4. the decoder: at step t, with s_{t-1} the state so far and y_{t-1} the previous word (<bos> first),

       c_t = attention(s_{t-1}, h_1..h_m)                 which source words matter now
       s_t = cell([embed(y_{t-1}); c_t], s_{t-1})          read the word and the context
       o_t = tanh(W_o [s_t; c_t])                          the attentional output
       p(y_t | y_<t, x) = softmax(generator(o_t))

   s_0 = tanh(W_init h_m), the encoder's last state (the <eos> of the source).

The lecture writes c_j as computed from s_j and fed into step j+1; here c_t is computed from
s_{t-1} and fed into step t: the same data flow, the index shifted by one (Bahdanau's convention).

Sequential steps: the encoder needs m steps for m source tokens, each waiting for the one before;
the decoder t more. Every step is a matrix product over the whole batch and all hidden units, so an
RNN does use a GPU's parallel cores, across sentences and hidden units, just never across positions.

Padding: source and target are padded on the right (model/data.py), so a left-to-right encoder reads
every real token before any <pad>; padded source positions get no attention (their scores are -inf)
and s_0 is read at each sentence's own last token.

Interface, the same as `Transformer` so `Trainer`, `model.decoding`, `model.evaluate` and
`model.pipeline` use it unchanged: ``encode(src, trace) -> memory``, ``decode(memory, src, tgt_in,
trace) -> [B, Tt, H]``, ``generator`` (the final linear), ``forward(src, tgt_in, trace) -> logits``.
`decode` reruns the decoder over the whole prefix, as the Transformer's does (neither keeps a cache),
so greedy decoding is one `encode` and a loop of `decode` calls for both. Interventions do not apply
to this model (it has no heads, masks to switch or positional encoding); they are ignored.

Recorded tensors (`trace(name, x)`, the same `Trace` as the Transformer; `tensor_names` lists them):

==============================  ================  ===============================================
name                            shape             what it is
==============================  ================  ===============================================
rnn.src.tokens                  [B, Ts]           source ids (w1 .. wm <eos>)
rnn.src.embed                   [B, Ts, E]        source embeddings x_i
rnn.enc.{r,z,n}  (GRU)          [B, Ts, H]        reset gate, update gate, candidate state
rnn.enc.{i,f,g,o,c}  (LSTM)     [B, Ts, H]        input, forget, candidate, output gates; cell state
rnn.enc.h                       [B, Ts, H]        encoder states h_1 .. h_m
rnn.attn.k                      [B, Ts, A]        keys: U h_i (additive) or W_K h_i (qkv)
rnn.attn.v                      [B, Ts, Dv]       values: h_i (additive, Dv = H) or W_V h_i (qkv)
rnn.dec.init                    [B, H]            s_0 = tanh(W_init h_m)
rnn.tgt.tokens                  [B, Tt]           decoder input ids (<bos> y1 .. y_{t-1})
rnn.tgt.embed                   [B, Tt, E]        their embeddings
rnn.dec.q                       [B, Tt, A]        queries from s_{t-1}: W s_{t-1} or W_Q s_{t-1}
rnn.dec.scores                  [B, Tt, Ts]       alignment scores e_ti (-inf at padded sources)
rnn.dec.alpha                   [B, Tt, Ts]       softmax over the source: rows sum to 1
rnn.dec.context                 [B, Tt, Dv]       c_t = Σ_i α_ti v_i
rnn.dec.{r,z,n} / {i,f,g,o,c}   [B, Tt, H]        the decoder cell's gates (as for the encoder)
rnn.dec.s                       [B, Tt, H]        decoder states s_1 .. s_t
rnn.dec.out                     [B, Tt, H]        o_t = tanh(W_o [s_t; c_t])
logits / probs                  [B, Tt, V]        generator(o_t) / its softmax (same names as the Transformer)
==============================  ================  ===============================================

Row t of every ``rnn.dec.*`` tensor is decoder step t+1 (it predicts target word t+1).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import Tensor, nn

from model.limits import RNN_BOUNDS
from model.trace import NO_TRACE, Interventions, Trace
from model.vocab import PAD_ID

CELLS = ("gru", "lstm")
ATTENTIONS = ("additive", "qkv")
GATES = {"gru": ("r", "z", "n"), "lstm": ("i", "f", "g", "o", "c")}  # what each cell records per step


@dataclass(frozen=True)
class RNNConfig:
    """Sizes of the recurrent model. `hidden` is H (encoder and decoder states), `d_emb` the word
    vectors, `d_attn` the size of queries and keys."""

    src_vocab: int
    tgt_vocab: int
    d_emb: int = 128
    hidden: int = 128
    d_attn: int = 128
    cell: str = "gru"  # "gru" or "lstm"
    attention: str = "additive"  # "additive" (Bahdanau) or "qkv" (the lecture's key/query/value form)
    dropout: float = 0.1
    max_len: int = 64  # longest sequence accepted, as the Transformer's (keeps decoding bounded)
    pad_id: int = PAD_ID

    def __post_init__(self) -> None:
        problems = []
        for name, (lo, hi) in RNN_BOUNDS.items():  # model/limits.py: the app's bounds, inclusive
            value = getattr(self, name)
            number = isinstance(value, (int, float)) and not isinstance(value, bool)
            if name != "dropout" and not (number and isinstance(value, int)):
                problems.append(f"{name} must be a whole number (got {_short(value)})")
            elif not (number and lo <= value <= hi):
                problems.append(f"{name} must be in [{lo:g}, {hi:g}] (got {_short(value)})")
        if self.cell not in CELLS:
            problems.append(f"cell must be one of {', '.join(CELLS)} (got {_short(self.cell)})")
        if self.attention not in ATTENTIONS:
            problems.append(f"attention must be one of {', '.join(ATTENTIONS)} (got {_short(self.attention)})")
        if problems:
            raise ValueError("Invalid RNN config: " + "; ".join(problems))

    @property
    def d_model(self) -> int:
        """The state size, under the Transformer's name (the learning-rate schedule reads it)."""
        return self.hidden

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _short(value: object, n: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= n else text[: n - 5] + "…" + text[-4:]


# --- 1. The recurrent cells ---------------------------------------------------------------------


class GRUCell(nn.Module):
    """Gated recurrent unit (Cho et al. 2014), in torch.nn.GRUCell's convention:

        r = σ(W_xr x + b_xr + W_hr h + b_hr)          reset gate: how much of h the candidate sees
        z = σ(W_xz x + b_xz + W_hz h + b_hz)          update gate: keep the old state or take the new
        n = tanh(W_xn x + b_xn + r ⊙ (W_hn h + b_hn))  candidate state
        h' = (1 − z) ⊙ n + z ⊙ h

    W_x and W_h hold the three gates' matrices stacked in the order (r, z, n), as torch does.
    """

    def __init__(self, d_in: int, hidden: int):
        super().__init__()
        self.W_x = nn.Linear(d_in, 3 * hidden)
        self.W_h = nn.Linear(hidden, 3 * hidden)

    def init_state(self, h: Tensor) -> Tensor:
        return h

    @staticmethod
    def output(state: Tensor) -> Tensor:
        return state

    def forward(self, x: Tensor, h: Tensor) -> tuple[Tensor, dict[str, Tensor]]:
        """x [B, d_in], h [B, H] -> h' [B, H] and the gates (each [B, H])."""
        xr, xz, xn = self.W_x(x).chunk(3, dim=-1)  # 3 x [B, H]
        hr, hz, hn = self.W_h(h).chunk(3, dim=-1)  # 3 x [B, H]
        r = torch.sigmoid(xr + hr)
        z = torch.sigmoid(xz + hz)
        n = torch.tanh(xn + r * hn)
        return (1 - z) * n + z * h, {"r": r, "z": z, "n": n}


class LSTMCell(nn.Module):
    """Long short-term memory (Hochreiter & Schmidhuber 1997), in torch.nn.LSTMCell's convention:

        i = σ(W_xi x + W_hi h + b_i)     input gate
        f = σ(W_xf x + W_hf h + b_f)     forget gate
        g = tanh(W_xg x + W_hg h + b_g)  candidate
        o = σ(W_xo x + W_ho h + b_o)     output gate
        c' = f ⊙ c + i ⊙ g               the cell state: a sum, so a gradient can pass many steps
        h' = o ⊙ tanh(c')

    The state is the pair (h, c), kept as one tensor [B, 2H] so both cells share the loops below.
    """

    def __init__(self, d_in: int, hidden: int):
        super().__init__()
        self.hidden = hidden
        self.W_x = nn.Linear(d_in, 4 * hidden)
        self.W_h = nn.Linear(hidden, 4 * hidden)

    def init_state(self, h: Tensor) -> Tensor:
        return torch.cat([h, torch.zeros_like(h)], dim=-1)  # (h, c = 0) -> [B, 2H]

    def output(self, state: Tensor) -> Tensor:
        return state[..., : self.hidden]  # h of (h, c)

    def forward(self, x: Tensor, state: Tensor) -> tuple[Tensor, dict[str, Tensor]]:
        """x [B, d_in], state (h, c) as [B, 2H] -> new state [B, 2H] and the gates (each [B, H])."""
        h, c = torch.split(state, self.hidden, dim=-1)  # 2 x [B, H]
        i, f, g, o = (self.W_x(x) + self.W_h(h)).chunk(4, dim=-1)  # 4 x [B, H]
        i, f, g, o = torch.sigmoid(i), torch.sigmoid(f), torch.tanh(g), torch.sigmoid(o)
        c = f * c + i * g
        h = o * torch.tanh(c)
        return torch.cat([h, c], dim=-1), {"i": i, "f": f, "g": g, "o": o, "c": c}


def make_cell(kind: str, d_in: int, hidden: int) -> GRUCell | LSTMCell:
    return GRUCell(d_in, hidden) if kind == "gru" else LSTMCell(d_in, hidden)


# --- 2. Attention: a query from the decoder, keys and values from the encoder ---------------------


class Attention(nn.Module):
    """additive: e_ti = vᵀ tanh(W s + b + U h_i), v_i = h_i.   qkv: e_ti = (W_K h_i)ᵀ (W_Q s), v_i = W_V h_i.

    Keys and values depend only on the encoder states, so `keys_values` runs once per sentence;
    `forward` runs at every decoder step with that step's query state s_{t-1}.
    """

    def __init__(self, cfg: RNNConfig):
        super().__init__()
        self.kind = cfg.attention
        H, A = cfg.hidden, cfg.d_attn
        self.W_q = nn.Linear(H, A, bias=self.kind == "additive")  # Bahdanau's W (or the lecture's W_Q)
        self.W_k = nn.Linear(H, A, bias=False)  # Bahdanau's U (or W_K)
        if self.kind == "additive":
            self.v = nn.Linear(A, 1, bias=False)  # the vector v of vᵀ tanh(...)
        else:
            self.W_v = nn.Linear(H, H, bias=False)  # W_V

    def keys_values(self, h: Tensor) -> tuple[Tensor, Tensor]:
        """Encoder states h [B, Ts, H] -> keys [B, Ts, A], values [B, Ts, Dv]."""
        return self.W_k(h), (h if self.kind == "additive" else self.W_v(h))

    def forward(self, s: Tensor, k: Tensor, v: Tensor, src_ok: Tensor) -> tuple[Tensor, ...]:
        """Query state s [B, H] -> (q [B, A], scores [B, Ts], alpha [B, Ts], context [B, Dv]).

        src_ok [B, Ts] is True at real source tokens (padding gets no weight).
        """
        q = self.W_q(s)  # [B, A]
        if self.kind == "additive":
            scores = self.v(torch.tanh(q[:, None, :] + k))[..., 0]  # [B, 1, A] + [B, Ts, A] -> [B, Ts]
        else:
            scores = (k @ q[:, :, None])[..., 0]  # [B, Ts, A] @ [B, A, 1] -> [B, Ts]: k_iᵀ q
        scores = scores.masked_fill(~src_ok, float("-inf"))
        alpha = torch.softmax(scores, dim=-1).nan_to_num(0.0)  # [B, Ts]; an all-padding row -> 0, not NaN
        context = (alpha[:, None, :] @ v)[:, 0]  # [B, 1, Ts] @ [B, Ts, Dv] -> [B, Dv]: Σ_i α_ti v_i
        return q, scores, alpha, context


# --- 3-4. The encoder-decoder -------------------------------------------------------------------


class RNNSeq2Seq(nn.Module):
    """encode(src) -> encoder states; decode(memory, src, tgt_in) -> o_t per step; generator -> logits."""

    def __init__(self, cfg: RNNConfig):
        super().__init__()
        self.cfg = cfg
        H, E = cfg.hidden, cfg.d_emb
        d_v = H  # both attention forms give values of size H
        self.src_embed = nn.Embedding(cfg.src_vocab, E, padding_idx=cfg.pad_id)
        self.tgt_embed = nn.Embedding(cfg.tgt_vocab, E, padding_idx=cfg.pad_id)
        self.encoder = make_cell(cfg.cell, E, H)
        self.W_init = nn.Linear(H, H)  # s_0 = tanh(W_init h_m)
        self.attention = Attention(cfg)
        self.decoder = make_cell(cfg.cell, E + d_v, H)  # reads [embed(y_{t-1}); c_t]
        self.W_o = nn.Linear(H + d_v, H)  # o_t = tanh(W_o [s_t; c_t])
        self.generator = nn.Linear(H, cfg.tgt_vocab)  # the final linear layer, as the Transformer's
        self.dropout = nn.Dropout(cfg.dropout)

    def check_length(self, tokens: Tensor) -> None:
        if tokens.size(1) > self.cfg.max_len:
            raise ValueError(f"sequence of {tokens.size(1)} tokens is longer than max_len={self.cfg.max_len}")

    def encode(self, src: Tensor, trace: Trace = NO_TRACE) -> Tensor:
        """[B, Ts] source ids -> encoder states h [B, Ts, H], one step per source word."""
        self.check_length(src)
        trace("rnn.src.tokens", src)  # [B, Ts]
        x = self.dropout(trace("rnn.src.embed", self.src_embed(src)))  # [B, Ts, E]
        return self.recur(x, trace)

    def recur(self, x: Tensor, trace: Trace = NO_TRACE) -> Tensor:
        """The encoder's loop over word vectors x [B, Ts, E] -> states h [B, Ts, H]."""
        B, Ts, _ = x.shape
        state = self.encoder.init_state(x.new_zeros(B, self.cfg.hidden))  # h_0 = 0
        hs, gates = [], []
        for i in range(Ts):  # the recurrence: step i needs h_{i-1}
            state, g = self.encoder(x[:, i], state)  # [B, H] (LSTM: [B, 2H])
            hs.append(self.encoder.output(state))
            gates.append(g)
        h = torch.stack(hs, dim=1)  # Ts x [B, H] -> [B, Ts, H]
        if trace.record:
            for name in GATES[self.cfg.cell]:
                trace(f"rnn.enc.{name}", torch.stack([g[name] for g in gates], dim=1))  # [B, Ts, H]
        return trace("rnn.enc.h", h)

    def decode(self, memory: Tensor, src: Tensor, tgt_in: Tensor, trace: Trace = NO_TRACE) -> Tensor:
        """memory h [B, Ts, H], source ids [B, Ts], tgt_in [B, Tt] (starts <bos>) -> o [B, Tt, H]."""
        self.check_length(tgt_in)
        src_ok = src != self.cfg.pad_id  # [B, Ts]
        k, v = self.attention.keys_values(memory)  # [B, Ts, A], [B, Ts, Dv]
        trace("rnn.attn.k", k)
        trace("rnn.attn.v", v)
        last = (src_ok.sum(1) - 1).clamp_min(0)  # [B]: each sentence's last real token (its <eos>)
        h_m = memory[torch.arange(memory.size(0)), last]  # [B, H]
        s = trace("rnn.dec.init", torch.tanh(self.W_init(h_m)))  # s_0 [B, H]
        state = self.decoder.init_state(s)
        trace("rnn.tgt.tokens", tgt_in)  # [B, Tt]
        y = self.dropout(trace("rnn.tgt.embed", self.tgt_embed(tgt_in)))  # [B, Tt, E]
        steps = []
        for t in range(tgt_in.size(1)):  # step t reads y_{t-1} and needs s_{t-1}
            q, scores, alpha, c = self.attention(self.decoder.output(state), k, v, src_ok)
            state, g = self.decoder(torch.cat([y[:, t], c], dim=-1), state)  # [B, E + Dv] -> state
            s = self.decoder.output(state)  # s_t [B, H]
            o = torch.tanh(self.W_o(torch.cat([s, c], dim=-1)))  # [B, H + Dv] -> [B, H]
            steps.append({"q": q, "scores": scores, "alpha": alpha, "context": c, **g, "s": s, "out": o})
        if trace.record:
            for name in ("q", "scores", "alpha", "context", *GATES[self.cfg.cell], "s"):
                trace(f"rnn.dec.{name}", torch.stack([st[name] for st in steps], dim=1))  # [B, Tt, ...]
        return trace("rnn.dec.out", torch.stack([st["out"] for st in steps], dim=1))  # [B, Tt, H]

    def forward(self, src: Tensor, tgt_in: Tensor, trace: Trace = NO_TRACE) -> Tensor:
        """Teacher-forced pass: logits [B, Tt, V] for the next token at every target position."""
        o = self.decode(self.encode(src, trace), src, tgt_in, trace)  # [B, Tt, H]
        logits = trace("logits", self.generator(self.dropout(o)))
        if trace.record:
            trace("probs", torch.softmax(logits, dim=-1))  # [B, Tt, V]
        return logits


def traced(model: RNNSeq2Seq, src: Tensor, tgt_in: Tensor) -> Trace:
    """One recorded forward pass without gradients (the model must be in eval mode)."""
    if model.training:
        raise ValueError("traced() needs a model in eval mode: call model.eval() first")
    trace = Trace(Interventions())
    with torch.no_grad():
        model(src, tgt_in, trace)
    return trace


def tensor_names(cell: str = "gru") -> list[str]:
    """Every name a full forward pass records, in the order the model produces them."""
    gates = list(GATES[cell])
    return (
        ["rnn.src.tokens", "rnn.src.embed"]
        + [f"rnn.enc.{g}" for g in gates]
        + ["rnn.enc.h"]
        + ["rnn.attn.k", "rnn.attn.v", "rnn.dec.init", "rnn.tgt.tokens", "rnn.tgt.embed"]
        + [f"rnn.dec.{n}" for n in ("q", "scores", "alpha", "context", *gates, "s")]
        + ["rnn.dec.out", "logits", "probs"]
    )


def expected_tensors(cfg: RNNConfig) -> dict[str, tuple[int, ...]]:
    """Name -> shape of every tensor in ``RNNSeq2Seq(cfg).state_dict()``, computed without building the
    model (a checkpoint's header is checked against it before any tensor is read; a test compares)."""
    E, H, A, Vs, Vt = cfg.d_emb, cfg.hidden, cfg.d_attn, cfg.src_vocab, cfg.tgt_vocab
    G = 3 if cfg.cell == "gru" else 4  # gates stacked in W_x and W_h
    shapes: dict[str, tuple[int, ...]] = {"src_embed.weight": (Vs, E), "tgt_embed.weight": (Vt, E)}
    for cell, d_in in (("encoder", E), ("decoder", E + H)):
        shapes.update(
            {
                f"{cell}.W_x.weight": (G * H, d_in),
                f"{cell}.W_x.bias": (G * H,),
                f"{cell}.W_h.weight": (G * H, H),
                f"{cell}.W_h.bias": (G * H,),
            }
        )
    shapes.update(
        {
            "W_init.weight": (H, H),
            "W_init.bias": (H,),
            "attention.W_q.weight": (A, H),
            "attention.W_k.weight": (A, H),
            "W_o.weight": (H, 2 * H),
            "W_o.bias": (H,),
            "generator.weight": (Vt, H),
            "generator.bias": (Vt,),
        }
    )
    if cfg.attention == "additive":
        shapes.update({"attention.W_q.bias": (A,), "attention.v.weight": (1, A)})
    else:
        shapes["attention.W_v.weight"] = (H, H)
    return shapes
