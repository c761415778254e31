"""Shared by tests/test_pages_decoder.py and tests/test_pages_cross_attention_output.py: the default sentence and
its reference, the base model and the sentence through it, the decoder page's run (module fixtures, named `base`,
`own` and `dec_page`: import them into the test module), and what both read off a page."""

import numpy as np
import pytest

from model import checkpoint, pipeline
from model.trace import Interventions
from tests.apptest_util import no_exception, run_page
from ui.state import DEFAULT_SENTENCE

S = DEFAULT_SENTENCE
REF = "l'animal n'a pas traversé la rue parce qu'il était trop fatigué"  # the toy set's French for S


@pytest.fixture(scope="module", name="base")
def base_fixture():
    return checkpoint.load(checkpoint.SHIPPED_MODELS["base"])


@pytest.fixture(scope="module", name="own")
def own_fixture(base):
    """The default sentence through the base model, computed here (not through the app)."""
    return pipeline.analyse(base, pipeline.prepare(base, S), Interventions())


@pytest.fixture(scope="module", name="dec_page")
def dec_page_fixture():
    at = run_page("decoder")
    no_exception(at)
    return at


def text_of(f: dict) -> np.ndarray:
    return np.array(f["data"][0]["text"], dtype=object)


SHOWN = 5e-5  # a small table writes 4 decimals (ui.widgets.small_table): a number shown is within this of the value


def metric(at, label_start: str) -> str:
    for m in at.metric:
        if m.label.startswith(label_start):
            return m.value
    raise KeyError(label_start)


def pick_layer_head(at, prefix: str, layer: int, head: int) -> None:
    """Choose a layer and a head (-1: mean of the heads) with the page's two radios, and rerun."""
    at.radio(key=f"{prefix}_layer").set_value(layer)
    at.radio(key=f"{prefix}_head").set_value(head)
    at.run()
    no_exception(at)


def infos(at) -> str:
    return "\n".join(i.value for i in at.info)
