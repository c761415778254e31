"""Fuzzing `from_bytes`: whatever the bytes, it returns a Bundle or raises CheckpointError, nothing else,
and a Bundle it returns is one every page can show and the app can save and load again.

Three sources of input, derandomized and bounded (about 180 examples, a few seconds): random bytes,
the shipped JSON with one field replaced (by any JSON value, or raw text such as a 5,000-digit number,
3,000 nested brackets or NaN), removed or added, or a few bytes changed, and the shipped weights
behind a mutated safetensors header. Raise the count for a longer hunt:
CHECKPOINT_FUZZ_EXAMPLES=2000 pytest tests/test_checkpoint_fuzz.py
"""

from __future__ import annotations

import json
import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from model.checkpoint import SHIPPED, Bundle, CheckpointError, from_bytes, to_bytes
from model.limits import MODEL_BOUNDS
from viz.decoder import training_table
from viz.overview import model_record

EXAMPLES = int(os.environ.get("CHECKPOINT_FUZZ_EXAMPLES", "60"))  # per test; 3 tests
FUZZ = settings(
    max_examples=EXAMPLES,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

WEIGHTS = SHIPPED.with_name("base.safetensors").read_bytes()
META_BYTES = SHIPPED.with_name("base.json").read_bytes()
META = json.loads(META_BYTES)
N = int.from_bytes(WEIGHTS[:8], "little")
HEADER, DATA = json.loads(WEIGHTS[8 : 8 + N]), WEIGHTS[8 + N :]


def only_checkpoint_errors(weights: bytes, meta: bytes) -> None:
    try:
        bundle = from_bytes(weights, meta)
    except CheckpointError as e:
        assert str(e) and len(str(e)) < 400, str(e)  # one sentence, not a dump of the input
        return
    assert isinstance(bundle, Bundle)
    for name, (lo, hi) in MODEL_BOUNDS.items():
        assert lo <= getattr(bundle.config, name) <= hi, name
    # What the pages do with the metadata (overview, decoder, training pages): no exception.
    model_record(bundle.meta)
    training_table({"model": bundle})
    metrics = bundle.meta.get("metrics") or {}
    if metrics.get("exact_match") is not None:
        f"{100 * metrics['exact_match']:.1f} % (step {metrics.get('step')})"
    json.dumps(bundle.meta, allow_nan=False)
    again = from_bytes(*to_bytes(bundle))  # what the app accepts, it can save and load again
    assert again.config == bundle.config and again.src_vocab.itos == bundle.src_vocab.itos


# Any JSON value, including the awkward ones: huge and negative integers, NaN, infinities, long text,
# lone surrogates, nesting.
scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=80)
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)
paths = st.sampled_from(
    [(k,) for k in META]
    + [("config", k) for k in META["config"]]
    + [("training", k) for k in META["training"]]
    + [("metrics", k) for k in META["metrics"]]
    + [("src_vocab", "itos"), ("tgt_vocab", "itos"), ("new",), ("config", "new"), ("metrics", "new")]
)


@FUZZ
@given(weights=st.binary(max_size=600), meta=st.binary(max_size=600) | st.sampled_from([META_BYTES, b"{}"]))
def test_random_bytes(weights, meta):
    only_checkpoint_errors(weights, meta)


RAW = "\u0000raw\u0000"  # stands for raw JSON text, put in after json.dumps
raw_texts = st.sampled_from(
    [
        b"1" + b"0" * 5000,
        b"-" + b"9" * 19,
        b"[" * 3000 + b"]" * 3000,
        b'{"a":' * 100 + b"1" + b"}" * 100,
        b"NaN",
        b"-Infinity",
        b"1e400",
        b"1" * 40 + b".5",
    ]
)


@FUZZ
@given(
    path=paths,
    action=st.sampled_from(["set", "delete", "set vocab entry", "raw"]),
    value=json_values,
    raw=raw_texts,
    index=st.integers(0, 400),
    splice=st.none() | st.tuples(st.integers(0, len(META_BYTES)), st.binary(max_size=8), st.integers(0, 8)),
)
def test_the_shipped_json_mutated(path, action, value, raw, index, splice):
    m = json.loads(META_BYTES)
    *parents, key = path
    d = m
    for p in parents:
        d = d[p]
    if action == "delete":
        d.pop(key, None)
    elif action == "set vocab entry" and key == "itos":
        d[key][index % len(d[key])] = value
    else:
        d[key] = RAW if action == "raw" else value
    meta = json.dumps(m).encode("utf-8", "surrogatepass").replace(json.dumps(RAW).encode(), raw)
    if splice is not None:  # a few raw bytes replaced: broken syntax, broken UTF-8
        at, new, drop = splice
        meta = meta[:at] + new + meta[at + drop :]
    only_checkpoint_errors(WEIGHTS, meta)


tensor_names = st.sampled_from(sorted(HEADER))
entry_changes = st.fixed_dictionaries(
    {},
    optional={
        "dtype": st.sampled_from(["F32", "F16", "BF16", "F64", "I64", "U8", "BOOL", ""]) | json_values,
        "shape": st.lists(st.integers(-2, 10**12), max_size=3) | json_values,
        "data_offsets": st.lists(st.integers(-2, 2**64), min_size=2, max_size=2) | json_values,
    },
)


@FUZZ
@given(
    changes=st.dictionaries(tensor_names, entry_changes, max_size=3),
    drop=st.sets(tensor_names, max_size=2),
    extra=st.dictionaries(st.text(max_size=12), json_values, max_size=2),
    metadata=st.none() | json_values,
    length=st.none() | st.integers(0, 2**64 - 1),
    data_cut=st.integers(-64, 64),
)
def test_the_shipped_weights_behind_a_mutated_header(changes, drop, extra, metadata, length, data_cut):
    header = json.loads(json.dumps(HEADER))
    for name, change in changes.items():
        header[name].update(change)
    for name in drop:
        header.pop(name, None)
    header.update(extra)
    if metadata is not None:
        header["__metadata__"] = metadata
    h = json.dumps(header).encode("utf-8", "surrogatepass")
    data = DATA[:data_cut] if data_cut < 0 else DATA + b"\x00" * data_cut
    weights = (len(h) if length is None else length).to_bytes(8, "little") + h + data
    meta = json.dumps({k: v for k, v in META.items() if k != "weights_sha256"}).encode()
    only_checkpoint_errors(weights, meta)
