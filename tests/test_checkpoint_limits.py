"""Hostile checkpoints: every one is refused before anything is allocated, with one clear sentence.

Issue 11 ("a classroom server that no visitor can take down"). On the old loader a 6 KB JSON with
d_model 4096 and an empty weights file cost 3.6 GB and 26 s before its error, a max_len changed in the
JSON alone was accepted (its positional table then ran a page for minutes), nested JSON and huge
integers escaped as RecursionError / ValueError, and metadata of the wrong type was accepted and then
crashed pages. Every case below failed on that loader.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import subprocess
import sys
import textwrap
import tracemalloc
import uuid
from pathlib import Path
from unittest import mock

import pytest
import torch
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save

from model import checkpoint as ckpt
from model.checkpoint import SHIPPED, Bundle, CheckpointError, expected_tensors, from_bytes, to_bytes
from model.data import load_dataset
from model.limits import BOUNDS, MAX_TOKEN_CHARS, MAX_VOCAB, MODEL_BOUNDS
from model.train import TrainConfig, Trainer
from model.transformer import Config, Transformer, sinusoidal_encoding
from model.vocab import SPECIALS, Vocab
from tests.apptest_util import chart_spec, heatmap_z, no_exception, run_page

ROOT = Path(__file__).resolve().parents[1]
WEIGHTS = SHIPPED.with_name("base.safetensors").read_bytes()
META = json.loads(SHIPPED.with_name("base.json").read_bytes())
EMPTY = st_save({})  # a valid safetensors file with no tensor at all


def peak_allowed(meta: bytes) -> int:
    """Python's peak allocation while a checkpoint is refused: its JSON parsed (a few times its size) and the
    safetensors header (about 17 KB of JSON), nothing of the weights. Measured over this file's 122 refusals:
    at most 149 KB for the shipped 6 KB JSON, 605 KB for a 75 KB one (8x), 4 KB for 3.4 MB of spaces."""
    return 200_000 + 8 * len(meta)


def meta_bytes(meta: dict) -> bytes:
    return json.dumps(meta).encode()


def without_hash(**fields) -> dict:
    """The shipped JSON without its weights hash (so a check behind it is reached), `fields` replaced."""
    m = {k: v for k, v in json.loads(json.dumps(META)).items() if k != "weights_sha256"}
    m.update(fields)
    return m


def with_config(**fields) -> bytes:
    m = without_hash()
    m["config"].update(fields)
    return meta_bytes(m)


def refused(weights: bytes, meta: bytes, match: str) -> str:
    """from_bytes refuses with a message matching `match` before it reads a tensor or builds the model, and
    allocates little on the way (counted, not timed: `python -m bench.checkpoint_refusals` times it); returns
    the message."""
    with (
        mock.patch.object(ckpt, "load_safetensors_bytes", wraps=ckpt.load_safetensors_bytes) as read,
        mock.patch.object(ckpt, "build_model", wraps=ckpt.build_model) as build,
    ):
        tracemalloc.start()
        try:
            with pytest.raises(CheckpointError, match=match) as e:
                from_bytes(weights, meta)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert read.call_count == 0 and build.call_count == 0, "refused only after the tensors were read"
    assert peak < peak_allowed(meta), f"{peak:,} bytes allocated to refuse a JSON of {len(meta):,}"
    return str(e.value)


# --- The format's tensor list and the bounds ----------------------------------------------------------


@pytest.mark.parametrize(
    "cfg",
    [
        Config(5, 7, d_model=4, n_heads=2, n_enc_layers=1, n_dec_layers=1, d_ff=6, max_len=8),
        Config(9, 6, d_model=8, n_heads=4, n_enc_layers=3, n_dec_layers=2, d_ff=10, max_len=8, norm_first=True),
        Config(4, 4, d_model=16, n_heads=8, n_enc_layers=1, n_dec_layers=4, d_ff=8, max_len=128),
        Config(6, 5, d_model=8, n_heads=2, n_enc_layers=1, n_dec_layers=1, d_ff=8, max_len=16, positions="learned"),
        Config(6, 5, d_model=16, n_heads=2, key_size=3, n_enc_layers=2, n_dec_layers=1, d_ff=8, max_len=8),
    ],
)
def test_expected_tensors_are_the_models_state_dict(cfg):
    """The hand-written tensor list equals the real model's: a rename in transformer.py fails here."""
    state = Transformer(cfg).state_dict()
    assert expected_tensors(cfg) == {k: tuple(v.shape) for k, v in state.items()}
    assert {v.dtype for v in state.values()} == {torch.float32}


def test_model_bounds_cover_every_config_field_and_match_the_training_page():
    assert set(MODEL_BOUNDS) | {"norm_first", "positions", "key_size"} == {f.name for f in dataclasses.fields(Config)}
    for model_field, training_field in [
        ("d_model", "d_model"),
        ("n_heads", "n_heads"),
        ("d_ff", "d_ff"),
        ("n_enc_layers", "n_layers"),
        ("n_dec_layers", "n_layers"),
        ("dropout", "dropout"),
    ]:
        assert MODEL_BOUNDS[model_field] == BOUNDS[training_field]
    assert MODEL_BOUNDS["src_vocab"][1] == MODEL_BOUNDS["tgt_vocab"][1] == MAX_VOCAB
    assert MODEL_BOUNDS["max_len"] == (8, 128)


def test_the_largest_checkpoint_is_what_the_default_size_limit_allows():
    hi = {k: v[1] for k, v in MODEL_BOUNDS.items()}
    params = sum(math.prod(s) for s in expected_tensors(Config(**{**hi, "norm_first": True})).values())
    assert params == 13_525_824  # vocabularies of 8,000 at d_model 256, 4+4 layers, d_ff 1024
    learned = ckpt.count_parameters(Config(**{**hi, "norm_first": True, "positions": "learned"}))
    assert learned == params + 2 * 128 * 256  # the two learned position tables are the largest option
    assert 4 * learned < ckpt.MAX_MODEL_BYTES < 4 * learned + 4e6


# --- Sizes: refused from the JSON alone, before any tensor exists ---------------------------------------


@pytest.mark.parametrize("weights", [EMPTY, WEIGHTS, b""], ids=["empty", "shipped", "no bytes"])
@pytest.mark.parametrize(
    "fields, message",
    [
        ({"d_model": 4096, "d_ff": 16384}, "d_model is 4,096; this app accepts at most 256"),  # was 3.6 GB, 26 s
        ({"d_model": 2**40}, "d_model is 1,099,511,627,776; this app accepts at most 256"),  # was a RuntimeError
        ({"d_ff": 10**9}, "d_ff is 1,000,000,000; this app accepts at most 1,024"),
        ({"src_vocab": 10**6}, r"src_vocab \(source vocabulary size\) is 1,000,000; this app accepts at most 8,000"),
        ({"tgt_vocab": 8001}, r"tgt_vocab \(target vocabulary size\) is 8,001; this app accepts at most 8,000"),
        ({"max_len": 10**6}, r"max_len \(positions\) is 1,000,000; this app accepts at most 128"),
        ({"max_len": 129}, r"max_len \(positions\) is 129; this app accepts at most 128"),
        ({"max_len": 0}, r"max_len \(positions\) is 0; this app accepts at least 8"),
        ({"n_enc_layers": 100}, r"n_enc_layers \(encoder layers\) is 100; this app accepts at most 4"),
        ({"n_dec_layers": 5}, r"n_dec_layers \(decoder layers\) is 5; this app accepts at most 4"),
        ({"n_heads": 0}, r"n_heads \(heads\) is 0; this app accepts at least 1"),
        ({"n_heads": -4}, r"n_heads \(heads\) is -4; this app accepts at least 1"),
        ({"dropout": 0.9}, "dropout is 0.9; this app accepts at most 0.5"),
        ({"pad_id": 3}, r"pad_id \(padding id\) is 3; this app accepts only 0"),
    ],
)
def test_sizes_beyond_the_bounds_are_refused_fast_whatever_the_weights(weights, fields, message):
    refused(weights, with_config(**fields), message)


def test_max_len_changed_in_the_json_alone():
    """The positional table is computed from max_len, not stored, so the weights cannot pin it: max_len
    beyond the bound is refused (above), and within it the model is what it claims (a longer table of
    the same sinusoids), which every page can draw."""
    m = json.loads(json.dumps(META))
    m["config"]["max_len"] = 128
    b = from_bytes(WEIGHTS, meta_bytes(m))  # the hash covers the weights only, and they are unchanged
    assert b.config.max_len == 128 and b.model.src_embed.pe.shape == (128, 128)
    shipped = ckpt.load(SHIPPED)
    assert torch.equal(b.model.src_embed.pe[:64], shipped.model.src_embed.pe)
    m["config"]["max_len"] = 129
    refused(WEIGHTS, meta_bytes(m), "max_len")


def test_a_vocabulary_beyond_the_bound_is_refused_by_its_length():
    m = without_hash()
    m["src_vocab"] = {"itos": [*SPECIALS, *(f"w{i}" for i in range(MAX_VOCAB))]}
    refused(WEIGHTS, meta_bytes(m), "src_vocab lists 8,004 tokens; this app accepts at most 8,000")


def test_a_large_config_within_bounds_against_small_weights_is_refused_by_the_header():
    """8,000 words a side at d_model 256 is a legal config (54 MB of weights): with the shipped 3 MB
    weights it is refused from the safetensors header, without building the model."""
    m = without_hash()
    m["config"].update(
        src_vocab=MAX_VOCAB, tgt_vocab=MAX_VOCAB, d_model=256, n_heads=8, d_ff=1024, n_enc_layers=4, n_dec_layers=4
    )
    for key in ("src_vocab", "tgt_vocab"):
        m[key] = {"itos": [*SPECIALS, *(f"{key}{i}" for i in range(MAX_VOCAB - len(SPECIALS)))]}
    with pytest.raises(CheckpointError, match="missing decoder.2"):
        from_bytes(WEIGHTS, meta_bytes(m))
    with pytest.raises(CheckpointError, match="missing decoder.0"):
        from_bytes(EMPTY, meta_bytes(m))


# --- JSON that the parser must not choke on ----------------------------------------------------------


@pytest.mark.parametrize(
    "meta, message",
    [
        (b"[" * 10_000 + b"]" * 10_000, r"has 10,000 brackets \('\[' or '\{'\); this app accepts at most 64"),
        (
            meta_bytes(without_hash(metrics={"a": "X"})).replace(b'"X"', b'{"a":' * 10_000 + b"1" + b"}" * 10_000),
            "has 10,008 brackets",
        ),
        (
            meta_bytes(without_hash(metrics="X")).replace(b'"X"', b"1" + b"0" * 10_000),
            "holds a whole number of 10,001 digits; this app accepts at most 18",
        ),  # was a ValueError
        (with_config(d_model="X").replace(b'"X"', b"-" + b"9" * 5_000), "a whole number of 5,000 digits"),
        (meta_bytes(without_hash(metrics="X")).replace(b'"X"', b"1e999"), "holds the number '1e999', too large"),
        (meta_bytes(without_hash(metrics="X")).replace(b'"X"', b"0." + b"1" * 100), "written with 102 characters"),
        (meta_bytes(without_hash(metrics={"bleu": float("nan")})), "holds NaN; only finite numbers are accepted"),
        (meta_bytes(without_hash(metrics={"bleu": float("inf")})), "holds Infinity; only finite numbers"),
        (meta_bytes(without_hash(metrics={"bleu": -float("inf")})), "holds -Infinity; only finite numbers"),
        (with_config(dropout=float("nan")), "holds NaN"),
        (b'{"format": "glass-transformer/1", "format": "glass-transformer/1"}', "lists the key 'format' twice"),
        (b"[" + b"0," * 20_000 + b"0]", "holds up to 20,002 values; this app accepts at most 17,024"),
        (b" " * (ckpt.MAX_JSON_BYTES + 1), r"is 3,393,537 bytes; this app accepts at most 3,393,536"),
        (b"\xff\xfe{}", "cannot be read"),
        (b"{not json", "cannot be read"),
    ],
)
def test_hostile_json_is_refused_before_python_builds_it(meta, message):
    refused(WEIGHTS, meta, message)


# --- Every field has its exact type ----------------------------------------------------------------


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda m: m["config"].update(d_model="128"), "d_model must be a whole number, not the text '128'"),
        (lambda m: m["config"].update(d_model=128.0), "d_model must be a whole number, not the number 128"),
        (
            lambda m: m["config"].update(n_enc_layers=True),
            r"n_enc_layers \(encoder layers\) must be a whole number, "
            r"not true \(true/false\)",
        ),
        (lambda m: m["config"].update(dropout="0.1"), "dropout must be a number, not the text '0.1'"),
        (lambda m: m["config"].update(norm_first="no"), "norm_first must be true or false, not the text 'no'"),
        (lambda m: m["config"].update(norm_first=0), "norm_first must be true or false, not the whole number 0"),
        (
            lambda m: m["config"].update(positions="rotary"),
            "positions must be one of sinusoidal, learned, not the text",
        ),
        (
            lambda m: m["config"].update(positions=["learned"]),
            "positions must be one of sinusoidal, learned, not a list",
        ),
        (lambda m: m["config"].update(positions=None), "positions must be one of sinusoidal, learned, not null"),
        (lambda m: m["config"].update(positions="x" * 10**5), r"positions must be one of .*, not the text 'xxx.*…"),
        (lambda m: m["config"].update(key_size="8"), "key_size must be null or a whole number from 1 to 256, not the"),
        (lambda m: m["config"].update(key_size=8.0), "key_size must be null or a whole number .*, not the number 8"),
        (lambda m: m["config"].update(key_size=True), "key_size must be null .*, not true"),
        (lambda m: m["config"].update(key_size=0), "key_size must be null .*, not the whole number 0"),
        (lambda m: m["config"].update(key_size=10**15), "key_size must be null .*, not the whole number"),
        (
            lambda m: m["config"].update(key_size=64),
            "not a valid model configuration: .*key_size must be None or a "
            "whole number from 1 to d_model / n_heads = 32",
        ),
        (lambda m: m["config"].update(secret=1), "the config has an unknown field 'secret'"),
        (lambda m: m["config"].pop("src_vocab"), "the config has no 'src_vocab'"),
        (lambda m: m.update(config=[1, 2]), "'config' must be an object, not a list"),
        (lambda m: m.update(src_vocab=["<pad>"]), "src_vocab is not a valid vocabulary: it must be an object"),
        (lambda m: m.update(src_vocab={"itos": {"a": 1}}), "its itos must be a list of tokens, not an object"),
        (lambda m: m.update(src_vocab={"itos": m["src_vocab"]["itos"], "x": 1}), "an object with the fields"),
        (lambda m: m["src_vocab"]["itos"].__setitem__(7, 5), "token 7 must be text, not the whole number 5"),
        (lambda m: m["src_vocab"]["itos"].__setitem__(7, ""), "token 7 has 0 characters; this app accepts 1 to 50"),
        (lambda m: m["src_vocab"]["itos"].__setitem__(7, "x" * 51), "token 7 has 51 characters"),
        (lambda m: m["src_vocab"]["itos"].__setitem__(7, "a b"), "token 7 .* holds a space or an invisible"),
        (lambda m: m["src_vocab"]["itos"].__setitem__(7, "a\nb"), "token 7 .* holds a space or an invisible"),
        (lambda m: m["src_vocab"]["itos"].__setitem__(7, "\ud800"), "token 7 .* holds a space or an invisible"),
        (
            lambda m: m["src_vocab"]["itos"].__setitem__(7, "the"),
            "src_vocab is not a valid vocabulary: it lists 'the' twice",
        ),
        (
            lambda m: m["tgt_vocab"]["itos"].__setitem__(0, "<bos>"),
            "tgt_vocab is not a valid vocabulary: it must start with the special tokens",
        ),
        (lambda m: m.update(metrics=[1, 2]), "metrics must be an object, not a list"),
        (lambda m: m.update(training="fast"), "training must be an object, not the text 'fast'"),
        (lambda m: m["training"].update(steps_done="lots"), "training.steps_done must be a whole number, not the text"),
        (lambda m: m["training"].update(train_seconds=None), "training.train_seconds must be a number, not null"),
        (lambda m: m["training"].update(look_ahead_mask="yes"), "training.look_ahead_mask must be true or false"),
        (
            lambda m: m["metrics"].update(exact_match="99%"),
            "metrics.exact_match must be a number or null, not the text",
        ),
        (lambda m: m["metrics"].update(extra={"a": 1}), "metrics.extra must be text, a number, true/false or null"),
        (lambda m: m.update(plugins=["x"]), "plugins must be text, a number, true/false or null, not a list"),
        (lambda m: m.update(name=5), "name must be text, not the whole number 5"),
        (lambda m: m.update(name="n" * 201), "name has 201 characters; this app accepts at most 200"),
        (lambda m: m.update(name="a\x00b"), "name holds a control character or a broken surrogate"),
        (lambda m: m.update(name="\udc80"), "name holds a control character or a broken surrogate"),
        (lambda m: m.update(direction=7), "direction must be text, not the whole number 7"),
        (lambda m: m.update(weights_sha256="abc"), "weights_sha256 must be a sha256, not the text 'abc'"),
        (lambda m: m.update(data_sha256=12), "data_sha256 must be a sha256 or null"),
        (lambda m: m.update({"k" * 65: 1}), "field names are at most 64 visible characters"),
    ],
)
def test_every_field_has_its_type(change, message):
    m = json.loads(json.dumps(META))
    change(m)
    refused(WEIGHTS, meta_bytes(m), message)


def test_unknown_plain_fields_are_kept_and_null_metrics_are_accepted():
    m = json.loads(json.dumps(META))
    m["note"] = "trained in class"
    m["metrics"].update(heldout_cross_entropy=None, extra_score=1.5)
    b = from_bytes(WEIGHTS, meta_bytes(m))
    assert b.meta["note"] == "trained in class" and b.meta["metrics"]["extra_score"] == 1.5


# --- The safetensors header, read by hand ------------------------------------------------------------


def header_file(header: dict, data: bytes) -> bytes:
    h = json.dumps(header).encode()
    return len(h).to_bytes(8, "little") + h + data


def shipped_header() -> tuple[dict, bytes]:
    n = int.from_bytes(WEIGHTS[:8], "little")
    return json.loads(WEIGHTS[8 : 8 + n]), WEIGHTS[8 + n :]


@pytest.mark.parametrize(
    "weights, message",
    [
        (b"", r"not a readable safetensors file \(it has only 0 bytes\)"),
        (
            (10**9).to_bytes(8, "little") + WEIGHTS[8:],
            "its header claims 1,000,000,000 bytes; this app accepts at most",
        ),
        ((60_000).to_bytes(8, "little") + b"{}", "its header claims 60,000 bytes; the file has 2 after the length"),
        (header_file([], b""), "its header is a list, not an object"),
        (header_file({"__metadata__": {"format": 1}}, b""), "its __metadata__ must map names to text"),
        (b'\x05\x00\x00\x00\x00\x00\x00\x00{"a":', "its header cannot be read"),
    ],
)
def test_a_broken_header_is_refused(weights, message):
    refused(weights, meta_bytes(without_hash()), message)


def test_header_entries_must_match_the_config_exactly():
    header, data = shipped_header()

    def check(change, message):
        h = json.loads(json.dumps(header))
        d = change(h)
        refused(header_file(h, data if d is None else d), meta_bytes(without_hash()), message)

    check(
        lambda h: h["generator.bias"].update(dtype="F16"),
        "tensor generator.bias is stored as 'F16'; this "
        r"app needs F32 \(32-bit floats\)",
    )
    check(
        lambda h: h["generator.bias"].update(shape=[325]),
        r"tensor generator.bias has shape \(325,\), the "
        r"config needs \(324,\)",
    )
    check(lambda h: h["generator.bias"].update(shape=[324.0]), r"generator.bias has shape \(324.0,\)")
    check(lambda h: h["generator.bias"].update(shape="324"), "generator.bias has shape '324'")
    check(lambda h: h["generator.bias"].update(extra=1), "must have exactly dtype, shape and data_offsets")
    check(lambda h: h.update({"evil" * 100: h.pop("generator.bias")}), "missing generator.bias; unexpected 'evilevil")
    b = header["generator.bias"]["data_offsets"]
    check(lambda h: h["generator.bias"].update(data_offsets=[b[0], b[1] + 4]), "do not span the 1,296 bytes")
    check(lambda h: h["generator.bias"].update(data_offsets=[0, 1296]), "tensors overlap or leave a gap")
    check(lambda h: data + b"\x00" * 4, r"its tensors need 3,\d{3},\d{3} bytes of data; the file holds 3,")
    check(lambda h: data[:-4], "its tensors need")


def test_header_claiming_more_bytes_than_the_file_costs_nothing():
    """The header length is the first thing read: 2^64 - 1 is refused before any slicing."""
    refused(b"\xff" * 8 + WEIGHTS[8:], meta_bytes(without_hash()), "not a readable safetensors file")


# --- Memory: a rejected upload costs about its own size --------------------------------------------------

CHILD = textwrap.dedent("""
    import json, resource, sys, tracemalloc
    from model import checkpoint
    weights, meta = open(sys.argv[1], "rb").read(), open(sys.argv[2], "rb").read()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    tracemalloc.start()
    try:
        checkpoint.from_bytes(weights, meta)
        outcome = "accepted"
    except checkpoint.CheckpointError as e:
        outcome = str(e)
    python_peak = tracemalloc.get_traced_memory()[1]
    rss_growth = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024
    print(json.dumps({"python_peak": python_peak, "rss_growth": rss_growth, "outcome": outcome}))
""")


def measure(tmp_path: Path, weights: bytes, meta: bytes) -> dict:
    """from_bytes in a fresh process: its peak RSS growth and tracemalloc peak (bytes)."""
    (tmp_path / "w").write_bytes(weights)
    (tmp_path / "j").write_bytes(meta)
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path / "w"), str(tmp_path / "j")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env={"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"},
    )
    return json.loads(out.stdout)


def test_the_hostile_6_kb_json_costs_neither_memory_nor_time(tmp_path):
    """The upload that cost 3.6 GB and 26 s: now under 5 MB (measured: 0 MB), refused before a tensor is read
    (`refused`; `python -m bench.checkpoint_refusals` times it: 0.4 ms, 0.003x loading the shipped model)."""
    meta = with_config(d_model=4096, d_ff=16384)
    assert len(meta) < 7_000
    r = measure(tmp_path, EMPTY, meta)
    assert "d_model is 4,096" in r["outcome"]
    assert r["rss_growth"] < 5e6 and r["python_peak"] < 1e6, r
    refused(EMPTY, meta, "d_model is 4,096")


def test_the_largest_json_the_limits_allow_costs_about_its_size(tmp_path):
    """Two full vocabularies of the longest 4-byte-character tokens (3 MB of JSON), against weights that do
    not fit: refused by the header, with Python's peak under 3x the files (measured: 15 MB for 6 MB)."""
    m = without_hash()
    m["config"].update(src_vocab=MAX_VOCAB, tgt_vocab=MAX_VOCAB)
    tokens = [chr(0x1D400 + i % 50) * (MAX_TOKEN_CHARS - 6) + f"{i:06d}" for i in range(MAX_VOCAB - 4)]
    m["src_vocab"] = m["tgt_vocab"] = {"itos": [*SPECIALS, *tokens]}
    meta = json.dumps(m, ensure_ascii=False, indent=1).encode()
    assert 2.9e6 < len(meta) <= ckpt.MAX_JSON_BYTES
    r = measure(tmp_path, WEIGHTS, meta)
    assert "src_embed.lut.weight has shape (212, 128), the config needs (8000, 128)" in r["outcome"]
    assert r["python_peak"] < 3 * (len(WEIGHTS) + len(meta)) and r["rss_growth"] < 50e6, r


# --- What the app itself makes always loads ----------------------------------------------------------


def test_the_largest_model_the_training_page_can_train_round_trips():
    """The training page's largest settings (its BOUNDS) on the toy set: the job's result goes through
    from_bytes (training/job.py), which used to refuse it (30 MB > the old 20 MB upload limit), and a student can
    upload the downloaded files again."""
    hi = {k: int(BOUNDS[k][1]) for k in ("d_model", "n_heads", "n_layers", "d_ff")}
    trainer = Trainer(TrainConfig(**hi, dropout=BOUNDS["dropout"][1], steps=1), data=load_dataset())
    bundle = trainer.bundle(name="largest")
    bundle.meta["metrics"] = {"heldout_cross_entropy": math.nan, "exact_match": 0.5}  # a diverged evaluation
    weights, meta = to_bytes(bundle)
    assert 20 * 2**20 < len(weights) and len(weights) + len(meta) <= ckpt.MAX_BYTES
    back = from_bytes(weights, meta)
    assert back.config == bundle.config and back.meta["metrics"] == {"heldout_cross_entropy": None, "exact_match": 0.5}
    for (k, a), (_, b) in zip(bundle.model.state_dict().items(), back.model.state_dict().items(), strict=True):
        assert torch.equal(a, b), k


def test_the_largest_model_the_bounds_allow_round_trips():
    """Every size at its bound at once (8,000 words of the longest tokens a side): loads, nothing larger does."""
    torch.manual_seed(0)
    hi = {k: v[1] for k, v in MODEL_BOUNDS.items()}
    cfg = Config(**{**hi, "norm_first": True})
    vocab = Vocab([*SPECIALS, *(f"{i:0{MAX_TOKEN_CHARS}d}" for i in range(MAX_VOCAB - len(SPECIALS)))])
    bundle = Bundle(Transformer(cfg).eval(), vocab, vocab, "fr-en", {}, "biggest")
    weights, meta = to_bytes(bundle)
    back = from_bytes(weights, meta)
    assert back.config == cfg and back.direction == "fr-en" and back.src_vocab.itos == vocab.itos
    state = dict(st_load(weights))
    state["generator.bias"] = torch.zeros(MAX_VOCAB + 1)  # one word more
    bigger = st_save(state)
    m = json.loads(meta)
    m["config"]["tgt_vocab"] = MAX_VOCAB + 1
    m["weights_sha256"] = hashlib.sha256(bigger).hexdigest()
    with pytest.raises(CheckpointError, match="at most 8,000"):
        from_bytes(bigger, meta_bytes(m))


def test_the_shipped_checkpoints_still_load():
    for stem in (SHIPPED, ckpt.SHIPPED_NO_MASK):
        b = ckpt.load(stem)
        assert b.config.d_model == 128 and b.meta["training"]["steps_done"] == 1200


def test_load_refuses_a_huge_file_without_reading_it(tmp_path):
    (tmp_path / "big.safetensors").write_bytes(b"")
    (tmp_path / "big.json").write_bytes(b"")
    with open(tmp_path / "big.safetensors", "r+b") as f:
        f.truncate(ckpt.MAX_MODEL_BYTES + 1)  # sparse: no disk used
    with pytest.raises(CheckpointError, match="the limit is 58 MB"):
        ckpt.load(tmp_path / "big")


def test_bytes_of_the_wrong_type_are_refused():
    with pytest.raises(CheckpointError, match="two files of bytes"):
        from_bytes("weights", b"{}")


def test_the_positional_page_draws_a_model_at_the_largest_max_len():
    """max_len is free within its bound (the table is computed): the page that draws the table copes."""
    m = json.loads(json.dumps(META))
    m["config"]["max_len"] = MODEL_BOUNDS["max_len"][1]
    b = from_bytes(WEIGHTS, meta_bytes(m), name="long")
    at = run_page("positional", my_model=b, my_model_key=uuid.uuid4().hex, model="mine")
    no_exception(at)
    drawn = heatmap_z(chart_spec(at, "positional_all"))  # every position of this model, not the shipped 64
    assert drawn.shape == (128, 128)
    torch.testing.assert_close(torch.from_numpy(drawn).float(), sinusoidal_encoding(128, 128), atol=1e-6, rtol=0)
