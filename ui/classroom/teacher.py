"""Classroom mode, the teacher's side of a session (ui/classroom/session.py holds the session's class state and
the student's side; it explains the flow and the session keys): start a class, take it back with the teacher key
or by this browser (a reload, a lost connection), open its console on a second device, publish the teacher's state,
show the class's state when another device of the teacher moved it, end the class. Every operation goes through
the store with the class's secret, which the store checks.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable

import streamlit as st

from classroom import (
    ClassEnded,
    ClassSnapshot,
    ClassStoreError,
    Forbidden,
    NotFound,
    StoreFull,
    StoreUnavailable,
    new_student_id,
    normalize_code,
)
from ui.classroom.session import (
    CLASS_PAGE,
    CODE,
    CONSOLE,
    CONSOLE_PARAM,
    ENDED,
    LINK_TOKEN,
    NOT_SHARED,
    OPEN_QUESTION,
    PAGE_FILES,
    PARAM,
    PUBLISHED,
    PUBLISHED_V,
    RESTORED,
    ROLE,
    SECRET,
    TEACHER_PAGE,
    TOUCH_SECONDS,
    TOUCHED,
    UNREACHABLE,
    apply,
    browser,
    class_over,
    class_state,
    client_id,
    code,
    is_teacher,
    leave_class,
    moved_away,
    notify,
    publishable,
    role,
    ss,
    store,
    unreachable,
)


def teacher_key() -> str:
    """What the teacher pastes back to resume the class after a reload or a failover."""
    return f"{code()}-{ss()[SECRET]}"


def start_class() -> None:
    """Callback: a new class with this session's state; this session becomes its teacher."""
    leave_class()
    state, _ = publishable(class_state(ss().get(TEACHER_PAGE, "overview")))
    try:  # one class per browser (its previous one ends), a few per address: classroom.ClassStore.create
        new_code, secret = store().create(state, client_id(), owner=browser() or session_owner())
    except ClassStoreError as e:
        notify(str(e))
        return
    become_teacher(new_code, secret)
    ss()[PUBLISHED], ss()[PUBLISHED_V] = state, 1  # (a new class's state is this session's, version 1)


def become_teacher(class_code: str, secret: str, console: bool = False) -> None:
    """This session is the teacher of `class_code` (its lead screen, or a `console` beside it), and its browser is
    remembered as such (a reload, a lost connection or a new tab of it is the teacher again: `restore_teacher`).
    A lead that did not publish yet shows the class's state first (`adopt`, ui/classroom/panels.py)."""
    leave_class()
    s = ss()
    s.pop(ENDED, None)
    s[CODE], s[ROLE], s[SECRET], s[TOUCHED] = class_code, "teacher", secret, time.monotonic()
    s[CONSOLE] = console
    with contextlib.suppress(ClassStoreError):
        s[LINK_TOKEN] = store().join_token(class_code, secret)
        bid = browser()
        if bid:
            store().remember_device(class_code, secret, bid, "console" if console else "lead")


def session_owner() -> str:
    """A teacher without a browser id (no cookie: scripts, AppTest) owns classes as this session."""
    return ss().setdefault("_class_owner", new_student_id())


def resume_class(key: str, console: bool = False) -> bool:
    """Become the teacher of a class again with its teacher key ("CODE-secret"): its lead screen, or a `console`."""
    raw, _, secret = str(key).strip().partition("-")
    norm = normalize_code(raw)
    if norm is None or not secret or not store().is_teacher(norm, secret):
        s = ss()
        s["_class_wrong_keys"] = s.get("_class_wrong_keys", 0) + 1
        time.sleep(min(2.0 ** s["_class_wrong_keys"] / 8, 4.0))  # a wrong key costs a growing wait
        notify("That is not the key of a running class.")
        return False
    become_teacher(norm, secret, console=console)
    return True


def resume_typed(console: bool = False) -> None:
    """Callback of the class page's Resume and Console buttons (the teacher-key box's value, then emptied)."""
    resume_class(str(ss().get("class_resume_key", "")), console=console)
    ss()["class_resume_key"] = ""


def console_from_link() -> None:
    """?console=KEY (the console link the teacher opened on a second device): this session becomes the class's
    console. The key leaves the address at once."""
    key = st.query_params.get(CONSOLE_PARAM)
    if key is None:
        return
    with contextlib.suppress(KeyError):
        del st.query_params[CONSOLE_PARAM]
    if not (is_teacher() and teacher_key() == key):
        resume_class(key, console=True)


def restore_teacher() -> None:
    """Once per session, outside any class: a browser that teaches a running class (its projector, or its console)
    is that class's teacher again, with the same role: a reload, a lost connection or a process that died on the
    way do not drop the teacher out of the class. A join link (?class=) is a student's, and wins."""
    s = ss()
    if s.get(RESTORED) or role() is not None:
        return
    s[RESTORED] = True
    bid = browser()
    if not bid or st.query_params.get(PARAM) is not None:
        return
    try:
        found = store().device(bid)
        if found is None:
            return
        class_code, device_role, secret = found
        if not store().is_teacher(class_code, secret):
            store().forget_device(bid)
            return
    except ClassStoreError:
        return
    become_teacher(class_code, secret, console=device_role == "console")
    notify(
        f"You are still the teacher of class {class_code}"
        + (" (its console)." if device_role == "console" else ": your screen shows the class's view.")
    )


def teacher_call(op: Callable, *args):
    """A teacher operation; a refusal (ended, expired, not the teacher) ends the role in this session. A store that is
    full (it answers, but takes no change) says so at once, every time: the change was not made. A call that went
    through clears what an earlier failure said (the store answers again)."""
    try:
        result = op(code(), ss().get(SECRET), *args)
    except (Forbidden, NotFound, ClassEnded) as e:
        leave_class(f"{e} You are no longer this class's teacher." if isinstance(e, Forbidden) else str(e))
    except StoreFull as e:
        notify(f"{e} Your change did not reach the class.")
    except StoreUnavailable:
        unreachable()
    except ClassStoreError as e:
        notify(str(e))
    else:
        ss().pop(UNREACHABLE, None)
        return result
    return None


def publish(warn: bool = True) -> None:
    """In a teacher's run: share the state if it changed; touch the class at most once a minute. A console shares
    nothing (it only touches)."""
    s = ss()
    if s.get(CONSOLE):
        if time.monotonic() - s.get(TOUCHED, 0.0) > TOUCH_SECONDS:
            teacher_call(store().touch)
            s[TOUCHED] = time.monotonic()
        return
    state, refused = publishable(class_state(s.get(TEACHER_PAGE, "overview")))
    if refused and warn:
        st.warning(
            "The class cannot see your "
            + " and ".join(k.replace("_", " ") for k in refused)
            + " (it holds < or >, or is over 500 characters): the students keep the one before.",
            icon=":material/visibility_off:",
        )
    if state != s.get(PUBLISHED):
        version = teacher_call(store().set_state, state)
        if version is not None:
            s[PUBLISHED], s[PUBLISHED_V], s[TOUCHED] = state, version, time.monotonic()
    elif time.monotonic() - s.get(TOUCHED, 0.0) > TOUCH_SECONDS:
        teacher_call(store().touch)
        s[TOUCHED] = time.monotonic()


def on_page(page: str) -> None:
    """At the top of a teacher's run, once the run stays on `page`: a page the class shares is the teacher's page from
    now on, before the plan's bar and the stop's banner are drawn (drawn with the page before, the projector kept the
    stop's banner over another page, until its next run). A console has no page of its own."""
    if not ss().get(CONSOLE) and page not in NOT_SHARED and page in PAGE_FILES:
        ss()[TEACHER_PAGE] = page


def adopt(page: str) -> None:
    """At the top of a teacher's run: when the class's state moved past what this session published (another
    device of the teacher: its console's Next or "Project this", a second tab), or this session has not published
    yet (a reload), this session shows the class's state, and its page; so that it publishes the class's state,
    never an older one of its own. A reload of the class page stays there (elsewhere, "/" included, the new session
    goes to the class's page). A console takes the state (its questions are about the class's view) and stays on its
    page."""
    s = ss()
    snap = teacher_snapshot()
    if snap is None:
        return
    s[OPEN_QUESTION] = (snap.question.text, snap.revealed) if snap.question is not None else None
    seen = s.get(PUBLISHED_V)
    if seen is not None and snap.version <= seen:
        return
    state, _ = publishable({k: v for k, v in snap.state.items() if k != "own_model"})
    apply(state)
    s[PUBLISHED], s[PUBLISHED_V] = state, snap.version
    target = state.get("page")
    if target in PAGE_FILES:
        s[TEACHER_PAGE] = target
        # (a console asks its questions about the class's view, and stays on its page)
        if target != page and (seen is not None or page != CLASS_PAGE) and not s.get(CONSOLE):
            moved_away(page)
            st.switch_page(PAGE_FILES[target])


def teacher_snapshot() -> ClassSnapshot | None:
    try:
        snap = store().snapshot(code(), secret=ss().get(SECRET))
    except Forbidden:
        leave_class("Only the teacher can do this. You are no longer this class's teacher.")
        return None
    except StoreUnavailable:
        unreachable()
        return None
    except ClassStoreError as e:
        notify(str(e))
        return None
    ss().pop(UNREACHABLE, None)
    if snap is None or snap.ended:
        class_over(code(), expired=snap is None)
        return None
    return snap


def end_class() -> None:
    """Callback: end the class for everyone; nothing of it stays in the store (a marker says it ended)."""
    was = code()
    teacher_call(store().end)
    class_over(was)
