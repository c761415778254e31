"""The guided lesson: its steps' numbers (model/lesson.py), notices (viz/lesson.py) and page (pages/lesson.py).

Every number a notice states is recomputed here from `pipeline.analyse` on the shipped model, reading
the named tensors directly (not through model/lesson.py), and looked for in the notice's text.
"""

from __future__ import annotations

import math
from functools import cache

import pytest
import torch

from model import checkpoint, pipeline
from model import lesson as L
from model.textbook import thinking_machines
from model.trace import Interventions
from viz import lesson as V

pytestmark = pytest.mark.usefixtures("one_torch_thread")

THINKING = "thinking machines"
CORE = "the animal didn't cross the street because it was too tired"
NO_IV = Interventions()
ODD = ("", "hello", "zzz qqq", "?", "the cat " * 40, "<script>alert(1)</script> **bold** $x$")


@cache
def bundle():
    return checkpoint.load(checkpoint.SHIPPED)


@cache
def analyse(text: str, iv: Interventions = NO_IV) -> pipeline.Analysis:
    return pipeline.analyse(bundle(), pipeline.prepare(bundle(), text), iv)


def ctx(text: str, iv: Interventions = NO_IV) -> V.Context:
    b = bundle()
    return V.context(analyse(text, iv), b.tgt_vocab.itos, len(b.src_vocab))


def f3(x: float) -> str:
    return f"{x:.3f}"


# --- steps and the step parameter -------------------------------------------------------------------

def test_steps_cover_the_path_and_link_to_real_pages():
    from ui.page_list import PAGES

    files = {p.file for p in PAGES}
    keys = [s.key for s in L.STEPS]
    assert 15 <= L.N_STEPS <= 25 and len(set(keys)) == len(keys)
    assert keys[0] == "sentence" and keys[-1] == "finished"
    assert all(s.page in files for s in L.STEPS)
    assert set(V.VIEWS) == set(keys)
    assert L.step_index("cross") == keys.index("cross") + 1


@pytest.mark.parametrize(("raw", "step", "noticed"), [
    (None, 1, False), ("1", 1, False), ("9", 9, False), (" 9 ", 9, False), (str(L.N_STEPS), L.N_STEPS, False),
    ("0", 1, True), ("-3", 1, True), ("999", L.N_STEPS, True), ("9" * 60, L.N_STEPS, True), ("abc", 1, True),
    ("٣", 1, True), ("３", 1, True), ("3.5", 1, True), ("", 1, True), ("²", 1, True),
])
def test_parse_step(raw, step, noticed):
    got, notice = L.parse_step(raw)
    assert got == step
    assert (notice is not None) == noticed


def test_focus_follows_it_when_there_is_one():
    assert L.focus_word(("the", "animal", "it", "was")) == 2
    assert L.focus_word(("thinking", "machines")) == 0
    f = L.focus(analyse(CORE))
    assert analyse(CORE).prepared.tokens[f.word] == "it"
    assert f.row == 1


# --- numbers against the tensors -----------------------------------------------------------------------

def test_thinking_machines_cross_attention_les_looks_at_machines():
    """The decoder row whose input is "les" puts about 0.99 on "machines" (head average, last layer)."""
    a = analyse(THINKING)
    assert a.out_tokens[0] == "les"
    t = a.trace
    w = t["dec.1.cross_attn.weights"][0, :, 1].mean(0)  # row 1: input "les"
    x = L.cross(a, L.focus(a))
    assert x.top_label == "1 machines" and x.row_label == "1 les"
    assert x.weights[x.top] == pytest.approx(float(w.max()))
    notice = V.notice_cross(x)
    assert f3(float(w.max())) in notice and "“machines”" in notice and "“les”" in notice
    assert float(w.max()) > 0.9


@pytest.mark.parametrize("text", [THINKING, "i am a student", CORE])
def test_every_notice_states_the_tensors(text):
    a = analyse(text)
    t = a.trace
    c = ctx(text)
    f = c.f
    n = {s.key: V.view(s.key, c).notice for s in L.STEPS}
    toks = a.prepared.tokens

    # tokens: ids of the source tokens
    ids = t["src.tokens"][0].tolist()
    assert f"“{toks[0]}” → {ids[0]}" in n["tokens"] and f"{len(bundle().src_vocab)} English" in n["tokens"]
    # embedding: length of the row before and after × √d_model
    e = t["src.embed"][0, f.word]
    d = e.numel()
    assert f3(float(e.norm())) in n["embedding"] and f3(float(e.norm()) / math.sqrt(d)) in n["embedding"]
    assert f3(math.sqrt(d)) in n["embedding"]
    # positional: sin and cos of the position in dimensions 0 and 1
    pe = t["src.pos"][0, f.word]
    assert f3(float(pe[0])) in n["positional"] and f3(float(pe[1])) in n["positional"]
    assert f3(math.sin(f.word)) in n["positional"] and f3(math.cos(f.word)) in n["positional"]
    assert f3(float(t["src.input"][0, f.word].norm())) in n["positional"]
    # q, k, v: shapes and the lengths of this word's vectors
    m = "enc.0.self_attn"
    assert f"[{len(toks) + 1}, {d}]" in n["qkv"]
    for name in "qkv":
        assert f3(float(t[f"{m}.{name}"][0, f.head, f.word].norm())) in n["qkv"]
    # scores, scale, softmax, z of the focus word in the focus head
    scores = t[f"{m}.scores"][0, f.head, f.word]
    scaled = t[f"{m}.scaled"][0, f.head, f.word]
    weights = t[f"{m}.weights"][0, f.head, f.word]
    labels = a.src_labels
    top_s, top_w = int(scores.argmax()), int(weights.argmax())
    assert f"{float(scores.max()):.2f}" in n["scores"] and f"{float(scores.min()):.2f}" in n["scores"]
    assert f"“{V.word(labels[top_s])}”" in n["scores"]
    assert f"{float(scaled[top_s]):.2f}" in n["scale"] and f"{math.sqrt(t[f'{m}.q'].shape[-1]):.3f}" in n["scale"]
    assert torch.allclose(scaled, scores / math.sqrt(t[f"{m}.q"].shape[-1]))
    assert f3(float(weights.max())) in n["softmax"] and f"“{V.word(labels[top_w])}”" in n["softmax"]
    assert f3(float(weights.sum())) in n["softmax"]
    z = t[f"{m}.z"][0, f.head, f.word]
    assert f3(float(z.norm())) in n["z"] and f"{float(weights.max()):.3f} · v({V.word(labels[top_w])})" in n["z"]
    # heads: every head's favourite word and weight for the focus word
    for h in range(t[f"{m}.weights"].shape[1]):
        w = t[f"{m}.weights"][0, h, f.word]
        assert f"head {h} → “{V.word(labels[int(w.argmax())])}” {f3(float(w.max()))}" in n["heads"]
    # concat and W_O: the lengths of each head's z and of the output
    for h in range(t[f"{m}.z"].shape[1]):
        assert f3(float(t[f"{m}.z"][0, h, f.word].norm())) in n["concat"]
    assert f3(float(t[f"{m}.out"][0, f.word].norm())) in n["concat"]
    # add & norm: mean and standard deviation before and after
    r = t["enc.0.add_norm1.resid"][0, f.word]
    assert f3(float(r.mean())) in n["add_norm"] and f3(float(r.std(unbiased=False))) in n["add_norm"]
    assert f3(float(t["enc.0.add_norm1.normed"][0, f.word].std(unbiased=False))) in n["add_norm"]
    # FFN: how many hidden units are exactly zero
    hid = t["enc.0.ffn.hidden"][0, f.word]
    assert f"{int((hid == 0).sum())} (" in n["ffn"] and f"unit {int(hid.argmax())}" in n["ffn"]
    # stack: cosine similarity to the input after every layer
    x0 = t["src.input"][0, f.word]
    for i in range(bundle().config.n_enc_layers):
        out = t[f"enc.{i}.add_norm2.out"][0, f.word]
        assert f3(float(torch.nn.functional.cosine_similarity(x0, out, dim=0))) in n["stack"]
    # decoder input: position t reads word t and predicts word t + 1
    assert f"predicts “{a.out_tokens[0]}”" in n["decoder_input"]
    assert f"position 1 reads “{a.out_tokens[0]}” and predicts “{a.out_tokens[1]}”" in n["decoder_input"]
    # masked: nothing above the diagonal; the row of the first word
    last = bundle().config.n_dec_layers - 1
    sw = t[f"dec.{last}.self_attn.weights"][0]
    assert float(torch.triu(sw, diagonal=1).max()) == 0.0 and "0.000" in n["masked"]
    assert f3(float(sw[:, 1].mean(0).max())) in n["masked"]
    # cross: the row of the first word, what it predicts, where it looks
    cw = t[f"dec.{last}.cross_attn.weights"][0, :, 1].mean(0)
    assert f3(float(cw.max())) in n["cross"] and f"“{V.word(labels[int(cw.argmax())])}”" in n["cross"]
    assert f"predicting “{a.out_tokens[1]}”" in n["cross"]
    # output: the top logit and its probability at position 0
    logits, probs = t["logits"][0, 0], t["probs"][0, 0]
    assert f"{float(logits.max()):.2f}" in n["output"] and f3(float(probs.max())) in n["output"]
    assert f"{logits.numel()} scores" in n["output"]
    # chosen, next, finished: what greedy decoding chose, with its probabilities
    steps = a.greedy.steps
    itos = bundle().tgt_vocab.itos
    assert f"“{itos[steps[0].chosen]}” with {f3(steps[0].candidates[0].prob)}" in n["chosen"]
    assert f3(steps[0].candidates[1].prob) in n["chosen"]
    assert f"“{itos[steps[1].chosen]}” with {f3(steps[1].candidates[0].prob)}" in n["next"]
    assert f"“{a.translation}”" in n["finished"] and f3(steps[-1].candidates[0].prob) in n["finished"]
    assert f"“{a.translation}”" in n["sentence"] and f"{len(steps)} time(s)" in n["sentence"]


def test_traced_and_decoded_probabilities_agree_with_the_mask_on():
    a = analyse(THINKING)
    for i, st in enumerate(a.greedy.steps):
        assert float(a.trace["probs"][0, i, st.chosen]) == pytest.approx(st.candidates[0].prob, abs=1e-5)


def test_textbook_numbers_are_computed_and_labelled():
    tm = thinking_machines()
    c = ctx(THINKING)
    scores = V.view("scores", c).textbook
    assert scores.startswith("Textbook") and "not this model" in scores
    assert f"{float(tm.scores[0, 0]):g}" in scores and f"{float(tm.scores[0, 1]):g}" in scores
    assert "112" in scores and "96" in scores
    assert "14" in V.view("scale", c).textbook and "12" in V.view("scale", c).textbook
    soft = V.view("softmax", c).textbook
    assert f"{float(tm.weights[0, 0]):.2f}" in soft and "0.88" in soft and "0.12" in soft


def test_interventions_are_said_not_hidden():
    all_off = frozenset(("enc.0.self_attn", h) for h in range(bundle().config.n_heads))
    iv = Interventions(heads_off=all_off, look_ahead_mask=False, scale=False, positional_encoding=False)
    c = ctx(THINKING, iv)
    views = {s.key: V.view(s.key, c) for s in L.STEPS}
    assert "switched off" in views["positional"].notice and views["positional"].warning
    assert "switched off" in views["scale"].notice
    assert "z is all zeros" in views["z"].notice and views["z"].warning
    assert "(off)" in views["heads"].notice
    assert "switched off" in views["masked"].notice and views["masked"].warning
    assert views["output"].warning  # the traced pass sees later words
    assert "0.000, 0.000" in views["concat"].notice  # every head's z is zero


@pytest.mark.parametrize("text", ODD)
def test_odd_sentences_never_raise(text):
    c = ctx(text)
    for s in L.STEPS:
        v = V.view(s.key, c)
        assert v.notice and v.figure is not None and v.table is not None
