"""The checks of a message's fields (training/messages.py): every value a decoder reads from a frame (JSON from a
socket or from Redis: untrusted) is checked here for its type and bound, and anything else raises `BadMessage`
with the reason. Also the other way: `_num` and `_numbers`, the floats of an event as JSON writes them.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any, Literal, TypeVar, overload

from model.data import Pair
from model.probes import MAX_PROBES
from model.train import EvalEvent, StepEvent, TrainConfig
from model.train_settings import MemoryEstimate

MAX_TEXT = 2_000  # characters of any free text (an error, a sample translation)
MAX_LABEL = 200  # characters of a name, a reason, a label
MAX_PAIRS = 50_000  # sentence pairs in a spec's corpus (the upload limit is 20,000)


class BadMessage(ValueError):
    """A frame that is not one of ours: the reason, safe to log (never the data itself)."""


@overload
def _int(v: Any, what: str, lo: int = 0, hi: int = 2**62, none: Literal[False] = False) -> int: ...
@overload
def _int(v: Any, what: str, lo: int = 0, hi: int = 2**62, *, none: bool) -> int | None: ...
def _int(v: Any, what: str, lo: int = 0, hi: int = 2**62, none: bool = False) -> int | None:
    if v is None and none:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise BadMessage(f"{what}: a whole number from {lo} to {hi} expected")
    return v


@overload
def _float(v: Any, what: str, none: Literal[False] = False) -> float: ...
@overload
def _float(v: Any, what: str, none: bool) -> float | None: ...
def _float(v: Any, what: str, none: bool = False) -> float | None:
    """A number; null stands for NaN (JSON has none), or for None where `none`."""
    if v is None:
        return None if none else math.nan
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise BadMessage(f"{what}: a number expected")
    return float(v)


def _num(x: float | None) -> float | None:
    """A float for JSON: NaN and infinities become null."""
    return x if x is None or math.isfinite(x) else None


@overload
def _str(v: Any, what: str, max_len: int = MAX_LABEL, none: Literal[False] = False) -> str: ...
@overload
def _str(v: Any, what: str, max_len: int = MAX_LABEL, *, none: bool) -> str | None: ...
def _str(v: Any, what: str, max_len: int = MAX_LABEL, none: bool = False) -> str | None:
    if v is None and none:
        return None
    if not isinstance(v, str) or len(v) > max_len:
        raise BadMessage(f"{what}: a string of at most {max_len} characters expected")
    return v


def _list(v: Any, what: str, max_len: int) -> list[Any]:
    if not isinstance(v, list) or len(v) > max_len:
        raise BadMessage(f"{what}: a list of at most {max_len} items expected")
    return v


def _keys(d: Any, what: str, required: Sequence[str], optional: Sequence[str] = ()) -> dict[str, Any]:
    if not isinstance(d, dict):
        raise BadMessage(f"{what}: an object expected")
    missing = [k for k in required if k not in d]
    unknown = [k for k in d if k not in required and k not in optional]
    if missing or unknown:
        raise BadMessage(f"{what}: fields {sorted(missing)} missing, {sorted(map(str, unknown))[:5]} unknown")
    return d


def _tcfg(d: Any) -> TrainConfig:
    names = [f.name for f in dataclasses.fields(TrainConfig)]
    _keys(d, "recipe", [], names)
    try:
        return TrainConfig(**d)
    except (TypeError, ValueError) as e:
        raise BadMessage(f"recipe: {e}"[:MAX_TEXT]) from None


def _memory(d: Any) -> MemoryEstimate | None:
    if d is None:
        return None
    names = [f.name for f in dataclasses.fields(MemoryEstimate)]
    _keys(d, "memory estimate", [], names)
    return MemoryEstimate(**{k: _int(v, f"memory estimate {k}") for k, v in d.items()})


def _pairs(v: Any, what: str) -> list[Pair]:
    out = []
    for p in _list(v, what, MAX_PAIRS):
        if not isinstance(p, list) or len(p) != 3:
            raise BadMessage(f"{what}: [source, target, tag] expected")
        out.append(Pair(_str(p[0], what, MAX_TEXT), _str(p[1], what, MAX_TEXT), _str(p[2], what)))
    return out


def _probes(v: Any) -> tuple[str, ...]:
    return tuple(_str(p, "probe", MAX_TEXT) for p in _list(v, "probes", MAX_PROBES))


_Numbers = TypeVar("_Numbers", StepEvent, EvalEvent)


def _dataclass_of(cls: type[_Numbers], values: Any, what: str) -> _Numbers:
    """A frozen dataclass of numbers (StepEvent, EvalEvent without its samples) from a JSON object,
    every field checked against its annotation."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    d = _keys(
        values,
        what,
        [n for n, f in fields.items() if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING],
        list(fields),
    )
    out: dict[str, Any] = {}
    for name, v in d.items():
        kind = str(fields[name].type)
        if kind == "int":
            out[name] = _int(v, f"{what}.{name}", -(2**62))
        elif kind == "float":
            out[name] = _float(v, f"{what}.{name}")
        elif kind in ("float | None", "Optional[float]"):
            out[name] = _float(v, f"{what}.{name}", none=True)
        elif kind == "bool" and isinstance(v, bool):
            out[name] = v
        elif name == "samples":
            out[name] = v  # checked by the caller (`_eval`)
        else:
            raise BadMessage(f"{what}.{name}: unexpected value")
    return cls(**out)


def _numbers(ev: StepEvent | EvalEvent) -> dict[str, Any]:
    return {
        f.name: _num(getattr(ev, f.name)) if isinstance(getattr(ev, f.name), float) else getattr(ev, f.name)
        for f in dataclasses.fields(ev)
    }
