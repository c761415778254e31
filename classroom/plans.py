"""Lesson plans, the class's pacing and students' snapshots: plain data, and the checks every input passes.

A plan is an ordered list of stops; a stop is a state of the app (the keys of `rules.STATE_FIELDS`: page,
sentence, model, switched-off parts, lesson step), a caption, an optional question (as `rules.check_question`
takes it) and optional hidden values (`hidden.head`: a "mystery head" whose weights stay hidden until the
teacher reveals them). It travels as a small JSON file or inside a link (`plan_to_link`: the JSON, deflated,
in URL-safe base64), and is read back by `read_plan` / `plan_from_link`, which never execute anything (only
`json.loads`) and refuse whatever is not exactly this shape with one message (`InvalidInput`) that names
the stop and the field. Text is checked as every shared text is (`rules.check_text`: bounded, no `<` or `>`,
no control characters), so nothing of a plan can be HTML; pages still draw it escaped.

The file format, version 1::

    {"format": "glass-plan/1", "title": "What decides il or elle",
     "stops": [{"caption": "...", "state": {"page": "multi_head", "sentence": "...", ...},
                "question": {"text": "...", "options": ["...", "..."], "answer": 0},   (optional)
                "hidden": {"head": "enc.1.self_attn:2"}}]}                             (optional)

Pacing (`check_pace`): the class's mode ("lead": students who follow see the teacher's screen; "free": every
student explores; "plan": students explore the plan's stops up to the current one), whether the class is
paused ("eyes on the projector"), the current stop, whether the hidden values are revealed, and the plan's
version. Nothing here imports Streamlit; which pages and heads exist is the caller's to say.
"""

from __future__ import annotations

import base64
import binascii
import json
import zlib
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, NoReturn

from classroom.errors import InvalidInput
from classroom.rules import check_question, check_state, check_text, parse_head

FORMAT = "glass-plan/1"
MAX_PLAN_BYTES = 32_000  # a plan's JSON (file, or a link once inflated)
MAX_LINK_CHARS = 8_000  # a plan's link token (a browser's address stays well under common limits)
MAX_STOPS = 30
MAX_TITLE = 120
MAX_CAPTION = 400
MAX_NOTE = 140  # a snapshot's one-line note
PACE_MODES = ("lead", "free", "plan")
PACE_LABELS = {
    "lead": "Students follow me",
    "free": "Students explore freely",
    "plan": "Students explore the plan's stops so far",
}
SHOTS_KEPT = 60  # a class's gallery keeps its newest snapshots


@dataclass(frozen=True)
class Stop:
    caption: str
    state: dict[str, Any]
    question: dict[str, Any] | None = None  # {"text", "options", "answer"}
    hidden_head: str | None = None  # "enc.1.self_attn:2": its weights hidden until the reveal

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"caption": self.caption, "state": dict(self.state)}
        if self.question is not None:
            out["question"] = dict(self.question)
        if self.hidden_head is not None:
            out["hidden"] = {"head": self.hidden_head}
        return out


@dataclass(frozen=True)
class Plan:
    title: str
    stops: tuple[Stop, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "title": self.title, "stops": [s.as_dict() for s in self.stops]}

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), ensure_ascii=False, indent=1)

    def with_stop(self, stop: Stop) -> Plan:
        if len(self.stops) >= MAX_STOPS:
            raise InvalidInput(f"A plan has at most {MAX_STOPS} stops.")
        return Plan(self.title, (*self.stops, stop))

    def without(self, index: int) -> Plan:
        return Plan(self.title, tuple(s for i, s in enumerate(self.stops) if i != index))


def _fail(where: str, why: str) -> NoReturn:
    raise InvalidInput(f"{where}: {why}")


def check_stop(raw: object, where: str, pages: Collection[str] | None, heads: Collection[str] | None = None) -> Stop:
    """One stop, checked (`where` names it in the message)."""
    if not isinstance(raw, dict):
        _fail(where, "a stop is an object with a caption and a state")
    unknown = sorted(set(map(str, raw)) - {"caption", "state", "question", "hidden"})
    if unknown:
        _fail(where, f"unknown field {unknown[0][:40]!r}")
    try:
        caption = check_text(raw.get("caption", ""), MAX_CAPTION, "the caption", allow_empty=True)
        state = check_state(raw.get("state"))
    except InvalidInput as e:
        _fail(where, str(e))
    if "page" not in state or (pages is not None and state["page"] not in pages):
        _fail(where, f"the page {str(state.get('page'))[:40]!r} is not a page of this app")
    question = None
    if raw.get("question") is not None:
        q = raw["question"]
        if not isinstance(q, dict) or set(q) != {"text", "options", "answer"}:
            _fail(where, "a question has exactly a text, its options and the index of the answer")
        try:
            question = check_question(q["text"], q["options"], q["answer"])
        except InvalidInput as e:
            _fail(where, str(e))
    head = None
    if raw.get("hidden") is not None:
        hidden = raw["hidden"]
        if not isinstance(hidden, dict) or set(hidden) != {"head"}:
            _fail(where, 'hidden values name one head: {"head": "enc.1.self_attn:2"}')
        parsed = parse_head(hidden["head"])
        if parsed is None or (heads is not None and f"{parsed[0]}:{parsed[1]}" not in heads):
            _fail(where, f"the hidden head {str(hidden['head'])[:40]!r} is not a head of the model")
        head = f"{parsed[0]}:{parsed[1]}"
    return Stop(caption, state, question, head)


def check_plan(data: object, pages: Collection[str] | None, heads: Collection[str] | None = None) -> Plan:
    """A plan from parsed JSON; `InvalidInput` with one message naming what is wrong. `pages` (None: any page
    name) and `heads` (None: any well-formed head) are the app's; the class store checks with None."""
    if not isinstance(data, dict):
        raise InvalidInput("A plan is a JSON object with a format, a title and its stops.")
    if data.get("format") != FORMAT:
        raise InvalidInput(f"This is not a lesson plan of this app (its format must be {FORMAT!r}).")
    unknown = sorted(set(map(str, data)) - {"format", "title", "stops"})
    if unknown:
        raise InvalidInput(f"The plan has an unknown field {unknown[0][:40]!r}.")
    try:
        title = check_text(data.get("title"), MAX_TITLE, "the plan's title")
    except InvalidInput as e:
        raise InvalidInput(f"The plan's title: {e}") from None
    stops = data.get("stops")
    if not isinstance(stops, list) or not 1 <= len(stops) <= MAX_STOPS:
        raise InvalidInput(f"A plan has 1 to {MAX_STOPS} stops.")
    plan = Plan(title, tuple(check_stop(s, f"Stop {i + 1}", pages, heads) for i, s in enumerate(stops)))
    if len(json.dumps(plan.as_dict(), ensure_ascii=False).encode()) > MAX_PLAN_BYTES:
        raise InvalidInput(f"The plan is larger than {MAX_PLAN_BYTES:,} bytes.")
    return plan


def read_plan(raw: bytes | str, pages: Collection[str], heads: Collection[str] | None = None) -> Plan:
    """A plan from a file's bytes (or text): size first, then JSON, then `check_plan`."""
    if isinstance(raw, str):
        raw = raw.encode("utf-8", "surrogatepass")
    if len(raw) > MAX_PLAN_BYTES:
        raise InvalidInput(f"The file is larger than {MAX_PLAN_BYTES:,} bytes: not a lesson plan of this app.")
    try:
        data = json.loads(raw.decode("utf-8-sig"), parse_constant=_no_constant)  # (a byte-order mark is no error)
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise InvalidInput("The file is not valid JSON (a lesson plan is a .json file saved by this app).") from None
    return check_plan(data, pages, heads)


def _no_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not a number")


def plan_to_link(plan: Plan) -> str:
    """The plan as a URL-safe token (deflated JSON in base64)."""
    packed = zlib.compress(json.dumps(plan.as_dict(), ensure_ascii=False, separators=(",", ":")).encode(), 9)
    token = base64.urlsafe_b64encode(packed).decode().rstrip("=")
    if len(token) > MAX_LINK_CHARS:
        raise InvalidInput("This plan is too large for a link: save it as a file instead.")
    return token


def plan_from_link(token: object, pages: Collection[str], heads: Collection[str] | None = None) -> Plan:
    """A plan from a link's token: its length, base64, inflated to at most MAX_PLAN_BYTES, then `read_plan`."""
    if not isinstance(token, str) or not 0 < len(token) <= MAX_LINK_CHARS:
        raise InvalidInput("The link's plan is missing or too long.")
    try:
        packed = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        inflate = zlib.decompressobj()
        raw = inflate.decompress(packed, MAX_PLAN_BYTES + 1)
    except (binascii.Error, ValueError, zlib.error):
        raise InvalidInput("The link's plan is damaged (was the link cut short?).") from None
    if len(raw) > MAX_PLAN_BYTES or inflate.unconsumed_tail:
        raise InvalidInput(f"The link's plan is larger than {MAX_PLAN_BYTES:,} bytes.")
    return read_plan(raw, pages, heads)


def plan_of(data: dict[str, Any]) -> Plan:
    """A stored plan (already checked) as a `Plan`."""
    return Plan(
        data["title"],
        tuple(
            Stop(s["caption"], s["state"], s.get("question"), (s.get("hidden") or {}).get("head"))
            for s in data["stops"]
        ),
    )


PACE_KEYS = ("mode", "paused", "stop", "reveal", "plan", "recall", "shot")


def check_pace(pace: object) -> dict[str, Any]:
    """The class's pace: its mode, paused, its plan's stop, the mystery's reveal, the plan's version, how many times
    the teacher brought everyone back (`recall`: a student who explores follows again when it moves), and the
    snapshot the teacher projects (`shot`: its number, its student's, its note and its view; or None)."""
    if not isinstance(pace, dict) or set(pace) - set(PACE_KEYS):
        raise InvalidInput("the pace has a mode, paused, stop, reveal, plan, recall and shot")
    out = {
        "mode": pace.get("mode", "lead"),
        "paused": pace.get("paused", False),
        "stop": pace.get("stop", -1),
        "reveal": pace.get("reveal", False),
        "plan": pace.get("plan", 0),
        "recall": pace.get("recall", 0),
        "shot": pace.get("shot"),
    }
    if out["mode"] not in PACE_MODES:
        raise InvalidInput(f"the mode is one of {', '.join(PACE_MODES)}")
    for key in ("paused", "reveal"):
        if not isinstance(out[key], bool):
            raise InvalidInput(f"{key} must be true or false")
    for key, low in (("stop", -1), ("plan", 0), ("recall", 0)):
        if not isinstance(out[key], int) or isinstance(out[key], bool) or not low <= out[key] <= 10**9:
            raise InvalidInput(f"{key} must be a whole number")
    if out["stop"] >= MAX_STOPS:
        raise InvalidInput("no such stop")
    if out["shot"] is not None:
        shot = out["shot"]
        if not isinstance(shot, dict) or set(shot) != {"n", "student", "note", "state"}:
            raise InvalidInput("a projected snapshot has its number, its student, its note and its view")
        for key in ("n", "student"):
            if not isinstance(shot[key], int) or isinstance(shot[key], bool) or not 0 <= shot[key] <= 10**9:
                raise InvalidInput(f"the snapshot's {key} must be a whole number")
        out["shot"] = {
            "n": shot["n"],
            "student": shot["student"],
            "note": check_note(shot["note"]),
            "state": check_state(shot["state"]),
        }
    return out


DEFAULT_PACE = check_pace({})


def check_note(note: object) -> str:
    return check_text(note if note is not None else "", MAX_NOTE, "the note", allow_empty=True)


# -- the class board: students' own training runs side by side --------------------------------------------------------
RUN_SETTINGS = (
    "arch",
    "d_model",
    "n_heads",
    "n_layers",
    "d_ff",
    "dropout",
    "batch_size",
    "steps",
    "warmup",
    "lr_scale",
    "label_smoothing",
    "seed",
    "look_ahead_mask",
)
MAX_CURVE = 60  # points of a run's loss curve on the board
MAX_RUN_TEXT = 200


def _number(value: object, what: str, low: float = -1e12, high: float = 1e12) -> float | int:
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise InvalidInput(f"{what} must be a number from {low:g} to {high:g}")
    return value


def check_run(run: object) -> dict[str, Any]:
    """A run for the class board: {"settings": {RUN_SETTINGS: value}, "steps": [...], "losses": [...] (at most
    MAX_CURVE each, as long as each other), "exact_match": share or None, "source", "translation"}."""
    if not isinstance(run, dict) or set(run) != {"settings", "steps", "losses", "exact_match", "source", "translation"}:
        raise InvalidInput("a board run has settings, steps, losses, exact_match, source and translation")
    settings = run["settings"]
    if not isinstance(settings, dict) or not set(settings) <= set(RUN_SETTINGS):
        raise InvalidInput(f"a run's settings are among {', '.join(RUN_SETTINGS)}")
    clean = {}
    for key, value in settings.items():
        clean[key] = (
            check_text(value, 20, key)
            if isinstance(value, str)
            else value
            if isinstance(value, bool)
            else _number(value, key)
        )
    steps, losses = run["steps"], run["losses"]
    if (
        not isinstance(steps, list)
        or not isinstance(losses, list)
        or len(steps) != len(losses)
        or len(steps) > MAX_CURVE
    ):
        raise InvalidInput(f"a run's curve is at most {MAX_CURVE} steps and as many losses")
    steps = [int(_number(s, "a step", 0, 1e9)) for s in steps]
    losses = [float(_number(x, "a loss", 0, 1e6)) for x in losses]
    exact = run["exact_match"]
    if exact is not None:
        exact = float(_number(exact, "the exact match", 0, 1))
    return {
        "settings": clean,
        "steps": steps,
        "losses": losses,
        "exact_match": exact,
        "source": check_text(run["source"], MAX_RUN_TEXT, "the source", allow_empty=True),
        "translation": check_text(run["translation"], MAX_RUN_TEXT, "the translation", allow_empty=True),
    }


RUN_STATES = ("running", "finished", "stopped", "failed")
MAX_ATTENTION_TOKENS = 40  # tokens on each axis of the followed run's attention snapshot
ATTENTION_KEYS = ("step", "title", "queries", "keys", "weights")


def check_attention(att: object) -> dict[str, Any] | None:
    """The followed run's latest attention snapshot, or None: {"step", "title", "queries": [token], "keys":
    [token], "weights": [[share] per key] per query} (at most MAX_ATTENTION_TOKENS tokens each way)."""
    if att is None:
        return None
    if not isinstance(att, dict) or set(att) != set(ATTENTION_KEYS):
        raise InvalidInput(f"a run's attention has {', '.join(ATTENTION_KEYS)}")
    axes = {}
    for axis in ("queries", "keys"):
        tokens = att[axis]
        if not isinstance(tokens, list) or not 1 <= len(tokens) <= MAX_ATTENTION_TOKENS:
            raise InvalidInput(f"a run's attention has 1 to {MAX_ATTENTION_TOKENS} {axis}")
        axes[axis] = [check_text(t, 50, "a token") for t in tokens]
    rows = att["weights"]
    if (
        not isinstance(rows, list)
        or len(rows) != len(axes["queries"])
        or not all(isinstance(r, list) and len(r) == len(axes["keys"]) for r in rows)
    ):
        raise InvalidInput("a run's attention weights are one row per query and one share per key")
    return {
        "step": int(_number(att["step"], "the snapshot's step", 0, 1e9)),
        "title": check_text(att["title"], MAX_RUN_TEXT, "the snapshot's title"),
        **axes,
        "weights": [[float(_number(w, "an attention weight", 0, 1)) for w in r] for r in rows],
    }


def check_class_run(run: object) -> dict[str, Any]:
    """The teacher's run as the class follows it: a board run (`check_run`) plus its state, step and total, and
    (optionally) its latest attention snapshot (`check_attention`)."""
    if not isinstance(run, dict):
        raise InvalidInput("the class's run is an object")
    extra = {k: run.get(k, 0) for k in ("state", "step", "total", "model")}
    if extra["state"] not in RUN_STATES:
        raise InvalidInput(f"the run's state is one of {', '.join(RUN_STATES)}")
    for key in ("step", "total", "model"):  # model: the version of the run's model in the class store (0: none)
        extra[key] = int(_number(extra[key], f"the run's {key}", 0, 1e9))
    board_run = {k: v for k, v in run.items() if k not in extra and k != "attention"}
    return {**check_run(board_run), **extra, "attention": check_attention(run.get("attention"))}


MAX_CLASS_MODEL_BYTES = 16 * 1024 * 1024  # a teacher's model the class may load (weights and JSON together)
# All the classes' shared models together, as stored (base64 text: 4/3 of the model), per server (a setting:
# $GLASS_CLASS_MODELS_MB). 256 MB is 12 models of the largest size, or hundreds of the training page's; a quarter of
# Redis's default 1 GB.
CLASS_MODELS_MB = 256


def too_many_models(budget_mb: int) -> str:
    return (
        f"The server holds as many shared models as it can right now ({budget_mb} MB of them), so your class "
        "sees the run without its model. It is free again as other classes end (or whoever runs the server "
        "can raise GLASS_CLASS_MODELS_MB)."
    )
