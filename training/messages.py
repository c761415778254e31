"""What a training run says, and the one plain form it travels in: a JSON header plus raw bytes.

A run's messages cross two kinds of boundary: the socket pair between an app process and its
training process (`training.run_process`), and, with a Redis queue, a Redis stream that every app
process reads (`training.redis_queue`, `training.queue_worker`). Both carry the same *frame*: a JSON
object (the header, with a ``"kind"``) and a list of byte strings (blobs: the trained model's files,
the attention snapshots' float32 arrays). Nothing is ever pickled, so whoever can write to the socket
or to Redis can at worst make a page show wrong figures, never run code.

Every kind has one typed record below and one decoder, chosen by the header's ``"kind"`` from a fixed
table (never a class name read from the data). A decoder checks every field's type and bound (the checks:
training/fields.py); anything else raises `BadMessage` with the reason, which the reader logs and turns into a
message on the page.

Training process -> app (and the stream):
    Started   a queue worker took the run (again, after a worker died: the page starts over)
    Info      the model's parameter count and the process's pid, torch threads, nice value, memory cap
    Steps     a batch of (StepEvent, seconds since start)
    Eval      one held-out evaluation (EvalEvent, seconds since start)
    Snapshots the probe sentences' attention (arrays as blobs)
    Result    the trained model: safetensors bytes and JSON bytes (two blobs)
    Usage     the process's peak resident memory and its cap
    Failing   the end, announced before a last act that may crash the process (the local pipe only)
    End       the last message: state, reason, error
App -> training process: Spec (what to train; re-validated with the app's bounds on arrival), StopAfterStep.
Redis keys: StopRequest (the stop key: stop or kill, and why), JobRecord (what another app process
needs to show a run).
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any, TypeVar

import numpy as np

from model.checkpoint import MAX_BYTES as MAX_MODEL_BYTES
from model.data import Pair
from model.limits import MODEL_BOUNDS
from model.probes import MAX_PROBES, MAX_SNAPSHOTS, Snapshot
from model.train import EvalEvent, StepEvent, TrainConfig
from model.train_settings import MemoryEstimate, SettingsError, plan_run
from training.fields import (
    MAX_LABEL,
    MAX_TEXT,
    _dataclass_of,
    _float,
    _int,
    _keys,
    _list,
    _memory,
    _num,
    _numbers,
    _pairs,
    _probes,
    _str,
    _tcfg,
)
from training.fields import BadMessage as BadMessage  # the readers catch m.BadMessage

MAX_HEADER = 4 * 2**20  # bytes of one header (a spec with a 2 MB corpus, as JSON, fits)
MAX_STEPS = 10_000  # step events in one batch
MAX_SAMPLES = 50  # sample translations in one evaluation
MAX_DIM = int(MODEL_BOUNDS["max_len"][1]) + 2  # a snapshot's sequence axes
MAX_STACK = 16  # a snapshot's layer and head axes
STATES = ("finished", "stopped", "failed")
_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


# --- the records -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Spec:
    """What to train: the validated recipe, its data (None: the shipped toy set), probes, the run's name
    and its memory estimate. Whoever decodes a spec recomputes the estimate from the rest and keeps the
    smaller of the two: a spec can lower its process's memory cap, never raise it."""

    job_id: str
    tcfg: TrainConfig
    data: dict[str, list[Pair]] | None
    data_sha256: str | None
    probes: tuple[str, ...]
    probe_every: int
    name: str
    memory: MemoryEstimate | None = None


@dataclass(frozen=True)
class StopAfterStep:
    """App -> training process: end after the current step and hand over the model so far."""


@dataclass(frozen=True)
class Started:
    wall: float  # time.time() when the worker took it
    worker: str  # the worker's host name


@dataclass(frozen=True)
class Info:
    parameters: int
    pid: int | None = None
    torch_threads: int | None = None
    nice: int | None = None
    memory_limit: int | None = None
    memory_bytes: int | None = None


@dataclass(frozen=True)
class Steps:
    events: tuple[tuple[StepEvent, float], ...]


@dataclass(frozen=True)
class Eval:
    event: EvalEvent
    seconds: float


@dataclass(frozen=True)
class Snapshots:
    snapshots: tuple[Snapshot, ...]


@dataclass(frozen=True)
class Result:
    weights: bytes  # safetensors
    meta: bytes  # the checkpoint's JSON


@dataclass(frozen=True)
class Usage:
    peak_rss: int
    memory_limit: int | None = None


@dataclass(frozen=True)
class Failing:
    state: str
    reason: str
    error: str | None = None


@dataclass(frozen=True)
class End:
    state: str
    reason: str
    error: str | None = None


@dataclass(frozen=True)
class StopRequest:
    how: str  # "stop": after the current step, with the model so far; "kill": at once (not `kind`: the header's)
    reason: str


@dataclass(frozen=True)
class JobRecord:
    """What another app process needs to show a run (no data: that went to the worker). `client` is the
    hashed client (`serving.identity.client_key`), never an address."""

    tcfg: TrainConfig
    data_label: str
    data_sha256: str | None
    probes: tuple[str, ...]
    probe_every: int
    owner: str | None
    name: str
    memory: MemoryEstimate | None
    client: str | None


Message = (
    Spec
    | StopAfterStep
    | Started
    | Info
    | Steps
    | Eval
    | Snapshots
    | Result
    | Usage
    | Failing
    | End
    | StopRequest
    | JobRecord
)


# --- encoding ----------------------------------------------------------------------------------------


def encode(msg: Message) -> tuple[bytes, list[bytes]]:
    """A record as (JSON header, blobs)."""
    blobs: list[bytes] = []
    if isinstance(msg, Spec):
        h: dict[str, Any] = {
            "kind": "spec",
            "job_id": msg.job_id,
            "tcfg": dataclasses.asdict(msg.tcfg),
            "data": None
            if msg.data is None
            else {split: [[p.src, p.tgt, p.tag] for p in pairs] for split, pairs in msg.data.items()},
            "data_sha256": msg.data_sha256,
            "probes": list(msg.probes),
            "probe_every": msg.probe_every,
            "name": msg.name,
            "memory": None if msg.memory is None else dataclasses.asdict(msg.memory),
        }
    elif isinstance(msg, Steps):
        h = {"kind": "steps", "events": [[_numbers(ev), _num(s)] for ev, s in msg.events]}
    elif isinstance(msg, Eval):
        ev = _numbers(msg.event)
        ev["samples"] = [list(s) for s in msg.event.samples]
        h = {"kind": "eval", "event": ev, "seconds": _num(msg.seconds)}
    elif isinstance(msg, Snapshots):
        items = []
        for s in msg.snapshots:
            shapes: dict[str, list[int]] = {}
            for part in ("enc_self", "dec_self", "cross"):
                a = np.ascontiguousarray(s.weights(part), dtype="<f4")
                shapes[part] = list(a.shape)
                blobs.append(a.tobytes())
            items.append(
                {
                    "step": s.step,
                    "probe": s.probe,
                    "translation": s.translation,
                    "src_labels": list(s.src_labels),
                    "tgt_labels": list(s.tgt_labels),
                    "shapes": shapes,
                }
            )
        h = {"kind": "snapshots", "snapshots": items}
    elif isinstance(msg, Result):
        h, blobs = {"kind": "result"}, [msg.weights, msg.meta]
    elif isinstance(msg, JobRecord):
        h = {
            "kind": "job",
            "tcfg": dataclasses.asdict(msg.tcfg),
            "data_label": msg.data_label,
            "data_sha256": msg.data_sha256,
            "probes": list(msg.probes),
            "probe_every": msg.probe_every,
            "owner": msg.owner,
            "name": msg.name,
            "memory": None if msg.memory is None else dataclasses.asdict(msg.memory),
            "client": msg.client,
        }
    else:
        kind = _KIND_OF[type(msg)]
        h = {"kind": kind, **dataclasses.asdict(msg)}
    return json.dumps(h, allow_nan=False, ensure_ascii=False).encode(), blobs


def decode(header: bytes, blobs: Sequence[bytes] = (), kinds: Sequence[str] | None = None) -> Message:
    """The record a frame holds; `BadMessage` when it is not one of ours (or not of `kinds`)."""
    if not isinstance(header, bytes | bytearray) or len(header) > MAX_HEADER:
        raise BadMessage("the header is missing or too large")
    try:
        h = json.loads(header)
    except (ValueError, UnicodeDecodeError):
        raise BadMessage("the header is not JSON") from None
    if not isinstance(h, dict) or h.get("kind") not in _DECODERS:
        raise BadMessage("unknown kind of message")
    kind = h.pop("kind")
    if kinds is not None and kind not in kinds:
        raise BadMessage(f"a {kind!r} message is not expected here")
    if not all(isinstance(b, bytes | bytearray) for b in blobs):
        raise BadMessage("blobs must be bytes")
    try:
        return _DECODERS[kind](h, list(blobs))
    except BadMessage:
        raise
    except (TypeError, ValueError, KeyError, IndexError) as e:  # a check of a record's own constructor
        raise BadMessage(f"{kind}: {type(e).__name__}: {e}"[:MAX_TEXT]) from None


def _spec(h: dict[str, Any], blobs: list[bytes]) -> Spec:
    _keys(h, "spec", ["job_id", "tcfg", "data", "data_sha256", "probes", "probe_every", "name"], ["memory"])
    tcfg = _tcfg(h["tcfg"])
    data = None
    if h["data"] is not None:
        d = _keys(h["data"], "data", ["train"], ["heldout"])
        data = {split: _pairs(pairs, f"data.{split}") for split, pairs in d.items()}
    probes = _probes(h["probes"])
    try:  # the app's own bounds and memory estimate, recomputed here
        settings = {f.name: getattr(tcfg, f.name) for f in dataclasses.fields(tcfg)}
        tcfg, planned, memory = plan_run(settings, list(probes), data)
    except SettingsError as e:
        raise BadMessage(str(e)[:MAX_TEXT]) from None
    sent = _memory(h.get("memory"))
    if sent is not None and sent.total < memory.total:
        memory = sent  # a lower cap than the app's own estimate: allowed (the run may fail, nothing else)
    job_id = _str(h["job_id"], "job id")
    if not _ID.fullmatch(job_id):
        raise BadMessage("job id: letters, digits, _ and - expected")
    return Spec(
        job_id,
        tcfg,
        data,
        _str(h["data_sha256"], "data hash", 128, none=True),
        tuple(planned),
        _int(h["probe_every"], "probe interval", 0, 10_000),
        _str(h["name"], "name"),
        memory,
    )


def _steps(h: dict[str, Any], blobs: list[bytes]) -> Steps:
    _keys(h, "steps", ["events"])
    events = []
    for item in _list(h["events"], "steps", MAX_STEPS):
        if not isinstance(item, list) or len(item) != 2:
            raise BadMessage("steps: [event, seconds] expected")
        events.append((_dataclass_of(StepEvent, item[0], "step"), _float(item[1], "seconds")))
    return Steps(tuple(events))


def _eval(h: dict[str, Any], blobs: list[bytes]) -> Eval:
    _keys(h, "eval", ["event", "seconds"])
    ev = _dataclass_of(EvalEvent, h["event"], "evaluation")
    samples = []
    for s in _list(ev.samples, "samples", MAX_SAMPLES):
        if not isinstance(s, list) or len(s) != 3:
            raise BadMessage("samples: [source, translation, reference] expected")
        source, translation, reference = (_str(x, "sample", MAX_TEXT) for x in s)
        samples.append((source, translation, reference))
    return Eval(dataclasses.replace(ev, samples=samples), _float(h["seconds"], "seconds"))


def _snapshots(h: dict[str, Any], blobs: list[bytes]) -> Snapshots:
    _keys(h, "snapshots", ["snapshots"])
    items = _list(h["snapshots"], "snapshots", MAX_PROBES * MAX_SNAPSHOTS)
    if len(blobs) != 3 * len(items):
        raise BadMessage("snapshots: three arrays per snapshot expected")
    out = []
    for i, s in enumerate(items):
        _keys(s, "snapshot", ["step", "probe", "translation", "src_labels", "tgt_labels", "shapes"])
        shapes = _keys(s["shapes"], "snapshot shapes", ["enc_self", "dec_self", "cross"])
        arrays = []
        for j, part in enumerate(("enc_self", "dec_self", "cross")):
            shape = _list(shapes[part], "shape", 4)
            if len(shape) != 4:
                raise BadMessage("a snapshot's array has 4 axes")
            dims = [_int(n, "shape", 0, MAX_STACK if k < 2 else MAX_DIM) for k, n in enumerate(shape)]
            blob = blobs[3 * i + j]
            if len(blob) != 4 * math.prod(dims):
                raise BadMessage("a snapshot's array does not match its shape")
            arrays.append(np.frombuffer(bytes(blob), dtype="<f4").astype(np.float32).reshape(dims))
        labels = [
            tuple(_str(w, "label", MAX_LABEL) for w in _list(s[k], "labels", MAX_DIM))
            for k in ("src_labels", "tgt_labels")
        ]
        out.append(
            Snapshot(
                _int(s["step"], "step"),
                _int(s["probe"], "probe", 0, MAX_PROBES - 1),
                _str(s["translation"], "translation", MAX_TEXT),
                labels[0],
                labels[1],
                *arrays,
            )
        )
    return Snapshots(tuple(out))


def _result(h: dict[str, Any], blobs: list[bytes]) -> Result:
    _keys(h, "result", [])
    if len(blobs) != 2 or len(blobs[0]) + len(blobs[1]) > MAX_MODEL_BYTES:
        raise BadMessage("result: the model's two files, within the model size limit, expected")
    return Result(bytes(blobs[0]), bytes(blobs[1]))


_Ending = TypeVar("_Ending", Failing, End)


def _end(cls: type[_Ending]) -> Callable[[dict[str, Any], list[bytes]], _Ending]:
    def dec(h: dict[str, Any], blobs: list[bytes]) -> _Ending:
        _keys(h, cls.__name__.lower(), ["state", "reason", "error"])
        if h["state"] not in STATES:
            raise BadMessage(f"state: one of {', '.join(STATES)} expected")
        return cls(h["state"], _str(h["reason"], "reason"), _str(h["error"], "error", MAX_TEXT, none=True))

    return dec


_Plain = TypeVar("_Plain", StopAfterStep, Started, Info, Usage, StopRequest)


def _plain(
    cls: type[_Plain], checks: dict[str, Callable[[Any], Any]]
) -> Callable[[dict[str, Any], list[bytes]], _Plain]:
    """A record of plain fields, each checked by `checks[name]`."""

    def dec(h: dict[str, Any], blobs: list[bytes]) -> _Plain:
        fields = [f.name for f in dataclasses.fields(cls)]
        required = [f.name for f in dataclasses.fields(cls) if f.default is dataclasses.MISSING]
        _keys(h, cls.__name__.lower(), required, fields)
        return cls(**{k: checks[k](v) for k, v in h.items()})

    return dec


def _job(h: dict[str, Any], blobs: list[bytes]) -> JobRecord:
    _keys(
        h,
        "job record",
        ["tcfg", "data_label", "data_sha256", "probes", "probe_every", "owner", "name", "memory", "client"],
    )
    return JobRecord(
        _tcfg(h["tcfg"]),
        _str(h["data_label"], "data label"),
        _str(h["data_sha256"], "data hash", 128, none=True),
        _probes(h["probes"]),
        _int(h["probe_every"], "probe interval", 0, 10_000),
        _str(h["owner"], "owner", none=True),
        _str(h["name"], "name"),
        _memory(h["memory"]),
        _str(h["client"], "client", none=True),
    )


def _stop_kind(v: Any) -> str:
    if v not in ("stop", "kill"):
        raise BadMessage("stop: stop or kill expected")
    return str(v)  # (already "stop" or "kill")


def _opt_int(what: str) -> Callable[[Any], int | None]:
    return lambda v: _int(v, what, -(2**31), 2**62, none=True)


_DECODERS: dict[str, Callable[[dict[str, Any], list[bytes]], Message]] = {
    "spec": _spec,
    "stop": _plain(StopAfterStep, {}),
    "started": _plain(Started, {"wall": lambda v: _float(v, "wall"), "worker": lambda v: _str(v, "worker")}),
    "info": _plain(
        Info,
        {
            "parameters": lambda v: _int(v, "parameters"),
            "pid": _opt_int("pid"),
            "torch_threads": _opt_int("torch threads"),
            "nice": _opt_int("nice"),
            "memory_limit": _opt_int("memory limit"),
            "memory_bytes": _opt_int("memory estimate"),
        },
    ),
    "steps": _steps,
    "eval": _eval,
    "snapshots": _snapshots,
    "result": _result,
    "usage": _plain(Usage, {"peak_rss": lambda v: _int(v, "peak memory"), "memory_limit": _opt_int("memory limit")}),
    "failing": _end(Failing),
    "end": _end(End),
    "stop_request": _plain(StopRequest, {"how": _stop_kind, "reason": lambda v: _str(v, "reason")}),
    "job": _job,
}
_KIND_OF = {
    StopAfterStep: "stop",
    Started: "started",
    Info: "info",
    Usage: "usage",
    Failing: "failing",
    End: "end",
    StopRequest: "stop_request",
}


# --- transports --------------------------------------------------------------------------------------


def send(conn: Connection, msg: Message) -> None:
    """Over a `multiprocessing.Connection` (the socket pair to a training process): the header, then each
    blob, as raw bytes (`send_bytes`, which never pickles)."""
    header, blobs = encode(msg)
    conn.send_bytes(json.dumps({"n": len(blobs)}).encode() + b"\n" + header)
    for b in blobs:
        conn.send_bytes(b)


def recv(conn: Connection, kinds: Sequence[str] | None = None) -> Message:
    """The next record from `conn` (EOFError when it closed; `BadMessage` when it is not one of ours)."""
    first = conn.recv_bytes(MAX_HEADER + 64)
    count, _, header = first.partition(b"\n")
    try:
        n = json.loads(count)["n"]
    except (ValueError, KeyError, TypeError):
        raise BadMessage("the frame's blob count is not readable") from None
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= 3 * MAX_PROBES * MAX_SNAPSHOTS:
        raise BadMessage("the frame's blob count is out of range")
    blobs = [conn.recv_bytes(MAX_MODEL_BYTES) for _ in range(n)]
    return decode(header, blobs, kinds)


def to_fields(msg: Message, **extra: bytes | str) -> dict[str, bytes | str]:
    """As the fields of a Redis stream entry (or hash): "m" the header, "b0", "b1", ... the blobs."""
    header, blobs = encode(msg)
    return {"m": header, **{f"b{i}": b for i, b in enumerate(blobs)}, **extra}


def from_fields(fields: dict[bytes, bytes], kinds: Sequence[str] | None = None) -> Message:
    """The record of a Redis stream entry (keys as bytes, as redis-py returns them)."""
    if not isinstance(fields, dict) or b"m" not in fields:
        raise BadMessage("no header")
    blobs: list[bytes] = []
    i = 0
    while f"b{i}".encode() in fields:
        blobs.append(fields[f"b{i}".encode()])
        i += 1
    return decode(fields[b"m"], blobs, kinds)


def to_value(msg: Message) -> bytes:
    """A record without blobs (a stop request, a job record) as one Redis value."""
    header, blobs = encode(msg)
    if blobs:
        raise ValueError("this record carries blobs: use to_fields")
    return header


def from_value(raw: bytes, kinds: Sequence[str]) -> Message:
    return decode(raw, (), kinds)
