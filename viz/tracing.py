"""Causal tracing drawn: one heatmap per grid of explain/tracing.py, and the notice that says what it measured.

Judging words and their rules (tests/test_tracing_rules.py checks them over the 84 held-out coreference
sentences and their partners):
- a part "carries" the difference only when restoring it alone brings back at least HALF (0.5) of it
  (`explain.tracing.HALF`), measured by a patch, never read from a weight;
- reading a word in a layer "is needed" only when hiding it there (its weight 0 in every row, rows
  renormalised) loses at least HALF;
- a word "decides" the followed word only when the two sentences differ in that word alone and the other
  sentence's translation has another word at that position (the pair itself is the intervention).
Every other sentence states numbers without judging them.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from explain.tracing import HALF, Grid, HeadTracing, Pair, Tracing
from viz.heatmap import heatmap
from viz.lesson_base import q_at

MYSTERY = "(the mystery head: hidden)"


def num(x: float) -> str:
    """A share to two decimals, never "-0.00" (a patch of numbers equal to float error is 0)."""
    text = f"{x:.2f}"
    return "0.00" if text == "-0.00" else text


def span(values) -> str:
    """ "0.83 to 1.00", or one number when both ends round alike."""
    lo, hi = num(min(values)), num(max(values))
    return lo if lo == hi else f"{lo} to {hi}"


def hidden_rows(g: Grid, hidden: tuple[str, int] | None) -> set[int]:
    """Rows of the heads grid that belong to the mystery head `hidden` (module, head), drawn blank."""
    if hidden is None:
        return set()
    module, head = hidden
    return {
        r
        for r, label in enumerate(g.rows)
        if module == f"dec.{label.split()[1]}.cross_attn" and label.split()[3] == str(head)
    }


def grid_figure(
    g: Grid, word: str, hidden: set[int] = frozenset(), height: int | None = None, title: str | None = None
) -> go.Figure:
    """The grid as a heatmap: share restored (or lost) per (row, position), 1 = all of the difference; the word's
    probability in that run on hover. Rows in `hidden` are blank and labelled as the mystery head."""
    z = np.array(g.share, dtype=float)
    rows = [f"{label} {MYSTERY}" if r in hidden else label for r, label in enumerate(g.rows)]
    z[list(hidden)] = np.nan
    what = "share lost" if g.lost else "share restored"
    fig = heatmap(
        z,
        list(g.columns),
        rows,
        "share",
        title=title,
        x_title="position",
        y_title="",
        digits=2,
        height=height or max(200, min(520, 70 + 30 * len(rows))),
    )
    prob = np.array(g.prob, dtype=float)
    prob[list(hidden)] = np.nan
    text = [["" if r in hidden else f"{num(v)}" for v in row] for r, row in enumerate(z)]
    fig.update_traces(
        text=text,
        customdata=np.round(prob, 4),
        hovertemplate=f"%{{y}}<br>position %{{x}}<br>{what}: %{{text}}<br>p({word}): %{{customdata}}<extra></extra>",
    )
    return fig


def best_head(t: Tracing, hidden: tuple[str, int] | None = None) -> tuple[str, int]:
    """(module, head) of the encoder-decoder head whose z, patched alone at the followed position, brings back the
    most (a plan's mystery head left out): where the page's one-head section opens."""
    g = t.heads
    rows = [r for r in range(len(g.rows)) if "all" not in g.rows[r] and r not in hidden_rows(g, hidden)]
    r = max(rows, key=lambda r: g.share[r][-1] if g.share[r][-1] == g.share[r][-1] else -1.0)  # (nan: untraceable)
    words = g.rows[r].split()
    return f"dec.{words[1]}.cross_attn", int(words[3])


def _cells(g: Grid, hidden: set[int] = frozenset()):
    return [(r, c, g.share[r][c]) for r in range(len(g.rows)) if r not in hidden for c in range(len(g.columns))]


def pair_notice(p: Pair) -> str:
    """The two runs and the word followed. "decides" only under the pair rule (module docstring)."""
    word = p.word
    theirs = p.corrupt_words[p.position] if p.position < len(p.corrupt_words) else None
    src, other = p.clean.tokens, p.corrupt.tokens
    changed = ", ".join(
        f"“{src[i] if i < len(src) else '<eos>'}” → “{other[i] if i < len(other) else '<eos>'}”" for i in p.differs
    )
    out = (
        f"The sentences differ at {changed}. Fed the first translation up to position {p.position} "
        f"({q_at(p.tgt_labels, -1)}), the model gives “{word}” p = {p.p_clean:.3f} in the first run and "
        f"{p.p_corrupt:.3f} in the second: a difference of {p.gap:+.3f} to trace."
    )
    if len(p.differs) == 1 and theirs is not None and theirs != word:
        i = p.differs[0]
        out += (
            f" “{src[i]}” decides “{word}” here: with “{other[i]}” in its place the model writes “{theirs}” "
            "at this position."
        )
    elif theirs == word:
        out += f" (Both translations have “{word}” here: only its probability moves.)"
    if not p.traceable:
        out += (
            f" That is under {0.1:g}: too small to share out, so the grids below stay empty. Follow another word "
            "of the translation, or change another word of the sentence."
        )
    return out


def encoder_notice(t: Tracing) -> str:
    """Which source positions carry the difference in the encoder (share >= HALF at some layer)."""
    g, p = t.encoder, t.pair
    carriers = sorted({c for r, c, s in _cells(g) if s >= HALF})
    r, c, s = max(_cells(g), key=lambda x: x[2])
    if not carriers:
        return (
            f"No single encoder position carries half of the difference: the most, {num(s)}, is "
            f"{q_at(g.columns, c)} {g.rows[r]}. The difference is spread over several positions."
        )
    names = ", ".join(q_at(g.columns, j) for j in carriers)
    spans = "; ".join(
        (f"{q_at(g.columns, j)} " if len(carriers) > 1 else "") + span([row[j] for row in g.share]) for j in carriers
    )
    rest = [(j, s) for _, j, s in _cells(g) if j not in carriers]
    out = (
        f"{'Only ' if len(carriers) == 1 else ''}{names} {'carries' if len(carriers) == 1 else 'carry'} the "
        f"difference in the encoder: patched at one layer, its vector alone brings back {spans} (over the layers)."
    )
    if rest:
        out += f" No other position brings back more than {num(max(max(s for _, s in rest), 0.0))}."
    if len(p.differs) < len(g.columns):
        out += " (At the input the other positions hold the same vector in both runs: patching them changes nothing.)"
    return out


def heads_notice(t: Tracing, hidden: set[int] = frozenset()) -> str:
    """Single heads vs each layer's heads together, at their best position."""
    g = t.heads
    single = [x for x in _cells(g, hidden) if "all" not in g.rows[x[0]]]
    together = [x for x in _cells(g) if "all" in g.rows[x[0]]]
    r, c, s = max(single, key=lambda x: x[2])
    lead = (
        f"{g.rows[r].capitalize()} carries it alone: its z at {q_at(g.columns, c)} brings back {num(s)}."
        if s >= HALF
        else f"No single encoder-decoder head carries it: the most one head's z brings back is {num(s)} ({g.rows[r]}, "
        f"at {q_at(g.columns, c)})."
    )
    parts = []
    for row in sorted({x[0] for x in together}):
        c2, s2 = max(((c, s) for r2, c, s in together if r2 == row), key=lambda x: x[1])
        layer = g.rows[row].replace(" all heads", "")
        verb = f"carry it ({num(s2)}, " if s2 >= HALF else f"bring back {num(s2)} ("
        parts.append(f"{layer}'s heads together {verb}at {q_at(g.columns, c2)})")
    together_text = "; ".join(parts)
    out = f"{lead} {together_text[:1].upper()}{together_text[1:]}."
    if hidden:
        out += " (The mystery head is left out until your teacher reveals it.)"
    return out


def decoder_notice(t: Tracing) -> str:
    """Where, bottom to top, the stream at the followed position first carries the difference (>= HALF)."""
    g, p = t.decoder, t.pair
    col = len(g.columns) - 1  # the followed position
    first = next((r for r in range(len(g.rows)) if g.share[r][col] >= HALF), None)
    here = q_at(g.columns, col)
    if first is None:
        r, c, s = max(_cells(g), key=lambda x: x[2])
        return (
            f"The decoder's stream at {here} never carries half of the difference alone: the most is {num(s)}, "
            f"{g.rows[r]} at {q_at(g.columns, c)}."
        )
    before = f" (just before it: {num(g.share[first - 1][col])})" if first > 0 else ""
    earlier = max((s for r, c, s in _cells(g) if c != col), default=None)
    layer, _, part = g.rows[first].partition(" after ")
    out = (
        f"The decoder's stream at {here}, the position that writes “{p.word}”, first carries the difference in "
        f"{layer}, after its {part}: {num(g.share[first][col])}{before}."
    )
    if earlier is not None:
        out += f" At the earlier positions no patch brings back more than {num(max(earlier, 0.0))}."
    return out


def mask_notice(t: Tracing) -> str:
    """Which (word, layer) is needed: hiding it loses >= HALF."""
    g, p = t.mask, t.pair
    needed = [(r, c, s) for r, c, s in _cells(g) if s >= HALF and g.rows[r] != "every layer"]
    every = g.rows.index("every layer")
    r, c, s = max(((r, c, s) for r, c, s in _cells(g) if r != every), key=lambda x: x[2])
    if needed:
        out = " ".join(
            f"Hidden from {g.rows[r]}, {q_at(g.columns, c)} takes {num(s)} of “{p.word}”'s lead with it: "
            f"reading it there is needed."
            for r, c, s in needed
        )
    else:
        out = (
            f"No word hidden from one layer is needed: the most that goes is {num(s)} ({q_at(g.columns, c)} hidden "
            f"from {g.rows[r]})."
        )
    for i in p.differs:
        if i < len(g.columns):
            out += (
                f" Hidden from every layer at once, {q_at(g.columns, i)} takes {num(g.share[every][i])} of it "
                f"({'needed' if g.share[every][i] >= HALF else 'not needed'})."
            )
    return out


def head_notice(h: HeadTracing) -> str:
    """One head part by part: the part and position that bring back the most."""
    if h.off:
        return (
            f"{h.module} head {h.head} is switched off in the sidebar: its z is 0 in both runs, so none of its "
            "parts can bring anything back."
        )
    best = [max(_cells(g), key=lambda x: x[2]) for g in (h.query, h.key)]
    (r, c, s), (r2, c2, s2) = best
    out = (
        f"Its {h.query.rows[r]} at {q_at(h.query.columns, c)} brings back {num(s)}"
        f"{' (it carries the difference)' if s >= HALF else ''}; its {h.key.rows[r2]} at "
        f"{q_at(h.key.columns, c2)} {num(s2)}{' (it carries the difference)' if s2 >= HALF else ''}."
    )
    z = h.query.rows.index("output z")
    zs = max(h.query.share[z])
    out += f" Its output z, at its best position, brings back {num(zs)}: " + (
        "this head alone carries the difference there."
        if zs >= HALF
        else "patched alone, this head does not carry half of the difference; compare the grids above."
    )
    return out
