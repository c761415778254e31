"""Unit tests of the attention/encoder page helpers: explain/experiments.py, viz/attention.py, viz/layers.py."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch

from explain import recompute
from explain.experiments import (
    dot_product_samples,
    ffn_hidden,
    head_projection,
    layer_norm_params,
    plain_self_attention,
    saturation,
    saturation_by_dk,
    scaled,
    softmax_jacobian,
    summarize,
    variance_by_dk,
)
from explain.textbook import thinking_machines
from model.pipeline import analyse, label_word, prepare
from model.trace import Interventions
from model.transformer import Config, Transformer, traced
from viz import attention as va
from viz import coref as vc
from viz import heads as vh
from viz import layers as vl
from viz import scaling as vs
from viz.margins import reserve

# --- Why scale: the random experiments ----------------------------------------------------------


@pytest.mark.parametrize("d_k", [1, 16, 64, 256])
def test_dot_product_variance_is_d_k(d_k):
    s = dot_product_samples(d_k, n=20_000, seed=1)
    assert s.shape == (20_000,)
    assert float(s.var()) == pytest.approx(d_k, rel=0.06)
    assert float((s / math.sqrt(d_k)).var()) == pytest.approx(1.0, rel=0.06)
    assert float(s.mean()) == pytest.approx(0.0, abs=4 * math.sqrt(d_k / 20_000))


def test_variance_by_dk_tracks_d_k_and_is_reproducible():
    d_ks = [1, 4, 32, 128, 1024]
    rows = variance_by_dk(d_ks, n=4000, seed=0)
    assert [r.d_k for r in rows] == d_ks
    for r in rows:
        assert r.variance == pytest.approx(r.d_k, rel=0.1)
        assert r.variance_scaled == pytest.approx(1.0, rel=0.1)
        assert r.low < 0 < r.high
    assert rows[-1].high - rows[-1].low > 10 * (rows[0].high - rows[0].low)  # the range grows like sqrt(d_k)
    assert variance_by_dk(d_ks, n=4000, seed=0) == rows  # same seed, same numbers
    assert variance_by_dk(d_ks, n=4000, seed=1) != rows


def test_softmax_jacobian_equals_autograd():
    s = torch.tensor([0.3, -1.2, 2.0, 0.5], dtype=torch.float64)
    p = torch.softmax(s, -1)
    expected = torch.autograd.functional.jacobian(lambda x: torch.softmax(x, -1), s)
    assert torch.allclose(softmax_jacobian(p), expected, atol=1e-12)


def test_saturation_without_scaling():
    big = saturation(1024, n_keys=8, seed=3)
    assert torch.allclose(big.weights_raw, torch.softmax(big.scores, -1))
    assert torch.allclose(big.weights_scaled, torch.softmax(big.scores / 32.0, -1))
    rows = saturation_by_dk([1, 1024], n_keys=8, trials=100, seed=0)
    small, large = rows
    assert large.max_raw > 0.95  # one weight takes (almost) everything
    assert large.max_scaled < 0.8
    assert large.jacobian_raw < 0.1 * large.jacobian_scaled  # vanishing gradient without scaling
    assert small.max_raw == pytest.approx(small.max_scaled)  # d_k = 1: dividing by 1 changes nothing


def test_plain_self_attention_formula():
    x = torch.tensor([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
    p = plain_self_attention(x)
    xd = x.double()
    a = torch.exp(xd @ xd.T)
    a = a / a.sum(1, keepdim=True)  # a_nm = exp(x_n.x_m) / sum_m' exp(x_n.x_m')
    assert torch.allclose(p.weights, a)
    assert torch.allclose(p.weights.sum(1), torch.ones(3, dtype=torch.float64))
    assert torch.allclose(p.y, a @ xd)


# --- Word steps from a real (small, random) model trace ----------------------------------------


def small_model(**kw) -> Transformer:
    torch.manual_seed(0)
    return Transformer(Config(src_vocab=20, tgt_vocab=22, d_model=16, n_heads=4, d_ff=32, **kw)).eval()


SRC = torch.tensor([[5, 6, 7, 8, 2]])
TGT = torch.tensor([[1, 9, 10, 11]])


@pytest.mark.parametrize("scale", [True, False])
def test_word_steps_match_the_trace(scale):
    t = traced(small_model(), SRC, TGT, Interventions(scale=scale))
    s = recompute.word_steps(t, "enc.1.self_attn", 2, 3)
    q, k = t["enc.1.self_attn.q"][0, 2], t["enc.1.self_attn.k"][0, 2]
    assert s.d_k == 4 and s.sqrt_dk == 2.0
    assert torch.allclose(s.scores, (q @ k.T)[3], atol=1e-6)
    assert torch.allclose(s.scaled, s.scores / 2.0 if scale else s.scores, atol=1e-6)
    assert torch.allclose(s.weights, torch.softmax(s.scaled, -1), atol=1e-6)
    assert torch.allclose(s.z_sum, s.z_model, atol=1e-6)  # weighted values add up to the model's z
    df = va.step_table(s, ["a", "b", "c", "d", "e"])
    assert list(df.columns) == list(va.STEP_COLUMNS)
    assert np.allclose(df["q·k"], s.scores.numpy(), atol=1e-4)
    assert np.allclose(df["÷√d_k"], df["q·k"] if not scale else df["q·k"] / 2, atol=2e-4)
    z = va.z_table(s)
    assert z.shape == (2, 4) and np.allclose(z.iloc[0], z.iloc[1], atol=1e-4)


def test_word_steps_decoder_mask_column_and_head_off():
    t = traced(small_model(), SRC, TGT, Interventions(heads_off=frozenset({("dec.0.self_attn", 1)})))
    s = recompute.word_steps(t, "dec.0.self_attn", 1, 1)
    assert s.has_mask
    df = va.step_table(s, ["0", "1", "2", "3"])
    assert list(df.columns) == ["word", "q·k", "÷√d_k", "+ mask", "softmax weight"]
    assert list(df["softmax weight"][2:]) == [0.0, 0.0]  # the future is masked
    assert not s.z_model.any() and s.z_sum.any()  # head off: the model's z is 0, the weights are still there


def test_textbook_steps_give_the_book_numbers():
    s = recompute.textbook_steps(thinking_machines())
    assert s.scores.tolist() == [112.0, 96.0] and s.scaled.tolist() == [14.0, 12.0] and s.sqrt_dk == 8.0
    assert [round(float(w), 2) for w in s.weights] == [0.88, 0.12]
    tb = va.textbook_table(s, va.textbook_labels())
    assert tb.loc["Score"].tolist() == ["q1·k1 = 112", "q1·k2 = 96"]
    assert tb.loc["Divide by 8 (√d_k)"].tolist() == ["14", "12"]
    assert tb.loc["Softmax"].tolist() == ["0.88", "0.12"]
    assert torch.allclose(s.z_sum, s.z_model)


def test_word_across_layers_and_top_words():
    m = small_model()
    t = traced(m, SRC, TGT)
    rows = vh.word_across_layers(t, "enc", "self_attn", 2, 1)
    assert rows.shape == (8, 5)
    assert np.allclose(rows.sum(1), 1.0)
    assert np.allclose(rows[5], t["enc.1.self_attn.weights"][0, 1, 1].numpy())
    labels = vh.head_labels(2, 4)
    assert labels[5] == "L1 h1"
    top = vh.top_words(rows, labels, list("abcde"), skip=1)
    z = rows.copy()
    z[:, 1] = -1
    assert top["strongest other word"].tolist() == [list("abcde")[j] for j in z.argmax(1)]
    assert vh.find_word(("the", "it", "was"), "it") == 1 and vh.find_word(("a",), "it") is None


def test_head_figure_and_block_figure():
    w = torch.softmax(torch.randn(3, 3), -1)
    on = vh.head_figure(w, list("abc"), list("abc"), 1, False)
    off = vh.head_figure(w, list("abc"), list("abc"), 2, True)
    assert on.layout.title.text == "head 1" and off.layout.title.text == "head 2 (off)"
    assert off.data[0].opacity == vh.OFF_OPACITY and on.data[0].opacity is None
    assert np.allclose(np.array(on.data[0].z), w.numpy())
    assert on.layout.xaxis.tickangle == -90  # a grid's narrow figure: its key words upright, not over each other
    assert on.layout.yaxis.showticklabels and on.layout.yaxis.title.text == "query"
    later = vh.head_figure(w, list("abc"), list("abc"), 3, False, row_labels=False)  # not the first of its row
    assert later.layout.yaxis.showticklabels is False and not later.layout.yaxis.title.text
    assert reserve(later).layout.margin.l < reserve(on).layout.margin.l - 40  # its room goes to the cells
    fig = vh.block_figure(torch.randn(3, 16), list("abc"), 4, off=[2])
    assert len(fig.layout.shapes) == 3  # borders between 4 heads
    assert [s.x0 for s in fig.layout.shapes] == [3.5, 7.5, 11.5]
    assert [a.text for a in fig.layout.annotations] == ["head 0", "head 1", "head 2 (off)", "head 3"]


def test_heads_bars_figure_counts():
    rows = np.full((4, 3), 1 / 3)
    fig = vh.heads_bars_figure(rows, list("abc"), (1, 2, 0), off=[1])
    assert len(fig.data) == 1 + 2 + 4
    assert [a.text for a in fig.layout.annotations] == ["1 head", "2 heads", "4 heads (all)"]
    assert fig.data[2].name == "head 1 (off)"


def test_compare_probs_and_output_change():
    m = small_model()
    before = traced(m, SRC, TGT)
    after = traced(m, SRC, TGT, Interventions(heads_off=frozenset({("enc.0.self_attn", 0)})))
    ids = [9, 10, 11, 2]
    df = vh.compare_probs(before, after, ids, ["a", "b", "c", "d"])
    assert np.allclose(df["p before"], [round(float(before["probs"][0, t, i]), 4) for t, i in enumerate(ids)])
    assert np.allclose(df["p after"], [round(float(after["probs"][0, t, i]), 4) for t, i in enumerate(ids)])
    assert (df["change"] != 0).any()
    oc = vh.output_change(before, after, "enc.0.self_attn", list("abcde"))
    assert (oc["‖after − before‖"] > 0).all()
    zn = vh.head_z_norms(after, "enc.0.self_attn", list("abcde"))
    assert (zn["head 0"] == 0).all() and (zn["head 1"] > 0).all()


def test_greedy_probs_and_shapes_table():
    from model.checkpoint import Bundle
    from model.vocab import Vocab

    sv, tv = Vocab.build([["i", "am", "a", "student"]]), Vocab.build([["je", "suis", "étudiant"]])
    torch.manual_seed(0)
    b = Bundle(Transformer(Config(len(sv), len(tv), d_model=16, n_heads=4, d_ff=32)).eval(), sv, tv)
    a = analyse(b, prepare(b, "i am a student"))
    df = vh.greedy_probs(a)
    assert np.allclose(
        df["probability"], [round(s.candidates[0].prob, 4) for s in a.greedy.steps][: len(df)], atol=1e-4
    )
    st = vh.shapes_table(128, 4, 7)
    assert st.loc["Concat(Z_1 … Z_h)", "this model (T = 7)"] == "7 × 128 (4 × 32)"
    assert st.loc["each head's Z_i", "paper (base)"] == "m × 64"


def test_histogram_variance_and_saturation_builders():
    s = dot_product_samples(16, n=1000, seed=0)
    fig = vs.histogram_figure(s, scaled(s, 16), 16, bins=30)
    assert [d.name for d in fig.data] == ["q·k", "q·k / √d_k"]
    assert sum(fig.data[0].y) == 1000 and sum(fig.data[1].y) == 1000
    rows = variance_by_dk([1, 4], n=500)
    assert vs.variance_table(rows)["theory (= d_k)"].tolist() == [1, 4]
    assert len(vs.variance_figure(rows).data) == 3
    sat = saturation(64)
    assert len(vs.saturation_figure(sat.weights_raw, sat.weights_scaled, list("abcdefgh")).data) == 2
    assert list(vs.saturation_table(saturation_by_dk([4], trials=3))["d_k"]) == [4]


# --- The encoder layer ---------------------------------------------------------------------------


@pytest.mark.parametrize("norm_first", [False, True])
def test_layers_helpers_match_the_model(norm_first):
    m = small_model(norm_first=norm_first)
    t = traced(m, SRC, TGT)
    assert vl.is_pre_ln(t) == norm_first and vl.n_enc_layers(t) == 2
    for layer in range(2):
        for sub in (1, 2):
            r = vl.residual(t, layer, sub)
            assert torch.allclose(r.x + r.f, r.resid, atol=1e-6)
            df = vl.residual_table(r, 2, n_dims=5)
            assert df.shape == (4, 5)
            assert np.allclose(df.iloc[2], df.iloc[3], atol=1e-4)
            n = vl.layer_norm(t, layer, sub, *layer_norm_params(m, layer, sub))
            ln = getattr(m.encoder[layer], f"add_norm{sub}").norm
            assert torch.allclose(n.normed * ln.weight + ln.bias, n.out, atol=1e-6)
            assert torch.allclose(torch.nn.functional.layer_norm(n.x, (16,)), n.normed, atol=1e-5)
            st = vl.norm_stats(n, list("abcde"))
            assert np.allclose(st["mean after"], 0, atol=1e-4) and np.allclose(st["variance after"], 1, atol=1e-3)
            at = vl.affine_table(n, 1)
            assert np.allclose(at.iloc[3], at.iloc[4], atol=1e-4)
            assert vl.ln_params(n).shape == (2, 16)
        f = vl.ffn(t, layer, ffn_hidden(m, layer, vl.ffn_input(t, layer)))
        assert f.max_difference < 1e-5
        assert f.zero_fraction == pytest.approx(float((t[f"enc.{layer}.ffn.hidden"] == 0).double().mean()))
        zt = vl.zero_table(f, list("abcde"))
        assert zt["ReLU zeros"].sum() == int((f.hidden == 0).sum())
    s = vl.word_stages(t, 1)
    assert len(s.labels) == (1 + 2 * 2 + 1 if norm_first else 1 + 2 * 4)
    assert np.allclose(s.vectors[0], t["src.input"][0, 1].numpy())
    last = t["enc.out"][0, 1].numpy()
    assert np.allclose(s.vectors[-1], last, atol=1e-6)  # the last stage is what the encoder hands on
    table = vl.stage_table(s)
    assert table["cosine to input"].iloc[0] == pytest.approx(1.0)
    assert table["norm"].iloc[0] == pytest.approx(float(np.linalg.norm(s.vectors[0])), abs=1e-4)


def test_layer_output_chain():
    m = small_model()
    t = traced(m, SRC, TGT)
    assert torch.equal(vl.layer_output(t, -1), t["src.input"][0])
    assert torch.equal(vl.layer_output(t, 0), t["enc.0.add_norm2.out"][0])
    assert torch.equal(vl.sublayer_input(t, 1, 1), t["enc.0.add_norm2.out"][0])
    assert torch.equal(vl.sublayer_input(t, 1, 2), t["enc.1.add_norm1.out"][0])
    assert vl.units(3) == ["h0", "h1", "h2"] and vl.dims(2) == ["d0", "d1"]


def test_block_figure_single_block_has_no_head_labels():
    fig = vh.block_figure(torch.randn(2, 8), ["a", "b"], 1)
    assert not fig.layout.shapes and not fig.layout.annotations


def test_summarize_samples():
    s = dot_product_samples(64, n=8000, seed=2)
    row = summarize(s, 64)
    assert row.variance == pytest.approx(float(s.var()))
    assert row.variance == pytest.approx(64, rel=0.06) and row.variance_scaled == pytest.approx(1, rel=0.06)
    assert row.low == pytest.approx(float(s.quantile(0.01))) and row.high == pytest.approx(float(s.quantile(0.99)))


def test_coref_table():
    rows = np.array([[0.1, 0.5, 0.2, 0.2], [0.6, 0.1, 0.2, 0.1]])
    df = vc.coref_table(
        rows, ["L0 h0", "L0 h1"], ["0 the", "1 animal", "2 it", "3 street"], ("the", "animal", "it", "street"), it=2
    )
    assert df["→ animal"].tolist() == [0.5, 0.1] and df["→ street"].tolist() == [0.2, 0.1]
    assert df["strongest word besides “it”"].tolist() == ["1 animal", "0 the"]
    assert "→ street" not in vc.coref_table(rows, ["a", "b"], list("wxyz"), ("the", "animal", "it", "x"), 2)


# --- Notices: each sentence's numbers recomputed from the tensor it describes -------------------

LABELS = ["0 the", "1 cat", "2 sat", "3 .", "4 <eos>"]


def test_row_notice_biggest_weight_and_parking():
    w = torch.tensor([0.05, 0.1, 0.15, 0.2, 0.5])
    text = va.row_notice(w, LABELS, "2 sat")
    assert text.startswith("“2 sat” gives its largest weight, 0.50, to “4 <eos>”; next comes “3 .” with 0.20.")
    assert "parks its weight on <eos>" in text  # why <eos>: nothing useful to read
    text = va.row_notice(torch.tensor([0.1, 0.2, 0.6, 0.05, 0.05]), LABELS, "2 sat")
    assert "0.60, to “2 sat” (itself)" in text and "parks" not in text
    assert label_word("11 <eos>") == "<eos>" and label_word("plain") == "plain" and va.is_parking("3 .")


def test_matrix_notice_diagonal_and_parked_rows():
    w = torch.tensor(
        [
            [0.7, 0.1, 0.1, 0.05, 0.05],
            [0.1, 0.2, 0.1, 0.1, 0.5],
            [0.1, 0.1, 0.6, 0.1, 0.1],
            [0.1, 0.1, 0.1, 0.6, 0.1],
            [0.1, 0.1, 0.1, 0.1, 0.6],
        ]
    )
    text = va.matrix_notice(w, LABELS, LABELS)
    assert "The biggest weight, 0.70, goes from “0 the” to itself." in text
    assert (
        f"holds {float(torch.diagonal(w).mean()):.2f} of a row on average; 4 of 5 words look most at themselves" in text
    )
    # rows "3 ." and "4 <eos>" look at themselves: not parking; row "1 cat" parks on <eos>
    assert "1 of the 3 words that are not <eos> or punctuation put their largest weight on <eos> or punctuation" in text


def test_scores_and_z_matrix_notices():
    sc = torch.tensor([[1.0, -2.0], [4.0, 0.5]])
    text = va.scores_notice(sc, ["a", "b"], sc / 2, 2.0)
    assert "Scores run from -2.0 to 4.0; the largest is “b” → “a”." in text
    assert "Divided by √d_k = 2 they run from -1.00 to 2.00" in text
    w = torch.tensor([[0.9, 0.1], [0.5, 0.5]])
    v = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    z = w @ v
    cos = float(z[0] @ v[0] / z[0].norm())
    assert va.z_matrix_notice(z, w, v, ["a", "b"]).endswith(f"(cosine {cos:.2f}).")


def test_weighted_and_z_notices_on_a_trace():
    t = traced(small_model(), SRC, TGT)
    s = recompute.word_steps(t, "enc.0.self_attn", 1, 2)
    labels = list("abcde")
    norms = s.weighted.norm(dim=-1)
    j = int(norms.argmax())
    assert va.weighted_notice(s, labels).startswith(
        f"The row of “{labels[j]}” is the largest (‖weight × v‖ = {float(norms[j]):.2f})"
    )
    diff = float((s.z_sum - s.z_model).abs().max())
    assert f"largest difference {diff:.1e}" in va.z_notice(s)
    qk = s.q @ s.k.T
    j = int(qk.argmax())
    assert va.keys_notice(s, labels, "c").startswith(
        f"The key of “{labels[j]}” matches q of “c” best (q·k = {float(qk[j]):.2f})"
    )
    vn = s.v.norm(dim=-1)
    longest = f"the longest value is that of “{labels[int(vn.argmax())]}” (‖v‖ = {float(vn.max()):.2f})"
    assert longest in va.values_notice(s, labels)
    off = traced(small_model(), SRC, TGT, Interventions(heads_off=frozenset({("enc.0.self_attn", 1)})))
    assert "switched off" in va.z_notice(recompute.word_steps(off, "enc.0.self_attn", 1, 2))


def test_values_notice_when_all_values_are_as_long():
    s = recompute.textbook_steps(thinking_machines(), 1)  # v1, v2: 32 ones each
    assert va.values_notice(s, va.textbook_labels()).endswith("every value has the same length here (‖v‖ = 5.66).")


def test_plain_notice_counts_the_diagonal():
    x = torch.eye(4) * 3
    plain = plain_self_attention(x)
    learned = torch.roll(torch.eye(4), 1, 1) * 0.6 + 0.1  # every word reads its neighbour
    text = va.plain_notice(plain.weights, learned, list("abcd"))
    assert text.startswith(
        f"Without learned weights, 4 of 4 words look most at themselves (diagonal "
        f"{float(torch.diagonal(plain.weights).mean()):.2f}"
    )
    assert "The learned head: 0 of 4 (diagonal 0.10)" in text


COREF = ("the", "animal", "didn't", "cross", "the", "street", "because", "it", "was", "too")


def test_coref_parts_and_focus_chosen_by_the_data():
    c = vc.coref_parts((*COREF, "tired"))
    assert (c.it, c.animal, c.place, c.adjective, c.referent, c.other) == (7, 1, 5, 10, 1, 5)
    assert vc.coref_parts((*COREF, "wide")).referent == 5
    assert vc.coref_parts((*COREF, "green")) is None and vc.coref_parts(("i", "am")) is None
    m = Transformer(Config(src_vocab=20, tgt_vocab=22, d_model=16, n_heads=4, d_ff=32)).eval()
    src = torch.tensor([[5, 6, 7, 8, 5, 9, 10, 11, 12, 13, 14, 2]])
    t = traced(m, src, TGT)
    f = vc.coref_focus(t, 2, c)
    rows = vh.word_across_layers(t, "enc", "self_attn", 2, 7)  # [8, 12]
    prefer = rows[:, 1] > rows[:, 5]
    best = int(np.where(prefer, rows[:, 1], -1).argmax()) if prefer.any() else int(rows[:, 1].argmax())
    assert (f.layer, f.head) == divmod(best, 4)
    assert f.weight == pytest.approx(rows[best, 1]) and f.other == pytest.approx(rows[best, 5])
    labels = [f"{i} {w}" for i, w in enumerate((*COREF, "tired", "<eos>"))]
    hl = vh.head_labels(2, 4)
    text = vc.coref_notice(rows, hl, labels, c, f)
    ref, other = float(rows[best, 1]), float(rows[best, 5])
    if ref >= 0.5 and ref >= 2 * other:  # the rule of "links" (explain/coref.py LINK)
        assert text.startswith(
            f"“tired” makes “it” the animal. {hl[best]} links “it” to “animal”: {ref:.2f}, "
            f"against {other:.2f} for “street”."
        )
    else:
        assert text.startswith(
            "“tired” makes “it” the animal. No encoder head picks out “animal”: the most any "
            f"head gives it is {float(rows[:, 1].max()):.2f}"
        )
    assert f"The strongest single weight of “it” is {rows.max():.2f}" in text


def test_multi_head_notices():
    w = torch.zeros(2, 3, 3)
    w[0] = torch.eye(3)  # head 0: itself
    w[1, :, 2] = 1.0  # head 1: every word reads word 2
    text = vh.heads_notice(w, ["a", "b", "c"], off=(1,))
    assert text == (
        "What each head does: head 0 → mostly itself (1.00 of a row on average); head 1 (off) → mostly "
        "“c” (1.00 of a row on average)."
    )
    rows = np.array([[0.2, 0.8, 0.0], [0.1, 0.1, 0.8], [0.95, 0.05, 0.0]])
    assert vh.word_heads_notice(rows, ["a", "b", "c"], "b") == (
        "“b”: head 2 is the most focused, 0.95 on “a”; the 3 heads look most at 3 different words."
    )
    concat = torch.cat([torch.ones(2, 2), 3 * torch.ones(2, 2)], 1)  # head 1 has 9x the sum of squares
    assert "Head 1 contributes the most (90% of the sum of squares)" in vh.concat_notice(concat, 2)
    assert "switched-off heads 0 are all zeros (10%)" in vh.concat_notice(concat, 2, off=(0,))
    out = torch.tensor([[3.0, 4.0], [0.0, 1.0]])
    text = vh.out_notice(concat[:, :2], out, ["a", "b"])
    assert "“a” gets the longest output vector (‖out‖ = 5.00)" in text
    ratio = float(out.norm(dim=1).mean() / concat[:, :2].norm(dim=1).mean())
    assert f"on average ‖out‖ is {ratio:.2f} × ‖concat‖" in text and "mixes every head." in text
    assert "mixes every head that is on (head 0 gives zeros)" in vh.out_notice(concat[:, :2], out, ["a", "b"], off=(0,))


def test_why_scale_notices_are_the_samples():
    rows = variance_by_dk([16, 256, 1024], n=4000, seed=0)
    text = vs.range_notice(rows)
    assert f"at d_k = 256, 98% of the scores lie between {rows[1].low:.0f} and {rows[1].high:.0f}" in text
    assert f"at d_k = 1024 between {rows[2].low:.0f} and {rows[2].high:.0f}" in text
    s = dot_product_samples(64, n=4000, seed=0)
    assert f"standard deviation {float(s.std(unbiased=False)):.2f} ≈ √64 = 8.00" in vs.histogram_notice(
        s, scaled(s, 64), 64
    )
    sat = saturation(256, 8, 0)
    assert f"{sat.max_raw:.2f} of the weight without scaling and {sat.max_scaled:.2f}" in vs.saturation_notice(
        sat.max_raw, sat.max_scaled, 256
    )


def test_projection_is_the_models_q_k_v():
    m = small_model()
    t = traced(m, SRC, TGT)
    W, b = head_projection(m, 1, 2)
    assert W["q"].shape == (16, 4) and b["q"].shape == (4,)
    assert torch.equal(W["q"], m.encoder[1].self_attn.W_q.weight[8:12].T)  # head 2 owns columns 8..11
    x = vl.attention_input(t, 1)[3]
    p = recompute.projection(t, "enc.1.self_attn", 2, 3, x, W, b)
    for which in "qkv":
        assert p.error(which) < 1e-5
        assert torch.allclose(p.computed(which).float(), t[f"enc.1.self_attn.{which}"][0, 2, 3], atol=1e-5)
    assert f"equals the model's q to {p.error('q'):.1e}" in va.projection_notice(p)
    pre = small_model(norm_first=True)
    tp = traced(pre, SRC, TGT)
    Wp, bp = head_projection(pre, 0, 1)
    assert recompute.projection(tp, "enc.0.self_attn", 1, 0, vl.attention_input(tp, 0)[0], Wp, bp).error("k") < 1e-5


def test_textbook_labels_the_second_query_q2():
    s = recompute.textbook_steps(thinking_machines(), 1)
    tb = va.textbook_table(s, va.textbook_labels(), 1)
    assert tb.loc["Score"].tolist() == ["q2·k1 = 32", "q2·k2 = 80"]
    line = va.worked_line(s, 1, book=False)
    assert line.startswith("This app's own construction") and "q2·k1 = 32, q2·k2 = 80" in line
    assert "4, 10 → softmax → 0.00, 1.00" in line
    book = va.worked_line(recompute.textbook_steps(thinking_machines(), 0), 0, book=True)
    assert book == (
        "From the Illustrated Transformer: q1·k1 = 112, q1·k2 = 96 → ÷ √64 = 8 → 14, 12 → softmax → 0.88, 0.12"
    )


def test_layer_notices_are_the_tensors():
    m = small_model()
    t = traced(m, SRC, TGT)
    labels = list("abcde")
    n = vl.layer_norm(t, 0, 1, *layer_norm_params(m, 0, 1))
    before = vl.norm_notice(n, labels, before=True)
    mean, std = n.x.mean(-1), n.x.std(-1, unbiased=False)
    assert f"means run from {float(mean.min()):.2f} to {float(mean.max()):.2f}" in before
    assert f"from {float(std.min()):.2f} to {float(std.max()):.2f} (largest: “{labels[int(std.argmax())]}”)" in before
    assert "standard deviation 1" in vl.norm_notice(n, labels, before=False)
    g = n.gamma
    assert f"γ runs from {float(g.min()):.2f} to {float(g.max()):.2f}" in vl.gamma_beta_notice(n)
    f = vl.ffn(t, 0, ffn_hidden(m, 0, vl.ffn_input(t, 0)))
    active = (f.hidden > 0).sum(1)
    text = vl.hidden_notice(f, labels)
    assert text.startswith(f"{int(active.sum()):,} of {f.hidden.numel():,} hidden values are active")
    assert f"from {int(active.min())} of 32 units" in text
    s = vl.word_stages(t, 1)
    norms = np.linalg.norm(s.vectors, axis=1)
    assert vl.stages_notice(s).startswith(f"The vector's length goes from {norms[0]:.1f} (input) to {norms[-1]:.1f}")


# --- Wang's column form, and one head left ------------------------------------------------------


@pytest.mark.parametrize("module", ["enc.0.self_attn", "enc.1.self_attn", "dec.0.self_attn", "dec.1.cross_attn"])
def test_column_form_is_the_models_z_column_by_column(module):
    t = traced(small_model(), SRC, TGT)
    for head in range(4):
        c = recompute.column_form(t, module, head)
        z = t[f"{module}.z"][0, head].double().numpy()
        assert c.C.shape == z.T.shape and np.abs(c.C - z.T).max() < 1e-6 and c.error < 1e-6
        assert np.allclose(c.alpha.sum(0), 1.0) and np.allclose(c.alpha.T, t[f"{module}.weights"][0, head], atol=1e-6)
    if module == "dec.0.self_attn":
        assert np.triu(c.alpha.T, 1).max() == 0.0  # the look-ahead mask, read from the trace


def test_column_notice_head_off_and_wrong_scale():
    labels = ["0 a", "1 b", "2 c", "3 d", "4 <eos>"]
    t = traced(small_model(), SRC, TGT, Interventions(heads_off=frozenset({("enc.1.self_attn", 2)})))
    on = va.column_notice(recompute.column_form(t, "enc.1.self_attn", 1), labels, 3)
    assert "C = Attn(X, X) is 4 × 5" in on and "equal within float error" in on
    assert "The column of “d” (position 3)" in on
    off = va.column_notice(recompute.column_form(t, "enc.1.self_attn", 2), labels, 3, off=True)
    assert "switched off" in off and "within float error" not in off
    wrong = recompute.column_form(t, "enc.1.self_attn", 1, scale=False)  # the model divides by √d_k; this does not
    assert wrong.error > 1e-3 and "differs from the model's Zᵀ" in va.column_notice(wrong, labels, 0)


def test_one_head_left_runs_the_model_with_the_other_heads_off():
    from explain.experiments import one_head_left
    from model import checkpoint
    from model.pipeline import teacher_forced
    from model.trace import attention_modules

    b = checkpoint.load(checkpoint.SHIPPED)
    p = prepare(b, "thinking machines")
    r = one_head_left(b, p)
    assert r.translation == "les machines pensantes" and r.gold_labels == ("les", "machines", "pensantes", "<eos>")
    assert list(r.modules) == attention_modules(b.config) and len(r.runs) == 6 * 4
    iv = Interventions(frozenset(("dec.1.cross_attn", g) for g in (0, 2, 3)))  # head 1 alone
    run = r.run("dec.1.cross_attn", 1)
    assert run.translation == analyse(b, p, iv).translation != r.translation
    assert run.gold_probs == pytest.approx(teacher_forced(b, p, r.translation, iv).gold_probs)
    assert all(r.run("dec.1.cross_attn", h).translation != r.translation for h in range(4))
    assert all(r.run("enc.0.self_attn", h).translation == r.translation for h in range(4))
    fig = vh.one_head_figure(r)
    assert list(fig.data[0].y) == [vh.module_title(m) for m in r.modules]
    assert fig.data[0].z[-1] == pytest.approx([min(r.run("dec.1.cross_attn", h).gold_probs) for h in range(4)])
    assert all(cell.startswith("✗") for cell in fig.data[0].text[-1])
    text = vh.one_head_notice(r)
    assert "4 of 24 runs change the translation" in text and "Decoder 1 · encoder-decoder needs more than one" in text
    df = vh.one_head_table(r, "dec.1.cross_attn")
    assert list(df["same as all heads"]) == [False] * 4 and list(df["at the word"]) == ["<eos>"] * 4


def test_the_textbook_notices_say_what_its_weights_show():
    """The Illustrated Transformer's "Thinking" row, 0.88 / 0.12: z is mostly the value of "Thinking" (never "a broad
    mix"), and the z it is checked against is the example's, not a model's."""
    tm = thinking_machines()
    s = recompute.textbook_steps(tm, 0)
    w = s.weights
    assert float(w.min()) >= 0.01 and float(w.max()) >= 0.5
    text = va.weighted_notice(s, ["Thinking", "Machines"])
    assert f"“Thinking” has {float(w.max()):.2f} of the weight, so z is mostly its value" in text
    assert "broad mix" not in text
    assert "the example's z" in va.z_notice(s, textbook=True) and "model" not in va.z_notice(s, textbook=True)
    spread = dataclasses.replace(s, weights=torch.tensor([0.40, 0.35]))  # (the rule alone: no word has half)
    assert "no word has half of the weight (the most is 0.40)" in va.weighted_notice(spread, ["a", "b"])


def test_a_word_the_mask_leaves_one_key_is_no_head_s_choice():
    """<bos> in the decoder's self-attention sees itself only: every head gives it 1, and the notice says the mask
    decided instead of naming a "most focused" head (head 0 won a tie)."""
    rows = np.array([[1.0, 0.0, 0.0]] * 4)
    text = vh.word_heads_notice(rows, ["0 <bos>", "1 je", "2 suis"], "0 <bos>")
    assert "may look at “0 <bos>” only" in text and "every head gives it 1.00" in text
    assert "most focused" not in text


def test_a_head_of_the_grid_writes_every_key_word():
    """Plotly skips every other category label on a narrow figure; the grid's words are the ones its notices name, so
    every one is written (up to the grid's limit)."""
    words = [f"{i} w{i}" for i in range(12)]
    fig = vh.head_figure(np.full((12, 12), 1 / 12), words, words, 0, False)
    assert fig.layout.xaxis.tickmode == "array" and list(fig.layout.xaxis.ticktext) == words
    assert list(fig.layout.xaxis.tickvals) == words and fig.layout.xaxis.showticklabels
