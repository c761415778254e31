"""The settings of one training run: defaults, validation and the memory estimate.

The training page lets anyone on a shared classroom server choose a model and a recipe, so every run
is checked before it starts:

- `make_config` turns the page's settings into a `TrainConfig` or raises `SettingsError` naming
  every problem (the bounds of `model.limits.BOUNDS`, then the model's own checks);
- `profile` measures a data set (sizes, vocabularies, longest sentence); an uploaded corpus with a
  vocabulary above `MAX_VOCAB` is refused (`check_corpus_profile`);
- `estimate_memory` computes what a run needs (weights, gradients, Adam's moments and the trainer's
  copies, plus the activations kept for the backward pass, plus the attention snapshots of the probe
  sentences); `plan_run` refuses a run above `MAX_JOB_BYTES`. `worst_case` is the estimate at the
  largest allowed settings, which must fit that limit.

Pure Python and torch: no Streamlit here.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from dataclasses import dataclass

from model.data import DATASET_PATH, Pair, build_vocabs, data_hash, langs, load_dataset
from model.limits import BOUNDS, LABELS, MAX_VOCAB
from model.probes import MAX_PROBE_TOKENS, MAX_PROBES, MAX_SNAPSHOTS, default_probes
from model.train import TrainConfig
from model.vocab import tokenize

# The page's defaults: a narrower model than the shipped one (d_model 64, d_ff 128 instead of 128,
# 256), 800 steps, warm-up 100, learning-rate scale 0.5, so that a run on one core reaches about 90%
# held-out exact match in under a minute (measured: 91% at step 600 after 36 s on a busy 2-core machine).
DEFAULTS = TrainConfig(d_model=64, n_heads=4, n_layers=2, d_ff=128, dropout=0.1, batch_size=64, steps=800,
                       warmup=100, lr_scale=0.5, label_smoothing=0.1, seed=0, eval_every=100)
DEFAULT_PROBE_EVERY = 25  # steps between attention snapshots of the probe sentences
MAX_JOB_BYTES = 1_000_000_000  # a run whose estimate is above this is refused


class SettingsError(ValueError):
    """Settings that cannot train; the message lists every problem, for the user."""


def make_config(settings: dict) -> TrainConfig:
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


def profile(data: dict[str, list[Pair]], direction: str) -> DataProfile:
    src_lang, tgt_lang = langs(direction)
    train = data["train"]
    src_vocab, tgt_vocab = build_vocabs(train, direction)
    longest = max(max(len(tokenize(p.src, src_lang)) + 1, len(tokenize(p.tgt, tgt_lang)) + 2) for p in train)
    return DataProfile(len(train), len(data.get("heldout") or []), len(src_vocab), len(tgt_vocab), longest)


@functools.lru_cache(maxsize=4)
def toy_profile(direction: str) -> DataProfile:
    return profile(toy_data(direction), direction)


def check_corpus_profile(p: DataProfile) -> None:
    """Refuse an uploaded corpus whose vocabulary would make the model too large."""
    if max(p.src_vocab, p.tgt_vocab) > MAX_VOCAB:
        raise SettingsError(f"The corpus has {p.src_vocab:,} source and {p.tgt_vocab:,} target words; the limit is "
                            f"{MAX_VOCAB:,} per side (the embeddings and the output layer grow with it). "
                            f"Use fewer or simpler sentences.")


# --- Memory ------------------------------------------------------------------------------------


def count_parameters(d_model: int, n_layers: int, d_ff: int, src_vocab: int, tgt_vocab: int) -> int:
    """Parameters of the model (post-LN, n_layers encoder and n_layers decoder layers), counted by hand.

    attention: 4 linear maps D->D with bias; feed-forward: D->d_ff->D with biases; LayerNorm: 2D;
    encoder layer: attention + FFN + 2 LN; decoder layer: 2 attentions + FFN + 3 LN; embeddings:
    V x D per side; generator: D x V_tgt + V_tgt.
    """
    D, F = d_model, d_ff
    attn = 4 * (D * D + D)
    ffn = D * F + F + F * D + D
    ln = 2 * D
    enc = attn + ffn + 2 * ln
    dec = 2 * attn + ffn + 3 * ln
    return src_vocab * D + tgt_vocab * D + n_layers * (enc + dec) + D * tgt_vocab + tgt_vocab


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes one training job needs, by part (float32 everywhere)."""

    parameters: int
    state_bytes: int  # weights + gradients + Adam's 2 moments + the trainer's last-good copy + the result copy
    activation_bytes: int  # tensors kept for the backward pass of the largest batch, x1.5 for backward's peak
    snapshot_bytes: int  # attention snapshots of the probes (upper bound)

    @property
    def total(self) -> int:
        return self.state_bytes + self.activation_bytes + self.snapshot_bytes


def estimate_memory(tcfg: TrainConfig, data: DataProfile, n_probes: int = 2, n_snapshots: int = MAX_SNAPSHOTS + 2,
                    probe_tokens: int = MAX_PROBE_TOKENS) -> MemoryEstimate:
    """Estimated memory of one job with these settings on this data.

    The activation term is a fit of the bytes autograd keeps for backward in this model, measured
    with `torch.autograd.graph.saved_tensors_hooks` over random configurations (within about 15%;
    `tests/test_jobs.py` checks it against a measurement). With B = batch size, T = the longest
    sequence, L = layers per stack, D, F = d_ff, H = heads, V = target vocabulary, in floats::

        2 B T V  +  30 B T L D  +  6 B T L F  +  6 B T^2 L H  +  6 L D^2  +  B T D
    """
    P = count_parameters(tcfg.d_model, tcfg.n_layers, tcfg.d_ff, data.src_vocab, data.tgt_vocab)
    B, T, L, D, F, H, V = (tcfg.batch_size, data.longest, tcfg.n_layers, tcfg.d_model, tcfg.d_ff, tcfg.n_heads,
                           data.tgt_vocab)
    saved = 2 * B * T * V + 30 * B * T * L * D + 6 * B * T * L * F + 6 * B * T * T * L * H + 6 * L * D * D + B * T * D
    t = probe_tokens + 1
    snap = n_snapshots * n_probes * 4 * L * H * (t * t * 3)
    return MemoryEstimate(P, 6 * 4 * P, int(1.5 * 4 * saved), snap)


def worst_case(direction: str = "en-fr") -> MemoryEstimate:
    """The estimate at the largest allowed settings on the toy set."""
    big = dataclasses.replace(DEFAULTS, **{k: int(BOUNDS[k][1]) for k in ("n_layers", "n_heads", "d_model", "d_ff",
                                                                        "batch_size")})
    return estimate_memory(big, toy_profile(direction), n_probes=MAX_PROBES)


def plan_run(settings: dict, probes: Sequence[str] | None = None,
             data: dict[str, list[Pair]] | None = None) -> tuple[TrainConfig, list[str], MemoryEstimate]:
    """Validate everything a run needs (settings, data, memory): its config, its probe sentences (cleaned,
    at most `MAX_PROBES`) and its memory estimate; `SettingsError` if it cannot run."""
    tcfg = make_config(settings)
    prof = profile(data, tcfg.direction) if data is not None else toy_profile(tcfg.direction)
    if data is not None:
        check_corpus_profile(prof)
    if prof.longest > tcfg.max_len:
        raise SettingsError(f"The longest sentence has {prof.longest} tokens; the model takes at most {tcfg.max_len}.")
    probes = [p.strip() for p in (probes if probes is not None else default_probes(tcfg.direction, data))
              if p and p.strip()][:MAX_PROBES]
    mem = estimate_memory(tcfg, prof, n_probes=max(1, len(probes)))
    if mem.total > MAX_JOB_BYTES:
        raise SettingsError(f"This run would need about {mem.total / 1e6:,.0f} MB of memory; the limit per job is "
                            f"{MAX_JOB_BYTES / 1e6:,.0f} MB. Use a smaller batch, d_model, d_ff or fewer layers.")
    return tcfg, probes, mem
