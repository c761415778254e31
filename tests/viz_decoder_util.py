"""Shared by tests/test_viz_decoder.py and tests/test_viz_decoding.py: a tiny random-weights model over the toy
sentences' words (fast, no checkpoint needed), and "i am a student" through it (module fixtures, named `bundle` and
`analysed`: import them into the test module)."""

import pytest
import torch

from model import pipeline
from model.checkpoint import Bundle
from model.trace import Interventions
from model.transformer import Config, Transformer
from model.vocab import SPECIALS, Vocab

EN = "i am a student the animal didn't cross street because it was too tired".split()
FR = "je suis étudiant l' animal n' a pas traversé la rue parce qu' il était trop fatigué".split()


@pytest.fixture(scope="module", name="bundle")
def bundle_fixture() -> Bundle:
    torch.manual_seed(0)
    src, tgt = Vocab(list(SPECIALS) + EN), Vocab(list(SPECIALS) + FR)
    cfg = Config(src_vocab=len(src), tgt_vocab=len(tgt), d_model=16, n_heads=2, d_ff=32, dropout=0.0, max_len=32)
    model = Transformer(cfg).eval()
    return Bundle(
        model,
        src,
        tgt,
        "en-fr",
        {
            "metrics": {"exact_match": 0.5, "final_train_loss": 1.2},
            "training": {"look_ahead_mask": True, "steps_done": 7},
        },
    )


@pytest.fixture(scope="module", name="analysed")
def analysed_fixture(bundle):
    return pipeline.analyse(
        bundle,
        pipeline.prepare(bundle, "i am a student"),
        Interventions(),
    )
