"""Sentence pairs in, padded tensors out: loading, encoding, batching, and checking uploads.

The pipeline, step by step::

    load_dataset()        TSV file  -> {"train": [Pair, ...], "heldout": [Pair, ...]}
    build_vocabs()        training pairs -> (source Vocab, target Vocab)
    encode_pairs()        Pairs -> [(src_ids, tgt_ids), ...]
    batches()             encoded pairs -> (src [B, Ts], tgt [B, Tt]) LongTensors, padded

Id convention (one, everywhere):

* the **source** is ``w1 w2 ... wn <eos>``: the encoder needs no <bos>, the <eos> tells it where the
  sentence ends;
* the **target** is ``<bos> w1 w2 ... wm <eos>``. The decoder is fed ``tgt[:, :-1]`` (starts with
  <bos>, "shifted right") and is trained to predict ``tgt[:, 1:]`` (ends with <eos>): at every
  position it predicts the next word.

Both are padded with ``PAD_ID`` (0) up to the longest sentence of the batch. Batches are
*length-bucketed*: sentences of similar length go together, so little of a batch is padding.

`parse_corpus` checks a parallel corpus uploaded in the app (a two-column TSV or CSV file) and
raises `CorpusError` with a message meant for the user when something is wrong with it.
"""

from __future__ import annotations

import csv
import hashlib
import io
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import torch

from model.limits import MAX_TOKEN_CHARS
from model.vocab import BOS_ID, EOS_ID, PAD_ID, Vocab, tokenize

ROOT = Path(__file__).resolve().parent.parent
DATASET_PATH = ROOT / "assets" / "toy_en_fr.tsv"
DIRECTIONS = ("en-fr", "fr-en")
SPLITS = ("train", "heldout")
HEADER = ("split", "en", "fr", "tag")


@dataclass(frozen=True)
class Pair:
    """One translation example: source sentence, target sentence, and its grammar family (tag)."""

    src: str
    tgt: str
    tag: str = ""


def langs(direction: str) -> tuple[str, str]:
    """ "en-fr" -> ("en", "fr"): the source and target language of a direction."""
    if direction not in DIRECTIONS:
        raise ValueError(f"unknown direction {direction!r}: expected one of {', '.join(DIRECTIONS)}")
    src, tgt = direction.split("-")
    return src, tgt


def load_dataset(path: str | Path = DATASET_PATH, direction: str = "en-fr") -> dict[str, list[Pair]]:
    """Read the toy data set: {"train": [...], "heldout": [...]}; "fr-en" swaps the two sides.

    The file is UTF-8 TSV with the header ``split en fr tag`` (see assets/make_dataset.py).
    """
    src_lang, _ = langs(direction)  # validates the direction
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    if not lines or tuple(lines[0].split("\t")) != HEADER:
        raise ValueError(f"{path}: expected the header {' / '.join(HEADER)} (tab-separated)")
    out: dict[str, list[Pair]] = {split: [] for split in SPLITS}
    for number, line in enumerate(lines[1:], start=2):
        cells = line.split("\t")
        if len(cells) != 4 or cells[0] not in out:
            raise ValueError(
                f"{path}, line {number}: expected split<TAB>en<TAB>fr<TAB>tag with split train or heldout, got {line!r}"
            )
        split, en, fr, tag = cells
        out[split].append(Pair(en, fr, tag) if src_lang == "en" else Pair(fr, en, tag))
    return out


def build_vocabs(pairs: Sequence[Pair], direction: str, min_freq: int = 1) -> tuple[Vocab, Vocab]:
    """Source and target vocabularies from (training) pairs: every word seen, ids ordered by frequency."""
    src_lang, tgt_lang = langs(direction)
    src_vocab = Vocab.build((tokenize(p.src, src_lang) for p in pairs), min_freq=min_freq)
    tgt_vocab = Vocab.build((tokenize(p.tgt, tgt_lang) for p in pairs), min_freq=min_freq)
    return src_vocab, tgt_vocab


def encode_pairs(
    pairs: Sequence[Pair], src_vocab: Vocab, tgt_vocab: Vocab, src_lang: str, tgt_lang: str
) -> list[tuple[list[int], list[int]]]:
    """Pairs -> [(src_ids, tgt_ids)]: source ``w1 .. wn <eos>``, target ``<bos> w1 .. wm <eos>``.

    Unknown words become UNK_ID (3).
    """
    encoded = []
    for p in pairs:
        src_ids, _ = src_vocab.encode(tokenize(p.src, src_lang))
        tgt_ids, _ = tgt_vocab.encode(tokenize(p.tgt, tgt_lang))
        encoded.append((src_ids + [EOS_ID], [BOS_ID] + tgt_ids + [EOS_ID]))
    return encoded


def pad(sequences: Sequence[Sequence[int]], pad_id: int = PAD_ID) -> torch.Tensor:
    """Lists of ids -> a [B, T] LongTensor, T = the longest list, the rest filled with `pad_id`."""
    width = max((len(s) for s in sequences), default=0)
    rows = [list(s) + [pad_id] * (width - len(s)) for s in sequences]  # one tensor built at once
    return torch.tensor(rows, dtype=torch.long).view(len(rows), width)


def _generator(seed: int | torch.Generator) -> torch.Generator:
    if isinstance(seed, torch.Generator):
        return seed
    return torch.Generator().manual_seed(int(seed))


def batches(
    encoded: Sequence[tuple[Sequence[int], Sequence[int]]],
    batch_size: int,
    shuffle: bool = True,
    seed: int | torch.Generator = 0,
    bucket: int = 20,
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Yield padded (src [B, Ts], tgt [B, Tt]) LongTensor batches, length-bucketed.

    How the bucketing works: the pairs are cut into chunks of ``bucket * batch_size`` pairs (after a
    shuffle when `shuffle`); each chunk is sorted by length (source, then target) and cut into
    batches, so a batch holds sentences of about the same length; finally the order of the batches
    is shuffled (when `shuffle`), so training does not see short sentences first. The same `seed`
    (an int, or a torch.Generator whose state is then advanced) gives the same batches. With
    ``shuffle=False`` the chunks follow the input order and the batches come in chunk order.
    The last batch may be smaller than `batch_size`.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1 (got {batch_size})")
    n = len(encoded)
    if shuffle:
        gen = _generator(seed)
        order = torch.randperm(n, generator=gen).tolist()
    else:
        order = list(range(n))
    chunk = max(1, bucket) * batch_size
    groups: list[list[int]] = []
    for start in range(0, n, chunk):
        part = sorted(order[start : start + chunk], key=lambda i: (len(encoded[i][0]), len(encoded[i][1])))
        groups += [part[j : j + batch_size] for j in range(0, len(part), batch_size)]
    if shuffle:
        groups = [groups[i] for i in torch.randperm(len(groups), generator=gen).tolist()]
    for group in groups:
        yield pad([encoded[i][0] for i in group]), pad([encoded[i][1] for i in group])


def data_hash(path: str | Path = DATASET_PATH) -> str:
    """sha256 (hex) of the file's bytes: stored in checkpoints to tell which data a model saw."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def pairs_hash(pairs: list[Pair]) -> str:
    """sha256 of the pairs written as ``src<TAB>tgt<TAB>tag`` lines (for data given as pairs, not a file)."""
    text = "".join(f"{p.src}\t{p.tgt}\t{p.tag}\n" for p in pairs)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# --- User uploads --------------------------------------------------------------------------------


class CorpusError(ValueError):
    """An uploaded corpus cannot be used; ``str(error)`` is a message to show to the user."""


@dataclass(frozen=True)
class ParsedCorpus:
    """A checked upload: the pairs (tag "upload"), warnings for the user, and what was detected."""

    pairs: list[Pair]
    warnings: list[str] = field(default_factory=list)
    delimiter: str = "\t"  # "\t" (TSV) or "," (CSV)
    header: bool = False  # whether a header row was found and skipped


MIN_PAIRS = 20
HEADER_WORDS = frozenset(
    {
        "source",
        "target",
        "src",
        "tgt",
        "input",
        "output",
        "english",
        "french",
        "en",
        "fr",
        "de",
        "es",
        "it",
        "pt",
        "nl",
        "sentence",
        "translation",
        "text",
    }
)


def _delimiter(text: str, filename: str) -> str:
    """TSV or CSV: by the file extension, else by sniffing the first non-empty line."""
    name = filename.lower()
    if name.endswith((".tsv", ".tab")):
        return "\t"
    if name.endswith(".csv"):
        return ","
    first = next((line for line in text.split("\n") if line.strip()), "")
    if "\t" in first:
        return "\t"
    if "," in first:
        return ","
    raise CorpusError(
        "Could not tell the two columns apart: the first line has neither a tab nor a comma. "
        "Upload a .tsv (source<TAB>target) or .csv (source,target) file with one pair per line."
    )


def _rows(text: str, delimiter: str) -> list[tuple[int, list[str]]]:
    """(line number, cells) for every non-blank line."""
    if delimiter == "\t":
        rows = [(i, line.split("\t")) for i, line in enumerate(text.split("\n"), start=1)]
    else:
        reader = csv.reader(io.StringIO(text, newline=""))
        rows = []
        start = 1  # the line the next row starts on (a quoted cell may span lines)
        try:
            for cells in reader:
                if any("\n" in c for c in cells):
                    raise CorpusError(
                        f"Line {start}: a double quote is opened but never closed, so the rest of "
                        "the file is read as one sentence. Close the quote, or double a quote "
                        'that belongs to the sentence ("").'
                    )
                rows.append((start, cells))
                start = reader.line_num + 1
        except csv.Error as e:
            raise CorpusError(
                f"Line {start}: this CSV line cannot be read ({e}). Put sentences that "
                "contain commas or quotes in double quotes."
            ) from None
    return [(i, cells) for i, cells in rows if any(c.strip() for c in cells)]


BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")  # embeddings, overrides, isolates


def parse_corpus(
    data: bytes,
    filename: str,
    max_bytes: int = 2_000_000,
    max_pairs: int = 20_000,
    max_words: int = 30,
    src_lang: str = "en",
    tgt_lang: str = "fr",
) -> ParsedCorpus:
    """Check an uploaded parallel corpus and return its pairs, or raise `CorpusError`.

    The file must be UTF-8 text with one pair per line: ``source<TAB>target`` (.tsv) or
    ``source,target`` (.csv, with the usual double-quote quoting); other extensions are sniffed. An
    optional first line such as ``en,fr`` or ``source<TAB>target`` is recognised as a header and
    skipped. Blank lines and empty trailing cells are ignored. Repeated pairs are dropped with a
    warning. Limits:
    `max_bytes` for the file, `max_pairs` pairs, `max_words` tokens per sentence (counted by
    `tokenize` in `src_lang` / `tgt_lang`), `MAX_TOKEN_CHARS` characters per word (what a checkpoint's
    vocabulary may hold), and at least 20 pairs.
    """
    if not data or not data.strip():
        raise CorpusError("The file is empty. Upload a file with one sentence pair per line.")
    if len(data) > max_bytes:
        raise CorpusError(
            f"The file is too large: {len(data):,} bytes; the limit is {max_bytes:,} bytes ({max_bytes / 1e6:.1f} MB)."
        )
    nul = data.find(b"\x00")
    if nul >= 0:
        line = data.count(b"\n", 0, nul) + 1
        raise CorpusError(
            f"This looks like a binary file, not text: it contains a NUL byte at byte offset {nul} "
            f"(line {line}). Upload a plain-text .tsv or .csv file."
        )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise CorpusError(
            f"The file is not valid UTF-8: byte 0x{data[e.start]:02x} at byte offset {e.start} "
            f"(line {line}) cannot be decoded. Save the file as UTF-8 and upload it again."
        ) from None
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    bidi = next((i for i, ch in enumerate(text) if ch in BIDI_CONTROLS), None)
    if bidi is not None:  # the page would show "evil" as "live": a pair would not read as what it trains on
        raise CorpusError(
            f"Line {text.count(chr(10), 0, bidi) + 1} contains an invisible character that changes the direction "
            f"text is shown in (U+{ord(text[bidi]):04X}), so the preview would not show the words as they are. "
            "Remove it and upload the file again."
        )
    delimiter = _delimiter(text, filename)
    kind = "tab" if delimiter == "\t" else "comma"
    rows = _rows(text, delimiter)
    if not rows:
        raise CorpusError("The file is empty. Upload a file with one sentence pair per line.")

    header = False
    first = rows[0][1]
    if len(first) == 2 and all(c.strip().lower() in HEADER_WORDS for c in first):
        rows, header = rows[1:], True

    pairs: list[Pair] = []
    seen: set[tuple[str, str]] = set()
    duplicates = 0
    for number, cells in rows:
        while len(cells) > 2 and not cells[-1].strip():  # "a<TAB>b<TAB>": spreadsheets add empty cells
            cells = cells[:-1]
        if len(cells) != 2:
            hint = " (a sentence containing a comma must be put in double quotes)" if delimiter == "," else ""
            raise CorpusError(
                f"Line {number} has {len(cells)} column{'s' if len(cells) != 1 else ''}; every line "
                f"needs exactly 2, a source and a target sentence separated by a {kind}{hint}."
            )
        src, tgt = (c.strip() for c in cells)
        for name, cell, lang in (("source", src, src_lang), ("target", tgt, tgt_lang)):
            words = tokenize(cell, lang)
            if not words:
                raise CorpusError(f"Line {number}: the {name} sentence is empty.")
            if len(words) > max_words:
                raise CorpusError(
                    f"Line {number}: the {name} sentence is too long ({len(words)} words); the "
                    f"limit is {max_words} words per sentence."
                )
            long = next((w for w in words if len(w) > MAX_TOKEN_CHARS), None)
            if long is not None:  # a model with such a word in its vocabulary could not be saved or loaded
                raise CorpusError(
                    f"Line {number}: the {name} sentence has a word of {len(long)} characters; the "
                    f"limit is {MAX_TOKEN_CHARS} characters per word."
                )
        if (src, tgt) in seen:
            duplicates += 1
            continue
        seen.add((src, tgt))
        pairs.append(Pair(src, tgt, "upload"))

    if len(pairs) > max_pairs:
        raise CorpusError(f"Too many pairs: {len(pairs):,}; the limit is {max_pairs:,}.")
    if len(pairs) < MIN_PAIRS:
        raise CorpusError(f"Too few pairs: {len(pairs)}; at least {MIN_PAIRS} are needed to train and test a model.")
    warnings = []
    if duplicates:
        warnings.append(
            f"Dropped {duplicates} duplicate line{'s' if duplicates != 1 else ''} (the same pair more than once)."
        )
    return ParsedCorpus(pairs, warnings, delimiter, header)


def split_pairs(pairs: Sequence[Pair], every: int = 10) -> dict[str, list[Pair]]:
    """A deterministic train / held-out split: every `every`-th pair (the 10th, 20th, ...) is held out."""
    if every < 2:
        raise ValueError(f"every must be at least 2 (got {every})")
    return {
        "train": [p for i, p in enumerate(pairs) if i % every != every - 1],
        "heldout": [p for i, p in enumerate(pairs) if i % every == every - 1],
    }


# --- Reference translations from the toy data set -----------------------------------------------


@lru_cache(maxsize=4)
def _references(direction: str) -> dict[tuple[str, ...], str]:
    try:
        data = load_dataset(direction=direction)
    except (OSError, ValueError):
        return {}
    src_lang = direction.split("-")[0]
    out: dict[tuple[str, ...], str] = {}
    for split in ("train", "heldout"):
        for p in data[split]:
            out.setdefault(tuple(tokenize(p.src, src_lang)), p.tgt)
    return out


def dataset_reference(text: str, direction: str = "en-fr") -> str | None:
    """The toy data set's translation of `text` (compared token by token), or None if it is not in the set."""
    if direction not in ("en-fr", "fr-en"):
        return None
    return _references(direction).get(tuple(tokenize(text, direction.split("-")[0])))
