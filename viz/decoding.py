"""Pure helpers for the output page: final linear + softmax, one-hot and cross-entropy, label smoothing,
greedy decoding and beam search, step by step. No Streamlit.

Every function takes real tensors of the model (a trace's logits / probs, a decoding record) or the
lecture notes' clearly labelled textbook example, and returns numbers, DataFrames or plotly figures.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pandas as pd
import plotly.graph_objects as go
from torch import Tensor

from explain.recompute import DROPOUT_PASSES, Smoothing, logit_gradient, smoothed_target
from model.decoding import BeamResult, Greedy, GreedyStep, Hypothesis, length_penalty
from model.trace import Trace
from model.vocab import BOS, BOS_ID, EOS_ID, detokenize
from viz.heatmap import count

if TYPE_CHECKING:  # result types only: viz draws what model/ computed, it never runs the network
    from model.pipeline import TeacherForced
    from model.transformer import Transformer

# --- Final linear + softmax ----------------------------------------------------------------------


@dataclass(frozen=True)
class PositionOutput:
    """What the generator makes of one decoder position (sentence 0 of a trace)."""

    h: Tensor  # [D] the decoder's output dec.out at this position
    logits: Tensor  # [V]
    probs: Tensor  # [V]

    @property
    def best(self) -> int:
        """The argmax: the index of the most probable word."""
        return int(self.logits.argmax())


def position_output(trace: Trace, pos: int) -> PositionOutput:
    return PositionOutput(trace["dec.out"][0, pos], trace["logits"][0, pos], trace["probs"][0, pos])


def output_weight(model: Transformer) -> Tensor:
    """The final linear layer's weight as W in logits = h W + b: [D, V], one column per vocabulary word."""
    return model.generator.weight.T


def output_logits(trace: Trace) -> Tensor:
    """Sentence 0's logits, [T, V]."""
    return trace["logits"][0]


def output_probs(trace: Trace, pos: int | None = None) -> Tensor:
    """Sentence 0's output distributions: [T, V], or [V] at position `pos`."""
    probs = trace["probs"][0]
    return probs if pos is None else probs[pos]


def top_candidates(probs: Tensor, logits: Tensor, itos: list[str], k: int = 10) -> pd.DataFrame:
    """The k most probable next tokens at one position: rank, id, word, logit, probability."""
    p, ids = probs.topk(min(k, probs.numel()))
    return pd.DataFrame(
        {
            "rank": range(1, len(ids) + 1),
            "index": ids.tolist(),
            "word": [itos[i] for i in ids.tolist()],
            "logit": logits[ids].tolist(),
            "probability": p.tolist(),
        }
    )


def top_bar(df: pd.DataFrame, title: str | None = None, highlight: str | None = None) -> go.Figure:
    """Horizontal bars of a candidates table (columns word, probability), best on top."""
    colours = ["#e6550d" if w == highlight else "#31a354" for w in df["word"]]
    fig = go.Figure(
        go.Bar(
            x=df["probability"],
            y=[f"{w}  " for w in df["word"]],
            orientation="h",
            marker_color=colours,
            text=[f"{v:.3f}" for v in df["probability"]],
            textposition="outside",
            hovertemplate="%{y}: p = %{x:.6f}<extra></extra>",
        )
    )
    fig.update_layout(
        title=title,
        height=max(220, 40 + 26 * len(df)),
        margin={"l": 10, "r": 30, "t": 40 if title else 10, "b": 10},
        xaxis={"title": "probability", "range": [0, 1.12]},
        yaxis={"autorange": "reversed", "type": "category"},
    )
    return fig


def logits_figure(logits: Tensor, itos: list[str]) -> go.Figure:
    """Every one of the V logits at one position (x: vocabulary index), the argmax marked."""
    best = int(logits.argmax())
    fig = go.Figure(
        go.Bar(
            x=list(range(logits.numel())),
            y=logits.tolist(),
            marker_color="#9ecae1",
            customdata=itos,
            hovertemplate="index %{x}: %{customdata}<br>logit %{y:.4f}<extra></extra>",
        )
    )
    fig.add_trace(
        go.Scatter(
            x=[best],
            y=[float(logits[best])],
            mode="markers+text",
            text=[f"argmax {best}: {itos[best]}"],
            textposition="middle right",
            marker={"color": "#e6550d", "size": 10},
            name="argmax",
            hoverinfo="skip",
        )
    )
    fig.update_layout(
        height=260,
        showlegend=False,
        margin={"l": 10, "r": 10, "t": 24, "b": 10},
        xaxis={"title": f"vocabulary index (0 … {logits.numel() - 1})"},
        yaxis={"title": "logit"},
    )
    return fig


def choice_notice(out: PositionOutput, itos: list[str], in_label: str) -> str:
    """One decoder position: the word it chooses, its probability, and the runner-up."""
    p, ids = out.probs.topk(min(2, out.probs.numel()))
    word = in_label.split(" ", 1)[-1]
    first = f"position “{word}” chooses “{itos[int(ids[0])]}” with p = {float(p[0]):.4f}"
    if len(ids) < 2:
        return first + "."
    return (
        first + f"; the runner-up “{itos[int(ids[1])]}” gets {float(p[1]):.4f}, "
        f"{float(p[0]) / max(float(p[1]), 1e-300):,.0f} times less."
    )


def logits_notice(logits: Tensor, itos: list[str]) -> str:
    """The gap between the two largest logits, and the probability ratio the softmax turns it into."""
    v, ids = logits.topk(min(2, logits.numel()))
    if len(ids) < 2:
        return f"one word only: “{itos[int(ids[0])]}”."
    gap = float(v[0] - v[1])
    return (
        f"the largest logit (index {int(ids[0])}, “{itos[int(ids[0])]}”) is {gap:.2f} above the next "
        f"(“{itos[int(ids[1])]}”); the softmax turns a gap of {gap:.2f} into a probability ratio e^{gap:.2f} = "
        f"{math.exp(min(gap, 700)):,.1f}. Only differences between logits matter."
    )


# --- One-hot target and cross-entropy ------------------------------------------------------------


def loss_table(tf: TeacherForced, itos: list[str]) -> pd.DataFrame:
    """Teacher forcing with a reference: per position the gold next word, p(gold), -log p(gold), the argmax."""
    return pd.DataFrame(
        {
            "decoder input": tf.in_labels,
            "gold next word": [itos[g] for g in tf.gold],
            "p(gold)": list(tf.gold_probs),
            "-log p(gold)": [-math.log(p) if p > 0 else math.inf for p in tf.gold_probs],
            "argmax prediction": [itos[p] for p in tf.predicted],
            "right?": ["✓" if p == g else "✗" for p, g in zip(tf.predicted, tf.gold, strict=True)],
        }
    )


def n_right(tf: TeacherForced) -> int:
    """Positions whose most probable word is the gold word."""
    return sum(p == g for p, g in zip(tf.predicted, tf.gold, strict=True))


def loss_notice(tf: TeacherForced, itos: list[str]) -> str:
    """Where the teacher-forced loss comes from: the position with the largest -log p(gold)."""
    t = min(range(len(tf.gold)), key=lambda i: tf.gold_probs[i])
    p = tf.gold_probs[t]
    word = tf.in_labels[t].split(" ", 1)[-1]
    lt = -math.log(p) if p > 0 else math.inf
    return (
        f"the largest term is at position “{word}”, which must write “{itos[tf.gold[t]]}” and gives it "
        f"p = {p:.4f}: −log p = {lt:.3f} of the total {tf.loss * len(tf.gold):.3f} (the mean over the "
        f"{len(tf.gold)} positions is L = {tf.loss:.4f})."
    )


def gradient_table(probs: Tensor, gold: int, itos: list[str], k: int = 6) -> pd.DataFrame:
    """The k largest entries (by size) of the gradient of the loss with respect to the logits."""
    g = logit_gradient(probs, gold)
    ids = g.abs().topk(min(k, g.numel())).indices.tolist()
    return pd.DataFrame(
        {
            "word": [itos[i] for i in ids],
            "p": [float(probs[i]) for i in ids],
            "one-hot y": [1 if i == gold else 0 for i in ids],
            "gradient p − y": [float(g[i]) for i in ids],
        }
    )


# --- Label smoothing -----------------------------------------------------------------------------


def smoothing_table(sm: Smoothing) -> pd.DataFrame:
    """Every position's targets and losses (`explain.recompute.label_smoothing`)."""
    return pd.DataFrame(sm.rows)


def smoothing_notice(probs: Tensor, gold: int, eps: float, itos: list[str]) -> str:
    """One position of the targets figure: what one-hot, the smoothed target and the model give the gold word."""
    V = probs.numel()
    q = smoothed_target(gold, V, eps)
    return (
        f"the one-hot target puts 1 on “{itos[gold]}”; the smoothed target puts 1 − ε + ε/V = "
        f"{float(q[gold]):.5f} there and ε/V = {eps / V:.2e} on each of the other {V - 1} words; "
        f"the model gives “{itos[gold]}” p = {float(probs[gold]):.4f}."
    )


def confidence_notice(gold_probs, in_training: float | None, eps: float, vocab_size: int, p_drop: float) -> str:
    """The model's p(gold) on the reference against the smoothed target's q(gold), without dropout (as the page runs
    it) and with it (as training saw it: `in_training`, None for a model trained without dropout). Rule: "near" only
    within 0.02 of q(gold), else "above" or "below"."""
    q = float(smoothed_target(0, vocab_size, eps)[0])

    def side(p: float) -> str:
        return "near" if abs(p - q) <= 0.02 else "above" if p > q else "below"

    p = sum(gold_probs) / len(gold_probs)
    text = (
        f"On this reference the model gives the gold word p = {p:.3f} on average, {side(p)} the smoothed target's "
        f"q(gold) = {q:.5f}: this page runs the model as it translates, with dropout off."
    )
    if in_training is None:
        return text + " This model was trained without dropout."
    return text + (
        f" Training ran it with dropout (P_drop = {p_drop:g}), and so run (the average of {DROPOUT_PASSES} passes) it "
        f"gives p = {in_training:.3f}, {side(in_training)} q(gold): the smoothed loss was minimised on the model with "
        "dropout, not on the one you translate with."
    )


def target_figure(probs: Tensor, gold: int, eps: float, itos: list[str], k: int = 8) -> go.Figure:
    """Grouped bars on the k most probable words (and the gold word): model p, one-hot y, smoothed q."""
    ids = probs.topk(min(k, probs.numel())).indices.tolist()
    if gold not in ids:
        ids.append(gold)
    words = [f"{itos[i]}{' (gold)' if i == gold else ''}" for i in ids]
    q = smoothed_target(gold, probs.numel(), eps)
    fig = go.Figure()
    for name, vals, colour in (
        ("model output p", [float(probs[i]) for i in ids], "#31a354"),
        ("one-hot target y", [1.0 if i == gold else 0.0 for i in ids], "#636363"),
        (f"smoothed target q (ε = {eps:g})", [float(q[i]) for i in ids], "#fd8d3c"),
    ):
        fig.add_trace(
            go.Bar(
                name=name,
                x=words,
                y=vals,
                marker_color=colour,
                hovertemplate="%{x}: %{y:.6f}<extra>" + name + "</extra>",
            )
        )
    fig.update_layout(
        barmode="group",
        height=300,
        margin={"l": 10, "r": 10, "t": 10, "b": 10},
        xaxis={"type": "category"},
        yaxis={"range": [0, 1.05], "title": "probability"},
        legend={"orientation": "h", "y": 1.12},
    )
    return fig


# --- Greedy decoding -----------------------------------------------------------------------------


def prefix_words(prefix, itos: list[str]) -> str:
    return " ".join(itos[i] for i in prefix)


def greedy_table(greedy: Greedy, itos: list[str]) -> pd.DataFrame:
    """One row per step: what the decoder had read, the word it chose, and the runner-up."""
    rows = []
    for t, s in enumerate(greedy.steps, start=1):
        second = s.candidates[1] if len(s.candidates) > 1 else None
        rows.append(
            {
                "step": t,
                "prefix (decoder input)": prefix_words(s.prefix, itos),
                "chosen word": itos[s.chosen],
                "p(chosen)": s.candidates[0].prob,
                "runner-up": itos[second.token] if second else "",
                "p(runner-up)": second.prob if second else math.nan,
            }
        )
    return pd.DataFrame(rows)


def step_candidates(step: GreedyStep, itos: list[str]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "rank": range(1, len(step.candidates) + 1),
            "word": [itos[c.token] for c in step.candidates],
            "probability": [c.prob for c in step.candidates],
            "chosen": ["✓" if c.token == step.chosen else "" for c in step.candidates],
        }
    )


def greedy_notice(step: GreedyStep, number: int, itos: list[str]) -> str:
    """One greedy step: the word chosen, its probability, and the runner-up it beat."""
    c = step.candidates
    first = (
        f"step {number} runs the decoder on {count(len(step.prefix), 'position')} and takes the prediction of "
        f"the last one: “{itos[step.chosen]}”, p = {c[0].prob:.4f}"
    )
    if len(c) < 2:
        return first + "."
    return first + f"; runner-up “{itos[c[1].token]}”, p = {c[1].prob:.4f}. Greedy never looks back at this choice."


def greedy_score(greedy: Greedy, alpha: float) -> tuple[float, float, int]:
    """(total log-probability, length-normalised score, length) of the greedy output, <eos> included if said."""
    log_prob = sum(math.log(s.candidates[0].prob) for s in greedy.steps)
    length = len(greedy.steps)  # one token per step; the last one is <eos> when finished
    return log_prob, log_prob / length_penalty(length, alpha), length


# --- Beam search ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Node:
    """One hypothesis in the beam tree: `depth` tokens after <bos>."""

    id: int
    depth: int
    parent: int | None
    token: int
    prob: float  # p(token | parent's prefix)
    hypothesis: Hypothesis | None  # None for the root
    kept: bool
    y: float = 0.0

    @property
    def finished(self) -> bool:
        return self.hypothesis is not None and self.hypothesis.finished


def beam_nodes(result: BeamResult) -> list[Node]:
    """Every hypothesis the search considered, with its parent, laid out so siblings sit together.

    The live beam after a step is its kept, unfinished expansions in order (model/decoding.py keeps
    them in the order of the sorted pool), which tells which node each next expansion's `parent` is.
    """
    nodes = [Node(0, 0, None, BOS_ID, 1.0, None, True, 0.0)]
    live = [0]
    for depth, step in enumerate(result.steps, start=1):
        new_live = []
        layer = []
        for rank, e in enumerate(step.expansions):
            parent = live[e.parent]
            layer.append(
                (
                    nodes[parent].y,
                    rank,
                    Node(len(nodes) + len(layer), depth, parent, e.token, e.prob, e.hypothesis, e.kept),
                )
            )
        ordered = sorted(layer, key=lambda x: (x[0], x[1]))
        n = len(ordered)
        ys = {node.id: i - (n - 1) / 2 for i, (_, _, node) in enumerate(ordered)}
        for _, _, node in layer:
            nodes.append(
                Node(node.id, depth, node.parent, node.token, node.prob, node.hypothesis, node.kept, ys[node.id])
            )
            if node.kept and not node.hypothesis.finished:
                new_live.append(node.id)
        live = new_live
    return nodes


def best_path(nodes: list[Node], best: Hypothesis) -> set[int]:
    """Node ids on the path from the root to the winning hypothesis."""
    end = next((n for n in nodes if n.hypothesis == best and n.kept), None)
    path = set()
    while end is not None:
        path.add(end.id)
        end = nodes[end.parent] if end.parent is not None else None
    return path


def beam_tree(result: BeamResult, itos: list[str]) -> go.Figure:
    """The search as a tree: x = step, one marker per hypothesis; kept ones bold, pruned ones faded."""
    nodes = beam_nodes(result)
    path = best_path(nodes, result.best)
    fig = go.Figure()
    for kind, colour, width in (
        ("pruned", "rgba(180,180,180,0.35)", 1),
        ("kept", "#6baed6", 2),
        ("best", "#e6550d", 4),
    ):
        xs, ys = [], []
        for n in nodes[1:]:
            k = "best" if n.id in path else "kept" if n.kept else "pruned"
            if k == kind:
                p = nodes[n.parent]
                xs += [p.depth, n.depth, None]
                ys += [p.y, n.y, None]
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=ys,
                mode="lines",
                line={"color": colour, "width": width},
                hoverinfo="skip",
                name=f"{kind} edges",
                showlegend=False,
            )
        )

    def hover(n: Node) -> str:
        if n.hypothesis is None:
            return f"{BOS}: the start"
        h = n.hypothesis
        words = " ".join(itos[t] for t in h.tokens)
        state = "finished (said <eos>)" if h.finished and n.kept else "kept in the beam" if n.kept else "pruned"
        return (
            f"{words}<br>p({itos[n.token]} | prefix) = {n.prob:.4f}<br>total log-prob = {h.log_prob:.4f}"
            f"<br>normalised score = {h.score:.4f}<br>{state}"
        )

    groups = {
        "pruned": [n for n in nodes[1:] if not n.kept],
        "kept": [n for n in nodes if n.kept and not n.finished],
        "finished": [n for n in nodes if n.kept and n.finished],
    }
    style = {
        "pruned": {"color": "rgba(150,150,150,0.4)", "size": 6},
        "kept": {"color": "#3182bd", "size": 11},
        "finished": {"color": "#31a354", "size": 13, "symbol": "square"},
    }
    for name, group in groups.items():
        fig.add_trace(
            go.Scatter(
                x=[n.depth for n in group],
                y=[n.y for n in group],
                mode="markers" if name == "pruned" else "markers+text",
                text=[BOS if n.hypothesis is None else itos[n.token] for n in group],
                textposition="top center",
                marker={
                    **style[name],
                    "line": {"width": [3 if n.id in path else 0 for n in group], "color": "#e6550d"},
                },
                hovertext=[hover(n) for n in group],
                hoverinfo="text",
                name=name,
                customdata=[n.id for n in group],
            )
        )
    ys = [n.y for n in nodes]
    widest = max((sum(1 for n in nodes if n.depth == d) for d in range(len(result.steps) + 1)), default=1)
    fig.update_layout(
        height=max(360, min(1200, 80 + 40 * widest)),
        margin={"l": 10, "r": 10, "t": 60, "b": 10},
        xaxis={"title": "step (tokens after <bos>)", "dtick": 1},
        yaxis={"visible": False, "range": [max(ys) + 0.6, min(ys) - 0.9]},  # reversed, room for labels
        legend={"orientation": "h", "y": 0.99, "yanchor": "top", "yref": "container"},
    )
    return fig


def beam_notice(result: BeamResult, greedy: Greedy, itos: list[str], lang: str = "fr") -> str:
    """The search in one line: how many hypotheses it weighed, how many it pruned, what won, and against greedy."""
    considered = sum(len(s.expansions) for s in result.steps)
    pruned = sum(not e.kept for s in result.steps for e in s.expansions)
    best = ids_text(result.best.output, itos, lang)
    same = ids_text(greedy.tokens, itos, lang) == best
    return (
        f"over {len(result.steps)} steps the search weighed {considered} hypotheses and pruned "
        f"{pruned}; the winner, “{best}”, has total log-probability {result.best.log_prob:.3f} and normalised "
        f"score {result.best.score:.3f}. "
        + (
            "Greedy decoding found the same sentence."
            if same
            else "Greedy decoding found another sentence (see below)."
        )
    )


def beam_step_table(result: BeamResult, step: int, itos: list[str], lang: str = "fr") -> pd.DataFrame:
    """Every expansion considered at `step` (1-based), best total log-probability first."""
    s = result.steps[step - 1]
    return pd.DataFrame(
        {
            "hypothesis": [detokenize([itos[t] for t in e.hypothesis.tokens], lang) for e in s.expansions],
            "new word": [itos[e.token] for e in s.expansions],
            "p(word | prefix)": [e.prob for e in s.expansions],
            "total log-prob": [e.hypothesis.log_prob for e in s.expansions],
            "normalised score": [e.hypothesis.score for e in s.expansions],
            "fate": [("finished" if e.hypothesis.finished else "kept") if e.kept else "pruned" for e in s.expansions],
        }
    )


def finished_table(result: BeamResult, itos: list[str], lang: str = "fr") -> pd.DataFrame:
    """The completed hypotheses, ranked by length-normalised score (the winner first)."""
    hs = result.finished or (result.best,)
    return pd.DataFrame(
        {
            "output": [detokenize([itos[t] for t in h.output], lang) for h in hs],
            "length (with <eos>)": [len(h.tokens) for h in hs],
            "total log-prob": [h.log_prob for h in hs],
            "probability": [h.prob for h in hs],
            "normalised score": [h.score for h in hs],
        }
    )


def comparison_table(
    greedy: Greedy, result: BeamResult, alpha: float, k: int, itos: list[str], lang: str = "fr"
) -> pd.DataFrame:
    """Greedy decoding and beam search side by side: output, length, total log-probability, normalised score."""
    g_lp, g_score, g_len = greedy_score(greedy, alpha)
    return pd.DataFrame(
        {
            "decoding": ["greedy", f"beam search (k = {k})"],
            "output": [ids_text(greedy.tokens, itos, lang), ids_text(result.best.output, itos, lang)],
            "length (with <eos>)": [g_len, len(result.best.tokens)],
            "total log-prob": [g_lp, result.best.log_prob],
            "normalised score": [g_score, result.best.score],
        }
    )


def kept_per_step(result: BeamResult) -> list[int]:
    return [sum(e.kept for e in s.expansions) for s in result.steps]


def run_twice(result: BeamResult, itos: list[str]) -> pd.DataFrame:
    """The lecture notes' "keep the top two words and run the model twice": beam search's first two steps."""
    if not result.steps:
        return pd.DataFrame()
    first = [e for e in result.steps[0].expansions if e.kept]
    rows = []
    parent = 0  # index of the hypothesis in the beam after step 1 (finished ones leave the beam)
    for e1 in first:
        kids = []
        if not e1.hypothesis.finished:
            if len(result.steps) > 1:
                kids = [e for e in result.steps[1].expansions if e.parent == parent]
            parent += 1
        for e2 in kids or [None]:
            rows.append(
                {
                    "step 1 word": itos[e1.token],
                    "p(step 1)": e1.prob,
                    "step 2 word (model run on that prefix)": itos[e2.token] if e2 else "—",
                    "p(step 2 | step 1)": e2.prob if e2 else math.nan,
                    "p(both)": e2.hypothesis.prob if e2 else e1.hypothesis.prob,
                    "kept after step 2": ("✓" if e2.kept else "") if e2 else "",
                }
            )
    return pd.DataFrame(rows)


def ids_text(ids, itos: list[str], lang: str) -> str:
    """Token ids (no <bos>) -> the detokenized sentence, stopping at <eos>."""
    words = []
    for i in ids:
        if i == EOS_ID:
            break
        words.append(itos[i])
    return detokenize(words, lang)
