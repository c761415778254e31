"""The encoder layer's numbers the encoder page sets beside the model's: LayerNorm's statistics per word (mean,
variance and standard deviation over the D features, before and after normalising), its affine step γ · x̂ + β
recomputed from the learned parameters, and one word's vector through the stack (its length after each stage and
its cosine to the input and to the stage before). viz/layers.py draws these numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from torch import Tensor


@dataclass(frozen=True)
class RowStats:
    """Per word, over its D features: what LayerNorm subtracts and divides by (population variance, as LayerNorm)."""

    mean: Tensor  # [T]
    var: Tensor  # [T] mean of (x - mean)², divided by D, not D - 1
    std: Tensor  # [T] √var


def row_stats(x: Tensor) -> RowStats:
    """Mean, variance and standard deviation of each row of x [T, D] over its D features."""
    return RowStats(x.mean(-1), x.var(-1, unbiased=False), x.std(-1, unbiased=False))


def affine(normed: Tensor, gamma: Tensor, beta: Tensor) -> Tensor:
    """γ · x̂ + β, LayerNorm's second step: x̂ [T, D], γ and β [D] -> [T, D]."""
    return normed * gamma + beta


@dataclass(frozen=True)
class StageGeometry:
    """One word's vector after each stage of the stack: its length, and where it points."""

    norms: np.ndarray  # [S] ‖v_s‖
    to_input: np.ndarray  # [S] cos(v_s, v_0): v_0 is the input (embedding + PE)
    to_prev: np.ndarray  # [S] cos(v_s, v_{s-1}); NaN for the input, which has no stage before it (a blank cell)


def stage_geometry(vectors: np.ndarray) -> StageGeometry:
    """Norms and cosines of the vectors [S, D], one per stage (a zero vector has cosine 0 to everything)."""
    norms = np.linalg.norm(vectors, axis=1)  # [S]
    safe = np.where(norms > 0, norms, 1.0)
    unit = vectors / safe[:, None]  # [S, D]
    to_input = unit @ unit[0]  # [S]
    to_prev = np.concatenate([[np.nan], (unit[1:] * unit[:-1]).sum(1)])  # [S]
    return StageGeometry(norms, to_input, to_prev)
