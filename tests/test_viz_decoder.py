"""Unit tests of the decoder page's and the encoder-decoder attention page's helpers (viz/decoder.py,
explain/mask_experiments.py): the look-ahead mask step by step, the padding demo, the no-mask model's peeking, and
each notice line.

Most run on a tiny random-weights model (fast, no checkpoint needed: tests/viz_decoder_util.py); values are checked
against independent computations (literal matrices, torch.softmax, the model's own trace). The output page's
helpers (viz/decoding.py) are in tests/test_viz_decoding.py.
"""

import math

import numpy as np
import pytest
import torch

from explain import mask_experiments as me
from explain import recompute
from model import pipeline
from model.data import pad
from model.trace import Interventions, Trace
from model.transformer import Config, Transformer, traced
from model.vocab import BOS_ID, EOS_ID, tokenize
from tests.viz_decoder_util import analysed_fixture, bundle_fixture  # noqa: F401 - the fixtures analysed, bundle
from viz import decoder as vd


def traced_pair(bundle, iv=None):
    iv = iv or Interventions()
    src = torch.tensor([[4, 5, 6, 7, EOS_ID]])
    tgt = torch.tensor([[BOS_ID, 4, 5, 6, 7, 8]])
    return traced(bundle.model, src, tgt, iv)


# --- viz/decoder.py ---------------------------------------------------------------------------


def test_lecture_masking_is_the_lecture_example():
    ex = recompute.lecture_masking()
    inf = float("-inf")
    assert np.allclose(
        ex.scaled.numpy(), [[0.7, 0.1, 0.1, 0.1], [0.1, 0.6, 0.2, 0.1], [0.1, 0.3, 0.6, 0.1], [0.1, 0.3, 0.3, 0.3]]
    )
    assert ex.mask.tolist() == [[0, inf, inf, inf], [0, 0, inf, inf], [0, 0, 0, inf], [0, 0, 0, 0]]
    assert ex.masked[1].tolist() == pytest.approx([0.1, 0.6, inf, inf])
    assert ex.masked[3].tolist() == pytest.approx([0.1, 0.3, 0.3, 0.3])
    e = math.exp(0.5)
    assert ex.weights[1].tolist() == pytest.approx([1 / (1 + e), e / (1 + e), 0, 0], abs=1e-6)
    assert ex.weights[0].tolist() == [1.0, 0.0, 0.0, 0.0]
    assert torch.allclose(ex.weights.sum(-1), torch.ones(4))
    assert vd.above_diagonal(ex.weights) == (0, 0.0)


def test_small_views_of_the_mask_steps(bundle):
    ex = recompute.lecture_masking()
    e = math.exp(0.5)
    assert vd.lecture_notice(ex) == (
        f"row t=2 keeps 0.1 and 0.6 and hides the rest: softmax(0.1, 0.6) = ({1 / (1 + e):.3f}, {e / (1 + e):.3f})."
    )
    assert vd.row_sum_error(ex.weights) < 1e-6
    assert vd.row_sum_error(torch.tensor([[0.5, 0.25]])) == 0.25
    tr = traced_pair(bundle)
    assert vd.step_shapes(tr, "dec.0.self_attn") == [
        "[1, 2, 6, 6]  (B, H, t, t)",
        "[1, 1, 6, 6]  (B|1, 1, t|1, t)",
        "[1, 2, 6, 6]  (B, H, t, t)",
        "[1, 2, 6, 6]  (B, H, t, t)",
    ]
    assert torch.equal(vd.head_weights(tr, "dec.1.self_attn", 1), tr["dec.1.self_attn.weights"][0, 1])


def test_mask_steps_add_up_and_hide_the_future(bundle):
    tr = traced_pair(bundle)
    for layer in range(2):
        for head in range(2):
            s = recompute.mask_steps(tr, f"dec.{layer}.self_attn", head)
            assert s.scaled.shape == s.mask.shape == s.masked.shape == s.weights.shape == (6, 6)
            assert torch.equal(s.masked, s.scaled + s.mask)
            assert torch.allclose(s.weights, torch.softmax(s.masked, -1))
            assert torch.equal(torch.triu(s.weights, 1), torch.zeros(6, 6))
            assert vd.above_diagonal(s.weights) == (0, 0.0)
    off = recompute.mask_steps(traced_pair(bundle, Interventions(look_ahead_mask=False)), "dec.0.self_attn", 0)
    n, total = vd.above_diagonal(off.weights)
    assert n == 15 and total > 0  # every one of the 6*5/2 future cells gets some weight
    assert torch.equal(off.mask, torch.zeros(6, 6))  # padding mask only, no <pad> here: all zeros


def test_above_diagonal_literal():
    w = torch.tensor([[0.5, 0.5, 0.0], [0.2, 0.8, 0.0], [0.1, 0.2, 0.7]])
    assert vd.above_diagonal(w) == (1, pytest.approx(0.5))


def test_renormalisation_row(bundle):
    tr = traced_pair(bundle)
    s = recompute.mask_steps(tr, "dec.1.self_attn", 1)
    labels = [str(i) for i in range(6)]
    df = vd.renormalisation(s.scaled[2], s.mask[2], labels)
    assert df["mask"].tolist() == ["0", "0", "0", "-inf", "-inf", "-inf"]
    assert np.allclose(df["masked softmax (the weights)"], s.weights[2].numpy(), atol=1e-6)
    assert np.allclose(df["÷ share of allowed keys"], df["masked softmax (the weights)"], atol=1e-6)
    full = torch.softmax(s.scaled[2], -1)
    assert np.allclose(df["softmax over all keys"], full.numpy(), atol=1e-6)
    assert df["masked softmax (the weights)"].sum() == pytest.approx(1.0)


def test_block_table_shapes(bundle):
    tr = traced_pair(bundle)
    df = vd.block_table(tr, 1)
    assert df["tensor"].tolist()[:3] == ["dec.0.add_norm3.out", "dec.1.self_attn.out", "dec.1.add_norm1.out"]
    assert set(df["shape"][:-1]) == {"[1, 6, 16]"}
    assert df["shape"].iloc[-1] == "[1, 5, 16]"
    assert vd.block_table(tr, 0)["tensor"].iloc[0] == "tgt.input"


def test_block_dot():
    dot = vd.block_dot(3)
    assert dot.startswith("digraph") and "× 3 blocks" in dot and 'enc -> ca [label=" K, V"]' in dot
    assert dot.count("add & norm") == 3 and "masked multi-head" in dot


def test_cross_attention(bundle):
    tr = traced_pair(bundle)
    w = tr["dec.1.cross_attn.weights"][0]
    assert torch.equal(vd.cross_attention(tr, 1, 0), w[0])
    avg = vd.cross_attention(tr, 1)
    assert avg.shape == (6, 5) and torch.allclose(avg, (w[0] + w[1]) / 2)
    assert torch.allclose(avg.sum(-1), torch.ones(6))
    assert torch.allclose(vd.head_average(tr, "dec.0.self_attn"), tr["dec.0.self_attn.weights"][0].mean(0))


def test_padding_demo(bundle):
    d = me.padding_demo(bundle, "i am a student", me.LONG_PARTNER)
    assert d.short == 0 and d.n_real == 5 and d.src.shape == (2, 12) and d.n_pad == 7
    assert d.src[0, 5:].tolist() == [0] * 7
    assert d.mask.shape == (2, 1, 1, 12) and d.mask.dtype == torch.bool
    assert d.mask[0, 0, 0].tolist() == [True] * 5 + [False] * 7 and d.mask[1].all()
    grid = vd.mask_grid(d)
    assert grid.shape == (2, 12) and torch.isneginf(grid[0, 5:]).all() and (grid[0, :5] == 0).all()
    # mask on: <pad> keys get exactly 0 (every layer, head, query); off: they get weight
    assert torch.equal(d.weights_on[..., 5:], torch.zeros_like(d.weights_on[..., 5:]))
    assert (d.pad_weight(False) > 0).all()
    assert torch.equal(d.cross_on[..., 5:], torch.zeros_like(d.cross_on[..., 5:]))
    assert (d.cross_off[..., 5:] > 0).all()
    # independent: the short sentence alone vs in the batch
    alone = traced(bundle.model, torch.tensor([[4, 5, 6, 7, EOS_ID]]), torch.tensor([[BOS_ID]]))
    assert torch.allclose(d.weights_on[0, :, :5, :5], alone["enc.0.self_attn.weights"][0], atol=1e-6)
    assert d.out_change(True) < 1e-5 < d.out_change(False)
    assert d.translation_on == d.translation_alone
    table = vd.batch_table(d)
    assert table.iloc[0].tolist() == ["i", "am", "a", "student", "<eos>"] + ["<pad>"] * 7
    assert table.index[0] == "sentence 1 (shorter)"
    assert d.labels[0][5] == "5 <pad>"


def test_padding_result_views(bundle):
    """What the page reads off the padding demo's result: labels, one head's weights, the most weight on <pad>."""
    d = me.padding_demo(bundle, "i am a student", me.LONG_PARTNER)
    assert vd.grid_labels(d) == ([f"pos {t}" for t in range(12)], ["sentence 1", "sentence 2"])
    assert torch.equal(vd.padding_weights(d, 1, 0, True), d.weights_on[1, 0])
    assert torch.equal(vd.padding_weights(d, 1, 0, False), d.weights_off[1, 0])
    assert vd.max_pad_weight(d, 0, 1, True) == 0.0
    off = d.weights_off[0, 1, :5, 5:].sum(-1).max()
    assert vd.max_pad_weight(d, 0, 1, False) == pytest.approx(float(off)) and float(off) > 0


def test_padding_partner(bundle):
    assert me.padding_partner(4, bundle) == me.LONG_PARTNER
    assert me.padding_partner(10, bundle) == me.LONG_PARTNER
    assert me.padding_partner(11, bundle) == me.SHORT_PARTNER  # as long as the long partner: use the short one
    assert me.padding_partner(40, bundle) == me.SHORT_PARTNER


def test_pad_helper_is_what_the_demo_uses():
    assert pad([[1, 2], [3]]).tolist() == [[1, 2], [3, 0]]
    assert tokenize(me.LONG_PARTNER, "en")[-1] == "tired"


def test_peek_helpers_literal():
    # row t puts its weight on t+1 (a "cheating" head), last row on itself
    w = torch.zeros(4, 4)
    for t in range(3):
        w[t, t + 1] = 0.9
        w[t, t] = 0.1
    w[3, 3] = 1.0
    assert vd.next_weight(w).tolist() == pytest.approx([0.9, 0.9, 0.9])
    assert vd.peek_share(w) == 1.0
    assert vd.peek_share(torch.eye(4)) == 0.0
    assert math.isnan(vd.peek_share(torch.ones(1, 1)))


def test_cheat_table_and_peek_scores(bundle):
    prep = pipeline.prepare(bundle, "i am a student")
    tf = pipeline.teacher_forced(bundle, prep, "je suis étudiant", Interventions(look_ahead_mask=False))
    w = tf.trace["dec.0.self_attn.weights"][0, 1]
    df = vd.cheat_table(tf, bundle.tgt_vocab.itos, w)
    assert df["must predict"].tolist() == ["je", "suis", "étudiant", "<eos>"]
    assert df["p(correct next token)"].tolist() == pytest.approx(list(tf.gold_probs), abs=5e-5)
    assert df["weight on position t+1"].tolist()[:3] == pytest.approx(w.diagonal(1).tolist(), abs=5e-5)
    assert math.isnan(df["weight on position t+1"].iloc[-1])
    assert vd.accuracy(tf) == sum(p == g for p, g in zip(tf.predicted, tf.gold, strict=True)) / 4
    assert vd.mean_gold_prob(tf) == pytest.approx(sum(tf.gold_probs) / 4)
    peek = vd.peek_scores(tf.trace, 2)
    assert peek.shape == (2, 2)
    assert peek.loc["layer 0", "head 1"] == pytest.approx(float(w.diagonal(1).mean()))
    layer, head = vd.best_peek_head(tf.trace, 2)
    assert peek.iloc[layer, head] == peek.to_numpy().max()


def test_cheating_tables(bundle):
    story = me.cheating_story(bundle, bundle, "i am a student", "je suis étudiant")
    assert story.reference == "je suis étudiant"
    tf = vd.teacher_forcing_table(story)
    assert list(tf.columns) == ["", "accuracy (argmax = next reference word)", "mean p(next reference word)"]
    assert tf.iloc[0, 1] == f"{vd.accuracy(story.cheat_tf):.0%}"
    assert tf.iloc[1, 1] == f"{vd.accuracy(story.base_tf):.0%}"
    assert tf.iloc[1, 2] == f"{vd.mean_gold_prob(story.base_tf):.3f}"
    gen = vd.generation_table(story)
    assert gen[""].tolist() == ["no-mask model", "base model", "reference"]
    assert gen["translation"].tolist()[2] == "je suis étudiant"
    assert gen["translation"].tolist()[1] == (story.base.translation or "(empty)")


def test_training_figures(bundle):
    f = vd.training_figures(bundle)
    assert f["held-out exact match (greedy)"] == 0.5 and f["final train loss (label-smoothed)"] == 1.2
    assert f["look-ahead mask in training"] is True and f["steps"] == 7
    assert f["held-out BLEU (greedy)"] is None
    t = vd.training_table({"a": bundle, "b": bundle}).set_index("")
    assert t.loc["held-out exact match (greedy)"].tolist() == ["50.0%", "50.0%"]
    assert t.loc["final train loss (label-smoothed)", "a"] == "1.200"
    assert t.loc["held-out BLEU (greedy)", "b"] == "—" and t.loc["look-ahead mask in training", "a"] == "on"
    assert t.loc["steps", "a"] == "7"


def test_who_looks_where():
    t = vd.WHO_LOOKS_WHERE
    assert len(t) == 3 and "previous target tokens" in t.iloc[1, 2] and "all the encoder states" in t.iloc[2, 2]


# --- Notice lines: each checked against the tensor it describes -----------------------------------

LAB4 = ["0 <bos>", "1 les", "2 machines", "3 pensantes"]


def test_masked_notice_literal():
    w = torch.tensor([[1.0, 0, 0, 0], [0.3, 0.7, 0, 0], [0.9, 0.05, 0.05, 0], [0.2, 0.2, 0.1, 0.5]])
    note = vd.masked_notice(w, LAB4)
    assert "row <bos> has only itself to look at (weight 1.000)" in note
    # rows les and pensantes peak on themselves; machines peaks on <bos> (0.9), the strongest earlier word
    assert "2 put their largest weight on their own position and 1 on an earlier word" in note
    assert "(0 on the word just before" in note
    assert "machines → <bos> 0.900" in note
    assert "the 6 cells above the diagonal (the future) are exactly 0" in note
    w_off = w.clone()
    w_off[0] = torch.tensor([0.4, 0.3, 0.2, 0.1])
    note = vd.masked_notice(w_off, LAB4)
    assert "3 of the 6 cells above the diagonal are > 0 (sum 0.600)" in note
    prev = torch.tensor([[1.0, 0, 0, 0], [0.8, 0.2, 0, 0], [0.1, 0.7, 0.2, 0], [0.1, 0.1, 0.6, 0.2]])
    note = vd.masked_notice(prev, LAB4)  # a "previous word" head
    assert "0 put their largest weight on their own position and 3 on an earlier word" in note
    assert "(3 on the word just before" in note


def test_masked_notice_on_the_model(bundle, analysed):
    steps = recompute.mask_steps(analysed.trace, "dec.0.self_attn", 1)
    w, lab = steps.weights, analysed.tgt_labels
    note = vd.masked_notice(w, lab)
    T = w.size(0)
    assert f"the {T * (T - 1) // 2} cells above the diagonal (the future) are exactly 0" in note
    on_diag = sum(int(w[t].argmax()) == t for t in range(1, T))
    assert f"{on_diag} put their largest weight on their own position" in note
    low = torch.tril(w, -1)
    i, j = divmod(int(low.argmax()), T)
    assert f"{lab[i].split(' ', 1)[1]} → {lab[j].split(' ', 1)[1]} {float(w[i, j]):.3f}" in note


def test_renorm_notice(bundle, analysed):
    steps = recompute.mask_steps(analysed.trace, "dec.0.self_attn", 0)
    row = 2
    allowed = steps.mask[row] == 0  # keys 0..row, minus any <pad> this random model may have written
    assert not allowed[row + 1 :].any()
    share = float(torch.softmax(steps.scaled[row], -1)[allowed].sum())
    note = vd.renorm_notice(steps.scaled[row], steps.mask[row], analysed.tgt_labels[row])
    assert float((torch.softmax(steps.scaled[row] + steps.mask[row], -1)[allowed]).sum()) == pytest.approx(1.0)
    word = analysed.tgt_labels[row].split(" ", 1)[1]
    n = int(allowed.sum())
    assert f"the {n} allowed key{'s' if n != 1 else ''} of row “{word}” would get {share:.3f}" in note


def test_future_and_peek_notices():
    on = torch.tril(torch.ones(4, 4))
    on = on / on.sum(-1, keepdim=True)
    off = torch.full((4, 4), 0.25)
    note = vd.future_notice(on, off, LAB4)
    assert "the future gets 0.000 in total (0 cells > 0)" in note
    assert "6 cells > 0 get 1.500, most in row <bos>, which gives 0.750" in note
    assert "even with the mask off" in vd.future_notice(on, on, LAB4)
    peek = torch.zeros(4, 4)
    for t in range(3):
        peek[t, t + 1], peek[t, t] = 0.8 - 0.1 * t, 0.2 + 0.1 * t
    peek[3, 3] = 1.0
    note = vd.peek_notice(peek, LAB4)
    assert "in 3 of 3 rows the largest weight sits on position t + 1" in note
    assert "row <bos> → les 0.800" in note


def test_padding_notices(bundle):
    d = me.padding_demo(bundle, "i am a student", me.LONG_PARTNER)
    note = vd.padding_notice(d, 0, 1)
    off = d.pad_weight(False)[0, 1]
    worst = int(off.argmax())
    assert "the 7 <pad> columns get exactly 0.000" in note
    assert f"“{d.labels[0][worst].split(' ', 1)[1]}” gives {float(off[worst]):.3f} of its weight to <pad>" in note
    assert f"{d.out_change(False):.2e}" in note
    assert "sentence 1 has 5 real tokens and 7 <pad>" in vd.mask_grid_notice(d)


def test_cross_notice_and_alignment():
    src = ["0 thinking", "1 machines", "2 <eos>"]
    w = torch.tensor([[0.2, 0.45, 0.35], [0.01, 0.99, 0.0], [1.0, 0.0, 0.0], [0.05, 0.02, 0.93]])
    nxt = ["0 les", "1 machines", "2 pensantes", "3 <eos>"]
    note = vd.cross_notice(w, src, LAB4, nxt)
    assert "“les” (writes “machines”) reads “machines” 0.99" in note
    assert "“<bos>” (writes “les”) reads “machines” 0.45" in note
    assert "“machines” (writes “pensantes”) reads “thinking” 1.00" in note
    assert "The last row (pensantes) must write <eos>, and it reads the source's <eos> most (0.93)" in note
    assert "other row" not in note and note.startswith("3 of 4 rows put at least half their weight on one source")
    w2 = w.clone()
    w2[0] = torch.tensor([0.1, 0.1, 0.8])
    assert "1 other row also reads <eos> most" in vd.cross_notice(w2, src, LAB4, nxt)
    w3 = w.clone()
    w3[3] = torch.tensor([0.6, 0.3, 0.1])
    assert "it gives the source's <eos> 0.10" in vd.cross_notice(w3, src, LAB4, nxt)
    df = vd.alignment(w, src, LAB4, nxt)
    assert df["predicts"].tolist() == ["les", "machines", "pensantes", "<eos>"]
    assert df["reads most (source word)"].tolist() == ["machines", "machines", "thinking", "<eos>"]
    assert df["its weight"].tolist() == pytest.approx([0.45, 0.99, 1.0, 0.93])
    assert df["weight on <eos>"].tolist() == pytest.approx([0.35, 0.0, 0.0, 0.93])


def test_block_notice_and_biases(bundle, analysed):
    note = vd.block_notice(analysed.trace, 1)
    T, m = analysed.trace["tgt.input"].size(1), len(analysed.src_labels)
    assert f"takes [1, {T}, 16] and gives back the same shape" in note and f"enc.out [1, {m}, 16]" in note
    assert vd.projection_biases(bundle.model)
    cfg = Config(src_vocab=10, tgt_vocab=10, d_model=8, n_heads=2, d_ff=16)
    model = Transformer(cfg)
    for mod in model.modules():
        if hasattr(mod, "W_q"):
            mod.W_q.bias = None
    assert not vd.projection_biases(model)


def test_dropout_where_the_page_says():
    """The page says: besides the paper's dropout, this model drops attention weights and the FFN's hidden layer.
    With only those dropouts at p = 1 (training mode), the heads' outputs and the FFN's hidden layer vanish."""
    torch.manual_seed(0)
    cfg = Config(src_vocab=10, tgt_vocab=10, d_model=8, n_heads=2, d_ff=16, dropout=0.0)
    model = Transformer(cfg).train()
    layer = model.decoder[0]
    layer.self_attn.dropout.p = 1.0  # dropout on the attention weights
    layer.ffn.dropout.p = 1.0  # dropout on the FFN's hidden layer
    tr = Trace(Interventions())
    with torch.no_grad():
        model(torch.tensor([[4, 5, EOS_ID]]), torch.tensor([[BOS_ID, 4, 5]]), tr)  # training mode: dropout on
    assert (tr["dec.0.self_attn.weights"] > 0).any()  # recorded before dropout
    assert torch.equal(tr["dec.0.self_attn.z"], torch.zeros_like(tr["dec.0.self_attn.z"]))
    assert torch.allclose(tr["dec.0.ffn.out"], layer.ffn.W_2.bias.expand_as(tr["dec.0.ffn.out"]))
    assert not torch.equal(tr["dec.0.cross_attn.z"], torch.zeros_like(tr["dec.0.cross_attn.z"]))
