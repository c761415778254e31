"""A training process: `python -m training.run_process FD` trains one run; both ends of its connection.

Training runs in its own process rather than in a thread of the Streamlit server: a small model's
training step is mostly Python overhead, so a training thread would hold the server's interpreter
lock and every student's page would wait for it. A separate interpreter (about 1 s to start) shares
nothing with the server but a connection (a socket pair) on file descriptor FD, which carries the
records of `training.messages` as JSON plus raw bytes (never a pickle):

- server -> training process: the run's `Spec`, then optionally `StopAfterStep`;
- training process -> server: `Info`, `Steps`, `Eval`, `Snapshots`, `Result` (the model's two files),
  `Usage` and last `End`; `Failing` announces the end before a last act that may crash the process
  (handing over the model after running out of memory).

The process runs at a lower CPU priority (nice +`NICE`) with one torch thread, so the server and the
other runs keep their cores. When the server goes away the connection closes, the process stops after
its current step and exits. It re-checks the spec with the app's own bounds (`model.train_settings.plan_run`)
and recomputes the memory estimate itself: nothing it is sent is taken on trust.

Memory: before it builds anything the process caps its own address space (`resource.setrlimit(RLIMIT_AS)`)
at what it has mapped so far (the interpreter and torch: about 640 MB of address space, 230 MB resident)
plus `MEMORY_MARGIN` times the estimate plus `MEMORY_SLACK`. A run that needs more than that gets an
allocation error, which ends the job with a message saying so (and hands over the model as it was, when
that still fits); the server never runs out of memory because of it. The process reports its peak
resident memory at the end (`Usage`).

In the server, `run` (called by the job's thread, see `training.job.Job`, or by a queue worker) starts
the process and hands each message to its caller; it only waits on a pipe, so it costs nearly nothing.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import resource
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING, cast

import torch

from model.checkpoint import to_bytes
from model.data import langs
from model.probes import find_reference, snapshots
from model.train import EvalEvent, StepEvent, Trainer, TrainingDiverged
from model.train_settings import toy_data, toy_sha256
from training import messages as m

if TYPE_CHECKING:
    from training.job import Link

ROOT = Path(__file__).resolve().parents[1]  # the process runs as `python -m training.run_process` from here
_log = logging.getLogger("glass.training")
STOP_GRACE = 30.0  # seconds a stopped worker may take to send its model before it is terminated
FLUSH_SECONDS = 0.2  # the worker sends its step figures in batches, at most this often
NICE = 10  # the worker runs this much nicer than the server: when the cores are busy, page runs go first
MEMORY_MARGIN = 1.25  # the worker's address-space cap: what it has mapped at start + this x the estimate ...
MEMORY_SLACK = 256 * 2**20  # ... + this (allocator arenas, torch's lazily loaded kernels, thread stacks)


# --- The server's end ----------------------------------------------------------------------------


def run(spec: m.Spec, link: Link) -> tuple[str, str, str | None]:
    """Start a training process with `spec`, pass each of its messages to `link.receive`; returns (state, reason,
    error).

    `link.stop` set: the process is told to stop after its current step and send the model so far; `link.kill()`
    true (nobody waits for the model) or a process stuck for `STOP_GRACE` seconds: it is killed. So is a
    process that said it is failing (out of memory: its last act, handing over the model, may fail too, and
    a library's failed allocation can leave a process that neither talks nor exits) and has not ended
    `STOP_GRACE` seconds later: the run fails with the reason it sent. A message that is not one of ours
    ends the run as failed, with the reason in the log.
    """
    state, reason, error = "failed", "error", None
    conn, child_conn = multiprocessing.Pipe()  # a socket pair: messages both ways, as raw bytes
    proc = None
    try:
        # RUST_BACKTRACE=0: a library's failed allocation under the memory cap aborts at once, instead of
        # printing a backtrace (which allocates; once, while a panic was printing, it left the process hung)
        proc = subprocess.Popen(
            [sys.executable, "-m", "training.run_process", str(child_conn.fileno())],
            pass_fds=[child_conn.fileno()],
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "OMP_NUM_THREADS": "1", "RUST_BACKTRACE": "0"},
        )
        child_conn.close()
        link.started(proc)
        m.send(conn, spec)
        stop_sent: float | None = None
        failing: tuple[str, str, str | None] | None = None  # the process's reason, sent before a risky last act
        failing_since = 0.0
        while True:
            if link.stop.is_set() and stop_sent is None:
                m.send(conn, m.StopAfterStep())  # it ends after its current step and sends the model so far
                stop_sent = time.monotonic()
            if link.kill() or (stop_sent is not None and time.monotonic() - stop_sent > STOP_GRACE):
                proc.kill()  # nobody waits for this model (session ended), or the process is stuck
                state, reason = "stopped", "stopped"
                break
            if failing is not None and time.monotonic() - failing_since > STOP_GRACE:
                proc.kill()  # stuck in its last act: the reason it gave is the run's end
                state, reason, error = failing
                break
            if conn.poll(0.1):
                try:
                    msg = m.recv(conn)
                except (EOFError, OSError):
                    msg = None
                except m.BadMessage as e:
                    _log.warning("training process %s: unreadable message (%s)", proc.pid, e)
                    proc.kill()
                    state, reason, error = "failed", "error", UNREADABLE
                    break
                if msg is None:
                    state, reason, error = failing or _died(proc, spec)
                    break
                if isinstance(msg, m.End):
                    state, reason, error = msg.state, msg.reason, msg.error
                    break
                if isinstance(msg, m.Failing):
                    failing, failing_since = (msg.state, msg.reason, msg.error), time.monotonic()
                    continue
                link.receive(msg)
            elif proc.poll() is not None:
                state, reason, error = failing or _died(proc, spec)
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
    return state, reason, error


UNREADABLE = "Training failed: the training process sent a message this app cannot read (see the server's log)."


def _died(proc: subprocess.Popen[bytes], spec: m.Spec | None = None) -> tuple[str, str, str]:
    try:
        code = proc.wait(5)
    except subprocess.TimeoutExpired:
        code = None
    if code == -signal.SIGABRT and spec is not None and spec.memory is not None:  # an allocation in C++/Rust
        return "failed", "memory", out_of_memory_message(spec.memory.total) + " (The training process aborted.)"
    hint = " (killed: perhaps out of memory)" if code is not None and code < 0 else ""
    return (
        "failed",
        "error",
        (f"Training failed: the training process ended unexpectedly (exit code {code}{hint}). Try smaller settings."),
    )


# --- The training process's end --------------------------------------------------------------------


def train(conn: Connection, stop: threading.Event, spec: m.Spec, limit: int | None) -> None:
    """The body of a training process: train, and send everything the page shows through `conn`
    (`limit`: the address-space cap it set itself). A broken pipe (the server is gone) ends the process."""
    torch.set_num_threads(1)  # one core per run: the server and the other runs keep theirs
    estimate = spec.memory.total if spec.memory is not None else None
    try:
        end = _train(conn, stop, spec, estimate, limit)
    except TrainingDiverged as e:
        end = m.End("failed", "diverged", str(e))
    except (BrokenPipeError, EOFError):
        return
    except Exception as e:  # noqa: BLE001 - reported to the page, the server never sees a traceback
        end = (
            m.End("failed", "memory", out_of_memory_message(estimate, limit))
            if is_out_of_memory(e)
            else m.End("failed", "error", f"Training failed: {type(e).__name__}: {e}")
        )
    try:
        m.send(conn, usage(limit))
        m.send(conn, end)
    except (BrokenPipeError, OSError):
        pass
    finally:
        conn.close()


def is_out_of_memory(e: BaseException) -> bool:
    """An allocation refused (by the process's address-space cap, or the machine): Python's MemoryError
    or torch's allocator error."""
    return isinstance(e, MemoryError) or (
        isinstance(e, RuntimeError)
        and ("can't allocate memory" in str(e) or "not enough memory" in str(e) or "out of memory" in str(e).lower())
    )


def out_of_memory_message(estimate: int | None, limit: int | None = None) -> str:
    return (
        "Training stopped: it needed more memory than this job may use"
        + (
            f" ({limit / 1e6:,.0f} MB of address space for a run estimated at {estimate / 1e6:,.0f} MB)"
            if estimate and limit
            else ""
        )
        + ". The server and the other jobs are fine. Use a smaller batch, d_model, d_ff, fewer layers, or a "
        "corpus with fewer words or shorter sentences."
    )


def usage(limit: int | None) -> m.Usage:
    """The peak resident memory of this process (VmHWM: getrusage's ru_maxrss would start at the server's
    size, since Linux keeps it across the fork and exec that started this process) and its cap."""
    return m.Usage(_status("VmHWM"), limit)


def _status(field: str) -> int:
    """A size from /proc/self/status, in bytes (0 when unknown: not Linux)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def vm_size() -> int:
    """Bytes of address space this process has mapped now (Linux: /proc/self/status VmSize)."""
    return _status("VmSize")


def limit_memory(estimate: int | None) -> int | None:
    """Cap this process' address space at what it maps now + MEMORY_MARGIN x `estimate` + MEMORY_SLACK
    (soft and hard: the process cannot raise it again). Returns the cap in bytes, or None (no estimate,
    or not Linux)."""
    vm = vm_size()
    if not estimate or not vm:
        return None
    cap = vm + int(MEMORY_MARGIN * estimate) + MEMORY_SLACK
    try:
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    except (ValueError, OSError):  # pragma: no cover - a lower hard limit set by someone else
        return None
    return cap


def _train(conn: Connection, stop: threading.Event, spec: m.Spec, estimate: int | None, limit: int | None) -> m.End:
    t = spec.tcfg
    start = time.perf_counter()
    data = spec.data if spec.data is not None else toy_data(t.direction)
    sha = spec.data_sha256 or (toy_sha256() if spec.data is None else None)
    torch.manual_seed(t.seed)  # dropout draws from torch's global generator (as in the CLI); this process only
    trainer = Trainer(t, data=data, data_sha256=sha)
    src_lang, _ = langs(t.direction)
    probes, probe_every = spec.probes, spec.probe_every
    references = [find_reference(data, p, src_lang) for p in probes]
    m.send(
        conn,
        m.Info(
            sum(p.numel() for p in trainer.model.parameters()),
            os.getpid(),
            torch.get_num_threads(),
            os.getpriority(os.PRIO_PROCESS, 0) if hasattr(os, "getpriority") else None,
            limit,
            estimate,
        ),
    )

    def snapshot() -> None:
        if probes and probe_every:
            m.send(conn, m.Snapshots(tuple(snapshots(trainer, t.direction, probes, references))))

    snapshot()  # step 0: the attention of the untrained model
    out_of_memory = False
    try:
        last_snap = _loop(conn, stop, trainer, snapshot, probe_every, start)
    except Exception as e:
        if not is_out_of_memory(e):
            raise
        out_of_memory = True  # handled below, once the failed step's frames (and tensors) are gone
    if out_of_memory:
        failing = m.Failing("failed", "memory", out_of_memory_message(estimate, limit))
        m.send(conn, usage(limit))
        m.send(conn, failing)  # should the hand-over below fail too, the server knows why
        trainer.optimizer.state.clear()  # Adam's moments and the gradients: room for the model's copy
        trainer.optimizer.zero_grad(set_to_none=True)
        trainer._good = []
        try:  # the model as it was: its copy needs far less than the step that failed
            m.send(conn, m.Result(*to_bytes(trainer.bundle(name=spec.name))))
        except Exception:  # noqa: BLE001, S110 - nothing to hand over; the message says why
            pass
        return m.End(failing.state, failing.reason, failing.error)
    if last_snap != trainer.step:
        snapshot()
    m.send(conn, m.Result(*to_bytes(trainer.bundle(name=spec.name))))
    if stop.is_set():
        return m.End("stopped", "stopped")
    if trainer.step < t.steps:
        return m.End("stopped", f"time limit ({t.max_seconds:.0f} s per job)")
    return m.End("finished", "completed")


def _loop(
    conn: Connection,
    stop: threading.Event,
    trainer: Trainer,
    snapshot: Callable[[], None],
    probe_every: int,
    start: float,
) -> int:
    """Train, sending the figures as they come; returns the step of the last snapshot."""
    pending: list[tuple[StepEvent, float]] = []
    flushed = time.perf_counter()
    last_snap = 0

    def flush() -> None:
        nonlocal pending, flushed
        m.send(conn, m.Steps(tuple(pending)))
        pending, flushed = [], time.perf_counter()

    try:
        for ev in trainer.run(stop):
            now = time.perf_counter() - start
            if isinstance(ev, StepEvent):
                pending.append((ev, now))
                if probe_every and ev.step % probe_every == 0:
                    flush()
                    snapshot()
                    last_snap = ev.step
            elif isinstance(ev, EvalEvent):
                flush()
                m.send(conn, m.Eval(ev, now))
            if pending and time.perf_counter() - flushed >= FLUSH_SECONDS:
                flush()
            if stop.is_set():
                break  # stopped: no final evaluation, the model is handed over at once
    except TrainingDiverged:  # the curve goes on to the update its message names (the last with a finite loss)
        pending = [(ev, s) for ev, s in pending if ev.step <= trainer.step]
        if pending:
            flush()
        raise
    if pending:
        flush()
    return last_snap


def main() -> None:
    os.nice(NICE)  # before any other thread starts: on Linux each thread has its own priority, new ones inherit it
    conn = Connection(int(sys.argv[1]))
    try:
        spec = cast(m.Spec, m.recv(conn, kinds=("spec",)))  # checked again here with the app's bounds (kinds: a Spec)
    except m.BadMessage as e:
        m.send(conn, m.End("failed", "error", f"Training failed: this run's settings could not be read ({e})."))
        return
    limit = limit_memory(spec.memory.total if spec.memory is not None else None)  # before anything is built
    stop = threading.Event()

    def listen() -> None:
        try:
            m.recv(conn, kinds=("stop",))  # StopAfterStep, or EOF when the server is gone
        except (EOFError, OSError, m.BadMessage):
            pass
        stop.set()

    threading.Thread(target=listen, name="stop-listener", daemon=True).start()
    train(conn, stop, spec, limit)


if __name__ == "__main__":
    main()
