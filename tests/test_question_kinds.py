"""The question kinds made from the lecture's ideas (explain/questions.py): on any sentence the answer is what the
model's tensors say, recomputed here independently; the options hold the plausible wrong answer."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from classroom import check_question
from classroom.votes import check_grid
from explain import questions
from model import checkpoint, pipeline
from model.trace import Interventions

BUNDLE = checkpoint.load(checkpoint.SHIPPED)
WORDS = [w for w in BUNDLE.src_vocab.itos if w.isalpha()][:300]
NOUNS = ["cat", "dog", "student", "teacher", "animal", "street", "machine"]
ADJECTIVES = ["big", "small", "tired", "happy"]
sentences = st.lists(st.sampled_from(WORDS), min_size=2, max_size=12).map(" ".join)
SETTINGS = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def accepted(q: questions.Question) -> None:
    check_question(q.text, list(q.options), q.answer)  # the class store takes it as it is
    assert "<" not in q.text + q.detail and len(set(q.options)) == len(q.options)


@SETTINGS
@given(sentences, st.integers(0, 1), st.integers(0, 3))
def test_scaling_answer_is_the_softmax_of_the_traced_scores(text, layer, head):
    a = pipeline.analyse(BUNDLE, pipeline.prepare(BUNDLE, text))
    q = questions.scaling(a, layer, head)
    query = questions.default_query(a)
    qv = a.trace[f"enc.{layer}.self_attn.q"][0, head, query]  # [d_k]
    k = a.trace[f"enc.{layer}.self_attn.k"][0, head]  # [Ts, d_k]
    raw = torch.softmax(k @ qv, -1)
    scaled = torch.softmax(k @ qv / math.sqrt(qv.numel()), -1)
    assert torch.allclose(scaled, a.trace[f"enc.{layer}.self_attn.weights"][0, head, query], atol=1e-5)
    if int(raw.argmax()) != int(scaled.argmax()):
        assert q.answer == 2
    elif abs(float(raw.max()) - float(scaled.max())) >= 1e-5:
        assert q.answer == (0 if scaled.max() < raw.max() else 1)
        assert f"{float(raw.max()):.3f}" in q.detail and f"{float(scaled.max()):.3f}" in q.detail
    accepted(q)


@SETTINGS
@given(sentences)
def test_look_ahead_zeroes_exactly_the_later_words(text):
    a = pipeline.analyse(BUNDLE, pipeline.prepare(BUNDLE, text))
    if len(a.out_tokens) + 1 < 3:
        with pytest.raises(ValueError):
            questions.look_ahead(a)
        return
    q = questions.look_ahead(a)
    w = a.trace["dec.0.self_attn.weights"][0, 0]
    t = w.shape[0]
    assert torch.equal(w == 0, torch.ones(t, t, dtype=torch.bool).triu(1))  # exactly the future, nothing else
    assert q.answer_text == "The words after it in the translation"
    assert "The words before it" in q.options and "0 (masked)" in q.detail
    accepted(q)


def test_without_the_look_ahead_mask_no_weight_is_zero():
    iv = Interventions(look_ahead_mask=False)
    a = pipeline.analyse(BUNDLE, pipeline.prepare(BUNDLE, "i am a student"), iv)
    q = questions.look_ahead(a)
    assert bool((a.trace["dec.0.self_attn.weights"][0, 0] > 0).all())
    assert q.answer_text == "None: every weight is above zero"


@SETTINGS
@given(sentences)
def test_the_fastest_positional_column_is_the_first_sine(text):
    a = pipeline.analyse(BUNDLE, pipeline.prepare(BUNDLE, text))
    q = questions.pos_column(a)
    pe = a.trace["src.pos"][0]
    d = pe.shape[1]
    pos = torch.arange(pe.shape[0]).float()
    assert torch.allclose(pe[:, 0], torch.sin(pos), atol=1e-5)  # PE(pos, 0) = sin(pos / 10000^0)
    assert torch.allclose(pe[:, d - 2], torch.sin(pos / 10000 ** ((d - 2) / d)), atol=1e-5)
    assert q.answer_text == "column 0" and f"column {d - 2}" in q.options
    accepted(q)


@SETTINGS
@given(sentences, st.integers(0, 1), st.integers(0, 3))
def test_a_head_switched_off_has_zero_output_and_unchanged_weights(text, layer, head):
    prepared = pipeline.prepare(BUNDLE, text)
    q = questions.head_zero(BUNDLE, prepared, Interventions(), layer, head)
    off = pipeline.analyse(BUNDLE, prepared, Interventions().with_head(f"enc.{layer}.self_attn", head, on=False))
    on = pipeline.analyse(BUNDLE, prepared)
    assert bool((off.trace[f"enc.{layer}.self_attn.z"][0, head] == 0).all())
    assert torch.allclose(off.trace[f"enc.{layer}.self_attn.weights"], on.trace[f"enc.{layer}.self_attn.weights"])
    assert q.answer == 0
    accepted(q)


@SETTINGS
@given(st.sampled_from(NOUNS), st.sampled_from(ADJECTIVES), st.integers(0, 1), st.integers(0, 3))
def test_the_noun_is_always_an_option_for_the_adjective(noun, adjective, layer, head):
    """ "the cat is big": asked what "big" attends to, "cat" is among the options, whatever the model says."""
    a = pipeline.analyse(BUNDLE, pipeline.prepare(BUNDLE, f"the {noun} is {adjective}"))
    q = questions.attention(a, layer, head)
    w = a.trace[f"enc.{layer}.self_attn.weights"][0, head, 3]
    assert noun in q.options and q.answer_text == questions._labels([*a.prepared.tokens, "<eos>"])[int(w.argmax())]
    grid = check_grid(questions.attention_grid(a, layer, head, 3))
    assert grid.cell(grid.answer) == (3, int(w.argmax())) and grid.cols[1] == f"1:{noun}"
    accepted(q)
