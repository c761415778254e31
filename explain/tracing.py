"""Causal tracing on a minimal pair: where the model carries the difference between two sentences.

Two sentences of the same length that differ in a word (the coreference pair "… too tired" / "… too wide")
make the model write different words (il / elle). Both run teacher-forced on the *clean* sentence's
translation up to the word followed, so the decoder sees the same French prefix in both; the word's
probability is p_clean in the clean run and p_corrupt in the corrupted one. Then, one run per cell, one
activation of the clean run is put into the corrupted run (activation patching: Meng et al. 2022, "Locating
and Editing Factual Associations in GPT"; Vig et al. 2020, causal mediation analysis) and the word's
probability read again. The share of the difference that comes back,

    restored = (p_patched - p_corrupt) / (p_clean - p_corrupt)        1: all of it, 0: none,

is measured for every (layer, position) of the encoder's residual stream, every encoder-decoder head's output z
at every decoder position (and each layer's heads together), and the decoder's residual stream. The mask view
runs the clean sentence with one source position hidden from one attention layer (its weight set to 0 in
every row of every head, each row renormalised: what a mask does) and reads the share lost,

    lost = (p_clean - p_hidden) / (p_clean - p_corrupt).

A picked head is traced part by part: its q, its attention row and its z at each query position, its k and v
at each key position. Every run is the model's own forward pass with `Interventions.patches` or
`weight_edits` (model/trace.py); the runs go through the model many to a batch.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from model.checkpoint import Bundle
from model.decoding import greedy_decode
from model.pipeline import Prepared, prepare, token_labels
from model.trace import Interventions, Patch, Trace, WeightEdit
from model.transformer import Config, traced
from model.vocab import BOS, BOS_ID

HALF = 0.5  # a part "carries" the difference when restoring it alone brings back at least half of it;
#             hiding a word from a layer "is needed" when it loses at least half
MIN_GAP = 0.1  # the word's probability must differ by at least this much between the runs to be traced
MAX_TOKENS = 24  # longest sentence traced (the runs grow with the square of the length)
CHUNK = 128  # runs per forward pass (64 and 256 were slower, measured)


class NotAPair(ValueError):
    """Two sentences that cannot be traced against each other; the message says why, for the reader."""


@dataclass(frozen=True)
class Grid:
    """One picture of the tracing: a share (restored, or lost) for each (row, position) run."""

    title: str
    rows: tuple[str, ...]  # what was patched or hidden, one per row
    columns: tuple[str, ...]  # positions, "3 cross"
    share: tuple[tuple[float, ...], ...]  # [row][column]
    prob: tuple[tuple[float, ...], ...]  # [row][column]: the word's probability in that run
    lost: bool = False  # False: share restored by a patch; True: share lost by hiding


@dataclass(frozen=True)
class Pair:
    """The two sentences, their translations and the word followed."""

    clean: Prepared
    corrupt: Prepared
    clean_out: tuple[int, ...]  # greedy translation ids (no BOS / EOS)
    clean_words: tuple[str, ...]
    corrupt_words: tuple[str, ...]
    position: int  # the decoder position that writes the word (it reads clean_words[position - 1])
    word: str
    word_id: int
    differs: tuple[int, ...]  # source positions where the two sentences differ
    p_clean: float
    p_corrupt: float
    interventions: Interventions  # the switches both runs share

    @property
    def gap(self) -> float:
        return self.p_clean - self.p_corrupt

    @property
    def traceable(self) -> bool:
        return abs(self.gap) >= MIN_GAP

    @property
    def src_labels(self) -> list[str]:
        return self.clean.labels

    @property
    def tgt_labels(self) -> list[str]:
        """The decoder's inputs up to the followed position: "0 <bos>", "1 l'", ..."""
        return token_labels([BOS, *self.clean_words[: self.position]])

    def tgt_in(self) -> torch.Tensor:
        return torch.tensor([[BOS_ID, *self.clean_out[: self.position]]])  # [1, t + 1]


@dataclass(frozen=True)
class Tracing:
    pair: Pair
    encoder: Grid  # encoder residual stream: layers x source positions
    heads: Grid  # encoder-decoder heads' z (and each layer's heads together): heads x decoder positions
    decoder: Grid  # decoder residual stream: sublayers x decoder positions
    mask: Grid  # a source position hidden from one attention layer: layers x source positions


@dataclass(frozen=True)
class HeadTracing:
    module: str  # "dec.1.cross_attn"
    head: int
    off: bool  # switched off in both runs (its z is 0 whatever is patched)
    query: Grid  # q, attention row, z at each query position
    key: Grid  # k, v at each key position


def first_difference(a: tuple[str, ...], b: tuple[str, ...]) -> int | None:
    """The first position where two translations differ (None when they are the same)."""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def pair(
    bundle: Bundle, clean_text: str, corrupt_text: str, position: int | None = None, iv: Interventions | None = None
) -> Pair:
    """Both sentences translated (greedy) and run teacher-forced on the clean translation up to `position` (by
    default the first output word where the translations differ). Raises `NotAPair` with the reason."""
    iv = replace(iv or Interventions(), patches=(), weight_edits=())
    clean, corrupt = prepare(bundle, clean_text), prepare(bundle, corrupt_text)
    if clean.empty or corrupt.empty:
        raise NotAPair("Type two sentences to compare.")
    if len(clean.tokens) != len(corrupt.tokens):
        raise NotAPair(
            f"The two sentences need the same number of words, so that each position has a partner: "
            f"the first has {len(clean.tokens)}, the second {len(corrupt.tokens)}."
        )
    if len(clean.tokens) > MAX_TOKENS:
        raise NotAPair(f"Tracing takes sentences of up to {MAX_TOKENS} words (these have {len(clean.tokens)}).")
    differs = tuple(i for i, (x, y) in enumerate(zip(clean.ids, corrupt.ids, strict=True)) if x != y)
    if not differs:
        raise NotAPair(
            "The two sentences are the same to the model (unknown words all read as <unk>): change a "
            "word the model knows."
        )
    model = bundle.model
    g_clean, g_corrupt = greedy_decode(model, clean.src(), iv), greedy_decode(model, corrupt.src(), iv)
    words = tuple(bundle.tgt_vocab.decode(g_clean.tokens))
    other = tuple(bundle.tgt_vocab.decode(g_corrupt.tokens))
    if not words:
        raise NotAPair("The model writes nothing for the first sentence: there is no word to follow.")
    out = tuple(g_clean.tokens)
    first = Pair(clean, corrupt, out, words, other, 0, words[0], out[0], differs, 0.0, 0.0, iv)
    default = first_difference(words, other) or 0  # (the same translations: the first word)
    return at_position(bundle, first, default if position is None else position)


def at_position(bundle: Bundle, p: Pair, position: int) -> Pair:
    """The same pair (translations kept) following another word of the first translation: both runs teacher-forced
    up to it, its probability read in each (two traced passes)."""
    t = max(0, min(position, len(p.clean_words) - 1))
    moved = replace(p, position=t, word=p.clean_words[t], word_id=p.clean_out[t])
    probs = [
        float(traced(bundle.model, x.src(), moved.tgt_in(), p.interventions)["probs"][0, t, moved.word_id])
        for x in (p.clean, p.corrupt)
    ]
    return replace(moved, p_clean=probs[0], p_corrupt=probs[1])


# --- the runs ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Run:
    clean: bool  # which sentence the run reads
    patches: tuple[Patch, ...] = ()  # at batch row 0; moved to the run's row in its batch
    edits: tuple[WeightEdit, ...] = ()

    @property
    def encoder(self) -> bool:
        """Does the run change anything in the encoder (else it reuses the sentence's encoder output)?"""
        return any(x.name.startswith(("src.", "enc.")) for x in self.patches) or any(
            e.module.startswith("enc.") for e in self.edits
        )


def word_probs(bundle: Bundle, p: Pair, runs: list[_Run]) -> list[float]:
    """The followed word's probability in each run, up to CHUNK runs to a forward pass. A run that changes
    nothing in the encoder runs only the decoder, on its sentence's encoder output (computed once)."""
    model, iv, t = bundle.model, p.interventions, p.position
    srcs = {True: p.clean.src(), False: p.corrupt.src()}
    out = [0.0] * len(runs)
    with torch.no_grad():
        memory = {clean: model.encode(src, Trace(iv)) for clean, src in srcs.items()}  # [1, Ts, D]
        for clean in (True, False):
            for encoder in (True, False):
                todo = [i for i, r in enumerate(runs) if r.clean == clean and r.encoder == encoder]
                for start in range(0, len(todo), CHUNK):
                    chunk = todo[start : start + CHUNK]
                    n = len(chunk)
                    trace = Trace(
                        replace(
                            iv,
                            patches=tuple(
                                Patch(x.name, (b, *x.at[1:]), x.values)
                                for b, i in enumerate(chunk)
                                for x in runs[i].patches
                            ),
                            weight_edits=tuple(
                                WeightEdit(e.module, (b, *e.at[1:]), e.value)
                                for b, i in enumerate(chunk)
                                for e in runs[i].edits
                            ),
                        ),
                        record=False,
                    )
                    src = srcs[clean].expand(n, -1)  # [n, Ts]
                    mem = model.encode(src, trace) if encoder else memory[clean].expand(n, -1, -1)
                    hidden = model.decode(mem, src, p.tgt_in().expand(n, -1), trace)[:, t]  # [n, D]
                    probs = torch.softmax(model.generator(hidden), dim=-1)[:, p.word_id]  # [n]
                    for i, x in zip(chunk, probs.tolist(), strict=True):
                        out[i] = x
    return out


def _grid(title: str, rows: list[str], columns: list[str], probs: list[float], p: Pair, lost: bool = False) -> Grid:
    n = len(columns)
    prob = tuple(tuple(probs[r * n : (r + 1) * n]) for r in range(len(rows)))
    gap = p.gap if p.traceable else float("nan")
    share = tuple(tuple(((p.p_clean - x) if lost else (x - p.p_corrupt)) / gap for x in row) for row in prob)
    return Grid(title, tuple(rows), tuple(columns), share, prob, lost)


def stream(cfg: Config, stack: str, layer: int, sublayer: int) -> str:
    """The residual stream after a sublayer: add & norm's output (post-LN), or the sum itself (pre-LN)."""
    return f"{stack}.{layer}.add_norm{sublayer}.{'resid' if cfg.norm_first else 'out'}"


def _stream_rows(cfg: Config, stack: str) -> list[tuple[str, str]]:
    """(trace name, row label) of a stack's residual stream, bottom to top."""
    parts = ("self-attn", "FFN") if stack == "enc" else ("self-attn", "enc-dec attn", "FFN")
    layers = cfg.n_enc_layers if stack == "enc" else cfg.n_dec_layers
    first = [("src.input", "input (embedding + PE)")] if stack == "enc" else []
    return first + [
        (stream(cfg, stack, i, k + 1), f"layer {i} after {part}") for i in range(layers) for k, part in enumerate(parts)
    ]


def attention_layers(cfg: Config) -> list[tuple[str, str]]:
    """(module, row label) of every attention layer that reads the source positions."""
    return [(f"enc.{i}.self_attn", f"encoder layer {i} self-attn") for i in range(cfg.n_enc_layers)] + [
        (f"dec.{i}.cross_attn", f"decoder layer {i} enc-dec attn") for i in range(cfg.n_dec_layers)
    ]


def hide(cfg: Config, p: Pair, modules: list[str], key: int) -> tuple[WeightEdit, ...]:
    """Source position `key` hidden from `modules`: its weight 0 in every row of every head."""
    rows = {"enc": len(p.clean.ids), "dec": p.position + 1}
    return tuple(
        WeightEdit(m, (0, h, q, key), 0.0) for m in modules for h in range(cfg.n_heads) for q in range(rows[m[:3]])
    )


def trace_pair(bundle: Bundle, p: Pair, every_position: bool = True) -> Tracing:
    """Every grid of the tracing view for the pair `p` (one batch of runs per CHUNK). With `every_position` False
    the decoder's grids keep one column, the followed position (the encoder's and the mask's keep every source
    position): what a summary needs, in about half the runs."""
    cfg = bundle.config
    assert isinstance(cfg, Config), "tracing follows the Transformer's layers and heads"
    clean = traced(bundle.model, p.clean.src(), p.tgt_in(), p.interventions)
    Ts, H = len(p.clean.ids), cfg.n_heads
    cols = list(range(p.position + 1)) if every_position else [p.position]
    Tt = len(cols)
    enc_rows, dec_rows = _stream_rows(cfg, "enc"), _stream_rows(cfg, "dec")
    runs: list[_Run] = []
    runs += [_Run(False, (Patch.take(clean, name, (0, s)),)) for name, _ in enc_rows for s in range(Ts)]
    head_rows = []
    for i in range(cfg.n_dec_layers):
        z = f"dec.{i}.cross_attn.z"
        for h in [*range(H), None]:
            head_rows.append(f"layer {i} head {h}" if h is not None else f"layer {i} all heads")
            runs += [
                _Run(False, tuple(Patch.take(clean, z, (0, g, q)) for g in ([h] if h is not None else range(H))))
                for q in cols
            ]
    runs += [_Run(False, (Patch.take(clean, name, (0, q)),)) for name, _ in dec_rows for q in cols]
    layers = attention_layers(cfg)
    hides = [[m] for m, _ in layers] + [[m for m, _ in layers]]
    runs += [_Run(True, edits=hide(cfg, p, modules, s)) for modules in hides for s in range(Ts)]
    probs = word_probs(bundle, p, runs)
    src, tgt = p.src_labels, [p.tgt_labels[q] for q in cols]
    part, start = [], 0
    for n in (len(enc_rows) * Ts, len(head_rows) * Tt, len(dec_rows) * Tt, len(hides) * Ts):
        part.append(probs[start : start + n])
        start += n
    return Tracing(
        p,
        _grid("encoder residual stream", [lab for _, lab in enc_rows], src, part[0], p),
        _grid("encoder-decoder heads (z)", head_rows, tgt, part[1], p),
        _grid("decoder residual stream", [lab for _, lab in dec_rows], tgt, part[2], p),
        _grid(
            "a source word hidden from a layer",
            [lab for _, lab in layers] + ["every layer"],
            src,
            part[3],
            p,
            lost=True,
        ),
    )


def trace_head(bundle: Bundle, p: Pair, module: str, head: int) -> HeadTracing:
    """One head of `module`, part by part: q, attention row and z per query position; k and v per key position."""
    clean = traced(bundle.model, p.clean.src(), p.tgt_in(), p.interventions)
    stack, kind = module.split(".")[0], module.split(".")[-1]
    n_q = len(p.clean.ids) if stack == "enc" else p.position + 1
    n_k = len(p.clean.ids) if stack == "enc" or kind == "cross_attn" else p.position + 1
    q_parts = (("q", "query q"), ("weights", "attention row"), ("z", "output z"))
    k_parts = (("k", "key k"), ("v", "value v"))
    runs = [
        _Run(False, (Patch.take(clean, f"{module}.{part}", (0, head, i)),)) for part, _ in q_parts for i in range(n_q)
    ]
    runs += [
        _Run(False, (Patch.take(clean, f"{module}.{part}", (0, head, j)),)) for part, _ in k_parts for j in range(n_k)
    ]
    probs = word_probs(bundle, p, runs)
    labels = {"enc": p.src_labels, "dec": p.tgt_labels}
    q_labels = labels[stack]
    k_labels = p.src_labels if stack == "enc" or kind == "cross_attn" else p.tgt_labels
    split = len(q_parts) * n_q
    return HeadTracing(
        module,
        head,
        (module, head) in p.interventions.heads_off,
        _grid(f"{module} head {head}, per query position", [lab for _, lab in q_parts], q_labels, probs[:split], p),
        _grid(f"{module} head {head}, per key position", [lab for _, lab in k_parts], k_labels, probs[split:], p),
    )
