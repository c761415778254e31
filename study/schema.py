"""What a study stores: its settings, the participant's phases, the consent text, and the event log's fixed schema.

The event log (one row per event, xAPI-like) has these fields and no others:

==========  ====================================================================================================
actor       the participant's pseudonym: ``p-`` + HMAC-SHA256(the study's own random key, the browser's id or the
            researcher-issued participant code), 32 hex digits. No name, e-mail or network address exists anywhere.
verb        one of `VERBS` (below)
object      what the verb is about, a path: ``item/A03``, ``lesson/step/7``, ``page/decoder``, ``control/sentence``,
            ``class/question/4``, ``phase/post``, ``survey/sus3`` ...
result      a small JSON object whose keys and types the verb fixes (`VERBS`); anything else is refused
context     set by the store, never by the browser: the phase, the form, the condition, the instrument version,
            and (from the page) the page and lesson step
timestamp   the server's clock, milliseconds since 1970 (UTC)
==========  ====================================================================================================

Verbs: consented, started and completed (a phase), answered (a test item: choice, correct, confidence 1-4,
latency_ms, reason), rated (a questionnaire item: value), viewed (a page or a lesson step), changed (a control:
value; the typed sentence only as its keyed hash and length unless the study opts in to its text), predicted
(predict-before-reveal in the lesson), checked ("Check yourself"), voted, revoted, revealed and clicked (a class's
peer instruction), trained (a training run started), shared (a snapshot sent to the class).

Phases of a participant, in order: pre -> path -> post -> survey -> done (-> delayed -> finished, when the study
has a delayed post-test and its days have passed).
"""

from __future__ import annotations

import json
import re
import unicodedata

from study.errors import InvalidInput

PHASES = ("pre", "path", "post", "survey", "done", "delayed", "finished")
TEST_PHASES = ("pre", "post", "delayed")
PATHS = {"lesson": "The guided lesson, alone", "class": "A live class (the teacher's)", "plan": "A lesson plan, alone"}
FACTORS = {"predict": "Predict before reveal (on / off)", "controls": "Interventions (on / view-only)"}
CONDITIONS = {"predict": ("predict-on", "predict-off"), "controls": ("interventions-on", "view-only")}
MAX_TITLE = 80
MAX_REASON = 200
MAX_OBJECT = 120
MAX_RESULT_BYTES = 2_048
MAX_INSTRUMENT_BYTES = 400_000
DEFAULT_RETENTION_DAYS = 90
DEFAULT_DELAY_DAYS = 7

CONSENT_VERSION = "consent-1"
CONSENT = {
    "consent-1": (
        "**What this study is.** Your teacher or a researcher wants to know whether this app helps people learn how "
        "a Transformer works. You answer a short test, follow a lesson, answer the test again (other sentences), "
        "then a few questions about the app{delayed}.\n\n"
        "**What is stored.** Your answers (which option, right or wrong, how sure you were, your one-line reasons "
        "if you write any, how long you took), and what you do in the app during the study (pages and lesson steps "
        "viewed, switches changed, votes). You are stored under a pseudonym made from your browser and a key of "
        "this study: no name, no e-mail, no network address. A sentence you type is not stored: only a code made "
        "from it with this study's key, and its length{text}.\n\n"
        "**For how long.** Everything of this study is deleted on **{expires}** ({days} days after it started), "
        "or earlier if the study's owner deletes it.\n\n"
        "**Withdrawing.** Taking part is voluntary. You may stop at any time; after you agree you get a deletion "
        "code: with it, “Delete my data” on the Study page deletes everything recorded about you, at any time "
        "until then.\n\n"
        "**Who sees it.** The study's owner sees the answers under pseudonyms and a report; figures that count "
        "fewer than 5 people are not shown in the report."
    ),
}

VERBS = {  # verb -> {result key: type}
    "consented": {},
    "started": {},
    "completed": {},
    "answered": {"choice": int, "correct": bool, "confidence": int, "latency_ms": int, "reason": str},
    "rated": {"value": int},
    "viewed": {},
    "changed": {"value": (str, bool, int, list), "text_hash": str, "length": int, "text": str},
    "predicted": {"choice": int, "correct": bool},
    "checked": {"choice": int, "correct": bool},
    "voted": {"choice": int},
    "revoted": {"choice": int},
    "revealed": {},
    "clicked": {"choice": int},
    "trained": {"steps": int},
    "shared": {},
}
PATH_VERBS = frozenset(
    {"viewed", "changed", "predicted", "checked", "voted", "revoted", "revealed", "clicked", "trained", "shared"}
)
CONTEXT_FROM_PAGE = {"page": str, "step": int}
_OBJECT = re.compile(r"[a-z_]{1,24}(/[A-Za-z0-9_.:-]{1,64}){0,3}", re.ASCII)
_SLUG = re.compile(r"[a-z0-9_-]{1,64}", re.ASCII)


def check_text(value, limit: int, what: str, allow_empty: bool = True) -> str:
    """Any text a person typed, as text: bounded, one line, no control or unassigned characters (HTML is allowed:
    every screen draws it as text). Refused, never cut."""
    if not isinstance(value, str):
        raise InvalidInput(f"{what} must be text.")
    if len(value) > limit:
        raise InvalidInput(f"{what} is longer than {limit} characters ({len(value)}): shorten it.")
    if any(unicodedata.category(c) in ("Cc", "Cf", "Cs", "Co", "Cn") for c in value):
        raise InvalidInput(f"{what} may be one line of text only (no line breaks or control characters).")
    if not allow_empty and not value.strip():
        raise InvalidInput(f"{what} is empty.")
    return value


def _int(value, lo: int, hi: int, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        raise InvalidInput(f"{what} must be a whole number from {lo} to {hi}.")
    return value


def check_settings(s) -> dict:
    """A study's settings: title, path, factor (or none: one condition), retention and delay in days, whether
    typed sentences are kept as text. Unknown keys are refused."""
    if not isinstance(s, dict):
        raise InvalidInput("the settings must be a dict")
    allowed = {"title", "path", "factor", "retention_days", "delay_days", "keep_text", "instrument"}
    unknown = sorted(set(s) - allowed)
    if unknown:
        raise InvalidInput(f"unknown settings: {', '.join(map(str, unknown))[:200]}")
    title = check_text(s.get("title", ""), MAX_TITLE, "The study's title")
    if "<" in title or ">" in title:
        raise InvalidInput("The study's title may not contain < or >.")
    path = s.get("path", "lesson")
    if path not in PATHS:
        raise InvalidInput(f"the path must be one of {', '.join(PATHS)}")
    factor = s.get("factor")
    if factor is not None and factor not in FACTORS:
        raise InvalidInput(f"the factor must be one of {', '.join(FACTORS)}, or none")
    keep = s.get("keep_text", False)
    if not isinstance(keep, bool):
        raise InvalidInput("keep_text must be true or false")
    instrument = s.get("instrument", "")
    if not isinstance(instrument, str) or not _SLUG.fullmatch(instrument):
        raise InvalidInput("the instrument version must be a short name")
    return {
        "title": title,
        "path": path,
        "factor": factor,
        "retention_days": _int(s.get("retention_days", DEFAULT_RETENTION_DAYS), 1, 3650, "The retention period"),
        "delay_days": _int(s.get("delay_days", DEFAULT_DELAY_DAYS), 0, 365, "The delayed test's days"),
        "keep_text": keep,
        "instrument": instrument,
    }


def conditions(settings: dict) -> tuple[str, ...]:
    factor = settings.get("factor")
    return CONDITIONS[factor] if factor else ("all",)


def check_object(value) -> str:
    if not isinstance(value, str) or len(value) > MAX_OBJECT or not _OBJECT.fullmatch(value):
        raise InvalidInput("an event's object is a short path such as lesson/step/7")
    return value


def check_result(verb: str, result) -> dict:
    """The result of an event of `verb`: only the verb's keys, each of its type, small."""
    if verb not in VERBS:
        raise InvalidInput(f"no such verb: {str(verb)[:40]}")
    result = {} if result is None else result
    if not isinstance(result, dict):
        raise InvalidInput("an event's result is a dict")
    spec = VERBS[verb]
    for key, value in result.items():
        if key not in spec:
            raise InvalidInput(f"{verb}: no result field {str(key)[:40]}")
        if not isinstance(value, spec[key]) or (spec[key] is int and isinstance(value, bool)):
            raise InvalidInput(f"{verb}: {key} has the wrong type")
        if isinstance(value, str):
            check_text(value, MAX_REASON, f"{verb}: {key}")
    if len(json.dumps(result)) > MAX_RESULT_BYTES:
        raise InvalidInput("an event's result is too large")
    return result


def check_context(context) -> dict:
    context = {} if context is None else context
    if not isinstance(context, dict) or set(context) - set(CONTEXT_FROM_PAGE):
        raise InvalidInput("an event's context from the page has only page and step")
    out = {}
    if "page" in context:
        if not isinstance(context["page"], str) or not _SLUG.fullmatch(context["page"]):
            raise InvalidInput("the page is a page's name")
        out["page"] = context["page"]
    if "step" in context:
        out["step"] = _int(context["step"], 1, 999, "the lesson step")
    return out
