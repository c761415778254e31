"""The sinusoidal positional encoding's formulas, in float64, to set beside the model's table (the float32 buffer of
`model.transformer.sinusoidal_encoding`): PE(pos, 2i) = sin(pos / 10000^(2i / d_model)), PE(pos, 2i+1) = cos(...).

- `frequencies`, `wavelength`: w_i = 1 / 10000^(2i / d_model), and the wavelength 2π / w_i of pair i.
- `worked`: one entry of the table computed from the formula, beside the model's buffer.
- `pair_angle`, `block`, `rotation`, `shift_errors`: for a fixed offset k, PE(pos+k) = M_k PE(pos), with M_k
  block-diagonal (2x2 rotations by the angles k·w_i) and the same for every pos.
- `formula_table`, `float64_shift_error`: the whole table from the formula, and the identity's own rounding error.

viz/positional.py draws these numbers; ui/positional_steps.py takes them from here.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import torch
from torch import Tensor

BASE = 10000.0


def frequencies(d_model: int) -> Tensor:
    """w_i = 1 / 10000^(2i / d_model) for i = 0 .. d_model/2 - 1, float64."""
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)
    return 1.0 / torch.pow(torch.tensor(BASE, dtype=torch.float64), two_i / d_model)


def wavelength(i: int, d_model: int) -> float:
    """The wavelength of pair i, 2π / w_i = 2π · 10000^(2i / d_model): the positions one full turn takes."""
    return 2 * math.pi * float(BASE ** (2 * i / d_model))


@dataclass(frozen=True)
class Worked:
    """PE(pos, 2i) and PE(pos, 2i+1) from the formula, and what the model's buffer holds."""

    pos: int
    i: int
    d_model: int
    exponent: float  # 2i / d_model
    denominator: float  # 10000^(2i / d_model)
    angle: float  # pos / denominator
    sin: float  # formula, float64
    cos: float
    buffer_sin: float  # the model's PE table (float32)
    buffer_cos: float

    @property
    def error(self) -> float:
        return max(abs(self.sin - self.buffer_sin), abs(self.cos - self.buffer_cos))


def worked(pos: int, i: int, buffer: Tensor) -> Worked:
    """The formula for one (pos, i), in float64, beside buffer[pos, 2i] and buffer[pos, 2i+1]."""
    L, D = buffer.shape
    if not (0 <= pos < L and 0 <= i < D // 2):
        raise ValueError(f"pos must be in [0, {L}) and i in [0, {D // 2})")
    exponent = 2 * i / D
    denominator = BASE**exponent
    angle = pos / denominator
    return Worked(
        pos,
        i,
        D,
        exponent,
        denominator,
        angle,
        math.sin(angle),
        math.cos(angle),
        float(buffer[pos, 2 * i]),
        float(buffer[pos, 2 * i + 1]),
    )


def pair_angle(k: int, i: int, d_model: int) -> float:
    """k·w_i: the angle by which M_k turns pair i, whatever pos is."""
    return k * float(frequencies(d_model)[i])


def block(k: int, i: int, d_model: int) -> Tensor:
    """The 2x2 block of M_k for the pair (2i, 2i+1): [[cos kw_i, sin kw_i], [-sin kw_i, cos kw_i]]."""
    a = pair_angle(k, i, d_model)
    return torch.tensor([[math.cos(a), math.sin(a)], [-math.sin(a), math.cos(a)]], dtype=torch.float64)


def rotation(k: int, d_model: int) -> Tensor:
    """M_k [D, D], block-diagonal: PE(pos + k) = M_k @ PE(pos) for every pos. Depends on k only."""
    a = k * frequencies(d_model)  # [D/2]
    c, s = torch.cos(a), torch.sin(a)
    M = torch.zeros(d_model, d_model, dtype=torch.float64)
    idx = torch.arange(0, d_model, 2)
    M[idx, idx] = c  # sin(x + a) = sin x cos a + cos x sin a
    M[idx, idx + 1] = s
    M[idx + 1, idx] = -s  # cos(x + a) = cos x cos a - sin x sin a
    M[idx + 1, idx + 1] = c
    return M


def shift_errors(pe: Tensor, k: int, positions: Iterable[int] | None = None) -> list[tuple[int, int, float]]:
    """(pos, pos + k, max |M_k PE(pos) - PE(pos + k)|) for each pos with pos + k inside the table [L, D], with the
    same M_k for every pos (by default every pos; else those of `positions` that fit)."""
    L, D = pe.shape
    if not 0 <= k < L:
        raise ValueError(f"k must be in [0, {L})")
    pe64 = pe.detach().to(torch.float64)
    M = rotation(k, D)
    chosen = range(L - k) if positions is None else [p for p in positions if 0 <= p and p + k < L]
    return [(p, p + k, float((M @ pe64[p] - pe64[p + k]).abs().max())) for p in chosen]


def formula_table(max_len: int, d_model: int) -> Tensor:
    """PE [max_len, D] from the formula in float64, interleaved as in the paper (sin in 2i, cos in 2i+1)."""
    angles = torch.arange(max_len, dtype=torch.float64)[:, None] * frequencies(d_model)[None, :]  # [L, D/2]
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(angles), torch.cos(angles)
    return pe


def float64_shift_error(max_len: int, d_model: int, k: int) -> float:
    """max |M_k PE(pos) - PE(pos + k)| over every pos, with PE computed in float64 (the identity's own error)."""
    pe = formula_table(max_len, d_model)
    if k >= max_len:
        return 0.0
    return float((pe[: max_len - k] @ rotation(k, d_model).T - pe[k:]).abs().max())


def sign_changes(values: Tensor) -> int:
    """How many times a curve [L] crosses zero: changes of sign between its non-zero values (sin(0) = 0 at position 0
    starts a sine dimension on the axis, which is no crossing)."""
    signs = torch.sign(values)
    signs = signs[signs != 0]  # [L'] the curve's sides of the axis
    return int((signs[1:] != signs[:-1]).sum())
