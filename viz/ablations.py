"""Table 3 at toy scale: our rows beside the paper's, the seeds' spread as a figure, and a notice per group.

Everything is computed from the file `python -m bench.ablations --write` produces (`explain.ablations`)
and from the paper's own numbers (`explain.paper.TABLE3`). A row lies *apart from the base* (rule) only when its
seeds and the base's seeds do not overlap: all of its seeds reached 95% held-out exact match sooner (or later)
than all of the base's, or all of its final exact matches lie above (or below) all of the base's. Anything else
is "within the spread" of a few seeds, which is what most toy differences are. Every verdict is at the run's
step budget ("worse" may mean slower), and the notice states the chance of lying apart for a change that does
nothing (explain/seeds.py: 2 / C(2n, n) per metric, 0.10 for 3 seeds). A group whose verdicts are not monotone
in the setting it varies is flagged as likely seed noise and not explained.
"""

from __future__ import annotations

import statistics

import pandas as pd
import plotly.graph_objects as go

from explain.paper import TABLE3, TABLE3_FINDINGS, Variation
from explain.seeds import chance_apart, non_monotone

GROUP_TITLES = {
    "A": "(A) heads at constant computation",
    "B": "(B) key size d_k",
    "C": "(C) model size",
    "D": "(D) regularisation",
    "E": "(E) positions and scaling",
}
PAPER_NAMES = {
    "n_layers": "N",
    "d_model": "d_model",
    "d_ff": "d_ff",
    "n_heads": "h",
    "d_k": "d_k",
    "d_v": "d_v",
    "dropout": "P_drop",
    "label_smoothing": "ε_ls",
    "train_steps": "train steps",
}


def base_row(data: dict) -> dict:
    return next(r for r in data["rows"] if r["group"] == "base")


def group_rows(data: dict, group: str) -> list[dict]:
    return [r for r in data["rows"] if r["group"] == group]


def groups(data: dict) -> list[str]:
    """The paper's groups the file has rows for, in order."""
    return [g for g in GROUP_TITLES if group_rows(data, g)]


# --- figures per row ----------------------------------------------------------------------------------


def _values(row: dict, key: str) -> list[float]:
    return [s[key] for s in row["seeds"] if s[key] is not None]


def _steps(row: dict, data: dict) -> list[int]:
    """Steps to 95% per seed; a seed that never reached it counts as one evaluation after the run's end."""
    late = data["meta"]["steps"] + data["meta"]["eval_every"]
    return [s["steps_to_95"] if s["steps_to_95"] is not None else late for s in row["seeds"]]


def _spread(values: list[float], fmt: str) -> str:
    if not values:
        return "–"
    mid = format(statistics.median(values), fmt)
    return (
        mid
        if len(values) == 1 or min(values) == max(values)
        else f"{mid} ({format(min(values), fmt)}–{format(max(values), fmt)})"
    )


def _reached(row: dict, data: dict, none: str, some: str, every: str) -> str:
    """Steps to 95% over the seeds in one of three phrasings: no seed got there within the run, some did, all did
    (filled in with {budget}, {got}, {n} and {spread}: the median steps (lowest–highest))."""
    got = _values(row, "steps_to_95")
    n, budget = len(row["seeds"]), data["meta"]["steps"]
    phrase = none if not got else some if len(got) < n else every
    return phrase.format(budget=budget, got=len(got), n=n, spread=_spread(got, ".0f"))


def steps_text(row: dict, data: dict) -> str:
    """The table's cell: steps to 95% over the seeds, or how many seeds got there within the run."""
    return _reached(row, data, "none within {budget}", "{got} of {n} seeds within {budget}: {spread}", "{spread}")


def reach_text(row: dict, data: dict) -> str:
    """The same as a phrase: "reached 95% after 350 (300–400) steps", "never reached 95% within 500 steps", ..."""
    return _reached(
        row,
        data,
        "never reached 95% within {budget} steps",
        "{got} of {n} seeds reached 95% within {budget} steps (after {spread})",
        "reached 95% after {spread} steps",
    )


def rows_frame(data: dict, group: str) -> pd.DataFrame:
    """Our rows of one group, the base first: median over the seeds (lowest–highest)."""
    out = []
    for row in [base_row(data), *group_rows(data, group)]:
        out.append(
            {
                "row": "base" if row["group"] == "base" else row["label"],
                "parameters": f"{row['parameters']:,}",
                "held-out exact match (%)": _spread([100 * v for v in _values(row, "exact_match")], ".1f"),
                "BLEU": _spread(_values(row, "bleu"), ".1f"),
                "il/elle (%)": _spread([100 * v for v in _values(row, "coref_accuracy")], ".0f"),
                "steps to 95%": steps_text(row, data),
            }
        )
    return pd.DataFrame(out)


def paper_label(v: Variation) -> str:
    if v.group == "base":
        return "base"
    if v.change.get("positions") == "learned":
        return "learned positional embedding instead of sinusoids"
    return ", ".join(
        f"{PAPER_NAMES[k]} = {val:g}" if isinstance(val, float) else f"{PAPER_NAMES[k]} = {val:,}"
        for k, val in v.changes
    )


def paper_frame(group: str) -> pd.DataFrame:
    """The paper's base row and its rows of `group` (Table 3; EN-DE development set)."""
    rows = [v for v in TABLE3 if v.group in ("base", group)]
    return pd.DataFrame(
        [
            {
                "row": paper_label(v),
                "parameters (millions)": "as base" if v.params_millions is None else str(v.params_millions),
                "perplexity (dev)": f"{v.ppl:.2f}",
                "BLEU (dev)": f"{v.bleu:.1f}",
            }
            for v in rows
        ]
    )


def steps_figure(data: dict) -> go.Figure:
    """Steps to 95% held-out exact match, one dot per seed and row (seeds at the same step share a dot, numbered with
    their count); the base's range shaded; a seed that never got there is an × past the run's end."""
    meta = data["meta"]
    late = meta["steps"] + meta["eval_every"]
    base = _steps(base_row(data), data)
    fig = go.Figure()
    fig.add_vrect(x0=min(base), x1=max(base), fillcolor="#1f77b4", opacity=0.12, line_width=0)
    fig.add_vline(x=meta["steps"], line_dash="dot", line_color="#888888")
    fig.add_annotation(
        x=meta["steps"], y=1, yref="paper", text="end of the run", showarrow=False, xanchor="right", yanchor="bottom"
    )
    labels = []
    for row in data["rows"]:
        name = f"({row['group']}) {row['label']}" if row["group"] != "base" else "base"
        labels.append(name)
        seeds_at: dict[int, list[int]] = {}
        for step, seed in zip(_steps(row, data), row["seeds"], strict=True):
            seeds_at.setdefault(step, []).append(seed["seed"])
        steps = list(seeds_at)
        n = [len(seeds_at[x]) for x in steps]
        fig.add_trace(
            go.Scatter(
                x=steps,
                y=[name] * len(steps),
                mode="markers+text",
                showlegend=False,
                # a count inside a dot that stands for several seeds; beside an × (nothing is drawn right of it)
                text=["" if k == 1 else f"{k} seeds" if x == late else str(k) for x, k in zip(steps, n, strict=True)],
                textposition=["middle right" if x == late else "middle center" for x in steps],
                textfont={"size": 12, "color": ["#555555" if x == late else "white" for x in steps]},
                marker={
                    "symbol": ["x" if x == late else "circle" for x in steps],
                    "size": [9 if k == 1 else 18 if x != late else 12 for x, k in zip(steps, n, strict=True)],
                    "color": "#1f77b4" if row["group"] == "base" else "#ff7f0e",
                },
                customdata=[
                    [
                        ", ".join(map(str, seeds_at[x])),
                        f"not within {meta['steps']} steps" if x == late else f"reached at step {x}",
                    ]
                    for x in steps
                ],
                hovertemplate="%{y}<br>seed %{customdata[0]}: %{customdata[1]}<extra></extra>",
            )
        )
    fig.update_layout(
        height=max(320, 26 * len(labels) + 90),
        margin={"l": 10, "r": 10, "t": 40, "b": 40},
        title=f"Steps to 95% held-out exact match, a dot per seed (a number: seeds at the same step; ×: not within "
        f"{meta['steps']})",
        xaxis={"title": "training steps", "range": [0, late + 2 * meta["eval_every"]]},
        yaxis={"categoryorder": "array", "categoryarray": labels[::-1], "automargin": True},
    )
    return fig


# --- what lies apart from the base ------------------------------------------------------------------------------------


def verdict(row: dict, data: dict) -> str:
    """ "better", "worse", "mixed" or "same": does the row's whole spread lie apart from the base's?"""
    base = base_row(data)
    rs, bs = _steps(row, data), _steps(base, data)
    re, be = _values(row, "exact_match"), _values(base, "exact_match")
    better = max(rs) < min(bs) or min(re) > max(be)
    worse = min(rs) > max(bs) or max(re) < min(be)
    return "mixed" if better and worse else "better" if better else "worse" if worse else "same"


def expected(row: dict, base: dict) -> str:
    """What the paper's Table 3 (and section 3.2.1 for the scaling) predicts for this change: better, worse, same."""
    change, settings = row["changes"], base["settings"]
    ((key, value),) = change.items()
    if key == "n_heads":  # the paper: fewer heads than its best are worse (1: -0.9 BLEU, 4: -0.3), more about the same
        return "worse" if value < settings[key] else "same"
    if key == "key_size":
        return "worse"
    if key in ("n_layers", "d_model", "d_ff"):
        return "better" if value > settings[key] else "worse"
    if key == "dropout":  # the paper: no dropout is clearly worse, more than 0.1 about the same
        return "better" if settings["dropout"] == 0 else "worse" if value == 0 else "same"
    if key == "label_smoothing":  # the paper: without it BLEU drops (perplexity improves)
        return "worse" if value == 0 else "better"
    if key == "positions":
        return "same" if value == "learned" else "worse"
    return "worse"  # scale_scores off: the scores' variance grows with d_k and the softmax saturates


WHY = {  # why a toy result may differ from the paper's, per changed setting: (came out better, came out worse)
    "n_heads": (
        "the toy sentences are at most 14 tokens and each French word depends on one or two English words, "
        "so a few heads find them; news sentences hold many relations at once",
        "each head gets d_k = d_model / h dimensions, and with the toy's small d_model many heads leave each "
        "too few to tell the words apart",
    ),
    "key_size": (
        "with a vocabulary of a few hundred words and short sentences, a few dimensions are enough to tell "
        "which word to look at",
        "the toy's d_k is small already, so a smaller one leaves very few dimensions",
    ),
    "n_layers": (
        "the toy grammar is shallow: one layer already links each French word to its English source",
        "the toy grammar needs little depth, and a deeper post-LN stack learns more slowly at the same "
        "learning rate and number of steps",
    ),
    "d_model": (
        "capacity is not what limits a few-hundred-word grammar",
        "capacity is not what limits a few-hundred-word grammar, and a wider model gains nothing in a few "
        "hundred steps",
    ),
    "d_ff": (
        "capacity is not what limits a few-hundred-word grammar",
        "capacity is not what limits a few-hundred-word grammar",
    ),
    "dropout": (
        "the toy set is small enough to over-fit after all",
        "within this step budget dropout slows learning; no gap between training and held-out scores is "
        "measured here, so whether it would prevent over-fitting later is not tested (the paper trains "
        "100,000 steps on 4.5 million pairs, where over-fitting is what dropout prevents)",
    ),
    "label_smoothing": (
        "each toy sentence has exactly one right translation, so there is little uncertainty for "
        "smoothing to express; the paper's gain is in BLEU on real, ambiguous text",
        "a few hundred steps are too short for the smoothed target to pay off",
    ),
    "positions": (
        "a learned table can fit the toy's short sentences as well as the sinusoids",
        "a learned table must learn every position from the data; the toy sentences fill only the first "
        "15 of its 64 rows, and a short run trains them less than the sinusoids need",
    ),
    "scale_scores": (
        "the paper's argument is about large d_k: dot products of d_k = 64 random components have a "
        "standard deviation of 8 and saturate the softmax; with the toy's small d_k they are only a "
        "few times larger, and training adapts",
        "the toy's scores grow larger than expected during training",
    ),
}
RANK = {"worse": 0, "same": 1, "better": 2}


def _row_sentence(row: dict, data: dict, v: str) -> str:
    em = _spread([100 * x for x in _values(row, "exact_match")], ".1f")
    return f"{row['label']} ({v}: {reach_text(row, data)}, final exact match {em}%)"


NOT_IN_PAPER = "(not in the paper)"


def _noisy(rows: list[dict], verdicts: dict, base: dict) -> list[dict]:
    """The rows of a group that vary one numeric setting (two rows or more per setting) and whose verdicts, the
    base's among them, are not monotone in it (explain.seeds.non_monotone)."""
    out = []
    for key in dict.fromkeys(next(iter(r["changes"])) for r in rows if r["changes"]):
        numeric = [r for r in rows if type(r["changes"].get(key)) in (int, float)]  # (not a bool, not "learned")
        value = base["settings"].get(key)
        if key == "key_size" and value is None:  # the base's d_k: d_model / h
            value = base["settings"]["d_model"] // base["settings"]["n_heads"]
        if len(numeric) < 2 or type(value) not in (int, float):
            continue
        points = [(float(value), "same")] + [(float(r["changes"][key]), verdicts[r["label"]]) for r in numeric]
        out += numeric if non_monotone(points) else []
    return out


def group_notice(data: dict, group: str) -> str:
    """Which rows of the group lie apart from the base in every seed, at the run's step budget, and which do not;
    the chance of that for a change that does nothing; a flag instead of an explanation where the group's verdicts
    are not monotone (likely seed noise); and where the toy disagrees with the paper."""
    base = base_row(data)
    rows = group_rows(data, group)
    steps, n = data["meta"]["steps"], len(base["seeds"])
    verdicts = {r["label"]: verdict(r, data) for r in rows}
    apart = [r for r in rows if verdicts[r["label"]] != "same"]
    same = [r["label"] for r in rows if verdicts[r["label"]] == "same"]
    em = _spread([100 * x for x in _values(base, "exact_match")], ".1f")
    base_text = f"the base {reach_text(base, data)}, final exact match {em}%"
    parts = [
        (
            f"At {steps} steps, apart from the base in all {n} seeds: "
            + "; ".join(_row_sentence(r, data, verdicts[r["label"]]) for r in apart)
            + "."
            if apart
            else f"At {steps} steps, no row lies apart from the base in all {n} seeds."
        ),
        (
            f"Within the base's spread ({base_text}): {', '.join(same)}."
            if same
            else f"({base_text[0].upper()}{base_text[1:]}.)"
        ),
    ]
    if apart:
        p = chance_apart(n)
        parts.append(
            f"With {n} seeds a side, a change that does nothing lands apart from the base by chance "
            f"{p:.2f} of the time per metric (about 1 in {round(1 / p)}), and two metrics are read: one such "
            "row is a hint, not a result."
        )
    noisy = _noisy(rows, verdicts, base)
    if noisy:
        parts.append(
            f"{' and '.join(r['label'] for r in noisy)} do not move one way with the setting "
            f"({', '.join(verdicts[r['label']] for r in noisy)}): seed noise is likely; neither is explained "
            "here."
        )
    if group in TABLE3_FINDINGS:
        parts.append(f"The paper found: {TABLE3_FINDINGS[group]}")
    judged = [r for r in rows if verdicts[r["label"]] != "mixed" and r not in noisy]
    agree = [r["label"] for r in judged if verdicts[r["label"]] == expected(r, base)]
    said = {"worse": "worse", "better": "better", "same": "about the same"}  # each row with its verdict

    def listed(labels: list[str]) -> str:
        return "; ".join(f"{lab} ({said[verdicts[lab]]})" for lab in labels) + "."

    found = [lab for lab in agree if NOT_IN_PAPER not in lab]
    if found:
        parts.append("As the paper found: " + listed(found))
    if len(found) < len(agree):
        parts.append("As expected: " + listed([lab for lab in agree if NOT_IN_PAPER in lab]))
    reasons: dict[tuple[str, int], list[str]] = {}
    for r in judged:
        actual, predicted = verdicts[r["label"]], expected(r, base)
        if actual != predicted:
            direction = 0 if RANK[actual] > RANK[predicted] else 1
            reasons.setdefault((next(iter(r["changes"])), direction), []).append(
                f"{r['label']} came out {actual} (expected: {predicted})"
            )
    for (key, direction), what in reasons.items():
        parts.append(f"Unlike the paper, {'; '.join(what)}: plausible, because {WHY[key][direction]}.")
    return " ".join(parts)
