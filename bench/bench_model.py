"""Model speed: training step of this model (recording off / on) against torch.nn.Transformer.

Same size for all (d_model 128, 4 heads, 2+2 layers, d_ff 256), a batch like the toy set's
(64 sentences of ~12 tokens), forward + backward + Adam. Rounds alternate between the three so
machine noise hits them alike; the figures are medians and ratios measured in this one run.
Also: one traced forward pass for an 8-word sentence (time and bytes recorded).

Usage: python -m bench.bench_model [--steps N] [--rounds R]
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

import torch
from torch import nn

from bench.reference import TorchReference
from model.trace import Trace
from model.transformer import Config, Transformer, traced

V, B, T = 300, 64, 12


def batch(gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    lengths = torch.randint(T - 3, T + 1, (B,), generator=gen)
    src = torch.randint(4, V, (B, T + 1), generator=gen)
    tgt = torch.randint(4, V, (B, T + 2), generator=gen)
    for i, n in enumerate(lengths.tolist()):
        src[i, n:] = 0
        tgt[i, n + 1 :] = 0
    return src, tgt


def make_step(model: nn.Module, record: bool):
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)
    loss_fn = nn.CrossEntropyLoss(ignore_index=0, label_smoothing=0.1)

    def step(src, tgt):
        trace = Trace(record=record)
        logits = model(src, tgt[:, :-1], trace)
        loss = loss_fn(logits.reshape(-1, logits.size(-1)), tgt[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return trace

    return step


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20, help="steps per round")
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    cfg = Config(src_vocab=V, tgt_vocab=V, d_model=128, n_heads=4, n_enc_layers=2, n_dec_layers=2, d_ff=256)
    runs = {
        "ours, recording off": make_step(Transformer(cfg).train(), record=False),
        "ours, recording on": make_step(Transformer(cfg).train(), record=True),
        "torch.nn.Transformer": make_step(TorchReference(cfg).train(), record=False),
    }
    data = [batch(gen) for _ in range(args.steps)]
    times: dict[str, list[float]] = {k: [] for k in runs}
    for step in runs.values():  # warm-up
        for src, tgt in data[:3]:
            step(src, tgt)
    for _ in range(args.rounds):
        for name, step in runs.items():
            t0 = time.perf_counter()
            for src, tgt in data:
                step(src, tgt)
            times[name].append((time.perf_counter() - t0) / len(data) * 1000)
    ref = statistics.median(times["torch.nn.Transformer"])
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads; batch {B} x ~{T} tokens, "
        f"{args.rounds} rounds x {args.steps} steps"
    )
    print(f"{'training step (fwd+bwd+Adam)':32s} {'median ms':>10s} {'vs torch':>9s}")
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"{name:32s} {med:10.2f} {med / ref:8.2f}x")

    # One traced forward pass for an 8-word sentence.
    model = Transformer(cfg).eval()
    src = torch.randint(4, V, (1, 9))
    tgt = torch.randint(4, V, (1, 10))
    for _ in range(5):
        traced(model, src, tgt)
    samples = []
    for _ in range(50):
        t0 = time.perf_counter()
        tr = traced(model, src, tgt)
        samples.append((time.perf_counter() - t0) * 1000)
    with torch.no_grad():
        untraced = []
        for _ in range(50):
            t0 = time.perf_counter()
            model(src, tgt)
            untraced.append((time.perf_counter() - t0) * 1000)
    print(
        f"one traced forward pass, 8-word sentence: {statistics.median(samples):.2f} ms median "
        f"(untraced {statistics.median(untraced):.2f} ms), {len(tr.tensors)} tensors, "
        f"{tr.nbytes() / 1024:.0f} KiB recorded"
    )
    assert not math.isnan(ref)


if __name__ == "__main__":
    main()
