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


if __name__ == "__main__":  # python -m model.translate: the command line is model/cli.py's
    from model.cli import translate as main

    sys.exit(main())
