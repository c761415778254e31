"""Positional encoding: the formula with numbers, PE(pos+k) as a rotation of PE(pos), word order.

The formulas are explain/positional.py's (the float64 table, one worked entry `worked`, M_k `rotation` and its
check); this module draws them:

- `shift_check`: for a fixed offset k, PE(pos+k) = M_k PE(pos), with M_k block-diagonal (2x2 rotations by the
  angles k·w_i) and the same for every pos, as a table.
- `make_order`: the permutations the word-order experiment offers (the experiment itself, which runs
  the model, is `explain.experiments.permutation_check`).
"""

from __future__ import annotations

import random
from collections.abc import Iterable

import pandas as pd
import plotly.graph_objects as go
import torch

from explain.positional import pair_angle, shift_errors, sign_changes, wavelength


def shift_check(pe: torch.Tensor, k: int, positions: Iterable[int] | None = None) -> pd.DataFrame:
    """For each pos (with pos + k inside the table): max |M_k PE(pos) - PE(pos + k)| with the same M_k."""
    return pd.DataFrame(shift_errors(pe, k, positions), columns=["pos", "pos + k", "max |M_k·PE(pos) − PE(pos+k)|"])


def curves_figure(pe: torch.Tensor, dims: list[int]) -> go.Figure:
    """PE[:, dim] against position, one line per chosen dimension."""
    pe = pe.detach().to(torch.float64)
    L, D = pe.shape
    fig = go.Figure()
    for d in dims:
        i = d // 2
        kind = "sin" if d % 2 == 0 else "cos"
        fig.add_trace(
            go.Scatter(
                x=list(range(L)),
                y=pe[:, d].tolist(),
                mode="lines+markers",
                marker={"size": 4},
                name=f"dim {d} ({kind}, i={i}, wavelength {wavelength(i, D):.1f})",
                hovertemplate=f"dim {d}<br>pos %{{x}}<br>PE %{{y:.4f}}<extra></extra>",
            )
        )
    fig.update_layout(
        height=380,
        margin={"l": 10, "r": 10, "t": 10, "b": 10},
        xaxis={"title": "position"},
        yaxis={"title": "PE(pos, dim)", "range": [-1.1, 1.1]},
        legend={"orientation": "h", "y": -0.25},
    )
    return fig


# --- Word order ---------------------------------------------------------------------------------

ORDERS = ("reversed", "rotated by one", "first two swapped", "shuffled")


def make_order(n: int, how: str, seed: int = 0) -> list[int]:
    """A permutation of range(n): new position j holds old word order[j]."""
    base = list(range(n))
    if how == "reversed":
        return base[::-1]
    if how == "rotated by one":
        return base[1:] + base[:1]
    if how == "first two swapped":
        return [1, 0, *base[2:]] if n >= 2 else base
    if how == "shuffled":
        rng = random.Random(seed)
        rng.shuffle(base)
        return base
    raise ValueError(f"unknown order {how!r}; expected one of {ORDERS}")


# --- Sizes: defaults that fit any model -----------------------------------------------------------


def default_dims(d_model: int, wanted=(0, 1, 10, 40)) -> list[int]:
    """The curves drawn first: `wanted` where the model has them, else the first and the last pair."""
    dims = [d for d in wanted if d < d_model]
    return dims if len(dims) == len(wanted) else sorted({0, 1, max(0, d_model - 2), d_model - 1})


def clamp(value: int, low: int, high: int) -> int:
    """A number input's default inside its range (a tiny model has few positions or pairs)."""
    return max(low, min(value, high))


# --- The Illustrated Transformer's layout ---------------------------------------------------------


def concatenated(pe: torch.Tensor) -> torch.Tensor:
    """The Illustrated Transformer's layout: all sines (left half), then all cosines (right half)."""
    return torch.cat([pe[:, 0::2], pe[:, 1::2]], dim=1)


# --- Notices: one computed sentence per figure ----------------------------------------------------


def sentence_notice(pe) -> str:
    """The sentence's PE rows [T, D]: neighbours differ a lot in the first pair, hardly in the last.

    Rule: "hardly move" only when the last dimension changes at least 10 times less than the first."""
    pe = torch.as_tensor(pe).detach().to(torch.float64)
    T, D = pe.shape
    if T < 2:
        return "A single position: one row, PE(0) = (0, 1, 0, 1, …)."
    step = (pe[1:] - pe[:-1]).abs().mean(0)  # [D] mean change between neighbouring positions
    verdict = (
        "the left columns tell neighbours apart, the right ones hardly move"
        if step[-1] * 10 <= step[0]
        else "here both ends change"
    )
    return (
        f"From one position to the next, dimension 0 changes by {float(step[0]):.2f} on average and dimension "
        f"{D - 1} by {float(step[-1]):.1e}: {verdict}. "
        f"PE(0) and PE({T - 1}) are {float((pe[0] - pe[-1]).norm()):.2f} apart."
    )


def table_notice(pe) -> str:
    """The whole table [L, D]: every row has length √(D/2), and rows drift apart with distance."""
    pe = torch.as_tensor(pe).detach().to(torch.float64)
    L, D = pe.shape
    norms = pe.norm(dim=1)
    out = (
        f"Every row has the same length, √(D/2) = {float(norms.mean()):.3f} (each pair is sin² + cos² = 1; "
        f"largest deviation {float((norms - (D / 2) ** 0.5).abs().max()):.0e}), so PE moves the embedding by the "
        "same amount at every position."
    )
    if L > 2:
        near, far = float((pe[0] - pe[1]).norm()), float((pe[0] - pe[L - 1]).norm())
        out += f" ‖PE(0) − PE(1)‖ = {near:.2f}, ‖PE(0) − PE({L - 1})‖ = {far:.2f}."
    return out


def curves_notice(pe, dims: list[int]) -> str:
    """The chosen curves: how many times each changes sign over the table's positions. "Low dimensions are fast
    waves, high ones slow" only when the sign changes never grow with the dimension (by more than one: a sin and
    its cos)."""
    pe = torch.as_tensor(pe).detach().to(torch.float64)
    L, D = pe.shape
    parts = []
    for d in dims:
        parts.append(f"dim {d}: {sign_changes(pe[:, d])}")
    counts = [sign_changes(pe[:, d]) for d in sorted(dims)]
    ordered = all(a + 1 >= b for a, b in zip(counts, counts[1:], strict=False))  # ±1: sin and cos of one pair
    return (
        f"Sign changes over the {L} positions, "
        + ", ".join(parts)
        + (
            ": low dimensions are fast waves, high ones slow; together they give every position its own pattern."
            if ordered
            else "."
        )
    )


def rotation_notice(M: torch.Tensor, k: int, i: int) -> str:
    """M_k [D, D]: how many entries are non-zero (block-diagonal), and the angle of the chosen pair."""
    D = M.shape[0]
    nz = int((M.abs() > 1e-12).sum())
    angle = pair_angle(k, i, D)
    return (
        f"Only {nz} of the {D * D:,} entries of M_{k} are non-zero (the 2 × 2 blocks on the diagonal). Pair {i} "
        f"turns by k·w_{i} = {angle:.4f} rad, whatever pos is."
    )


def layouts_notice(pe: torch.Tensor) -> str:
    D = pe.shape[1]
    return (
        f"The same {D} numbers per position, in another order: column 2i here is column i there, column 2i+1 "
        f"here is column {D // 2} + i there. A model must be trained with one layout; this one uses the paper's."
    )


def permuted_notice(enc: torch.Tensor, enc_perm: torch.Tensor, order, labels: list[str]) -> str:
    """PE off: the permuted sentence's rows are the original rows, moved (the first moved word as the example)."""
    moved = [j for j, o in enumerate(order) if o != j]
    if not moved:
        return "Nothing moved: the two heatmaps are the same rows in the same order."
    j = moved[0]
    diff = float((enc_perm[j] - enc[order[j]]).abs().max())
    return (
        f"Row {j} of the permuted output is row {order[j]} (“{labels[order[j]]}”) of the original, moved: the "
        f"largest difference is {diff:.0e}. Same rows, another order."
    )
