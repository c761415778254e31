"""Evaluation: translating only the pairs that teacher forcing does not already solve gives the same translations."""

import pytest
import torch

from model.data import load_dataset
from model.evaluate import solved, translate_batch, translate_pairs
from model.trace import Interventions
from model.train import TrainConfig, Trainer
from model.vocab import PAD_ID, tokenize


@pytest.fixture(scope="module")
def half_trained():
    """A tiny model after 80 steps on 160 short pairs: it translates some of the pairs below right, not all."""
    data = load_dataset()
    basic = [p for p in data["train"] if p.tag == "basic"]
    pairs = basic[:40] + [p for p in data["heldout"] if p.tag in ("basic", "coref")][::8]
    torch.manual_seed(0)
    trainer = Trainer(
        TrainConfig(
            d_model=32,
            n_heads=2,
            n_layers=1,
            d_ff=64,
            batch_size=32,
            warmup=10,
            lr_scale=0.3,
            dropout=0.0,
            steps=80,
            eval_every=0,
        ),
        {"train": basic[:160], "heldout": pairs},
    )
    while trainer.step < 80:
        trainer.train_step()
    return trainer.bundle(), pairs


def test_solved_is_argmax_equal_to_the_reference_at_every_token():
    gold = torch.tensor([[5, 6, 2, PAD_ID], [5, 6, 2, PAD_ID], [7, 2, PAD_ID, PAD_ID]])  # 2 = <eos>
    logits = torch.zeros(3, 4, 9)
    for b, row in enumerate([[5, 6, 2, 8], [5, 7, 2, 0], [7, 2, 3, 3]]):  # padded positions predict anything
        for t, tok in enumerate(row):
            logits[b, t, tok] = 1.0
    assert solved(logits, gold).tolist() == [True, False, True]


def test_translate_pairs_equals_greedy_decoding_of_every_pair(half_trained):
    bundle, pairs = half_trained
    slow = translate_batch(bundle, [p.src for p in pairs])
    fast = translate_pairs(bundle, pairs)
    right = sum(h == tokenize(p.tgt, "fr") for h, p in zip(slow, pairs, strict=True))
    assert 0 < right < len(pairs)  # both paths are exercised: some pairs solved, some decoded
    assert fast == slow


@pytest.mark.parametrize(
    "iv",
    [Interventions(look_ahead_mask=False), Interventions(padding_mask=False)],
    ids=["no look-ahead mask", "no padding mask"],
)
def test_without_the_masks_every_pair_is_decoded(half_trained, iv):
    """Without the look-ahead mask teacher forcing lets a position read the next word, so "solved" under it says
    nothing about greedy decoding: every pair must be decoded."""
    bundle, pairs = half_trained
    calls = []
    fast = translate_pairs(bundle, pairs, iv, on_batch=lambda logits, gold: calls.append(gold.size(0)))
    assert fast == translate_batch(bundle, [p.src for p in pairs], iv)
    assert sum(calls) == len(pairs)  # the teacher-forced pass still ran for the caller's loss
