"""The bounds every model and training run in the app must fit: one source for the training page,
the checkpoint loader (uploads) and the memory estimate.

Each bound caps time or memory on a shared classroom server. They are inclusive.
"""

from __future__ import annotations

# Training settings, as the training page names them (`TrainConfig` fields).
BOUNDS: dict[str, tuple[float, float]] = {
    "n_layers": (1, 4),
    "n_heads": (1, 8),
    "d_model": (8, 256),
    "d_ff": (8, 1024),
    "batch_size": (1, 128),
    "steps": (1, 5000),
    "warmup": (1, 5000),
    "lr_scale": (0.001, 1e6),  # far above any useful value on purpose: 1e6 shows what divergence looks like
    "dropout": (0.0, 0.5),
    "label_smoothing": (0.0, 0.5),
    "seed": (0, 2**31 - 1),
    "eval_every": (0, 5000),
}
LABELS = {  # how the page names each setting (used in messages)
    "n_layers": "layers", "n_heads": "heads", "d_model": "d_model", "d_ff": "d_ff", "batch_size": "batch size",
    "steps": "steps", "warmup": "warm-up steps", "lr_scale": "learning-rate scale", "dropout": "dropout",
    "label_smoothing": "label smoothing", "seed": "seed", "eval_every": "evaluate every",
}
MAX_VOCAB = 8_000  # words per side: an uploaded corpus or model with a larger vocabulary is refused
