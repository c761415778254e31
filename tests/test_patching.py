"""Patching recorded activations from one run into another, and editing one attention weight (model/trace.py).

Exactness is the point: a run patched with its own numbers is the same run, bit for bit, and a run patched
with another run's whole stream at one layer is that other run from there on, bit for bit. Both hold because
the patched run takes the very arithmetic of the recorded one (the step-by-step path).
"""

from __future__ import annotations

import pytest
import torch

from model.trace import Interventions, Patch, Trace, WeightEdit, edit_weights
from model.transformer import Config, Transformer, traced


def model(**kw) -> Transformer:
    torch.manual_seed(0)
    return Transformer(Config(src_vocab=20, tgt_vocab=20, d_model=16, n_heads=2, d_ff=32, dropout=0.0, **kw)).eval()


SRC_A, SRC_B = torch.tensor([[4, 5, 6, 7, 2]]), torch.tensor([[4, 9, 6, 7, 2]])
TGT = torch.tensor([[1, 7, 8, 11]])


def run(m, src, iv: Interventions, tgt=TGT) -> Trace:
    t = Trace(iv)
    with torch.no_grad():
        m(src, tgt, t)
    return t


# every kind of activation the tracing view patches: a residual stream position, a head's z, q, k, v, an attention row
KINDS = [
    ("src.input", (0, 2)),
    ("enc.0.add_norm1.out", (0, 1)),
    ("enc.1.add_norm2.out", (0, 3)),
    ("enc.0.self_attn.z", (0, 1, 2)),
    ("enc.1.self_attn.v", (0, 0, 4)),
    ("enc.0.self_attn.k", (0, 1, 1)),
    ("enc.1.self_attn.q", (0, 0, 0)),
    ("enc.0.self_attn.weights", (0, 1, 3)),
    ("dec.0.cross_attn.z", (0, 1, 2)),
    ("dec.1.cross_attn.weights", (0, 0, 3)),
    ("dec.1.cross_attn.v", (0, 1, 4)),
    ("dec.0.self_attn.z", (0, 0, 1)),
    ("dec.1.add_norm2.out", (0, 2)),
    ("dec.0.add_norm3.out", (0, 3)),
]


@pytest.mark.parametrize("norm_first", [False, True])
def test_patching_a_run_into_itself_changes_nothing_exactly(norm_first):
    m = model(norm_first=norm_first)
    ref = traced(m, SRC_A, TGT)
    for name, at in KINDS:
        name = name.replace(".out", ".resid") if norm_first and "add_norm" in name else name
        t = run(m, SRC_A, Interventions(patches=(Patch.take(ref, name, at),)))
        assert torch.equal(t["logits"], ref["logits"]), name
        assert torch.equal(t[name], ref[name]), name
    every = tuple(
        Patch.take(ref, "enc.0.add_norm1.out" if not norm_first else "enc.0.add_norm1.resid", (0, s))
        for s in range(SRC_A.shape[1])
    )
    assert torch.equal(run(m, SRC_A, Interventions(patches=every))["logits"], ref["logits"])


def test_patching_every_position_of_a_stream_restores_the_other_run_exactly():
    m = model()
    clean, corrupt = traced(m, SRC_A, TGT), traced(m, SRC_B, TGT)
    assert not torch.equal(clean["logits"], corrupt["logits"])
    for name in ("enc.out", "enc.1.add_norm2.out", "src.input", "enc.0.add_norm1.out"):
        patches = tuple(Patch.take(clean, name, (0, s)) for s in range(SRC_A.shape[1]))
        t = run(m, SRC_B, Interventions(patches=patches))
        assert torch.equal(t["logits"], clean["logits"]), name
        assert torch.equal(t["enc.out"], clean["enc.out"]), name
    # the decoder's last stream at every position: the clean output, whatever the encoder read
    patches = tuple(Patch.take(clean, "dec.1.add_norm3.out", (0, q)) for q in range(TGT.shape[1]))
    assert torch.equal(run(m, SRC_B, Interventions(patches=patches))["logits"], clean["logits"])
    # every head's z at every position of every cross-attention: the decoder is the clean one again
    patches = tuple(
        Patch.take(clean, f"dec.{i}.cross_attn.z", (0, h, q))
        for i in range(2)
        for h in range(2)
        for q in range(TGT.shape[1])
    )
    assert torch.equal(run(m, SRC_B, Interventions(patches=patches))["logits"], clean["logits"])


def test_one_patch_changes_only_its_slice_and_what_follows_it():
    m = model()
    clean, corrupt = traced(m, SRC_A, TGT), traced(m, SRC_B, TGT)
    t = run(m, SRC_B, Interventions(patches=(Patch.take(clean, "enc.0.self_attn.z", (0, 1, 1)),)))
    z = t["enc.0.self_attn.z"]
    assert torch.equal(z[0, 1, 1], clean["enc.0.self_attn.z"][0, 1, 1])
    mask = torch.ones_like(z, dtype=torch.bool)
    mask[0, 1, 1] = False
    assert torch.equal(z[mask], corrupt["enc.0.self_attn.z"][mask])  # the rest is the corrupted run's
    assert torch.equal(t["src.input"], corrupt["src.input"])  # what comes before is untouched
    assert not torch.equal(t["enc.0.self_attn.out"][0, 1], corrupt["enc.0.self_attn.out"][0, 1])  # after: moved


def test_patches_go_to_their_own_batch_row():
    m = model()
    clean = traced(m, SRC_A, TGT)
    src = torch.cat([SRC_B, SRC_B])
    t = run(m, src, Interventions(patches=(Patch.take(clean, "src.input", (0, 1), into=1),)), TGT.expand(2, -1))
    single = traced(m, SRC_B, TGT)
    assert torch.allclose(t["logits"][0], single["logits"][0], atol=1e-6)  # row 0 is the plain corrupted run
    assert torch.allclose(t["logits"][1], clean["logits"][0], atol=1e-6)  # row 1 differed only there


def test_a_patch_after_a_head_switched_off_wins_and_order_is_kept():
    m = model()
    clean = traced(m, SRC_A, TGT)
    off = Interventions(heads_off=frozenset({("enc.0.self_attn", 1)}))
    p = Patch.take(clean, "enc.0.self_attn.z", (0, 1, 2))
    t = run(m, SRC_A, Interventions(heads_off=off.heads_off, patches=(p,)))
    assert torch.equal(t["enc.0.self_attn.z"][0, 1, 2], clean["enc.0.self_attn.z"][0, 1, 2])
    assert float(t["enc.0.self_attn.z"][0, 1, 0].abs().sum()) == 0.0  # the rest of the head stays off
    zeros = Patch("enc.0.self_attn.z", (0, 1, 2), (0.0,) * 8)
    later = run(m, SRC_A, Interventions(patches=(p, zeros)))
    assert float(later["enc.0.self_attn.z"][0, 1, 2].abs().sum()) == 0.0  # the later of two patches wins


def test_interventions_with_patches_stay_plain_hashable_data():
    m = model()
    ref = traced(m, SRC_A, TGT)
    a = Interventions(
        patches=(Patch.take(ref, "src.input", (0, 1)),),
        weight_edits=(WeightEdit("enc.0.self_attn", (0, 0, 1, 2), 0.0),),
    )
    b = Interventions(
        patches=(Patch.take(ref, "src.input", (0, 1)),),
        weight_edits=(WeightEdit("enc.0.self_attn", (0, 0, 1, 2), 0.0),),
    )
    assert a == b and hash(a) == hash(b) and a.active and a.rewrites
    assert all(isinstance(v, float) for v in a.patches[0].values) and len(a.patches[0].values) == 16
    assert a.describe() == ["1 activation(s) patched in from another run", "1 attention weight(s) edited"]
    assert not Interventions().rewrites and not Trace(record=False).stepwise and Trace(a, record=False).stepwise


def test_bad_patches_and_edits_are_refused_with_a_message():
    m = model()
    for bad in (Patch("src.input", (0, 9), (0.0,) * 16), Patch("src.input", (0, 1), (0.0,) * 3)):
        with pytest.raises(ValueError, match="does not fit"):
            run(m, SRC_A, Interventions(patches=(bad,)))
    for value, at in ((1.5, (0, 0, 0, 0)), (-0.1, (0, 0, 0, 0)), (0.5, (0, 0, 0)), (0.5, (0, -1, 0, 0))):
        with pytest.raises(ValueError):
            WeightEdit("enc.0.self_attn", at, value)
    with pytest.raises(ValueError, match="outside"):
        run(m, SRC_A, Interventions(weight_edits=(WeightEdit("enc.0.self_attn", (0, 0, 0, 9), 0.0),)))
    with pytest.raises(ValueError, match="more than 1"):
        run(
            m,
            SRC_A,
            Interventions(
                weight_edits=(
                    WeightEdit("enc.0.self_attn", (0, 0, 0, 1), 0.7),
                    WeightEdit("enc.0.self_attn", (0, 0, 0, 2), 0.6),
                )
            ),
        )
    with pytest.raises(ValueError, match="same attention weight"):
        edit_weights(
            torch.full((1, 1, 2, 2), 0.5), (WeightEdit("m", (0, 0, 0, 1), 0.0), WeightEdit("m", (0, 0, 0, 1), 0.2))
        )


def test_editing_one_weight_renormalises_its_row_and_nothing_else():
    m = model()
    ref = traced(m, SRC_A, TGT)
    name = "dec.0.cross_attn"
    t = run(m, SRC_A, Interventions(weight_edits=(WeightEdit(name, (0, 1, 2, 3), 0.9),)))
    w0, w = ref[f"{name}.weights"], t[f"{name}.weights"]
    row0, row = w0[0, 1, 2], w[0, 1, 2]
    assert float(row[3]) == pytest.approx(0.9) and float(row.sum()) == pytest.approx(1.0, abs=1e-6)
    others = [k for k in range(row.numel()) if k != 3]
    ratio = row[others] / row0[others]
    assert torch.allclose(ratio, torch.full_like(ratio, 0.1 / (1 - float(row0[3]))), rtol=1e-5)  # one factor
    untouched = torch.ones_like(w0, dtype=torch.bool)
    untouched[0, 1, 2] = False
    assert torch.equal(w[untouched], w0[untouched])  # every other row bit for bit
    assert torch.equal(t["enc.out"], ref["enc.out"])  # and the encoder, which comes before


def test_blocking_a_key_is_masking_it():
    """Weight 0, row renormalised = the softmax over the keys left (what a mask does), from the recorded scores."""
    m = model()
    ref = traced(m, SRC_A, TGT)
    name, key = "enc.1.self_attn", 2
    edits = tuple(WeightEdit(name, (0, h, q, key), 0.0) for h in range(2) for q in range(5))
    t = run(m, SRC_A, Interventions(weight_edits=edits))
    assert torch.equal(t[f"{name}.masked"], ref[f"{name}.masked"])  # the edit comes after the scores
    scores = ref[f"{name}.masked"].clone()
    scores[..., key] = float("-inf")
    assert torch.allclose(t[f"{name}.weights"], torch.softmax(scores, -1), atol=1e-6)
    assert float(t[f"{name}.weights"][..., key].abs().max()) == 0.0
    # a row with nothing else to share (one allowed key, set to 0) becomes zeros, like a fully masked row
    w = torch.tensor([[[[1.0, 0.0], [0.3, 0.7]]]])
    out = edit_weights(w, (WeightEdit("m", (0, 0, 0, 0), 0.0),))
    assert out[0, 0, 0].tolist() == [0.0, 0.0] and torch.equal(out[0, 0, 1], w[0, 0, 1])
    assert not torch.isnan(out).any()


def test_shipped_model_patch_and_edit_on_the_coreference_pair():
    """On the real model: the clean encoder stream at the adjective alone, put into the other sentence's run,
    brings back the clean run's logits at the pronoun to float error; the same patch of itself changes nothing."""
    from model import checkpoint, pipeline
    from model.examples import COREFERENCE, COREFERENCE_WIDE

    b = checkpoint.load(checkpoint.SHIPPED)
    clean, corrupt = (pipeline.prepare(b, s) for s in (COREFERENCE, COREFERENCE_WIDE))
    tgt = torch.tensor([[1, *b.tgt_vocab.encode("l' animal n' a pas traversé la rue parce qu'".split())[0]]])
    c, w = traced(b.model, clean.src(), tgt), traced(b.model, corrupt.src(), tgt)
    t = run(b.model, corrupt.src(), Interventions(patches=(Patch.take(c, "src.input", (0, 10)),)), tgt)
    assert torch.equal(t["logits"], c["logits"])  # the sentences differ only there: the clean run, exactly
    t = run(b.model, corrupt.src(), Interventions(patches=(Patch.take(w, "dec.0.cross_attn.z", (0, 2, 10)),)), tgt)
    assert torch.equal(t["logits"], w["logits"])
