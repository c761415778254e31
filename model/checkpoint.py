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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load as load_safetensors_bytes
from safetensors.torch import save as save_safetensors_bytes

from model.checkpoint_checks import (
    FORMAT,
    MAX_HEADER_BYTES,
    MAX_JSON_BYTES,
    TOP_FIELDS,
    check_fields,
    check_header,
    parse_meta,
    read_vocab,
    rnn_config,
    show,
    transformer_config,
)
from model.checkpoint_checks import (
    CheckpointError as CheckpointError,  # (every caller's: the checks raise it, the format says it)
)
from model.limits import MODEL_BOUNDS
from model.rnn import RNNConfig, RNNSeq2Seq
from model.rnn import expected_tensors as rnn_expected_tensors
from model.transformer import Config, Transformer
from model.vocab import Vocab

ASSETS = Path(__file__).resolve().parents[1] / "assets"
# The trained models the app ships, by name (the one list of their names): "base", the model the app opens with, and
# "no_mask", the same recipe trained without the look-ahead mask.
SHIPPED_MODELS = {name: ASSETS / "checkpoints" / name for name in ("base", "no_mask")}
SHIPPED = SHIPPED_MODELS["base"]
SHIPPED_NO_MASK = SHIPPED_MODELS["no_mask"]
ARCHS = ("transformer", "rnn")  # the JSON's "arch" and `TrainConfig.arch`: the Transformer, or model/rnn.py's RNN


def build_model(cfg: Config | RNNConfig) -> Transformer | RNNSeq2Seq:
    """The network for a config: `RNNSeq2Seq` for an `RNNConfig`, else the `Transformer`."""
    return RNNSeq2Seq(cfg) if isinstance(cfg, RNNConfig) else Transformer(cfg)


def count_parameters(cfg: Config | RNNConfig) -> int:
    """Learned numbers of this config's model, counted from its checkpoint's tensor list without building it."""
    shapes = rnn_expected_tensors(cfg) if isinstance(cfg, RNNConfig) else expected_tensors(cfg)
    return sum(math.prod(shape) for shape in shapes.values())


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


def from_bytes(
    weights: bytes,
    meta_json: bytes,
    name: str | None = None,
    max_bytes: int | None = None,
    archs: tuple[str, ...] = ("transformer",),
    variants: bool = False,
) -> Bundle:
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
        raise CheckpointError(
            f"checkpoint is {(len(weights) + len(meta_json)) / 1e6:.1f} MB; the limit is {max_bytes / 1e6:.0f} MB"
        )
    meta = parse_meta(meta_json)
    arch = meta.get("arch", "transformer")
    if arch not in ARCHS:
        raise CheckpointError(f"unknown arch {show(arch)} (expected one of {', '.join(ARCHS)})")
    if arch not in archs:
        raise CheckpointError(
            f"this is a checkpoint of the {arch} model; here only {', '.join(archs)} checkpoints can be used"
        )
    cfg = rnn_config(meta["config"]) if arch == "rnn" else transformer_config(meta["config"])
    if not variants and isinstance(cfg, Config) and (cfg.positions != "sinusoidal" or cfg.key_size is not None):
        what = "learned position vectors" if cfg.positions != "sinusoidal" else f"a key size d_k of {cfg.key_size}"
        raise CheckpointError(
            f"this model uses {what} (a Table 3 variant); the pages draw the paper's own model "
            "(sinusoids, d_k = d_model / heads). `python -m model.evaluate` scores it."
        )
    src_vocab, tgt_vocab = read_vocab(meta, "src_vocab"), read_vocab(meta, "tgt_vocab")
    if len(src_vocab) != cfg.src_vocab or len(tgt_vocab) != cfg.tgt_vocab:
        raise CheckpointError(
            f"vocabulary sizes ({len(src_vocab)}, {len(tgt_vocab)}) do not match the config "
            f"({cfg.src_vocab}, {cfg.tgt_vocab})"
        )
    check_fields(meta, TOP_FIELDS, "", skip=("config", "src_vocab", "tgt_vocab"))
    direction = meta.get("direction", "en-fr")
    if direction not in ("en-fr", "fr-en"):
        raise CheckpointError(f"unknown direction {show(direction)} (expected 'en-fr' or 'fr-en')")
    if "weights_sha256" in meta and hashlib.sha256(weights).hexdigest() != meta["weights_sha256"]:
        raise CheckpointError("the weights file does not belong to this JSON file (its hash differs)")
    check_header(weights, rnn_expected_tensors(cfg) if isinstance(cfg, RNNConfig) else expected_tensors(cfg))
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
    except RuntimeError as e:  # cannot happen after `check_header`; kept so nothing from torch escapes
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


# --- Limits of the files (the rest: model/checkpoint_checks.py) ---------------------------------------


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
