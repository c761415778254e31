"""Training in the background: one job per session, one manager per server process.

A **job** (`Job`) is a plain object: settings, a lock, lists of figures (loss per step, held-out
metrics, attention snapshots of the probe sentences), a stop event, a done event, a final state
and, at the end, the trained model as a `Bundle`. The paper's recipe (`model.train.Trainer`) runs in
a worker process (`python -m ui.train_worker`, see `worker`) with ONE torch thread; the job's thread
in the server only copies the worker's messages into the job object and never calls Streamlit. The
page keeps the job in its own `st.session_state`, so nothing one student trains is visible to
another; the page reads `job.view()` (a consistent copy) to draw it.

The **manager** (`JobManager`, one per process via `get_manager()`) is the only shared object. It
holds no results, just the bookkeeping that a classroom needs:

- at most `max_running` jobs train at once (default: the number of CPU cores), each in its own
  process with one torch thread at a lower CPU priority (nice +10) than the server; the others
  wait in a first-in-first-out queue and can see their position;
- one active job per owner (the page's per-session token), so a double click cannot start two;
- a maximum wall-clock time per job (`TrainConfig.max_seconds`, plus a watchdog for a hard stop);
- a job whose browser session has ended (no websocket for `grace` seconds) is cancelled: queued
  jobs leave the queue, running ones are killed. The liveness check is injectable (`session_alive`), so
  tests simulate a dead session without Streamlit.

Memory per job is bounded by the settings' bounds (`BOUNDS`) and by `MAX_JOB_BYTES`:
`estimate_memory` computes what a run needs (weights, gradients, Adam's moments and the trainer's
copies, plus the activations kept for the backward pass, plus the attention snapshots) and
`make_job` refuses a run above the limit. A queued job holds no model; a finished job keeps only
its result `Bundle` and its figures.

Nothing in this module needs a running Streamlit: the few Streamlit calls (the session id and the
liveness check) are imported lazily inside two small functions at the end.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import math
import multiprocessing
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from model import pipeline
from model.checkpoint import Bundle, from_bytes, to_bytes
from model.data import DATASET_PATH, Pair, build_vocabs, data_hash, langs, load_dataset
from model.decoding import greedy_decode
from model.limits import BOUNDS, LABELS, MAX_VOCAB  # noqa: F401 - re-exported for the page
from model.train import EvalEvent, StepEvent, TrainConfig, Trainer, TrainingDiverged
from model.transformer import Config
from model.vocab import tokenize

# --- Settings: defaults that finish in about a minute, and bounds that cap memory ---------------

# The page's defaults: a narrower model than the shipped one (d_model 64, d_ff 128 instead of 128,
# 256), 800 steps, warm-up 100, learning-rate scale 0.5, so that a run on one core reaches about 90%
# held-out exact match in under a minute (measured: 91% at step 600 after 36 s on a busy 2-core machine).
DEFAULTS = TrainConfig(d_model=64, n_heads=4, n_layers=2, d_ff=128, dropout=0.1, batch_size=64, steps=800,
                       warmup=100, lr_scale=0.5, label_smoothing=0.1, seed=0, eval_every=100)
DEFAULT_PROBE_EVERY = 25  # steps between attention snapshots of the probe sentences

MAX_PROBES = 3
MAX_PROBE_TOKENS = 20  # a probe sentence is cut to this many words
MAX_SNAPSHOTS = 100  # per probe; the snapshot interval grows for long runs
MAX_JOB_BYTES = 1_000_000_000  # a run whose estimate is above this is refused
DEFAULT_MAX_SECONDS = float(os.environ.get("GLASS_TRAINING_MAX_SECONDS", 600))
DEFAULT_GRACE = 60.0  # seconds a session may be disconnected (a reload, a flaky network) before its job ends

PROBES = {  # default probe sentences per direction: the coreference example and the lecture's "i am a student"
    "en-fr": ("the animal didn't cross the street because it was too tired", "i am a student"),
    "fr-en": ("l'animal n'a pas traversé la rue parce qu'il était trop fatigué", "je suis étudiant"),
}


class SettingsError(ValueError):
    """Settings that cannot train; the message lists every problem, for the user."""


class JobRefused(RuntimeError):
    """The manager cannot take this job (one is already active for this session, the queue is full)."""


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


# --- Attention snapshots of the probe sentences ----------------------------------------------


@dataclass(frozen=True)
class Snapshot:
    """The attention of one probe sentence at one step of training.

    enc_self [L, H, Ts, Ts], dec_self [L, H, Tt, Tt], cross [L, H, Tt, Ts] (float32, rows sum to 1).
    The decoder reads the reference translation when there is one (the same axes at every step,
    as in training: teacher forcing), else the model's own greedy output at that step.
    """

    step: int
    probe: int  # index into the job's probes
    translation: str  # the model's greedy translation at this step
    src_labels: tuple[str, ...]
    tgt_labels: tuple[str, ...]
    enc_self: np.ndarray
    dec_self: np.ndarray
    cross: np.ndarray

    def weights(self, kind: str) -> np.ndarray:
        return {"enc_self": self.enc_self, "dec_self": self.dec_self, "cross": self.cross}[kind]

    def labels(self, kind: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(query labels, key labels) of `kind`."""
        return {"enc_self": (self.src_labels, self.src_labels), "dec_self": (self.tgt_labels, self.tgt_labels),
                "cross": (self.tgt_labels, self.src_labels)}[kind]

    @property
    def nbytes(self) -> int:
        return self.enc_self.nbytes + self.dec_self.nbytes + self.cross.nbytes


def probe_snapshot(bundle: Bundle, text: str, reference: str | None, step: int, probe: int = 0,
                   interventions=None) -> Snapshot:
    """Translate `text` greedily and record its attention weights (the model must be in eval mode)."""
    src_lang, _ = bundle.langs
    words = tokenize(text, src_lang)[:MAX_PROBE_TOKENS]
    prepared = pipeline.prepare(bundle, " ".join(words))
    greedy = greedy_decode(bundle.model, prepared.src(), interventions)
    translation = pipeline.decode_text(bundle, greedy.tokens)
    if reference:
        tf = pipeline.teacher_forced(bundle, prepared, reference, interventions)
        trace, tgt_labels = tf.trace, tf.in_labels
    else:
        a = pipeline.analyse(bundle, prepared, interventions)
        trace, tgt_labels = a.trace, a.tgt_labels
    cfg = bundle.config

    def stack(prefix: str, n: int) -> np.ndarray:
        return np.stack([trace[f"{prefix.format(i)}.weights"][0].numpy().astype(np.float32) for i in range(n)])

    return Snapshot(step, probe, translation, tuple(prepared.labels), tuple(tgt_labels),
                    stack("enc.{}.self_attn", cfg.n_enc_layers), stack("dec.{}.self_attn", cfg.n_dec_layers),
                    stack("dec.{}.cross_attn", cfg.n_dec_layers))


def find_reference(data: dict[str, list[Pair]], text: str, src_lang: str) -> str | None:
    """The target sentence of the pair whose source is `text` (compared token by token), if any."""
    want = tokenize(text, src_lang)[:MAX_PROBE_TOKENS]
    for split in ("train", "heldout"):
        for p in data.get(split) or []:
            if tokenize(p.src, src_lang) == want:
                return p.tgt
    return None


def default_probes(direction: str, data: dict[str, list[Pair]] | None = None) -> list[str]:
    """The lecture's probe sentences for the toy set; for another corpus, its first held-out sources."""
    if data is None:
        return list(PROBES[direction])
    pool = list(data.get("heldout") or []) + list(data.get("train") or [])
    return [p.src for p in pool[:2]]


# --- The job ---------------------------------------------------------------------------------

ACTIVE = ("queued", "running")
ENDED = ("finished", "stopped", "failed")


@dataclass(frozen=True)
class JobView:
    """A consistent copy of a job's state for drawing (lists are copies, safe to keep)."""

    id: str
    state: str  # "new", "queued", "running", "finished", "stopped", "failed"
    reason: str  # why it ended ("" while active)
    error: str | None
    position: int | None  # 1-based place in the queue while queued
    tcfg: TrainConfig
    data_label: str
    probes: tuple[str, ...]
    probe_every: int
    step: int
    steps: list[int]
    losses: list[float]
    cross_entropy: list[float]
    lrs: list[float]
    evals: list[EvalEvent]
    eval_seconds: list[float]  # seconds since the job started, at each evaluation
    snapshots: list[Snapshot]
    seconds: float  # running time so far (or in total)
    steps_per_s: float | None
    eta_s: float | None
    parameters: int | None
    memory: MemoryEstimate | None

    @property
    def active(self) -> bool:
        return self.state in ACTIVE

    @property
    def done(self) -> bool:
        return self.state in ENDED

    @property
    def progress(self) -> float:
        return min(1.0, self.step / self.tcfg.steps) if self.tcfg.steps else 0.0


class Job:
    """One training run of one session. Only its own thread writes the figures; all under `lock`."""

    def __init__(self, tcfg: TrainConfig, data: dict[str, list[Pair]] | None = None, data_label: str = "toy set",
                 data_sha256: str | None = None, probes: Sequence[str] | None = None,
                 probe_every: int = DEFAULT_PROBE_EVERY, session_id: str | None = None, owner: str | None = None,
                 name: str = "my model", memory: MemoryEstimate | None = None):
        self.id = uuid.uuid4().hex[:12]
        self.tcfg = tcfg
        self._data = data
        self.data_label = data_label
        self.data_sha256 = data_sha256
        self.probes = tuple(probes if probes is not None else default_probes(tcfg.direction, data))[:MAX_PROBES]
        # at most MAX_SNAPSHOTS per probe: long runs take them further apart
        self.probe_every = max(1, int(probe_every), math.ceil(tcfg.steps / MAX_SNAPSHOTS)) if probe_every else 0
        self.session_id = session_id
        self.owner = owner
        self.name = name
        self.memory = memory
        self.lock = threading.Lock()
        self.stop_event = threading.Event()
        self.done_event = threading.Event()
        self.thread: threading.Thread | None = None
        self.state = "new"
        self.reason = ""
        self.error: str | None = None
        self.result: Bundle | None = None
        self.parameters: int | None = None
        self.steps: list[int] = []
        self.losses: list[float] = []
        self.cross_entropy: list[float] = []
        self.lrs: list[float] = []
        self.elapsed: list[float] = []  # seconds since start at each step (evaluations included)
        self.evals: list[EvalEvent] = []
        self.eval_seconds: list[float] = []
        self.snapshots: list[Snapshot] = []
        self.created = time.monotonic()
        self.started: float | None = None
        self.ended: float | None = None
        self._stop_reason = ""
        self._kill = False  # end the worker at once (its session is gone: nobody waits for the model)
        self.process = None  # the worker process while it runs
        self.worker_info: dict = {}  # what the worker reports about itself (pid, torch threads, nice)
        self._manager: JobManager | None = None
        self._dead_since: float | None = None  # when its session was first seen disconnected

    # --- for the page ---------------------------------------------------------------------------

    @property
    def done(self) -> bool:
        return self.done_event.is_set()

    @property
    def active(self) -> bool:
        return self.state in ACTIVE

    def stop(self, reason: str = "stopped by you") -> None:
        """Ask the job to stop (a queued job leaves the queue at once)."""
        if self._manager is not None:
            self._manager.stop(self, reason)
        else:
            self._request_stop(reason)

    def join(self, timeout: float | None = None) -> bool:
        """Wait until the job has ended (True) or `timeout` seconds passed (False)."""
        ok = self.done_event.wait(timeout)
        if ok and self.thread is not None:
            self.thread.join(timeout)
        return ok

    def view(self) -> JobView:
        position = self._manager.position(self) if self._manager is not None else None
        with self.lock:
            now = time.monotonic()
            seconds = ((self.ended or now) - self.started) if self.started is not None else 0.0
            rate, eta = None, None
            if len(self.elapsed) >= 2:
                k = max(0, len(self.elapsed) - 50)  # the last 50 steps
                span = self.elapsed[-1] - self.elapsed[k]
                if span > 0:
                    rate = (self.steps[-1] - self.steps[k]) / span
                    eta = (self.tcfg.steps - self.steps[-1]) / rate if self.state == "running" else None
            return JobView(self.id, self.state, self.reason, self.error, position, self.tcfg, self.data_label,
                           self.probes, self.probe_every, self.steps[-1] if self.steps else 0, list(self.steps),
                           list(self.losses), list(self.cross_entropy), list(self.lrs), list(self.evals),
                           list(self.eval_seconds), list(self.snapshots), seconds, rate, eta, self.parameters,
                           self.memory)

    # --- state changes (the manager calls these under its lock) ---------------------------------

    def _request_stop(self, reason: str, kill: bool = False) -> None:
        if not self._stop_reason:
            self._stop_reason = reason
        self._kill = self._kill or kill
        self.stop_event.set()

    def _end(self, state: str, reason: str, error: str | None = None) -> None:
        with self.lock:
            self.state, self.reason, self.error = state, reason, error
            self.ended = time.monotonic()

    # --- the thread -----------------------------------------------------------------------------

    def _run(self) -> None:
        """The job's thread in the server: start the worker process and copy its messages into the job.

        It only waits on a pipe, so it costs the server nearly nothing; the training itself runs in
        `python -m ui.train_worker`, a separate interpreter that shares no lock with the pages' runs.
        """
        state, reason, error = "failed", "error", None
        conn, child_conn = multiprocessing.Pipe()  # a socket pair: messages both ways
        spec = {"tcfg": self.tcfg, "data": self._data, "data_sha256": self.data_sha256, "probes": self.probes,
                "probe_every": self.probe_every, "name": self.name}
        proc = None
        try:
            proc = subprocess.Popen([sys.executable, "-m", "ui.train_worker", str(child_conn.fileno())],
                                    pass_fds=[child_conn.fileno()], cwd=ROOT, stdin=subprocess.DEVNULL,
                                    env={**os.environ, "OMP_NUM_THREADS": "1"})
            child_conn.close()
            with self.lock:
                self.process = proc
            conn.send(spec)
            stop_sent: float | None = None
            while True:
                if self.stop_event.is_set() and stop_sent is None:
                    conn.send(("stop",))  # the worker ends after its current step and sends the model so far
                    stop_sent = time.monotonic()
                if self._kill or (stop_sent is not None and time.monotonic() - stop_sent > STOP_GRACE):
                    proc.kill()  # nobody waits for this model (session ended), or the worker is stuck
                    state, reason = "stopped", self._stop_reason or "stopped"
                    break
                if conn.poll(0.1):
                    try:
                        msg = conn.recv()
                    except (EOFError, OSError):
                        msg = None
                    if msg is None:
                        state, reason, error = self._died(proc)
                        break
                    if msg[0] == "end":
                        state, reason, error = msg[1], msg[2], msg[3]
                        if state == "stopped" and self.stop_event.is_set():
                            reason = self._stop_reason or reason
                        break
                    self._apply(msg)
                elif proc.poll() is not None:
                    state, reason, error = self._died(proc)
                    break
        except Exception as e:  # noqa: BLE001 - the session must keep working whatever happens here
            state, reason, error = "failed", "error", f"Training failed: {type(e).__name__}: {e}"
        finally:
            conn.close()
            child_conn.close()
            if proc is not None:
                try:
                    proc.wait(5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(5)
            self._data = None
            self._end(state, reason, error)
            if self._manager is not None:
                self._manager._job_ended(self)
            self.done_event.set()

    def _apply(self, msg: tuple) -> None:
        """One message from the worker (see `worker`)."""
        kind = msg[0]
        if kind == "result":
            result = from_bytes(msg[1], msg[2], name=self.name)  # validated like an upload, never unpickled
            with self.lock:
                self.result = result
            return
        with self.lock:
            if kind == "info":
                self.worker_info = msg[1]
                self.parameters = msg[1]["parameters"]
            elif kind == "steps":
                for ev, seconds in msg[1]:
                    self.steps.append(ev.step)
                    self.losses.append(ev.loss)
                    self.cross_entropy.append(ev.cross_entropy)
                    self.lrs.append(ev.lr)
                    self.elapsed.append(seconds)
            elif kind == "eval":
                self.evals.append(msg[1])
                self.eval_seconds.append(msg[2])
            elif kind == "snapshots":
                self.snapshots.extend(msg[1])

    @staticmethod
    def _died(proc: subprocess.Popen) -> tuple[str, str, str]:
        try:
            code = proc.wait(5)
        except subprocess.TimeoutExpired:
            code = None
        hint = " (killed: perhaps out of memory)" if code is not None and code < 0 else ""
        return "failed", "error", (f"Training failed: the training process ended unexpectedly (exit code {code}"
                                   f"{hint}). Try smaller settings.")


# --- The worker process ------------------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[1]  # the worker runs as `python -m ui.train_worker` from here
STOP_GRACE = 30.0  # seconds a stopped worker may take to send its model before it is terminated
FLUSH_SECONDS = 0.2  # the worker sends its step figures in batches, at most this often
NICE = 10  # the worker runs this much nicer than the server: when the cores are busy, page runs go first


def worker(conn, stop, spec: dict) -> None:
    """Entry point of a training process: train, and send everything the page shows through `conn`.

    Messages: ("info", {...}), ("steps", [(StepEvent, seconds since start), ...]), ("eval", EvalEvent,
    seconds), ("snapshots", [Snapshot, ...]), ("result", weights bytes, JSON bytes) and last
    ("end", state, reason, error). A broken pipe (the server is gone) ends the process.
    """
    torch.set_num_threads(1)  # one core per job: the server and the other jobs keep theirs
    try:
        end = _train_in_worker(conn, stop, spec)
    except TrainingDiverged as e:
        end = ("end", "failed", "diverged", str(e))
    except (BrokenPipeError, EOFError):
        return
    except Exception as e:  # noqa: BLE001 - reported to the page, the server never sees a traceback
        end = ("end", "failed", "error", f"Training failed: {type(e).__name__}: {e}")
    try:
        conn.send(end)
    except (BrokenPipeError, OSError):
        pass
    finally:
        conn.close()


def _train_in_worker(conn, stop, spec: dict) -> tuple:
    t: TrainConfig = spec["tcfg"]
    start = time.perf_counter()
    data = spec["data"] if spec["data"] is not None else toy_data(t.direction)
    sha = spec["data_sha256"] or (toy_sha256() if spec["data"] is None else None)
    torch.manual_seed(t.seed)  # dropout draws from torch's global generator (as in the CLI); this process only
    trainer = Trainer(t, data=data, data_sha256=sha)
    src_lang, _ = langs(t.direction)
    probes, probe_every = spec["probes"], spec["probe_every"]
    references = [find_reference(data, p, src_lang) for p in probes]
    conn.send(("info", {"parameters": sum(p.numel() for p in trainer.model.parameters()), "pid": os.getpid(),
                        "torch_threads": torch.get_num_threads(),
                        "nice": os.getpriority(os.PRIO_PROCESS, 0) if hasattr(os, "getpriority") else None}))

    def snapshot() -> None:
        if probes and probe_every:
            conn.send(("snapshots", snapshots(trainer, t.direction, probes, references)))

    snapshot()  # step 0: the attention of the untrained model
    pending: list = []
    flushed = time.perf_counter()
    last_snap = 0
    for ev in trainer.run(stop):
        now = time.perf_counter() - start
        if isinstance(ev, StepEvent):
            pending.append((ev, now))
            if probe_every and ev.step % probe_every == 0:
                conn.send(("steps", pending))
                pending, flushed = [], time.perf_counter()
                snapshot()
                last_snap = ev.step
        elif isinstance(ev, EvalEvent):
            conn.send(("steps", pending))
            pending, flushed = [], time.perf_counter()
            conn.send(("eval", ev, now))
        if pending and time.perf_counter() - flushed >= FLUSH_SECONDS:
            conn.send(("steps", pending))
            pending, flushed = [], time.perf_counter()
        if stop.is_set():
            break  # stopped: no final evaluation, the model is handed over at once
    if pending:
        conn.send(("steps", pending))
    if last_snap != trainer.step:
        snapshot()
    weights, meta = to_bytes(trainer.bundle(name=spec["name"]))
    conn.send(("result", weights, meta))
    if stop.is_set():
        return ("end", "stopped", "stopped", None)
    if trainer.step < t.steps:
        return ("end", "stopped", f"time limit ({t.max_seconds:.0f} s per job)", None)
    return ("end", "finished", "completed", None)


def snapshots(trainer: Trainer, direction: str, probes, references) -> list[Snapshot]:
    """The probes' attention now (eval mode for the pass, then back to training mode)."""
    out = []
    with trainer.lock:
        model = trainer.model
        was_training = model.training
        model.eval()
        try:
            bundle = Bundle(model, trainer.src_vocab, trainer.tgt_vocab, direction)
            for i, (text, ref) in enumerate(zip(probes, references, strict=True)):
                out.append(probe_snapshot(bundle, text, ref, trainer.step, i, trainer.interventions))
        finally:
            model.train(was_training)
    return out


# --- The manager: one per process ------------------------------------------------------------

def streamlit_session_alive(session_id: str | None) -> bool:
    """True while the browser session is connected (always True outside a Streamlit server)."""
    if session_id is None:
        return True
    try:
        from streamlit.runtime import Runtime
    except ImportError:  # pragma: no cover - streamlit is a dependency of the app
        return True
    if not Runtime.exists():
        return True  # AppTest, scripts, tests: nobody to ask
    return Runtime.instance().is_active_session(session_id)


def current_session_id() -> str | None:
    """The id of the Streamlit session running this script (None outside Streamlit)."""
    try:
        from streamlit.runtime.scriptrunner import get_script_run_ctx
    except ImportError:  # pragma: no cover
        return None
    ctx = get_script_run_ctx(suppress_warning=True)
    return ctx.session_id if ctx is not None else None


class JobManager:
    """Server-wide limits: a number of running jobs, a FIFO queue, a time limit, session liveness.

    max_running: jobs training at once (default: CPU cores, or $GLASS_MAX_TRAINING_JOBS).
    max_seconds: wall-clock limit per job (default 600 s, or $GLASS_TRAINING_MAX_SECONDS).
    session_alive: session id -> bool (default: ask the Streamlit runtime).
    grace: seconds a session may be disconnected before its job is cancelled.
    poll: seconds between the watchdog's sweeps (it runs only while jobs are active).
    """

    def __init__(self, max_running: int | None = None, max_seconds: float = DEFAULT_MAX_SECONDS,
                 session_alive: Callable[[str | None], bool] = streamlit_session_alive, grace: float = DEFAULT_GRACE,
                 poll: float = 1.0, max_queue: int = 200):
        env = os.environ.get("GLASS_MAX_TRAINING_JOBS")
        self.max_running = max(1, int(max_running or (int(env) if env else 0) or os.cpu_count() or 1))
        self.max_seconds = float(max_seconds)
        self.session_alive = session_alive
        self.grace = float(grace)
        self.poll = float(poll)
        self.max_queue = int(max_queue)
        self._lock = threading.Lock()
        self._running: list[Job] = []
        self._queue: collections.deque[Job] = collections.deque()
        self._watchdog: threading.Thread | None = None

    # --- public -----------------------------------------------------------------------------

    def submit(self, job: Job) -> Job:
        """Start the job now if a slot is free, else queue it. Raises `JobRefused`."""
        with self._lock:
            if job.state != "new":
                raise JobRefused("This job was already submitted.")
            if job.owner is not None and any(j.owner == job.owner for j in (*self._running, *self._queue)):
                raise JobRefused("You already have a training job queued or running: stop it first.")
            if len(self._running) >= self.max_running and len(self._queue) >= self.max_queue:
                raise JobRefused(f"The server's training queue is full ({self.max_queue} jobs waiting). "
                                 "Try again in a few minutes.")
            limit = min(job.tcfg.max_seconds or math.inf, self.max_seconds)
            job.tcfg = dataclasses.replace(job.tcfg, max_seconds=limit)
            job._manager = self
            if len(self._running) < self.max_running:
                self._start_locked(job)
            else:
                job.state = "queued"
                self._queue.append(job)
            self._ensure_watchdog_locked()
        return job

    def position(self, job: Job) -> int | None:
        """1-based position in the queue, or None when not queued."""
        with self._lock:
            for i, j in enumerate(self._queue):
                if j is job:
                    return i + 1
        return None

    def stop(self, job: Job, reason: str = "stopped by you", kill: bool = False) -> None:
        """Stop a job: it leaves the queue, or its worker ends after the current step and hands over the
        model so far; with `kill` (nobody will look at the model) the worker process is killed at once."""
        with self._lock:
            if job in self._queue:
                self._queue.remove(job)
                job._request_stop(reason)
                job._end("stopped", reason)
                job.done_event.set()
            elif job in self._running:
                job._request_stop(reason, kill)

    def counts(self) -> tuple[int, int]:
        """(running, queued)."""
        with self._lock:
            return len(self._running), len(self._queue)

    def active_jobs(self) -> list[Job]:
        with self._lock:
            return [*self._running, *self._queue]

    def sweep(self, now: float | None = None) -> list[Job]:
        """Cancel jobs of ended sessions and jobs over the time limit; returns the jobs told to stop."""
        now = time.monotonic() if now is None else now
        stopped = []
        for job in self.active_jobs():
            alive = True
            try:
                alive = bool(self.session_alive(job.session_id))
            except Exception:  # noqa: BLE001 - a failing check must not kill the watchdog
                alive = True
            if alive:
                job._dead_since = None
            else:
                job._dead_since = job._dead_since if job._dead_since is not None else now
                if now - job._dead_since >= self.grace:
                    self.stop(job, "session ended", kill=True)
                    stopped.append(job)
                    continue
            # hard limit: the trainer stops itself at max_seconds; this catches a run stuck in one long step
            if job.started is not None and job.state == "running" and now - job.started > self.max_seconds + 60:
                self.stop(job, f"time limit ({self.max_seconds:.0f} s per job)")
                stopped.append(job)
        return stopped

    def shutdown(self, timeout: float = 30) -> None:
        """Stop every job and wait for them (tests)."""
        for job in self.active_jobs():
            self.stop(job, "server shutting down")
        for job in list(self._running):
            job.join(timeout)

    # --- internal ---------------------------------------------------------------------------

    def _start_locked(self, job: Job) -> None:
        job.state = "running"
        job.started = time.monotonic()
        job.thread = threading.Thread(target=job._run, name=f"training-{job.id}", daemon=True)
        self._running.append(job)
        job.thread.start()

    def _job_ended(self, job: Job) -> None:
        """Called by a job's thread as it ends: free its slot and start the next queued jobs."""
        with self._lock:
            if job in self._running:
                self._running.remove(job)
            while self._queue and len(self._running) < self.max_running:
                self._start_locked(self._queue.popleft())

    def _ensure_watchdog_locked(self) -> None:
        if self._watchdog is None or not self._watchdog.is_alive():
            self._watchdog = threading.Thread(target=self._watch, name="training-watchdog", daemon=True)
            self._watchdog.start()

    def _watch(self) -> None:
        while True:
            time.sleep(self.poll)
            self.sweep()
            with self._lock:
                if not self._running and not self._queue:
                    self._watchdog = None
                    return


_MANAGER: JobManager | None = None
_MANAGER_LOCK = threading.Lock()


def get_manager() -> JobManager:
    """The process-wide manager (created on first use)."""
    global _MANAGER
    with _MANAGER_LOCK:
        if _MANAGER is None:
            _MANAGER = JobManager()
        return _MANAGER


def make_job(settings: dict, probes: Sequence[str] | None = None, probe_every: int = DEFAULT_PROBE_EVERY,
             data: dict[str, list[Pair]] | None = None, data_label: str = "toy set", data_sha256: str | None = None,
             session_id: str | None = None, owner: str | None = None, name: str = "my model") -> Job:
    """Validate everything a run needs (settings, data, memory) and build its job; `SettingsError` if not."""
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
    return Job(tcfg, data, data_label, data_sha256, probes, probe_every, session_id, owner, name, mem)


def config_for_check(tcfg: TrainConfig, data: DataProfile) -> Config:
    """The model `Config` this run will build (for showing sizes on the page)."""
    return tcfg.model_config(data.src_vocab, data.tgt_vocab)



# --- Session glue: the finished job's model becomes "my model" -----------------------------------

JOB_KEY = "training_job"  # st.session_state key of this session's Job
ADOPTED_KEY = "training_adopted"  # id of the job whose model became "my model"
SWITCHED_KEY = "training_switched"  # whether the sidebar's choice could be set to "mine" at that moment


def use_model(state, bundle: Bundle) -> None:
    """Make `bundle` this session's "my model" (`state` is st.session_state or any mutable mapping).

    Also selects it in the sidebar (state["model"] = "mine") when Streamlit allows that at this
    moment: in a callback, a fragment run, or before the sidebar is drawn; not after the sidebar's
    radio was drawn in the same run (then state[SWITCHED_KEY] is False and the page offers a button).
    """
    state["my_model"] = bundle
    state["my_model_key"] = uuid.uuid4().hex  # names these weights in every cache key
    try:
        state["model"] = "mine"
        state[SWITCHED_KEY] = True
    except Exception:  # noqa: BLE001 - Streamlit refuses to change a widget drawn in this run
        state[SWITCHED_KEY] = False


def adopt_finished(state) -> bool:
    """When this session's job has ended, hand its model over as "my model" (once per job).

    True when something changed (the page then reruns so the sidebar shows it). A failed job has no
    model: it is only marked as seen.
    """
    job = state.get(JOB_KEY)
    if job is None or not job.done or state.get(ADOPTED_KEY) == job.id:
        return False
    state[ADOPTED_KEY] = job.id
    if job.result is not None:
        use_model(state, job.result)
    return True


def sidebar_status() -> None:
    """For app.py, called before the sidebar is drawn, on every page.

    Hands a finished job's model over (so "My model" appears in the sidebar on whatever page the
    student is) and, while the job is queued or running, shows a small progress line in the sidebar
    that polls every 2 s and reruns the app once when the job ends.
    """
    import streamlit as st

    state = st.session_state
    adopt_finished(state)
    job = state.get(JOB_KEY)
    if job is None or not job.active:
        return

    def status() -> None:
        if job.done:
            st.rerun()  # the whole app: adopt above, before the sidebar, and stop polling
        v = job.view()
        if v.state == "queued":
            st.caption(f"Training: waiting, number {v.position} in the queue")
        else:
            st.progress(v.progress, text=f"Training: step {v.step} of {v.tcfg.steps}")

    with st.sidebar:
        st.fragment(status, run_every=2.0)()
