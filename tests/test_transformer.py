"""The whole model: config validation, look-ahead behaviour, interventions, torch.nn.Transformer equality."""

import dataclasses

import pytest
import torch
from torch import nn

from model.trace import Interventions, Trace
from model.transformer import Config, Transformer, look_ahead_mask, traced


def small(**kw) -> Transformer:
    torch.manual_seed(0)
    cfg = Config(**{"src_vocab": 30, "tgt_vocab": 31, "d_model": 32, "n_heads": 4, "d_ff": 64, "dropout": 0.0, **kw})
    return Transformer(cfg).eval()


SRC = torch.tensor([[5, 6, 7, 8, 2, 0], [9, 10, 11, 2, 0, 0]])
TGT = torch.tensor([[1, 12, 13, 14, 15], [1, 16, 17, 0, 0]])


@pytest.mark.parametrize(
    "kw, word",
    [
        ({"d_model": 30, "n_heads": 4}, "divisible"),
        ({"n_heads": 0}, "n_heads"),
        ({"d_ff": -1}, "d_ff"),
        ({"src_vocab": 0}, "src_vocab"),
        ({"dropout": 1.5}, "dropout"),
        ({"d_model": 6, "n_heads": 2, "max_len": 0}, "max_len"),
        ({"d_model": 9, "n_heads": 3}, "even"),
        ({"n_enc_layers": 2.5}, "n_enc_layers"),
    ],
)
def test_invalid_config_names_the_problem(kw, word):
    base = {"src_vocab": 10, "tgt_vocab": 10}
    with pytest.raises(ValueError, match=word):
        Config(**{**base, **kw})


def test_config_is_frozen():
    cfg = Config(10, 10)
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.d_model = 3
    assert cfg.d_k == 32


def test_output_shapes_and_probabilities():
    m = small()
    t = traced(m, SRC, TGT)
    assert t["logits"].shape == (2, 5, 31)
    assert torch.allclose(t["probs"].sum(-1), torch.ones(2, 5))
    assert t["enc.0.self_attn.q"].shape == (2, 4, 6, 8)
    assert t["dec.1.cross_attn.weights"].shape == (2, 4, 5, 6)
    assert t["enc.0.ffn.hidden"].shape == (2, 6, 64)


def test_look_ahead_mask_on_hides_the_future_and_off_reveals_it():
    m = small()
    changed = TGT.clone()
    changed[0, 3] = 20  # change a later target token
    for mask_on in (True, False):
        iv = Interventions(look_ahead_mask=mask_on)
        a = m(SRC, TGT, Trace(iv, record=False))
        b = m(SRC, changed, Trace(iv, record=False))
        earlier_same = torch.allclose(a[0, :3], b[0, :3], atol=1e-6)
        assert earlier_same == mask_on
    t = traced(m, SRC, TGT)
    w = t["dec.0.self_attn.weights"]
    assert torch.all(w[0].triu(1) == 0.0)
    t_off = traced(m, SRC, TGT, Interventions(look_ahead_mask=False))
    assert t_off["dec.0.self_attn.weights"][0].triu(1).sum() > 0


def test_padding_mask_zeroes_attention_to_pad_keys_and_off_does_not():
    m = small()
    w = traced(m, SRC, TGT)["enc.0.self_attn.weights"]
    assert torch.all(w[1, :, :, 4:] == 0.0)
    w_off = traced(m, SRC, TGT, Interventions(padding_mask=False))["enc.0.self_attn.weights"]
    assert torch.all(w_off[1, :, :, 4:] > 0.0)


def test_positional_encoding_off_makes_encoder_permutation_equivariant():
    m = small()
    src = torch.tensor([[5, 6, 7, 8]])
    perm = torch.tensor([2, 0, 3, 1])
    iv = Interventions(positional_encoding=False)
    out = m.encode(src, Trace(iv, record=False))
    out_p = m.encode(src[:, perm], Trace(iv, record=False))
    assert torch.allclose(out[:, perm], out_p, atol=1e-5)
    on = m.encode(src)
    on_p = m.encode(src[:, perm])
    assert not torch.allclose(on[:, perm], on_p, atol=1e-3)


def test_head_off_changes_the_output():
    m = small()
    base = traced(m, SRC, TGT)["logits"]
    off = traced(m, SRC, TGT, Interventions().with_head("enc.0.self_attn", 1, on=False))
    assert torch.equal(off["enc.0.self_attn.z"][:, 1], torch.zeros_like(off["enc.0.self_attn.z"][:, 1]))
    assert not torch.allclose(base, off["logits"], atol=1e-4)


def test_untraced_and_traced_agree_and_nothing_is_stored_on_the_module():
    m = small()
    before = {k: v.clone() for k, v in m.state_dict().items()}
    attrs = set(vars(m))
    t = traced(m, SRC, TGT, Interventions(scale=False))
    assert torch.allclose(m(SRC, TGT, Trace(Interventions(scale=False), record=False)), t["logits"], atol=1e-5)
    assert set(vars(m)) == attrs
    assert all(torch.equal(before[k], v) for k, v in m.state_dict().items())


@pytest.mark.parametrize(
    "iv",
    [
        Interventions(),
        Interventions(look_ahead_mask=False, padding_mask=False),
        Interventions(scale=False, positional_encoding=False),
        Interventions().with_head("enc.1.self_attn", 0, on=False).with_head("dec.0.cross_attn", 3, on=False),
    ],
)
def test_fast_untraced_path_equals_the_explicit_traced_path(iv):
    """Without recording the model uses fused kernels (one Q/K/V matmul, SDPA, fused LayerNorm)."""
    m = small()
    with torch.no_grad():
        fast = m(SRC, TGT, Trace(iv, record=False))
    assert torch.allclose(fast, traced(m, SRC, TGT, iv)["logits"], atol=1e-5)


def test_traced_refuses_a_model_in_training_mode():
    m = small().train()
    with pytest.raises(ValueError, match="eval"):
        traced(m, SRC, TGT)


def copy_mha(mine, ref: nn.MultiheadAttention) -> None:
    ref.in_proj_weight.copy_(torch.cat([mine.W_q.weight, mine.W_k.weight, mine.W_v.weight]))
    ref.in_proj_bias.copy_(torch.cat([mine.W_q.bias, mine.W_k.bias, mine.W_v.bias]))
    ref.out_proj.weight.copy_(mine.W_o.weight)
    ref.out_proj.bias.copy_(mine.W_o.bias)


def copy_norm(mine, ref: nn.LayerNorm) -> None:
    ref.weight.copy_(mine.norm.weight)
    ref.bias.copy_(mine.norm.bias)


def copy_ffn(mine, ref) -> None:
    ref.linear1.weight.copy_(mine.W_1.weight)
    ref.linear1.bias.copy_(mine.W_1.bias)
    ref.linear2.weight.copy_(mine.W_2.weight)
    ref.linear2.bias.copy_(mine.W_2.bias)


def torch_reference(m: Transformer) -> nn.Transformer:
    """nn.Transformer of the same size holding the same weights (no final norms for post-LN)."""
    c = m.cfg
    kw = {
        "d_model": c.d_model,
        "nhead": c.n_heads,
        "dim_feedforward": c.d_ff,
        "dropout": 0.0,
        "batch_first": True,
        "norm_first": c.norm_first,
    }
    enc = nn.TransformerEncoder(
        nn.TransformerEncoderLayer(**kw),
        c.n_enc_layers,
        norm=nn.LayerNorm(c.d_model) if c.norm_first else None,
        enable_nested_tensor=False,
    )
    dec = nn.TransformerDecoder(
        nn.TransformerDecoderLayer(**kw), c.n_dec_layers, norm=nn.LayerNorm(c.d_model) if c.norm_first else None
    )
    ref = nn.Transformer(custom_encoder=enc, custom_decoder=dec, **kw).eval()
    with torch.no_grad():
        for mine, theirs in zip(m.encoder, ref.encoder.layers, strict=True):
            copy_mha(mine.self_attn, theirs.self_attn)
            copy_norm(mine.add_norm1, theirs.norm1)
            copy_norm(mine.add_norm2, theirs.norm2)
            copy_ffn(mine.ffn, theirs)
        for mine, theirs in zip(m.decoder, ref.decoder.layers, strict=True):
            copy_mha(mine.self_attn, theirs.self_attn)
            copy_mha(mine.cross_attn, theirs.multihead_attn)
            copy_norm(mine.add_norm1, theirs.norm1)
            copy_norm(mine.add_norm2, theirs.norm2)
            copy_norm(mine.add_norm3, theirs.norm3)
            copy_ffn(mine.ffn, theirs)
        if c.norm_first:
            ref.encoder.norm.load_state_dict({"weight": m.enc_norm.weight, "bias": m.enc_norm.bias})
            ref.decoder.norm.load_state_dict({"weight": m.dec_norm.weight, "bias": m.dec_norm.bias})
    return ref


@pytest.mark.parametrize("norm_first", [False, True])
def test_whole_model_equals_torch_nn_transformer(norm_first):
    m = small(norm_first=norm_first, n_enc_layers=2, n_dec_layers=3)
    ref = torch_reference(m)
    t = traced(m, SRC, TGT)
    tt = TGT.size(1)
    with torch.no_grad():
        out = ref(
            t["src.input"],
            t["tgt.input"],
            tgt_mask=~look_ahead_mask(tt)[0, 0],
            src_key_padding_mask=SRC == 0,
            tgt_key_padding_mask=TGT == 0,
            memory_key_padding_mask=SRC == 0,
            tgt_is_causal=True,
        )
    assert torch.allclose(out, t["dec.out"], atol=1e-5), (out - t["dec.out"]).abs().max()
    assert torch.allclose(m.generator(out), t["logits"], atol=1e-5)
