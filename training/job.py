"""One training run of one session: `Job`, the consistent copy the page draws (`JobView`), `make_job`.

A job is a plain object: settings, a lock, lists of figures (loss per step, held-out metrics,
attention snapshots of the probe sentences), a stop event, a done event, a final state and, at the
end, the trained model as a `Bundle`. The paper's recipe (`model.train.Trainer`) runs in a training
process (`training.run_process`) with ONE torch thread; the job's thread in the server only copies the
process's messages (`training.messages`) into the job object. The page keeps the job in its own
session (see `ui.training.session`), and the server-wide training service (`training.service()`: the
local pool or the Redis queue) keeps it for its owner (the browser that started it), so every session
of that browser, and nobody else, sees it; the page reads `job.view()` to draw it. The service moves a
job through its states with the job's public methods.

Memory per job is bounded before it starts (`make_job` calls `model.train_settings.plan_run`, and
the training process caps its own address space at the estimate, see `training.run_process`). A queued
job holds no model; a finished job keeps only its result `Bundle` and its figures.

A finished run is never thrown away: the training process hands the weights over as checkpoint bytes, which
the job checks like an upload (`model.checkpoint.from_bytes`). Should that fail, for whatever
reason, the job keeps the two files' bytes (`result_files`) and says why (`handover_error`), and
the page offers them for download.
"""

from __future__ import annotations

import dataclasses
import math
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from model.checkpoint import Bundle, CheckpointError, from_bytes
from model.data import Pair
from model.probes import MAX_PROBES, MAX_SNAPSHOTS, Snapshot, default_probes
from model.train import EvalEvent, TrainConfig
from model.train_settings import DEFAULT_PROBE_EVERY, MemoryEstimate, plan_run
from training import messages as m

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
    handover_error: str | None  # why the trained model could not be loaded here (its files stay downloadable)
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


class JobService(Protocol):
    """What a job asks of the service that accepted it (`training.LocalPool`, `training.RedisQueue`)."""

    def position(self, job: Job) -> int | None: ...
    def stop(self, job: Job, reason: str = "stopped by you", kill: bool = False) -> None: ...
    def release(self, job: Job) -> None: ...


@dataclass(frozen=True)
class Link:
    """What a runner is handed with its spec, to talk to its job: `stop` set, the run is to stop after its current
    step and send the model so far; `kill()` true, nobody waits for the model; `started(process)`, the training
    process of this server has started (a follower of a queue worker has none); `receive(message)`, each message
    of the run but its end."""

    stop: threading.Event
    kill: Callable[[], bool]
    started: Callable[[subprocess.Popen[bytes]], None]
    receive: Callable[[m.Message], None]


# What runs a job (`training.run_process.run`, or `RedisQueue`'s follower of a queue worker):
# (spec, link) -> (state, reason, error).
Runner = Callable[[m.Spec, Link], tuple[str, str, str | None]]


class Job:
    """One training run of one session. Only its own thread writes the figures; all under `lock`.

    Its service moves it through its states with the public methods below (`attach`, `mark_queued`,
    `mark_started`, `cancel`, `request_stop`, `seen_alive`); nothing else writes its fields.
    """

    def __init__(
        self,
        tcfg: TrainConfig,
        data: dict[str, list[Pair]] | None = None,
        data_label: str = "toy set",
        data_sha256: str | None = None,
        probes: Sequence[str] | None = None,
        probe_every: int = DEFAULT_PROBE_EVERY,
        session_id: str | None = None,
        owner: str | None = None,
        name: str = "my model",
        memory: MemoryEstimate | None = None,
        client: str | None = None,
    ):
        self.id = uuid.uuid4().hex[:12]
        self.tcfg = tcfg
        self._data = data
        self.data_label = data_label
        self.data_sha256 = data_sha256
        self.probes = tuple(probes if probes is not None else default_probes(tcfg.direction, data))[:MAX_PROBES]
        # at most MAX_SNAPSHOTS per probe: long runs take them further apart
        self.probe_every = max(1, int(probe_every), math.ceil(tcfg.steps / MAX_SNAPSHOTS)) if probe_every else 0
        self.session_id = session_id  # the session that started it
        self._sessions: set[str] = {session_id} if session_id is not None else set()  # every session attached
        self.owner = owner  # the browser it belongs to (or a per-session token): one active job per owner
        self.client = client  # the client (hashed address) it counts for in the fair share
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
        self.result_files: tuple[bytes, bytes] | None = None  # (weights, JSON) when they could not be loaded
        self.handover_error: str | None = None
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
        self._kill = False  # end the training process at once (its session is gone: nobody waits for the model)
        # the training process while it runs (here; None when a queue worker trains it)
        self.process: subprocess.Popen[bytes] | None = None
        # what the training process reports about itself (pid, torch threads, nice)
        self.worker_info: dict[str, Any] = {}
        self._service: JobService | None = None
        self._runner: Runner | None = None  # default: a training process of this server (`training.run_process.run`)
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
        if self._service is not None:
            self._service.stop(self, reason)
        else:
            self.request_stop(reason)

    def join(self, timeout: float | None = None) -> bool:
        """Wait until the job has ended (True) or `timeout` seconds passed (False)."""
        ok = self.done_event.wait(timeout)
        if ok and self.thread is not None:
            self.thread.join(timeout)
        return ok

    def view(self) -> JobView:
        position = self._service.position(self) if self._service is not None else None
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
            return JobView(
                id=self.id,
                state=self.state,
                reason=self.reason,
                error=self.error,
                position=position,
                tcfg=self.tcfg,
                data_label=self.data_label,
                probes=self.probes,
                probe_every=self.probe_every,
                handover_error=self.handover_error,
                step=self.steps[-1] if self.steps else 0,
                steps=list(self.steps),
                losses=list(self.losses),
                cross_entropy=list(self.cross_entropy),
                lrs=list(self.lrs),
                evals=list(self.evals),
                eval_seconds=list(self.eval_seconds),
                snapshots=list(self.snapshots),
                seconds=seconds,
                steps_per_s=rate,
                eta_s=eta,
                parameters=self.parameters,
                memory=self.memory,
            )

    # --- state changes (the service calls these under its lock) ---------------------------------

    def attach(self, service: JobService, max_seconds: float, runner: Runner | None = None) -> None:
        """Accepted by `service`, whose time limit caps the run's own. `runner` runs the job (default:
        `training.run_process.run`, a training process of this server; `training.RedisQueue` passes one
        that follows a job trained by a queue worker, anywhere)."""
        self.tcfg = dataclasses.replace(self.tcfg, max_seconds=min(self.tcfg.max_seconds or math.inf, max_seconds))
        self._service = service
        if runner is not None:
            self._runner = runner

    def mark_queued(self) -> None:
        self.state = "queued"

    def mark_started(self) -> None:
        """Start the job's thread, which runs the training process."""
        self.state = "running"
        self.started = time.monotonic()
        self.follow()

    def follow(self) -> None:
        """Start the job's thread (its runner); a queued job becomes "running" when its runner says so."""
        self.thread = threading.Thread(target=self._run, name=f"training-{self.id}", daemon=True)
        self.thread.start()

    def spec(self) -> m.Spec:
        """What a training process needs to train this job (see `training.run_process`)."""
        return m.Spec(
            self.id, self.tcfg, self._data, self.data_sha256, self.probes, self.probe_every, self.name, self.memory
        )

    def record(self, client_key: str | None) -> m.JobRecord:
        """What another app process needs to show this job (no data)."""
        return m.JobRecord(
            self.tcfg,
            self.data_label,
            self.data_sha256,
            self.probes,
            self.probe_every,
            self.owner,
            self.name,
            self.memory,
            client_key,
        )

    def forget_data(self) -> None:
        """The data went to the queue (a queue worker trains it): this process needs no copy."""
        self._data = None

    def request_stop(self, reason: str, kill: bool = False) -> None:
        """Tell the training process to stop after its current step (with `kill`: end it at once)."""
        if not self._stop_reason:
            self._stop_reason = reason
        self._kill = self._kill or kill
        self.stop_event.set()

    def cancel(self, reason: str) -> None:
        """End a job that never started (it was queued)."""
        self.request_stop(reason)
        self._end("stopped", reason)
        self.done_event.set()

    def fail(self, error: str) -> None:
        """End a job that cannot run or be shown (its records could not be read), with `error` for the page."""
        self._end("failed", "error", error)
        self.done_event.set()

    def add_sessions(self, session_ids: Iterable[str | None]) -> None:
        """Sessions (of its browser) that show this job: while one of them is alive, the job lives."""
        with self.lock:
            self._sessions.update(s for s in session_ids if s is not None)

    def drop_sessions(self, session_ids: Iterable[str | None]) -> None:
        with self.lock:
            self._sessions.difference_update(session_ids)

    def session_ids(self) -> list[str]:
        with self.lock:
            return list(self._sessions)

    def seen_alive(self, alive: bool, now: float) -> float:
        """Record whether a session of its browser is connected at `now`; returns for how long none has been."""
        if alive:
            self._dead_since = None
            return 0.0
        if self._dead_since is None:
            self._dead_since = now
        return now - self._dead_since

    def _end(self, state: str, reason: str, error: str | None = None) -> None:
        with self.lock:
            self.state, self.reason, self.error = state, reason, error
            self.ended = time.monotonic()

    # --- the thread -----------------------------------------------------------------------------

    def _run(self) -> None:
        """The job's thread in the server: run the training (its runner) and copy its messages into the job."""
        state, reason, error = "failed", "error", None
        try:
            runner = self._runner
            if runner is None:
                from training import run_process  # here, not on top: `python -m training.run_process` loads this

                runner = run_process.run
            state, reason, error = runner(
                self.spec(), Link(self.stop_event, lambda: self._kill, self._started, self._receive)
            )
            if state == "stopped" and self.stop_event.is_set():
                reason = self._stop_reason or reason
        finally:
            self._data = None
            self._end(state, reason, error)
            if self._service is not None:
                self._service.release(self)
            self.done_event.set()

    def _started(self, process: subprocess.Popen[bytes]) -> None:
        with self.lock:
            self.process = process

    def _receive(self, msg: m.Message) -> None:
        """One message of the training process (see `training.messages`)."""
        if isinstance(msg, m.Result):
            self._hand_over(msg.weights, msg.meta)
            return
        with self.lock:
            if isinstance(msg, m.Started):  # a queue worker took the job (again, after a worker died: afresh)
                self.state = "running"
                self.started = time.monotonic() - max(0.0, time.time() - msg.wall)
                for figures in (
                    self.steps,
                    self.losses,
                    self.cross_entropy,
                    self.lrs,
                    self.elapsed,
                    self.evals,
                    self.eval_seconds,
                    self.snapshots,
                ):
                    figures.clear()
            elif isinstance(msg, m.Info | m.Usage):
                self.worker_info = {**self.worker_info, **dataclasses.asdict(msg)}
                if isinstance(msg, m.Info):
                    self.parameters = msg.parameters
            elif isinstance(msg, m.Steps):
                for ev, seconds in msg.events:
                    self.steps.append(ev.step)
                    self.losses.append(ev.loss)
                    self.cross_entropy.append(ev.cross_entropy)
                    self.lrs.append(ev.lr)
                    self.elapsed.append(seconds)
            elif isinstance(msg, m.Eval):
                self.evals.append(msg.event)
                self.eval_seconds.append(msg.seconds)
            elif isinstance(msg, m.Snapshots):
                self.snapshots.extend(msg.snapshots)

    def _hand_over(self, weights: bytes, meta: bytes) -> None:
        """The trained model's files: loaded like an upload (never unpickled). If that fails, for any
        reason, the files are kept for download and the reason is recorded: a run is never thrown away."""
        try:
            result = from_bytes(weights, meta, name=self.name)
        except Exception as e:  # noqa: BLE001 - whatever it is, the weights stay the student's
            why = str(e) if isinstance(e, CheckpointError) else f"{type(e).__name__}: {e}"
            with self.lock:
                self.result, self.result_files = None, (weights, meta)
                self.handover_error = (
                    f"The trained model could not be loaded into the app ({why}). Its two files "
                    "are kept for you: download them below."
                )
            return
        with self.lock:
            self.result, self.result_files, self.handover_error = result, None, None


def make_job(
    settings: dict[str, Any],
    probes: Sequence[str] | None = None,
    probe_every: int = DEFAULT_PROBE_EVERY,
    data: dict[str, list[Pair]] | None = None,
    data_label: str = "toy set",
    data_sha256: str | None = None,
    session_id: str | None = None,
    owner: str | None = None,
    name: str = "my model",
    client: str | None = None,
) -> Job:
    """Validate everything a run needs (settings, data, memory, checkpoint size) and build its job;
    `SettingsError` if not."""
    tcfg, probes, memory = plan_run(settings, probes, data)
    return Job(tcfg, data, data_label, data_sha256, probes, probe_every, session_id, owner, name, memory, client)
