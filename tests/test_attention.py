"""Attention and masks: literal matrices, rows summing to 1, exact zeros, the torch reference."""

import math

import pytest
import torch
from torch import nn

from model.trace import Interventions, Trace
from model.transformer import (
    Config,
    MultiHeadAttention,
    additive_mask,
    look_ahead_mask,
    padding_mask,
    scaled_dot_product_attention,
)

INF = float("-inf")


def test_look_ahead_mask_is_lower_triangular():
    expected = torch.tensor([[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]], dtype=torch.bool)
    assert torch.equal(look_ahead_mask(4)[0, 0], expected)


def test_additive_look_ahead_mask_matches_the_lecture_notes():
    expected = torch.tensor([[0, INF, INF, INF], [0, 0, INF, INF], [0, 0, 0, INF], [0, 0, 0, 0]])
    assert torch.equal(additive_mask(look_ahead_mask(4))[0, 0], expected)


def test_padding_mask_hides_pad_keys_only():
    tokens = torch.tensor([[5, 6, 0, 0], [7, 8, 9, 0]])
    expected = torch.tensor([[True, True, False, False], [True, True, True, False]])
    assert padding_mask(tokens).shape == (2, 1, 1, 4)
    assert torch.equal(padding_mask(tokens)[:, 0, 0], expected)


def test_lecture_masked_scores_and_softmax():
    """The 4x4 example of the notes: scaled scores + look-ahead mask = masked scores -> softmax."""
    scaled = torch.tensor([[0.7, 0.1, 0.1, 0.1], [0.1, 0.6, 0.2, 0.1], [0.1, 0.3, 0.6, 0.1], [0.1, 0.3, 0.3, 0.3]])
    masked = scaled + additive_mask(look_ahead_mask(4))[0, 0]
    assert torch.equal(masked[1], torch.tensor([0.1, 0.6, INF, INF]))
    w = torch.softmax(masked, -1)
    assert w[0, 0] == 1.0 and torch.all(w.triu(1) == 0)
    assert w[1, 0] == pytest.approx(1 / (1 + math.exp(0.5)), abs=1e-6)


def test_weights_rows_sum_to_one_and_masked_weights_are_exactly_zero():
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 3, 5, 8) for _ in range(3))
    mask = look_ahead_mask(5) & padding_mask(torch.tensor([[4, 4, 4, 0, 0], [4, 4, 4, 4, 4]]))
    trace = Trace()
    z, w = scaled_dot_product_attention(q, k, v, mask, trace=trace, name="a")
    assert torch.allclose(w.sum(-1), torch.ones(2, 3, 5))
    assert torch.all(w.masked_select(~mask.expand_as(w)) == 0.0)
    assert torch.equal(trace["a.scaled"], trace["a.scores"] / math.sqrt(8))
    assert torch.allclose(z, w @ v)


def test_fully_masked_row_gives_zeros_not_nan():
    q, k, v = (torch.randn(1, 1, 2, 4) for _ in range(3))
    mask = torch.tensor([[True, False], [False, False]])[None, None]
    z, w = scaled_dot_product_attention(q, k, v, mask)
    assert not torch.isnan(w).any() and not torch.isnan(z).any()
    assert torch.equal(w[0, 0, 1], torch.zeros(2)) and w[0, 0, 0, 0] == 1.0


def test_no_scaling_intervention_keeps_raw_scores():
    q, k, v = (torch.randn(1, 1, 3, 16) for _ in range(3))
    t = Trace()
    scaled_dot_product_attention(q, k, v, scale=False, trace=t, name="a")
    assert torch.equal(t["a.scaled"], t["a.scores"])


def copy_into_torch_mha(mha: MultiHeadAttention, ref: nn.MultiheadAttention) -> None:
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.cat([mha.W_q.weight, mha.W_k.weight, mha.W_v.weight]))
        ref.in_proj_bias.copy_(torch.cat([mha.W_q.bias, mha.W_k.bias, mha.W_v.bias]))
        ref.out_proj.weight.copy_(mha.W_o.weight)
        ref.out_proj.bias.copy_(mha.W_o.bias)


@pytest.mark.parametrize("causal", [False, True])
def test_multi_head_attention_equals_torch(causal):
    torch.manual_seed(1)
    cfg = Config(src_vocab=10, tgt_vocab=10, d_model=32, n_heads=4, dropout=0.0)
    mha = MultiHeadAttention(cfg, "x").eval()
    ref = nn.MultiheadAttention(32, 4, dropout=0.0, batch_first=True).eval()
    copy_into_torch_mha(mha, ref)
    x_q, x_kv = torch.randn(3, 6, 32), torch.randn(3, 6, 32)
    tokens = torch.tensor([[5] * 6, [5] * 4 + [0] * 2, [5] * 2 + [0] * 4])
    mask = padding_mask(tokens)
    attn_mask = None
    if causal:
        mask = mask & look_ahead_mask(6)
        attn_mask = ~look_ahead_mask(6)[0, 0]  # torch: True = NOT allowed
    trace = Trace()
    out = mha(x_q, x_kv, mask, trace)
    ref_out, ref_w = ref(x_q, x_kv, x_kv, key_padding_mask=tokens == 0, attn_mask=attn_mask, average_attn_weights=False)
    assert torch.allclose(out, ref_out, atol=1e-5)
    assert torch.allclose(trace["x.weights"], ref_w, atol=1e-5)


def test_head_switched_off_contributes_nothing():
    torch.manual_seed(2)
    cfg = Config(src_vocab=10, tgt_vocab=10, d_model=32, n_heads=4, dropout=0.0)
    mha = MultiHeadAttention(cfg, "enc.0.self_attn").eval()
    x = torch.randn(1, 5, 32)
    off = Trace(Interventions().with_head("enc.0.self_attn", 2, on=False))
    out_off = mha(x, x, None, off)
    assert torch.equal(off["enc.0.self_attn.z"][0, 2], torch.zeros(5, 8))
    assert torch.equal(off["enc.0.self_attn.concat"][0, :, 16:24], torch.zeros(5, 8))
    # Same as computing the output without head 2's columns of W_o.
    on = Trace()
    mha(x, x, None, on)
    z = on["enc.0.self_attn.z"].clone()
    z[0, 2] = 0
    expected = mha.W_o(z.transpose(1, 2).reshape(1, 5, 32))
    assert torch.allclose(out_off, expected, atol=1e-6)
    assert not torch.allclose(out_off, on["enc.0.self_attn.out"], atol=1e-3)
