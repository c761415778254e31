"""A study's downloads: tables as CSV and as JSON lines, with every text cell safe to open in a spreadsheet.

A cell that begins with =, +, -, @, a tab or a carriage return is a formula to a spreadsheet (CSV injection): such
a text gets a leading apostrophe, in the CSV and in the JSON lines alike (a JSON file imported into a spreadsheet
makes cells too). Numbers stay numbers. Nothing else is changed.
"""

from __future__ import annotations

import csv
import io
import json

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def neutralise(value):
    """A text that a spreadsheet would read as a formula, made plain text; lists and dicts cell by cell."""
    if isinstance(value, str):
        return "'" + value if value.startswith(FORMULA_START) else value
    if isinstance(value, list | tuple):
        return [neutralise(v) for v in value]
    if isinstance(value, dict):
        return {neutralise(k): neutralise(v) for k, v in value.items()}
    return value


def _flat(value):
    return json.dumps(value, ensure_ascii=False) if isinstance(value, dict | list | tuple) else value


def to_csv(rows: list[dict]) -> str:
    """Rows (dicts; the columns are every key, in the order they first appear) as CSV; nested values as JSON text."""
    out = io.StringIO()
    if rows:
        w = csv.writer(out)
        keys = list(dict.fromkeys(k for r in rows for k in r))
        w.writerow([neutralise(k) for k in keys])
        for r in rows:
            w.writerow([neutralise(_flat(r.get(k))) for k in keys])
    return out.getvalue()


def to_jsonl(rows: list[dict]) -> str:
    return "".join(json.dumps(neutralise(r), ensure_ascii=False) + "\n" for r in rows)
