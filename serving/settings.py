"""The numbers an operator sets in the environment (docs/operators.md has the table of every GLASS_* setting)."""

from __future__ import annotations

import os
from typing import TypeVar

N = TypeVar("N", int, float)


def env_number(name: str, kind: type[N], default: N, least: N) -> N:
    """$name read as `kind` (int or float), at least `least`; `default` when it is unset, empty or not a number."""
    try:
        value = kind(os.environ.get(name, "") or default)
    except ValueError:
        return default
    return max(least, value)
