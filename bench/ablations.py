"""The paper's Table 3 at toy scale: vary one thing of the training page's default recipe at a time.

Rows, in the paper's groups (the base: `model.train_settings.DEFAULTS`, the run a student starts with
one click):
(A) the number of heads at constant computation (d_model fixed, d_k = d_v = d_model / h);
(B) a smaller key size d_k (values keep d_model / h);
(C) depth, width d_model, feed-forward width d_ff;
(D) dropout and label smoothing;
(E) learned positional embeddings instead of the sinusoids, plus two rows the lectures ask about and
    the paper did not run: no positional encoding at all, and no division of the scores by sqrt(d_k).

Every row trains the base's number of steps for each of `--seeds` seeds (one torch thread, `--jobs`
processes) and records its parameters, the final held-out exact match, BLEU and il/elle accuracy,
and the steps at which held-out exact match first reached 90% and 95%. The toy differences are small:
the seeds give the spread the page reports.

    python -m bench.ablations                  # prints the table (about 10 CPU-minutes, 2 processes)
    python -m bench.ablations --write          # ... and writes assets/ablations.json for the app
    python -m bench.ablations --rows base A    # only some groups (never written)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch
from tqdm import tqdm

from bench.training_runs import Spec, run_all
from explain import ablations
from model import checkpoint, train_settings
from model.train import TrainConfig


def rows(base: TrainConfig) -> list[tuple[str, str, dict]]:
    """(group, label, changes from the base) for every row; the base first."""
    D, H, F, L = base.d_model, base.n_heads, base.d_ff, base.n_layers
    d_k = D // H
    out = [
        ("base", f"base: the training page's default (h = {H}, d_k = {d_k}, N = {L}, d_model = {D}, d_ff = {F})", {})
    ]
    out += [("A", f"h = {h}, d_k = d_v = {D // h}", {"n_heads": h}) for h in (1, 2, 4, 8) if h != H and D % h == 0]
    out += [("B", f"d_k = {k} (d_v = {d_k})", {"key_size": k}) for k in (d_k // 2, d_k // 4) if k >= 1]
    out += [("C", f"N = {n} layer{'s' if n > 1 else ''}", {"n_layers": n}) for n in (1, 2, 3) if n != L]
    out += [("C", f"d_model = {d} (d_k = {d // H})", {"d_model": d}) for d in (D // 2, 2 * D)]
    out += [("C", f"d_ff = {f}", {"d_ff": f}) for f in (F // 2, 2 * F)]
    out += [("D", f"dropout P_drop = {p:g}", {"dropout": p}) for p in (0.0, 0.1, 0.3) if p != base.dropout]
    out += [
        ("D", f"label smoothing ε_ls = {e:g}", {"label_smoothing": e}) for e in (0.0, 0.1) if e != base.label_smoothing
    ]
    out += [
        ("E", "learned positional embeddings instead of sinusoids", {"positions": "learned"}),
        ("E", "no positional encoding (not in the paper)", {"positions": "none"}),
        ("E", "no ÷√d_k: raw dot products (not in the paper)", {"scale_scores": False}),
    ]
    return out


def settings_of(base: TrainConfig, changes: dict) -> dict:
    """The full recipe of a row: the base's fields with `changes`."""
    return {**dataclasses.asdict(base), **changes}


def parameters(settings: dict) -> int:
    prof = train_settings.toy_profile(settings["direction"])
    return train_settings.parameters(TrainConfig(**settings), prof)


def seed_record(result: dict) -> dict:
    """The figures of one run, as the file keeps them."""
    hits = result["hits"]
    return {
        "seed": result["seed"],
        "exact_match": result["exact_match"],
        "bleu": result["bleu"],
        "coref_accuracy": result["coref_accuracy"],
        "steps_to_90": hits.get("0.9", {}).get("step"),
        "steps_to_95": hits.get("0.95", {}).get("step"),
    }


def measure_rows(base: TrainConfig, chosen: list[tuple[str, str, dict]], seeds: list[int], jobs: int) -> list[dict]:
    """Train every chosen row for every seed; returns the file's rows (in the order of `chosen`)."""
    specs = [Spec(label, settings_of(base, changes), seed) for seed in seeds for _, label, changes in chosen]
    by_label: dict[str, list[dict]] = {}
    with tqdm(total=len(specs), unit="run", dynamic_ncols=True) as bar:
        for r in run_all(specs, jobs):
            by_label.setdefault(r["row"], []).append(seed_record(r))
            bar.set_postfix_str(f"{r['row'][:30]} seed {r['seed']}: EM {r['exact_match']:.1%}", refresh=False)
            bar.update(1)
    return [
        {
            "group": group,
            "label": label,
            "changes": changes,
            "settings": settings_of(base, changes),
            "parameters": parameters(settings_of(base, changes)),
            "seeds": sorted(by_label[label], key=lambda s: s["seed"]),
        }
        for group, label, changes in chosen
    ]


def _fmt_steps(values: list[int | None], budget: int) -> str:
    got = [v for v in values if v is not None]
    if len(got) < len(values):
        return f"{len(got)}/{len(values)} by {budget}"
    return f"{statistics.median(got):.0f} ({min(got)}-{max(got)})"


def print_table(data: dict) -> None:
    budget = data["meta"]["steps"]
    print(
        f"\n{'group':5s} {'row':52s} {'params':>8s} {'exact match':>18s} {'BLEU':>6s} {'il/elle':>8s} "
        f"{'steps to 95%':>16s}"
    )
    for row in data["rows"]:
        s = row["seeds"]
        em = [x["exact_match"] for x in s]
        coref = [x["coref_accuracy"] for x in s if x["coref_accuracy"] is not None]
        print(
            f"{row['group']:5s} {row['label'][:52]:52s} {row['parameters']:8,d} "
            f"{statistics.median(em):6.1%} ({min(em):.1%}-{max(em):.1%}) "
            f"{statistics.median(x['bleu'] for x in s):6.1f} "
            f"{(statistics.median(coref) if coref else float('nan')):8.1%} "
            f"{_fmt_steps([x['steps_to_95'] for x in s], budget):>16s}"
        )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.ablations", description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=3, help="seeds per row (0, 1, ...)")
    ap.add_argument("--jobs", type=int, default=2, help="training processes at once (one torch thread each)")
    ap.add_argument("--rows", nargs="*", choices=ablations.GROUPS, help="only these groups (the file is not written)")
    ap.add_argument(
        "--write",
        nargs="?",
        const=str(ablations.PATH),
        default=None,
        metavar="PATH",
        help=f"write the rows as JSON (default: {ablations.PATH.relative_to(checkpoint.ASSETS.parent)})",
    )
    args = ap.parse_args(argv)
    if args.rows and args.write:
        print("error: --write needs every row (leave out --rows)", file=sys.stderr)
        return 2
    base = train_settings.DEFAULTS
    chosen = [r for r in rows(base) if not args.rows or r[0] in args.rows or r[0] == "base"]
    started = time.time()
    print(
        f"torch {torch.__version__}, load {os.getloadavg()[0]:.1f}; {len(chosen)} rows x {args.seeds} seeds, "
        f"{base.steps} steps each, held-out evaluation every {base.eval_every} steps",
        flush=True,
    )
    data = {
        "meta": {
            "command": "python -m bench.ablations --write",
            "steps": base.steps,
            "eval_every": base.eval_every,
            "seeds": args.seeds,
            "base": dataclasses.asdict(base),
            "measured": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "torch": torch.__version__,
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
        },
        "rows": measure_rows(base, chosen, list(range(args.seeds)), args.jobs),
    }
    data["meta"]["seconds"] = round(time.time() - started, 1)
    ablations.check(data)
    print_table(data)
    if args.write:
        Path(args.write).write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"\nwrote {args.write}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
