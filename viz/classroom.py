"""Classroom mode's pictures: the distribution of a class's answers, and the join link as a QR code.

Pure builders (no Streamlit). Option labels come from the class store, which refuses ``<`` and ``>``,
so plotly (which reads a few HTML tags in labels) only ever gets plain text.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

import pandas as pd
import plotly.graph_objects as go
import segno

ANSWER, OTHER, PENDING = "#2ca02c", "#9e9e9e", "#1f77b4"


def answers_figure(options: Sequence[str], counts: Sequence[int], answer: int | None = None) -> go.Figure:
    """A horizontal bar per option, its count and share written on it; once `answer` (the model's) is
    given, its bar is green and the others grey (before: all blue, so nothing gives it away)."""
    total = sum(counts)
    colours = [PENDING if answer is None else ANSWER if i == answer else OTHER for i in range(len(options))]
    text = [f"{c} ({c / total:.0%})" if total else "0" for c in counts]
    labels = [f"{o}  ✓ model" if i == answer else o for i, o in enumerate(options)]
    fig = go.Figure(
        go.Bar(
            x=list(counts),
            y=labels,
            orientation="h",
            marker={"color": colours},
            text=text,
            textposition="auto",
            hovertemplate="%{y}: %{x}<extra></extra>",
        )
    )
    fig.update_layout(
        height=70 + 48 * len(options),
        margin={"l": 10, "r": 10, "t": 30, "b": 10},
        title={"text": f"{total} answer{'s' if total != 1 else ''}", "font": {"size": 14}},
        xaxis={"title": None, "rangemode": "tozero", "dtick": max(1, (max(counts, default=0) + 4) // 5)},
        yaxis={"autorange": "reversed", "type": "category"},
        showlegend=False,
    )
    return fig


def qr_png(text: str, scale: int = 8) -> bytes:
    """`text` (the join link) as a QR code, PNG bytes (error correction M: readable from a projector)."""
    buf = io.BytesIO()
    segno.make(text, error="m").save(buf, kind="png", scale=scale, border=2)
    return buf.getvalue()


BOARD_SETTINGS = {
    "d_model": "d_model",
    "n_heads": "heads",
    "n_layers": "layers",
    "d_ff": "d_ff",
    "batch_size": "batch",
    "steps": "steps",
    "warmup": "warm-up",
    "lr_scale": "lr scale",
    "dropout": "dropout",
    "label_smoothing": "smoothing",
    "look_ahead_mask": "look-ahead mask",
}


def board_table(runs: Sequence[dict]) -> pd.DataFrame:
    """The class board as a table: one row per student's run (settings, last loss, exact match, translation)."""
    rows = []
    for r in runs:
        row = {"student": r["student"]}
        row.update(
            {
                label: r["settings"].get(key)
                for key, label in BOARD_SETTINGS.items()
                if any(key in x["settings"] for x in runs)
            }
        )
        row["last loss"] = round(r["losses"][-1], 3) if r["losses"] else None
        row["exact match"] = f"{r['exact_match']:.0%}" if r["exact_match"] is not None else "–"
        row["source"], row["translation"] = r["source"], r["translation"]
        rows.append(row)
    return pd.DataFrame(rows).set_index("student") if rows else pd.DataFrame()


def board_figure(runs: Sequence[dict], title: str = "Training loss of every run on the board") -> go.Figure:
    """Every posted run's training loss by step, one line per student (or per run's "name")."""
    names = [r.get("name") or f"student {r['student']}" for r in runs]
    fig = go.Figure(
        [
            go.Scatter(
                x=r["steps"],
                y=r["losses"],
                mode="lines+markers",
                name=name,
                hovertemplate=name + "<br>step %{x}: loss %{y:.3f}<extra></extra>",
            )
            for r, name in zip(runs, names, strict=True)
        ]
    )
    fig.update_layout(
        height=320,
        margin={"l": 10, "r": 10, "t": 30, "b": 10},
        xaxis_title="step",
        yaxis_title="training loss",
        title={"text": title, "font": {"size": 14}},
        legend={"orientation": "h"},
    )
    return fig


def board_notice(runs: Sequence[dict]) -> str:
    """Which run ended lowest and which translates most held-out sentences exactly (computed from the runs)."""
    if not runs:
        return ""
    low = min((r for r in runs if r["losses"]), key=lambda r: r["losses"][-1], default=None)
    scored = [r for r in runs if r["exact_match"] is not None]
    parts = []
    if low is not None:
        parts.append(f"student {low['student']}'s run ends with the lowest training loss ({low['losses'][-1]:.3f})")
    if scored:
        best = max(r["exact_match"] for r in scored)
        tied = [str(r["student"]) for r in scored if r["exact_match"] == best]
        if best == 0:
            parts.append("no run translates a held-out sentence exactly yet")
        elif len(tied) == 1:
            parts.append(f"student {tied[0]}'s translates the most held-out sentences exactly ({best:.0%})")
        else:
            parts.append(
                f"students {', '.join(tied[:-1])} and {tied[-1]} tie for the most held-out sentences "
                f"translated exactly ({best:.0%})"
            )
    return "; ".join(parts) + "." if parts else ""


# -- the roster: where each student is (classroom/roster.py) ----------------------------------------------------------
ROSTER_STATES = {
    "following": "following",
    "free": "exploring (you let the class)",
    "chose": "exploring (chose to)",
    "left": "left without choosing to",
}


def roster_counts(rows: Sequence[dict]) -> dict[str, int]:
    """How many students are in each state, away (no page of the class open lately), and voted in each round."""
    out = {k: 0 for k in (*ROSTER_STATES, "unknown", "away", "voted 1", "voted 2")}
    for r in rows:
        if not r["present"]:
            out["away"] += 1
            continue
        out[r["status"]["mode"] if r["status"] else "unknown"] += 1
        out["voted 1"] += r["voted"][0]
        out["voted 2"] += r["voted"][1]
    return out


def roster_line(rows: Sequence[dict]) -> str:
    """The roster in one line for the teacher's sidebar: who follows, who explores, who left without choosing to (the
    students to look at first), who is away."""
    c = roster_counts(rows)
    here = len(rows) - c["away"]
    parts = [f"{here} student{'s' if here != 1 else ''} here", f"{c['following']} following"]
    exploring = c["free"] + c["chose"]
    if exploring:
        parts.append(f"{exploring} exploring")
    if c["left"]:
        parts.append(f":orange[**{c['left']} left without choosing to**]")
    if c["away"]:
        parts.append(f"{c['away']} away")
    return " · ".join(parts)


def roster_where(status: dict | None, titles: dict[str, str]) -> str:
    """Where a student is, in words: the plan's stop their view is on, else the page (and lesson step)."""
    if not status:
        return "–"
    page = titles.get(status.get("page", ""), status.get("page", "–"))
    if status.get("page") == "lesson" and status.get("step"):
        page += f", step {status['step']}"
    return f"stop {status['stop'] + 1} · {page}" if status.get("stop") is not None else page


def roster_table(rows: Sequence[dict], titles: dict[str, str]) -> pd.DataFrame:
    """One row per student, by number, those to look at first on top (left without choosing to, then away): their
    state, where they are, and whether they voted on the open question (in each round held)."""
    order = {"left": 0, "away": 1}

    def state(r: dict) -> str:
        if not r["present"]:
            return "away (no page open)"
        if not r["status"]:
            return "joined"
        text = ROSTER_STATES[r["status"]["mode"]]
        changed = r["status"].get("changed")
        return text + (f" (changed the {', '.join(changed)})" if changed and r["status"]["mode"] == "left" else "")

    def key(r: dict) -> tuple:
        mode = "away" if not r["present"] else (r["status"] or {}).get("mode", "")
        return order.get(mode, 2), r["number"]

    out = [
        {
            "student": f"student {r['number']}",
            "state": state(r),
            "where": roster_where(r["status"], titles),
            "voted": " · ".join(f"round {i + 1} ✓" for i, v in enumerate(r["voted"]) if v) or "–",
        }
        for r in sorted(rows, key=key)
    ]
    return pd.DataFrame(out, columns=["student", "state", "where", "voted"])
