"""A study's report, drawn: the gain with its interval, the items, the misconceptions chosen, the lesson's steps,
the questionnaires and the feeling of learning beside the measured gain. Pure builders from `explain.report.Report`
(no Streamlit); a suppressed cell (None: fewer than 5 participants) is left out of a figure and said so.
"""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from explain.instrument import OBJECTIVES
from explain.questionnaires import TLX
from explain.report import LEVELS, Report
from explain.stats import MIN_CELL

PRE, POST, DELAYED, GAIN = "#9ecae1", "#08519c", "#6baed6", "#2ca02c"
LEVEL_COLOURS = dict(zip(LEVELS, ("#c6dbef", "#6baed6", "#2171b5", "#08306b", "#000000"), strict=True))


def _layout(fig: go.Figure, height: int) -> go.Figure:
    fig.update_layout(
        height=height,
        margin={"l": 10, "r": 10, "t": 40, "b": 10},
        plot_bgcolor="white",
        legend={"orientation": "h", "y": 1.12, "x": 0},
    )
    return fig


def gain_figure(r: Report) -> go.Figure:
    """Left: the matched participants' mean score before, after (and at the delayed test); right: Hake's ⟨g⟩ with
    its 95% interval, for everyone and per condition."""
    fig = make_subplots(
        rows=1, cols=2, subplot_titles=["Mean score (share of the test right)", "Normalized gain ⟨g⟩, 95% interval"]
    )
    tests = [
        (n, v, c)
        for n, v, c in (("before", r.pre_mean, PRE), ("after", r.post_mean, POST), ("delayed", r.delayed_mean, DELAYED))
        if v is not None
    ]
    fig.add_bar(
        x=[t[0] for t in tests],
        y=[t[1] for t in tests],
        marker={"color": [t[2] for t in tests]},
        text=[f"{t[1]:.0%}" for t in tests],
        textposition="outside",
        showlegend=False,
        hovertemplate="%{x}: %{y:.1%}<extra></extra>",
        row=1,
        col=1,
    )
    groups = [("everyone", r.gain), *[(c, g) for c, g in r.gain_by_condition.items() if len(r.gain_by_condition) > 1]]
    shown = [(n, g) for n, g in groups if g is not None]
    fig.add_scatter(
        x=[n for n, _ in shown],
        y=[g.value for _, g in shown],
        mode="markers+text",
        marker={"size": 12, "color": GAIN},
        text=[f"{g.value:.2f}" for _, g in shown],
        textposition="middle right",
        showlegend=False,
        error_y={
            "type": "data",
            "symmetric": False,
            "array": [g.high - g.value for _, g in shown],
            "arrayminus": [g.value - g.low for _, g in shown],
        },
        customdata=[[g.low, g.high, g.n] for _, g in shown],
        hovertemplate="%{x}: ⟨g⟩ %{y:.3f} [%{customdata[0]:.3f}, %{customdata[1]:.3f}], "
        "n %{customdata[2]}<extra></extra>",
        row=1,
        col=2,
    )
    fig.update_yaxes(range=[0, 1.1], tickformat=".0%", row=1, col=1)
    fig.update_yaxes(range=[min([-0.2, *[g.low for _, g in shown]]), 1], zeroline=True, row=1, col=2)
    fig.update_xaxes(type="category")
    return _layout(fig, 340)


def gain_notice(r: Report) -> str:
    if r.gain is None:
        return (
            f"{r.n_matched} participant(s) took both tests: the gain appears from {MIN_CELL} on "
            "(smaller groups are not shown)."
        )
    line = (
        f"The {r.gain.n} participants who took both tests went from {r.pre_mean:.0%} to {r.post_mean:.0%} right: "
        f"a normalized gain ⟨g⟩ = {r.gain.value:.2f} (95% interval {r.gain.low:.2f} to {r.gain.high:.2f}), "
        f"{'low' if r.gain.value < 0.3 else 'medium' if r.gain.value < 0.7 else 'high'} on Hake's scale."
    )
    if r.hedges is not None:
        a, b = list(r.gain_by_condition)
        line += (
            f" Between conditions, Hedges' g = {r.hedges.value:.2f} ({r.hedges.low:.2f} to {r.hedges.high:.2f}) "
            f"for {b} over {a}" + (": the interval includes 0." if r.hedges.low <= 0 <= r.hedges.high else ".")
        )
    return line


def items_figure(r: Report) -> go.Figure:
    """Per item slot: its difficulty (share right) before and after, and its discrimination (corrected
    point-biserial) before."""
    fig = make_subplots(
        rows=2,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.12,
        subplot_titles=["Share right per item", "Discrimination (item vs the rest of the test)"],
    )
    for phase, colour, name in (("pre", PRE, "before"), ("post", POST, "after")):
        rows = [x for x in r.items if x["phase"] == phase and x["difficulty"] is not None]
        fig.add_bar(
            x=[f"{x['slot']}" for x in rows],
            y=[x["difficulty"] for x in rows],
            name=name,
            marker={"color": colour},
            customdata=[x["objective"] for x in rows],
            hovertemplate=f"item %{{x}} ({name}): %{{y:.0%}} right<br>%{{customdata}}<extra></extra>",
            row=1,
            col=1,
        )
    rows = [x for x in r.items if x["phase"] == "pre" and x["discrimination"] is not None]
    fig.add_bar(
        x=[f"{x['slot']}" for x in rows],
        y=[x["discrimination"] for x in rows],
        name="discrimination",
        marker={"color": ["#d62728" if x["discrimination"] < 0.2 else "#7f7f7f" for x in rows]},
        hovertemplate="item %{x}: r = %{y:.2f}<extra></extra>",
        row=2,
        col=1,
    )
    fig.update_yaxes(range=[0, 1], tickformat=".0%", row=1, col=1)
    fig.update_xaxes(type="category", title_text="item", row=2, col=1)
    fig.update_layout(barmode="group")
    return _layout(fig, 480)


def items_notice(r: Report) -> str:
    post = [x for x in r.items if x["phase"] == "post" and x["difficulty"] is not None]
    if not post:
        return f"Item figures appear once {MIN_CELL} participants have taken a test."
    hard = min(post, key=lambda x: x["difficulty"])
    weak = [
        x["slot"]
        for x in r.items
        if x["phase"] == "pre" and x["discrimination"] is not None and x["discrimination"] < 0.2
    ]
    return (
        f"Hardest after the lesson: item {hard['slot']} ({OBJECTIVES[hard['objective']][0].lower()}), "
        f"{hard['difficulty']:.0%} right. "
        + (
            f"Items {', '.join(map(str, weak))} discriminate weakly "
            "(r < 0.2, red): they tell strong and weak participants apart "
            "poorly."
            if weak
            else "Every item discriminates (r ≥ 0.2)."
        )
    )


def misconceptions_figure(r: Report) -> go.Figure:
    rows = [m for m in r.misconceptions if isinstance(m["chosen"], int)][:12]
    fig = go.Figure(
        go.Bar(
            x=[m["chosen"] for m in rows],
            y=[m["misconception"] for m in rows],
            orientation="h",
            marker={"color": "#e6550d"},
            text=[m["chosen"] for m in rows],
            textposition="auto",
            hovertemplate="%{y}: chosen %{x} times<extra></extra>",
        )
    )
    fig.update_yaxes(autorange="reversed")
    return _layout(fig, 120 + 36 * max(1, len(rows)))


def steps_figure(r: Report) -> go.Figure:
    """Median time per lesson step, coloured by the participants' median engagement there; the share right after
    the lesson on the items of the step's objectives as diamonds."""
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    rows = [s for s in r.steps if s["median_seconds"] is not None]
    fig.add_bar(
        x=[str(s["step"]) for s in rows],
        y=[s["median_seconds"] for s in rows],
        name="median time (s)",
        marker={"color": [LEVEL_COLOURS.get(s["level"], "#cccccc") for s in rows]},
        customdata=[[s["title"], s["level"] or "–", s["n"]] for s in rows],
        hovertemplate="step %{x}: %{customdata[0]}<br>median %{y:.0f} s, engagement %{customdata[1]}, "
        "n %{customdata[2]}<extra></extra>",
    )
    graded = [s for s in r.steps if s["post_correct"] is not None]
    fig.add_scatter(
        x=[str(s["step"]) for s in graded],
        y=[s["post_correct"] for s in graded],
        mode="markers",
        name="share right after (its items)",
        marker={"symbol": "diamond", "size": 11, "color": GAIN},
        hovertemplate="step %{x}: %{y:.0%} right after the lesson<extra></extra>",
        secondary_y=True,
    )
    fig.update_xaxes(type="category", title_text="lesson step")
    fig.update_yaxes(title_text="seconds", secondary_y=False)
    fig.update_yaxes(range=[0, 1], tickformat=".0%", secondary_y=True)
    return _layout(fig, 360)


def steps_notice(r: Report) -> str:
    w = r.weakest_step
    if w is None:
        return "Which step failed the class appears once post-test items have 5 participants or more."
    return f"Weakest step: {w['step']}. {w['title']}: its items were {w['post_correct']:.0%} right after the lesson" + (
        f"; participants spent a median {w['median_seconds']:.0f} s there, and the median participant got as far as "
        f"{w['level']}."
        if w["median_seconds"] is not None
        else "."
    )


def survey_figure(r: Report) -> go.Figure:
    names = [text.split(":")[0] for _, text in TLX]
    values = [r.tlx[k] for k, _ in TLX]
    fig = go.Figure(
        go.Bar(
            x=names,
            y=[v if v is not None else 0 for v in values],
            marker={"color": "#756bb1"},
            text=[f"{v:.0f}" if v is not None else "<5" for v in values],
            textposition="outside",
            hovertemplate="%{x}: %{y:.1f} of 100<extra></extra>",
        )
    )
    fig.update_yaxes(range=[0, 110], title_text="raw NASA-TLX (0-100)")
    fig.update_xaxes(type="category")
    return _layout(fig, 300)


def feel_figure(r: Report) -> go.Figure:
    fig = go.Figure(
        go.Scatter(
            x=[f for f, _ in r.feel],
            y=[g for _, g in r.feel],
            mode="markers",
            marker={"size": 9, "color": POST, "opacity": 0.6},
            hovertemplate="felt %{x} of 7, measured gain %{y:+.0%}<extra></extra>",
        )
    )
    fig.update_xaxes(range=[0.5, 7.5], dtick=1, title_text="how much they feel they learned (1-7)")
    fig.update_yaxes(tickformat="+.0%", title_text="measured: after − before", zeroline=True)
    return _layout(fig, 320)


def feel_notice(r: Report) -> str:
    if r.feel_gain_rho is None:
        return f"The feeling of learning beside the gain appears from {MIN_CELL} participants."
    rho = r.feel_gain_rho
    return f"Feeling of learning against measured gain: Spearman's ρ = {rho:.2f} over {len(r.feel)} participants" + (
        ": those who felt they learned more did not gain more." if rho < 0.1 else "."
    )
