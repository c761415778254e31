"""Training runs measured the way a training job spends its core: what the sweep and the ablations share.

`measure(spec)` trains one recipe for `tcfg.steps` steps in the calling process (one torch thread),
evaluates the whole held-out split every `tcfg.eval_every` steps and returns plain figures: when held-out
exact match first reached 90% and 95% (step, and CPU seconds of the training thread up to that
evaluation: training steps, evaluations and the job's other per-step work included), the final
metrics, the parameters and the median CPU ms of a training step.

A `Spec` can add what a training job of the app does besides training, to measure its cost:
- `probe_every`: the attention snapshots of the page's two probe sentences (`model.probes.snapshots`);
- `messages`: everything the training process sends the server (step figures batched every 0.2 s,
  evaluations, snapshots), encoded by `training.messages` through a real socket pair another thread drains;
- `full_decode`: evaluations that greedy-decode every held-out pair (the evaluation before it learned to
  decode only the pairs teacher forcing does not solve);
- `order`: how the training pairs are batched ("bucketed": the trainer's length buckets of 20 batches;
  "random": no bucketing, each batch sorted only within itself; "sorted": the whole epoch sorted by length,
  the batches shuffled).

`run_all(specs, jobs)` runs specs in `jobs` fresh processes (one torch thread each) and yields each
result as it ends. CPU seconds are thread CPU time, so two runs side by side on two cores measure what
each would take alone on one (within the noise of a shared machine).
"""

from __future__ import annotations

import multiprocessing
import statistics
import threading
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass, field

TARGETS = (0.90, 0.95)
ORDERS = {"bucketed": 20, "random": 1, "sorted": 10_000}  # `model.data.batches`' bucket, in batches


@dataclass(frozen=True)
class Spec:
    """One run: a recipe (`TrainConfig` fields; the defaults fill the rest), a seed and what the job does besides."""

    row: str
    settings: dict = field(default_factory=dict)
    seed: int = 0
    probe_every: int = 0
    messages: bool = False
    full_decode: bool = False
    order: str = "bucketed"
    stop_at: float | None = None  # end the run at the first evaluation at or above this exact match


def _init_worker() -> None:
    import torch

    torch.set_num_threads(1)


def measure(spec: Spec) -> dict:
    """Train `spec`'s recipe and return its figures (see the module's docstring)."""
    import torch

    from model import evaluate as ev_mod
    from model import train as train_mod
    from model.data import batches
    from model.probes import PROBES, find_reference, snapshots
    from model.train import TrainConfig, Trainer
    from model.train_settings import toy_data, toy_sha256
    from training import messages as m

    torch.set_num_threads(1)
    tcfg = TrainConfig(**{**spec.settings, "seed": spec.seed})
    data = toy_data(tcfg.direction)
    torch.manual_seed(tcfg.seed)  # dropout draws from torch's global generator, as in the CLI and the worker
    trainer = Trainer(tcfg, data=data, data_sha256=toy_sha256())
    bucket = ORDERS[spec.order]
    if bucket != ORDERS["bucketed"]:

        def next_batch():  # the trainer's own loop with another bucket size
            while True:
                batch = next(trainer._batches, None)
                if batch is not None:
                    return batch
                trainer._batches = iter(
                    batches(
                        trainer.encoded, tcfg.batch_size, shuffle=True, seed=tcfg.seed + trainer._epoch, bucket=bucket
                    )
                )
                trainer._epoch += 1

        trainer.next_batch = next_batch
    if spec.full_decode:

        def decode_all(bundle, pairs, interventions=None, batch_size=256, encoded=None, on_batch=None):
            ev_mod.translate_pairs(bundle, pairs, interventions, batch_size, encoded, on_batch)  # the loss pass
            return ev_mod.translate_batch(bundle, [p.src for p in pairs], interventions, batch_size)

        train_mod.translate_pairs = decode_all  # this process only: it runs nothing else
    probes = list(PROBES[tcfg.direction]) if spec.probe_every else []
    references = [find_reference(data, p, tcfg.direction.split("-")[0]) for p in probes]
    conn = _Drain() if spec.messages else None

    cpu = 0.0
    step_ms: list[float] = []
    hits: dict[float, dict] = {}
    evals: list[dict] = []
    pending: list = []
    flushed = time.perf_counter()
    last = None
    if probes:
        c0 = time.thread_time()
        snap = snapshots(trainer, tcfg.direction, probes, references)
        if conn:
            conn.send(m.Snapshots(tuple(snap)))
        cpu += time.thread_time() - c0
    while trainer.step < tcfg.steps:
        c0 = time.thread_time()
        event = trainer.train_step()
        step_ms.append(1000 * (time.thread_time() - c0))
        if conn:
            pending.append((event, 0.0))
            if time.perf_counter() - flushed >= 0.2:
                conn.send(m.Steps(tuple(pending)))
                pending, flushed = [], time.perf_counter()
        if probes and trainer.step % spec.probe_every == 0:
            snap = snapshots(trainer, tcfg.direction, probes, references)
            if conn:
                conn.send(m.Steps(tuple(pending)))
                conn.send(m.Snapshots(tuple(snap)))
                pending, flushed = [], time.perf_counter()
        evaluate = trainer.step == tcfg.steps or (tcfg.eval_every and trainer.step % tcfg.eval_every == 0)
        if evaluate:
            last = trainer.evaluate()
            if conn:
                conn.send(m.Eval(last, 0.0))
        cpu += time.thread_time() - c0
        if evaluate:
            evals.append({"step": last.step, "exact_match": last.exact_match, "cpu_s": round(cpu, 2)})
            for t in TARGETS:
                if t not in hits and last.exact_match >= t:
                    hits[t] = {"step": last.step, "cpu_s": round(cpu, 2)}
            if spec.stop_at is not None and last.exact_match >= spec.stop_at:
                break
    if conn:
        conn.close()
    return {
        "row": spec.row,
        "seed": spec.seed,
        "settings": spec.settings,
        "parameters": sum(p.numel() for p in trainer.model.parameters()),
        "steps": trainer.step,
        "cpu_s": round(cpu, 2),
        "ms_per_step": round(statistics.median(step_ms), 2),
        "hits": {str(t): h for t, h in hits.items()},
        "evals": evals,
        "exact_match": last.exact_match,
        "bleu": last.bleu,
        "coref_accuracy": last.coref_accuracy,
        "heldout_loss": last.heldout_loss,
    }


class _Drain:
    """One end of a socket pair whose other end a thread reads and drops: the training process' messages."""

    def __init__(self):
        from training import messages

        self.messages = messages
        self.conn, other = multiprocessing.Pipe()

        def drain() -> None:
            try:
                while True:
                    messages.recv(other)
            except (EOFError, OSError):
                pass

        self.thread = threading.Thread(target=drain, daemon=True)
        self.thread.start()

    def send(self, msg) -> None:
        self.messages.send(self.conn, msg)

    def close(self) -> None:
        self.conn.close()
        self.thread.join(5)


def run_all(specs: Iterable[Spec], jobs: int = 2) -> Iterator[dict]:
    """Run every spec in `jobs` fresh processes (spawned: no state shared with this one); yield results as they end."""
    specs = list(specs)
    if jobs <= 1:
        for s in specs:
            yield measure(s)
        return
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx, initializer=_init_worker, max_tasks_per_child=1) as pool:
        todo = iter(specs)
        running = set()
        for s in todo:  # keep at most `jobs` submitted, so a run's thread CPU time is its own
            running.add(pool.submit(measure, s))
            if len(running) >= jobs:
                break
        while running:
            done, running = wait(running, return_when=FIRST_COMPLETED)
            for f in done:
                yield f.result()
                nxt = next(todo, None)
                if nxt is not None:
                    running.add(pool.submit(measure, nxt))


def summary(results: list[dict]) -> dict:
    """Medians over the seeds of one row; `reached` counts the seeds that reached each target."""
    out: dict = {
        "seeds": len(results),
        "parameters": results[0]["parameters"],
        "ms_per_step": statistics.median(r["ms_per_step"] for r in results),
    }
    for t in TARGETS:
        hit = [r["hits"][str(t)] for r in results if str(t) in r["hits"]]
        out[f"reached_{t}"] = len(hit)
        out[f"steps_{t}"] = statistics.median(h["step"] for h in hit) if len(hit) == len(results) else None
        out[f"cpu_{t}"] = statistics.median(h["cpu_s"] for h in hit) if len(hit) == len(results) else None
    for k in ("exact_match", "bleu"):
        out[k] = statistics.median(r[k] for r in results)
    corefs = [r["coref_accuracy"] for r in results if r["coref_accuracy"] is not None]
    out["coref_accuracy"] = statistics.median(corefs) if corefs else None
    return out
