"""Figures and tables of a training run: loss curves, the learning-rate schedule, held-out metrics,
translations that improve, and attention that forms (pure builders: lists and arrays in, plotly
figures and pandas DataFrames out).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from model.train import rate, rates

MAX_POINTS = 2500  # a curve with more points is thinned (every k-th point) before drawing
COLORS = {
    "train": "#1f77b4",
    "heldout": "#d62728",
    "lr": "#2ca02c",
    "em": "#9467bd",
    "bleu": "#ff7f0e",
    "coref": "#8c564b",
    "now": "#000000",
}


def ema(values: Sequence[float], alpha: float = 0.1) -> list[float]:
    """Exponential moving average with bias correction (like TensorBoard's smoothing):
    s_t = (1 - alpha) s_{t-1} + alpha x_t, divided by 1 - (1 - alpha)^t so the start is not pulled to 0.
    Non-finite values are skipped (the average carries over)."""
    out, s, w = [], 0.0, 0.0
    for x in values:
        if np.isfinite(x):
            s = (1 - alpha) * s + alpha * float(x)
            w = (1 - alpha) * w + alpha
        out.append(s / w if w else float("nan"))
    return out


def _thin(xs: Sequence, ys: Sequence) -> tuple[np.ndarray, np.ndarray]:
    """Every k-th point, so at most MAX_POINTS (numpy arrays: plotly validates and sends them fast)."""
    xs, ys = np.asarray(xs), np.asarray(ys, dtype=float)
    k = max(1, -(-len(xs) // MAX_POINTS))
    return xs[::k], ys[::k]


def _layout(fig: go.Figure, title: str, x_title: str, y_title: str, height: int = 320) -> go.Figure:
    fig.update_layout(
        title=title,
        height=height,
        margin={"l": 10, "r": 10, "t": 40, "b": 10},
        xaxis_title=x_title,
        yaxis_title=y_title,
        hovermode="x unified",
        legend={"orientation": "h", "y": -0.25},
    )
    return fig


def loss_figure(
    steps: Sequence[int],
    losses: Sequence[float],
    eval_steps: Sequence[int] = (),
    heldout: Sequence[float] = (),
    alpha: float = 0.1,
    title: str | None = None,
    what: str = "label-smoothed cross-entropy",
) -> go.Figure:
    """Training loss at every step (raw, faint, and smoothed) and the held-out loss at the evaluations.

    Trace names: "training loss" (raw, exactly the values given), "training loss (smoothed)",
    "held-out loss".
    """
    fig = go.Figure()
    x, y = _thin(steps, losses)
    fig.add_trace(
        go.Scatter(
            x=x,
            y=y,
            name="training loss",
            mode="lines" if len(x) > 1 else "markers",  # (a run that ended at its first step: one point, drawn)
            line={"color": COLORS["train"], "width": 1},
            opacity=0.35,
        )
    )
    xs, ys = _thin(steps, ema(losses, alpha))
    fig.add_trace(
        go.Scatter(
            x=xs,
            y=ys,
            name="training loss (smoothed)",
            mode="lines" if len(xs) > 1 else "markers",
            line={"color": COLORS["train"], "width": 2.5},
        )
    )
    if len(eval_steps):
        fig.add_trace(
            go.Scatter(
                x=list(eval_steps),
                y=list(heldout),
                name="held-out loss",
                mode="lines+markers",
                line={"color": COLORS["heldout"], "width": 2.5},
            )
        )
    return _layout(fig, title or f"Loss: {what} (nats/token)", "step", "loss")


def lr_figure(total_steps: int, d_model: int, warmup: int, scale: float = 1.0, current: int | None = None) -> go.Figure:
    """The paper's schedule over the whole run, its peak at step `warmup`, and the current step marked.

    Trace names: "learning rate" (one point per step, 1..total_steps), "peak", "now" (when given).
    """
    x, y = _thin(np.arange(1, total_steps + 1), rates(total_steps, d_model, warmup, scale).numpy())

    def point(step: int, name: str, marker: dict) -> go.Scatter:
        """The schedule's value at `step`, marked on the curve."""
        return go.Scatter(x=[step], y=[rate(step, d_model, warmup, scale)], name=name, mode="markers", marker=marker)

    fig = go.Figure(go.Scatter(x=x, y=y, name="learning rate", mode="lines", line={"color": COLORS["lr"], "width": 2}))
    if warmup <= total_steps:
        fig.add_trace(point(warmup, "peak", {"color": COLORS["lr"], "size": 9, "symbol": "diamond"}))
    if current is not None and current >= 1:
        now = min(current, total_steps)
        fig.add_vline(x=now, line={"color": COLORS["now"], "dash": "dot"})
        fig.add_trace(point(now, "now", {"color": COLORS["now"], "size": 10}))
    fig.update_yaxes(exponentformat="e")
    return _layout(fig, "Learning-rate schedule", "step", "learning rate", height=280)


def metrics_figure(
    eval_steps: Sequence[int], exact_match: Sequence[float], bleu: Sequence[float], coref: Sequence[float | None] = ()
) -> go.Figure:
    """Held-out exact match (%), BLEU (0-100) and il/elle accuracy (%) at every evaluation.

    Trace names: "exact match %", "BLEU", "il/elle accuracy %" (only when there are coref pairs).
    """
    x = list(eval_steps)
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=x,
            y=[100 * v for v in exact_match],
            name="exact match %",
            mode="lines+markers",
            line={"color": COLORS["em"]},
        )
    )
    fig.add_trace(go.Scatter(x=x, y=list(bleu), name="BLEU", mode="lines+markers", line={"color": COLORS["bleu"]}))
    if any(c is not None for c in coref):
        fig.add_trace(
            go.Scatter(
                x=x,
                y=[None if c is None else 100 * c for c in coref],
                name="il/elle accuracy %",
                mode="lines+markers",
                line={"color": COLORS["coref"], "dash": "dot"},
            )
        )
    fig.update_yaxes(range=[0, 102])
    return _layout(fig, "Held-out translations (greedy)", "step", "score (0-100)")


def samples_table(evals: Sequence, last: int = 4) -> pd.DataFrame:
    """The fixed held-out sentences: source, reference, and the translation at the last evaluations.

    `evals`: EvalEvents (each with .step and .samples = [(source, translation, reference), ...]).
    Columns: "source", "reference", then "step N" for the newest evaluations first.
    """
    if not evals:
        return pd.DataFrame(columns=["source", "reference"])
    newest = list(evals)[::-1][:last]
    base = newest[0].samples
    df = pd.DataFrame({"source": [s for s, _, _ in base], "reference": [r for _, _, r in base]})
    for ev in newest:
        df[f"step {ev.step}"] = [("✓ " if h == r else "✗ ") + h for _, h, r in ev.samples]
    return df


def probe_table(snapshots: Sequence, probes: Sequence[str], last: int = 8) -> pd.DataFrame:
    """Greedy translations of the probe sentences at the newest snapshot steps (newest first).

    Columns: "step", then one per probe sentence.
    """
    by_step: dict[int, dict[int, str]] = {}
    for s in snapshots:
        by_step.setdefault(s.step, {})[s.probe] = s.translation
    steps = sorted(by_step, reverse=True)[:last]
    data = {"step": steps}
    for i, text in enumerate(probes):
        data[text] = [by_step[s].get(i, "") for s in steps]
    return pd.DataFrame(data)


# --- Attention over training -------------------------------------------------------------------


def head_weights(weights: np.ndarray, layer: int, head: int | None) -> np.ndarray:
    """[L, H, Tq, Tk] -> [Tq, Tk] for one layer: one head, or the mean over heads when head is None."""
    w = np.asarray(weights)[layer]
    return w.mean(axis=0) if head is None else w[head]


def future_share(weights: np.ndarray) -> float:
    """Mean over query rows of the attention weight on later positions (above the diagonal), for [Tq, Tq].

    Exactly 0 when the look-ahead mask is on; a decoder trained without it learns to look ahead.
    """
    w = np.asarray(weights, dtype=np.float64)
    return float(np.triu(w, k=1).sum(axis=-1).mean())


def attention_timeline(
    snapshots: Sequence, kind: str, layer: int, head: int | None, query: int, keys: dict[str, int]
) -> tuple[list[int], dict[str, list[float]]]:
    """For each snapshot: the weight of query row `query` on each key column in `keys` (name -> column)."""
    steps = [s.step for s in snapshots]
    series = {
        name: [float(head_weights(s.weights(kind), layer, head)[query, k]) for s in snapshots]
        for name, k in keys.items()
    }
    return steps, series


def future_timeline(snapshots: Sequence, layer: int, head: int | None) -> tuple[list[int], list[float]]:
    """`future_share` of the decoder self-attention (one layer, one head or their mean) at every snapshot."""
    return [s.step for s in snapshots], [future_share(head_weights(s.dec_self, layer, head)) for s in snapshots]


def timeline_figure(
    steps: Sequence[int],
    series: dict[str, Sequence[float]],
    title: str,
    y_title: str,
    current: int | None = None,
    y_range: tuple[float, float] | None = (0, 1),
) -> go.Figure:
    """Lines over training steps (one per series), with the chosen snapshot marked."""
    fig = go.Figure()
    for name, ys in series.items():
        fig.add_trace(go.Scatter(x=list(steps), y=list(ys), name=name, mode="lines+markers"))
    if current is not None:
        fig.add_vline(x=current, line={"color": COLORS["now"], "dash": "dot"})
    if y_range is not None:
        fig.update_yaxes(range=list(y_range))
    return _layout(fig, title, "step", y_title, height=280)


def find_token(labels: Sequence[str], word: str) -> int | None:
    """Index of the first label "i word" (labels are position-prefixed), or None."""
    for i, label in enumerate(labels):
        if label.split(" ", 1)[-1] == word:
            return i
    return None
