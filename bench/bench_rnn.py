"""The recurrent encoder-decoder with attention against the Transformer, measured in one run.

1. Sequential steps per sentence on the toy set's real pairs: RNN m + t, Transformer 1 + t (translating)
   and 2 (training with teacher forcing).
2. Wall time to encode a batch of 64 sentences as the length grows (shipped models, medians, the two
   models alternating).
3. Training steps and CPU seconds to 95% held-out exact match: both recipes trained a step of each in
   turn, held-out evaluation every --eval-every steps (evaluations excluded from the clock).
4. Held-out exact match by source length, and il/elle accuracy (shipped models).
5. ‖∂out_t/∂x_i‖ against t − i in each encoder, relative to distance 0 (medians over held-out sentences).

The machine is shared and noisy: compare the ratios, measured here in one run.

    python -m bench.bench_rnn                       # prints the tables (about 4-6 minutes, one thread)
    python -m bench.bench_rnn --write               # ... and writes assets/rnn_comparison.json for the app
    python -m bench.bench_rnn --skip-training       # without part 3 (about 1 minute)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

from model import checkpoint
from model.compare import accuracy_by_length, encode_times, gradient_by_distance, sequential_steps, train_to_target
from model.data import load_dataset
from model.train import TrainConfig

OUT = checkpoint.ASSETS / "rnn_comparison.json"
RNN_STEM = checkpoint.ASSETS / "checkpoints" / "rnn"
LENGTHS = [4, 8, 16, 32, 63]


def ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}x" if a is not None and b else "-"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.bench_rnn", description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--max-steps", type=int, default=2000, help="give up on the target after this many steps")
    ap.add_argument("--eval-every", type=int, default=50)
    ap.add_argument("--target", type=float, default=0.95)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--sentences", type=int, default=40, help="held-out sentences for the gradient measurement")
    ap.add_argument("--skip-training", action="store_true", help="leave out part 3 (keeps the file's old one)")
    ap.add_argument("--write", nargs="?", const=str(OUT), default=None, metavar="PATH",
                    help=f"write the figures as JSON (default path: {OUT.relative_to(checkpoint.ASSETS.parent)})")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    started = time.time()
    rnn, tf = checkpoint.load(RNN_STEM), checkpoint.load(checkpoint.SHIPPED)
    data = load_dataset()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), load {os.getloadavg()[0]:.1f}; "
          f"RNN {rnn.config.cell}/{rnn.config.attention} H={rnn.config.hidden}, Transformer d_model "
          f"{tf.config.d_model}, {tf.config.n_enc_layers}+{tf.config.n_dec_layers} layers", flush=True)

    out: dict = {}
    if args.write and Path(args.write).is_file():
        out = json.loads(Path(args.write).read_text(encoding="utf-8"))

    rows = sequential_steps(data["train"])
    out["sequential_steps"] = {"rows": rows, "source": "toy_en_fr.tsv training pairs, mean target length per m"}
    print("\n1. sequential steps (m and t in tokens, <eos> included)")
    print(f"{'m':>4s} {'t':>4s} {'pairs':>6s} {'RNN m+t':>8s} {'TF 1+t':>7s} {'TF train':>9s}")
    for r in rows:
        print(f"{r['m']:4d} {r['t']:4d} {r['n']:6d} {r['rnn']:8d} {r['transformer_decode']:7d} "
              f"{r['transformer_train']:9d}")

    rows = encode_times(rnn.model, tf.model, LENGTHS, batch=64, repeats=args.repeats)
    out["encode_time"] = {"batch": 64, "repeats": args.repeats, "threads": args.threads, "rows": rows}
    print(f"\n2. encode a batch of 64, median ms of {args.repeats}")
    print(f"{'length':>7s} {'RNN':>9s} {'Transformer':>12s} {'RNN/TF':>8s}")
    for r in rows:
        rt = ratio(r["rnn_ms"], r["transformer_ms"])
        print(f"{r['length']:7d} {r['rnn_ms']:9.2f} {r['transformer_ms']:12.2f} {rt:>8s}")

    if not args.skip_training:
        base = replace(TrainConfig(), steps=args.max_steps, eval_every=args.eval_every)
        tcfgs = {"rnn": replace(base, arch="rnn", cell=rnn.config.cell, attention=rnn.config.attention),
                 "transformer": base}
        print(f"\n3. training to {args.target:.0%} held-out exact match (evaluation every {args.eval_every} steps)",
              flush=True)

        def progress(name, ev, cpu):
            print(f"   {name:12s} step {ev.step:5d}  exact match {ev.exact_match:6.1%}  CPU {cpu:6.1f} s", flush=True)

        res = train_to_target(tcfgs, data, args.target, progress)
        out["training"] = {"target": args.target, "max_steps": args.max_steps, "eval_every": args.eval_every,
                           "recipe": "TrainConfig() defaults (d_model 128, batch 64, warm-up 200, lr_scale 0.35); "
                                     f"RNN: arch rnn, {rnn.config.cell}, {rnn.config.attention}", **res}
        r, f = res["rnn"], res["transformer"]
        print(f"{'':34s} {'RNN':>10s} {'Transformer':>12s} {'RNN/TF':>8s}")
        for label, key in (("parameters", "parameters"), (f"steps to {args.target:.0%}", "steps_to_target"),
                           (f"CPU s to {args.target:.0%}", "cpu_seconds_to_target"),
                           ("ms per step (median)", "ms_per_step")):
            print(f"{label:34s} {r[key] or 'not hit':>10} {f[key] or 'not hit':>12} {ratio(r[key], f[key]):>8s}")

    acc = accuracy_by_length(rnn, tf, data["heldout"])
    out["accuracy_by_length"] = {"rows": acc["rows"], "exact_match": acc["exact_match"]}
    out["coref"] = acc["coref"]
    print("\n4. held-out exact match by source length")
    for r in acc["rows"]:
        print(f"{r['bucket']:>12s} {r['n']:5d} pairs   RNN {r['rnn']:6.1%}   Transformer {r['transformer']:6.1%}")
    c = acc["coref"]
    print(f"il/elle ({c['n']} coref sentences): RNN {c['rnn']:.1%}, Transformer {c['transformer']:.1%}")

    sentences = [p.src for p in data["heldout"]][:: max(1, len(data["heldout"]) // args.sentences)][: args.sentences]
    g = gradient_by_distance(rnn, tf, sentences)
    out["gradient"] = g
    print(f"\n5. ‖∂out_t/∂x_i‖ / ‖∂out_t/∂x_t‖, median over {g['n_pairs']} pairs in {g['n_sentences']} sentences")
    print(f"{'t-i':>4s} {'pairs':>6s} {'RNN':>9s} {'Transformer':>12s}")
    for d, n, a, b in zip(g["distance"], g["count"], g["rnn"], g["transformer"], strict=True):
        print(f"{d:4d} {n:6d} {a:9.4f} {b:12.4f}")

    out["meta"] = {"command": "python -m bench.bench_rnn --write" + (" --skip-training" if args.skip_training else ""),
                   "measured": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "torch": torch.__version__,
                   "threads": args.threads, "python": platform.python_version(), "cpus": os.cpu_count(),
                   "load_average": round(os.getloadavg()[0], 1), "seconds": round(time.time() - started, 1),
                   "rnn_checkpoint": rnn.meta.get("weights_sha256", "")[:16],
                   "transformer_checkpoint": tf.meta.get("weights_sha256", "")[:16]}
    if args.write:
        if "training" not in out:
            print("error: no training figures (run once without --skip-training)", file=sys.stderr)
            return 1
        Path(args.write).write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
        print(f"\nwrote {args.write}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
