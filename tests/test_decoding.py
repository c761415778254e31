"""Decoding with the shipped model: greedy, batched greedy and beam search agree and keep honest records."""

import math

import pytest
import torch

from model.checkpoint import SHIPPED, load
from model.data import load_dataset
from model.decoding import beam_search, greedy_batch, greedy_decode, length_penalty
from model.pipeline import prepare
from model.transformer import Config, Transformer
from model.vocab import EOS_ID, PAD_ID, detokenize


@pytest.fixture(scope="module")
def bundle():
    return load(SHIPPED)


@pytest.fixture(scope="module")
def sentences():
    held = load_dataset()["heldout"]
    return [p.src for p in held[::37]]  # a spread of families and lengths


def src_of(bundle, text: str) -> torch.Tensor:
    return prepare(bundle, text).src()  # [1, Ts], ends with EOS


def test_greedy_translates_the_lecture_example(bundle):
    g = greedy_decode(bundle.model, src_of(bundle, "i am a student"))
    assert g.finished
    assert detokenize(bundle.tgt_vocab.decode(g.tokens), "fr") == "je suis étudiant"
    # The record: the chosen token is the most probable candidate at every step, ending with EOS.
    assert [s.chosen for s in g.steps] == [*g.tokens, EOS_ID]
    for s in g.steps:
        probs = [c.prob for c in s.candidates]
        assert s.candidates[0].token == s.chosen and probs == sorted(probs, reverse=True)
        assert all(0 < p <= 1 for p in probs) and sum(probs) <= 1 + 1e-5
    assert g.steps[-1].prefix == (1, *g.tokens)


def test_beam_of_one_is_greedy(bundle, sentences):
    for text in sentences:
        src = src_of(bundle, text)
        assert beam_search(bundle.model, src, k=1).best.output == greedy_decode(bundle.model, src).tokens, text


@pytest.mark.parametrize("k", [2, 4])
def test_beam_records_are_consistent(bundle, sentences, k):
    for text in sentences[:6]:
        result = beam_search(bundle.model, src_of(bundle, text), k=k)
        prev = [()]  # hypotheses (token tuples) of the beam before the step
        prev_lp = {(): 0.0}
        for step in result.steps:
            assert step.expansions, text
            for e in step.expansions:
                assert 0.0 < e.prob <= 1.0
                parent = prev[e.parent]
                assert e.hypothesis.tokens == (*parent, e.token)
                assert e.hypothesis.log_prob == pytest.approx(prev_lp[parent] + math.log(e.prob), abs=1e-5)
            kept = [e.hypothesis for e in step.expansions if e.kept]
            # the kept expansions that did not finish are exactly the next beam, in order
            assert tuple(h for h in kept if not h.finished) == step.beam
            # nothing discarded beats anything kept
            if kept:
                worst_kept = min(h.log_prob for h in kept)
                assert all(e.hypothesis.log_prob <= worst_kept + 1e-9 for e in step.expansions if not e.kept)
            prev = [h.tokens for h in step.beam]
            prev_lp = {h.tokens: h.log_prob for h in step.beam}
        assert result.finished and result.best == result.finished[0]
        assert result.best.score == max(h.score for h in result.finished)
        assert all(h.finished for h in result.finished)
        assert len(result.finished) <= k


def test_beam_finds_the_lecture_translation(bundle):
    best = beam_search(bundle.model, src_of(bundle, "i am a student"), k=4).best
    assert detokenize(bundle.tgt_vocab.decode(best.output), "fr") == "je suis étudiant"
    assert best.score == pytest.approx(best.log_prob / length_penalty(len(best.tokens), 0.6))


def test_greedy_batch_equals_greedy_one_by_one(bundle, sentences):
    srcs = [prepare(bundle, t).ids for t in sentences]
    width = max(map(len, srcs))
    batch = torch.tensor([list(s) + [PAD_ID] * (width - len(s)) for s in srcs])  # [B, Ts], padded
    batched = greedy_batch(bundle.model, batch)
    for s, out in zip(srcs, batched, strict=True):
        assert out == list(greedy_decode(bundle.model, torch.tensor([s])).tokens)


def test_greedy_batch_equals_greedy_on_an_untrained_model():
    """Also when nothing stops early (no EOS): the padding mask alone keeps the rows independent."""
    torch.manual_seed(1)
    model = Transformer(
        Config(20, 20, d_model=16, n_heads=2, n_enc_layers=1, n_dec_layers=1, d_ff=32, dropout=0.0)
    ).eval()
    srcs = [[5, 6, 7, 8, 9, 2], [10, 11, 2], [12, 2]]
    batch = torch.tensor([s + [PAD_ID] * (6 - len(s)) for s in srcs])
    for s, out in zip(srcs, greedy_batch(model, batch, max_len=8), strict=True):
        assert out == list(greedy_decode(model, torch.tensor([s]), max_len=8).tokens)
