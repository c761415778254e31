"""Builders for "Before the Transformer"'s measured comparison (assets/rnn_comparison.json, written by
bench/bench_rnn.py): training to the same accuracy, encode time, accuracy by length and the gradient's reach, as
plotly figures, tables and one-line notices computed from the measured numbers they draw. (The recurrent model's
own tensors: viz/rnn.py.)
"""

from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go

from viz.rnn import RNN_COLOUR, TRANSFORMER_COLOUR

# --- The measured comparison (assets/rnn_comparison.json) -----------------------------------------------


def _line(fig: go.Figure, x, y, name: str, colour: str, dash: str | None = None) -> None:
    fig.add_trace(
        go.Scatter(x=list(x), y=list(y), mode="lines+markers", name=name, line={"color": colour, "dash": dash})
    )


LEGEND_ROW = 20  # px: one row of legend entries above a chart


def _layout(fig: go.Figure, x_title: str, y_title: str, log_y: bool = False, legend_rows: int = 1) -> go.Figure:
    """Axis titles, the legend above the plotting area (its bottom edge at the area's top: it never covers a
    line; `legend_rows` rows of entries are reserved, Plotly makes room for more when a narrow column wraps them)
    and both axes' ranges from the data, so every point is inside the area."""
    fig.update_layout(
        height=300 + LEGEND_ROW * legend_rows,
        margin={"l": 10, "r": 10, "t": 10 + LEGEND_ROW * legend_rows, "b": 10},
        legend={"orientation": "h", "x": 0, "xanchor": "left", "y": 1.02, "yanchor": "bottom"},
        xaxis={"title": x_title},
        yaxis={"title": y_title, "type": "log" if log_y else "linear", **({"dtick": 1} if log_y else {})},
    )  # no small 2, 5 labels
    return _fit_ranges(fig, log_y)


def _fit_ranges(fig: go.Figure, log_y: bool) -> go.Figure:
    """x and y ranges holding every point of every trace with a margin (a marker on the edge is not cut in half);
    bars start at 0, a log axis's range is in decades (Plotly's convention), a category axis keeps Plotly's own."""
    ys = [float(y) for tr in fig.data for y in tr.y if y is not None and math.isfinite(y) and (y > 0 or not log_y)]
    if ys:
        lo, hi = min(ys), max(ys)
        if log_y:
            lo, hi = math.log10(lo), math.log10(hi)
            pad = 0.08 * (hi - lo) or 0.5
            fig.update_yaxes(range=[lo - pad, hi + pad])
        elif all(tr.type == "bar" for tr in fig.data):
            fig.update_yaxes(range=[min(0.0, lo), 1.12 * hi or 1.0])  # room for the bars' numbers
        else:
            pad = 0.08 * (hi - min(lo, 0.0)) or 1.0
            fig.update_yaxes(range=[min(0.0, lo - pad), hi + pad])
    xs = [x for tr in fig.data if tr.type == "scatter" for x in tr.x]
    if xs and all(isinstance(x, int | float) for x in xs):
        lo, hi = min(xs), max(xs)
        pad = 0.04 * (hi - lo) or 0.5
        fig.update_xaxes(range=[lo - pad, hi + pad])
    return fig


def steps_figure(data: dict) -> go.Figure:
    rows = data["sequential_steps"]["rows"]
    m = [r["m"] for r in rows]
    fig = go.Figure()
    _line(fig, m, [r["rnn"] for r in rows], "RNN: m + t (encode, then decode)", RNN_COLOUR)
    _line(fig, m, [r["transformer_decode"] for r in rows], "Transformer, translating: 1 + t", TRANSFORMER_COLOUR)
    _line(
        fig,
        m,
        [r["transformer_train"] for r in rows],
        "Transformer, training: 2 stages (each a fixed stack of layers)",
        TRANSFORMER_COLOUR,
        "dot",
    )
    return _layout(fig, "source length m (tokens)", "steps that wait for each other", legend_rows=3)


def steps_notice(data: dict) -> str:
    r = data["sequential_steps"]["rows"][-1]
    return (
        f"For a {r['m']}-token source and its {r['t']}-token translation the RNN takes {r['rnn']} steps one after "
        f"the other, the Transformer {r['transformer_decode']} to translate and {r['transformer_train']} to train "
        f"on the pair: in training it has no loop over positions at all."
    )


def encode_time_figure(data: dict) -> go.Figure:
    rows = data["encode_time"]["rows"]
    fig = go.Figure()
    _line(fig, [r["length"] for r in rows], [r["rnn_ms"] for r in rows], "RNN encoder", RNN_COLOUR)
    _line(
        fig, [r["length"] for r in rows], [r["transformer_ms"] for r in rows], "Transformer encoder", TRANSFORMER_COLOUR
    )
    return _layout(fig, "sentence length (tokens)", f"ms to encode {data['encode_time']['batch']} sentences")


def encode_time_notice(data: dict) -> str:
    rows = data["encode_time"]["rows"]
    a, b = rows[0], rows[-1]
    return (
        f"From {a['length']} to {b['length']} tokens the RNN encoder's time grows {b['rnn_ms'] / a['rnn_ms']:.1f}x "
        f"({a['rnn_ms']:.1f} → {b['rnn_ms']:.1f} ms), the Transformer's "
        f"{b['transformer_ms'] / a['transformer_ms']:.1f}x ({a['transformer_ms']:.1f} → {b['transformer_ms']:.1f} "
        f"ms); at {b['length']} tokens the RNN takes {b['rnn_ms'] / b['transformer_ms']:.1f}x as long."
    )


def length_figure(data: dict) -> go.Figure:
    rows = data["accuracy_by_length"]["rows"]
    x = [r["bucket"] for r in rows]
    fig = go.Figure()
    for model, name, colour in (("rnn", "RNN", RNN_COLOUR), ("transformer", "Transformer", TRANSFORMER_COLOUR)):
        fig.add_trace(
            go.Bar(
                x=x,
                y=[100 * r[model] for r in rows],
                name=name,
                marker_color=colour,
                text=[f"{100 * r[model]:.0f}%" for r in rows],
            )
        )
    fig.update_layout(barmode="group")
    fig = _layout(fig, "source length (words)", "held-out exact match, %")
    fig.update_xaxes(type="category")
    return fig


def right(row: dict, model: str) -> int:
    """Sentences of a bucket the model got exactly right (its share times the bucket's count, rounded)."""
    return round(row[model] * row["n"])


def length_notice(data: dict) -> str:
    """The largest gap between the two models, as counts of sentences (a gap of one sentence is one sentence)."""
    rows = data["accuracy_by_length"]["rows"]
    worst = min(rows, key=lambda r: r["rnn"] - r["transformer"])
    c = data["coref"]
    n = sum(r["n"] for r in rows)
    rnn, tf = (sum(right(r, m) for r in rows) for m in ("rnn", "transformer"))
    gap = right(worst, "transformer") - right(worst, "rnn")
    return (
        f"Largest gap in the “{worst['bucket']}” bucket: RNN right on {right(worst, 'rnn')} of {worst['n']} "
        f"sentences ({worst['rnn']:.1%}), Transformer on {right(worst, 'transformer')} "
        f"({worst['transformer']:.1%}): "
        f"{gap} sentence{'s' if abs(gap) != 1 else ''} apart. Over all {n}: {rnn} against {tf}, "
        f"{abs(tf - rnn)} apart. il/elle on the {c['n']} coreference sentences: RNN {c['rnn']:.0%}, Transformer "
        f"{c['transformer']:.0%}."
    )


def length_table(data: dict) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "source length": r["bucket"],
                "sentences": r["n"],
                "RNN exact match": f"{r['rnn']:.1%}",
                "Transformer exact match": f"{r['transformer']:.1%}",
            }
            for r in data["accuracy_by_length"]["rows"]
        ]
    )


def gradient_figure(data: dict) -> go.Figure:
    g = data["gradient"]
    fig = go.Figure()
    _line(fig, g["distance"], g["rnn"], "RNN: ‖∂h_t/∂x_i‖", RNN_COLOUR)
    _line(fig, g["distance"], g["transformer"], "Transformer encoder: ‖∂out_t/∂x_i‖", TRANSFORMER_COLOUR)
    return _layout(fig, "distance t − i (tokens)", "gradient norm, relative to distance 0", log_y=True)


def gradient_notice(data: dict) -> str:
    """Rule: "the RNN forgets faster" only when its relative gradient at the largest distance is the smaller."""
    g = data["gradient"]
    d = g["distance"]
    far = len(d) - 1
    rnn, tf = g["rnn"][far], g["transformer"][far]
    verdict = "the RNN forgets faster" if rnn < tf else "no faster fading in the RNN here"
    return (
        f"At distance {d[far]} (median over the {g['count'][far]} word pairs that far apart in "
        f"{g['n_sentences']} held-out sentences) the RNN's gradient is {rnn:.2g} of its distance-0 value, the "
        f"Transformer's {tf:.2g}: {verdict}."
    )


def _steps(value: float | None) -> str:
    return "not reached" if value is None else f"{value:.0f}"


def training_table(data: dict) -> pd.DataFrame:
    """The best recipe of each model from the same sweep (the least CPU time to the target): its figures. The CPU
    seconds count the held-out evaluations too, so they are more than steps × ms per step."""
    t = data["training"]
    rows = []
    for name in ("rnn", "transformer"):
        r = t[name]
        rows.append(
            {
                "model": {"rnn": "RNN", "transformer": "Transformer"}[name],
                "best recipe": r["recipe"],
                "parameters": f"{r['parameters']:,}",
                f"steps to {t['target']:.0%}": _steps(r["steps_to_target"]),
                f"CPU s to {t['target']:.0%} (with evaluations)": r["cpu_seconds_to_target"] or "–",
                "CPU ms per step": r["ms_per_step"],
                "final exact match": f"{r['final_exact_match']:.1%}",
            }
        )
    return pd.DataFrame(rows)


def sweep_table(data: dict) -> pd.DataFrame:
    """Every recipe of the sweep, both models: medians over the seeds."""
    t = data["training"]
    return pd.DataFrame(
        [
            {
                "model": {"rnn": "RNN", "transformer": "Transformer"}[r["arch"]],
                "recipe": r["recipe"],
                "parameters": f"{r['parameters']:,}",
                f"seeds reaching {t['target']:.0%}": f"{r['reached']} of {r['seeds']}",
                f"steps to {t['target']:.0%}": _steps(r["steps_to_target"]),
                f"CPU s to {t['target']:.0%} (with evaluations)": r["cpu_seconds_to_target"] or "–",
                "CPU ms per step": r["ms_per_step"],
            }
            for r in t["sweep"]
        ]
    )


def _steps_to(row: dict) -> float:
    return float(row["steps_to_target"])


def training_notice(data: dict) -> str:
    """Rule: "the recurrence is the cheaper computation" only when the RNN needed fewer CPU seconds (ratio < 1)."""
    t = data["training"]
    r, f = t["rnn"], t["transformer"]
    n = len(t["sweep"]) // 2
    if not (r["cpu_seconds_to_target"] and f["cpu_seconds_to_target"]):
        return f"Not both models reached {t['target']:.0%} within {t['max_steps']} steps with any recipe (table)."
    ratio = r["cpu_seconds_to_target"] / f["cpu_seconds_to_target"]
    shown = round(r["cpu_seconds_to_target"], 1), round(f["cpu_seconds_to_target"], 1)  # as the sentence gives them
    verdict = (
        "the two got there in the same CPU time"
        if shown[0] == shown[1]
        else f"{'the Transformer' if ratio > 1 else 'the RNN'} got there first"
    )
    text = (
        f"Each model had the same sweep ({n} recipes × {t['seeds']} seeds, one CPU thread). The best recipe is the "
        f"one that reached the target in the least CPU time (held-out evaluations included). The best RNN "
        f"recipe reached {t['target']:.0%} held-out exact match after {r['steps_to_target']:.0f} steps and "
        f"{r['cpu_seconds_to_target']:.1f} CPU s, the best Transformer recipe after {f['steps_to_target']:.0f} "
        f"steps and {f['cpu_seconds_to_target']:.1f} CPU s: {verdict} "
        f"(RNN/Transformer {ratio:.2f}x in CPU time, {r['steps_to_target'] / f['steps_to_target']:.2f}x in steps)."
    )
    rows = data["encode_time"]["rows"]
    first, last = (row["rnn_ms"] / row["transformer_ms"] for row in (rows[0], rows[-1]))
    if shown[0] < shown[1]:
        text += (
            f" On one core and sentences this short the recurrence is the cheaper computation; the "
            f"Transformer's gain is parallelism across positions, which needs parallel hardware and longer "
            f"sentences (the RNN/Transformer encode-time ratio is {first:.2f} at {rows[0]['length']} tokens and "
            f"{last:.2f} at {rows[-1]['length']})."
        )
    elif shown[0] > shown[1]:
        why = []
        if r["steps_to_target"] > f["steps_to_target"]:
            why.append(f"fewer steps ({f['steps_to_target']:.0f} against {r['steps_to_target']:.0f})")
        if r["ms_per_step"] > f["ms_per_step"]:
            why.append(
                f"cheaper steps ({f['ms_per_step']:.1f} against {r['ms_per_step']:.1f} CPU ms: the RNN walks "
                f"the sentence position by position, a chain of small operations)"
            )
        if why:
            text += f" Between these two recipes, the Transformer's lead comes from {' and '.join(why)}."
        fewest = {
            arch: min((x for x in t["sweep"] if x["arch"] == arch and x["steps_to_target"]), key=_steps_to)
            for arch in ("rnn", "transformer")
        }
        if _steps_to(fewest["rnn"]) <= _steps_to(fewest["transformer"]):
            text += (
                f" In steps alone the Transformer is not ahead: the RNN's recipe {fewest['rnn']['recipe']} got there "
                f"in {_steps_to(fewest['rnn']):.0f} steps, the Transformer's fastest in "
                f"{_steps_to(fewest['transformer']):.0f} (sweep table)."
            )
        how = (
            "faster"
            if max(first, last) < 1
            else "slower"
            if min(first, last) > 1
            else "faster at one end of the lengths and slower at the other"
        )
        text += (
            f" Encoding alone is another matter: on one core the RNN encodes a batch {how} (RNN/Transformer "
            f"time {first:.2f} at {rows[0]['length']} tokens, {last:.2f} at {rows[-1]['length']}); the "
            f"Transformer's gain there is that it takes all positions at once, which needs parallel hardware."
        )
    return text
