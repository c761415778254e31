"""Multi-head attention: every head side by side, one word across heads and layers, Concat and W^O, and the
model before and after heads are switched off; with their notice lines.

Notice words and their rules (checked in tests/test_notice_rules_pages.py): a head "mostly" does what gets the
largest share of its rows; "the most focused" head has the largest single weight; a head "contributes the
most" with the largest share of the concat's sum of squares. With one head left in a layer, the translation
"changes" when the greedy output differs from the unmodified model's by any token and "keeps" otherwise; a layer
"needs more than one head" only when every one of its heads alone changes the translation; the model is "less
sure" only when the lowest probability of the unmodified translation's words falls by at least LESS_SURE (0.1).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from explain.experiments import OneHeadLeft
from model.pipeline import Analysis
from model.trace import Trace
from viz.attention import dims, module_name
from viz.heatmap import as_array, heatmap, outline

OFF_OPACITY = 0.3  # a switched-off head is drawn faded


MAX_GRID_LABELS = 30  # a grid's words are written up to this many rows (a 20-word French row was left unnamed)


def head_figure(
    weights,
    x_labels: list[str],
    y_labels: list[str],
    head: int,
    off: bool,
    height: int | None = None,
    row_labels: bool = True,
    mark_row: int | None = None,
) -> go.Figure:
    """A small attention-weights heatmap for one head; faded and titled "(off)" when switched off. In a row of
    heads only the first writes the query words (`row_labels`): the others give their room to the cells (the
    rows are the same words in the same order, and hovering a cell still names its query). `mark_row`: a row
    outlined on every head (the row a question asks about)."""
    title = f"head {head} (off)" if off else f"head {head}"
    height = max(height or 0, 90 + 16 * len(y_labels)) if height else None  # at least 16 px a row
    fig = heatmap(
        weights,
        x_labels,
        y_labels,
        "weights",
        title=title,
        x_title="key",
        y_title="query" if row_labels else None,
        height=height,
    )
    if mark_row is not None:
        outline(fig, (mark_row, mark_row), (0, len(x_labels) - 1))
    fig.update_traces(showscale=False, texttemplate=None)
    if off:
        fig.update_traces(opacity=OFF_OPACITY)
        fig.add_annotation(
            text="switched off: z = 0",
            xref="paper",
            yref="paper",
            x=0.5,
            y=0.5,
            showarrow=False,
            font={"size": 16, "color": "#b71c1c"},
            bgcolor="rgba(255,255,255,0.8)",
        )
    # (a grid's figure is narrow: its key words stand upright, else they overlap one another)
    # every key word is written (plotly would skip every other one on a narrow figure, the very words a notice names)
    fig.update_layout(
        xaxis={
            "showticklabels": len(x_labels) <= MAX_GRID_LABELS,
            "tickangle": -90,
            "tickmode": "array",
            "tickvals": list(x_labels),
            "ticktext": list(x_labels),
        },
        yaxis={"showticklabels": row_labels and len(y_labels) <= MAX_GRID_LABELS},
    )
    return fig


def block_figure(
    values,
    y_labels: list[str],
    n_heads: int,
    kind: str = "activations",
    title: str | None = None,
    off: list[int] | tuple[int, ...] = (),
) -> go.Figure:
    """A [T, D] matrix whose columns are n_heads blocks of d_k (concat, or W_o's output), borders marked."""
    z = as_array(values)
    width = z.shape[1]
    d_k = width // n_heads
    fig = heatmap(z, dims(width), y_labels, kind, title=title, x_title="dimension", y_title="word")
    for h in range(1, n_heads):
        fig.add_vline(x=h * d_k - 0.5, line_width=3, line_color="black")
    for h in range(n_heads if n_heads > 1 else 0):
        fig.add_annotation(
            x=h * d_k + (d_k - 1) / 2,
            y=1.0,
            xref="x",
            yref="paper",
            yanchor="bottom",
            text=f"head {h}" + (" (off)" if h in off else ""),
            showarrow=False,
        )
    fig.update_layout(xaxis={"showticklabels": False}, margin={"t": 60})
    return fig


def word_heads(weights, word: int) -> np.ndarray:
    """weights [H, Tq, Tk] -> [H, Tk]: where one query word looks in every head."""
    return as_array(weights)[:, word, :]


def heads_bars_figure(
    rows: np.ndarray, x_labels: list[str], counts: tuple[int, ...] = (1, 2, 0), off: list[int] | tuple[int, ...] = ()
) -> go.Figure:
    """Side-by-side bar charts of one word's weights: head 0 alone, heads 0-1, all heads (0 = all)."""
    n_heads = rows.shape[0]
    counts = tuple(c if c else n_heads for c in counts)
    titles = [f"{c} head{'s' if c > 1 else ''}" + (" (all)" if c == n_heads and c > 2 else "") for c in counts]
    fig = make_subplots(rows=1, cols=len(counts), subplot_titles=titles, shared_yaxes=True)
    palette = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]
    for col, c in enumerate(counts, start=1):
        for h in range(c):
            fig.add_trace(
                go.Bar(
                    x=list(x_labels),
                    y=rows[h].tolist(),
                    name=f"head {h}" + (" (off)" if h in off else ""),
                    marker_color=palette[h % len(palette)],
                    opacity=OFF_OPACITY if h in off else 1.0,
                    legendgroup=f"h{h}",
                    showlegend=col == len(counts),
                    hovertemplate=f"head {h}<br>%{{x}}: %{{y:.4f}}<extra></extra>",
                ),
                row=1,
                col=col,
            )
        fig.update_xaxes(type="category", tickangle=-45, row=1, col=col)
    fig.update_yaxes(range=[0, 1], title_text="attention weight", row=1, col=1)
    fig.update_layout(barmode="group", height=360, margin={"l": 10, "r": 10, "t": 40, "b": 10})
    return fig


def head_labels(n_layers: int, n_heads: int) -> list[str]:
    return [f"L{layer} h{h}" for layer in range(n_layers) for h in range(n_heads)]


def word_across_layers(trace: Trace, stack: str, kind: str, n_layers: int, word: int) -> np.ndarray:
    """[L·H, Tk]: where one query word looks, every head of every layer (rows "L0 h0", "L0 h1", ...)."""
    return np.concatenate(
        [as_array(trace[f"{module_name(stack, kind, layer)}.weights"][0, :, word, :]) for layer in range(n_layers)]
    )


def top_words(
    rows: np.ndarray,
    row_labels: list[str],
    key_labels: list[str],
    skip: int | None = None,
    column: str = "strongest other word",
) -> pd.DataFrame:
    """For each row (head), the key word with the largest weight (other than position `skip`)."""
    z = rows.copy()
    if skip is not None:
        z[:, skip] = -1.0
    best = z.argmax(1)
    return pd.DataFrame(
        {column: [key_labels[j] for j in best], "weight": [round(float(rows[i, j]), 4) for i, j in enumerate(best)]},
        index=list(row_labels),
    )


def find_word(tokens: tuple[str, ...] | list[str], word: str) -> int | None:
    """Position of the first occurrence of `word` in the tokens, or None."""
    return list(tokens).index(word) if word in tokens else None


# --- Before / after switching heads off ---------------------------------------------------------


def token_probs(trace: Trace, token_ids: list[int] | tuple[int, ...], labels: list[str]) -> pd.DataFrame:
    """p(token) at every decoder position, read from the trace's "probs" [1, Tt, V]."""
    probs = trace["probs"][0]  # [Tt, V]
    n = min(len(token_ids), probs.shape[0])
    return pd.DataFrame(
        {"token": labels[:n], "probability": [round(float(probs[t, token_ids[t]]), 4) for t in range(n)]}
    )


def compare_probs(
    before: Trace, after: Trace, token_ids: list[int] | tuple[int, ...], labels: list[str]
) -> pd.DataFrame:
    """The same output tokens scored by the unmodified and the modified model (both teacher-forced)."""
    b = token_probs(before, token_ids, labels)
    a = token_probs(after, token_ids, labels)
    return pd.DataFrame(
        {
            "token": b["token"],
            "p before": b["probability"],
            "p after": a["probability"],
            "change": (a["probability"] - b["probability"]).round(4),
        }
    )


def output_change(before: Trace, after: Trace, module: str, labels: list[str]) -> pd.DataFrame:
    """Per word: the size of the attention module's output before and after, and of their difference."""
    b, a = before[f"{module}.out"][0], after[f"{module}.out"][0]  # [T, D]
    return pd.DataFrame(
        {
            "word": labels,
            "‖out‖ before": as_array(b.norm(dim=-1)).round(4),
            "‖out‖ after": as_array(a.norm(dim=-1)).round(4),
            "‖after − before‖": as_array((a - b).norm(dim=-1)).round(4),
        }
    )


def head_z_norms(trace: Trace, module: str, labels: list[str]) -> pd.DataFrame:
    """‖z‖ of every head at every word ([T, H]): a head that is off has z = 0 everywhere."""
    z = trace[f"{module}.z"][0]  # [H, T, d_k]
    norms = as_array(z.norm(dim=-1)).T.round(4)  # [T, H]
    return pd.DataFrame(norms, index=list(labels), columns=[f"head {h}" for h in range(z.shape[0])])


def greedy_probs(a: Analysis) -> pd.DataFrame:
    """The translation's tokens with the probability the model gave each when it chose it (from "probs")."""
    return token_probs(a.trace, [step.chosen for step in a.greedy.steps], a.next_labels)


# --- Shapes, and what each head does ----------------------------------------------------------


def shapes_table(d_model: int, n_heads: int, n_tokens: int) -> pd.DataFrame:
    """The paper's base model next to ours: shapes through multi-head attention (rows = words, T = m)."""
    d_k = d_model // n_heads
    return pd.DataFrame(
        {
            "paper (base)": ["m × 512", "8", "m × 64", "m × 512 (8 × 64)", "512 × 512", "m × 512"],
            f"this model (T = {n_tokens})": [
                f"{n_tokens} × {d_model}",
                str(n_heads),
                f"{n_tokens} × {d_k}",
                f"{n_tokens} × {d_model} ({n_heads} × {d_k})",
                f"{d_model} × {d_model}",
                f"{n_tokens} × {d_model}",
            ],
        },
        index=["input X", "heads h", "each head's Z_i", "Concat(Z_1 … Z_h)", "W^O", "output"],
    )


MOSTLY = 0.5  # head_pattern: "mostly" needs at least this share of a row on average


def head_pattern(weights, labels: list[str]) -> str:
    """A few words on what one head [Tq, Tk] (self-attention) does, from its average weights.

    Rule: "mostly" only when the pattern takes at least MOSTLY (0.5) of a row on average; below, "leans to"."""
    w = np.nan_to_num(as_array(weights))
    n = len(w)
    cands = {"itself": float(np.diag(w).mean()) if w.shape[0] == w.shape[1] else 0.0}
    if w.shape[0] == w.shape[1] and n > 1:
        cands["the previous word"] = float(np.diag(w, -1).sum() / n)
        cands["the next word"] = float(np.diag(w, 1).sum() / n)
    col = w.mean(0)
    j = int(col.argmax())
    cands[f"“{labels[j]}”"] = float(col[j])
    what, share = max(cands.items(), key=lambda kv: kv[1])
    return f"{'mostly' if share >= MOSTLY else 'leans to'} {what} ({share:.2f} of a row on average)"


def heads_notice(weights, labels: list[str], off=()) -> str:
    """All heads of a layer [H, Tq, Tk] (self-attention): one phrase per head."""
    w = as_array(weights)
    parts = [f"head {h}{' (off)' if h in off else ''} → {head_pattern(w[h], labels)}" for h in range(len(w))]
    return "What each head does: " + "; ".join(parts) + "."


def word_heads_notice(rows: np.ndarray, x_labels: list[str], word_label: str) -> str:
    """One word's weights in every head [H, Tk]: the head that is most certain, and where the heads disagree. A word
    that sees one key only (the look-ahead mask leaves <bos> itself) gives it 1 in every head: no head is the most
    focused, the mask decided."""
    seen = (rows > 0).any(0)
    if int(seen.sum()) == 1:
        key = x_labels[int(seen.argmax())]
        return (
            f"“{word_label}” may look at “{key}” only (the other keys are masked): every head gives it "
            f"{rows.max():.2f}, so the heads cannot differ here. Pick a later word."
        )
    top = rows.argmax(1)
    h = int(rows.max(1).argmax())
    distinct = len(set(int(j) for j in top))
    return (
        f"“{word_label}”: head {h} is the most focused, {rows[h].max():.2f} on “{x_labels[int(top[h])]}”; "
        f"the {len(rows)} heads look most at {distinct} different word{'s' if distinct != 1 else ''}."
    )


def concat_notice(concat, n_heads: int, off=()) -> str:
    """Concat [T, D]: each block of d_k columns is one head's Z; its share of the total size."""
    c = as_array(concat)
    d_k = c.shape[1] // n_heads
    sq = np.array([float((c[:, h * d_k : (h + 1) * d_k] ** 2).sum()) for h in range(n_heads)])
    share = sq / max(sq.sum(), 1e-12)
    h = int(share.argmax())
    out = (
        f"Block h holds head h's Z, untouched: {n_heads} blocks of d_k = {d_k} columns. Head {h} contributes the "
        f"most ({share[h]:.0%} of the sum of squares)"
    )
    if off:
        out += f"; switched-off heads {', '.join(map(str, off))} are all zeros ({share[list(off)].sum():.0%})"
    return out + "."


def out_notice(concat, out, labels: list[str], off=()) -> str:
    """Concat · W_O [T, D]: every output column mixes all heads (the heads that are on: a switched-off head gives
    zeros); which word's vector is longest."""
    c, o = as_array(concat), as_array(out)
    norms = np.linalg.norm(o, axis=1)
    i = int(norms.argmax())
    ratio = float(norms.mean() / max(np.linalg.norm(c, axis=1).mean(), 1e-12))
    which = f"heads {', '.join(map(str, off))} give" if len(off) > 1 else f"head {', '.join(map(str, off))} gives"
    mixes = f"every head that is on ({which} zeros)" if off else "every head"
    return (
        f"No block borders any more: each of the {o.shape[1]} output columns mixes {mixes}. “{labels[i]}” gets "
        f"the longest output vector (‖out‖ = {norms[i]:.2f}); on average ‖out‖ is {ratio:.2f} × ‖concat‖."
    )


# --- One head left: one way for words to interact --------------------------------------------------

LESS_SURE = 0.1  # one_head_notice: "less sure" only when the lowest p falls by at least this much


def module_title(module: str) -> str:
    """ "dec.1.cross_attn" -> "decoder 1 · encoder-decoder"."""
    stack, layer, kind = module.split(".")
    what = {"self_attn": "self-attention", "cross_attn": "encoder-decoder"}[kind]
    return f"{'encoder' if stack == 'enc' else 'decoder'} {layer} · {what}"


def one_head_figure(r: OneHeadLeft) -> go.Figure:
    """Rows: attention layers; columns: the head left on. Colour: the lowest p the model still gives a word of
    its unmodified translation (teacher-forced); text: ✓ the greedy translation is unchanged, ✗ it changed."""
    mods = r.modules
    z = np.array([[min(r.run(m, h).gold_probs) for h in range(r.n_heads)] for m in mods])
    text = [
        [f"{'✓' if r.run(m, h).translation == r.translation else '✗'} {z[i, h]:.2f}" for h in range(r.n_heads)]
        for i, m in enumerate(mods)
    ]
    fig = heatmap(
        z,
        [f"only head {h}" for h in range(r.n_heads)],
        [module_title(m) for m in mods],
        "probs",
        x_title="the one head left on",
        y_title="layer",
        height=90 + 44 * len(mods),
    )
    fig.update_traces(
        text=text,
        texttemplate="%{text}",
        textfont={"size": 14},
        hovertemplate="%{y}, %{x}: lowest p %{z:.3f}<extra></extra>",
    )
    return fig


def one_head_table(r: OneHeadLeft, module: str) -> pd.DataFrame:
    """One layer: per head left on, its translation and the lowest probability of the unmodified translation's
    words (and which word), teacher-forced."""
    rows = []
    for h in range(r.n_heads):
        run = r.run(module, h)
        t = int(np.argmin(run.gold_probs))
        rows.append(
            {
                "head left on": h,
                "translation": run.translation or "(empty)",
                "same as all heads": run.translation == r.translation,
                "lowest p of the original words": round(run.gold_probs[t], 4),
                "at the word": r.gold_labels[t],
            }
        )
    return pd.DataFrame(rows)


def one_head_notice(r: OneHeadLeft) -> str:
    """Which layers' translations change with one head left, which need more than one head, and how much less
    sure the model gets (rules in the module docstring)."""
    base = min(r.gold_probs)
    mods = r.modules
    changed = {m: [h for h in range(r.n_heads) if r.run(m, h).translation != r.translation] for m in mods}
    n = sum(len(v) for v in changed.values())
    worst = min(r.runs, key=lambda x: min(x.gold_probs))
    low = min(worst.gold_probs)
    t = int(np.argmin(worst.gold_probs))
    out = f"One head left in one layer at a time: {n} of {len(r.runs)} runs change the translation."
    needs = [m for m in mods if len(changed[m]) == r.n_heads]
    if needs:
        m = needs[0]
        out += (
            f" {module_title(m).capitalize()} needs more than one head: each of its heads alone changes it "
            f"(head {changed[m][0]} alone: “{r.run(m, changed[m][0]).translation}”)."
        )
    keep = [m for m in mods if not changed[m]]
    if keep:
        out += f" {len(keep)} of {len(mods)} layers keep it with any one head."
    if base - low >= LESS_SURE:
        out += (
            f" The model is less sure somewhere: the lowest probability of the original words falls from "
            f"{base:.2f} to {low:.2f} (“{r.gold_labels[t]}”, {module_title(worst.module)}, head {worst.head} "
            "alone)."
        )
    else:
        out += f" The lowest probability of the original words stays at {low:.2f} or more (all heads on: {base:.2f})."
    return out
