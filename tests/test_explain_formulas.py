"""The formulas the intro and encoder pages set beside the model's numbers: explain/positional.py (the sinusoidal
table in float64, PE(pos + k) = M_k PE(pos)), explain/embeddings.py (onehot @ E, scaled by √d_model) and
explain/layers.py (LayerNorm's statistics and affine step, one word's norms and cosines through the stack).

Each is held to an independent source: the formula written out here with `math`, the model's own trace, or torch's
LayerNorm and cosine similarity.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from explain import embeddings as ee
from explain import layers as el
from explain import positional as ep
from explain.experiments import layer_norm_params
from model.transformer import Config, Transformer, sinusoidal_encoding, traced

SRC = torch.tensor([[5, 6, 7, 5, 2]])  # "5" twice: the same token at two positions
TGT = torch.tensor([[1, 9, 10, 11]])


def small_model(**kw) -> Transformer:
    torch.manual_seed(0)
    return Transformer(Config(src_vocab=20, tgt_vocab=22, d_model=16, n_heads=4, d_ff=32, **kw)).eval()


def pe_by_hand(max_len: int, d_model: int) -> torch.Tensor:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(...), entry by entry with `math` in float64."""
    return torch.tensor(
        [
            [(math.sin if d % 2 == 0 else math.cos)(pos / 10000 ** ((d - d % 2) / d_model)) for d in range(d_model)]
            for pos in range(max_len)
        ],
        dtype=torch.float64,
    )


# --- Positional encoding -------------------------------------------------------------------------


def test_frequencies_and_wavelengths():
    w = ep.frequencies(128)
    assert w.shape == (64,) and w.dtype == torch.float64 and w[0] == 1.0
    assert w[1].item() == pytest.approx(1 / 10000 ** (2 / 128), rel=1e-12)
    assert ep.wavelength(0, 128) == pytest.approx(2 * math.pi)
    assert ep.wavelength(63, 128) == pytest.approx(2 * math.pi / float(w[63]), rel=1e-12)


def test_formula_table_is_the_formula_and_the_models_buffer():
    table = ep.formula_table(40, 16)
    assert table.dtype == torch.float64
    assert torch.allclose(table, pe_by_hand(40, 16), atol=1e-12, rtol=0)
    assert torch.allclose(table.float(), sinusoidal_encoding(40, 16), atol=1e-5)


def test_worked_matches_formula_and_buffer():
    pe = sinusoidal_encoding(64, 128)
    w = ep.worked(3, 1, pe)
    angle = 3 / 10000 ** (2 / 128)
    assert (w.exponent, w.denominator) == pytest.approx((2 / 128, 10000 ** (2 / 128)), rel=1e-12)
    assert w.angle == pytest.approx(angle, rel=1e-12)
    assert w.sin == pytest.approx(math.sin(angle), rel=1e-12) and w.cos == pytest.approx(math.cos(angle), rel=1e-12)
    assert w.buffer_sin == float(pe[3, 2]) and w.buffer_cos == float(pe[3, 3])
    assert w.error < 1e-5
    with pytest.raises(ValueError):
        ep.worked(64, 0, pe)


@pytest.mark.parametrize("k", [0, 1, 7, 20])
def test_rotation_times_pe_pos_is_pe_pos_plus_k(k):
    """M_k PE(pos) = PE(pos + k), the same M_k for every pos, with PE written out independently."""
    D, L = 32, 40
    pe = pe_by_hand(L, D)
    M = ep.rotation(k, D)
    for pos in range(L - k):
        assert torch.allclose(M @ pe[pos], pe[pos + k], atol=1e-12, rtol=0), pos
    assert torch.allclose(M @ M.T, torch.eye(D, dtype=torch.float64), atol=1e-12)  # a rotation: orthogonal
    if k:  # M_k applied with the offset k + 1 is wrong
        assert not torch.allclose(M @ pe[0], pe[k + 1], atol=1e-3)


def test_rotation_is_its_blocks_and_angles():
    M = ep.rotation(5, 16)
    for i in range(8):
        assert torch.equal(M[2 * i : 2 * i + 2, 2 * i : 2 * i + 2], ep.block(5, i, 16))
        a = ep.pair_angle(5, i, 16)
        assert a == pytest.approx(5 / 10000 ** (2 * i / 16), rel=1e-12)
        assert ep.block(5, i, 16).tolist() == [[math.cos(a), math.sin(a)], [-math.sin(a), math.cos(a)]]
    assert int((M != 0).sum()) == 4 * 8  # block-diagonal: nothing outside the 2 x 2 blocks
    assert torch.equal(ep.rotation(0, 16), torch.eye(16, dtype=torch.float64))


def test_shift_errors_on_the_models_buffer():
    pe = sinusoidal_encoding(64, 128)
    rows = ep.shift_errors(pe, 5)
    assert [(p, q) for p, q, _ in rows] == [(p, p + 5) for p in range(59)]
    M = ep.rotation(5, 128)
    assert rows[10][2] == float((M @ pe[10].double() - pe[15].double()).abs().max())
    assert 0 < max(e for _, _, e in rows) < 1e-5  # float32 rounding of the buffer, nothing more
    assert [p for p, _, _ in ep.shift_errors(pe, 3, positions=[0, 60, 61, -1])] == [0, 60]  # 61 + 3 is outside
    with pytest.raises(ValueError):
        ep.shift_errors(pe, 64)
    shuffled = pe[torch.randperm(64, generator=torch.Generator().manual_seed(0))]
    assert max(e for _, _, e in ep.shift_errors(shuffled, 5)) > 0.1  # rows out of order break the identity


def test_float64_shift_error_is_rounding_only():
    err = ep.float64_shift_error(64, 128, 2)
    assert 0 < err < 1e-12
    assert ep.float64_shift_error(10, 16, 10) == 0.0  # no pos has pos + k inside the table


# --- Embeddings ----------------------------------------------------------------------------------


def test_one_hot_rows():
    assert ee.one_hot([2, 0, 2], 4).tolist() == [[0, 0, 1, 0], [1, 0, 0, 0], [0, 0, 1, 0]]
    assert ee.one_hot(torch.tensor([1]), 3).dtype == torch.float32


def test_lookup_is_the_row_times_sqrt_d_model():
    torch.manual_seed(0)
    E = torch.randn(50, 16)
    demo = ee.lookup_demo(E, 7)
    assert torch.equal(demo.one_hot, F.one_hot(torch.tensor(7), 50).float())
    assert torch.equal(demo.product, E[7]) and torch.equal(demo.row, E[7]) and demo.lookup_error == 0.0
    assert demo.scale == 4.0 and torch.equal(demo.scaled, E[7] * 4.0)
    assert demo.traced is None and demo.trace_error is None
    assert ee.lookup_demo(E, 7, traced=E[7]).trace_error > 0.1  # an unscaled row is caught
    with pytest.raises(ValueError):
        ee.lookup_demo(E, 50)


def test_lookup_equals_the_models_traced_embedding():
    """The model's src.embed at each position is onehot(id) @ E times √d_model."""
    m = small_model()
    t = traced(m, SRC, TGT)
    E = m.src_embed.lut.weight
    for pos, token in enumerate(SRC[0].tolist()):
        demo = ee.lookup_demo(E, token, t["src.embed"][0, pos])
        assert demo.scale == pytest.approx(math.sqrt(16))
        assert demo.trace_error is not None and demo.trace_error < 1e-6, pos
    wrong = ee.lookup_demo(E, 6, t["src.embed"][0, 0])  # position 0 holds token 5, not 6
    assert wrong.trace_error is not None and wrong.trace_error > 0.1


# --- The encoder layer ---------------------------------------------------------------------------


def test_row_stats_are_torchs():
    torch.manual_seed(0)
    x = torch.randn(5, 16) * 3 + 1
    s = el.row_stats(x)
    var, mean = torch.var_mean(x, dim=-1, unbiased=False)
    assert torch.allclose(s.mean, mean) and torch.allclose(s.var, var) and torch.allclose(s.std, var.sqrt())
    assert not torch.allclose(s.var, x.var(-1))  # LayerNorm divides by D, not D - 1
    eps = 1e-5
    normed = (x - s.mean[:, None]) / torch.sqrt(s.var[:, None] + eps)
    assert torch.allclose(normed, F.layer_norm(x, (16,), eps=eps), atol=1e-6)


@pytest.mark.parametrize("norm_first", [False, True])
def test_row_stats_and_affine_match_the_models_layer_norm(norm_first):
    m = small_model(norm_first=norm_first)
    with torch.no_grad():  # a learned γ and β (fresh ones are 1 and 0, which would hide their order)
        norm = m.encoder[0].add_norm1.norm
        norm.weight.copy_(torch.randn(16))
        norm.bias.copy_(torch.randn(16))
    t = traced(m, SRC, TGT)
    gamma, beta = layer_norm_params(m, 0, 1)
    out = t["enc.0.add_norm1.out"][0]  # [T, D]
    normed = t["enc.0.add_norm1.normed"][0]  # [T, D]
    x = t["src.input"][0] if norm_first else t["enc.0.add_norm1.resid"][0]  # what the LayerNorm read
    s = el.row_stats(normed)
    assert torch.allclose(s.mean, torch.zeros(5), atol=1e-5) and torch.allclose(s.std, torch.ones(5), atol=1e-3)
    before = el.row_stats(x)
    assert torch.allclose((x - before.mean[:, None]) / torch.sqrt(before.var[:, None] + 1e-5), normed, atol=1e-5)
    assert torch.allclose(el.affine(normed, gamma, beta), out, atol=1e-6)
    assert torch.allclose(el.affine(normed, gamma, beta), F.layer_norm(x, (16,), gamma, beta), atol=1e-5)
    assert not torch.allclose(el.affine(normed, beta, gamma), out, atol=1e-3)  # γ and β swapped


def test_stage_geometry_norms_and_cosines():
    torch.manual_seed(0)
    v = torch.randn(6, 16, dtype=torch.float64)
    v[3] = 2.5 * v[2]  # the same direction as the stage before
    v[4] = 0.0  # a zero vector: cosine 0, not NaN
    g = el.stage_geometry(v.numpy())
    assert np.allclose(g.norms, v.norm(dim=1).numpy())
    cos_input = F.cosine_similarity(v, v[0:1], dim=1).numpy()
    cos_prev = F.cosine_similarity(v[1:], v[:-1], dim=1).numpy()
    assert np.allclose(g.to_input, cos_input) and g.to_input[0] == pytest.approx(1.0)
    assert np.isnan(g.to_prev[0]) and np.allclose(g.to_prev[1:], cos_prev)  # the input has no stage before it
    assert g.to_prev[3] == pytest.approx(1.0) and g.to_input[4] == 0.0 and g.to_prev[5] == 0.0
