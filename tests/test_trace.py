"""The golden list of traced tensor names: a rename must be a deliberate act."""

import torch

from model.trace import Interventions, Trace, attention_heads, describe_head, tensor_names
from model.transformer import Config, Transformer, traced

ATTN = ["q", "k", "v", "scores", "scaled", "mask", "masked", "weights", "z", "concat", "out"]
NORM = ["resid", "normed", "out"]

# Written out by hand for a 1+1 layer model, on purpose: this is the contract with the app.
GOLDEN_1_1 = (
    ["src.tokens", "src.embed", "src.pos", "src.input"]
    + [f"enc.0.self_attn.{t}" for t in ATTN]
    + [f"enc.0.add_norm1.{t}" for t in NORM]
    + ["enc.0.ffn.hidden", "enc.0.ffn.out"]
    + [f"enc.0.add_norm2.{t}" for t in NORM]
    + ["enc.out", "tgt.tokens", "tgt.embed", "tgt.pos", "tgt.input"]
    + [f"dec.0.self_attn.{t}" for t in ATTN]
    + [f"dec.0.add_norm1.{t}" for t in NORM]
    + [f"dec.0.cross_attn.{t}" for t in ATTN]
    + [f"dec.0.add_norm2.{t}" for t in NORM]
    + ["dec.0.ffn.hidden", "dec.0.ffn.out"]
    + [f"dec.0.add_norm3.{t}" for t in NORM]
    + ["dec.out", "logits", "probs"]
)


def model(**kw) -> Transformer:
    torch.manual_seed(0)
    return Transformer(Config(src_vocab=12, tgt_vocab=12, d_model=16, n_heads=2, d_ff=32, dropout=0.0, **kw)).eval()


SRC, TGT = torch.tensor([[4, 5, 6, 2]]), torch.tensor([[1, 7, 8]])


def test_golden_list_matches_tensor_names_and_a_real_pass():
    assert tensor_names(1, 1) == GOLDEN_1_1
    t = traced(model(n_enc_layers=1, n_dec_layers=1), SRC, TGT)
    assert list(t.tensors) == GOLDEN_1_1


def test_every_name_is_recorded_for_deeper_and_pre_ln_models():
    for norm_first in (False, True):
        t = traced(model(n_enc_layers=2, n_dec_layers=3, norm_first=norm_first), SRC, TGT)
        assert set(t.tensors) == set(tensor_names(2, 3, norm_first))
        assert len(t.tensors) == len(tensor_names(2, 3, norm_first))


def test_names_follow_the_scheme():
    for name in tensor_names(2, 2, True):
        parts = name.split(".")
        assert parts[0] in {"src", "tgt", "enc", "dec", "logits", "probs"}
        assert all(p and p.replace("_", "").isalnum() for p in parts)


def test_recorded_values_are_consistent():
    t = traced(model(), SRC, TGT)
    assert torch.allclose(t["src.input"], t["src.embed"] + t["src.pos"])
    assert torch.allclose(t["enc.0.add_norm1.resid"], t["src.input"] + t["enc.0.self_attn.out"], atol=1e-6)
    n = t["enc.0.add_norm1.normed"]
    assert torch.allclose(n.mean(-1), torch.zeros(1, 4), atol=1e-5)
    assert torch.allclose(n.var(-1, unbiased=False), torch.ones(1, 4), atol=1e-3)
    assert torch.allclose(t["enc.0.ffn.hidden"].clamp(max=0), torch.zeros(1))  # ReLU output
    assert torch.equal(t["enc.out"], t["enc.1.add_norm2.out"])
    assert torch.allclose(t["enc.0.self_attn.masked"], t["enc.0.self_attn.scaled"] + t["enc.0.self_attn.mask"])


def test_no_trace_records_nothing_and_interventions_are_hashable():
    t = Trace(record=False)
    model()(SRC, TGT, t)
    assert t.tensors == {}
    a = Interventions().with_head("enc.0.self_attn", 1, on=False)
    b = Interventions().with_head("enc.0.self_attn", 1, on=False)
    assert hash(a) == hash(b) and a == b and a.active and not Interventions().active
    assert a.with_head("enc.0.self_attn", 1, on=True) == Interventions()
    assert a.describe() == ["enc.0.self_attn head 1 off"]


def test_positional_encoding_off_records_no_pos_and_input_equals_embed():
    t = traced(model(), SRC, TGT, Interventions(positional_encoding=False))
    assert "src.pos" not in t.tensors
    assert torch.equal(t["src.input"], t["src.embed"])


def test_every_head_once_and_in_words():
    """A model with 2 encoder and 1 decoder layers of 4 heads has (2 + 2 x 1) x 4 heads, the decoder's self- and
    cross-attention each; a head reads the same in a sentence and, short, in a picker."""

    class Cfg:
        n_enc_layers, n_dec_layers, n_heads = 2, 1, 4

    heads = attention_heads(Cfg())
    assert len(heads) == len(set(heads)) == 16
    assert heads[0] == ("enc.0.self_attn", 0) and heads[-1] == ("dec.0.cross_attn", 3)
    assert describe_head("dec.1.cross_attn", 2) == "head 2 of decoder layer 1's encoder-decoder attention"
    assert describe_head("enc.0.self_attn", 3, short=True) == "encoder L0 self-attn · head 3"
