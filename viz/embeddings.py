"""Tokens -> ids -> one-hot rows -> embedding rows -> scaled by √d_model, with the real weights.

`lookup_table` draws explain/embeddings.py's `lookup_demo`: multiplying a one-hot row by the embedding matrix picks
out one row of it (onehot @ E == E[id]), and the traced ``src.embed`` is that row times √d_model.
`TEXTBOOK_VOCAB` is the lecture notes' six-word output vocabulary: a clearly labelled textbook example, not the
model's vocabulary.
"""

from __future__ import annotations

import pandas as pd
import torch

from explain.embeddings import LookupDemo, one_hot
from model.vocab import SPECIALS, UNK, UNK_ID, Vocab

TEXTBOOK_VOCAB = ("a", "am", "I", "thanks", "student", "<eos>")  # the notes' output vocabulary, index 0..5


def textbook_one_hot(word: str) -> pd.DataFrame:
    """The notes' example: the one-hot row of `word` over the 6-word output vocabulary."""
    if word not in TEXTBOOK_VOCAB:
        raise ValueError(f"{word!r} is not in the textbook vocabulary {TEXTBOOK_VOCAB}")
    row = one_hot([TEXTBOOK_VOCAB.index(word)], len(TEXTBOOK_VOCAB))[0]
    return pd.DataFrame(
        [list(range(len(TEXTBOOK_VOCAB))), [int(v) for v in row]],
        index=["index", f'one-hot of "{word}"'],
        columns=list(TEXTBOOK_VOCAB),
    )


def vocab_window(ids) -> list[int]:
    """The vocabulary columns worth drawing: the ids that occur, sorted (every other column is all zeros)."""
    return sorted(set(int(i) for i in ids))


def column_labels(vocab: Vocab, ids: list[int]) -> list[str]:
    """["2 <eos>", "5 the", ...]: vocabulary columns labelled by id and token."""
    return [f"{i} {vocab.itos[i]}" for i in ids]


def token_table(tokens, ids, vocab: Vocab, unknown=()) -> pd.DataFrame:
    """One row per position: the token, its id, and whether the vocabulary knows it."""
    unknown = set(unknown)
    status = []
    for t, i in zip(tokens, ids, strict=True):
        if t in SPECIALS:
            status.append("special token")
        elif i == UNK_ID or t in unknown:
            status.append(f"unknown: fed as {UNK}")
        else:
            status.append("in vocabulary")
    return pd.DataFrame(
        {"position": list(range(len(ids))), "token": list(tokens), "id": [int(i) for i in ids], "status": status}
    )


def lookup_table(demo: LookupDemo, dims: int = 8) -> pd.DataFrame:
    """The first `dims` numbers of each step, side by side (rows: steps, columns: dimensions)."""
    n = min(dims, demo.d_model)
    rows = {
        "one-hot row @ E": demo.product[:n],
        "E[id] (row of the table)": demo.row[:n],
        f"E[id] x √{demo.d_model}": demo.scaled[:n],
    }
    if demo.traced is not None:
        rows[f"traced {demo.traced_name}"] = demo.traced[:n]
    return pd.DataFrame(
        {k: [round(float(x), 5) for x in v] for k, v in rows.items()}, index=[f"d{j}" for j in range(n)]
    ).T


# --- Notices: one computed sentence per figure ----------------------------------------------------


def one_hot_notice(oh: torch.Tensor, ids, labels: list[str]) -> str:
    """One-hot rows [T, V]: each row has a single 1, which column it picks, and repeated tokens."""
    ids = [int(i) for i in ids]
    ones = oh.sum(1)
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    out = (
        f"Every row holds a single 1 (row sums {int(ones.min())} to {int(ones.max())}) among {oh.shape[1]} "
        f"columns: row “{labels[0]}” picks column {ids[0]}, row “{labels[-1]}” column {ids[-1]}."
    )
    if repeated:
        i = repeated[0]
        rows = [labels[t] for t, x in enumerate(ids) if x == i]
        out += f" {' and '.join(f'“{r}”' for r in rows)} are the same token: the same column {i}, identical rows."
    return out


def embed_notice(embed: torch.Tensor, ids, labels: list[str], scale: float) -> str:
    """Embedding rows [T, D] (after × √d_model): repeated tokens give identical rows; the rows' typical size."""
    ids = [int(i) for i in ids]
    e = embed.detach().to(torch.float64)
    rms = e.pow(2).mean(1).sqrt()
    out = (
        f"Typical size of an entry (root mean square per row): {float(rms.min()):.2f} to {float(rms.max()):.2f}, "
        f"after × √d_model = {scale:.2f}, against √½ ≈ 0.71 for the positional encoding added next (each "
        "sin/cos pair has length 1)."
    )
    for i in sorted(set(ids)):
        where = [t for t, x in enumerate(ids) if x == i]
        if len(where) > 1:
            diff = float((e[where[0]] - e[where[1]]).abs().max())
            out += (
                f" “{labels[where[0]]}” and “{labels[where[1]]}” are the same token, so their rows are identical "
                f"(max difference {diff:g}): nothing here knows the position yet."
            )
            break
    return out
