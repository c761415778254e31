"""The training process: `python -m ui.train_worker FD`, both ends of its connection.

Training runs in its own process rather than in a thread of the Streamlit server: a small model's
training step is mostly Python overhead, so a training thread would hold the server's interpreter
lock and every student's page would wait for it. A separate interpreter (about 1 s to start) shares
nothing with the server but a connection (a socket pair) on file descriptor FD:

- server -> worker: the job's spec (a dict: tcfg, data, data_sha256, probes, probe_every, name),
  then optionally ("stop",);
- worker -> server: ("info", {...}), ("steps", [(StepEvent, seconds since start), ...]),
  ("eval", EvalEvent, seconds), ("snapshots", [Snapshot, ...]), ("result", weights bytes, JSON
  bytes), ("usage", {"peak_rss": bytes, "memory_limit": bytes or None}) and last ("end", state,
  reason, error); ("failing", state, reason, error) announces the end before a last act that may
  crash the process (handing over the model after running out of memory).

The worker runs at a lower CPU priority (nice +`NICE`) with one torch thread, so the server and
the other jobs keep their cores. When the server goes away the connection closes, the worker stops
after its current step and exits.

Memory: the spec carries the run's estimate (`memory_bytes`, see `model.train_settings.estimate_memory`).
Before it builds anything the worker caps its own address space (`resource.setrlimit(RLIMIT_AS)`) at
what it has mapped so far (the interpreter and torch: about 640 MB of address space, 230 MB resident,
measured) plus `MEMORY_MARGIN` times the estimate plus `MEMORY_SLACK`. A run that needs more than
that gets an allocation error in the worker, which ends the job with a message saying so (and hands
over the model as it was, when that still fits); the server never runs out of memory because of it.
The worker reports its peak resident memory at the end (`("usage", {...})`).

In the server, `run` (called by the job's thread, see `ui.jobs.Job`) starts the process and hands
each message to the job; it only waits on a pipe, so it costs the server nearly nothing.
"""

from __future__ import annotations

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

import torch

from model.checkpoint import to_bytes
from model.data import langs
from model.probes import find_reference, snapshots
from model.train import EvalEvent, StepEvent, TrainConfig, Trainer, TrainingDiverged
from model.train_settings import toy_data, toy_sha256

ROOT = Path(__file__).resolve().parents[1]  # the worker runs as `python -m ui.train_worker` from here
STOP_GRACE = 30.0  # seconds a stopped worker may take to send its model before it is terminated
FLUSH_SECONDS = 0.2  # the worker sends its step figures in batches, at most this often
NICE = 10  # the worker runs this much nicer than the server: when the cores are busy, page runs go first
MEMORY_MARGIN = 1.25  # the worker's address-space cap: what it has mapped at start + this x the estimate ...
MEMORY_SLACK = 256 * 2**20  # ... + this (allocator arenas, torch's lazily loaded kernels, thread stacks)


# --- The server's end ----------------------------------------------------------------------------


def run(spec: dict, stop: threading.Event, kill: Callable[[], bool], started: Callable[[subprocess.Popen], None],
        receive: Callable[[tuple], None]) -> tuple[str, str, str | None]:
    """Start a worker with `spec`, pass each of its messages to `receive`; returns (state, reason, error).

    `stop` set: the worker is told to stop after its current step and send the model so far; `kill()`
    true (nobody waits for the model) or a worker stuck for `STOP_GRACE` seconds: it is killed.
    """
    state, reason, error = "failed", "error", None
    conn, child_conn = multiprocessing.Pipe()  # a socket pair: messages both ways
    proc = None
    try:
        proc = subprocess.Popen([sys.executable, "-m", "ui.train_worker", str(child_conn.fileno())],
                                pass_fds=[child_conn.fileno()], cwd=ROOT, stdin=subprocess.DEVNULL,
                                env={**os.environ, "OMP_NUM_THREADS": "1"})
        child_conn.close()
        started(proc)
        conn.send(spec)
        stop_sent: float | None = None
        failing: tuple[str, str, str] | None = None  # the worker's reason, sent before a risky last act
        while True:
            if stop.is_set() and stop_sent is None:
                conn.send(("stop",))  # the worker ends after its current step and sends the model so far
                stop_sent = time.monotonic()
            if kill() or (stop_sent is not None and time.monotonic() - stop_sent > STOP_GRACE):
                proc.kill()  # nobody waits for this model (session ended), or the worker is stuck
                state, reason = "stopped", "stopped"
                break
            if conn.poll(0.1):
                try:
                    msg = conn.recv()
                except (EOFError, OSError):
                    msg = None
                if msg is None:
                    state, reason, error = failing or _died(proc, spec)
                    break
                if msg[0] == "end":
                    state, reason, error = msg[1], msg[2], msg[3]
                    break
                if msg[0] == "failing":
                    failing = (msg[1], msg[2], msg[3])
                    continue
                receive(msg)
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


def _died(proc: subprocess.Popen, spec: dict | None = None) -> tuple[str, str, str]:
    try:
        code = proc.wait(5)
    except subprocess.TimeoutExpired:
        code = None
    if code == -signal.SIGABRT and spec and spec.get("memory_bytes"):  # under its cap: an allocation in C++/Rust
        return "failed", "memory", out_of_memory_message(spec) + " (The training process aborted.)"
    hint = " (killed: perhaps out of memory)" if code is not None and code < 0 else ""
    return "failed", "error", (f"Training failed: the training process ended unexpectedly (exit code {code}"
                               f"{hint}). Try smaller settings.")


# --- The worker's end ----------------------------------------------------------------------------


def worker(conn, stop, spec: dict) -> None:
    """The body of a training process: train, and send everything the page shows through `conn`.

    A broken pipe (the server is gone) ends the process.
    """
    torch.set_num_threads(1)  # one core per job: the server and the other jobs keep theirs
    try:
        end = _train(conn, stop, spec)
    except TrainingDiverged as e:
        end = ("end", "failed", "diverged", str(e))
    except (BrokenPipeError, EOFError):
        return
    except Exception as e:  # noqa: BLE001 - reported to the page, the server never sees a traceback
        end = (("end", "failed", "memory", out_of_memory_message(spec)) if is_out_of_memory(e)
               else ("end", "failed", "error", f"Training failed: {type(e).__name__}: {e}"))
    try:
        conn.send(("usage", usage(spec)))
        conn.send(end)
    except (BrokenPipeError, OSError):
        pass
    finally:
        conn.close()


def is_out_of_memory(e: BaseException) -> bool:
    """An allocation refused (by the worker's address-space cap, or the machine): Python's MemoryError
    or torch's allocator error."""
    return isinstance(e, MemoryError) or (isinstance(e, RuntimeError) and (
        "can't allocate memory" in str(e) or "not enough memory" in str(e) or "out of memory" in str(e).lower()))


def out_of_memory_message(spec: dict) -> str:
    est, limit = spec.get("memory_bytes"), spec.get("memory_limit")
    return ("Training stopped: it needed more memory than this job may use"
            + (f" ({limit / 1e6:,.0f} MB of address space for a run estimated at {est / 1e6:,.0f} MB)"
               if est and limit else "")
            + ". The server and the other jobs are fine. Use a smaller batch, d_model, d_ff, fewer layers, or a "
              "corpus with fewer words or shorter sentences.")


def usage(spec: dict) -> dict:
    """The peak resident memory of this process (VmHWM: getrusage's ru_maxrss would start at the server's
    size, since Linux keeps it across the fork and exec that started this process) and its cap."""
    return {"peak_rss": _status("VmHWM"), "memory_limit": spec.get("memory_limit")}


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
    (soft and hard: the worker cannot raise it again). Returns the cap in bytes, or None (no estimate,
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


def _train(conn, stop, spec: dict) -> tuple:
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
                        "torch_threads": torch.get_num_threads(), "memory_limit": spec.get("memory_limit"),
                        "memory_bytes": spec.get("memory_bytes"),
                        "nice": os.getpriority(os.PRIO_PROCESS, 0) if hasattr(os, "getpriority") else None}))

    def snapshot() -> None:
        if probes and probe_every:
            conn.send(("snapshots", snapshots(trainer, t.direction, probes, references)))

    snapshot()  # step 0: the attention of the untrained model
    out_of_memory = False
    try:
        last_snap = _loop(conn, stop, trainer, snapshot, probe_every, start)
    except Exception as e:
        if not is_out_of_memory(e):
            raise
        out_of_memory = True  # handled below, once the failed step's frames (and tensors) are gone
    if out_of_memory:
        failing = ("end", "failed", "memory", out_of_memory_message(spec))
        conn.send(("usage", usage(spec)))
        conn.send(("failing", *failing[1:]))  # should the hand-over below fail too, the server knows why
        trainer.optimizer.state.clear()  # Adam's moments and the gradients: room for the model's copy
        trainer.optimizer.zero_grad(set_to_none=True)
        trainer._good = []
        try:  # the model as it was: its copy needs far less than the step that failed
            weights, meta = to_bytes(trainer.bundle(name=spec["name"]))
            conn.send(("result", weights, meta))
        except Exception:  # noqa: BLE001, S110 - nothing to hand over; the message says why
            pass
        return failing
    if last_snap != trainer.step:
        snapshot()
    weights, meta = to_bytes(trainer.bundle(name=spec["name"]))
    conn.send(("result", weights, meta))
    if stop.is_set():
        return ("end", "stopped", "stopped", None)
    if trainer.step < t.steps:
        return ("end", "stopped", f"time limit ({t.max_seconds:.0f} s per job)", None)
    return ("end", "finished", "completed", None)


def _loop(conn, stop, trainer, snapshot, probe_every: int, start: float) -> int:
    """Train, sending the figures as they come; returns the step of the last snapshot."""
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
    return last_snap


def main() -> None:
    os.nice(NICE)  # before any other thread starts: on Linux each thread has its own priority, new ones inherit it
    conn = Connection(int(sys.argv[1]))
    spec = conn.recv()
    stop = threading.Event()
    spec["memory_limit"] = limit_memory(spec.get("memory_bytes"))  # before the model, the data or a thread

    def listen() -> None:
        try:
            conn.recv()  # ("stop",), or EOF when the server is gone
        except (EOFError, OSError):
            pass
        stop.set()

    threading.Thread(target=listen, name="stop-listener", daemon=True).start()
    worker(conn, stop, spec)


if __name__ == "__main__":
    main()
