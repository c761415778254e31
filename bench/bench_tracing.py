"""The causal-tracing view's cost, as a multiple of one traced forward pass, measured in the same run.

A 12-word pair ("the big animal didn't cross the street because it was too tired" / "... wide"), the shipped
model, one torch thread (as the app's server runs). Rounds alternate between one traced forward pass (the
clean sentence teacher-forced up to the pronoun, every tensor recorded) and each part of the view, so machine
noise hits them alike; figures are medians. The view computes a pair once (two greedy translations and two
traced passes) and its tracing once (the four grids); the app caches both per pair, so a rerun costs neither.
Then the page itself through Streamlit's AppTest (server side): a run on a new pair (the app warmed on another
pair first), and a rerun with the pair cached.

Usage: python -m bench.bench_tracing [--rounds R]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

from explain import tracing
from model import checkpoint
from model.transformer import traced

CLEAN = "the big animal didn't cross the street because it was too tired"
CORRUPT = "the big animal didn't cross the street because it was too wide"


def clock(fn, reps: int = 1) -> float:
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - t0) / reps


def page_times() -> tuple[float, float]:
    """The tracing page's run on a new pair (imports, model and the default pair warmed first), and its rerun with
    the pair and its tracing cached, in seconds."""
    from streamlit.testing.v1 import AppTest

    import ui.tracing  # noqa: F401 - imports the classroom package before the page's folder (pages/classroom.py) can
    from ui.page_list import by_name

    at = AppTest.from_file(str(by_name("tracing").path), default_timeout=120)
    at.run()  # the default pair: imports, the model, the app's caches
    at.session_state["sentence"] = CLEAN
    at.session_state["tracing_other"] = CORRUPT
    at.session_state["tracing_other_for"] = CLEAN
    first = clock(at.run)
    assert not at.exception, at.exception
    again = statistics.median(clock(at.run) for _ in range(5))
    return first, again


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    torch.set_num_threads(1)
    b = checkpoint.load(checkpoint.SHIPPED)
    p = tracing.pair(b, CLEAN, CORRUPT)
    src, tgt = p.clean.src(), p.tgt_in()
    parts = {
        "one traced forward pass": lambda: traced(b.model, src, tgt),
        "the pair (2 greedy translations + 2 traced passes)": lambda: tracing.pair(b, CLEAN, CORRUPT),
        "the tracing view's four grids": lambda: tracing.trace_pair(b, p),
        "the summary at the pronoun (lesson step 19)": lambda: tracing.trace_pair(b, p, every_position=False),
        "one head, part by part": lambda: tracing.trace_head(b, p, "dec.0.cross_attn", 3),
    }
    for fn in parts.values():  # warm up
        fn()
    times: dict[str, list[float]] = {k: [] for k in parts}
    for _ in range(args.rounds):
        for name, fn in parts.items():
            times[name].append(clock(fn, 20 if name == "one traced forward pass" else 1))
    med = {k: statistics.median(v) for k, v in times.items()}
    one = med["one traced forward pass"]
    t = tracing.trace_pair(b, p)
    runs = sum(len(g.rows) * len(g.columns) for g in (t.encoder, t.heads, t.decoder, t.mask))
    print(
        f"pair: {len(p.clean.tokens)} words; followed word “{p.word}” at decoder position {p.position}; "
        f"{runs} patched or hidden runs in the four grids; load {os.getloadavg()[0]:.2f} (1 min)"
    )
    for name, v in med.items():
        print(f"{name:55s} {1000 * v:9.1f} ms   {v / one:7.1f}x one traced pass")
    view = med["the pair (2 greedy translations + 2 traced passes)"] + med["the tracing view's four grids"]
    print(
        f"{'a new pair on the tracing page (pair + grids)':55s} {1000 * view:9.1f} ms   {view / one:7.1f}x "
        f"one traced pass ({1000 * view / runs:.2f} ms a run)"
    )
    first, again = page_times()
    print(
        f"the page through AppTest (server side): a new pair {first:.2f} s, a rerun with it cached {again:.3f} s "
        f"(median of 5)"
    )


if __name__ == "__main__":
    main()
