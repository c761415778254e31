"""The heatmaps' colour scales are the colour-blind-safe ones viz/heatmap.py documents, and stay readable when
deuteranopia or protanopia is simulated (Machado, Oliveira & Fernandes 2009, severity 1.0, in linear RGB):
lightness changes monotonically along each arm of a scale, and a diverging scale's two ends stay apart
(CIE ΔE > 25: clearly different colours; about 2 is just noticeable)."""

from __future__ import annotations

import numpy as np
import pytest
from plotly.colors import get_colorscale, sample_colorscale, unlabel_rgb

from viz import heatmap as vh

MACHADO = {
    "normal": np.eye(3),
    "protanopia": np.array(
        [[0.152286, 1.052583, -0.204868], [0.114503, 0.786281, 0.099216], [-0.003882, -0.048116, 1.051998]]
    ),
    "deuteranopia": np.array(
        [[0.367322, 0.860646, -0.227968], [0.280085, 0.672501, 0.047413], [-0.011820, 0.042940, 0.968881]]
    ),
}
N = 21  # samples along a scale


def to_linear(c: np.ndarray) -> np.ndarray:
    c = c / 255
    return np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)


def lab(linear: np.ndarray) -> np.ndarray:
    """CIE L*a*b* (D65) of linear sRGB rows."""
    m = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]])
    xyz = linear @ m.T / np.array([0.95047, 1.0, 1.08883])
    f = np.where(xyz > (6 / 29) ** 3, np.cbrt(xyz), xyz / (3 * (6 / 29) ** 2) + 4 / 29)
    return np.stack([116 * f[:, 1] - 16, 500 * (f[:, 0] - f[:, 1]), 200 * (f[:, 1] - f[:, 2])], axis=1)


def seen(scale, vision: str) -> np.ndarray:
    """L*a*b* of N colours along `scale` as a reader with `vision` sees them."""
    colours = sample_colorscale(get_colorscale(scale) if isinstance(scale, str) else scale, np.linspace(0, 1, N))
    rgb = np.array([unlabel_rgb(c) for c in colours], dtype=float)
    return lab(np.clip(to_linear(rgb) @ MACHADO[vision].T, 0, 1))


def test_the_scales_are_the_documented_colour_blind_safe_ones():
    used = {k: v["colorscale"] for k, v in vh.SCALES.items() if isinstance(v["colorscale"], str)}
    assert set(used.values()) <= set(vh.SEQUENTIAL) | set(vh.DIVERGING), used
    assert used["weights"] in vh.SEQUENTIAL and used["probs"] in vh.SEQUENTIAL
    assert all(used[k] in vh.DIVERGING for k in ("scores", "encoding", "activations"))
    for bad in ("RdYlGn", "Spectral", "Jet", "Rainbow", "Viridis_r"):  # red-green or unordered lightness
        assert bad not in used.values()


@pytest.mark.parametrize("vision", list(MACHADO))
@pytest.mark.parametrize("scale", vh.SEQUENTIAL)
def test_sequential_scales_keep_their_order_in_lightness(scale, vision):
    L = seen(scale, vision)[:, 0]
    assert np.all(np.diff(L) < 0), (scale, vision, L.round(1))  # white -> dark, step by step
    assert L[0] - L[-1] > 50, (scale, vision, L.round(1))


@pytest.mark.parametrize("vision", list(MACHADO))
@pytest.mark.parametrize("scale", vh.DIVERGING)
def test_diverging_scales_keep_both_arms_apart(scale, vision):
    c = seen(scale, vision)
    L, mid = c[:, 0], N // 2
    assert np.all(np.diff(L[: mid + 1]) > 0) and np.all(np.diff(L[mid:]) < 0), (scale, vision, L.round(1))
    assert L[mid] > 90  # the middle (0) is near white
    ends = float(np.linalg.norm(c[0] - c[-1]))
    assert ends > 25, f"{scale}: the two ends look alike under {vision} (ΔE {ends:.0f})"
    quarter = float(np.linalg.norm(c[N // 4] - c[-1 - N // 4]))  # halfway out on each arm
    assert quarter > 20, f"{scale}: the arms look alike under {vision} (ΔE {quarter:.0f})"


def test_mask_scale_is_grey_and_white():
    assert vh.SCALES["mask"]["colorscale"] == [[0.0, "#9e9e9e"], [1.0, "#ffffff"]]


def test_cell_labels_only_where_they_fit_and_never_shrunk():
    small = vh.heatmap(np.zeros((5, 5)), list("abcde"), list("abcde"), "weights")
    assert small.data[0].texttemplate == "%{text}" and small.data[0].textfont.size >= 12
    wide = vh.heatmap(
        np.zeros((3, vh.MAX_TEXT_COLUMNS + 1)), [str(i) for i in range(vh.MAX_TEXT_COLUMNS + 1)], list("abc"), "weights"
    )
    assert wide.data[0].texttemplate is None
    big = vh.heatmap(np.zeros((12, 8)), [str(i) for i in range(8)], [str(i) for i in range(12)], "weights")
    assert big.data[0].texttemplate is None  # 96 cells > MAX_TEXT_CELLS
