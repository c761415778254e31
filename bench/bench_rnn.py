"""The recurrent encoder-decoder with attention against the Transformer, measured in one run.

1. Sequential steps per sentence on the toy set's real pairs: RNN m + t, Transformer 1 + t (translating)
   and 2 (training with teacher forcing).
2. Wall time to encode a batch of 64 sentences as the length grows (shipped models, medians, the two
   models alternating).
3. Training steps and CPU seconds to 95% held-out exact match, each architecture given the same sweep:
   the same grid of recipes (width, learning-rate scale, warm-up; `GRID`), --seeds seeds each, one torch
   thread per run, two runs at a time (`bench.training_runs`: evaluations on the clock, as in a training
   job). For each architecture the recipe with the least median CPU time to 95% is its result, so neither
   is tuned while the other is not.
4. Held-out exact match by source length, and il/elle accuracy (shipped models).
5. ‖∂out_t/∂x_i‖ against t − i in each encoder, relative to distance 0 (medians over held-out sentences).

The machine is shared and noisy: compare the ratios, measured here in one run.

    python -m bench.bench_rnn                       # prints the tables (about 15 CPU-minutes, 2 processes)
    python -m bench.bench_rnn --write               # ... and writes assets/rnn_comparison.json for the app
    python -m bench.bench_rnn --skip-training       # without part 3 (about 1 minute)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from itertools import product
from pathlib import Path

import torch

from bench.training_runs import Spec, run_all
from explain.compare import accuracy_by_length, encode_times, gradient_by_distance, sequential_steps
from model import checkpoint, train_settings
from model.data import load_dataset

OUT = checkpoint.ASSETS / "rnn_comparison.json"
RNN_STEM = checkpoint.ASSETS / "checkpoints" / "rnn"
LENGTHS = [4, 8, 16, 32, 63]
GRID = {"d_model": (64, 128), "lr_scale": (0.35, 0.7), "warmup": (50, 200)}  # every combination, both models
FIXED = {"dropout": 0.0, "batch_size": 64, "label_smoothing": 0.1}  # as the training page's default run


def recipes(arch: str, cell: str, attention: str, max_steps: int, eval_every: int) -> dict[str, dict]:
    """label -> the settings of every recipe of the grid for one architecture (the Transformer with the training
    page's default shape: its layers and heads, d_ff = 4 d_model)."""
    base = train_settings.DEFAULTS
    out = {}
    for d, lr, w in product(*GRID.values()):
        settings = {**FIXED, "d_model": d, "lr_scale": lr, "warmup": w, "steps": max_steps, "eval_every": eval_every}
        if arch == "rnn":
            settings.update(arch="rnn", cell=cell, attention=attention)
        else:
            settings.update(n_layers=base.n_layers, n_heads=base.n_heads, d_ff=4 * d)
        out[f"d_model {d}, lr_scale {lr:g}, warm-up {w}"] = settings
    return out


def sweep(grid: dict[str, dict[str, dict]], seeds: int, target: float, jobs: int) -> dict:
    """Train every recipe of both architectures for every seed up to `target`; the sweep's rows and each
    architecture's best recipe (least median CPU seconds to the target, every seed reaching it)."""
    specs = [
        Spec(f"{arch}|{label}", settings, seed, stop_at=target)
        for seed in range(seeds)
        for arch, rs in grid.items()
        for label, settings in rs.items()
    ]
    runs: dict[str, list[dict]] = {}
    for i, r in enumerate(run_all(specs, jobs), 1):
        runs.setdefault(r["row"], []).append(r)
        hit = r["hits"].get(str(target))
        print(
            f"   [{i}/{len(specs)}] {r['row'].replace('|', ': ')}, seed {r['seed']}: "
            + (f"{target:.0%} at step {hit['step']}, {hit['cpu_s']:.1f} CPU s" if hit else "not reached"),
            flush=True,
        )
    rows = []
    for arch, rs in grid.items():
        for label in rs:
            results = runs[f"{arch}|{label}"]
            hits = [r["hits"].get(str(target)) for r in results]
            every = all(hits)
            rows.append(
                {
                    "arch": arch,
                    "recipe": label,
                    "parameters": results[0]["parameters"],
                    "reached": sum(h is not None for h in hits),
                    "seeds": len(results),
                    "steps_to_target": statistics.median(h["step"] for h in hits) if every else None,
                    "cpu_seconds_to_target": round(statistics.median(h["cpu_s"] for h in hits), 1) if every else None,
                    "ms_per_step": round(statistics.median(r["ms_per_step"] for r in results), 1),
                    "final_exact_match": statistics.median(r["exact_match"] for r in results),
                }
            )
    best = {}
    for arch in grid:
        done = [r for r in rows if r["arch"] == arch and r["cpu_seconds_to_target"] is not None]
        best[arch] = (
            min(done, key=lambda r: r["cpu_seconds_to_target"])
            if done
            else max((r for r in rows if r["arch"] == arch), key=lambda r: r["final_exact_match"])
        )
    return {"sweep": rows, **best}


def ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}x" if a is not None and b else "-"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.bench_rnn", description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--max-steps", type=int, default=1500, help="give up on the target after this many steps")
    ap.add_argument("--seeds", type=int, default=2, help="seeds per recipe in the training sweep")
    ap.add_argument("--jobs", type=int, default=2, help="training processes at once in the sweep")
    ap.add_argument("--eval-every", type=int, default=50)
    ap.add_argument("--target", type=float, default=0.95)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--sentences", type=int, default=40, help="held-out sentences for the gradient measurement")
    ap.add_argument("--skip-training", action="store_true", help="leave out part 3 (keeps the file's old one)")
    ap.add_argument(
        "--write",
        nargs="?",
        const=str(OUT),
        default=None,
        metavar="PATH",
        help=f"write the figures as JSON (default path: {OUT.relative_to(checkpoint.ASSETS.parent)})",
    )
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    started = time.time()
    rnn, tf = checkpoint.load(RNN_STEM), checkpoint.load(checkpoint.SHIPPED)
    data = load_dataset()
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), load {os.getloadavg()[0]:.1f}; "
        f"RNN {rnn.config.cell}/{rnn.config.attention} H={rnn.config.hidden}, Transformer d_model "
        f"{tf.config.d_model}, {tf.config.n_enc_layers}+{tf.config.n_dec_layers} layers",
        flush=True,
    )

    out: dict = {}
    if args.write and Path(args.write).is_file():
        out = json.loads(Path(args.write).read_text(encoding="utf-8"))

    rows = sequential_steps(data["train"])
    out["sequential_steps"] = {"rows": rows, "source": "toy_en_fr.tsv training pairs, mean target length per m"}
    print("\n1. sequential steps (m and t in tokens, <eos> included)")
    print(f"{'m':>4s} {'t':>4s} {'pairs':>6s} {'RNN m+t':>8s} {'TF 1+t':>7s} {'TF train':>9s}")
    for r in rows:
        print(
            f"{r['m']:4d} {r['t']:4d} {r['n']:6d} {r['rnn']:8d} {r['transformer_decode']:7d} "
            f"{r['transformer_train']:9d}"
        )

    rows = encode_times(rnn.model, tf.model, LENGTHS, batch=64, repeats=args.repeats)
    out["encode_time"] = {"batch": 64, "repeats": args.repeats, "threads": args.threads, "rows": rows}
    print(f"\n2. encode a batch of 64, median ms of {args.repeats}")
    print(f"{'length':>7s} {'RNN':>9s} {'Transformer':>12s} {'RNN/TF':>8s}")
    for r in rows:
        rt = ratio(r["rnn_ms"], r["transformer_ms"])
        print(f"{r['length']:7d} {r['rnn_ms']:9.2f} {r['transformer_ms']:12.2f} {rt:>8s}")

    if not args.skip_training:
        grid = {
            "rnn": recipes("rnn", rnn.config.cell, rnn.config.attention, args.max_steps, args.eval_every),
            "transformer": recipes("transformer", "", "", args.max_steps, args.eval_every),
        }
        n = len(grid["rnn"])
        print(
            f"\n3. training to {args.target:.0%} held-out exact match: {n} recipes x {args.seeds} seeds for each "
            f"model, evaluation every {args.eval_every} steps",
            flush=True,
        )
        res = sweep(grid, args.seeds, args.target, args.jobs)
        out["training"] = {
            "target": args.target,
            "max_steps": args.max_steps,
            "eval_every": args.eval_every,
            "seeds": args.seeds,
            "grid": {k: list(v) for k, v in GRID.items()},
            "fixed": FIXED,
            "recipe": f"the same {n} recipes for both (every combination of the grid); RNN: "
            f"{rnn.config.cell}, {rnn.config.attention} attention; Transformer: "
            f"{train_settings.DEFAULTS.n_layers}+{train_settings.DEFAULTS.n_layers} layers, "
            f"{train_settings.DEFAULTS.n_heads} heads, d_ff = 4 d_model",
            **res,
        }
        r, f = res["rnn"], res["transformer"]
        print(f"best recipe of each: RNN {r['recipe']}; Transformer {f['recipe']}")
        print(f"{'':34s} {'RNN':>10s} {'Transformer':>12s} {'RNN/TF':>8s}")
        for label, key in (
            ("parameters", "parameters"),
            (f"steps to {args.target:.0%}", "steps_to_target"),
            (f"CPU s to {args.target:.0%}", "cpu_seconds_to_target"),
            ("CPU ms per step (median)", "ms_per_step"),
        ):
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

    out["meta"] = {
        "command": "python -m bench.bench_rnn --write" + (" --skip-training" if args.skip_training else ""),
        "measured": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "torch": torch.__version__,
        "threads": args.threads,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_average": round(os.getloadavg()[0], 1),
        "seconds": round(time.time() - started, 1),
        "rnn_checkpoint": rnn.meta.get("weights_sha256", "")[:16],
        "transformer_checkpoint": tf.meta.get("weights_sha256", "")[:16],
    }
    if args.write:
        if "training" not in out:
            print("error: no training figures (run once without --skip-training)", file=sys.stderr)
            return 1
        Path(args.write).write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
        print(f"\nwrote {args.write}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
