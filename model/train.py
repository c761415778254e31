"""Training: the recipe of "Attention Is All You Need" (section 5), small enough to watch live.

- Adam with beta1 = 0.9, beta2 = 0.98, eps = 1e-9 (paper 5.3).
- The paper's learning-rate schedule, `rate`: linear warm-up, then decay with 1/sqrt(step).
- Label smoothing eps_ls = 0.1 (paper 5.4): the target distribution puts 0.9 on the right token and
  spreads 0.1 over the whole vocabulary. It hurts perplexity but helps accuracy and BLEU.
- Dropout 0.1 on the sums of embeddings and positional encodings and on every sub-layer output.
- Padding is masked twice: in attention (keys that are <pad> get no weight) and in the loss (a
  <pad> target counts for nothing).
- Length-bucketed batches (paper 5.1: "sentence pairs were batched together by approximate
  sequence length") so little compute is spent on padding.

`Trainer` runs the recipe step by step and yields an event after every step, so the app can drive it
from a background thread and draw the loss curve live; the CLI drives the same loop with a progress
bar (`python -m model.train --out assets/checkpoints/base`; every `TrainConfig` field is a flag).

`torch.set_num_threads` is process-wide, so `Trainer` never calls it; the caller decides (the CLI
has ``--threads``, default 1: on a busy machine two threads wait for each other at every operation).
"""

from __future__ import annotations

import copy
import dataclasses
import math
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from model.checkpoint import ARCHS, Bundle, build_model
from model.data import (
    DATASET_PATH,
    DIRECTIONS,
    Pair,
    batches,
    build_vocabs,
    data_hash,
    encode_pairs,
    langs,
    load_dataset,
    pairs_hash,
)
from model.evaluate import Metrics, score, translate_pairs
from model.rnn import ATTENTIONS, CELLS, RNNConfig, RNNSeq2Seq
from model.trace import Interventions, Trace
from model.transformer import POSITIONS, Config, Transformer
from model.vocab import PAD_ID, detokenize, tokenize

# --- Configuration --------------------------------------------------------------------------------


@dataclass(frozen=True)
class TrainConfig:
    """Everything that decides a training run. The defaults train the shipped model.

    The model is far smaller than the paper's base model (d_model 512, 8 heads, 6+6 layers, d_ff
    2048, 100k steps on 8 GPUs) because the toy data set is small and training runs on two CPU
    cores in about a minute.
    """

    direction: str = "en-fr"
    d_model: int = 128
    n_heads: int = 4
    n_layers: int = 2  # encoder layers and decoder layers (the paper uses 6 and 6)
    d_ff: int = 256
    dropout: float = 0.1
    batch_size: int = 64  # sentence pairs per step
    steps: int = 1200
    warmup: int = 200  # the paper uses 4000 steps of warm-up for 100k steps
    lr_scale: float = 0.35  # factor in front of the paper's formula (see `rate`): peak lr 2.2e-3 at step 200
    label_smoothing: float = 0.1
    clip_grad_norm: float | None = None  # None: no gradient clipping (the paper does not clip)
    seed: int = 0
    look_ahead_mask: bool = True  # False: train without it, so the decoder can copy the answer
    # Rows of the paper's Table 3 and two the lectures ask about (Transformer only): "learned" positions
    # (row E), a smaller key size d_k per head (row B), "none": no positional encoding at all, and no
    # division of the attention scores by sqrt(d_k). The last two train (and evaluate) with the app's
    # switches for them turned off; the model itself is the usual one.
    positions: str = "sinusoidal"  # "sinusoidal", "learned" or "none"
    key_size: int | None = None  # d_k of queries and keys; None: d_model / n_heads
    scale_scores: bool = True
    eval_every: int = 100  # steps between held-out evaluations (0: only at the end)
    max_seconds: float | None = None  # stop after this much wall-clock time
    max_len: int = 64  # longest sequence the model accepts (positional-encoding rows)
    # The architecture: "transformer", or "rnn" for the recurrent encoder-decoder with attention of
    # model/rnn.py (d_model is then its embedding, state and attention size; n_heads, n_layers, d_ff
    # and look_ahead_mask do not apply to it).
    arch: str = "transformer"
    cell: str = "gru"  # rnn only: "gru" or "lstm"
    attention: str = "additive"  # rnn only: "additive" (Bahdanau) or "qkv" (key/query/value)

    def __post_init__(self) -> None:
        problems = []
        if self.direction not in DIRECTIONS:
            problems.append(f"direction must be one of {', '.join(DIRECTIONS)} (got {self.direction!r})")
        for name in ("batch_size", "steps", "warmup"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                problems.append(f"{name} must be a positive integer (got {value!r})")
        for name in ("seed", "eval_every"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                problems.append(f"{name} must be a non-negative integer (got {value!r})")
        if not _is_number(self.label_smoothing) or not 0.0 <= self.label_smoothing < 1.0:
            problems.append(f"label_smoothing must be a number in [0, 1) (got {self.label_smoothing!r})")
        if not _is_number(self.lr_scale) or not 0 < self.lr_scale < math.inf:
            problems.append(f"lr_scale must be a positive number (got {self.lr_scale!r})")
        for name in ("clip_grad_norm", "max_seconds"):
            value = getattr(self, name)
            if value is not None and (not _is_number(value) or not 0 < value < math.inf):
                problems.append(f"{name} must be a positive number or None (got {value!r})")
        if self.arch not in ARCHS:
            problems.append(f"arch must be one of {', '.join(ARCHS)} (got {self.arch!r})")
        if self.arch != "rnn":  # the recurrent model's own config checks them when it is the one trained
            if self.cell not in CELLS:
                problems.append(f"cell must be one of {', '.join(CELLS)} (got {self.cell!r})")
            if self.attention not in ATTENTIONS:
                problems.append(f"attention must be one of {', '.join(ATTENTIONS)} (got {self.attention!r})")
        if self.positions not in TRAIN_POSITIONS:
            problems.append(f"positions must be one of {', '.join(TRAIN_POSITIONS)} (got {self.positions!r})")
        for name in ("look_ahead_mask", "scale_scores"):
            if not isinstance(getattr(self, name), bool):
                problems.append(f"{name} must be True or False (got {getattr(self, name)!r})")
        try:  # the sizes: the model's own checks (positive, heads divide d_model, even d_model, dropout, ...)
            self.model_config(src_vocab=4, tgt_vocab=4)
        except ValueError as e:
            named = {p.split(" ")[0] for p in problems}
            problems += [p for p in _model_problems(e) if p.split(" ")[0] not in named]
        if problems:
            raise ValueError("Invalid training config: " + "; ".join(problems))

    def model_config(self, src_vocab: int, tgt_vocab: int) -> Config | RNNConfig:
        """The `Config` (or `RNNConfig`) of the model this recipe trains, for vocabularies of the given sizes."""
        if self.arch == "rnn":
            return RNNConfig(
                src_vocab=src_vocab,
                tgt_vocab=tgt_vocab,
                d_emb=self.d_model,
                hidden=self.d_model,
                d_attn=self.d_model,
                cell=self.cell,
                attention=self.attention,
                dropout=self.dropout,
                max_len=self.max_len,
            )
        return Config(
            src_vocab=src_vocab,
            tgt_vocab=tgt_vocab,
            d_model=self.d_model,
            n_heads=self.n_heads,
            key_size=self.key_size,
            n_enc_layers=self.n_layers,
            n_dec_layers=self.n_layers,
            d_ff=self.d_ff,
            dropout=self.dropout,
            max_len=self.max_len,
            positions="sinusoidal" if self.positions == "none" else self.positions,
        )

    @property
    def interventions(self) -> Interventions:
        """What the model is trained (and evaluated) with switched off."""
        return Interventions(
            look_ahead_mask=self.look_ahead_mask, scale=self.scale_scores, positional_encoding=self.positions != "none"
        )

    @property
    def peak_lr(self) -> float:
        """The largest learning rate of the schedule, reached at step `warmup`."""
        return rate(self.warmup, self.d_model, self.warmup, self.lr_scale)

    @property
    def highest_lr(self) -> tuple[float, int]:
        """The largest learning rate this run reaches, and its step: the peak, or the last step when the run ends
        while still warming up (warmup > steps)."""
        step = min(self.warmup, self.steps)
        return rate(step, self.d_model, self.warmup, self.lr_scale), step


TRAIN_POSITIONS = (*POSITIONS, "none")
_MODEL_NAMES = {
    "n_enc_layers": "n_layers",
    "n_dec_layers": "n_layers",
    "d_emb": "d_model",
    "hidden": "d_model",
    "d_attn": "d_model",
}


def _model_problems(error: ValueError) -> list[str]:
    """The model config's complaints under `TrainConfig`'s names (n_layers sets both stacks; d_model every size
    of the recurrent model), each once."""
    out: list[str] = []
    for problem in str(error).split(": ", 1)[-1].split("; "):
        name, _, rest = problem.partition(" ")
        problem = f"{_MODEL_NAMES.get(name, name)} {rest}"
        if problem not in out:
            out.append(problem)
    return out


def _is_number(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and not math.isnan(x)


def rate(step: int, d_model: int, warmup: int, scale: float = 1.0) -> float:
    """The paper's learning rate (section 5.3), times `scale`:

        lrate = scale * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)

    It grows linearly for the first `warmup` steps, peaks at step = warmup (where both terms are
    equal, warmup^-0.5), then decays proportionally to the inverse square root of the step number.
    Warm-up matters for post-LN Transformers: large early updates, while Adam's estimates of the
    gradient's scale are still poor, can wreck the freshly initialised network. `step` counts from 1.
    """
    if step < 1:
        raise ValueError(f"the schedule counts steps from 1 (got {step})")
    lrate: float = scale * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)
    return lrate


def rates(total_steps: int, d_model: int, warmup: int, scale: float = 1.0) -> torch.Tensor:
    """`rate` at steps 1..total_steps at once (float64, [total_steps]): the whole schedule a run will follow."""
    step = torch.arange(1, total_steps + 1, dtype=torch.float64)  # [total_steps]
    lr: torch.Tensor = scale * d_model**-0.5 * torch.minimum(step**-0.5, step * warmup**-1.5)
    return lr


# --- Events the training loop yields -------------------------------------------------------------


@dataclass(frozen=True)
class StepEvent:
    """One optimizer step done.

    loss: the label-smoothed cross-entropy that is minimised (it cannot reach 0: with smoothing the
    best possible value is the entropy of the smoothed target, about 0.9 nats here).
    cross_entropy: plain cross-entropy of the same batch (no smoothing), nats per target token:
    this one does fall to about 0 when the model is sure and right.
    elapsed: wall-clock seconds since `run` started; train_seconds: the part spent in training steps
    (held-out evaluations excluded).
    """

    step: int
    loss: float
    lr: float
    tokens_per_s: float
    elapsed: float
    cross_entropy: float = math.nan
    train_seconds: float = math.nan


@dataclass(frozen=True)
class EvalEvent:
    """Held-out figures at `step`: greedy translations of the whole held-out split.

    exact_match and coref_accuracy are shares in [0, 1]; bleu is sacreBLEU's 0-100.
    heldout_loss is the label-smoothed loss (comparable with StepEvent.loss), teacher-forced.
    samples: (source, model's translation, reference) for a few fixed held-out pairs.
    """

    step: int
    heldout_loss: float
    exact_match: float
    bleu: float
    coref_accuracy: float | None
    samples: list[tuple[str, str, str]]
    heldout_cross_entropy: float = math.nan
    n: int = 0
    seconds: float = 0.0  # time this evaluation took

    @property
    def metrics(self) -> dict[str, float | None]:
        """The figures as a plain dict (what goes into a checkpoint's JSON)."""
        return {
            "step": self.step,
            "exact_match": self.exact_match,
            "bleu": self.bleu,
            "coref_accuracy": self.coref_accuracy,
            "heldout_loss": self.heldout_loss,
            "heldout_cross_entropy": self.heldout_cross_entropy,
            "n": self.n,
        }


Event = StepEvent | EvalEvent


class TrainingDiverged(RuntimeError):
    """The loss (or the gradient) became NaN or infinite. The trainer keeps the last good weights."""


# --- The trainer --------------------------------------------------------------------------------


# The benchmark's torch reference (bench/reference.py) stands in for the Transformer: the same encode/decode/generator.
ModelFactory = Callable[[Config | RNNConfig], Transformer | RNNSeq2Seq]


class Trainer:
    """Trains one model with the paper's recipe, one step at a time.

    `data` is ``{"train": [Pair, ...], "heldout": [Pair, ...]}`` in the direction of
    `tcfg.direction` (``model.data.load_dataset`` gives that); by default the shipped toy set. The
    vocabularies are built from the training pairs only. `model_factory` builds the network from a
    `Config` (default `build_model`: the `Transformer`, or `RNNSeq2Seq` when `tcfg.arch` is "rnn"); the
    benchmark passes torch's reference here.

    Attributes the app reads while training runs: `model` (the live network), `src_vocab`,
    `tgt_vocab`, `step` (optimizer updates so far), `last_eval` (the latest `EvalEvent`), `lock`
    (held during each update; `bundle()` takes it, so a copy is never half-updated).
    """

    n_samples = 5  # held-out pairs shown in every EvalEvent

    def __init__(
        self,
        tcfg: TrainConfig | None = None,
        data: dict[str, list[Pair]] | None = None,
        model_factory: ModelFactory | None = None,
        data_sha256: str | None = None,
    ):
        self.tcfg = tcfg = tcfg or TrainConfig()
        if data is None:
            data = load_dataset(DATASET_PATH, tcfg.direction)
            data_sha256 = data_sha256 or data_hash(DATASET_PATH)
        if not isinstance(data, dict) or not data.get("train"):
            raise ValueError('data must be {"train": [pairs, ...], "heldout": [pairs, ...]} with training pairs')
        self.train_pairs: list[Pair] = list(data["train"])
        self.heldout: list[Pair] = list(data.get("heldout") or [])
        self.data_sha256 = data_sha256 or pairs_hash(self.train_pairs + self.heldout)
        self.src_lang, self.tgt_lang = langs(tcfg.direction)
        self.src_vocab, self.tgt_vocab = build_vocabs(self.train_pairs, tcfg.direction)
        self.encoded = encode_pairs(self.train_pairs, self.src_vocab, self.tgt_vocab, self.src_lang, self.tgt_lang)
        self.heldout_encoded = encode_pairs(self.heldout, self.src_vocab, self.tgt_vocab, self.src_lang, self.tgt_lang)
        longest = max(max(len(s), len(t)) for s, t in self.encoded)
        if longest > tcfg.max_len:
            raise ValueError(
                f"the longest training sentence has {longest} tokens (with <bos>/<eos>); max_len is {tcfg.max_len}"
            )
        self.model_config = tcfg.model_config(len(self.src_vocab), len(self.tgt_vocab))
        with torch.random.fork_rng():  # the same seed always gives the same initial weights
            torch.manual_seed(tcfg.seed)
            self.model = (model_factory or build_model)(self.model_config)
        self.model.train()
        # Paper 5.3: Adam with beta1 = 0.9, beta2 = 0.98, eps = 1e-9; the lr is set before every step. The fused
        # kernel updates every parameter in one call: the same arithmetic as the loop over parameters.
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=0.0, betas=(0.9, 0.98), eps=1e-9, fused=True)
        self.interventions = tcfg.interventions
        self.step = 0
        self.train_seconds = 0.0  # time spent in training steps over all calls of run()
        self.last_eval: EvalEvent | None = None
        self.lock = threading.Lock()
        self._params: list[Tensor] = list(self.model.parameters())
        self._good = [p.detach().clone() for p in self._params]  # weights before the last update
        self._epoch = 0
        self._batches: Iterator[tuple[Tensor, Tensor]] = iter(())
        self._sample_ids = _spread(self.heldout, self.n_samples)

    # --- one step -----------------------------------------------------------------------------

    def losses(self, logits: Tensor, gold: Tensor) -> tuple[Tensor, Tensor]:
        """(label-smoothed, plain) cross-entropy, each the mean over the non-<pad> target tokens.

        Label smoothing (paper 5.4) trains towards a target that puts 1 - eps on the right word and eps / V on
        each of the V words of the vocabulary, so its cross-entropy is

            (1 - eps) * (-log p(right word))  +  eps * mean over the vocabulary of (-log p(word))

        Both come from one log-softmax (what F.cross_entropy with label_smoothing computes; a test holds them equal).
        """
        log_p = F.log_softmax(logits.reshape(-1, logits.size(-1)), dim=-1)  # [B * T, V]
        gold = gold.reshape(-1)  # [B * T]
        plain = F.nll_loss(log_p, gold, ignore_index=PAD_ID)
        eps = self.tcfg.label_smoothing
        if not eps:
            return plain, plain
        spread = -log_p.mean(dim=-1)[gold != PAD_ID].mean()  # cross-entropy against the uniform distribution
        return (1 - eps) * plain + eps * spread, plain

    def loss(self, logits: Tensor, gold: Tensor) -> Tensor:
        """The label-smoothed cross-entropy that training minimises (see `losses`)."""
        return self.losses(logits, gold)[0]

    def next_batch(self) -> tuple[Tensor, Tensor]:
        """The next (src [B, Ts], tgt [B, Tt]) batch; a new shuffle (seed + epoch) at every epoch."""
        while True:
            batch = next(self._batches, None)
            if batch is not None:
                return batch
            self._batches = iter(
                batches(self.encoded, self.tcfg.batch_size, shuffle=True, seed=self.tcfg.seed + self._epoch)
            )
            self._epoch += 1

    def train_step(self) -> StepEvent:
        """One update: forward (teacher forcing), loss, backward, Adam step with the scheduled lr."""
        t0 = time.perf_counter()
        src, tgt = self.next_batch()
        tgt_in, gold = tgt[:, :-1], tgt[:, 1:]  # decoder input starts with BOS; position t predicts t+1
        lr = rate(self.step + 1, self.tcfg.d_model, self.tcfg.warmup, self.tcfg.lr_scale)
        logits = self.model(src, tgt_in, Trace(self.interventions, record=False))  # [B, Tt, V]
        loss, cross_entropy = self.losses(logits, gold)
        if not torch.isfinite(loss):  # these weights are bad: go back to the ones before the last update
            self._diverged("the loss", float(loss.detach()), restore=True)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()  # type: ignore[no-untyped-call]  # torch's Tensor.backward has no annotations
        params = self._params
        if self.tcfg.clip_grad_norm:
            grad_norm = float(torch.nn.utils.clip_grad_norm_(params, self.tcfg.clip_grad_norm))
        else:  # measure the norm, change nothing
            grad_norm = float(torch.nn.utils.get_total_norm([p.grad for p in params if p.grad is not None]))
        if not math.isfinite(grad_norm):  # the weights gave a finite loss: keep them, skip the update
            self._diverged("the gradient norm", grad_norm, restore=False)
        with self.lock:
            with torch.no_grad():  # these weights gave a finite loss: keep them in case the next do not
                torch._foreach_copy_(self._good, params)
            for group in self.optimizer.param_groups:
                group["lr"] = lr
            self.optimizer.step()
            self.step += 1
        seconds = time.perf_counter() - t0
        self.train_seconds += seconds
        n_tokens = int((gold != PAD_ID).sum())
        return StepEvent(
            self.step,
            float(loss.detach()),
            lr,
            n_tokens / max(seconds, 1e-9),
            math.nan,
            float(cross_entropy.detach()),
            self.train_seconds,
        )

    def _diverged(self, what: str, value: float, restore: bool) -> None:
        """Raise `TrainingDiverged`; with `restore`, first put back the weights before the last update."""
        with self.lock, torch.no_grad():
            if restore and self.step > 0:
                torch._foreach_copy_(self._params, self._good)
                self.step -= 1
            self.optimizer.zero_grad(set_to_none=True)
        t, n = self.tcfg, self.step
        when = f"after {n} update{'' if n == 1 else 's'}, the last that gave a finite loss" if n else "at once"
        raise TrainingDiverged(
            f"Training diverged: {what} became {value} {when} (the paper's recipe cannot recover from that). "
            f"Try a smaller lr_scale (now {t.lr_scale:g}, peak learning rate {t.peak_lr:.2e}) or a longer "
            f"warm-up (now {t.warmup} step{'' if t.warmup == 1 else 's'})."
        )

    # --- evaluation -----------------------------------------------------------------------------

    def evaluate(self) -> EvalEvent:
        """Greedy-translate the whole held-out split and score it; its teacher-forced loss comes from the same pass."""
        t0 = time.perf_counter()
        was_training = self.model.training
        self.model.eval()  # dropout off
        sums = [0.0, 0.0, 0]  # label-smoothed and plain cross-entropy summed over the target tokens, token count

        def add_loss(logits: Tensor, gold: Tensor) -> None:
            k = int((gold != PAD_ID).sum())
            smoothed, plain = self.losses(logits, gold)
            sums[0] += float(smoothed) * k
            sums[1] += float(plain) * k
            sums[2] += k

        try:
            bundle = Bundle(self.model, self.src_vocab, self.tgt_vocab, self.tcfg.direction)
            hyps = translate_pairs(
                bundle, self.heldout, self.interventions, encoded=self.heldout_encoded, on_batch=add_loss
            )
        finally:
            self.model.train(was_training)
        loss, ce = (sums[0] / sums[2], sums[1] / sums[2]) if sums[2] else (math.nan, math.nan)
        m: Metrics = score(self.heldout, hyps, self.tgt_lang)
        samples = [
            (
                self.heldout[i].src,
                detokenize(hyps[i], self.tgt_lang),
                detokenize(tokenize(self.heldout[i].tgt, self.tgt_lang), self.tgt_lang),
            )
            for i in self._sample_ids
        ]
        event = EvalEvent(
            self.step, loss, m.exact_match, m.bleu, m.coref_accuracy, samples, ce, m.n, time.perf_counter() - t0
        )
        self.last_eval = event
        return event

    # --- the loop -------------------------------------------------------------------------------

    def run(self, stop: threading.Event | None = None) -> Iterator[Event]:
        """Train until `tcfg.steps` updates, `tcfg.max_seconds`, or until `stop` is set.

        Yields a `StepEvent` after every step and an `EvalEvent` every `eval_every` steps and once
        at the end (when there is a held-out split). Raises `TrainingDiverged` on a NaN/inf loss.
        Calling `run` again continues where the last call stopped.
        """
        t = self.tcfg
        start = time.perf_counter()
        self.model.train()
        evaluated_at = -1
        while self.step < t.steps:
            if stop is not None and stop.is_set():
                break
            if t.max_seconds is not None and time.perf_counter() - start >= t.max_seconds:
                break
            event = self.train_step()
            yield dataclasses.replace(event, elapsed=time.perf_counter() - start)
            if self.heldout and t.eval_every and self.step % t.eval_every == 0:
                yield self.evaluate()
                evaluated_at = self.step
        if self.heldout and evaluated_at != self.step:
            yield self.evaluate()

    # --- the result -------------------------------------------------------------------------------

    def bundle(self, name: str = "model", metrics: dict[str, float | None] | None = None) -> Bundle:
        """An independent copy of the current weights in eval mode, ready for `model.checkpoint.save`.

        `metrics` defaults to the figures of the latest evaluation.
        """
        with self.lock:
            model = copy.deepcopy(self.model)
        model.eval()
        for p in model.parameters():
            p.requires_grad_(False)
        if metrics is None and self.last_eval is not None:
            metrics = self.last_eval.metrics
        meta = {
            "training": {
                **asdict(self.tcfg),
                "steps_done": self.step,
                "train_seconds": round(self.train_seconds, 2),
                "n_train": len(self.train_pairs),
                "n_heldout": len(self.heldout),
                "torch": torch.__version__,
            },
            "metrics": metrics or {},
            "arch": self.tcfg.arch,
            "data_sha256": self.data_sha256,
        }
        return Bundle(
            model, copy.deepcopy(self.src_vocab), copy.deepcopy(self.tgt_vocab), self.tcfg.direction, meta, name
        )


def _spread(items: Sequence[object], k: int) -> list[int]:
    """k indices spread evenly over `items` (fixed, so the app can watch the same sentences improve)."""
    n = len(items)
    return sorted({round(i * (n - 1) / max(k - 1, 1)) for i in range(min(k, n))}) if n else []


if __name__ == "__main__":  # python -m model.train: the command line is model/cli.py's
    from model.cli import train as main

    sys.exit(main())
