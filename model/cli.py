"""The command lines: train, evaluate, translate. Each is also `python -m model.<name>` (the module runs it).

    python -m model.train --out assets/checkpoints/base       # the paper's recipe; every TrainConfig field a flag
    python -m model.evaluate --checkpoint assets/checkpoints/rnn
    python -m model.translate --beam 4 "the cat is under the table"

A checkpoint that cannot be loaded is one line on stderr and exit status 2 (`_load`, for every command); so is an
impossible setting or an unreadable data set. Only what a command prints is here: the recipe is model/train.py,
the scores model/evaluate.py, a translation model/translate.py.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import fields
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from model.checkpoint import Bundle
# torch and the model are imported inside each command: a usage error is reported at once, without waiting a
# second or two for torch to load.

TRAIN_DOC = 'Train a Transformer (or the recurrent model) with the recipe of "Attention Is All You Need".'


def _load(path: str) -> Bundle | None:
    """The checkpoint at `path`, or None after saying on stderr why it cannot be loaded."""
    from model.checkpoint import CheckpointError, load

    try:
        return load(path)
    except CheckpointError as e:
        print(f"error: cannot load the checkpoint {path}: {e}", file=sys.stderr)
        return None


SWITCHES = {  # TrainConfig's True-by-default switches: a flag turns each off
    "look_ahead_mask": ("--no-look-ahead-mask", "train WITHOUT the decoder's look-ahead mask (it learns to cheat)"),
    "scale_scores": ("--no-scale", "train WITHOUT dividing the attention scores by sqrt(d_k)"),
}


def _train_parser() -> argparse.ArgumentParser:
    from model.checkpoint import ARCHS
    from model.data import DATASET_PATH, DIRECTIONS
    from model.rnn import ATTENTIONS, CELLS
    from model.train import TRAIN_POSITIONS, TrainConfig

    choices = {  # flag -> (choices, help)
        "direction": (DIRECTIONS, "translation direction"),
        "positions": (TRAIN_POSITIONS, "positional encoding: the paper's sinusoids, a learned table, or none"),
        "arch": (ARCHS, "the Transformer, or the recurrent encoder-decoder with attention"),
        "cell": (CELLS, "recurrent cell (--arch rnn)"),
        "attention": (ATTENTIONS, "attention form (--arch rnn)"),
    }
    ap = argparse.ArgumentParser(
        prog="python -m model.train", description=TRAIN_DOC, formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    defaults = TrainConfig()
    for f in fields(TrainConfig):
        flag, default, what = "--" + f.name.replace("_", "-"), getattr(defaults, f.name), f.name.replace("_", " ")
        if f.name in SWITCHES:
            ap.add_argument(SWITCHES[f.name][0], dest=f.name, action="store_false", help=SWITCHES[f.name][1])
        elif f.name in choices:
            ap.add_argument(flag, default=default, choices=choices[f.name][0], help=choices[f.name][1])
        elif default is None:  # key_size is a whole number; clip_grad_norm and max_seconds are seconds or norms
            ap.add_argument(flag, type=int if f.name == "key_size" else float, default=None, help=what)
        else:
            ap.add_argument(flag, type=type(default), default=default, help=what)
    ap.add_argument(
        "--data",
        default=str(DATASET_PATH),
        help="data set in the toy set's format (TSV: split, en, fr, tag); default: the toy set",
    )
    ap.add_argument("--out", help="checkpoint stem to write, e.g. assets/checkpoints/base (without it: no file)")
    ap.add_argument("--name", help="the checkpoint's display name (default: the file name of --out)")
    ap.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads (torch.set_num_threads). A second one helps a little on an idle machine "
        "and slows every step down as soon as anything else uses a core",
    )
    return ap


def train(argv: list[str] | None = None) -> int:
    """`python -m model.train`: train with the paper's recipe (every `TrainConfig` field a flag), write a checkpoint."""
    import torch
    from tqdm import tqdm

    from model.checkpoint import save
    from model.data import data_hash, load_dataset
    from model.train import StepEvent, TrainConfig, Trainer, TrainingDiverged

    args = _train_parser().parse_args(argv)
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
    print(
        f"{tcfg.direction}: {len(trainer.train_pairs)} training pairs, {len(trainer.heldout)} held-out; "
        f"vocabularies {len(trainer.src_vocab)} / {len(trainer.tgt_vocab)}; "
        f"{sum(p.numel() for p in trainer.model.parameters()):,} parameters; "
        + (
            f"RNN: {tcfg.cell}, {tcfg.attention} attention; "
            if tcfg.arch == "rnn"
            else f"look-ahead mask {'on' if tcfg.look_ahead_mask else 'OFF'}; "
        )
        + f"{torch.get_num_threads()} threads",
        file=sys.stderr,
    )
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
    print(
        f"{trainer.step} steps in {trainer.train_seconds:.1f} s of training; "
        f"train loss {train_loss:.3f} (cross-entropy {train_ce:.3f}, mean of the last {len(recent)} steps)"
    )
    metrics: dict[str, float | None] = {
        "final_train_loss": round(train_loss, 4),
        "final_train_cross_entropy": round(train_ce, 4),
    }
    if final is not None:
        coref = "n/a" if final.coref_accuracy is None else f"{final.coref_accuracy:.1%}"
        print(
            f"held-out ({final.n} pairs): exact match {final.exact_match:.1%}, BLEU {final.bleu:.1f}, "
            f"il/elle accuracy {coref}, loss {final.heldout_loss:.3f} "
            f"(cross-entropy {final.heldout_cross_entropy:.3f})"
        )
        metrics = {**final.metrics, **metrics}
    if args.out:
        from pathlib import Path

        name = args.name or Path(args.out).name
        paths = save(trainer.bundle(name=name, metrics=metrics), args.out)
        print("wrote " + ", ".join(f"{p} ({p.stat().st_size / 1e6:.2f} MB)" for p in paths))
    return 0


def evaluate(argv: list[str] | None = None) -> int:
    """`python -m model.evaluate`: exact match, BLEU and il/elle accuracy of a checkpoint on a split."""
    import torch

    from model.checkpoint import SHIPPED
    from model.data import DATASET_PATH, load_dataset
    from model.evaluate import evaluate as run

    ap = argparse.ArgumentParser(
        prog="python -m model.evaluate",
        description="Exact match, BLEU and il/elle accuracy of a checkpoint on the toy set's held-out split.",
    )
    ap.add_argument("--checkpoint", default=str(SHIPPED), help="checkpoint stem (default: the shipped model)")
    ap.add_argument("--split", default="heldout", choices=("heldout", "train"))
    ap.add_argument("--data", default=str(DATASET_PATH), help="TSV data set (default: the toy set)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (one is the fastest for this model)")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    bundle = _load(args.checkpoint)
    if bundle is None:
        return 2
    pairs = load_dataset(args.data, bundle.direction)[args.split]
    m = run(bundle, pairs)
    print(f"{bundle.name} ({bundle.direction}) on {m.n} {args.split} pairs")
    print(f"exact match: {m.exact_match:.1%}")
    print(f"BLEU: {m.bleu:.1f}")
    coref = "n/a (no coref pairs)" if m.coref_accuracy is None else f"{m.coref_accuracy:.1%} ({m.n_coref} sentences)"
    print(f"il/elle accuracy: {coref}")
    return 0


def translate(argv: list[str] | None = None) -> int:
    """`python -m model.translate`: one sentence's translation on stdout, notes on stderr (model/translate.py)."""
    import torch

    from model.checkpoint import SHIPPED
    from model.translate import translate as run

    ap = argparse.ArgumentParser(prog="python -m model.translate", description="Translate one sentence.")
    ap.add_argument("sentence", help='the sentence to translate, e.g. "i am a student"')
    ap.add_argument("--beam", type=int, default=0, metavar="K", help="beam search with K hypotheses (default: greedy)")
    ap.add_argument("--alpha", type=float, default=0.6, help="length-penalty exponent for beam search")
    ap.add_argument("--checkpoint", help="checkpoint stem (default: assets/checkpoints/base, the shipped model)")
    args = ap.parse_args(argv)
    if args.beam < 0:
        ap.error("--beam must be at least 1 (or 0 for greedy decoding)")
    if not args.sentence.strip():
        print('error: the sentence is empty; give a sentence to translate, e.g. "i am a student"', file=sys.stderr)
        return 2
    torch.set_num_threads(1)  # one short sentence: extra threads only cost start-up time
    bundle = _load(args.checkpoint or str(SHIPPED))
    if bundle is None:
        return 2
    try:
        result = run(bundle, args.sentence, beam=args.beam, alpha=args.alpha)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if result.unknown:
        print(f"note: not in the vocabulary, read as <unk>: {', '.join(result.unknown)}", file=sys.stderr)
    if result.truncated:
        print(f"note: the sentence was cut to fit the model ({result.truncated} tokens dropped)", file=sys.stderr)
    print(result.text)
    return 0


COMMANDS = {"train": train, "evaluate": evaluate, "translate": translate}


def main(argv: list[str] | None = None) -> int:
    """`python -m model.cli train|evaluate|translate ...`."""
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] not in COMMANDS:
        print(f"usage: python -m model.cli {{{','.join(COMMANDS)}}} ... (each: --help)", file=sys.stderr)
        return 2
    return COMMANDS[args[0]](args[1:])


if __name__ == "__main__":
    sys.exit(main())
