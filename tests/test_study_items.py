"""The concept test's items: answered by the model (recomputed here from the tensors, over held-out sentences), the
two forms isomorphic, distractors from known misconceptions, and the lesson's "Check yourself"."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from explain import instrument, items
from explain.lesson import SENTENCES
from model import checkpoint
from model.data import load_dataset
from model.examples import COREFERENCE, STUDENT, THINKING
from model.pipeline import analyse, prepare
from model.vocab import tokenize

HELDOUT = sorted({p.src for p in load_dataset()["heldout"] if p.tag in ("action", "basic", "location", "negation")})
PROPERTY = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def models():
    return items.Models(checkpoint.load(checkpoint.SHIPPED), checkpoint.load(checkpoint.SHIPPED_NO_MASK))


@pytest.fixture(scope="module")
def ct1(models):
    return instrument.build(models, "ct-1")


def _make(models, template, **params):
    try:
        return items.make(models, template, params, "T01")
    except ValueError:
        return None  # this sentence gives no clear item of this kind: the instruments do not use it


def right(item) -> str:
    return item.options[item.answer]


@PROPERTY
@given(sentence=st.sampled_from(HELDOUT), word=st.integers(0, 3))
def test_item_answers_of_attention_rows_recomputed_from_tensors(models, sentence, word):
    a = analyse(models.base, prepare(models.base, sentence))
    word = min(word, len(a.prepared.tokens) - 1)
    w = a.trace["enc.0.self_attn.weights"][0, :, word]  # [H, Ts]
    head = int(w.max(-1).values.argmax())
    row = w[head]
    assert bool((row >= 0).all()) and math.isclose(float(row.sum()), 1.0, abs_tol=1e-5)
    item = _make(models, "row_rest", sentence=sentence, word=word)
    if item is not None:
        assert right(item).startswith(f"{float(row.sum() - row.max()):.2f}".replace("-", "−") + ":")
        assert item.tags[item.answer] is None
    s = a.trace["enc.0.self_attn.scores"][0, head, word]
    flat = (s / math.sqrt(a.trace["enc.0.self_attn.q"].shape[-1])).softmax(-1)
    item = _make(models, "scaling_row", sentence=sentence, word=word)
    if item is not None:
        assert right(item) == f"It falls to {float(flat.max()):.2f}: the row gets flatter"
        assert float(flat.max()) < float(s.softmax(-1).max())
    for h in range(row.numel() and w.shape[0]):
        item = _make(models, "transfer_row", sentence=sentence, layer=0, head=h, word=word)
        if item is not None:
            assert item.answer == int(w[h].argmax()) != word
            assert item.grid["answer"] == word * len(item.grid["cols"]) + item.answer


@PROPERTY
@given(sentence=st.sampled_from(HELDOUT), row=st.integers(1, 3))
def test_item_answers_of_the_decoder_recomputed_from_tensors(models, sentence, row):
    a = analyse(models.base, prepare(models.base, sentence))
    inputs = ["BOS (start)", *a.out_tokens]
    item = _make(models, "mask_zeroes", sentence=sentence, row=row)
    if item is not None:
        w = a.trace["dec.0.self_attn.weights"][0, 0, row]
        zero = [j for j in range(w.numel()) if float(w[j]) == 0.0]
        assert zero == list(range(row + 1, w.numel()))
        assert right(item).startswith("Those on " + ", ".join(f"“{inputs[j]}”" for j in zero))
    item = _make(models, "cross_shape", sentence=sentence, row=min(row, len(inputs) - 1))
    if item is not None:
        assert right(item).startswith(f"{a.trace['dec.0.cross_attn.weights'].shape[-1]}: one per English position")
    if row < len(a.out_tokens):
        item = _make(models, "cross_top", sentence=sentence, row=row)
        if item is not None:
            src = [*a.prepared.tokens, "EOS"]
            top = int(a.trace["dec.1.cross_attn.weights"][0].mean(0)[row].argmax())
            assert right(item).startswith(f"“{src[top]}”")
        item = _make(models, "greedy_pick", sentence=sentence, position=row)
        if item is not None:
            best = models.base.tgt_vocab.itos[int(a.trace["probs"][0, row].argmax())]
            assert best == a.out_tokens[row]  # greedy decoding wrote the argmax
            assert right(item).startswith(f"“{best}”, every time")


@PROPERTY
@given(sentence=st.sampled_from(HELDOUT), word=st.integers(0, 3))
def test_item_answers_of_layer_norm_and_teacher_forcing_recomputed(models, sentence, word):
    a = analyse(models.base, prepare(models.base, sentence))
    word = min(word, len(a.prepared.tokens) - 1)
    r = a.trace["enc.0.add_norm1.resid"][0, word]
    z = (r - r.mean()) / torch.sqrt(r.var(unbiased=False) + 1e-5)  # LayerNorm's first step, by hand
    item = _make(models, "layer_norm", sentence=sentence, word=word)
    assert abs(float(z.mean())) < 0.005 and right(item).startswith(
        f"Mean 0.00, standard deviation {float(z.std(unbiased=False)):.2f}"
    )
    reference = next(p.tgt for p in load_dataset()["heldout"] if p.src == sentence)
    ref = models.base.tgt_vocab.encode(tokenize(reference, "fr"))[0]
    if len(ref) > 2:
        item = _make(models, "decoder_input", sentence=sentence, reference=reference, position=2)
        if item is not None:  # the input at the position predicting word 2 is word 1 (shifted right)
            assert right(item).startswith(f"“{models.base.tgt_vocab.itos[ref[1]]}”")


def test_item_positional_answer_is_a_bag_of_words(models):
    item = items.make(
        models,
        "pos_permutation",
        {"sentence": "the dog sees the cat", "other": "the cat sees the dog", "word": "cat"},
        "X",
    )
    assert right(item).startswith("The same for “cat”")
    with pytest.raises(ValueError):  # with positions on, the encoder tells the orders apart: no such item
        items.make(
            models,
            "pos_permutation",
            {"sentence": "the dog sees the cat", "other": "the dog sees the cat", "word": "cat"},
            "X",
        )


def test_item_mask_training_reads_the_no_mask_model(models):
    item = items.make(models, "mask_training", {"sentence": "he helps the sad goat"}, "X")
    other = analyse(models.no_mask, prepare(models.no_mask, "he helps the sad goat")).translation
    assert right(item).startswith(f"“{other}”") and other != "il aide la chèvre triste"


def test_forms_isomorphic(ct1):
    a, b = ct1.forms["A"], ct1.forms["B"]
    assert 12 <= len(a) == len(b) <= 16
    for x, y in zip(a, b, strict=True):
        assert (x.objective, x.template) == (y.objective, y.template)  # same objective, same template
        assert x.options[x.answer] != y.options[y.answer]  # no shared correct option text
        assert x.text != y.text
    slots = instrument.VERSIONS["ct-1"]
    sentences = {f: {s.a["sentence"] if f == "A" else s.b["sentence"] for s in slots} for f in "AB"}
    assert not sentences["A"] & sentences["B"], "a sentence in both forms"
    assert not (sentences["A"] | sentences["B"]) & {*SENTENCES, THINKING, STUDENT, COREFERENCE}
    per = {o: sum(1 for it in a if it.objective == o) for o in instrument.OBJECTIVES}
    assert all(1 <= n <= 2 for n in per.values()), per  # one or two items per objective
    assert sum(1 for it in a if it.grid is not None) == 2  # the transfer items, with the click grid


def test_item_distractors_come_from_known_misconceptions(ct1):
    for form in ct1.forms.values():
        for it in form:
            assert it.tags[it.answer] is None
            assert set(it.tags) - {None} <= set(items.MISCONCEPTIONS)
            if it.grid is None:
                assert 3 <= len(it.options) <= 4 and len(set(it.options)) == len(it.options)
                assert any(t is not None for t in it.tags), f"{it.id}: no misconception among its distractors"
            assert "<" not in it.text + "".join(it.options)


def test_item_instrument_round_trips_as_data(ct1):
    again = instrument.Instrument.from_dict(ct1.as_dict())
    assert again.forms["A"][0] == ct1.forms["A"][0] and again.item("B16").grid == ct1.item("B16").grid


@pytest.mark.parametrize("sentence", [COREFERENCE, "the cat is big", STUDENT])
def test_check_yourself_items_for_every_part(models, sentence):
    n = len(prepare(models.base, sentence).tokens)
    for part in instrument.PARTS:
        got = instrument.check_items(models, part, sentence, n)
        assert got, f"{part.title}: no item on {sentence!r}"
        assert all(it.options[it.answer] and it.explain for it in got)
    assert [list(instrument.part_steps(p)) for p in instrument.PARTS][-1][-1] == 25
