"""Joining a class as a student: by the class page's code box or by a join link (?class=CODE&k=TOKEN), with a
student id that is this browser's in that class (`student_id_for`), so a student whose process died rejoins on
another as the same student."""

from __future__ import annotations

import contextlib
import hashlib

import streamlit as st

from classroom import ClassStoreError, RateLimited, StoreUnavailable, new_student_id, normalize_code
from ui.classroom.session import (
    CODE,
    ENDED,
    FOLLOW_PARAM,
    FOLLOWING,
    LEFT,
    LINK_TOKEN,
    NUMBER,
    PARAM,
    ROLE,
    SNAP,
    STUDENT,
    TOKEN_PARAM,
    browser,
    client_id,
    forget_class,
    notify,
    role,
    ss,
    store,
    write_url,
)


def student_id_for(class_code: str | None) -> str | None:
    """This browser's student id in class `class_code`, or None when the browser cannot be named.

    A hash of the browser id and the code: a student whose process died rejoins on another process as
    the same student (their answer stays theirs, the class does not count them twice), and the ids of one
    browser in two classes are unrelated. Two tabs of one browser are one student (one answer between
    them: the last click counts); a private window or another browser is another student."""
    bid = browser()
    if not class_code or not bid:
        return None
    return "s-" + hashlib.sha256(f"glass-class-student|{bid}|{class_code}".encode()).hexdigest()[:32]


def join(raw_code: str, follow: bool = True, token: str | None = None) -> bool | None:
    """Join the class `raw_code` as a student (`token`: its join link's); on failure a notice says why (rate
    limit included) and the result is False, or None when trying again later may work (a rate limit, the
    store unreachable). The student's id comes from the browser when it has one (`student_id_for`), else it
    is random."""
    s = ss()
    sid = student_id_for(normalize_code(raw_code)) or s.get(STUDENT) or new_student_id()
    try:
        snap = store().join(raw_code, client_id(), sid, token)
    except (RateLimited, StoreUnavailable) as e:
        notify(f"{e} Your join link is kept: reload this page to try again." if token else str(e))
        return None
    except ClassStoreError as e:
        notify(str(e))
        return False
    forget_class()  # a class this session was in: the address is rewritten for this one at once, below
    s.pop(ENDED, None)
    s[CODE], s[ROLE], s[STUDENT], s[FOLLOWING], s[SNAP] = snap.code, "student", sid, follow, snap
    if not follow:
        s[LEFT] = "chose"  # (an address with follow=0: this student had chosen to explore)
    with contextlib.suppress(ClassStoreError):
        s[NUMBER] = store().number(snap.code, sid)
    if token:
        s[LINK_TOKEN] = token
    # Now, not only at the run's end: a run cut short by the next request (a click, the class's next change)
    # must not leave an address without the class, or the page's next session (its process restarted, its
    # websocket reconnected to another process) would start outside the class.
    write_url()
    return True


def join_typed() -> None:
    """Callback of the class page's Join button (the code box's value)."""
    join(str(ss().get("class_join_code", "")))


def join_from_link() -> None:
    """?class=CODE on a session outside any class: join it (once; a failure drops the parameter)."""
    raw = st.query_params.get(PARAM)
    if raw is None or role() is not None:
        return
    joined = join(raw, follow=st.query_params.get(FOLLOW_PARAM) != "0", token=st.query_params.get(TOKEN_PARAM))
    if joined is False:  # no such class: the link is of no use; a rate limit or an outage keeps it for a reload
        for param in (PARAM, FOLLOW_PARAM, TOKEN_PARAM):
            with contextlib.suppress(KeyError):
                del st.query_params[param]
