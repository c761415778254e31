"""The guided lesson's steps and their numbers (explain/lesson.py) and notices (viz/lesson.py).

Every number a notice states is recomputed here from `pipeline.analyse` on the shipped model, reading
the named tensors directly (not through explain/lesson.py), and looked for in the notice's text. The lesson's
page (pages/lesson.py) through AppTest is tested in tests/test_lesson_page.py.
"""

from __future__ import annotations

import math

import pytest
import torch

import explain.lesson
import viz.lesson
import viz.lesson_decoder
from explain.textbook import thinking_machines
from model.pipeline import label_word
from model.trace import Interventions
from tests.apptest_util import ROOT
from tests.lesson_util import CORE, THINKING, analyse, bundle, ctx, decide

ODD = ("", "hello", "zzz qqq", "?", "the cat " * 40, "<script>alert(1)</script> **bold** $x$")


def f3(x: float) -> str:
    return f"{x:.3f}"


# --- steps and the step parameter -------------------------------------------------------------------


def test_steps_cover_the_path_and_link_to_real_pages():
    from ui.page_list import PAGES

    names = {p.name for p in PAGES}
    keys = [s.key for s in explain.lesson.STEPS]
    assert 15 <= explain.lesson.N_STEPS <= 25 and len(set(keys)) == len(keys)
    assert keys[0] == "why" and keys[-1] == "training"  # motivation first, training last
    assert all(s.page in names for s in explain.lesson.STEPS)
    assert set(viz.lesson.VIEWS) == set(keys)
    assert explain.lesson.step_index("cross") == keys.index("cross") + 1


@pytest.mark.parametrize(
    ("raw", "step", "noticed"),
    [
        (None, 1, False),
        ("1", 1, False),
        ("9", 9, False),
        (" 9 ", 9, False),
        (str(explain.lesson.N_STEPS), explain.lesson.N_STEPS, False),
        ("0", 1, True),
        ("-3", 1, True),
        ("999", explain.lesson.N_STEPS, True),
        ("9" * 60, explain.lesson.N_STEPS, True),
        ("abc", 1, True),
        ("٣", 1, True),
        ("３", 1, True),
        ("3.5", 1, True),
        ("", 1, True),
        ("²", 1, True),
    ],
)
def test_parse_step(raw, step, noticed):
    got, notice = explain.lesson.parse_step(raw)
    assert got == step
    assert (notice is not None) == noticed


def test_focus_follows_it_when_there_is_one():
    assert explain.lesson.focus_word(("the", "animal", "it", "was")) == 2
    assert explain.lesson.focus_word(("thinking", "machines")) == 0
    f = explain.lesson.focus(analyse(CORE))
    assert analyse(CORE).prepared.tokens[f.word] == "it"
    assert f.row == 1


# --- numbers against the tensors -----------------------------------------------------------------------


def test_thinking_machines_cross_attention_les_looks_at_machines():
    """The decoder row whose input is "les" puts about 0.99 on "machines" (head average, last layer)."""
    a = analyse(THINKING)
    assert a.out_tokens[0] == "les"
    t = a.trace
    w = t["dec.1.cross_attn.weights"][0, :, 1].mean(0)  # row 1: input "les"
    x = explain.lesson.cross(a, explain.lesson.focus(a))
    assert x.top_label == "1 machines" and x.row_label == "1 les"
    assert x.weights[x.top] == pytest.approx(float(w.max()))
    notice = viz.lesson_decoder.notice_cross(x)
    assert f3(float(w.max())) in notice and "“machines”" in notice and "“les”" in notice
    assert float(w.max()) > 0.9


def confident_inversions(a) -> list[tuple[int, int]]:
    """Recomputed from the tensor: pairs of rows (largest weight >= 0.6 on a source word) read out of order."""
    w = a.trace["dec.1.cross_attn.weights"][0].mean(0)  # [Tt, Ts]
    eos = w.shape[1] - 1
    rows = [
        (r, int(w[r].argmax())) for r in range(w.shape[0]) if float(w[r].max()) >= 0.6 and int(w[r].argmax()) != eos
    ]
    return [(i, j) for k, (i, ci) in enumerate(rows) for j, cj in rows[k + 1 :] if cj < ci]


def test_cross_attention_reordering_is_claimed_from_confident_rows_only():
    """ "les machines pensantes" reorders (confident rows read "machines" then "thinking"); the coreference
    sentence keeps the English order, whatever its diffuse rows do, and the notice says which rows are diffuse."""
    a = analyse(THINKING)
    x = explain.lesson.cross(a, explain.lesson.focus(a))
    assert x.inversions == confident_inversions(a) and x.reordered
    notice = viz.lesson_decoder.notice_cross(x, a.src_labels, a.next_labels)
    assert "the row writing “pensantes” reads “thinking”" in notice and "French order differs" in notice
    for text in (CORE, "i am a student"):
        a = analyse(text)
        x = explain.lesson.cross(a, explain.lesson.focus(a))
        assert not confident_inversions(a) and not x.reordered
        notice = viz.lesson_decoder.notice_cross(x, a.src_labels, a.next_labels)
        assert "French order differs" not in notice and "in their English order" in notice
    a = analyse(CORE)
    w = a.trace["dec.1.cross_attn.weights"][0].mean(0)
    diffuse = [r for r in range(w.shape[0] - 1) if float(w[r].max()) < 0.6]
    notice = viz.lesson_decoder.notice_cross(
        explain.lesson.cross(a, explain.lesson.focus(a)), a.src_labels, a.next_labels
    )
    assert diffuse
    assert f"Diffuse rows (largest weight under 0.6), writing “{label_word(a.next_labels[diffuse[0]])}”" in notice


def test_a_word_that_stands_twice_is_named_with_its_position():
    """ "the" stands at positions 0 and 5: a notice that names either says which, as the bars' axis does ("5 the");
    a word that stands once keeps its bare name."""
    text = "the cat is big and the dog is small"
    a = analyse(text)
    f = ctx(text).f
    t, m = a.trace, "enc.0.self_attn"
    n = {k: viz.lesson.view(k, ctx(text)).notice for k in ("scores", "softmax", "z", "heads")}
    labels = a.src_labels
    assert [i for i, lab in enumerate(labels) if label_word(lab) == "the"] == [0, 5]

    words = [label_word(lab) for lab in labels]

    def named(i: int) -> str:  # "is" stands twice too (positions 2 and 7)
        return f"“{words[i]}” (position {i})" if words.count(words[i]) > 1 else f"“{words[i]}”"

    scores = t[f"{m}.scores"][0, f.head, f.word]
    top, low = int(scores.argmax()), int(scores.argmin())
    assert f"the key of {named(top)} ({float(scores[top]):.2f})" in n["scores"]
    assert f"lowest against {named(low)} ({float(scores[low]):.2f})" in n["scores"]
    assert "“the” (position" in n["scores"] + n["softmax"] + n["heads"]  # the sentence makes "the" matter somewhere
    weights = t[f"{m}.weights"][0, f.head, f.word]
    assert f"of its attention to {named(int(weights.argmax()))}" in n["softmax"]
    for h in range(t[f"{m}.weights"].shape[1]):
        w = t[f"{m}.weights"][0, h, f.word]
        assert f"head {h} → {named(int(w.argmax()))} {f3(float(w.max()))}" in n["heads"]
    j = int(weights.argmax())
    where = f", position {j}" if words.count(words[j]) > 1 else ""
    assert f"{float(weights[j]):.3f} · v({words[j]}{where})" in n["z"]
    assert ", position 2)" in n["z"] or ", position 7)" in n["z"] or "v(is)" not in n["z"]
    assert "“cat” (position" not in " ".join(n.values())


@pytest.mark.parametrize("text", [THINKING, "i am a student", CORE])
def test_every_notice_states_the_tensors(text):
    a = analyse(text)
    t = a.trace
    c = ctx(text)
    f = c.f
    n = {s.key: viz.lesson.view(s.key, c).notice for s in explain.lesson.STEPS}
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
    pos = f.word or 1  # position 0 would show sin 0 = 0, cos 0 = 1
    pe = t["src.pos"][0, pos]
    assert f"at position {pos}:" in n["positional"]
    assert f3(float(pe[0])) in n["positional"] and f3(float(pe[1])) in n["positional"]
    assert f3(math.sin(pos)) in n["positional"] and f3(math.cos(pos)) in n["positional"]
    assert f3(float(t["src.input"][0, pos].norm())) in n["positional"]
    # q, k, v: shapes and the lengths of this word's vectors
    m = "enc.0.self_attn"
    assert f"[{len(toks) + 1}, {d}]" in n["qkv"]
    assert f3(float(t[f"{m}.q"][0, f.head, f.word].norm())) in n["qkv"]
    assert f"[{d}, {d // t[f'{m}.q'].shape[1]}]" in n["qkv"]  # W^Q per head: [d_model, d_k]
    # x·W^Q + b^Q, from the model's own weights, against its own q (the projection the notice states)
    lin = bundle().model.encoder[0].self_attn.W_q
    d_k = t[f"{m}.q"].shape[-1]
    x = t["src.input"][0, f.word]
    q_ = (
        x @ lin.weight.detach()[f.head * d_k : (f.head + 1) * d_k].T
        + lin.bias.detach()[f.head * d_k : (f.head + 1) * d_k]
    )
    err = float((q_.double() - t[f"{m}.q"][0, f.head, f.word].double()).abs().max())
    assert err < 1e-5 and "computed here equals the model's own q to" in n["qkv"]
    # scores, scale, softmax, z of the focus word in the focus head
    scores = t[f"{m}.scores"][0, f.head, f.word]
    scaled = t[f"{m}.scaled"][0, f.head, f.word]
    weights = t[f"{m}.weights"][0, f.head, f.word]
    labels = a.src_labels
    top_s, top_w = int(scores.argmax()), int(weights.argmax())
    assert f"{float(scores.max()):.2f}" in n["scores"] and f"{float(scores.min()):.2f}" in n["scores"]
    assert f"“{label_word(labels[top_s])}”" in n["scores"]
    assert f"{float(scaled[top_s]):.2f}" in n["scale"] and f"{math.sqrt(t[f'{m}.q'].shape[-1]):.3f}" in n["scale"]
    assert torch.allclose(scaled, scores / math.sqrt(t[f"{m}.q"].shape[-1]))
    assert f3(float(weights.max())) in n["softmax"] and f"“{label_word(labels[top_w])}”" in n["softmax"]
    assert f3(float(weights.sum())) in n["softmax"]
    z = t[f"{m}.z"][0, f.head, f.word]
    assert f3(float(z.norm())) in n["z"]
    assert f"{float(weights.max()):.3f} · v({label_word(labels[top_w])})" in n["z"]
    # heads: every head's favourite word and weight for the focus word
    for h in range(t[f"{m}.weights"].shape[1]):
        w = t[f"{m}.weights"][0, h, f.word]
        assert f"head {h} → “{label_word(labels[int(w.argmax())])}” {f3(float(w.max()))}" in n["heads"]
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
    assert f3(float(cw.max())) in n["cross"] and f"“{label_word(labels[int(cw.argmax())])}”" in n["cross"]
    assert f"predicting “{a.out_tokens[1]}”" in n["cross"]
    # output: the top logit and its probability at the followed position (the decoder steps' row)
    logits, probs = t["logits"][0, f.row], t["probs"][0, f.row]
    assert f"{float(logits.max()):.2f}" in n["output"] and f3(float(probs.max())) in n["output"]
    assert f"{logits.numel()} scores" in n["output"]
    # chosen, next, finished: what greedy decoding chose, with its probabilities
    steps = a.greedy.steps
    itos = bundle().tgt_vocab.itos
    assert f"“{itos[steps[f.row].chosen]}” with {f3(steps[f.row].candidates[0].prob)}" in n["chosen"]
    assert f3(steps[f.row].candidates[1].prob) in n["chosen"]
    assert f"“{itos[steps[f.row + 1].chosen]}” with {f3(steps[f.row + 1].candidates[0].prob)}" in n["next"]
    assert "One position further" in n["next"]
    assert f"“{a.translation}”" in n["finished"] and f3(steps[-1].candidates[0].prob) in n["finished"]
    assert f"“{a.translation}”" in n["sentence"] and f"{len(steps)} times" in n["sentence"]


def test_traced_and_decoded_probabilities_agree_with_the_mask_on():
    a = analyse(THINKING)
    for i, st in enumerate(a.greedy.steps):
        assert float(a.trace["probs"][0, i, st.chosen]) == pytest.approx(st.candidates[0].prob, abs=1e-5)


def test_textbook_numbers_are_computed_and_labelled():
    tm = thinking_machines()
    c = ctx(THINKING)
    scores = viz.lesson.view("scores", c).textbook
    assert scores.startswith("Textbook") and "not this model" in scores
    assert f"{float(tm.scores[0, 0]):g}" in scores and f"{float(tm.scores[0, 1]):g}" in scores
    assert "112" in scores and "96" in scores
    assert "14" in viz.lesson.view("scale", c).textbook and "12" in viz.lesson.view("scale", c).textbook
    soft = viz.lesson.view("softmax", c).textbook
    assert f"{float(tm.weights[0, 0]):.2f}" in soft and "0.88" in soft and "0.12" in soft


def test_interventions_are_said_not_hidden():
    all_off = frozenset(("enc.0.self_attn", h) for h in range(bundle().config.n_heads))
    iv = Interventions(heads_off=all_off, look_ahead_mask=False, scale=False, positional_encoding=False)
    c = ctx(THINKING, iv)
    views = {s.key: viz.lesson.view(s.key, c) for s in explain.lesson.STEPS}
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
    for s in explain.lesson.STEPS:
        v = viz.lesson.view(s.key, c)
        assert v.notice and v.figure is not None and v.table is not None


# --- the coreference step, step 1 and the bars' colours ------------------------------------------------


def test_the_coreference_step_traces_where_the_adjective_reaches_the_pronoun():
    """Step 19 on the coreference preset: the encoder heads' weights first (no head links "it" to "animal"), then the
    tracing of "…tired" against "…wide" at the pronoun, its numbers read from the grids' cells (audit 4, A2)."""
    v = viz.lesson.view("coref", ctx(CORE))
    n, s = v.notice, decide(CORE)
    t = s.tracing
    assert s.pronoun == "il" and s.partner_pronoun == "elle" and t is not None
    assert "By the weights, no encoder head links “it” to “animal”" in n
    adj = [row[10] for row in t.encoder.share]
    assert f"the encoder's vector of “tired” alone brings back at least {min(adj):.2f} of the difference" in n
    it_most = max(row[s.it] for row in t.encoder.share)
    assert "Only “tired” carries it in the encoder" in n and "where each brings back most, " in n
    assert f"“it” {max(it_most, 0.0):.2f}." in n or f"“it” {it_most:.2f}." in n
    after = t.decoder.share[t.decoder.rows.index("layer 0 after enc-dec attn")][0]
    writer = label_word(s.p.tgt_labels[-1])
    assert f"the stream at “{writer}” (the position that writes il) carries the difference" in n
    assert f"from layer 0's encoder-decoder attention on ({after:.2f};" in n
    lost = t.mask.share[t.mask.rows.index("decoder layer 0 enc-dec attn")][10]
    assert lost >= 0.5 and f"“tired” takes {lost:.2f} of il's lead with it: reading it there is needed" in n
    assert "the pronoun is decided later" not in n  # the old claim from weights (audit 4, A2)
    bars = v.figure.data[0]
    assert list(bars.y[:4]) == [
        "encoder vector of “animal”",
        "encoder vector of “street”",
        "encoder vector of “it”",
        "encoder vector of “tired”",
    ] and bars.x[3] == pytest.approx(max(adj))
    other = viz.lesson.view("coref", ctx(THINKING)).notice
    assert other.startswith("Your sentence has no “it” to resolve")
    same = viz.lesson.view("coref", ctx("the dog didn't cross the bridge because it was too tired")).notice
    assert same.startswith(
        "Both nouns are masculine here: the model writes il with “tired” and with “wide”, so the "
        "adjective cannot change the pronoun. This step follows the coreference example instead."
    )


def test_step_one_counts_the_before_pages_training_stages_in_words_defined_so_far():
    """Audit 4, B1: step 1 drew 1 sequential step for training where the Before page draws 2 stages (the decoder needs
    the encoder's output); both now say 2, the Before page's number. D6: step 1 speaks of words, an end mark and
    attention, not of tokens, <eos>, the encoder-decoder or self-attention, which steps 2 and 6 define."""
    import json

    data = json.loads((ROOT / "assets" / "rnn_comparison.json").read_text())
    stages = {r["transformer_train"] for r in data["sequential_steps"]["rows"]}
    v = viz.lesson.view("why", ctx(THINKING))
    bars = v.figure.data[0]
    assert stages == {2} and list(bars.y)[2] == 2 and bars.x[2].startswith("Transformer, training: 2 stages")
    assert "2 to train on the pair" in v.notice and "in one pass" not in v.notice
    for term in ("token", "<eos>", "encoder", "decoder", "self-attention"):
        assert term not in v.notice.lower(), term


@pytest.mark.parametrize("text", ["the cat is big and the dog is small", "thinking machines", "she is happy"])
def test_orange_marks_the_highest_bar_at_the_scores_and_at_the_softmax(text):
    """Steps 7 and 9 draw one bar per key; orange marks the highest of each (the score, then the weight), and their
    notices say so. (Step 7 marked the word's own key, step 9 the largest weight: one colour, two meanings.)"""
    from viz.lesson_base import ORANGE

    c = ctx(text)
    t, m = analyse(text).trace, "enc.0.self_attn"
    for step, name in (("scores", "scores"), ("softmax", "weights")):
        v = viz.lesson.view(step, c)
        bar = v.figure.data[0]
        row = t[f"{m}.{name}"][0, c.f.head, c.f.word]
        assert [i for i, col in enumerate(bar.marker.color) if col == ORANGE] == [int(row.argmax())], step
        assert "rang" in v.notice, step  # ("Orange marks the highest." / "(orange)")
    scores, own = t[f"{m}.scores"][0, c.f.head, c.f.word], c.f.word
    named = f"Its own key scores {float(scores[own]):.2f}."  # a head need not score the word itself highest
    assert (named in viz.lesson.view("scores", c).notice) == (own not in (int(scores.argmax()), int(scores.argmin())))
