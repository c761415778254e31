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
    "n_layers": "layers",
    "n_heads": "heads",
    "d_model": "d_model",
    "d_ff": "d_ff",
    "batch_size": "batch size",
    "steps": "steps",
    "warmup": "warm-up steps",
    "lr_scale": "learning-rate scale",
    "dropout": "dropout",
    "label_smoothing": "label smoothing",
    "seed": "seed",
    "eval_every": "evaluate every",
}
MAX_VOCAB = 8_000  # words per side: an uploaded corpus or model with a larger vocabulary is refused

# --- Models: what a checkpoint (an upload, a file, a finished training job) may hold ------------------
# `model.checkpoint` checks every config against these before it allocates anything. Sizes are the
# training page's own bounds, so every model the page can train loads again, and nothing larger does.
MODEL_BOUNDS: dict[str, tuple[float, float]] = {  # `Config` fields
    "src_vocab": (4, MAX_VOCAB),  # at least the 4 special tokens <pad> <bos> <eos> <unk>
    "tgt_vocab": (4, MAX_VOCAB),
    "d_model": BOUNDS["d_model"],
    "n_heads": BOUNDS["n_heads"],
    "n_enc_layers": BOUNDS["n_layers"],
    "n_dec_layers": BOUNDS["n_layers"],
    "d_ff": BOUNDS["d_ff"],
    "dropout": BOUNDS["dropout"],
    # The positional table is computed, not stored in the weights, so nothing in the weights pins
    # max_len: the bound is what keeps it safe. 128 is twice what the training page trains with (64)
    # and four times the longest sentence it accepts (30 words + <bos>/<eos>). The pages truncate
    # input to max_len - 1 tokens and trace [heads, T, T] tensors for every attention, so a traced run
    # grows with max_len²: at 128 and the largest model it records about 30 MB, at 512 it would be
    # about 500 MB per student. 8: the positional page's default position (3) and offset (2) need at
    # least 4 rows, and a sentence needs a few more.
    "max_len": (8, 128),
    "pad_id": (0, 0),  # every vocabulary starts with <pad>, so padding is id 0 (model/vocab.py)
}
MODEL_LABELS = {  # what each `Config` field means, for messages
    "src_vocab": "source vocabulary size",
    "tgt_vocab": "target vocabulary size",
    "n_heads": "heads",
    "n_enc_layers": "encoder layers",
    "n_dec_layers": "decoder layers",
    "max_len": "positions",
    "pad_id": "padding id",
}
MAX_TOKEN_CHARS = 50  # characters per vocabulary entry ("anticonstitutionnellement" has 25)
MAX_TEXT_CHARS = 200  # characters in any other string of a checkpoint's JSON (name, version, ...)

# The recurrent model of model/rnn.py ("Before the Transformer"): `RNNConfig` fields. Sizes as the
# Transformer's d_model, vocabularies and positions as `MODEL_BOUNDS`.
RNN_BOUNDS: dict[str, tuple[float, float]] = {
    "src_vocab": MODEL_BOUNDS["src_vocab"],
    "tgt_vocab": MODEL_BOUNDS["tgt_vocab"],
    "d_emb": BOUNDS["d_model"],
    "hidden": BOUNDS["d_model"],
    "d_attn": BOUNDS["d_model"],
    "dropout": BOUNDS["dropout"],
    "max_len": MODEL_BOUNDS["max_len"],
    "pad_id": MODEL_BOUNDS["pad_id"],
}
