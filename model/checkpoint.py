"""Checkpoints: safetensors weights plus a JSON file. Loading never unpickles.

A checkpoint named ``X`` is two files side by side:

- ``X.safetensors``: the model's state dict (tensors only).
- ``X.json``: ``format``, ``config`` (the `Config` fields), ``direction`` ("en-fr" / "fr-en"),
  ``src_vocab`` / ``tgt_vocab`` (token lists), ``training`` (recipe and run metadata), ``metrics``
  (held-out figures), ``data_sha256`` (hash of the training data file), ``weights_sha256``.

Every problem (missing file, corrupt bytes, wrong format, vocabulary/config mismatch, missing or
mis-shaped tensors, non-finite weights, too large) raises `CheckpointError` with a message meant for
a person, never a traceback from deep inside torch.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load as load_safetensors_bytes
from safetensors.torch import save as save_safetensors_bytes

from model.transformer import Config, Transformer
from model.vocab import SPECIALS, Vocab

FORMAT = "glass-transformer/1"
MAX_BYTES = 20 * 1024 * 1024  # an uploaded checkpoint larger than this is refused
ASSETS = Path(__file__).resolve().parents[1] / "assets"
SHIPPED = ASSETS / "checkpoints" / "base"  # the trained model the app opens with
SHIPPED_NO_MASK = ASSETS / "checkpoints" / "no_mask"  # same recipe, trained without the look-ahead mask


class CheckpointError(ValueError):
    """A checkpoint that cannot be used; the message says why."""


@dataclass
class Bundle:
    """A model ready to use: weights in eval mode, its config, vocabularies and metadata.

    Treat `model` as read-only: the shipped bundle is shared by every session of the app.
    """

    model: Transformer
    src_vocab: Vocab
    tgt_vocab: Vocab
    direction: str = "en-fr"
    meta: dict = field(default_factory=dict)
    name: str = "model"

    @property
    def config(self) -> Config:
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
        **bundle.meta,
        "format": FORMAT,
        "name": bundle.name,
        "config": bundle.config.to_dict(),
        "direction": bundle.direction,
        "src_vocab": bundle.src_vocab.to_dict(),
        "tgt_vocab": bundle.tgt_vocab.to_dict(),
        "weights_sha256": hashlib.sha256(weights).hexdigest(),
    }
    return weights, json.dumps(meta, ensure_ascii=False, indent=1).encode("utf-8")


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
    return from_bytes(w.read_bytes(), j.read_bytes(), name=stem.name)


def from_bytes(weights: bytes, meta_json: bytes, name: str | None = None, max_bytes: int = MAX_BYTES) -> Bundle:
    """Validate and load a checkpoint given as bytes (an upload, or files read from disk)."""
    if len(weights) + len(meta_json) > max_bytes:
        raise CheckpointError(f"checkpoint is {(len(weights) + len(meta_json)) / 1e6:.1f} MB; "
                              f"the limit is {max_bytes / 1e6:.0f} MB")
    meta = _parse_meta(meta_json)
    try:
        cfg = Config(**meta["config"])
    except (TypeError, ValueError) as e:
        raise CheckpointError(f"the JSON's config is not a valid model configuration: {e}") from None
    src_vocab, tgt_vocab = _vocab(meta, "src_vocab"), _vocab(meta, "tgt_vocab")
    if len(src_vocab) != cfg.src_vocab or len(tgt_vocab) != cfg.tgt_vocab:
        raise CheckpointError(f"vocabulary sizes ({len(src_vocab)}, {len(tgt_vocab)}) do not match the config "
                              f"({cfg.src_vocab}, {cfg.tgt_vocab})")
    direction = meta.get("direction", "en-fr")
    if direction not in ("en-fr", "fr-en"):
        raise CheckpointError(f"unknown direction {direction!r} (expected 'en-fr' or 'fr-en')")
    if "weights_sha256" in meta and hashlib.sha256(weights).hexdigest() != meta["weights_sha256"]:
        raise CheckpointError("the weights file does not belong to this JSON file (its hash differs)")
    try:
        state = load_safetensors_bytes(weights)
    except (SafetensorError, ValueError, RuntimeError) as e:
        raise CheckpointError(f"the weights file is not a readable safetensors file ({e})") from None
    model = Transformer(cfg)
    expected = model.state_dict()
    missing = sorted(set(expected) - set(state))
    extra = sorted(set(state) - set(expected))
    if missing or extra:
        raise CheckpointError("the weights do not match the config: "
                              + (f"missing {', '.join(missing[:5])}" if missing else "")
                              + ("; " if missing and extra else "")
                              + (f"unexpected {', '.join(extra[:5])}" if extra else ""))
    for k, t in state.items():
        if t.shape != expected[k].shape:
            raise CheckpointError(f"tensor {k} has shape {tuple(t.shape)}, the config needs {tuple(expected[k].shape)}")
        if not t.is_floating_point() or not torch.isfinite(t).all():
            raise CheckpointError(f"tensor {k} holds non-finite or non-float values")
    model.load_state_dict(state)
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    keep = {k: v for k, v in meta.items() if k not in ("config", "src_vocab", "tgt_vocab")}
    return Bundle(model, src_vocab, tgt_vocab, direction, keep, name or str(meta.get("name", "model")))


def _parse_meta(meta_json: bytes) -> dict:
    try:
        meta = json.loads(meta_json.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CheckpointError(f"the JSON file cannot be read ({e})") from None
    if not isinstance(meta, dict):
        raise CheckpointError("the JSON file must hold an object")
    if meta.get("format") != FORMAT:
        raise CheckpointError(f"unknown checkpoint format {meta.get('format')!r} (expected {FORMAT!r})")
    for key in ("config", "src_vocab", "tgt_vocab"):
        if key not in meta:
            raise CheckpointError(f"the JSON file has no {key!r}")
    if not isinstance(meta["config"], dict):
        raise CheckpointError("'config' must be an object")
    return meta


def _vocab(meta: dict, key: str) -> Vocab:
    try:
        vocab = Vocab.from_dict(meta[key])
    except (TypeError, ValueError, KeyError, AttributeError) as e:
        raise CheckpointError(f"{key} is not a valid vocabulary ({e})") from None
    if tuple(vocab.itos[: len(SPECIALS)]) != SPECIALS:
        raise CheckpointError(f"{key} must start with the special tokens {', '.join(SPECIALS)}")
    return vocab
