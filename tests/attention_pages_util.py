"""Shared by tests/test_pages_attention.py and tests/test_pages_multi_head_encoder.py: the shipped model and its
independent pass over a sentence (module fixtures, named `bundle` and `ref`: import them into the test module), and
how both read what a page shows."""

from __future__ import annotations

import numpy as np
import pytest

from model import checkpoint
from model.pipeline import analyse, prepare
from model.trace import Interventions
from tests.apptest_util import all_text, decode, figures, tables
from ui.state import DEFAULT_SENTENCE


@pytest.fixture(scope="module", name="bundle")
def bundle_fixture():
    return checkpoint.load(checkpoint.SHIPPED)


@pytest.fixture(scope="module", name="ref")
def ref_fixture(bundle):
    cache = {}

    def get(text: str = DEFAULT_SENTENCE, iv: Interventions | None = None):
        iv = iv or Interventions()
        if (text, iv) not in cache:
            cache[text, iv] = analyse(bundle, prepare(bundle, text), iv)
        return cache[text, iv]

    return get


# --- Reading what the page shows ----------------------------------------------------------------


def heatmaps(at) -> list[dict]:
    return [f for f in figures(at) if f["data"] and f["data"][0].get("type") == "heatmap"]


def z_of(fig: dict) -> np.ndarray:
    return decode(fig["data"][0]["z"])


def title_of(fig: dict) -> str:
    title = fig["layout"].get("title") or {}
    return title.get("text", "") if isinstance(title, dict) else str(title)


def is_weights(fig: dict) -> bool:
    """Attention-weight heatmaps use the "weights" colour kind: Blues, fixed range 0..1."""
    d = fig["data"][0]
    scale = d.get("colorscale")
    return (
        d.get("zmin") == 0.0
        and d.get("zmax") == 1.0
        and isinstance(scale, list)
        and "rgb(247,251,255)" in str(scale).replace(" ", "")
    )


def frame(at, first_column: str):
    """The first table on the page (a grid or a small table) whose columns start with `first_column`."""
    for df in tables(at):
        if len(df.columns) and df.columns[0] == first_column:
            return df
    raise AssertionError(f"no table starting with {first_column!r}")


def weights_rows_sum_to_one(at) -> int:
    """Every attention-weight heatmap's rows sum to 1 (the column form's α_:j: its columns); how many there are."""
    n = 0
    for fig in heatmaps(at):
        if is_weights(fig):
            z = np.nan_to_num(z_of(fig))  # masked cells are drawn as gaps (NaN): weight 0
            columns = (fig["layout"]["xaxis"].get("title") or {}).get("text") == "query word j"  # α_:j as columns
            assert np.allclose(z.sum(0 if columns else 1), 1.0, atol=1e-5), title_of(fig)
            n += 1
    return n


def expected_focus(r, referent: int, other: int, it: int = 7) -> tuple[int, int]:
    """(layer, head) where "it" gives `referent` the most weight among heads preferring it to `other`."""
    best, where = -1.0, None
    for layer in range(2):
        w = r.trace[f"enc.{layer}.self_attn.weights"][0, :, it]  # [H, T]
        for h in range(w.shape[0]):
            if float(w[h, referent]) > float(w[h, other]) and float(w[h, referent]) > best:
                best, where = float(w[h, referent]), (layer, h)
    return where


def plain_text(at) -> str:
    """The page's text with markdown escapes removed (notices escape the user's words)."""
    return all_text(at).replace("\\", "")
