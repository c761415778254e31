"""Every page works for every model the app can train or accept: sizes across the whole bound box of
model/limits.py (any d_model, heads, layers, d_ff, max_len), random weights, the shipped vocabularies."""

from __future__ import annotations

import dataclasses
import logging

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from model import checkpoint
from model.limits import BOUNDS, MODEL_BOUNDS
from model.transformer import Config, Transformer
from tests.apptest_util import run_app
from ui import page_list

SHIPPED = checkpoint.load(checkpoint.SHIPPED)
PAGES = [p.name for p in page_list.PAGES]


def bundle_for(cfg: Config, seed: int = 0) -> checkpoint.Bundle:
    torch.manual_seed(seed)
    return dataclasses.replace(SHIPPED, model=Transformer(cfg).eval(), name="tiny", meta={})


@st.composite
def configs(draw) -> Config:
    lo, hi = (int(v) for v in BOUNDS["n_heads"])
    heads = draw(st.integers(lo, hi))
    d_lo, d_hi = (int(v) for v in BOUNDS["d_model"])
    step = heads * 2 // torch.tensor(heads * 2).gcd(torch.tensor(2)).item() * 2  # even and divisible by heads
    d_model = draw(st.sampled_from([d for d in range(max(d_lo, step), d_hi + 1, step)] or [step]))
    layers = st.integers(*(int(v) for v in BOUNDS["n_layers"]))
    return Config(
        src_vocab=len(SHIPPED.src_vocab),
        tgt_vocab=len(SHIPPED.tgt_vocab),
        d_model=d_model,
        n_heads=heads,
        n_enc_layers=draw(layers),
        n_dec_layers=draw(layers),
        d_ff=draw(st.integers(*(int(v) for v in BOUNDS["d_ff"]))),
        max_len=draw(st.integers(*(int(v) for v in MODEL_BOUNDS["max_len"]))),
        dropout=0.0,
    )


CORNERS = [  # the edges of the box, where defaults that assume a size break
    dict(d_model=8, n_heads=1, n_enc_layers=1, n_dec_layers=1, d_ff=8, max_len=int(MODEL_BOUNDS["max_len"][0])),
    dict(d_model=8, n_heads=4, n_enc_layers=4, n_dec_layers=1, d_ff=8, max_len=8),
    dict(d_model=40, n_heads=8, n_enc_layers=1, n_dec_layers=2, d_ff=16, max_len=9),
    dict(d_model=256, n_heads=8, n_enc_layers=2, n_dec_layers=2, d_ff=1024, max_len=int(MODEL_BOUNDS["max_len"][1])),
]


class Failures(logging.Handler):
    """Collects what ui.shell logs when a page fails (the page itself only shows an apology)."""

    def __init__(self):
        super().__init__(logging.ERROR)
        self.messages: list[str] = []

    def emit(self, record):
        self.messages.append(record.exc_text or self.format(record))


def run_every_page(bundle: checkpoint.Bundle, sentence: str) -> dict[str, list[str]]:
    failures = {}
    for page in PAGES:
        handler = Failures()
        logging.getLogger("glass.pages").addHandler(handler)
        try:
            at = run_app(page, my_model=bundle, my_model_key=f"tiny:{id(bundle)}", model="mine", sentence=sentence)
        finally:
            logging.getLogger("glass.pages").removeHandler(handler)
        if at.exception or handler.messages:
            failures[page] = [str(e.value)[:300] for e in at.exception] + [m[-600:] for m in handler.messages]
    return failures


@pytest.mark.parametrize(
    "corner", CORNERS, ids=lambda c: "d{d_model}h{n_heads}L{n_enc_layers}{n_dec_layers}len{max_len}".format(**c)
)
def test_every_page_at_the_corners_of_the_bound_box(corner):
    cfg = Config(src_vocab=len(SHIPPED.src_vocab), tgt_vocab=len(SHIPPED.tgt_vocab), dropout=0.0, **corner)
    assert run_every_page(bundle_for(cfg), "the animal didn't cross the street because it was too tired") == {}


@settings(max_examples=2, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck))
@given(configs(), st.sampled_from(["i am a student", "thinking machines", "the cat " * 40, "zzz"]))
def test_every_page_for_models_inside_the_bounds(cfg, sentence):
    assert run_every_page(bundle_for(cfg), sentence) == {}
