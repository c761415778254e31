"""Translate one sentence from the command line.

    python -m model.translate "i am a student"            # -> je suis étudiant
    python -m model.translate --beam 4 "the cat is under the table"
    python -m model.translate --checkpoint assets/checkpoints/no_mask "i am a student"
    python -m model.translate --checkpoint assets/checkpoints/rnn "i am a student"   # the recurrent model

Prints only the translation, on one line, so the output can be piped. Notes (unknown words, a
sentence cut to fit the model) go to stderr. Exit status 2 for an empty sentence or a checkpoint
that cannot be loaded, with the reason on stderr.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from model.checkpoint import Bundle
# torch and the model are imported inside the functions: a usage error is reported at once, without
# waiting a second or two for torch to load.


@dataclass(frozen=True)
class Translation:
    text: str  # detokenized translation
    tokens: tuple[str, ...]  # its tokens (no <bos>/<eos>)
    unknown: tuple[str, ...]  # source words not in the vocabulary (read as <unk>)
    truncated: int  # source tokens cut off to fit the model (0: none)


def translate(bundle: Bundle, text: str, beam: int = 0, alpha: float = 0.6) -> Translation:
    """Greedy translation of `text` (beam search when `beam` >= 1). Raises ValueError for empty text."""
    from model.decoding import beam_search, greedy_decode
    from model.pipeline import prepare
    from model.vocab import detokenize

    prepared = prepare(bundle, text)
    if prepared.empty:
        raise ValueError("there is nothing to translate: the sentence is empty")
    src = prepared.src()  # [1, Ts]
    if beam:
        ids = beam_search(bundle.model, src, k=beam, alpha=alpha).best.output
    else:
        ids = greedy_decode(bundle.model, src).tokens
    tokens = tuple(bundle.tgt_vocab.decode(ids))
    return Translation(detokenize(tokens, bundle.langs[1]), tokens, prepared.unknown, prepared.truncated)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m model.translate", description="Translate one sentence.")
    ap.add_argument("sentence", help='the sentence to translate, e.g. "i am a student"')
    ap.add_argument("--beam", type=int, default=0, metavar="K", help="beam search with K hypotheses (default: greedy)")
    ap.add_argument("--alpha", type=float, default=0.6, help="length-penalty exponent for beam search")
    ap.add_argument("--checkpoint", help="checkpoint stem (default: assets/checkpoints/base, the shipped model)")
    args = ap.parse_args(argv)
    if args.beam < 0:
        ap.error("--beam must be at least 1 (or 0 for greedy decoding)")
    if not args.sentence.strip():
        print("error: the sentence is empty; give a sentence to translate, e.g. \"i am a student\"", file=sys.stderr)
        return 2
    import torch

    from model.checkpoint import SHIPPED, CheckpointError, load

    torch.set_num_threads(1)  # one short sentence: extra threads only cost start-up time
    args.checkpoint = args.checkpoint or str(SHIPPED)
    try:
        bundle = load(args.checkpoint)
    except CheckpointError as e:
        print(f"error: cannot load the checkpoint {args.checkpoint}: {e}", file=sys.stderr)
        return 2
    try:
        result = translate(bundle, args.sentence, beam=args.beam, alpha=args.alpha)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if result.unknown:
        print(f"note: not in the vocabulary, read as <unk>: {', '.join(result.unknown)}", file=sys.stderr)
    if result.truncated:
        print(f"note: the sentence was cut to fit the model ({result.truncated} tokens dropped)", file=sys.stderr)
    print(result.text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
