"""The checks of an untrusted checkpoint (an upload from anyone on a classroom server): its JSON parsed with limits,
every field of its exact type and within `model.limits.MODEL_BOUNDS`, its safetensors header read by hand. Each
refusal is a `CheckpointError` whose message a person can act on; nothing here builds a model. The format itself,
and `from_bytes` which runs these checks in order, are model/checkpoint.py's.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from dataclasses import fields
from typing import Any

from model.limits import MAX_TEXT_CHARS, MAX_TOKEN_CHARS, MAX_VOCAB, MODEL_BOUNDS, MODEL_LABELS
from model.rnn import RNNConfig
from model.transformer import POSITIONS, Config
from model.vocab import SPECIALS, Vocab

FORMAT = "glass-transformer/1"  # the JSON's "format"


class CheckpointError(ValueError):
    """A checkpoint that cannot be used; the message says why."""


# --- Limits of the files ---------------------------------------------------------------------------
# A JSON file is parsed only when its size and its count of brackets and separators are below these,
# so the objects it turns into stay within about a megabyte plus its own text.
MAX_JSON_BRACKETS = 64  # '[' and '{' (a checkpoint's JSON has 8 lists and objects; vocabularies may list a few)
MAX_JSON_VALUES = 2 * MAX_VOCAB + 1024  # two vocabularies plus metadata
MAX_JSON_BYTES = 2 * MAX_VOCAB * (4 * MAX_TOKEN_CHARS + 8) + 64 * 1024  # two full vocabularies of the longest
# UTF-8 tokens (4 bytes a character, quotes, comma, indent) plus 64 KiB of metadata: about 3.4 MB
MAX_INT_DIGITS = 18  # a whole number in any JSON; int() of a long digit string is slow (and refused past 4,300)
MAX_FLOAT_CHARS = 40  # characters of a written float ("1e999" is refused too: it is infinite)
MAX_KEY_CHARS = 64  # characters of a key in any JSON object
MAX_HEADER_BYTES = 64 * 1024  # the safetensors header of the largest model is about 17 KB
SHA256 = re.compile(r"[0-9a-f]{64}")


def show(value: object, n: int = 40) -> str:
    """A short repr for a message (a hostile value may be a megabyte long)."""
    text = repr(value)
    return text if len(text) <= n else text[: n - 5] + "…" + text[-4:]


def _name(text: str) -> str:
    """A tensor or field name for a message: as is when short and visible, else a short repr."""
    return text if len(text) <= 60 and text.isprintable() else show(text)


def _kind(value: object) -> str:
    """How a message names a JSON value's type."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"{str(value).lower()} (true/false)"
    if isinstance(value, int):
        return f"the whole number {value}"
    if isinstance(value, float):
        return f"the number {value:g}"
    if isinstance(value, str):
        return f"the text {show(value)}"
    return "a list" if isinstance(value, list) else "an object"


def read_json(data: bytes, what: str, max_bytes: int, max_brackets: int, max_values: int) -> object:
    """Parse JSON with limits; every problem is a `CheckpointError` starting with `what`."""
    if len(data) > max_bytes:
        raise CheckpointError(f"{what} is {len(data):,} bytes; this app accepts at most {max_bytes:,}")
    brackets = data.count(b"[") + data.count(b"{")  # an upper bound on lists + objects (brackets in strings count too)
    if brackets > max_brackets:
        raise CheckpointError(
            f"{what} has {brackets:,} brackets ('[' or '{{'); this app accepts at most {max_brackets:,}"
        )
    values = brackets + data.count(b",") + data.count(b":") + 1  # an upper bound on the values it holds
    if values > max_values:
        raise CheckpointError(f"{what} holds up to {values:,} values; this app accepts at most {max_values:,}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CheckpointError(f"{what} cannot be read (it is not UTF-8 text: byte {e.start} is invalid)") from None

    def parse_int(s: str) -> int:
        digits = len(s) - s.startswith("-")
        if digits > MAX_INT_DIGITS:
            raise CheckpointError(
                f"{what} holds a whole number of {digits:,} digits; this app accepts at most {MAX_INT_DIGITS}"
            )
        return int(s)

    def parse_float(s: str) -> float:
        if len(s) > MAX_FLOAT_CHARS:
            raise CheckpointError(
                f"{what} holds a number written with {len(s):,} characters; this app accepts at most {MAX_FLOAT_CHARS}"
            )
        value = float(s)
        if not math.isfinite(value):
            raise CheckpointError(f"{what} holds the number {show(s)}, too large for a float")
        return value

    def parse_constant(s: str) -> float:
        raise CheckpointError(f"{what} holds {s}; only finite numbers are accepted")

    def object_pairs(pairs: list[tuple[str, object]]) -> dict[str, object]:
        out: dict[str, object] = {}
        for k, v in pairs:
            if k in out:
                raise CheckpointError(f"{what} lists the key {show(k)} twice in one object")
            out[k] = v
        return out

    decoder = json.JSONDecoder(
        parse_int=parse_int, parse_float=parse_float, parse_constant=parse_constant, object_pairs_hook=object_pairs
    )
    try:
        return decoder.decode(text)
    except json.JSONDecodeError as e:
        raise CheckpointError(f"{what} cannot be read ({e})") from None
    except RecursionError:  # not reachable below MAX_JSON_BRACKETS; kept so nothing else escapes
        raise CheckpointError(f"{what} is nested too deeply") from None


def parse_meta(meta_json: bytes) -> dict[str, Any]:
    meta = read_json(meta_json, "the JSON file", MAX_JSON_BYTES, MAX_JSON_BRACKETS, MAX_JSON_VALUES)
    if not isinstance(meta, dict):
        raise CheckpointError(f"the JSON file must hold an object, not {_kind(meta)}")
    if meta.get("format") != FORMAT:
        raise CheckpointError(f"unknown checkpoint format {show(meta.get('format'))} (expected {FORMAT!r})")
    for key in ("config", "src_vocab", "tgt_vocab"):
        if key not in meta:
            raise CheckpointError(f"the JSON file has no {key!r}")
    return meta


def _number_text(value: float) -> str:
    return f"{value:,}" if isinstance(value, int) else f"{value:g}"


def transformer_config(c: object) -> Config:
    """The model's `Config`, once every field has its type and lies within `MODEL_BOUNDS`."""
    if not isinstance(c, dict):
        raise CheckpointError(f"'config' must be an object, not {_kind(c)}")
    for key in c:
        if key not in MODEL_BOUNDS and key not in ("norm_first", "positions", "key_size"):
            raise CheckpointError(f"the config has an unknown field {show(key)}")
    for key in ("src_vocab", "tgt_vocab"):
        if key not in c:
            raise CheckpointError(f"the config has no {key!r}")
    for key, value in c.items():
        if key == "norm_first":
            if not isinstance(value, bool):
                raise CheckpointError(f"norm_first must be true or false, not {_kind(value)}")
            continue
        if key == "positions":
            if value not in POSITIONS:  # a str compared with str only: any other JSON value is not in it
                raise CheckpointError(f"positions must be one of {', '.join(POSITIONS)}, not {_kind(value)}")
            continue
        if key == "key_size":
            if value is not None and (type(value) is not int or not 1 <= value <= MODEL_BOUNDS["d_model"][1]):
                raise CheckpointError(
                    "key_size must be null or a whole number from 1 to "
                    f"{MODEL_BOUNDS['d_model'][1]:g}, not {_kind(value)}"
                )
            continue
        what = f"{key} ({MODEL_LABELS[key]})" if key in MODEL_LABELS else key
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if key == "dropout" and not number:
            raise CheckpointError(f"{what} must be a number, not {_kind(value)}")
        if key != "dropout" and not (number and isinstance(value, int)):
            raise CheckpointError(f"{what} must be a whole number, not {_kind(value)}")
        lo, hi = MODEL_BOUNDS[key]
        if lo == hi and value != lo:
            raise CheckpointError(f"{what} is {_number_text(value)}; this app accepts only {_number_text(lo)}")
        if value > hi:
            raise CheckpointError(f"{what} is {_number_text(value)}; this app accepts at most {_number_text(hi)}")
        if value < lo:
            raise CheckpointError(f"{what} is {_number_text(value)}; this app accepts at least {_number_text(lo)}")
    try:
        return Config(**c)
    except (TypeError, ValueError) as e:  # within bounds but inconsistent: heads must divide d_model, ...
        raise CheckpointError(f"the JSON's config is not a valid model configuration: {e}") from None


def rnn_config(c: object) -> RNNConfig:
    """The recurrent model's `RNNConfig`: known fields only; `RNNConfig` checks types and `RNN_BOUNDS`."""
    if not isinstance(c, dict):
        raise CheckpointError(f"'config' must be an object, not {_kind(c)}")
    unknown = sorted(set(c) - {f.name for f in fields(RNNConfig)})
    if unknown:
        raise CheckpointError(f"the config has an unknown field {show(unknown[0])}")
    try:
        return RNNConfig(**c)
    except (TypeError, ValueError) as e:
        raise CheckpointError(f"the JSON's config is not a valid RNN configuration: {show(str(e), 400)}") from None


def read_vocab(meta: dict[str, Any], key: str) -> Vocab:
    """A vocabulary: ``{"itos": [...]}``, the special tokens first, unique printable tokens of bounded length."""
    d = meta[key]
    bad = f"{key} is not a valid vocabulary"
    if not isinstance(d, dict) or set(d) != {"itos"}:
        raise CheckpointError(
            f'{bad}: it must be an object {{"itos": [token, ...]}}, not '
            + (f"an object with the fields {show(sorted(d))}" if isinstance(d, dict) else _kind(d))
        )
    itos = d["itos"]
    if not isinstance(itos, list):
        raise CheckpointError(f"{bad}: its itos must be a list of tokens, not {_kind(itos)}")
    if len(itos) > MAX_VOCAB:
        raise CheckpointError(f"{key} lists {len(itos):,} tokens; this app accepts at most {MAX_VOCAB:,}")
    if tuple(itos[: len(SPECIALS)]) != SPECIALS:
        raise CheckpointError(f"{bad}: it must start with the special tokens {', '.join(SPECIALS)}")
    for i, t in enumerate(itos):
        if not isinstance(t, str):
            raise CheckpointError(f"{bad}: token {i} must be text, not {_kind(t)}")
        if not 1 <= len(t) <= MAX_TOKEN_CHARS:
            raise CheckpointError(
                f"{bad}: token {i} has {len(t):,} characters; this app accepts 1 to {MAX_TOKEN_CHARS}"
            )
        if not t.isprintable() or " " in t:  # the tokenizer never makes spaces or invisible characters
            raise CheckpointError(f"{bad}: token {i} ({show(t)}) holds a space or an invisible character")
    if len(set(itos)) != len(itos):
        seen: set[str] = set()
        for t in itos:
            if t in seen:
                raise CheckpointError(f"{bad}: it lists {show(t)} twice")
            seen.add(t)
    return Vocab(itos)


# Metadata: every field the app writes has one type. A field it does not know may hold one plain value
# (text, number, true/false or null), never a list or an object, so its size and shape stay bounded.
TEXT, INT, INT_OR_NULL, NUMBER, NUMBER_OR_NULL, BOOL, SHA, SHA_OR_NULL = (
    "text",
    "whole number",
    "whole number or null",
    "number",
    "number or null",
    "true or false",
    "sha256",
    "sha256 or null",
)
Spec = dict[str, "str | Spec"]  # field -> its type, or the fields of a nested object
TRAINING_FIELDS: Spec = {  # `TrainConfig` fields and what `Trainer.bundle` adds
    "direction": TEXT,
    "d_model": INT,
    "n_heads": INT,
    "n_layers": INT,
    "d_ff": INT,
    "dropout": NUMBER,
    "batch_size": INT,
    "steps": INT,
    "warmup": INT,
    "lr_scale": NUMBER,
    "label_smoothing": NUMBER,
    "clip_grad_norm": NUMBER_OR_NULL,
    "seed": INT,
    "look_ahead_mask": BOOL,
    "eval_every": INT,
    "max_seconds": NUMBER_OR_NULL,
    "max_len": INT,
    "steps_done": INT,
    "train_seconds": NUMBER,
    "n_train": INT,
    "n_heldout": INT,
    "torch": TEXT,
    "arch": TEXT,
    "cell": TEXT,
    "attention": TEXT,
    "positions": TEXT,
    "key_size": INT_OR_NULL,
    "scale_scores": BOOL,
}
METRICS_FIELDS: Spec = {  # `EvalEvent.metrics` plus the CLI's final losses; NaN is written as null
    "step": INT,
    "n": INT,
    "exact_match": NUMBER_OR_NULL,
    "bleu": NUMBER_OR_NULL,
    "coref_accuracy": NUMBER_OR_NULL,
    "heldout_loss": NUMBER_OR_NULL,
    "heldout_cross_entropy": NUMBER_OR_NULL,
    "final_train_loss": NUMBER_OR_NULL,
    "final_train_cross_entropy": NUMBER_OR_NULL,
}
TOP_FIELDS: Spec = {
    "format": TEXT,
    "name": TEXT,
    "direction": TEXT,
    "weights_sha256": SHA,
    "data_sha256": SHA_OR_NULL,
    "training": TRAINING_FIELDS,
    "metrics": METRICS_FIELDS,
    "arch": TEXT,
}


def check_fields(d: dict[str, Any], spec: Spec, path: str, skip: tuple[str, ...] = ()) -> None:
    """Every field of `d` has the type `spec` gives it (a nested spec: an object of those fields)."""
    for key, value in d.items():
        if key in skip:
            continue
        field_name = path + key
        if len(key) > MAX_KEY_CHARS or not key.isprintable():
            raise CheckpointError(
                f"the JSON file has a field named {show(key)}: field names are at most "
                f"{MAX_KEY_CHARS} visible characters"
            )
        kind = spec.get(key)
        if isinstance(kind, dict):
            if not isinstance(value, dict):
                raise CheckpointError(f"{field_name} must be an object, not {_kind(value)}")
            check_fields(value, kind, field_name + ".")
        elif not _is(value, kind):
            expected = kind or "text, a number, true/false or null"
            raise CheckpointError(f"{field_name} must be {_article(expected)}, not {_kind(value)}")
        if isinstance(value, str) and len(value) > MAX_TEXT_CHARS:
            raise CheckpointError(
                f"{field_name} has {len(value):,} characters; this app accepts at most {MAX_TEXT_CHARS}"
            )
        if isinstance(value, str) and any(unicodedata.category(ch) in ("Cc", "Cs") for ch in value):
            raise CheckpointError(f"{field_name} holds a control character or a broken surrogate")


def _article(kind: str) -> str:
    return kind if kind.startswith(("text", "true", "null")) else ("an " if kind[0] in "aeiou" else "a ") + kind


def _is(value: object, kind: str | None) -> bool:
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if kind is None:  # a field the app does not know: one plain value
        return value is None or number or isinstance(value, bool | str)
    return {
        TEXT: isinstance(value, str),
        INT: number and isinstance(value, int),
        INT_OR_NULL: value is None or (number and isinstance(value, int)),
        NUMBER: number,
        NUMBER_OR_NULL: number or value is None,
        BOOL: isinstance(value, bool),
        SHA: isinstance(value, str) and SHA256.fullmatch(value) is not None,
        SHA_OR_NULL: value is None or (isinstance(value, str) and SHA256.fullmatch(value) is not None),
    }[kind]


def check_header(weights: bytes, expected: dict[str, tuple[int, ...]]) -> None:
    """The safetensors header, read by hand: exactly the expected tensors, float32, their data filling the file.

    Layout: 8 bytes little-endian header length n, n bytes of JSON ``{name: {"dtype", "shape",
    "data_offsets": [begin, end]}, "__metadata__": {...}}``, then the data (offsets count from there).
    """
    unreadable = "the weights file is not a readable safetensors file"
    if len(weights) < 8:
        raise CheckpointError(f"{unreadable} (it has only {len(weights)} bytes)")
    n = int.from_bytes(weights[:8], "little")
    if n > MAX_HEADER_BYTES:
        raise CheckpointError(
            f"{unreadable} (its header claims {n:,} bytes; this app accepts at most {MAX_HEADER_BYTES:,})"
        )
    if 8 + n > len(weights):
        raise CheckpointError(
            f"{unreadable} (its header claims {n:,} bytes; the file has {len(weights) - 8:,} after the length)"
        )
    try:
        header = read_json(
            weights[8 : 8 + n], "its header", MAX_HEADER_BYTES, 3 * len(expected) + 8, 16 * len(expected) + 64
        )  # per tensor: 3 brackets, 4 colons, 5 commas
    except CheckpointError as e:
        raise CheckpointError(f"{unreadable} ({e})") from None
    if not isinstance(header, dict):
        raise CheckpointError(f"{unreadable} (its header is {_kind(header)}, not an object)")
    extra_meta = header.pop("__metadata__", {})
    if not isinstance(extra_meta, dict) or not all(isinstance(v, str) for v in extra_meta.values()):
        raise CheckpointError(f"{unreadable} (its __metadata__ must map names to text)")
    missing = sorted(set(expected) - set(header))
    extra = sorted(set(header) - set(expected))
    if missing or extra:
        raise CheckpointError(
            "the weights do not match the config: "
            + (f"missing {', '.join(missing[:5])}" if missing else "")
            + ("; " if missing and extra else "")
            + (f"unexpected {', '.join(_name(x) for x in extra[:5])}" if extra else "")
        )
    spans = []
    for k, shape in expected.items():
        entry = header[k]
        if not isinstance(entry, dict) or set(entry) != {"dtype", "shape", "data_offsets"}:
            raise CheckpointError(
                f"{unreadable} (the entry of tensor {k} must have exactly dtype, shape and data_offsets)"
            )
        if entry["dtype"] != "F32":
            raise CheckpointError(f"tensor {k} is stored as {show(entry['dtype'])}; this app needs F32 (32-bit floats)")
        if entry["shape"] != list(shape) or not all(type(x) is int for x in entry["shape"]):
            got = entry["shape"]
            got = str(tuple(got)) if isinstance(got, list) and len(got) <= 8 else show(got)
            raise CheckpointError(f"tensor {k} has shape {got}, the config needs {tuple(shape)}")
        offsets = entry["data_offsets"]
        if (
            not isinstance(offsets, list)
            or len(offsets) != 2
            or not all(type(x) is int for x in offsets)
            or offsets[1] - offsets[0] != 4 * math.prod(shape)
        ):
            raise CheckpointError(
                f"{unreadable} (tensor {k}'s data_offsets {show(offsets)} do not span the "
                f"{4 * math.prod(shape):,} bytes of its shape)"
            )
        spans.append((offsets[0], offsets[1], k))
    end = 0
    for begin, stop, k in sorted(spans):
        if begin != end:
            raise CheckpointError(
                f"{unreadable} (the data of tensor {k} begins at byte {begin:,}, not {end:,}: "
                "tensors overlap or leave a gap)"
            )
        end = stop
    if end != len(weights) - 8 - n:
        raise CheckpointError(
            f"{unreadable} (its tensors need {end:,} bytes of data; the file holds {len(weights) - 8 - n:,})"
        )
