"""The settings of one training run: defaults, validation and the memory estimate.

The training page lets anyone on a shared classroom server choose a model and a recipe, so every run
is checked before it starts:

- `make_config` turns the page's settings into a `TrainConfig` or raises `SettingsError` naming
  every problem (the bounds of `model.limits.BOUNDS`, then the model's own checks);
- `profile` measures a data set (sizes, vocabularies, longest sentence); an uploaded corpus with a
  vocabulary above `MAX_VOCAB` is refused (`check_corpus_profile`);
- `estimate_memory` computes what a run needs (weights, gradients, Adam's moments and the trainer's
  copies; the larger of the activations kept for the backward pass of the largest batch and the
  held-out evaluation's batches of 256 sentences, whose [256, T, V] logits dominate with a large
  uploaded vocabulary; the attention snapshots of the probe sentences; the corpus itself);
  `plan_run` refuses a run above `MAX_JOB_BYTES`. `worst_case` is the estimate at the largest
  allowed settings on the toy set, which must fit that limit. The worker process is held to the
  estimate by the operating system (`training.run_process.limit_memory`).
- `checkpoint_bytes` is an upper bound of the size of the checkpoint a run produces (exact parameter
  count x 4 bytes, the safetensors header, the JSON with both vocabularies); `plan_run` refuses a run
  whose model could not be saved and loaded again (`model.checkpoint.MAX_BYTES`), before it starts.

Pure Python and torch: no Streamlit here.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from model import checkpoint
from model.data import DATASET_PATH, Pair, build_vocabs, data_hash, langs, load_dataset
from model.limits import BOUNDS, LABELS, MAX_VOCAB
from model.probes import MAX_PROBE_TOKENS, MAX_PROBES, MAX_SNAPSHOTS, default_probes
from model.train import TrainConfig
from model.vocab import Vocab, tokenize

# The page's defaults: the run one click starts. Why these values: bench/README.md, "The training page's default run".
DEFAULTS = TrainConfig(
    d_model=64,
    n_heads=4,
    n_layers=1,
    d_ff=256,
    dropout=0.0,
    batch_size=96,
    steps=500,
    warmup=100,
    lr_scale=0.35,
    label_smoothing=0.1,
    seed=0,
    eval_every=50,
)
DEFAULT_PROBE_EVERY = 25  # steps between attention snapshots of the probe sentences
MAX_JOB_BYTES = 1_000_000_000  # a run whose estimate is above this is refused
EVAL_BATCH = 256  # sentences per batch of the held-out evaluation (model.train / model.evaluate)
META_ALLOWANCE = 16_384  # bytes of a checkpoint's JSON besides the vocabularies (recipe, metrics, hashes)


class SettingsError(ValueError):
    """Settings that cannot train; the message lists every problem, for the user."""


def make_config(settings: Mapping[str, Any]) -> TrainConfig:
    """A `TrainConfig` from the page's settings, or `SettingsError` naming every problem.

    Checks the bounds of `BOUNDS`, then everything `TrainConfig` and the model's `Config` check
    (d_model divisible by the number of heads, even d_model, ...).
    """
    problems = []
    for name, value in settings.items():
        if name in BOUNDS and isinstance(value, (int, float)) and not isinstance(value, bool):
            lo, hi = BOUNDS[name]
            if not lo <= value <= hi:
                problems.append(f"{LABELS[name]} must be between {lo:g} and {hi:g} (got {value:g})")
    if problems:
        raise SettingsError("These settings cannot train: " + "; ".join(problems) + ".")
    try:
        tcfg = TrainConfig(**settings)
        tcfg.model_config(src_vocab=8, tgt_vocab=8)  # the model's own checks (sizes, heads)
    except TypeError as e:
        raise SettingsError(f"Unknown setting: {e}") from None
    except ValueError as e:
        msg = str(e).replace("Invalid training config: ", "").replace("Invalid Transformer config: ", "")
        raise SettingsError(f"These settings cannot train: {msg}.") from None
    return tcfg


# --- Data --------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=4)
def toy_data(direction: str) -> dict[str, list[Pair]]:
    """The shipped toy set in `direction` (read once per process, never modified)."""
    return load_dataset(DATASET_PATH, direction)


@functools.lru_cache(maxsize=1)
def toy_sha256() -> str:
    return data_hash(DATASET_PATH)


@dataclass(frozen=True)
class DataProfile:
    """What memory and the page need to know about a data set."""

    n_train: int
    n_heldout: int
    src_vocab: int
    tgt_vocab: int
    longest: int  # tokens of the longest training sequence, with <bos>/<eos>
    vocab_json_bytes: int = 0  # both vocabularies as a checkpoint's JSON writes them
    heldout_longest: int = 0  # tokens of the longest held-out sequence, with <bos>/<eos>
    tokens: int = 0  # tokens of every pair, both sides (the corpus in the worker's memory)
    chars: int = 0  # characters of every pair, both sides


def _vocab_json_bytes(vocab: Vocab) -> int:
    """Bytes of a vocabulary in a checkpoint's JSON (indent 1, nested one level deeper: +1 per token)."""
    return len(json.dumps(vocab.to_dict(), ensure_ascii=False, indent=1).encode("utf-8")) + 2 * len(vocab) + 16


def profile(data: dict[str, list[Pair]], direction: str) -> DataProfile:
    src_lang, tgt_lang = langs(direction)
    train, heldout = data["train"], list(data.get("heldout") or [])

    def length(p: Pair) -> tuple[int, int]:
        return len(tokenize(p.src, src_lang)) + 1, len(tokenize(p.tgt, tgt_lang)) + 2

    src_vocab, tgt_vocab = build_vocabs(train, direction)
    lengths = [length(p) for p in train]
    held = [length(p) for p in heldout]
    longest = max(max(s, t) for s, t in lengths)
    return DataProfile(
        len(train),
        len(heldout),
        len(src_vocab),
        len(tgt_vocab),
        longest,
        _vocab_json_bytes(src_vocab) + _vocab_json_bytes(tgt_vocab),
        max((max(s, t) for s, t in held), default=0),
        sum(s + t for s, t in lengths) + sum(s + t for s, t in held),
        sum(len(p.src) + len(p.tgt) for p in (*train, *heldout)),
    )


@functools.lru_cache(maxsize=4)
def toy_profile(direction: str) -> DataProfile:
    return profile(toy_data(direction), direction)


def check_corpus_profile(p: DataProfile) -> None:
    """Refuse an uploaded corpus whose vocabulary would make the model too large."""
    if max(p.src_vocab, p.tgt_vocab) > MAX_VOCAB:
        raise SettingsError(
            f"The corpus has {p.src_vocab:,} source and {p.tgt_vocab:,} target words; the limit is "
            f"{MAX_VOCAB:,} per side (the embeddings and the output layer grow with it). "
            f"Use fewer or simpler sentences."
        )


# --- Memory ------------------------------------------------------------------------------------


def parameters(tcfg: TrainConfig, data: DataProfile) -> int:
    """Parameters of the model these settings train on this data (exact, without building it)."""
    return checkpoint.count_parameters(tcfg.model_config(data.src_vocab, data.tgt_vocab))


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes one training job needs, by part (float32 everywhere)."""

    parameters: int
    state_bytes: int  # weights + gradients + Adam's 2 moments + the trainer's last-good copy + the result copy
    activation_bytes: int  # tensors kept for the backward pass of the largest batch, x1.5 for backward's peak
    snapshot_bytes: int  # attention snapshots of the probes (upper bound)
    eval_bytes: int = 0  # the held-out evaluation's largest batch (never at the same time as a training step)
    data_bytes: int = 0  # the corpus as Python objects in the worker (pairs, tokens, encoded ids)

    @property
    def peak_work_bytes(self) -> int:
        """The larger of a training step's activations and an evaluation batch: they never coexist."""
        return max(self.activation_bytes, self.eval_bytes)

    @property
    def total(self) -> int:
        return self.state_bytes + self.peak_work_bytes + self.snapshot_bytes + self.data_bytes


def estimate_memory(
    tcfg: TrainConfig,
    data: DataProfile,
    n_probes: int = 2,
    n_snapshots: int = MAX_SNAPSHOTS + 2,
    probe_tokens: int = MAX_PROBE_TOKENS,
) -> MemoryEstimate:
    """Estimated memory of one job with these settings on this data.

    The activation term is a fit of the bytes autograd keeps for backward in this model, measured
    with `torch.autograd.graph.saved_tensors_hooks` over random configurations with dropout on (within
    about 15%; `tests/test_jobs.py` checks it against a measurement). Without dropout its masks are not
    kept and the estimate is an upper bound (about 1.7-2x). With B = batch size, T = the longest
    sequence, L = layers per stack, D, F = d_ff, H = heads, V = target vocabulary, in floats::

        2 B T V  +  30 B T L D  +  6 B T L F  +  6 B T^2 L H  +  6 L D^2  +  B T D

    The evaluation (no gradients) runs the held-out pairs in batches of E = min(256, held-out pairs)
    of up to T' tokens: its peak is the [E, T', V] logits and the cross-entropy's log-softmax of the
    same size, plus the one layer's tensors alive at a time; measured at 2.1 x 4 E T' V bytes over the
    weights for an 8,000-word corpus, counted here as 2.5x, plus 4 E T' (4 D + F + H T').
    The corpus: about 120 bytes per token (tokens and ids as Python objects) and 4 per character.
    """
    P = parameters(tcfg, data)
    B, T, L, D, F, H, V = (
        tcfg.batch_size,
        data.longest,
        tcfg.n_layers,
        tcfg.d_model,
        tcfg.d_ff,
        tcfg.n_heads,
        data.tgt_vocab,
    )
    saved = 2 * B * T * V + 30 * B * T * L * D + 6 * B * T * L * F + 6 * B * T * T * L * H + 6 * L * D * D + B * T * D
    t = probe_tokens + 1
    snap = n_snapshots * n_probes * 4 * L * H * (t * t * 3)
    E, Te = min(EVAL_BATCH, data.n_heldout), max(data.heldout_longest, 0)
    evaluation = int(2.5 * 4 * E * Te * V) + 4 * E * Te * (4 * D + F + H * Te)
    corpus = 120 * data.tokens + 4 * data.chars
    return MemoryEstimate(P, 6 * 4 * P, int(1.5 * 4 * saved), snap, evaluation, corpus)


def checkpoint_bytes(tcfg: TrainConfig, data: DataProfile) -> int:
    """An upper bound of the bytes of the checkpoint (both files) a run with these settings saves:
    4 bytes per parameter (exact count), the safetensors header (about 120 bytes per tensor, the
    names included), the JSON's vocabularies (exact) and `META_ALLOWANCE` for the rest of the JSON."""
    P = parameters(tcfg, data)
    tensors = 8 + tcfg.n_layers * (16 + 28)  # embeddings (+ learned positions), generator, final norms; per layer
    return 4 * P + 160 * tensors + 1024 + data.vocab_json_bytes + META_ALLOWANCE


def check_checkpoint_size(tcfg: TrainConfig, data: DataProfile) -> None:
    """Refuse settings whose trained model would be larger than a checkpoint may be."""
    size = checkpoint_bytes(tcfg, data)
    if size > checkpoint.MAX_BYTES:
        P = parameters(tcfg, data)
        raise SettingsError(
            f"This model would have {P:,} parameters: its checkpoint would be about {size / 2**20:,.1f} MB, above "
            f"the {checkpoint.MAX_BYTES / 2**20:,.0f} MB a model may have in this app (so it could not be saved and "
            "loaded again). Use a smaller d_model or d_ff, fewer layers"
            + (", or a corpus with fewer words." if data.src_vocab + data.tgt_vocab > 2000 else ".")
        )


def worst_case(direction: str = "en-fr") -> MemoryEstimate:
    """The estimate at the largest allowed settings on the toy set."""

    def top(name: str) -> int:
        return int(BOUNDS[name][1])

    big = dataclasses.replace(
        DEFAULTS,
        n_layers=top("n_layers"),
        n_heads=top("n_heads"),
        d_model=top("d_model"),
        d_ff=top("d_ff"),
        batch_size=top("batch_size"),
    )
    return estimate_memory(big, toy_profile(direction), n_probes=MAX_PROBES)


def plan_run(
    settings: Mapping[str, Any], probes: Sequence[str] | None = None, data: dict[str, list[Pair]] | None = None
) -> tuple[TrainConfig, list[str], MemoryEstimate]:
    """Validate everything a run needs (settings, data, memory): its config, its probe sentences (cleaned,
    at most `MAX_PROBES`) and its memory estimate; `SettingsError` if it cannot run."""
    tcfg = make_config(settings)
    prof = profile(data, tcfg.direction) if data is not None else toy_profile(tcfg.direction)
    if data is not None:
        check_corpus_profile(prof)
    if prof.longest > tcfg.max_len:
        raise SettingsError(f"The longest sentence has {prof.longest} tokens; the model takes at most {tcfg.max_len}.")
    check_checkpoint_size(tcfg, prof)
    probes = [
        p.strip() for p in (probes if probes is not None else default_probes(tcfg.direction, data)) if p and p.strip()
    ][:MAX_PROBES]
    mem = estimate_memory(tcfg, prof, n_probes=max(1, len(probes)))
    check_memory(mem)
    return tcfg, probes, mem


def check_memory(mem: MemoryEstimate) -> None:
    """Refuse a run whose memory estimate is above `MAX_JOB_BYTES`."""
    if mem.total > MAX_JOB_BYTES:
        raise SettingsError(
            f"This run would need about {mem.total / 1e6:,.0f} MB of memory; the limit per job is "
            f"{MAX_JOB_BYTES / 1e6:,.0f} MB. Use a smaller batch, d_model, d_ff or fewer layers"
            + (", or a corpus with fewer words." if mem.eval_bytes > mem.activation_bytes else ".")
        )
