"""Checkpoints: a save/load round trip is exact, and every kind of broken file is refused clearly.

A checkpoint may come from a user's upload, so loading must never unpickle anything (a pickle can
run arbitrary code) and every problem must surface as a `CheckpointError` that says what is wrong.
"""

import hashlib
import json
import pickle

import pytest
import torch
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save

import model.checkpoint as ckpt
from model.checkpoint import SHIPPED, Bundle, CheckpointError, from_bytes, load, save, to_bytes
from model.transformer import Config, Transformer
from model.vocab import SPECIALS, Vocab

SRC = torch.tensor([[4, 5, 6, 2, 0], [7, 8, 2, 0, 0]])
TGT_IN = torch.tensor([[1, 4, 5, 6], [1, 7, 0, 0]])


@pytest.fixture
def bundle() -> Bundle:
    torch.manual_seed(0)
    src_vocab = Vocab([*SPECIALS, "i", "am", "a", "student", "you"])
    tgt_vocab = Vocab([*SPECIALS, "je", "suis", "étudiant", "tu", "es", "une"])
    cfg = Config(len(src_vocab), len(tgt_vocab), d_model=16, n_heads=2, n_enc_layers=1, n_dec_layers=1, d_ff=32)
    return Bundle(Transformer(cfg).eval(), src_vocab, tgt_vocab, "en-fr", {"metrics": {"bleu": 12.5}}, "tiny")


def rehash(weights: bytes, meta: dict) -> bytes:
    """JSON bytes whose weights hash matches `weights`: so the test reaches the check behind it."""
    return json.dumps({**meta, "weights_sha256": hashlib.sha256(weights).hexdigest()}).encode()


def test_round_trip_gives_identical_logits(bundle, tmp_path):
    paths = save(bundle, tmp_path / "tiny")
    assert [p.name for p in paths] == ["tiny.safetensors", "tiny.json"]
    loaded = load(tmp_path / "tiny")
    with torch.no_grad():
        assert torch.equal(bundle.model(SRC, TGT_IN), loaded.model(SRC, TGT_IN))
    assert loaded.src_vocab.itos == bundle.src_vocab.itos and loaded.tgt_vocab.itos == bundle.tgt_vocab.itos
    assert loaded.config == bundle.config and loaded.direction == "en-fr" and loaded.name == "tiny"
    assert loaded.meta["metrics"] == {"bleu": 12.5}
    assert not loaded.model.training and not any(p.requires_grad for p in loaded.model.parameters())
    assert load(tmp_path / "tiny.json").config == bundle.config  # a path to either file works


@pytest.mark.parametrize(
    "option, words", [({"positions": "learned"}, "learned position vectors"), ({"key_size": 3}, "a key size d_k of 3")]
)
def test_table3_variants_load_from_disk_and_are_refused_as_uploads(bundle, tmp_path, option, words):
    """Learned positions (Table 3 row E) and a smaller key size (row B) round-trip through files; an upload of
    one is refused with a sentence, since the pages draw the paper's sinusoids and d_k = d_model / heads."""
    torch.manual_seed(0)
    cfg = Config(**{**bundle.config.to_dict(), **option})
    variant = Bundle(Transformer(cfg).eval(), bundle.src_vocab, bundle.tgt_vocab, "en-fr", {}, "variant")
    save(variant, tmp_path / "variant")
    loaded = load(tmp_path / "variant")
    assert loaded.config == cfg
    with torch.no_grad():
        assert torch.equal(variant.model(SRC, TGT_IN), loaded.model(SRC, TGT_IN))
    weights, meta = to_bytes(variant)
    with pytest.raises(CheckpointError, match=f"this model uses {words} .*the pages draw the paper.s own model"):
        from_bytes(weights, meta)
    assert from_bytes(weights, meta, variants=True).config == cfg


def test_a_checkpoint_without_the_new_config_fields_loads_as_the_paper_model(bundle):
    """Checkpoints written before `positions` and `key_size` existed: sinusoids, d_k = d_model / heads."""
    weights, meta = to_bytes(bundle)
    m = json.loads(meta)
    for key in ("positions", "key_size"):
        del m["config"][key]
    loaded = from_bytes(weights, rehash(weights, m))
    assert loaded.config.positions == "sinusoidal" and loaded.config.key_size is None
    assert loaded.config.d_k == loaded.config.d_v == 8


def test_a_dotted_name_keeps_its_dot(bundle, tmp_path):
    paths = save(bundle, tmp_path / "lr0.5")
    assert [p.name for p in paths] == ["lr0.5.safetensors", "lr0.5.json"]
    assert load(tmp_path / "lr0.5").name == "lr0.5"
    assert load(tmp_path / "lr0.5.json").config == bundle.config


def test_missing_file(tmp_path):
    with pytest.raises(CheckpointError, match="not found"):
        load(tmp_path / "nothing")


def test_corrupt_weight_bytes_are_caught_by_the_hash(bundle):
    weights, meta = to_bytes(bundle)
    bad = bytearray(weights)
    bad[len(bad) // 2] ^= 0xFF
    with pytest.raises(CheckpointError, match="hash differs"):
        from_bytes(bytes(bad), meta)


def test_corrupt_safetensors_header(bundle):
    weights, meta = to_bytes(bundle)
    bad = b"\xff" * 8 + weights[8:]  # an absurd header length
    with pytest.raises(CheckpointError, match="not a readable safetensors file"):
        from_bytes(bad, rehash(bad, json.loads(meta)))


def test_truncated_weights(bundle):
    weights, meta = to_bytes(bundle)
    cut = weights[: len(weights) // 2]
    with pytest.raises(CheckpointError, match="hash differs"):
        from_bytes(cut, meta)
    with pytest.raises(CheckpointError, match="not a readable safetensors file"):
        from_bytes(cut, rehash(cut, json.loads(meta)))


@pytest.mark.parametrize(
    "meta_bytes, words",
    [
        (b"{not json", "cannot be read"),
        (b"\xff\xfe", "cannot be read"),
        (b"[1, 2]", "must hold an object"),
        (json.dumps({"format": "glass-transformer/1"}).encode(), "has no 'config'"),
    ],
)
def test_unreadable_json(bundle, meta_bytes, words):
    weights, _ = to_bytes(bundle)
    with pytest.raises(CheckpointError, match=words):
        from_bytes(weights, meta_bytes)


@pytest.mark.parametrize(
    "edit, words",
    [
        (lambda m: m.update(format="someone-else/7"), "unknown checkpoint format 'someone-else/7'"),
        (lambda m: m["src_vocab"]["itos"].pop(), "vocabulary sizes"),  # the vocabulary must match the config
        (lambda m: m.update(tgt_vocab={"itos": ["a", "b"]}), "tgt_vocab is not a valid vocabulary"),
        (lambda m: m["config"].update(n_heads=3), "not a valid model configuration.*divisible"),  # 16 by 3
        (lambda m: m.update(direction="en-de"), "unknown direction"),
    ],
    ids=["format", "vocabulary-size", "vocabulary", "config", "direction"],
)
def test_an_edited_meta_is_refused(bundle, edit, words):
    weights, meta = to_bytes(bundle)
    m = json.loads(meta)
    edit(m)
    with pytest.raises(CheckpointError, match=words):
        from_bytes(weights, json.dumps(m).encode())


def test_wrong_tensor_shape(bundle):
    weights, meta = to_bytes(bundle)
    state = dict(st_load(weights))
    state["generator.weight"] = torch.zeros(5, 16)
    bad = st_save(state)
    with pytest.raises(CheckpointError, match=r"generator.weight has shape \(5, 16\), the config needs \(10, 16\)"):
        from_bytes(bad, rehash(bad, json.loads(meta)))


def test_missing_and_unexpected_tensors(bundle):
    weights, meta = to_bytes(bundle)
    state = dict(st_load(weights))
    del state["encoder.0.ffn.W_1.weight"]
    state["extra.weight"] = torch.zeros(2)
    bad = st_save(state)
    with pytest.raises(CheckpointError, match="missing encoder.0.ffn.W_1.weight; unexpected extra.weight"):
        from_bytes(bad, rehash(bad, json.loads(meta)))


def test_non_finite_weights(bundle):
    weights, meta = to_bytes(bundle)
    state = dict(st_load(weights))
    state["generator.bias"] = torch.full_like(state["generator.bias"], float("nan"))
    bad = st_save(state)
    with pytest.raises(CheckpointError, match="generator.bias holds non-finite"):
        from_bytes(bad, rehash(bad, json.loads(meta)))


def test_too_large(bundle):
    weights, meta = to_bytes(bundle)
    with pytest.raises(CheckpointError, match="the limit is"):
        from_bytes(weights, meta, max_bytes=1000)


def test_a_pickle_is_refused_and_never_unpickled(bundle, tmp_path, monkeypatch):
    """A torch.save (pickle) file posing as the weights: refused, and no unpickler ever runs."""
    torch.save(bundle.model.state_dict(), tmp_path / "evil.pt")
    _, meta = to_bytes(bundle)
    pickled = (tmp_path / "evil.pt").read_bytes()
    (tmp_path / "evil.safetensors").write_bytes(pickled)
    (tmp_path / "evil.json").write_bytes(rehash(pickled, json.loads(meta)))

    def forbidden(*args, **kwargs):
        raise AssertionError("checkpoint loading must never unpickle")

    monkeypatch.setattr(pickle, "load", forbidden)
    monkeypatch.setattr(pickle, "loads", forbidden)
    monkeypatch.setattr(pickle, "Unpickler", forbidden)
    monkeypatch.setattr(torch, "load", forbidden)
    with pytest.raises(CheckpointError, match="not a readable safetensors file"):
        load(tmp_path / "evil")
    with pytest.raises(CheckpointError):
        load(tmp_path / "evil.pt")  # a .pt path is not a checkpoint either
    assert "pickle" not in ckpt.__dict__ and "torch.load" not in open(ckpt.__file__).read()


def test_shipped_checkpoints_load_and_are_small():
    for stem in (SHIPPED, ckpt.SHIPPED_NO_MASK):
        b = load(stem)
        size = sum(stem.with_suffix(s).stat().st_size for s in (".safetensors", ".json"))
        assert size < 10e6
        assert b.direction == "en-fr" and len(b.meta["data_sha256"]) == 64
    assert load(SHIPPED).meta["training"]["look_ahead_mask"] is True
    assert load(ckpt.SHIPPED_NO_MASK).meta["training"]["look_ahead_mask"] is False
