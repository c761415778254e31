"""The command line of training: `python -m model.train [--flags]` (model/train.py hands over to `main` here).

Every `TrainConfig` field is a flag (`--steps`, `--warmup`, `--lr-scale`, `--d-model`, ...); the switches are
`--no-look-ahead-mask` and `--no-scale`. A progress bar shows the loss and the held-out figures; `--out` writes
the checkpoint.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import fields

import torch

from model.checkpoint import ARCHS
from model.data import DATASET_PATH, DIRECTIONS, data_hash, load_dataset
from model.rnn import ATTENTIONS, CELLS
from model.train import TRAIN_POSITIONS, StepEvent, TrainConfig, Trainer, TrainingDiverged
from model.train import __doc__ as TRAIN_DOC


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m model.train", description=TRAIN_DOC.split("\n\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    defaults = TrainConfig()
    for f in fields(TrainConfig):
        flag = "--" + f.name.replace("_", "-")
        default = getattr(defaults, f.name)
        if f.name == "look_ahead_mask":
            ap.add_argument("--no-look-ahead-mask", dest="look_ahead_mask", action="store_false",
                            help="train WITHOUT the decoder's look-ahead mask (the model learns to cheat)")
        elif f.name == "scale_scores":
            ap.add_argument("--no-scale", dest="scale_scores", action="store_false",
                            help="train WITHOUT dividing the attention scores by sqrt(d_k)")
        elif f.name == "positions":
            ap.add_argument(flag, default=default, choices=TRAIN_POSITIONS,
                            help="positional encoding: the paper's sinusoids, a learned table, or none")
        elif f.name == "key_size":
            ap.add_argument(flag, type=int, default=None, help="d_k of queries and keys (default d_model / n_heads)")
        elif f.name == "direction":
            ap.add_argument(flag, default=default, choices=DIRECTIONS)
        elif f.name in ("arch", "cell", "attention"):
            ap.add_argument(flag, default=default, choices={"arch": ARCHS, "cell": CELLS,
                                                            "attention": ATTENTIONS}[f.name],
                            help={"arch": "the Transformer, or the recurrent encoder-decoder with attention",
                                  "cell": "recurrent cell (--arch rnn)",
                                  "attention": "attention form (--arch rnn)"}[f.name])
        elif default is None:
            ap.add_argument(flag, type=float, default=None, help=f.name.replace("_", " "))
        else:
            ap.add_argument(flag, type=type(default), default=default, help=f.name.replace("_", " "))
    ap.add_argument("--data", default=str(DATASET_PATH),
                    help="data set in the toy set's format (TSV: split, en, fr, tag); default: the toy set")
    ap.add_argument("--out", help="checkpoint stem to write, e.g. assets/checkpoints/base (without it: no file)")
    ap.add_argument("--name", help="the checkpoint's display name (default: the file name of --out)")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch threads (torch.set_num_threads). A second one helps a little on an idle machine "
                         "and slows every step down as soon as anything else uses a core")
    return ap


def main(argv: list[str] | None = None) -> int:
    from tqdm import tqdm

    from model.checkpoint import save

    args = _parser().parse_args(argv)
    kwargs = {f.name: getattr(args, f.name) for f in fields(TrainConfig)}
    try:
        tcfg = TrainConfig(**kwargs)
    except ValueError as e:
        print(e, file=sys.stderr)
        return 2
    torch.set_num_threads(args.threads)
    torch.manual_seed(tcfg.seed)  # dropout draws from torch's global generator
    try:
        data = load_dataset(args.data, tcfg.direction)
    except (OSError, ValueError) as e:
        print(f"cannot read the data set: {e}", file=sys.stderr)
        return 2
    try:
        trainer = Trainer(tcfg, data, data_sha256=data_hash(args.data))
    except ValueError as e:  # a model config out of bounds (e.g. an RNN wider than model/rnn.py allows)
        print(e, file=sys.stderr)
        return 2
    print(f"{tcfg.direction}: {len(trainer.train_pairs)} training pairs, {len(trainer.heldout)} held-out; "
          f"vocabularies {len(trainer.src_vocab)} / {len(trainer.tgt_vocab)}; "
          f"{sum(p.numel() for p in trainer.model.parameters()):,} parameters; "
          + (f"RNN: {tcfg.cell}, {tcfg.attention} attention; " if tcfg.arch == "rnn" else
             f"look-ahead mask {'on' if tcfg.look_ahead_mask else 'OFF'}; ")
          + f"{torch.get_num_threads()} threads",
          file=sys.stderr)
    recent: list[float] = []
    recent_ce: list[float] = []
    postfix: dict[str, str] = {}
    bar = tqdm(total=tcfg.steps, unit="step", dynamic_ncols=True)
    try:
        for ev in trainer.run():
            if isinstance(ev, StepEvent):
                recent = (recent + [ev.loss])[-50:]
                recent_ce = (recent_ce + [ev.cross_entropy])[-50:]
                postfix.update(loss=f"{ev.loss:.3f}", lr=f"{ev.lr:.2e}")
                bar.update(1)
            else:
                postfix.update(EM=f"{ev.exact_match:.1%}", BLEU=f"{ev.bleu:.1f}")
            bar.set_postfix(postfix, refresh=False)
    except TrainingDiverged as e:
        bar.close()
        print(e, file=sys.stderr)
        return 1
    bar.close()
    final = trainer.last_eval
    train_loss = sum(recent) / len(recent)
    train_ce = sum(recent_ce) / len(recent_ce)
    print(f"{trainer.step} steps in {trainer.train_seconds:.1f} s of training; "
          f"train loss {train_loss:.3f} (cross-entropy {train_ce:.3f}, mean of the last {len(recent)} steps)")
    metrics = {"final_train_loss": round(train_loss, 4), "final_train_cross_entropy": round(train_ce, 4)}
    if final is not None:
        coref = "n/a" if final.coref_accuracy is None else f"{final.coref_accuracy:.1%}"
        print(f"held-out ({final.n} pairs): exact match {final.exact_match:.1%}, BLEU {final.bleu:.1f}, "
              f"il/elle accuracy {coref}, loss {final.heldout_loss:.3f} "
              f"(cross-entropy {final.heldout_cross_entropy:.3f})")
        metrics = {**final.metrics, **metrics}
    if args.out:
        from pathlib import Path

        name = args.name or Path(args.out).name
        paths = save(trainer.bundle(name=name, metrics=metrics), args.out)
        print("wrote " + ", ".join(f"{p} ({p.stat().st_size / 1e6:.2f} MB)" for p in paths))
    return 0


if __name__ == "__main__":
    sys.exit(main())
