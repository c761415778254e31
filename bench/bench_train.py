"""Training speed to a quality target, decoding and evaluation speed: ours against torch.nn.Transformer.

In one run:
1. Train the default recipe (`model.train.TrainConfig()`) with our Transformer and with
   `bench.reference.TorchReference` (nn.Transformer of the same size with the same embeddings and
   generator, trained by the same `Trainer`). Every `--eval-every` steps the whole held-out split is
   translated greedily; we report the steps and the training time (evaluations excluded; wall time
   with them too) until held-out exact match first reaches 90% and 95%.
2. Encode + 10 greedy decoding steps for an 8-word sentence (median ms; target <= 25 ms).
3. Held-out evaluation of the whole split (median s; target <= 3 s).

The machine is shared and noisy: compare the ratios, measured here in one run.

Usage: python -m bench.bench_train [--threads 1] [--max-steps 3000] [--eval-every 50] [--repeats 15]
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from dataclasses import replace

import torch

from bench.reference import TorchReference
from model.decoding import _next_log_probs
from model.evaluate import evaluate
from model.pipeline import prepare
from model.trace import Trace
from model.train import EvalEvent, TrainConfig, Trainer
from model.transformer import Transformer
from model.vocab import BOS_ID, tokenize

TARGETS = (0.90, 0.95)


class Run:
    """One model trained by `Trainer`, advanced a step at a time, with its clocks.

    Two clocks: wall time, and CPU time of this process (with one torch thread the CPU time is what
    the wall time would be on an idle core, so it survives a busy shared machine better). Both
    exclude the held-out evaluations; `wall` also has the total including them.
    """

    def __init__(self, name: str, factory, tcfg: TrainConfig, data):
        self.name = name
        torch.manual_seed(tcfg.seed)
        self.trainer = Trainer(tcfg, data, model_factory=factory)
        self.stop = threading.Event()
        self.events = self.trainer.run(self.stop)
        self.hit: dict[float, dict[str, float]] = {}
        self.wall = self.cpu = self.eval_wall = self.eval_cpu = 0.0
        self.done = False

    def advance(self) -> None:
        """Run until the next training step is done (evaluations on the way are scored and timed)."""
        while not self.done:
            w0, c0 = time.perf_counter(), time.process_time()
            ev = next(self.events, None)
            dw, dc = time.perf_counter() - w0, time.process_time() - c0
            self.wall += dw
            self.cpu += dc
            if ev is None:
                self.done = True
            elif isinstance(ev, EvalEvent):
                self.eval_wall += dw
                self.eval_cpu += dc
                self.on_eval(ev)
            else:
                return

    def on_eval(self, ev: EvalEvent) -> None:
        train_wall, train_cpu = self.wall - self.eval_wall, self.cpu - self.eval_cpu
        print(
            f"  {self.name:6s} step {ev.step:5d}  train {train_wall:6.1f} s (cpu {train_cpu:6.1f} s)  "
            f"wall {self.wall:6.1f} s  EM {ev.exact_match:6.1%}  BLEU {ev.bleu:5.1f}  eval {ev.seconds:5.2f} s",
            flush=True,
        )
        for t in TARGETS:
            if t not in self.hit and ev.exact_match >= t:
                self.hit[t] = {"step": ev.step, "train_s": train_wall, "cpu_s": train_cpu, "wall_s": self.wall}
        if len(self.hit) == len(TARGETS):
            self.stop.set()


def train_both(tcfg: TrainConfig, data) -> dict[str, Run]:
    """Train ours and torch's reference in lock-step, one step each in turn, so machine noise hits both alike."""
    runs = {"ours": Run("ours", Transformer, tcfg, data), "torch": Run("torch", TorchReference, tcfg, data)}
    while not all(r.done for r in runs.values()):
        for r in runs.values():
            r.advance()
    return runs


@torch.no_grad()
def encode_and_decode(model, src: torch.Tensor, n: int = 10) -> None:
    """One encode and n greedy steps (no early stop at EOS: always n decoder passes)."""
    trace = Trace(record=False)
    memory = model.encode(src, trace)
    out = torch.tensor([[BOS_ID]])
    for _ in range(n):
        nxt = _next_log_probs(model, memory, src, out, trace).argmax(-1)  # [1]
        out = torch.cat([out, nxt[:, None]], dim=1)


def median_time(fn, repeats: int, warmup: int = 2) -> tuple[float, float]:
    """(median wall s, median CPU s) of fn()."""
    for _ in range(warmup):
        fn()
    wall, cpu = [], []
    for _ in range(repeats):
        w0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - w0)
        cpu.append(time.process_time() - c0)
    return statistics.median(wall), statistics.median(cpu)


def ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}x" if a is not None and b else "-"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--max-steps", type=int, default=3000, help="give up on the targets after this many steps")
    ap.add_argument("--eval-every", type=int, default=50)
    ap.add_argument("--repeats", type=int, default=15)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    tcfg = replace(TrainConfig(), steps=args.max_steps, eval_every=args.eval_every)
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads; recipe: d_model {tcfg.d_model}, "
        f"{tcfg.n_heads} heads, {tcfg.n_layers}+{tcfg.n_layers} layers, d_ff {tcfg.d_ff}, batch {tcfg.batch_size}, "
        f"warmup {tcfg.warmup}, lr_scale {tcfg.lr_scale}; held-out evaluation every {tcfg.eval_every} steps"
    )

    from model.data import load_dataset

    data = load_dataset(direction=tcfg.direction)
    runs = train_both(tcfg, data)

    bundles = {k: r.trainer.bundle(name=k) for k, r in runs.items()}
    held = data["heldout"]
    sentence = next(p.src for p in held if len(tokenize(p.src, "en")) == 8)  # an 8-word held-out sentence
    src = prepare(bundles["ours"], sentence).src()  # [1, 9] with EOS; both models share the vocabularies
    decode = {k: median_time(lambda b=b: encode_and_decode(b.model, src), args.repeats * 4) for k, b in bundles.items()}
    evals = {
        k: median_time(lambda b=b: evaluate(b, held), max(3, args.repeats // 3), warmup=1) for k, b in bundles.items()
    }
    final = {k: evaluate(b, held) for k, b in bundles.items()}

    def row(label: str, o: float | None, r: float | None, fmt: str = "10.1f", note: str = "") -> None:
        cells = " ".join(f"{c:{fmt}}" if c is not None else f"{'not hit':>10s}" for c in (o, r))
        print(f"{label:46s} {cells} {ratio(o, r):>11s}{note}")

    print(f"\n8-word sentence for decoding: {sentence!r}; {len(held)} held-out pairs\n")
    print(f"{'':46s} {'ours':>10s} {'torch':>10s} {'ours/torch':>11s}")
    for t in TARGETS:
        o, r = runs["ours"].hit.get(t, {}), runs["torch"].hit.get(t, {})
        row(f"steps to {t:.0%} held-out exact match", o.get("step"), r.get("step"), "10.0f")
        row("  training wall s (evaluations excluded)", o.get("train_s"), r.get("train_s"))
        row("  training CPU s (evaluations excluded)", o.get("cpu_s"), r.get("cpu_s"))
        row("  wall s including evaluations", o.get("wall_s"), r.get("wall_s"))
    per_step = {k: 1000 * (r.wall - r.eval_wall) / max(r.trainer.step, 1) for k, r in runs.items()}
    row("training step, mean wall ms", per_step["ours"], per_step["torch"])
    per_step = {k: 1000 * (r.cpu - r.eval_cpu) / max(r.trainer.step, 1) for k, r in runs.items()}
    row("training step, mean CPU ms", per_step["ours"], per_step["torch"])
    ok = "ok" if decode["ours"][0] <= 0.025 else "MISSED"
    row(
        "encode + 10 greedy steps, median wall ms",
        decode["ours"][0] * 1e3,
        decode["torch"][0] * 1e3,
        "10.2f",
        f"   target <= 25 ms: {ok}",
    )
    row("encode + 10 greedy steps, median CPU ms", decode["ours"][1] * 1e3, decode["torch"][1] * 1e3, "10.2f")
    ok = "ok" if evals["ours"][0] <= 3 else "MISSED"
    row("held-out evaluation, median wall s", evals["ours"][0], evals["torch"][0], "10.2f", f"   target <= 3 s: {ok}")
    row("held-out evaluation, median CPU s", evals["ours"][1], evals["torch"][1], "10.2f")
    for k, m in final.items():
        coref = "n/a" if m.coref_accuracy is None else f"{m.coref_accuracy:.1%}"
        print(
            f"final {k:5s}: step {runs[k].trainer.step}, exact match {m.exact_match:.1%}, BLEU {m.bleu:.1f}, "
            f"il/elle {coref}"
        )


if __name__ == "__main__":
    main()
