"""Reading a few seeds with the care they allow (Table 3 at toy scale, viz/ablations.py).

With n seeds a side, a change that does nothing still leaves all n of its runs on one side of the base's n runs
by chance: of the C(2n, n) ways to split 2n exchangeable runs into two groups of n, two put one group wholly
above the other, so the chance is 2 / C(2n, n) per metric (0.10 for 3 seeds: about 1 time in 10). That is also
the smallest p-value an exact permutation test of 3 against 3 can give, so no 3-seed difference is
"significant" at 0.05, whatever its size.

A group that varies one setting in steps (d_k 16, 8, 4) should move one way: when its verdicts do not (d_k 4
"within the spread", d_k 8 "worse"), seed noise is the likelier reading, and the notice says so instead of
explaining either row.
"""

from __future__ import annotations

import math

RANK = {"worse": 0, "same": 1, "better": 2}


def chance_apart(n: int) -> float:
    """The chance that n runs of a change that does nothing all lie on one side of the base's n runs: 2 / C(2n, n)."""
    return 2 / math.comb(2 * n, n)


def non_monotone(points: list[tuple[float, str]]) -> bool:
    """Verdicts ("worse", "same", "better"; the base counts as "same") along the values of one setting: do they go
    up and down again instead of one way? "mixed" verdicts are left out."""
    ranks = [RANK[v] for _, v in sorted(points) if v in RANK]
    steps = [b - a for a, b in zip(ranks, ranks[1:], strict=False) if b != a]
    return any(x * y < 0 for x, y in zip(steps, steps[1:], strict=False))
