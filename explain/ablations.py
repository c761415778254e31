"""The paper's Table 3 at toy scale: the measured rows, as `python -m bench.ablations --write` stores them.

`assets/ablations.json` holds one entry per row: its group (the paper's "A" to "E", or "base"), a label,
the settings changed from the base recipe, the full recipe it trained, its parameter count and, for every
seed, the final held-out exact match, BLEU and il/elle accuracy and the steps at which held-out exact
match first reached 90% and 95% (None: not within the run). `read` checks that shape, so a page never
draws a half-written or hand-edited file; the pages compute every figure and sentence from it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from model.checkpoint import ASSETS

PATH = ASSETS / "ablations.json"
GROUPS = ("base", "A", "B", "C", "D", "E")
SEED_FIELDS = ("seed", "exact_match", "bleu", "coref_accuracy", "steps_to_90", "steps_to_95")


class AblationsError(ValueError):
    """The file is not what `bench.ablations` writes; the message says what is wrong."""


def read(path: str | Path = PATH) -> dict[str, Any]:
    """The measured rows (see the module docstring); `AblationsError` when the file is malformed."""
    try:
        data: dict[str, Any] = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise AblationsError(f"cannot read {path}: {e}") from None
    check(data)
    return data


def _number(x: object, lo: float, hi: float) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) and lo <= x <= hi


def check(data: object) -> None:
    """Raise `AblationsError` unless `data` has the shape `bench.ablations` writes."""
    if not isinstance(data, dict) or not isinstance(data.get("rows"), list) or not isinstance(data.get("meta"), dict):
        raise AblationsError("the file must hold an object with 'meta' and a list of 'rows'")
    meta = data["meta"]
    if not (isinstance(meta.get("steps"), int) and meta["steps"] > 0 and isinstance(meta.get("base"), dict)):
        raise AblationsError("meta must give the steps of every run and the base recipe")
    groups = [row.get("group") if isinstance(row, dict) else None for row in data["rows"]]
    if groups.count("base") != 1:
        raise AblationsError("the file must hold exactly one base row")
    for i, row in enumerate(data["rows"]):
        where = f"row {i}"
        if groups[i] not in GROUPS or not isinstance(row.get("label"), str) or not isinstance(row.get("changes"), dict):
            raise AblationsError(f"{where} needs a group ({', '.join(GROUPS)}), a label and its changes")
        if not isinstance(row.get("settings"), dict) or not _number(row.get("parameters"), 1, 1e9):
            raise AblationsError(f"{where} needs its settings and its parameter count")
        seeds = row.get("seeds")
        if not isinstance(seeds, list) or not seeds:
            raise AblationsError(f"{where} has no seeds")
        for s in seeds:
            if not isinstance(s, dict) or set(s) != set(SEED_FIELDS):
                raise AblationsError(f"{where}: every seed must have exactly {', '.join(SEED_FIELDS)}")
            ok = (
                isinstance(s["seed"], int)
                and _number(s["exact_match"], 0, 1)
                and _number(s["bleu"], 0, 100)
                and (s["coref_accuracy"] is None or _number(s["coref_accuracy"], 0, 1))
                and all(
                    s[k] is None or (isinstance(s[k], int) and 0 < s[k] <= meta["steps"])
                    for k in ("steps_to_90", "steps_to_95")
                )
            )
            if not ok:
                raise AblationsError(f"{where}: a seed's figures are out of range")
