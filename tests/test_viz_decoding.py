"""Unit tests of the output page's helpers (viz/decoding.py): the top candidates and the logits, the loss and its
gradient, label smoothing, greedy decoding and the beam search's tree and tables, and the page's notice lines.

Most run on a tiny random-weights model (fast, no checkpoint needed: tests/viz_decoder_util.py); values are checked
against independent computations (literal matrices, torch.softmax, torch's cross_entropy, the model's own trace).
The decoder page's helpers (viz/decoder.py) are in tests/test_viz_decoder.py.
"""

import math

import numpy as np
import pytest
import torch

from explain import recompute
from explain.embeddings import one_hot
from model import pipeline
from model.decoding import beam_search, greedy_decode
from model.vocab import EOS_ID, SPECIALS
from tests.viz_decoder_util import analysed_fixture, bundle_fixture  # noqa: F401 - the fixtures analysed, bundle
from viz import decoding as vo
from viz.embeddings import textbook_one_hot

# --- viz/decoding.py --------------------------------------------------------------------------


def test_textbook_one_hot():
    df = textbook_one_hot("am")
    assert list(df.columns) == ["a", "am", "I", "thanks", "student", "<eos>"]
    assert df.loc["index"].tolist() == [0, 1, 2, 3, 4, 5]
    assert df.iloc[1].tolist() == [0, 1, 0, 0, 0, 0]
    assert one_hot([2], 4)[0].tolist() == [0, 0, 1, 0]


def test_top_candidates_and_figures(analysed, bundle):
    itos = bundle.tgt_vocab.itos
    probs, logits = analysed.trace["probs"][0, 1], analysed.trace["logits"][0, 1]
    df = vo.top_candidates(probs, logits, itos, 10)
    assert len(df) == 10 and df["rank"].tolist() == list(range(1, 11))
    assert df["probability"].tolist() == pytest.approx(torch.sort(probs, descending=True).values[:10].tolist())
    assert df["probability"].is_monotonic_decreasing and df["probability"].sum() <= 1 + 1e-6
    assert df["word"].iloc[0] == itos[int(probs.argmax())]
    assert df["logit"].tolist() == pytest.approx(logits[df["index"].tolist()].tolist())
    fig = vo.top_bar(df, highlight=df["word"].iloc[0])
    assert list(fig.data[0].x) == pytest.approx(df["probability"].tolist())
    lf = vo.logits_figure(logits, itos)
    assert len(lf.data[0].y) == len(itos) and lf.data[1].x[0] == int(logits.argmax())
    assert len(vo.top_candidates(probs[:3], logits[:3], itos, 10)) == 3


def test_position_output(analysed, bundle):
    tr = analysed.trace
    out = vo.position_output(tr, 2)
    assert torch.equal(out.h, tr["dec.out"][0, 2]) and torch.equal(out.logits, tr["logits"][0, 2])
    assert torch.equal(out.probs, tr["probs"][0, 2]) and out.best == int(tr["logits"][0, 2].argmax())
    assert torch.equal(vo.output_probs(tr), tr["probs"][0]) and torch.equal(vo.output_probs(tr, 1), tr["probs"][0, 1])
    assert vo.output_weight(bundle.model).shape == (16, len(bundle.tgt_vocab.itos))


def test_loss_table_and_gradient(bundle):
    itos = bundle.tgt_vocab.itos
    tf = pipeline.teacher_forced(bundle, pipeline.prepare(bundle, "i am a student"), "je suis étudiant")
    df = vo.loss_table(tf, itos)
    probs = tf.trace["probs"][0]
    gold = torch.tensor(tf.gold)
    manual = -probs[torch.arange(4), gold].log()
    assert df["-log p(gold)"].tolist() == pytest.approx(manual.tolist(), rel=1e-5)
    assert tf.loss == pytest.approx(float(manual.mean()), rel=1e-5)  # the mean of -log p(gold): the cross-entropy
    assert vo.n_right(tf) == sum(p == g for p, g in zip(tf.predicted, tf.gold, strict=True))
    g = recompute.logit_gradient(probs[1], tf.gold[1])
    assert float(g.sum()) == pytest.approx(0.0, abs=1e-6) and float(g[tf.gold[1]]) < 0
    # p - y is the real gradient of the cross-entropy with respect to the logits
    logits = tf.trace["logits"][0, 1].clone().requires_grad_(True)
    torch.nn.functional.cross_entropy(logits[None], torch.tensor([tf.gold[1]])).backward()
    assert torch.allclose(logits.grad, g, atol=1e-6)
    gt = vo.gradient_table(probs[1], tf.gold[1], itos)
    assert np.allclose(gt["gradient p − y"], gt["p"] - gt["one-hot y"], atol=1e-6)


@pytest.mark.parametrize("eps", [0.0, 0.1, 0.3])
def test_label_smoothing(bundle, eps):
    """The paper's (Szegedy et al.'s) target, (1 − ε)·one-hot + ε/V, which is torch's label_smoothing target."""
    V = len(bundle.tgt_vocab)
    q = recompute.smoothed_target(5, V, eps)
    assert float(q.sum()) == pytest.approx(1.0)
    assert float(q[5]) == pytest.approx(1 - eps + eps / V) and float(q[0]) == pytest.approx(eps / V)
    assert torch.allclose(q, (1 - eps) * one_hot([5], V)[0].double() + eps / V)
    tf = pipeline.teacher_forced(bundle, pipeline.prepare(bundle, "i am a student"), "je suis étudiant")
    probs = tf.trace["probs"][0].double()
    logits = tf.trace["logits"][0]
    sm = recompute.label_smoothing(logits, tf.gold, eps, bundle.tgt_vocab.itos)
    assert sm.plain == pytest.approx(tf.loss, rel=1e-5)
    manual = (
        sum(float(-(recompute.smoothed_target(g, V, eps) * probs[t].log()).sum()) for t, g in enumerate(tf.gold)) / 4
    )
    assert sm.smoothed == pytest.approx(manual, rel=1e-6)
    # the same loss two ways: our target by hand, and torch's cross_entropy(label_smoothing=ε) as model/train.py uses
    gold = torch.tensor(tf.gold)
    by_torch = float(torch.nn.functional.cross_entropy(logits.double(), gold, label_smoothing=eps))
    assert sm.smoothed == pytest.approx(by_torch, abs=1e-6) and sm.torch_loss == pytest.approx(by_torch, abs=1e-12)
    table = vo.smoothing_table(sm)
    assert (table["q(gold)"] + (V - 1) * table["q(each other word)"]).tolist() == pytest.approx([1.0] * 4)
    assert table["q(each other word)"].tolist() == pytest.approx([eps / V] * 4)
    if eps == 0:
        assert sm.smoothed == pytest.approx(sm.plain) and sm.floor == pytest.approx(0.0)
    else:
        g = 1 - eps + eps / V
        ent = -(g * math.log(g) + (V - 1) * (eps / V) * math.log(eps / V))
        assert sm.floor == pytest.approx(ent)
    fig = vo.target_figure(tf.trace["probs"][0, 0], tf.gold[0], eps, bundle.tgt_vocab.itos)
    assert [t.name.split(" ")[0] for t in fig.data] == ["model", "one-hot", "smoothed"]
    gold_word = [x for x in fig.data[1].x if x.endswith("(gold)")]
    assert len(gold_word) == 1 and sum(fig.data[1].y) == 1.0
    note = vo.smoothing_notice(probs[0], tf.gold[0], eps, bundle.tgt_vocab.itos)
    assert f"{1 - eps + eps / V:.5f}" in note and f"{eps / V:.2e}" in note
    assert f"{float(probs[0, tf.gold[0]]):.4f}" in note


def test_smoothed_target_matches_torch_on_random_logits():
    """Losses computed both ways agree to 1e-6 for any logits, any gold, any ε."""
    torch.manual_seed(1)
    itos = [f"w{i}" for i in range(37)]
    for eps in (0.05, 0.1, 0.5):
        logits = torch.randn(6, 37) * 4
        gold = torch.randint(0, 37, (6,))
        q = torch.stack([recompute.smoothed_target(int(g), 37, eps) for g in gold])
        assert torch.allclose(q.sum(-1), torch.ones(6, dtype=torch.float64))
        ours = float(-(q * torch.log_softmax(logits.double(), -1)).sum(-1).mean())
        theirs = float(torch.nn.functional.cross_entropy(logits, gold, label_smoothing=eps))
        assert ours == pytest.approx(theirs, abs=1e-6)
        assert recompute.label_smoothing(logits, gold.tolist(), eps, itos).smoothed == pytest.approx(theirs, abs=1e-6)


def test_greedy_helpers(analysed, bundle):
    itos = bundle.tgt_vocab.itos
    g = analysed.greedy
    df = vo.greedy_table(g, itos)
    assert df["chosen word"].tolist() == [itos[s.chosen] for s in g.steps]
    assert df["p(chosen)"].tolist() == [s.candidates[0].prob for s in g.steps]
    assert df["prefix (decoder input)"].iloc[0] == "<bos>"
    cand = vo.step_candidates(g.steps[0], itos)
    assert cand["chosen"].tolist()[0] == "✓" and len(cand) == len(g.steps[0].candidates)
    lp, score, n = vo.greedy_score(g, 0.6)
    assert n == len(g.steps)
    assert lp == pytest.approx(sum(math.log(s.candidates[0].prob) for s in g.steps))
    assert score == pytest.approx(lp / ((5 + n) / 6) ** 0.6)


def beam_of(bundle, k, alpha=0.6, text="the animal didn't cross the street because it was too tired"):
    return beam_search(bundle.model, pipeline.prepare(bundle, text).src(), k, alpha)


@pytest.mark.parametrize("k", [1, 2, 3, 5])
def test_beam_nodes_tree(bundle, k):
    res = beam_of(bundle, k)
    nodes = vo.beam_nodes(res)
    assert [n.id for n in nodes] == list(range(len(nodes)))
    assert len(nodes) == 1 + sum(len(s.expansions) for s in res.steps)
    for d, step in enumerate(res.steps, start=1):
        kept = [n for n in nodes if n.depth == d and n.kept]
        assert len(kept) == sum(e.kept for e in step.expansions) == vo.kept_per_step(res)[d - 1]
        live = [n.hypothesis for n in kept if not n.finished]
        assert tuple(live) == step.beam
    for n in nodes[1:]:
        parent = nodes[n.parent]
        assert parent.depth == n.depth - 1 and parent.kept and not parent.finished
        prev = () if parent.hypothesis is None else parent.hypothesis.tokens
        assert n.hypothesis.tokens == (*prev, n.token)
        assert n.hypothesis.log_prob == pytest.approx(
            (0 if parent.hypothesis is None else parent.hypothesis.log_prob) + math.log(n.prob), abs=1e-5
        )
    path = vo.best_path(nodes, res.best)
    assert len(path) == len(res.best.tokens) + 1
    fig = vo.beam_tree(res, bundle.tgt_vocab.itos)
    markers = {t.name: t for t in fig.data if t.mode and "markers" in t.mode}
    xs = list(markers["kept"].x) + list(markers["finished"].x)
    for d in range(1, len(res.steps) + 1):
        assert xs.count(d) == vo.kept_per_step(res)[d - 1]
    assert len(markers["pruned"].x) == sum(not e.kept for s in res.steps for e in s.expansions)


def test_beam_k1_is_greedy(bundle):
    prep = pipeline.prepare(bundle, "the animal didn't cross the street because it was too tired")
    g = greedy_decode(bundle.model, prep.src())
    res = beam_search(bundle.model, prep.src(), 1, 0.6)
    assert res.best.output == g.tokens
    lp, score, _ = vo.greedy_score(g, 0.6)
    assert res.best.log_prob == pytest.approx(lp, abs=1e-4) and res.best.score == pytest.approx(score, abs=1e-4)
    assert vo.kept_per_step(res) == [1] * len(res.steps)


def test_beam_tables_and_run_twice(bundle):
    itos = bundle.tgt_vocab.itos
    res = beam_of(bundle, 3)
    t = vo.beam_step_table(res, 1, itos)
    assert (
        len(t) == 3
        and t["fate"].tolist().count("pruned") + t["fate"].tolist().count("kept") + t["fate"].tolist().count("finished")
        == 3
    )
    assert t["total log-prob"].is_monotonic_decreasing
    f = vo.finished_table(res, itos)
    assert f["normalised score"].is_monotonic_decreasing
    two = beam_of(bundle, 2)
    rt = vo.run_twice(two, itos)
    assert len(rt) <= 4 and rt["p(step 1)"].iloc[0] >= rt["p(step 1)"].iloc[-1]
    ok = rt["p(step 2 | step 1)"].notna()
    assert np.allclose(rt["p(both)"][ok], (rt["p(step 1)"] * rt["p(step 2 | step 1)"])[ok], rtol=1e-4)
    assert rt["kept after step 2"].tolist().count("✓") == sum(e.kept for e in two.steps[1].expansions)


def test_ids_text():
    itos = list(SPECIALS) + ["l'", "animal", "dort"]
    assert vo.ids_text([4, 5, 6, EOS_ID, 6], itos, "fr") == "l'animal dort"
    assert vo.ids_text([], itos, "fr") == ""


# --- Notice lines: each checked against the tensor it describes -----------------------------------


def test_output_notices(analysed, bundle):
    itos = bundle.tgt_vocab.itos
    out = vo.position_output(analysed.trace, 1)
    p, ids = out.probs.topk(2)
    note = vo.choice_notice(out, itos, analysed.tgt_labels[1])
    word = analysed.tgt_labels[1].split(" ", 1)[1]
    assert f"position “{word}” chooses “{itos[int(ids[0])]}” with p = {float(p[0]):.4f}" in note
    assert f"runner-up “{itos[int(ids[1])]}” gets {float(p[1]):.4f}" in note
    assert int(ids[0]) == out.best
    v, li = out.logits.topk(2)
    gap = float(v[0] - v[1])
    note = vo.logits_notice(out.logits, itos)
    assert f"index {int(li[0])}" in note and f"{gap:.2f} above the next" in note
    assert f"{math.exp(gap):,.1f}" in note
    assert math.exp(gap) == pytest.approx(float(p[0] / p[1]), rel=1e-3)  # the ratio the notice states is p1/p2


def test_loss_and_greedy_and_beam_notices(analysed, bundle):
    itos = bundle.tgt_vocab.itos
    tf = pipeline.teacher_forced(bundle, pipeline.prepare(bundle, "i am a student"), "je suis étudiant")
    worst = int(np.argmin(tf.gold_probs))
    note = vo.loss_notice(tf, itos)
    assert f"must write “{itos[tf.gold[worst]]}” and gives it p = {tf.gold_probs[worst]:.4f}" in note
    assert f"−log p = {-math.log(tf.gold_probs[worst]):.3f}" in note and f"L = {tf.loss:.4f}" in note
    step = analysed.greedy.steps[0]
    note = vo.greedy_notice(step, 1, itos)
    assert f"“{itos[step.chosen]}”, p = {step.candidates[0].prob:.4f}" in note
    assert f"runner-up “{itos[step.candidates[1].token]}”, p = {step.candidates[1].prob:.4f}" in note
    res = beam_of(bundle, 3, text="i am a student")
    note = vo.beam_notice(res, analysed.greedy, itos)
    n_exp = sum(len(s.expansions) for s in res.steps)
    n_pruned = sum(not e.kept for s in res.steps for e in s.expansions)
    assert f"weighed {n_exp} hypotheses and pruned {n_pruned}" in note
    assert f"{res.best.log_prob:.3f}" in note and f"{res.best.score:.3f}" in note
    same = vo.ids_text(res.best.output, itos, "fr") == vo.ids_text(analysed.greedy.tokens, itos, "fr")
    assert ("found the same sentence" in note) == same
    comp = vo.comparison_table(analysed.greedy, res, 0.6, 3, itos)
    assert comp["output"].tolist() == [
        vo.ids_text(analysed.greedy.tokens, itos, "fr"),
        vo.ids_text(res.best.output, itos, "fr"),
    ]
    assert comp["total log-prob"].iloc[1] == res.best.log_prob
    assert comp["normalised score"].iloc[0] == pytest.approx(vo.greedy_score(analysed.greedy, 0.6)[1])
