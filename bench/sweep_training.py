"""Why the training page's default run is what it is: one setting changed at a time, measured.

Every row trains the page's default recipe (`model.train_settings.DEFAULTS`) with one thing changed, for
`--seeds` seeds, in `--jobs` processes of one torch thread each, the way a training job spends its core
(`bench.training_runs`: evaluations and, where a row says so, the probes' attention snapshots and the
worker's messages are on the clock). The table gives, as medians over the seeds, the steps and CPU
seconds until held-out exact match first reached 90% and 95% ("n/k": only n of k seeds did), the final
exact match, and the CPU ms of one training step. Start-up of a job (about 2.5 s: the interpreter, torch,
the data) is the same for every row and is not counted here; `bench.bench_training_app` measures it.

    python -m bench.sweep_training                 # every row, 3 seeds (about 10 CPU-minutes, 2 processes)
    python -m bench.sweep_training --rows lr batch # some groups only
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time

import torch

from bench.training_runs import TARGETS, Spec, run_all, summary
from model import train_settings
from model.train import TrainConfig

OLD_PAGE_DEFAULT = {
    "d_model": 64,
    "n_heads": 4,
    "n_layers": 2,
    "d_ff": 128,
    "dropout": 0.1,
    "batch_size": 64,
    "steps": 800,
    "warmup": 100,
    "lr_scale": 0.5,
    "label_smoothing": 0.1,
    "eval_every": 100,
}


def groups(base: TrainConfig) -> dict[str, list[tuple[str, dict, dict]]]:
    """group -> [(label, changed settings, options of the job: probes, messages, evaluation, data order)]."""
    D, F, L, B = base.d_model, base.d_ff, base.n_layers, base.batch_size
    s, w = base.lr_scale, base.warmup
    return {
        "base": [("the page's default", {}, {})],
        "lr": [
            (f"lr_scale {x:g}, warm-up {y}", {"lr_scale": x, "warmup": y}, {})
            for x, y in ((s / 2, w), (2 * s, w), (s, w // 2), (s, 2 * w), (2 * s, 2 * w))
        ],
        "batch": [(f"batch {b}", {"batch_size": b}, {}) for b in (B // 2, B * 3 // 2, 2 * B)],
        "size": [
            (f"d_model {D // 2}", {"d_model": D // 2}, {}),
            (f"d_model {2 * D}, d_ff {2 * F}", {"d_model": 2 * D, "d_ff": 2 * F}, {}),
            (f"d_ff {F // 2}", {"d_ff": F // 2}, {}),
            (f"{L + 1} layers", {"n_layers": L + 1}, {}),
        ],
        "regularisation": [(f"dropout {p:g}", {"dropout": p}, {}) for p in (0.0, 0.1) if p != base.dropout]
        + [(f"label smoothing {e:g}", {"label_smoothing": e}, {}) for e in (0.0, 0.1) if e != base.label_smoothing],
        "evaluation": [(f"evaluate every {e}", {"eval_every": e}, {}) for e in (25, 100) if e != base.eval_every]
        + [("every held-out pair decoded step by step", {}, {"full_decode": True})],
        "overheads": [
            (
                "probe snapshots every 25 steps + messages (the page)",
                {},
                {"probe_every": train_settings.DEFAULT_PROBE_EVERY, "messages": True},
            ),
            ("probe snapshots every 5 steps + messages", {}, {"probe_every": 5, "messages": True}),
        ],
        "order": [(f"data order: {o}", {}, {"order": o}) for o in ("random", "sorted")],
        "reference": [
            ("the previous page default (2 layers, dropout 0.1, lr_scale 0.5, 800 steps)", OLD_PAGE_DEFAULT, {})
        ],
    }


def cell(row: dict, t: float, key: str, fmt: str) -> str:
    value = row[f"{key}_{t}"]
    if value is None:
        return f"{row[f'reached_{t}']}/{row['seeds']}"
    return format(value, fmt)


def main(argv: list[str] | None = None) -> int:
    base = train_settings.DEFAULTS
    table = groups(base)
    ap = argparse.ArgumentParser(prog="python -m bench.sweep_training", description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=2, help="training processes at once (one torch thread each)")
    ap.add_argument("--rows", nargs="*", choices=list(table), help="only these groups (the base always runs)")
    args = ap.parse_args(argv)
    chosen = [
        (g, label, changes, opts)
        for g, rows in table.items()
        if not args.rows or g in args.rows or g == "base"
        for label, changes, opts in rows
    ]
    base_settings = dataclasses.asdict(base)
    specs = [
        Spec(label, {**base_settings, **changes}, seed, **opts)
        for seed in range(args.seeds)
        for _, label, changes, opts in chosen
    ]
    print(
        f"torch {torch.__version__}, load {os.getloadavg()[0]:.1f}; base: d_model {base.d_model}, {base.n_heads} "
        f"heads, {base.n_layers}+{base.n_layers} layers, d_ff {base.d_ff}, dropout {base.dropout:g}, batch "
        f"{base.batch_size}, warm-up {base.warmup}, lr_scale {base.lr_scale:g}, label smoothing "
        f"{base.label_smoothing:g}, {base.steps} steps, evaluation every {base.eval_every}; {len(chosen)} rows x "
        f"{args.seeds} seeds",
        flush=True,
    )
    started = time.time()
    results: dict[str, list[dict]] = {}
    for i, r in enumerate(run_all(specs, args.jobs), 1):
        results.setdefault(r["row"], []).append(r)
        hit = r["hits"].get("0.95")
        print(
            f"  [{i}/{len(specs)}] {r['row']}, seed {r['seed']}: "
            + (f"95% at step {hit['step']} ({hit['cpu_s']:.1f} CPU s)" if hit else "95% not reached")
            + f", final {r['exact_match']:.1%}",
            flush=True,
        )
    head = (
        f"{'group':14s} {'row':56s} {'ms/step':>7s} "
        + " ".join(f"{'steps ' + format(t, '.0%'):>9s}" for t in TARGETS)
        + " "
        + " ".join(f"{'CPU s ' + format(t, '.0%'):>9s}" for t in TARGETS)
        + f" {'final EM':>8s}"
    )
    print(f"\nmedians over {args.seeds} seeds ({time.time() - started:.0f} s)\n{head}")
    for g, label, _, _ in chosen:
        row = summary(results[label])
        print(
            f"{g:14s} {label[:56]:56s} {row['ms_per_step']:7.1f} "
            + " ".join(f"{cell(row, t, 'steps', '.0f'):>9s}" for t in TARGETS)
            + " "
            + " ".join(f"{cell(row, t, 'cpu', '.1f'):>9s}" for t in TARGETS)
            + f" {row['exact_match']:8.1%}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
