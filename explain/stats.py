"""The statistics of a study's report, as plain functions of plain numbers (numpy; no model, no drawing).

- `difficulty`: the share of participants who answered an item right (classical test theory's p).
- `point_biserial`: an item's discrimination, the correlation of its 0/1 score with the rest of the test
  (the total *without* the item, the "corrected" item-total correlation, so an item is not correlated with itself).
- `hake_gain`: Hake's (1998) normalized gain of a group, ⟨g⟩ = (⟨post⟩ − ⟨pre⟩) / (1 − ⟨pre⟩) on the matched
  participants' mean scores (fractions of the test), with a 95% percentile-bootstrap interval over participants
  (seeded: the same data give the same interval).
- `hedges_g`: the standardised difference of two groups' means with the small-sample correction
  J = 1 − 3 / (4(n₁ + n₂) − 9), and its 95% interval from the usual large-sample standard error.
- `sus_score` (Brooke 1996: odd items score − 1, even items 5 − score, the sum × 2.5 gives 0-100) and `tlx_raw`
  (raw NASA-TLX: the mean of the six subscales, 0-100, without the pairwise weights).
- `suppress`: a cell that counts fewer than `MIN_CELL` participants is not shown (a count, a share or a mean of
  one to four people can name them); a count of 0 names nobody and stays.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

MIN_CELL = 5
BOOTSTRAP = 2000
Z95 = 1.959963984540054


@dataclass(frozen=True)
class Interval:
    value: float
    low: float
    high: float
    n: int

    def contains(self, x: float) -> bool:
        return self.low <= x <= self.high


def difficulty(scores: Sequence[int] | npt.NDArray[np.float64]) -> float | None:
    """The share right of an item's 0/1 scores (None: nobody answered)."""
    return float(np.mean(scores)) if len(scores) else None


def point_biserial(
    item: Sequence[int] | npt.NDArray[np.float64], rest: Sequence[float] | npt.NDArray[np.float64]
) -> float | None:
    """Pearson's r between an item's 0/1 scores and the rest scores (the test total without the item); None when
    either does not vary (everyone right, or everyone wrong: the item cannot discriminate on these people)."""
    x, y = np.asarray(item, float), np.asarray(rest, float)
    if len(x) < 2 or x.std() == 0 or y.std() == 0:
        return None
    return float(np.corrcoef(x, y)[0, 1])


def item_table(matrix: Sequence[Sequence[int]]) -> list[tuple[float | None, float | None]]:
    """(difficulty, corrected point-biserial) of every column of a participants × items 0/1 matrix."""
    m = np.asarray(matrix, float)
    if m.ndim != 2 or not m.size:
        return []
    total = m.sum(1)
    return [(difficulty(m[:, j]), point_biserial(m[:, j], total - m[:, j])) for j in range(m.shape[1])]


def _gain(pre: np.ndarray, post: np.ndarray) -> float:
    a, b = float(pre.mean()), float(post.mean())
    return (b - a) / (1 - a) if a < 1 else math.nan


def hake_gain(
    pre: Sequence[float], post: Sequence[float], seed: int = 0, resamples: int = BOOTSTRAP
) -> Interval | None:
    """⟨g⟩ of matched participants' pre and post scores (fractions, 0-1) with its 95% bootstrap interval; None
    for no participant or a perfect pre-test."""
    pre_a, post_a = np.asarray(pre, float), np.asarray(post, float)
    if len(pre_a) != len(post_a):
        raise ValueError("pre and post scores must be matched")
    if not len(pre_a) or pre_a.mean() >= 1:
        return None
    g = _gain(pre_a, post_a)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(pre_a), size=(resamples, len(pre_a)))
    a, b = pre_a[idx].mean(1), post_a[idx].mean(1)
    ok = a < 1
    boots = (b[ok] - a[ok]) / (1 - a[ok])
    low, high = np.percentile(boots, [2.5, 97.5]) if len(boots) else (math.nan, math.nan)
    return Interval(g, float(low), float(high), len(pre_a))


def hedges_g(x: Sequence[float], y: Sequence[float]) -> Interval | None:
    """Hedges' g of mean(y) − mean(x) (pooled standard deviation, small-sample corrected) with its 95% interval;
    None when a group has fewer than 2 people or nobody varies."""
    a, b = np.asarray(x, float), np.asarray(y, float)
    n1, n2 = len(a), len(b)
    if n1 < 2 or n2 < 2:
        return None
    pooled = math.sqrt(((n1 - 1) * a.var(ddof=1) + (n2 - 1) * b.var(ddof=1)) / (n1 + n2 - 2))
    if pooled == 0:
        return None
    j = 1 - 3 / (4 * (n1 + n2) - 9)
    g = j * (b.mean() - a.mean()) / pooled
    se = math.sqrt((n1 + n2) / (n1 * n2) + g * g / (2 * (n1 + n2)))
    return Interval(float(g), float(g - Z95 * se), float(g + Z95 * se), n1 + n2)


def mean_interval(values: Sequence[float]) -> Interval | None:
    """A mean with its 95% t-free (normal) interval; None for fewer than 2 values."""
    v = np.asarray(values, float)
    if len(v) < 2:
        return None
    half = Z95 * v.std(ddof=1) / math.sqrt(len(v))
    return Interval(float(v.mean()), float(v.mean() - half), float(v.mean() + half), len(v))


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's rank correlation (average ranks for ties); None when either does not vary."""
    if len(x) != len(y) or len(x) < 3:
        return None
    rx, ry = _ranks(x), _ranks(y)
    if rx.std() == 0 or ry.std() == 0:
        return None
    return float(np.corrcoef(rx, ry)[0, 1])


def _ranks(v: Sequence[float]) -> np.ndarray:
    a = np.asarray(v, float)
    order = a.argsort(kind="stable")
    ranks = np.empty(len(a))
    ranks[order] = np.arange(len(a), dtype=float)
    for value in np.unique(a):  # ties share their average rank
        same = a == value
        ranks[same] = ranks[same].mean()
    return ranks


def sus_score(answers: Sequence[int]) -> float:
    """The System Usability Scale's 0-100 score of ten answers 1-5 (items 1, 3, 5 ... positive; 2, 4 ... negative)."""
    if len(answers) != 10 or not all(1 <= a <= 5 for a in answers):
        raise ValueError("SUS has ten answers from 1 to 5")
    return 2.5 * sum((a - 1) if i % 2 == 0 else (5 - a) for i, a in enumerate(answers))


def tlx_raw(answers: Sequence[float]) -> float:
    """Raw NASA-TLX: the mean of the six subscales (each 0-100)."""
    if len(answers) != 6 or not all(0 <= a <= 100 for a in answers):
        raise ValueError("raw TLX has six answers from 0 to 100")
    return float(np.mean(answers))


def suppress(n: int) -> bool:
    """True when a cell of `n` participants must not be shown (1 to MIN_CELL - 1)."""
    return 0 < n < MIN_CELL


def count_cell(n: int) -> int | str:
    return f"<{MIN_CELL}" if suppress(n) else n
