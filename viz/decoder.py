"""Pure builders for the decoder page: masking step by step, cross-attention, and the results of the
padding demo and the no-mask model (run by explain/mask_experiments.py), as tensors and tables.

Everything here takes real tensors (a trace, an experiment's result) or the lecture notes' textbook
numbers and returns tensors, small dataclasses, strings or pandas DataFrames for the page to draw. It
never runs the model. No Streamlit.

Masks follow the model's convention (model/transformer.py): boolean True = may attend; the additive
form drawn in the lecture notes is 0 where allowed and -inf where masked, and
``masked = scaled + mask`` (the model uses masked_fill, which gives the very same numbers).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import pandas as pd
import torch
from torch import Tensor

from explain.recompute import MaskSteps, masked_row
from model.checkpoint import Bundle
from model.pipeline import label_word
from model.trace import Trace
from model.transformer import additive_mask
from viz.heatmap import count, shape_text

if TYPE_CHECKING:  # result types only: viz draws what model/ computed, it never runs the network
    from explain.mask_experiments import Cheating, PaddingDemo
    from model.pipeline import TeacherForced

# --- The lecture notes' 4 x 4 example (explain/recompute.py computes it) --------------------------------


def lecture_notice(ex: MaskSteps) -> str:
    """What row t=2 of the lecture notes' example shows, with the weights computed."""
    return (
        "row t=2 keeps 0.1 and 0.6 and hides the rest: softmax(0.1, 0.6) = "
        f"({float(ex.weights[1, 0]):.3f}, {float(ex.weights[1, 1]):.3f})."
    )


def step_shapes(trace: Trace, module: str) -> list[str]:
    """The recorded shapes of `module`'s scaled scores, mask, masked scores and weights, named dimension by
    dimension (the mask broadcasts: batch 1 and, for the padding mask, one query row)."""
    return [
        shape_text(trace[f"{module}.{n}"], "B|1, 1, t|1, t" if n == "mask" else "B, H, t, t")
        for n in ("scaled", "mask", "masked", "weights")
    ]


def above_diagonal(weights: Tensor) -> tuple[int, float]:
    """(how many weights strictly above the diagonal are > 0, their sum): the attention paid to the future."""
    upper = torch.triu(weights, diagonal=1)
    return int((upper > 0).sum()), float(upper.sum())


def row_sum_error(weights: Tensor) -> float:
    """Largest |row sum - 1| of a [Tq, Tk] weight matrix (0 up to rounding: every row is a distribution)."""
    return float((weights.sum(-1) - 1).abs().max())


def renormalisation(scaled_row: Tensor, mask_row: Tensor, labels: list[str]) -> pd.DataFrame:
    """One query's row as a table: softmax over every key vs softmax over the allowed keys only
    (`explain.recompute.masked_row`)."""
    r = masked_row(scaled_row, mask_row)
    return pd.DataFrame(
        {
            "key": labels,
            "scaled score": scaled_row.tolist(),
            "mask": ["0" if a else "-inf" for a in r.allowed.tolist()],
            "softmax over all keys": r.full.tolist(),
            "÷ share of allowed keys": r.renormalised.tolist(),
            "masked softmax (the weights)": r.masked.tolist(),
        }
    ).round(6)


# --- The decoder block, as traced ----------------------------------------------------------------

BLOCK = (
    ("input", "tgt.input", "layer 0: target embeddings + positions; then the layer below"),
    ("masked self-attention", "{p}.self_attn.out", "each target position reads itself and earlier positions"),
    ("add & norm", "{p}.add_norm1.out", "LayerNorm(x + self-attention(x))"),
    ("encoder-decoder attention", "{p}.cross_attn.out", "queries from the decoder, keys and values from enc.out"),
    ("add & norm", "{p}.add_norm2.out", "LayerNorm(x + cross-attention(x, enc.out))"),
    ("feed-forward", "{p}.ffn.out", "max(0, x W_1 + b_1) W_2 + b_2 at every position"),
    ("add & norm", "{p}.add_norm3.out", "LayerNorm(x + FFN(x)): the block's output"),
)


def block_dot(n_layers: int) -> str:
    """Graphviz DOT of one decoder block (bottom to top), with the encoder output feeding keys and values."""
    return f"""digraph {{ rankdir=BT; node [shape=box, style="rounded,filled", fontname="Helvetica"];
        x [label="target so far (shifted right)\\nembedding + positions", fillcolor="#f0f0f0"];
        enc [label="encoder output\\n(enc.out)", fillcolor="#deebf7"];
        sa [label="masked multi-head\\nself-attention", fillcolor="#fdd0a2"];
        n1 [label="add & norm", fillcolor="#ffffff"];
        ca [label="encoder-decoder\\nattention", fillcolor="#c6dbef"];
        n2 [label="add & norm", fillcolor="#ffffff"];
        ff [label="feed-forward", fillcolor="#c7e9c0"];
        n3 [label="add & norm", fillcolor="#ffffff"];
        out [label="× {n_layers} blocks (paper: 6)\\nthen linear + softmax", fillcolor="#f0f0f0"];
        x -> sa -> n1; n1 -> ca [label=" Q"]; ca -> n2 -> ff -> n3 -> out; enc -> ca [label=" K, V"];
        x -> n1 [style=dashed]; n1 -> n2 [style=dashed]; n2 -> n3 [style=dashed]; }}"""


def block_table(trace: Trace, layer: int) -> pd.DataFrame:
    """The sub-layers of decoder block `layer` with their traced tensor names and real shapes."""
    p = f"dec.{layer}"
    rows = []
    for step, name, what in BLOCK:
        if name == "tgt.input" and layer > 0:
            name = f"dec.{layer - 1}.add_norm3.out"
        name = name.format(p=p)
        rows.append({"step": step, "tensor": name, "shape": str(list(trace[name].shape)), "what it is": what})
    rows.append(
        {
            "step": "memory (used by every block)",
            "tensor": "enc.out",
            "shape": str(list(trace["enc.out"].shape)),
            "what it is": "the encoder's output: cross-attention's keys and values",
        }
    )
    return pd.DataFrame(rows)


def projection_biases(model) -> bool:
    """True when every attention projection (W_q, W_k, W_v, W_o of every attention module) has a bias vector."""
    attn = [m for m in model.modules() if all(hasattr(m, w) for w in ("W_q", "W_k", "W_v", "W_o"))]
    return bool(attn) and all(getattr(m, w).bias is not None for m in attn for w in ("W_q", "W_k", "W_v", "W_o"))


WHO_LOOKS_WHERE = pd.DataFrame(
    {
        "attention": ["encoder self-attention", "decoder (masked) self-attention", "encoder-decoder attention"],
        "who is looking (queries)": [
            "every source token",
            "the target token at each time step",
            "each decoder (current) state",
        ],
        "at what (keys and values)": [
            "all source tokens, each other and themselves",
            "previous target tokens and itself, never later ones",
            "all the encoder states (the whole source sentence)",
        ],
        "mask": ["padding mask", "look-ahead mask (+ padding mask)", "padding mask of the source"],
        "weights shape": ["source × source", "target × target", "target × source"],
    }
)


# --- Encoder-decoder attention -------------------------------------------------------------------


def cross_attention(trace: Trace, layer: int, head: int | None = None, skip: int | None = None) -> Tensor:
    """[Tt, Ts] weights of decoder layer `layer`'s encoder-decoder attention; head=None: average of the heads (but
    head `skip`: a class's mystery head, hidden until its teacher reveals it)."""
    w = trace[f"dec.{layer}.cross_attn.weights"][0]  # [H, Tt, Ts]
    if head is not None:
        return w[head]
    return w[[h for h in range(w.shape[0]) if h != skip]].mean(0)


def head_weights(trace: Trace, module: str, head: int) -> Tensor:
    """[Tq, Tk] weights of one head of `module` (e.g. "dec.0.self_attn") for sentence 0."""
    return trace[f"{module}.weights"][0, head]


def head_average(trace: Trace, module: str) -> Tensor:
    """[Tq, Tk] mean of the heads' weights of `module` for sentence 0."""
    return trace[f"{module}.weights"][0].mean(0)


# --- Padding -------------------------------------------------------------------------------------


def batch_table(demo: PaddingDemo) -> pd.DataFrame:
    """The padded batch as words: one row per sentence, one column per position."""
    T = demo.src.size(1)
    rows = {
        f"sentence {i + 1}" + (" (shorter)" if i == demo.short else ""): [label_word(lab) for lab in labels]
        for i, labels in enumerate(demo.labels)
    }
    return pd.DataFrame.from_dict(rows, orient="index", columns=[f"pos {t}" for t in range(T)])


def mask_grid(demo: PaddingDemo) -> Tensor:
    """[B, T] additive padding mask (0 = may attend, -inf = <pad> key hidden) of the batch."""
    return additive_mask(demo.mask)[:, 0, 0, :]


def grid_labels(demo: PaddingDemo) -> tuple[list[str], list[str]]:
    """(x labels: "pos t" per key position, y labels: "sentence i" per row) of the mask grid."""
    return [f"pos {t}" for t in range(demo.src.size(1))], [f"sentence {i + 1}" for i in range(demo.src.size(0))]


def padding_weights(demo: PaddingDemo, layer: int, head: int, on: bool) -> Tensor:
    """[T, T] encoder self-attention of the shorter sentence, one layer and head, padding mask on or off."""
    return (demo.weights_on if on else demo.weights_off)[layer, head]


def max_pad_weight(demo: PaddingDemo, layer: int, head: int, on: bool) -> float:
    """The most weight any real token of the shorter sentence gives to <pad> keys (one layer and head)."""
    return float(demo.pad_weight(on)[layer, head].max())


# --- The model trained without the look-ahead mask ---------------------------------------------


def accuracy(tf: TeacherForced) -> float:
    """Share of positions whose most probable token is the reference's next token."""
    return sum(p == g for p, g in zip(tf.predicted, tf.gold, strict=True)) / len(tf.gold)


def mean_gold_prob(tf: TeacherForced) -> float:
    return sum(tf.gold_probs) / len(tf.gold_probs)


def teacher_forcing_table(story: Cheating) -> pd.DataFrame:
    """Accuracy and mean p(next reference word) of both models, teacher-forced with the reference."""
    return pd.DataFrame(
        {
            "": ["no-mask model", "base model"],
            "accuracy (argmax = next reference word)": [
                f"{accuracy(story.cheat_tf):.0%}",
                f"{accuracy(story.base_tf):.0%}",
            ],
            "mean p(next reference word)": [
                f"{mean_gold_prob(story.cheat_tf):.3f}",
                f"{mean_gold_prob(story.base_tf):.3f}",
            ],
        }
    )


def generation_table(story: Cheating) -> pd.DataFrame:
    """What both models say when generating greedily, next to the reference."""
    return pd.DataFrame(
        {
            "": ["no-mask model", "base model", "reference"],
            "translation": [
                story.cheat.translation or "(empty)",
                story.base.translation or "(empty)",
                story.reference or "(empty)",
            ],
        }
    )


def next_weight(weights: Tensor) -> Tensor:
    """[T-1] weight that row t of a [T, T] self-attention matrix gives to key t+1 (the token to predict)."""
    return weights.diagonal(offset=1)


def peek_scores(trace: Trace, n_layers: int) -> pd.DataFrame:
    """Mean weight on position t+1 per decoder self-attention head (rows: layer, columns: head)."""
    rows = {}
    for layer in range(n_layers):
        w = trace[f"dec.{layer}.self_attn.weights"][0]  # [H, T, T]
        rows[f"layer {layer}"] = [
            float(next_weight(w[h]).mean()) if w.size(-1) > 1 else math.nan for h in range(w.size(0))
        ]
    n_heads = len(next(iter(rows.values())))
    return pd.DataFrame.from_dict(rows, orient="index", columns=[f"head {h}" for h in range(n_heads)])


def best_peek_head(trace: Trace, n_layers: int) -> tuple[int, int]:
    """(layer, head) of the decoder self-attention head that looks at t+1 most."""
    df = peek_scores(trace, n_layers).fillna(-1.0)
    flat = df.to_numpy().argmax()
    return int(flat // df.shape[1]), int(flat % df.shape[1])


def cheat_table(tf: TeacherForced, itos: list[str], weights: Tensor) -> pd.DataFrame:
    """Per position: input, the token it must predict, p(it), argmax, where attention peaks, weight on t+1."""
    labels = tf.in_labels
    T = len(labels)
    nxt = next_weight(weights).tolist() + [math.nan]
    peak = weights.argmax(-1).tolist()
    return pd.DataFrame(
        {
            "position (input)": labels,
            "must predict": [itos[g] for g in tf.gold],
            "p(correct next token)": list(tf.gold_probs),
            "model's argmax": [itos[p] for p in tf.predicted],
            "right?": ["✓" if p == g else "✗" for p, g in zip(tf.predicted, tf.gold, strict=True)],
            "attention peak (key)": [labels[j] for j in peak],
            "weight on position t+1": nxt[:T],
        }
    ).round(4)


def peek_share(weights: Tensor) -> float:
    """Share of rows t (t < T-1) whose largest weight is on key t+1."""
    T = weights.size(-1)
    if T < 2:
        return math.nan
    peak = weights.argmax(-1)[: T - 1]
    return float((peak == torch.arange(1, T)).float().mean())


def training_table(models: dict[str, Bundle]) -> pd.DataFrame:
    """The training figures of several checkpoints side by side, as text (shares in %, losses to 3 decimals)."""

    def show(key: str, v) -> str:
        if v is None:
            return "—"
        if isinstance(v, bool) or isinstance(v, int):
            return "on" if v is True else "off" if v is False else str(v)
        if "exact match" in key:
            return f"{v:.1%}"
        return f"{v:.1f}" if "BLEU" in key else f"{v:.3f}"

    figures = {name: training_figures(b) for name, b in models.items()}
    keys = list(next(iter(figures.values())))
    return pd.DataFrame({"": keys, **{name: [show(k, f[k]) for k in keys] for name, f in figures.items()}})


def training_figures(bundle: Bundle) -> dict:
    """Final training loss and held-out figures stored in a checkpoint's JSON (missing ones are None)."""
    m = bundle.meta.get("metrics", {}) or {}
    t = bundle.meta.get("training", {}) or {}
    return {
        "look-ahead mask in training": t.get("look_ahead_mask"),
        "steps": t.get("steps_done", t.get("steps")),
        "final train loss (label-smoothed)": m.get("final_train_loss"),
        "final train cross-entropy": m.get("final_train_cross_entropy"),
        "held-out cross-entropy (teacher-forced)": m.get("heldout_cross_entropy"),
        "held-out exact match (greedy)": m.get("exact_match"),
        "held-out BLEU (greedy)": m.get("bleu"),
    }


# --- What to look at: one computed sentence per figure ------------------------------------------


def block_notice(trace: Trace, layer: int) -> str:
    """Decoder block `layer` keeps the shape of its input; only enc.out has the source's length."""
    first = "tgt.input" if layer == 0 else f"dec.{layer - 1}.add_norm3.out"
    shape_in, shape_out = list(trace[first].shape), list(trace[f"dec.{layer}.add_norm3.out"].shape)
    mem = list(trace["enc.out"].shape)
    same = "the same shape" if shape_in == shape_out else f"shape {shape_out}"
    return (
        f"the block takes {shape_in} and gives back {same}: it changes the numbers, not the shape. "
        f"Only enc.out {mem} has the source's length ({mem[1]}), and it enters through keys and values."
    )


def masked_notice(weights: Tensor, labels: list[str]) -> str:
    """A decoder self-attention head's [T, T] weights: what the first row, the diagonal and the future get."""
    T = weights.size(0)
    n_up, s_up = above_diagonal(weights)
    cells = T * (T - 1) // 2
    if n_up == 0:
        future = f"the {cells} cells above the diagonal (the future) are exactly 0"
    else:
        future = (
            f"{n_up} of the {cells} cells above the diagonal are > 0 (sum {s_up:.3f}): "
            "the mask is off and positions read words that come later"
        )
    if T < 2:
        return f"row {label_word(labels[0])} can only look at itself (weight {float(weights[0, 0]):.3f}); {future}."
    peak = weights.argmax(-1)
    on_diag = sum(int(peak[t]) == t for t in range(1, T))
    before = sum(int(peak[t]) == t - 1 for t in range(1, T))
    later = sum(int(peak[t]) > t for t in range(1, T))
    low = torch.tril(weights, diagonal=-1)
    i, j = divmod(int(low.argmax()), T)
    earlier = T - 1 - on_diag - later
    return (
        f"row {label_word(labels[0])} has only itself to look at (weight {float(weights[0, 0]):.3f}); "
        f"of the other {T - 1} rows, {on_diag} put their largest weight on their own position and "
        f"{earlier} on an earlier word ({before} on the word just before"
        + (f"; {later} on a later word" if later else "")
        + f"; the strongest: {label_word(labels[i])} → "
        f"{label_word(labels[j])} {float(weights[i, j]):.3f}); {future}."
    )


def renorm_notice(scaled_row: Tensor, mask_row: Tensor, label: str) -> str:
    """One query row: the share the allowed keys had in the plain softmax, handed back by the masked one."""
    r = masked_row(scaled_row, mask_row)
    share, n = r.share, r.n_allowed
    return (
        f"over all keys, the {count(n, 'allowed key')} of row “{label_word(label)}” would get {share:.3f} of the "
        f"weight; the masked softmax divides them by {share:.3f}, so they get all of it (1.000)."
    )


def future_notice(w_on: Tensor, w_off: Tensor, labels_off: list[str]) -> str:
    """The same head with the look-ahead mask on and off: how much weight the future gets in each."""
    n_on, s_on = above_diagonal(w_on)
    n_off, s_off = above_diagonal(w_off)
    if n_off == 0:
        return f"even with the mask off this head gives the future nothing (mask on: {n_on} cells > 0)."
    upper = torch.triu(w_off, diagonal=1).sum(-1)  # [T]: weight each row gives to later positions
    r = int(upper.argmax())
    return (
        f"with the mask on, the future gets {s_on:.3f} in total ({n_on} cells > 0); with it off, "
        f"{n_off} cells > 0 get {s_off:.3f}, most in row {label_word(labels_off[r])}, which gives "
        f"{float(upper[r]):.3f} of its weight to later words."
    )


def peek_notice(weights: Tensor, labels: list[str]) -> str:
    """A no-mask head, teacher-forced: how often and how strongly row t looks at t + 1, the word to predict.

    Rule: "this head reads it" only when at least half of the rows put their largest weight on t + 1."""
    T = weights.size(0)
    if T < 2:
        return "one position only: there is no next word to peek at."
    nxt = next_weight(weights)
    hits = int((weights.argmax(-1)[: T - 1] == torch.arange(1, T)).sum())
    t = int(nxt.argmax())
    verdict = (
        "The answer is in the input, and this head reads it."
        if 2 * hits >= T - 1
        else "The answer is in the input; this head reads it in only some rows."
    )
    return (
        f"in {hits} of {T - 1} rows the largest weight sits on position t + 1, the very word that "
        f"position must predict (strongest: row {label_word(labels[t])} → {label_word(labels[t + 1])} "
        f"{float(nxt[t]):.3f}). {verdict}"
    )


def padding_notice(demo: PaddingDemo, layer: int, head: int) -> str:
    """The shorter sentence's encoder self-attention with the padding mask on and off."""
    if demo.n_pad == 0:
        return "both sentences have the same length here: there is no <pad> to hide."
    on, off = demo.pad_weight(True)[layer, head], demo.pad_weight(False)[layer, head]  # [n_real]
    worst = int(off.argmax())
    word = label_word(demo.labels[demo.short][worst])
    return (
        f"with the mask on, the {count(demo.n_pad, '<pad> column')} get exactly {float(on.max()):.3f}; with it "
        f"off, “{word}” gives {float(off[worst]):.3f} of its weight to <pad>, and the encoding moves by up to "
        f"{demo.out_change(False):.2e} (mask on: {demo.out_change(True):.1e})."
    )


def mask_grid_notice(demo: PaddingDemo) -> str:
    """Which keys of the batch the padding mask hides."""
    if demo.n_pad == 0:
        return "both sentences have the same length here: the mask hides nothing."
    keys = "key is" if demo.n_pad == 1 else f"{demo.n_pad} keys are"
    return (
        f"sentence {demo.short + 1} has {demo.n_real} real tokens and {demo.n_pad} <pad>: its last {keys} −inf for "
        "every query; the longer sentence has no −inf at all."
    )


# --- Encoder-decoder attention: who reads which source word --------------------------------------


def alignment(weights: Tensor, src_labels: list[str], in_labels: list[str], next_labels: list[str]) -> pd.DataFrame:
    """One row per decoder position of a [Tt, Ts] cross-attention matrix: its input word, the word it predicts,
    the source word it reads most and with what weight, and its weight on the source's <eos>."""
    top = weights.max(-1)
    return pd.DataFrame(
        {
            "position (input word)": in_labels,
            "predicts": [label_word(n) for n in next_labels],
            "reads most (source word)": [label_word(src_labels[j]) for j in top.indices.tolist()],
            "its weight": top.values.tolist(),
            "weight on <eos>": weights[:, -1].tolist(),
        }
    ).round(3)


def cross_notice(weights: Tensor, src_labels: list[str], in_labels: list[str], next_labels: list[str]) -> str:
    """Which source word each target row reads most, and what the row that predicts <eos> reads. Rule: "parks"
    only for rows whose largest weight is on the source's <eos>; no causal wording (a weight shows where a row
    reads, not why).

    The source ends with <eos> (its last column); the decoder's last row predicts the target's <eos>.
    """
    top = weights.max(-1)
    rows = [
        f"“{label_word(i)}” (writes “{label_word(n)}”) reads “{label_word(src_labels[j])}” {v:.2f}"
        for i, n, j, v in zip(in_labels, next_labels, top.indices.tolist(), top.values.tolist(), strict=True)
    ]
    last, eos, end = label_word(in_labels[-1]), float(weights[-1, -1]), weights.size(1) - 1
    others = int((top.indices[:-1] == end).sum())
    if int(top.indices[-1]) == end:
        why = (
            f"The last row ({last}) must write <eos>, and it reads the source's <eos> most ({eos:.2f}): a weight "
            "shows where a row reads, not why it writes what it writes."
        )
    else:
        why = f"The last row ({last}) must write <eos>; it gives the source's <eos> {eos:.2f}."
    if others:
        why += (
            f" {others} other {'row also reads' if others == 1 else 'rows also read'} <eos> most: a head with "
            "nothing particular to fetch often parks its weight on <eos>."
        )
    sharp = int((top.values >= 0.5).sum())
    return (
        f"{sharp} of {len(rows)} rows put at least half their weight on one source word (the dark cells). Row by "
        "row (the source word each position reads most, and its weight): " + " · ".join(rows) + f". {why}"
    )
