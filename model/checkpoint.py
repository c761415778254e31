"""Checkpoints: safetensors weights plus a JSON file. Loading never unpickles.

A checkpoint named ``X`` is two files side by side:

- ``X.safetensors``: the model's state dict (tensors only).
- ``X.json``: ``format``, ``arch`` ("transformer", or "rnn" for the recurrent model of model/rnn.py;
  missing means "transformer"), ``config`` (the `Config` or `RNNConfig` fields), ``direction`` ("en-fr" / "fr-en"),
  ``src_vocab`` / ``tgt_vocab`` (token lists), ``training`` (recipe and run metadata), ``metrics``
  (held-out figures), ``data_sha256`` (hash of the training data file), ``weights_sha256``.

Every problem (missing file, corrupt bytes, wrong format, vocabulary/config mismatch, missing or
mis-shaped tensors, non-finite weights, too large) raises `CheckpointError` with a message meant for
a person, never a traceback from deep inside torch.

An upload comes from anyone on a shared classroom server, so `from_bytes` decides from the bytes
alone, before it allocates anything, whether the checkpoint fits the app: the JSON is parsed with
limits (size, brackets, number sizes, no NaN, no repeated keys), every field must have its exact
type, the config must lie within `model.limits.MODEL_BOUNDS` (the training page's bounds), and the
safetensors header, read by hand, must list exactly the tensors of that config (`expected_tensors`),
float32, with data filling the file. A rejected upload costs milliseconds and about its own size in
memory; only an accepted one builds a model.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import unicodedata
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load as load_safetensors_bytes
from safetensors.torch import save as save_safetensors_bytes

from model.limits import MAX_TEXT_CHARS, MAX_TOKEN_CHARS, MAX_VOCAB, MODEL_BOUNDS, MODEL_LABELS
from model.rnn import RNNConfig, RNNSeq2Seq
from model.rnn import expected_tensors as rnn_expected_tensors
from model.transformer import POSITIONS, Config, Transformer
from model.vocab import SPECIALS, Vocab

FORMAT = "glass-transformer/1"
ASSETS = Path(__file__).resolve().parents[1] / "assets"
SHIPPED = ASSETS / "checkpoints" / "base"  # the trained model the app opens with
SHIPPED_NO_MASK = ASSETS / "checkpoints" / "no_mask"  # same recipe, trained without the look-ahead mask
ARCHS = ("transformer", "rnn")  # the JSON's "arch" and `TrainConfig.arch`: the Transformer, or model/rnn.py's RNN


def build_model(cfg: Config | RNNConfig) -> Transformer | RNNSeq2Seq:
    """The network for a config: `RNNSeq2Seq` for an `RNNConfig`, else the `Transformer`."""
    return RNNSeq2Seq(cfg) if isinstance(cfg, RNNConfig) else Transformer(cfg)


def count_parameters(cfg: Config | RNNConfig) -> int:
    """Learned numbers of this config's model, counted from its checkpoint's tensor list without building it."""
    shapes = rnn_expected_tensors(cfg) if isinstance(cfg, RNNConfig) else expected_tensors(cfg)
    return sum(math.prod(shape) for shape in shapes.values())


class CheckpointError(ValueError):
    """A checkpoint that cannot be used; the message says why."""


@dataclass
class Bundle:
    """A model ready to use: weights in eval mode, its config, vocabularies and metadata.

    Treat `model` as read-only: the shipped bundle is shared by every session of the app.
    """

    model: Transformer | RNNSeq2Seq
    src_vocab: Vocab
    tgt_vocab: Vocab
    direction: str = "en-fr"
    meta: dict[str, Any] = field(default_factory=dict)
    name: str = "model"

    @property
    def config(self) -> Config | RNNConfig:
        return self.model.cfg

    @property
    def langs(self) -> tuple[str, str]:
        src, tgt = self.direction.split("-")
        return src, tgt


def to_bytes(bundle: Bundle) -> tuple[bytes, bytes]:
    """(safetensors bytes, JSON bytes) for a bundle: what `save` writes and the app offers to download."""
    state = {k: v.detach().contiguous() for k, v in bundle.model.state_dict().items()}
    weights = save_safetensors_bytes(state, metadata={"format": FORMAT})
    meta = {
        **_finite(bundle.meta),
        "format": FORMAT,
        "arch": "rnn" if isinstance(bundle.model, RNNSeq2Seq) else "transformer",
        "name": bundle.name,
        "config": bundle.config.to_dict(),
        "direction": bundle.direction,
        "src_vocab": bundle.src_vocab.to_dict(),
        "tgt_vocab": bundle.tgt_vocab.to_dict(),
        "weights_sha256": hashlib.sha256(weights).hexdigest(),
    }
    return weights, json.dumps(meta, ensure_ascii=False, indent=1, allow_nan=False).encode("utf-8")


def _finite(value: Any) -> Any:
    """`value` with every NaN or infinite float written as None: JSON has no NaN, and `from_bytes` refuses
    the non-standard ``NaN`` (a diverged run's held-out loss is NaN)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def save(bundle: Bundle, stem: str | Path) -> tuple[Path, Path]:
    """Write ``stem.safetensors`` and ``stem.json``; returns both paths."""
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    weights, meta = to_bytes(bundle)
    w, j = _paths(stem)
    w.write_bytes(weights)
    j.write_bytes(meta)
    return w, j


def _paths(stem: Path) -> tuple[Path, Path]:
    """stem + ".safetensors", stem + ".json" (appended, so a dotted name like "lr0.5" keeps its dot)."""
    return stem.with_name(stem.name + ".safetensors"), stem.with_name(stem.name + ".json")


def load(stem: str | Path) -> Bundle:
    """Load ``stem.safetensors`` + ``stem.json`` (a path to either file works too)."""
    stem = Path(stem)
    if stem.suffix in (".safetensors", ".json"):
        stem = stem.with_suffix("")
    w, j = _paths(stem)
    for p in (w, j):
        if not p.is_file():
            raise CheckpointError(f"checkpoint file not found: {p}")
    size = w.stat().st_size + j.stat().st_size
    if size > MAX_MODEL_BYTES:  # before reading: a huge file is never read into memory
        raise CheckpointError(f"checkpoint is {size / 1e6:.1f} MB; the limit is {MAX_MODEL_BYTES / 1e6:.0f} MB")
    return from_bytes(w.read_bytes(), j.read_bytes(), name=stem.name, archs=ARCHS, variants=True)


def from_bytes(weights: bytes, meta_json: bytes, name: str | None = None, max_bytes: int | None = None,
               archs: tuple[str, ...] = ("transformer",), variants: bool = False) -> Bundle:
    """Validate and load a checkpoint given as bytes (an upload, files read from disk, a training job's result).

    Everything is checked before anything is allocated: the JSON is parsed with limits (size,
    brackets, number sizes, no NaN), every field has its exact type, the config is within
    `model.limits.MODEL_BOUNDS`, and the safetensors header (read by hand, no tensor loaded) lists
    exactly the tensors of that config with their shapes, float32, covering the file. Only then are
    the tensors read and the model built. `max_bytes` defaults to `MAX_MODEL_BYTES`.

    `archs`: the architectures accepted. By default only the Transformer, which every page but "Before
    the Transformer" draws (an upload, a training job's result); `load` (files on disk: the command
    line, the shipped models) reads the recurrent model too (its config within `model.limits.RNN_BOUNDS`).
    `variants`: accept the Transformer's Table 3 options (learned positions, a smaller key size). The pages
    draw the paper's sinusoids and d_k = d_model / heads, so an upload with them is refused with a message;
    `load` reads them (the command line evaluates and translates with them).
    """
    if not all(isinstance(b, bytes | bytearray | memoryview) for b in (weights, meta_json)):
        raise CheckpointError("a checkpoint is two files of bytes (.safetensors and .json)")
    weights, meta_json = bytes(weights), bytes(meta_json)
    max_bytes = MAX_MODEL_BYTES if max_bytes is None else max_bytes
    if len(weights) + len(meta_json) > max_bytes:
        raise CheckpointError(f"checkpoint is {(len(weights) + len(meta_json)) / 1e6:.1f} MB; "
                              f"the limit is {max_bytes / 1e6:.0f} MB")
    meta = _parse_meta(meta_json)
    arch = meta.get("arch", "transformer")
    if arch not in ARCHS:
        raise CheckpointError(f"unknown arch {_show(arch)} (expected one of {', '.join(ARCHS)})")
    if arch not in archs:
        raise CheckpointError(f"this is a checkpoint of the {arch} model; here only {', '.join(archs)} "
                              "checkpoints can be used")
    cfg = _rnn_config(meta["config"]) if arch == "rnn" else _config(meta["config"])
    if not variants and isinstance(cfg, Config) and (cfg.positions != "sinusoidal" or cfg.key_size is not None):
        what = "learned position vectors" if cfg.positions != "sinusoidal" else f"a key size d_k of {cfg.key_size}"
        raise CheckpointError(f"this model uses {what} (a Table 3 variant); the pages draw the paper's own model "
                              "(sinusoids, d_k = d_model / heads). `python -m model.evaluate` scores it.")
    src_vocab, tgt_vocab = _vocab(meta, "src_vocab"), _vocab(meta, "tgt_vocab")
    if len(src_vocab) != cfg.src_vocab or len(tgt_vocab) != cfg.tgt_vocab:
        raise CheckpointError(f"vocabulary sizes ({len(src_vocab)}, {len(tgt_vocab)}) do not match the config "
                              f"({cfg.src_vocab}, {cfg.tgt_vocab})")
    _check_fields(meta, TOP_FIELDS, "", skip=("config", "src_vocab", "tgt_vocab"))
    direction = meta.get("direction", "en-fr")
    if direction not in ("en-fr", "fr-en"):
        raise CheckpointError(f"unknown direction {_show(direction)} (expected 'en-fr' or 'fr-en')")
    if "weights_sha256" in meta and hashlib.sha256(weights).hexdigest() != meta["weights_sha256"]:
        raise CheckpointError("the weights file does not belong to this JSON file (its hash differs)")
    _check_header(weights, rnn_expected_tensors(cfg) if isinstance(cfg, RNNConfig) else expected_tensors(cfg))
    try:  # the header is known to be right: this allocates exactly the tensors it lists
        state = load_safetensors_bytes(weights)
    except (SafetensorError, ValueError, RuntimeError) as e:
        raise CheckpointError(f"the weights file is not a readable safetensors file ({e})") from None
    for k, t in state.items():
        if not torch.isfinite(t).all():
            raise CheckpointError(f"tensor {k} holds non-finite or non-float values")
    model = build_model(cfg)
    try:
        model.load_state_dict(state)
    except RuntimeError as e:  # cannot happen after `_check_header`; kept so nothing from torch escapes
        raise CheckpointError(f"the weights do not fit the model ({e})") from None
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    keep = {k: v for k, v in meta.items() if k not in ("config", "src_vocab", "tgt_vocab")}
    return Bundle(model, src_vocab, tgt_vocab, direction, keep, name or str(meta.get("name", "model")))


def expected_tensors(cfg: Config) -> dict[str, tuple[int, ...]]:
    """Name -> shape of every tensor in the weights of a model with this config (all float32).

    This is the tensor list of the checkpoint format: the same names and shapes as
    ``Transformer(cfg).state_dict()`` (a test checks it), computed without building the model, so
    an upload is checked against it before anything is allocated. The sinusoidal table is a
    computed buffer, not part of the weights; a learned one is.
    """
    D = cfg.d_model
    out: dict[str, tuple[int, ...]] = {}
    qk, v = cfg.n_heads * cfg.d_k, cfg.n_heads * cfg.d_v

    def linear(prefix: str, d_in: int, d_out: int) -> None:
        out[f"{prefix}.weight"], out[f"{prefix}.bias"] = (d_out, d_in), (d_out,)

    def attention(prefix: str) -> None:
        linear(f"{prefix}.W_q", D, qk)
        linear(f"{prefix}.W_k", D, qk)
        linear(f"{prefix}.W_v", D, v)
        linear(f"{prefix}.W_o", v, D)

    def norm(prefix: str) -> None:
        out[f"{prefix}.weight"], out[f"{prefix}.bias"] = (D,), (D,)

    def ffn(prefix: str) -> None:
        linear(f"{prefix}.W_1", D, cfg.d_ff)
        linear(f"{prefix}.W_2", cfg.d_ff, D)

    out["src_embed.lut.weight"], out["tgt_embed.lut.weight"] = (cfg.src_vocab, D), (cfg.tgt_vocab, D)
    if cfg.positions == "learned":
        out["src_embed.pe"], out["tgt_embed.pe"] = (cfg.max_len, D), (cfg.max_len, D)
    for i in range(cfg.n_enc_layers):
        attention(f"encoder.{i}.self_attn")
        norm(f"encoder.{i}.add_norm1.norm")
        ffn(f"encoder.{i}.ffn")
        norm(f"encoder.{i}.add_norm2.norm")
    for i in range(cfg.n_dec_layers):
        attention(f"decoder.{i}.self_attn")
        norm(f"decoder.{i}.add_norm1.norm")
        attention(f"decoder.{i}.cross_attn")
        norm(f"decoder.{i}.add_norm2.norm")
        ffn(f"decoder.{i}.ffn")
        norm(f"decoder.{i}.add_norm3.norm")
    if cfg.norm_first:  # pre-LN ends each stack with a LayerNorm
        norm("enc_norm")
        norm("dec_norm")
    linear("generator", D, cfg.tgt_vocab)
    return out


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


def _largest_model_bytes() -> int:
    """Bytes of the largest checkpoint the bounds allow: its float32 weights, a full header, a full JSON."""
    hi = {k: int(v[1]) for k, v in MODEL_BOUNDS.items() if k != "dropout"}
    shapes = expected_tensors(Config(**hi, dropout=0.0, norm_first=True, positions="learned"))
    return 4 * sum(math.prod(s) for s in shapes.values()) + 8 + MAX_HEADER_BYTES + MAX_JSON_BYTES


MAX_MODEL_BYTES = _largest_model_bytes()  # about 58 MB (vocabularies of 8,000 at d_model 256): what from_bytes
# accepts by default, so every model the training page trains loads again
MAX_BYTES = MAX_MODEL_BYTES  # an upload (weights + JSON) may be as large: a student can re-upload any model they
# downloaded. A refused upload costs about its own size (the header is checked before anything is built), and
# Streamlit's own limit, server.maxUploadSize in .streamlit/config.toml, is set just above it.


def _show(value: object, n: int = 40) -> str:
    """A short repr for a message (a hostile value may be a megabyte long)."""
    text = repr(value)
    return text if len(text) <= n else text[: n - 5] + "…" + text[-4:]


def _name(text: str) -> str:
    """A tensor or field name for a message: as is when short and visible, else a short repr."""
    return text if len(text) <= 60 and text.isprintable() else _show(text)


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
        return f"the text {_show(value)}"
    return "a list" if isinstance(value, list) else "an object"


def _read_json(data: bytes, what: str, max_bytes: int, max_brackets: int, max_values: int) -> object:
    """Parse JSON with limits; every problem is a `CheckpointError` starting with `what`."""
    if len(data) > max_bytes:
        raise CheckpointError(f"{what} is {len(data):,} bytes; this app accepts at most {max_bytes:,}")
    brackets = data.count(b"[") + data.count(b"{")  # an upper bound on lists + objects (brackets in strings count too)
    if brackets > max_brackets:
        raise CheckpointError(f"{what} has {brackets:,} brackets ('[' or '{{'); this app accepts at most "
                              f"{max_brackets:,}")
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
            raise CheckpointError(f"{what} holds a whole number of {digits:,} digits; this app accepts at most "
                                  f"{MAX_INT_DIGITS}")
        return int(s)

    def parse_float(s: str) -> float:
        if len(s) > MAX_FLOAT_CHARS:
            raise CheckpointError(f"{what} holds a number written with {len(s):,} characters; this app accepts at "
                                  f"most {MAX_FLOAT_CHARS}")
        value = float(s)
        if not math.isfinite(value):
            raise CheckpointError(f"{what} holds the number {_show(s)}, too large for a float")
        return value

    def parse_constant(s: str) -> float:
        raise CheckpointError(f"{what} holds {s}; only finite numbers are accepted")

    def object_pairs(pairs: list[tuple[str, object]]) -> dict[str, object]:
        out: dict[str, object] = {}
        for k, v in pairs:
            if k in out:
                raise CheckpointError(f"{what} lists the key {_show(k)} twice in one object")
            out[k] = v
        return out

    decoder = json.JSONDecoder(parse_int=parse_int, parse_float=parse_float, parse_constant=parse_constant,
                               object_pairs_hook=object_pairs)
    try:
        return decoder.decode(text)
    except json.JSONDecodeError as e:
        raise CheckpointError(f"{what} cannot be read ({e})") from None
    except RecursionError:  # not reachable below MAX_JSON_BRACKETS; kept so nothing else escapes
        raise CheckpointError(f"{what} is nested too deeply") from None


def _parse_meta(meta_json: bytes) -> dict[str, Any]:
    meta = _read_json(meta_json, "the JSON file", MAX_JSON_BYTES, MAX_JSON_BRACKETS, MAX_JSON_VALUES)
    if not isinstance(meta, dict):
        raise CheckpointError(f"the JSON file must hold an object, not {_kind(meta)}")
    if meta.get("format") != FORMAT:
        raise CheckpointError(f"unknown checkpoint format {_show(meta.get('format'))} (expected {FORMAT!r})")
    for key in ("config", "src_vocab", "tgt_vocab"):
        if key not in meta:
            raise CheckpointError(f"the JSON file has no {key!r}")
    return meta


def _number_text(value: float) -> str:
    return f"{value:,}" if isinstance(value, int) else f"{value:g}"


def _config(c: object) -> Config:
    """The model's `Config`, once every field has its type and lies within `MODEL_BOUNDS`."""
    if not isinstance(c, dict):
        raise CheckpointError(f"'config' must be an object, not {_kind(c)}")
    for key in c:
        if key not in MODEL_BOUNDS and key not in ("norm_first", "positions", "key_size"):
            raise CheckpointError(f"the config has an unknown field {_show(key)}")
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
                raise CheckpointError(f"key_size must be null or a whole number from 1 to {MODEL_BOUNDS['d_model'][1]:g}, not {_kind(value)}")  # noqa: E501
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


def _rnn_config(c: object) -> RNNConfig:
    """The recurrent model's `RNNConfig`: known fields only; `RNNConfig` checks types and `RNN_BOUNDS`."""
    if not isinstance(c, dict):
        raise CheckpointError(f"'config' must be an object, not {_kind(c)}")
    unknown = sorted(set(c) - {f.name for f in fields(RNNConfig)})
    if unknown:
        raise CheckpointError(f"the config has an unknown field {_show(unknown[0])}")
    try:
        return RNNConfig(**c)
    except (TypeError, ValueError) as e:
        raise CheckpointError(f"the JSON's config is not a valid RNN configuration: {_show(str(e), 400)}") from None


def _vocab(meta: dict[str, Any], key: str) -> Vocab:
    """A vocabulary: ``{"itos": [...]}``, the special tokens first, unique printable tokens of bounded length."""
    d = meta[key]
    bad = f"{key} is not a valid vocabulary"
    if not isinstance(d, dict) or set(d) != {"itos"}:
        raise CheckpointError(f'{bad}: it must be an object {{"itos": [token, ...]}}, not '
                              + (f"an object with the fields {_show(sorted(d))}" if isinstance(d, dict) else _kind(d)))
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
            raise CheckpointError(f"{bad}: token {i} has {len(t):,} characters; this app accepts 1 to "
                                  f"{MAX_TOKEN_CHARS}")
        if not t.isprintable() or " " in t:  # the tokenizer never makes spaces or invisible characters
            raise CheckpointError(f"{bad}: token {i} ({_show(t)}) holds a space or an invisible character")
    if len(set(itos)) != len(itos):
        seen: set[str] = set()
        for t in itos:
            if t in seen:
                raise CheckpointError(f"{bad}: it lists {_show(t)} twice")
            seen.add(t)
    return Vocab(itos)


# Metadata: every field the app writes has one type. A field it does not know may hold one plain value
# (text, number, true/false or null), never a list or an object, so its size and shape stay bounded.
TEXT, INT, INT_OR_NULL, NUMBER, NUMBER_OR_NULL, BOOL, SHA, SHA_OR_NULL = (
    "text", "whole number", "whole number or null", "number", "number or null", "true or false", "sha256",
    "sha256 or null")
Spec = dict[str, "str | Spec"]  # field -> its type, or the fields of a nested object
TRAINING_FIELDS: Spec = {  # `TrainConfig` fields and what `Trainer.bundle` adds
    "direction": TEXT, "d_model": INT, "n_heads": INT, "n_layers": INT, "d_ff": INT, "dropout": NUMBER,
    "batch_size": INT, "steps": INT, "warmup": INT, "lr_scale": NUMBER, "label_smoothing": NUMBER,
    "clip_grad_norm": NUMBER_OR_NULL, "seed": INT, "look_ahead_mask": BOOL, "eval_every": INT,
    "max_seconds": NUMBER_OR_NULL, "max_len": INT, "steps_done": INT, "train_seconds": NUMBER, "n_train": INT,
    "n_heldout": INT, "torch": TEXT, "arch": TEXT, "cell": TEXT, "attention": TEXT, "positions": TEXT,
    "key_size": INT_OR_NULL, "scale_scores": BOOL,
}
METRICS_FIELDS: Spec = {  # `EvalEvent.metrics` plus the CLI's final losses; NaN is written as null
    "step": INT, "n": INT, "exact_match": NUMBER_OR_NULL, "bleu": NUMBER_OR_NULL, "coref_accuracy": NUMBER_OR_NULL,
    "heldout_loss": NUMBER_OR_NULL, "heldout_cross_entropy": NUMBER_OR_NULL, "final_train_loss": NUMBER_OR_NULL,
    "final_train_cross_entropy": NUMBER_OR_NULL,
}
TOP_FIELDS: Spec = {"format": TEXT, "name": TEXT, "direction": TEXT, "weights_sha256": SHA, "data_sha256": SHA_OR_NULL,
                    "training": TRAINING_FIELDS, "metrics": METRICS_FIELDS, "arch": TEXT}


def _check_fields(d: dict[str, Any], spec: Spec, path: str, skip: tuple[str, ...] = ()) -> None:
    """Every field of `d` has the type `spec` gives it (a nested spec: an object of those fields)."""
    for key, value in d.items():
        if key in skip:
            continue
        field_name = path + key
        if len(key) > MAX_KEY_CHARS or not key.isprintable():
            raise CheckpointError(f"the JSON file has a field named {_show(key)}: field names are at most "
                                  f"{MAX_KEY_CHARS} visible characters")
        kind = spec.get(key)
        if isinstance(kind, dict):
            if not isinstance(value, dict):
                raise CheckpointError(f"{field_name} must be an object, not {_kind(value)}")
            _check_fields(value, kind, field_name + ".")
        elif not _is(value, kind):
            expected = kind or "text, a number, true/false or null"
            raise CheckpointError(f"{field_name} must be {_article(expected)}, not {_kind(value)}")
        if isinstance(value, str) and len(value) > MAX_TEXT_CHARS:
            raise CheckpointError(f"{field_name} has {len(value):,} characters; this app accepts at most "
                                  f"{MAX_TEXT_CHARS}")
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


def _check_header(weights: bytes, expected: dict[str, tuple[int, ...]]) -> None:
    """The safetensors header, read by hand: exactly the expected tensors, float32, their data filling the file.

    Layout: 8 bytes little-endian header length n, n bytes of JSON ``{name: {"dtype", "shape",
    "data_offsets": [begin, end]}, "__metadata__": {...}}``, then the data (offsets count from there).
    """
    unreadable = "the weights file is not a readable safetensors file"
    if len(weights) < 8:
        raise CheckpointError(f"{unreadable} (it has only {len(weights)} bytes)")
    n = int.from_bytes(weights[:8], "little")
    if n > MAX_HEADER_BYTES:
        raise CheckpointError(f"{unreadable} (its header claims {n:,} bytes; this app accepts at most "
                              f"{MAX_HEADER_BYTES:,})")
    if 8 + n > len(weights):
        raise CheckpointError(f"{unreadable} (its header claims {n:,} bytes; the file has {len(weights) - 8:,} "
                              f"after the length)")
    try:
        header = _read_json(weights[8:8 + n], "its header", MAX_HEADER_BYTES, 3 * len(expected) + 8,
                            16 * len(expected) + 64)  # per tensor: 3 brackets, 4 colons, 5 commas
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
        raise CheckpointError("the weights do not match the config: "
                              + (f"missing {', '.join(missing[:5])}" if missing else "")
                              + ("; " if missing and extra else "")
                              + (f"unexpected {', '.join(_name(x) for x in extra[:5])}" if extra else ""))
    spans = []
    for k, shape in expected.items():
        entry = header[k]
        if not isinstance(entry, dict) or set(entry) != {"dtype", "shape", "data_offsets"}:
            raise CheckpointError(f"{unreadable} (the entry of tensor {k} must have exactly dtype, shape and "
                                  "data_offsets)")
        if entry["dtype"] != "F32":
            raise CheckpointError(f"tensor {k} is stored as {_show(entry['dtype'])}; this app needs F32 "
                                  "(32-bit floats)")
        if entry["shape"] != list(shape) or not all(type(x) is int for x in entry["shape"]):
            got = entry["shape"]
            got = str(tuple(got)) if isinstance(got, list) and len(got) <= 8 else _show(got)
            raise CheckpointError(f"tensor {k} has shape {got}, the config needs {tuple(shape)}")
        offsets = entry["data_offsets"]
        if (not isinstance(offsets, list) or len(offsets) != 2 or not all(type(x) is int for x in offsets)
                or offsets[1] - offsets[0] != 4 * math.prod(shape)):
            raise CheckpointError(f"{unreadable} (tensor {k}'s data_offsets {_show(offsets)} do not span the "
                                  f"{4 * math.prod(shape):,} bytes of its shape)")
        spans.append((offsets[0], offsets[1], k))
    end = 0
    for begin, stop, k in sorted(spans):
        if begin != end:
            raise CheckpointError(f"{unreadable} (the data of tensor {k} begins at byte {begin:,}, not {end:,}: "
                                  "tensors overlap or leave a gap)")
        end = stop
    if end != len(weights) - 8 - n:
        raise CheckpointError(f"{unreadable} (its tensors need {end:,} bytes of data; the file holds "
                              f"{len(weights) - 8 - n:,})")
