"""Unit tests of the attention/encoder page helpers: model/experiments.py, viz/attention.py, viz/layers.py."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from model.experiments import (
    dot_product_samples,
    ffn_hidden,
    layer_norm_params,
    plain_self_attention,
    saturation,
    saturation_by_dk,
    softmax_jacobian,
    summarize,
    variance_by_dk,
)
from model.pipeline import analyse, prepare
from model.textbook import thinking_machines
from model.trace import Interventions
from model.transformer import Config, Transformer, traced
from viz import attention as va
from viz import layers as vl

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
    s = va.word_steps(t, "enc.1.self_attn", 2, 3)
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
    s = va.word_steps(t, "dec.0.self_attn", 1, 1)
    assert s.has_mask
    df = va.step_table(s, ["0", "1", "2", "3"])
    assert list(df.columns) == ["word", "q·k", "÷√d_k", "+ mask", "softmax weight"]
    assert list(df["softmax weight"][2:]) == [0.0, 0.0]  # the future is masked
    assert not s.z_model.any() and s.z_sum.any()  # head off: the model's z is 0, the weights are still there


def test_textbook_steps_give_the_book_numbers():
    s = va.textbook_steps(thinking_machines())
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
    rows = va.word_across_layers(t, "enc", "self_attn", 2, 1)
    assert rows.shape == (8, 5)
    assert np.allclose(rows.sum(1), 1.0)
    assert np.allclose(rows[5], t["enc.1.self_attn.weights"][0, 1, 1].numpy())
    labels = va.head_labels(2, 4)
    assert labels[5] == "L1 h1"
    top = va.top_words(rows, labels, list("abcde"), skip=1)
    z = rows.copy()
    z[:, 1] = -1
    assert top["strongest other word"].tolist() == [list("abcde")[j] for j in z.argmax(1)]
    assert va.find_word(("the", "it", "was"), "it") == 1 and va.find_word(("a",), "it") is None


def test_head_figure_and_block_figure():
    w = torch.softmax(torch.randn(3, 3), -1)
    on = va.head_figure(w, list("abc"), list("abc"), 1, False)
    off = va.head_figure(w, list("abc"), list("abc"), 2, True)
    assert on.layout.title.text == "head 1" and off.layout.title.text == "head 2 (off)"
    assert off.data[0].opacity == va.OFF_OPACITY and on.data[0].opacity is None
    assert np.allclose(np.array(on.data[0].z), w.numpy())
    fig = va.block_figure(torch.randn(3, 16), list("abc"), 4, off=[2])
    assert len(fig.layout.shapes) == 3  # borders between 4 heads
    assert [s.x0 for s in fig.layout.shapes] == [3.5, 7.5, 11.5]
    assert [a.text for a in fig.layout.annotations] == ["head 0", "head 1", "head 2 (off)", "head 3"]


def test_heads_bars_figure_counts():
    rows = np.full((4, 3), 1 / 3)
    fig = va.heads_bars_figure(rows, list("abc"), (1, 2, 0), off=[1])
    assert len(fig.data) == 1 + 2 + 4
    assert [a.text for a in fig.layout.annotations] == ["1 head", "2 heads", "4 heads (all)"]
    assert fig.data[2].name == "head 1 (off)"


def test_compare_probs_and_output_change():
    m = small_model()
    before = traced(m, SRC, TGT)
    after = traced(m, SRC, TGT, Interventions(heads_off=frozenset({("enc.0.self_attn", 0)})))
    ids = [9, 10, 11, 2]
    df = va.compare_probs(before, after, ids, ["a", "b", "c", "d"])
    assert np.allclose(df["p before"], [round(float(before["probs"][0, t, i]), 4) for t, i in enumerate(ids)])
    assert np.allclose(df["p after"], [round(float(after["probs"][0, t, i]), 4) for t, i in enumerate(ids)])
    assert (df["change"] != 0).any()
    oc = va.output_change(before, after, "enc.0.self_attn", list("abcde"))
    assert (oc["‖after − before‖"] > 0).all()
    zn = va.head_z_norms(after, "enc.0.self_attn", list("abcde"))
    assert (zn["head 0"] == 0).all() and (zn["head 1"] > 0).all()


def test_greedy_probs_and_shapes_table():
    from model.checkpoint import Bundle
    from model.vocab import Vocab

    sv, tv = Vocab.build([["i", "am", "a", "student"]]), Vocab.build([["je", "suis", "étudiant"]])
    torch.manual_seed(0)
    b = Bundle(Transformer(Config(len(sv), len(tv), d_model=16, n_heads=4, d_ff=32)).eval(), sv, tv)
    a = analyse(b, prepare(b, "i am a student"))
    df = va.greedy_probs(a)
    assert np.allclose(df["probability"], [round(s.candidates[0].prob, 4) for s in a.greedy.steps][: len(df)],
                       atol=1e-4)
    st = va.shapes_table(128, 4, 7)
    assert st.loc["Concat(Z_1 … Z_h)", "this model (T = 7)"] == "7 × 128 (4 × 32)"
    assert st.loc["each head's Z_i", "paper (base)"] == "m × 64"


def test_histogram_variance_and_saturation_builders():
    s = dot_product_samples(16, n=1000, seed=0)
    fig = va.histogram_figure(s, 16, bins=30)
    assert [d.name for d in fig.data] == ["q·k", "q·k / √d_k"]
    assert sum(fig.data[0].y) == 1000 and sum(fig.data[1].y) == 1000
    rows = variance_by_dk([1, 4], n=500)
    assert va.variance_table(rows)["theory (= d_k)"].tolist() == [1, 4]
    assert len(va.variance_figure(rows).data) == 3
    sat = saturation(64)
    assert len(va.saturation_figure(sat.weights_raw, sat.weights_scaled, list("abcdefgh")).data) == 2
    assert list(va.saturation_table(saturation_by_dk([4], trials=3))["d_k"]) == [4]


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
    fig = va.block_figure(torch.randn(2, 8), ["a", "b"], 1)
    assert not fig.layout.shapes and not fig.layout.annotations


def test_summarize_samples():
    s = dot_product_samples(64, n=8000, seed=2)
    row = summarize(s, 64)
    assert row.variance == pytest.approx(float(s.var()))
    assert row.variance == pytest.approx(64, rel=0.06) and row.variance_scaled == pytest.approx(1, rel=0.06)
    assert row.low == pytest.approx(float(s.quantile(0.01))) and row.high == pytest.approx(float(s.quantile(0.99)))


def test_coref_table():
    rows = np.array([[0.1, 0.5, 0.2, 0.2], [0.6, 0.1, 0.2, 0.1]])
    df = va.coref_table(rows, ["L0 h0", "L0 h1"], ["0 the", "1 animal", "2 it", "3 street"],
                        ("the", "animal", "it", "street"), it=2)
    assert df["→ animal"].tolist() == [0.5, 0.1] and df["→ street"].tolist() == [0.2, 0.1]
    assert df["strongest word besides “it”"].tolist() == ["1 animal", "0 the"]
    assert "→ street" not in va.coref_table(rows, ["a", "b"], list("wxyz"), ("the", "animal", "it", "x"), 2)
