"""A study in a Streamlit session: who this session is in it (a participant, the owner), and the event log's hooks.

The participant's pseudonym is made by the store from this browser's id (`ui.session_info.current_identity`, the
keyed hash of its XSRF cookie, the same on every app process) or from a participant code their researcher issued;
a session without a browser id (scripts, AppTest) uses a random id of its own. It is never read from the browser:
no link, widget or message can name another participant.

`on_run(page)` runs at the start of every run of the app (app.py): for a participant on their path between the
tests it records the page or lesson step viewed and every shared control they changed (the sentence as a keyed
hash and its length unless the study keeps text), draws the way back to the study in the sidebar, and applies their
condition (view-only: every intervention stays off). Anyone else pays one dictionary look-up.

Session-state keys:

==================  ===========================================================================================
study_code          the study this session takes part in (or owns)
_study_actor        this participant's pseudonym (set only by the consent callback or a returning browser)
_study_phase        the participant's phase as last read (a cache: the store decides)
_study_condition    the participant's condition
_study_owner        (code, key) of the study this session owns, never drawn after creation
_study_seen         what `on_run` last recorded: (page, step, the shared controls' digest)
_study_shown        (item id, monotonic time) of the item on screen: its latency
_study_notice       a message for the next run
_study_link         the study link's token (kept in the address while taking part: a reload finds the study)
_study_class_seen   the class votes, reveals and training run already recorded
==================  ===========================================================================================
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import time

import streamlit as st

from classroom import ClassStoreError
from classroom import get_store as get_class_store
from explain.instrument import CURRENT, Instrument, build
from explain.items import Models
from study import StudyError, get_store, schema
from ui.models import load_shipped
from ui.session_info import current_identity

CODE, ACTOR, PHASE, CONDITION = "study_code", "_study_actor", "_study_phase", "_study_condition"
OWNER, SEEN, SHOWN, NOTICE = "_study_owner", "_study_seen", "_study_shown", "_study_notice"
CLASS_SEEN = "_study_class_seen"
PARAM, TOKEN, LINK = "study", "sk", "_study_link"
SHARED = ("sentence", "model", "heads_off", "iv_look_ahead", "iv_padding", "iv_scale", "iv_pos")
_log = logging.getLogger("glass.study")


def ss():
    return st.session_state


def store():
    return get_store()


@st.cache_resource(show_spinner="Writing the concept test with the model…")
def instrument(version: str = CURRENT) -> Instrument:
    """The concept test of `version`, both forms, answered by the shipped models (once per server)."""
    return build(Models(load_shipped("base"), load_shipped("no_mask")), version)


def client() -> str:
    try:
        return current_identity().client
    except Exception:  # noqa: BLE001 - no request: one client
        return "local"


def source(participant_code: str = "") -> str:
    """What the pseudonym is made from: a researcher's participant code, else this browser, else this session."""
    code = participant_code.strip()
    if code:
        return "code:" + schema.check_text(code, 64, "The participant code", allow_empty=False)
    with contextlib.suppress(Exception):
        bid = current_identity().browser
        if bid:
            return bid
    return ss().setdefault("_study_session_source", "s-" + secrets.token_hex(16))


def notify(text: str) -> None:
    ss()[NOTICE] = text


def participating() -> bool:
    return ss().get(ACTOR) is not None and ss().get(CODE) is not None


def on_path() -> bool:
    return participating() and ss().get(PHASE) == "path"


def view_only() -> bool:
    """This participant's condition keeps every intervention off."""
    return on_path() and ss().get(CONDITION) == "view-only"


def predict_first() -> bool:
    return on_path() and ss().get(CONDITION) == "predict-on"


def record(verb: str, obj: str, result: dict | None = None, step: int | None = None, page: str | None = None) -> None:
    """One event of a participant's path (nothing for anyone else); a refusal is logged, never shown as an error:
    the lesson goes on whatever the log says."""
    if not on_path():
        return
    context = {k: v for k, v in (("page", page), ("step", step)) if v is not None}
    try:
        store().log(ss()[CODE], ss()[ACTOR], verb, obj, result, context)
    except StudyError as e:
        _log.info("study event not recorded: %s", e)


def _digest() -> dict:
    return {k: (list(v) if isinstance(v, list | tuple) else v) for k in SHARED if (v := ss().get(k)) is not None}


def open_link(code: str, token: str | None) -> None:
    """A study's link (?study=CODE&sk=TOKEN) opened: this session's study, and its participant if this browser
    already agreed (a reload, another app process, another page of the path, the delayed test)."""
    study = store().find(code, client(), token)
    ss()[CODE], ss()[LINK] = study.code, token if isinstance(token, str) else None
    ss().pop(ACTOR, None)
    actor = store().pseudonym(study.code, source())
    p = store().participant(study.code, actor)
    if p is not None:
        ss()[ACTOR], ss()[PHASE], ss()[CONDITION] = actor, p.phase, p.condition


def take_link() -> None:
    """Read a study link in the address (once per study and session); a refusal becomes the next notice."""
    qp = st.query_params
    code = qp.get(PARAM)
    if code is None or code == ss().get(CODE):
        return
    try:
        open_link(str(code), qp.get(TOKEN))
    except StudyError as e:
        notify(str(e))
        for key in (PARAM, TOKEN):
            qp.pop(key, None)


def keep_link() -> None:
    """A participant's address keeps their study (and its token), on every page."""
    qp = st.query_params
    want = {PARAM: ss()[CODE], **({TOKEN: ss()[LINK]} if ss().get(LINK) else {})}
    for key, value in want.items():
        if qp.get(key) != value:
            qp[key] = value


def on_run(page) -> None:
    """Start of every run (app.py): a study link is read; a participant keeps it in the address, and on their path
    gets the page/step viewed and the controls changed recorded, their condition applied, and the way back to the
    study in the sidebar."""
    if PARAM in st.query_params:
        with contextlib.suppress(StudyError):  # (the Study page says what went wrong)
            take_link()
    if participating():
        keep_link()
    if not on_path():
        return
    name = getattr(page, "url_path", "") or "home"
    if view_only():
        ss()["heads_off"] = []
        for key in SHARED[3:]:
            ss()[key] = True
    step = ss().get("lesson_step") if name == "lesson" else None
    now = _digest()
    last_page, last_step, last = ss().get(SEEN, (None, None, None))
    if last is not None:
        for key in SHARED:
            if now.get(key) != last.get(key) and key in now:
                result = {"text": str(now[key])[:200]} if key == "sentence" else {"value": now[key]}
                record("changed", f"control/{key}", result, step=last_step, page=last_page)
    if (name, step) != (last_page, last_step):
        record("viewed", f"lesson/step/{step}" if step else f"page/{name}", None, step=step, page=name)
    ss()[SEEN] = (name, step, now)
    class_and_training(name, step)
    if name != "studies":
        with st.sidebar:
            st.info(
                f"You are taking part in study **{ss()[CODE]}**. When you have finished the lesson, go back to "
                "the Study page for the second test.",
                icon=":material/science:",
            )
            st.page_link("pages/studies.py", label="Back to the study", icon=":material/arrow_back:")
            if view_only():
                st.caption("In this study your switches stay on: the model is shown as trained.")


def class_and_training(page: str, step: int | None) -> None:
    """What the participant did in a class (voted, voted again, clicked a cell, saw a reveal: read from the class
    store's poll, so the classroom's own code needs no hook) and a training run they started, recorded once each."""
    seen = ss().setdefault(CLASS_SEEN, {})
    job = ss().get("training_job")
    if job is not None and getattr(job, "id", None) and seen.get("job") != job.id:
        seen["job"] = job.id
        record("trained", "training/run", {"steps": int(getattr(job.tcfg, "steps", 0) or 0)}, step, page)
    student, code = ss().get("_class_student"), ss().get("class_code")
    if ss().get("class_role") != "student" or not student or not code:
        return
    try:
        poll = get_class_store().votes(code, student_id=student)
    except ClassStoreError:
        return
    if poll is None:
        return
    where = f"class/question/{poll.qid}"
    for verb, value in (("clicked" if poll.grid else "voted", poll.my_first), ("revoted", poll.my_second)):
        if value is not None and seen.get((poll.qid, verb)) != value:
            seen[(poll.qid, verb)] = value
            record(verb, where, {"choice": int(value)}, step, page)
    if poll.revealed and not seen.get((poll.qid, "revealed")):
        seen[(poll.qid, "revealed")] = True
        record("revealed", where, None, step, page)


def since_shown(item_id: str) -> int:
    """Milliseconds since `item_id` was first drawn in this session (its answer's latency)."""
    shown = ss().get(SHOWN)
    if not shown or shown[0] != item_id:
        return 0
    return int(min(86_400_000, (time.monotonic() - shown[1]) * 1000))
