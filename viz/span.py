"""The span argument on the encoder page: how much of each word's vector lies outside the span its step is
confined to (explain/span.py measures it), as a chart, a table and a notice line.

Notice words and their rules (checked in tests/test_notice_rules_pages.py): a step "stays inside its span" only when
the span is a proper subspace (its rank is below the dimension) and every word's share outside is at most STAYS
(1e-4; float32 arithmetic leaves about 1e-7); the FFN's output "leaves" only when its span is a proper subspace
and the words' mean share outside is at least LEAVES (0.05). Otherwise the notice states the numbers alone.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from explain.span import SpanCheck, SpanStep
from viz.heatmap import as_array

STAYS = 1e-4
LEAVES = 0.05
FLOOR = 1e-10  # the log axis starts here (an all-zero row, or a share below it, is drawn at the floor)


def _names(check: SpanCheck) -> list[str]:
    return [f"{i}. {step.name}" for i, step in enumerate(check.steps, start=1)]


def inside(step: SpanStep) -> bool:
    return step.confining and float(step.share.max()) <= STAYS


def leaves(step: SpanStep) -> bool:
    return step.confining and float(step.share.mean()) >= LEAVES


def span_figure(check: SpanCheck, labels: list[str]) -> go.Figure:
    """One column per step: a dot per word (its share outside the span), a bar at the largest; log scale."""
    names = _names(check)
    fig = go.Figure()
    top = [max(float(s.share.max()), FLOOR) for s in check.steps]
    fig.add_trace(
        go.Bar(
            x=names,
            y=top,
            name="largest share (any word)",
            marker_color=["#9ecae1"] * 3 + ["#fd8d3c"],
            text=[f"{v:.0e}" if v < 0.01 else f"{v:.0%}" for v in top],
            textposition="outside",
            hovertemplate="%{x}: largest share outside %{y:.2e}<extra></extra>",
        )
    )
    for i, s in enumerate(check.steps):
        y = np.maximum(as_array(s.share), FLOOR)
        fig.add_trace(
            go.Scatter(
                x=[names[i]] * len(y),
                y=y.tolist(),
                mode="markers",
                showlegend=i == 0,
                name="each word",
                marker={"color": "#08306b", "size": 7, "opacity": 0.7},
                text=list(labels),
                hovertemplate="%{text}: %{y:.2e} outside<extra></extra>",
            )
        )
    fig.add_hline(y=STAYS, line_dash="dash", line_color="#636363")
    fig.add_annotation(  # (an hline's own annotation lands at the top of a log axis: its y is taken as log10 y there)
        x=0,
        xref="paper",
        y=float(np.log10(STAYS)),
        text="below the line: float error",
        showarrow=False,
        xanchor="left",
        yanchor="top",
        font={"color": "#636363"},
    )
    fig.update_layout(
        height=360,
        margin={"l": 10, "r": 10, "t": 30, "b": 10},
        bargap=0.5,
        legend={"orientation": "h", "y": 1.12},
        yaxis={
            "type": "log",
            "range": [np.log10(FLOOR), 0.3],
            "dtick": 2,
            "exponentformat": "power",
            "title": "share of the vector outside the span",
        },
    )
    return fig


def span_table(check: SpanCheck, labels: list[str], digits: int = 3) -> pd.DataFrame:
    """Per word and step: the share of its vector outside the span; then each span's size."""
    names = _names(check)
    df = pd.DataFrame(
        {name: [f"{v:.1e}" for v in as_array(s.share)] for name, s in zip(names, check.steps, strict=True)},
        index=list(labels),
    )
    size = pd.DataFrame(
        {name: [f"{s.vectors} vectors, rank {s.rank} of {s.dims}"] for name, s in zip(names, check.steps, strict=True)},
        index=["the span"],
    )
    return pd.concat([df, size])


def span_notice(check: SpanCheck, labels: list[str]) -> str:
    """Steps 1-3 "stay inside" their spans and the FFN "leaves" its span, each under the module's rules."""
    first, ffn = check.steps[:3], check.steps[3]
    T, H = check.n_words, check.n_heads
    if all(inside(s) for s in first):
        worst = max(float(s.share.max()) for s in first)
        out = (
            f"Steps 1-3 stay inside their spans to float error (largest share outside {worst:.1e}): each head's z "
            f"is a mix of that head's {T} values ({H} heads × {T} = {first[0].vectors} vectors in "
            f"{first[0].dims} dimensions), W^O maps that span linearly, and the residual and LayerNorm add only "
            f"the words' input x and fixed directions ({first[2].vectors} vectors, rank {first[2].rank} of "
            f"{first[2].dims})."
        )
    else:
        parts = []
        for i, s in enumerate(first, start=1):
            if not s.confining:
                parts.append(f"step {i}'s {s.vectors} vectors fill all {s.dims} dimensions, so it cannot be told")
            else:
                parts.append(f"step {i}: largest share outside {float(s.share.max()):.1e} (rank {s.rank} of {s.dims})")
        out = f"On this sentence of {T} words: " + "; ".join(parts) + "."
    mean = float(ffn.share.mean())
    j = int(np.argmin(as_array(ffn.share)))
    if leaves(ffn):
        out += (
            f" The FFN's output leaves: on average {mean:.0%} of its length (at least {float(ffn.share[j]):.0%}, "
            f"“{labels[j]}”) lies outside everything its two matrices could make from step 3's span without the "
            f"ReLU ({ffn.vectors} vectors, rank {ffn.rank} of {ffn.dims})."
        )
    elif not ffn.confining:
        out += (
            f" For the FFN the span of {ffn.vectors} vectors fills all {ffn.dims} dimensions: with {T} words "
            f"(H·T = {H * T}) there is nothing to test; a shorter sentence shows it."
        )
    else:
        out += f" The FFN's output: on average {mean:.1%} of its length lies outside (rank {ffn.rank} of {ffn.dims})."
    return out
