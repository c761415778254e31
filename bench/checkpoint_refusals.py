"""What refusing a hostile checkpoint costs, as a fraction of loading the shipped one, measured in the same run.

tests/test_checkpoint_limits.py proves each refusal comes before a tensor is read or the model built, and counts
what it allocates; this times a few of them (the timing a shared machine cannot assert). Rounds alternate
between loading the shipped checkpoint (`from_bytes`, its weights checked, read and built) and each refusal, so
machine noise hits them alike; figures are medians.

Usage: python -m bench.checkpoint_refusals [--rounds R]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
from safetensors.torch import save

from model import checkpoint
from model.checkpoint import CheckpointError, from_bytes


def cases() -> dict[str, tuple[bytes, bytes]]:
    weights = checkpoint.SHIPPED.with_name(checkpoint.SHIPPED.name + ".safetensors").read_bytes()
    meta = json.loads(checkpoint.SHIPPED.with_name(checkpoint.SHIPPED.name + ".json").read_bytes())
    meta.pop("weights_sha256")
    huge = json.loads(json.dumps(meta))
    huge["config"].update(d_model=4096, d_ff=16384)  # the 6 KB JSON that cost 3.6 GB and 26 s on the old loader
    bad_header = (10**9).to_bytes(8, "little") + weights[8:]
    return {
        "d_model 4096 (6 KB JSON)": (save({}), json.dumps(huge).encode()),
        "10,000 nested brackets": (weights, b"[" * 10_000 + b"]" * 10_000),
        "a header claiming 1 GB": (bad_header, json.dumps(meta).encode()),
    }


def seconds(weights: bytes, meta: bytes) -> float:
    t = time.perf_counter()
    try:
        from_bytes(weights, meta)
    except CheckpointError:
        pass
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=30)
    args = ap.parse_args()
    torch.set_num_threads(1)  # as the app's server runs
    shipped = checkpoint.to_bytes(checkpoint.load(checkpoint.SHIPPED))
    refusals = cases()
    times: dict[str, list[float]] = {"load the shipped model": [], **{k: [] for k in refusals}}
    for _ in range(max(1, min(args.rounds, 1000))):
        times["load the shipped model"].append(seconds(*shipped))
        for name, (w, j) in refusals.items():
            times[name].append(seconds(w, j))
    base = statistics.median(times["load the shipped model"])
    for name, ts in times.items():
        m = statistics.median(ts)
        print(f"{name:28s} median {m * 1e3:8.3f} ms  ({m / base:.4f}x loading the shipped model)")


if __name__ == "__main__":
    main()
