"""Classroom mode in a Streamlit session: a teacher runs a class, students follow it.

This module holds the session's class state and the student's side (join, follow, apply); the teacher's side
(start, take back, publish, adopt, end) is ui/classroom/teacher.py; ui/classroom/panels.py draws them and holds
`run(page, body)`, which app.py wraps every run in:

1. a link with ``?class=CODE`` joins this session to the class (a join link, or a student whom a
   failover moved to another process: the URL keeps the code, so they rejoin by themselves);
2. a student's run reads the class (`store.snapshot`); when following and the teacher's state has a
   new version, it writes that state into this session's keys (ui/state.py's, ui/lesson.py's) before
   any widget is drawn, and switches to the teacher's page;
3. the sidebar shows a badge (following / exploring, the code); a student sees the teacher's open question
   above the page;
4. a teacher's run publishes the shared keys when they changed (`store.set_state`, compared with the
   last published dict), before and after the page draws, and postpones the idle expiry (`store.touch`);
5. the run ends by reading the class's counters once more (a change made while it ran is drawn by a rerun
   at once) and drawing the page's end (ui/classroom/push.py `sync`): the counter this page shows, which the
   browser compares with the class's events and reruns the page until they match. No timer polls.

A student who changes a shared key or goes to another page leaves follow mode by that very act (their
own sentence stays theirs); "Follow the teacher" re-applies the teacher's state. A change back to the
teacher's previous values is no such act: a request sent just before the teacher's change reached the browser
carries every widget's old value, and the run it starts writes them back (`stale`); those are re-applied.

Session-state keys:

====================  ================================================================================
key                   meaning
====================  ================================================================================
class_code            the class this session belongs to (teacher or student)
class_role            "teacher" or "student"
class_following       a student follows the teacher (False: explores on their own)
_class_secret         the teacher's secret: in the teacher's session only, never drawn
_class_student        this student's id in the class (answers are counted once per id): derived from the
                      browser (`student_id_for`), so it is the same on every app process, else random
_class_applied        the teacher's state last applied to this student's session: (version, state,
                      the RECENT states applied before it, newest first)
_class_shows          what this run shows: (the counter a page of this member watches, its value)
_class_reruns         reruns in a row made because the class moved while a run ran (at most MAX_RERUNS)
_class_events         the event stream this session's page listens to (its url), while it has one
_class_snap           the last snapshot (the question panel reads it)
_class_published      the state this teacher last published
_class_page           the teacher's last page of the walkthrough (the class page is not shared)
_class_asked          the teacher's last question (explain.questions.Question) and its id
_class_touched        when this teacher last called touch (monotonic seconds)
_class_notice         a message for this session, shown once
_class_unreachable    the class store could not be reached on the last read (the badge says so)
_class_ended          the message that this session's class has ended: shown above every page until dismissed
_class_left           how this student left follow mode: "chose" (its button), else the shared keys it changed
_class_reported       the status this student last reported to the teacher's roster (classroom/roster.py)
_class_recalled       the class's "bring everyone back" count this student has honoured
_class_number         this student's number in the class (in the order students joined; shown in the badge)
_class_console        this teacher's session is a console beside the projector: it never leads the class
_class_published_v    the version of the class's state this teacher's session last published or showed
_class_restore_checked  this session looked for a class its browser teaches (a reload is the teacher again)
_class_moved          the page the class moved this session away from, and when (a late request from it is stale)
_class_page_shown     the page of this session's last run of the whole app that stayed on its page (`hold_page`)
====================  ================================================================================

Security: every teacher operation goes through the store with `_class_secret`, which the store checks;
no browser message sets that key (widgets set their own keys; callbacks get the server's arguments). A
session claiming the role without the secret loses it. Shared text is drawn escaped (`ui.widgets.md`).
"""

from __future__ import annotations

import contextlib
import time
from urllib.parse import urlsplit

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from classroom import (
    STATE_FIELDS,
    ClassSnapshot,
    ClassStoreError,
    InvalidInput,
    StoreUnavailable,
    get_store,
)
from classroom.rules import SHAREABLE_MODELS
from ui import lesson
from ui.classroom.push import asked_by_class
from ui.page_list import PAGES
from ui.session_info import current_identity
from ui.state import TOGGLES, init_state, read_link

CODE, ROLE, FOLLOWING = "class_code", "class_role", "class_following"
SECRET, STUDENT, APPLIED, SNAP = "_class_secret", "_class_student", "_class_applied", "_class_snap"
SHOWS, RERUNS, EVENTS = "_class_shows", "_class_reruns", "_class_events"
PUBLISHED, TEACHER_PAGE, ASKED, TOUCHED, NOTICE = (
    "_class_published",
    "_class_page",
    "_class_asked",
    "_class_touched",
    "_class_notice",
)
LINK_TOKEN = "_class_link_token"  # the join link's token (classroom.rules.link_token): teacher and student
LEFT = "_class_left"  # how this student left follow mode: "chose" (its button) or the shared keys it changed
REPORTED = "_class_reported"  # the status this student last reported to the class's roster (classroom/roster.py)
RECALLED = "_class_recalled"  # the class's "bring everyone back" count this student has honoured
NUMBER = "_class_number"  # this student's number in the class (in the order students joined)
CONSOLE = "_class_console"  # this teacher's session is a console beside the projector: it never leads the class
PUBLISHED_V = "_class_published_v"  # the version of the class's state this teacher's session published or showed
RESTORED = "_class_restore_checked"  # this session has looked for a class its browser teaches (once per session)
MOVED = "_class_moved"  # (the page the class moved this session away from, when: time.monotonic())
MOVED_SECONDS = 10.0  # how long a request from that page is a late one (`late_from`)
PAGE_SHOWN = "_class_page_shown"  # the page of this session's last run of the whole app that stayed on its page
UNREACHABLE = "_class_unreachable"  # the class store could not be reached on this session's last read
VIEW_AT = "_class_view_at"  # ({picker: (the teacher's choice applied, the one before)}, when): `follow_view`
OPEN_QUESTION = "_class_open_question"  # a teacher's: the class's question at the run's top, (text, revealed) or None
ENDED = "_class_ended"  # the message that the class this session was in has ended (shown until dismissed)
UNREACHABLE_TEXT = "The class service is unreachable: reconnecting…"
# the tally (answers, votes, arrivals, snapshots) the teacher's class page drew in this full run (None: another
# page): when the class's stream announces another, the teacher's sidebar panel redraws the whole page (no timer)
CONSOLE_TALLY = "_class_console_tally"
KEYS = (
    CODE,
    ROLE,
    FOLLOWING,
    SECRET,
    STUDENT,
    APPLIED,
    SHOWS,
    RERUNS,
    SNAP,
    PUBLISHED,
    TEACHER_PAGE,
    ASKED,
    TOUCHED,
    LINK_TOKEN,
    UNREACHABLE,
    CONSOLE_TALLY,
    LEFT,
    REPORTED,
    RECALLED,
    NUMBER,
    CONSOLE,
    PUBLISHED_V,
    MOVED,
    PAGE_SHOWN,
    OPEN_QUESTION,
    VIEW_AT,
)
CLASS_PAGE = "classroom"  # the class's own page: its url path
NOT_SHARED = (CLASS_PAGE, "home")  # pages a teacher visits without taking the class along
TOUCH_SECONDS = 60.0  # at most one touch a minute (the teacher's page also touches the class each minute)
RECENT = 8  # the teacher's states before the current one that a late request may still carry (`stale`)
MAX_RERUNS = 2  # a run that ends on a class that moved meanwhile reruns at once, at most this many times in a row
PARAM, FOLLOW_PARAM, TOKEN_PARAM = "class", "follow", "k"  # URL: ?class=CODE&k=TOKEN (&follow=0 while exploring)
CONSOLE_PARAM = "console"  # URL: /classroom?console=TEACHER-KEY opens the class's console (read once, then removed)
PAGE_FILES = {p.url_path: p.file for p in PAGES}
# what a student's session holds and changing it makes a student an explorer (own_model is news; the page's pickers,
# `view`, stay each student's to change while they follow: `follow_view`)
STATE_KEYS = tuple(k for k in STATE_FIELDS if k not in ("own_model", "view"))
VIEW_KEYS = {p.url_path: p.view for p in PAGES if p.view}  # page -> the pickers a class shares (ui/page_list.py)
ANY_VIEW_KEY = frozenset(k for keys in VIEW_KEYS.values() for k in keys)  # the only keys a shared `view` may set


def ss():
    return st.session_state


store = get_store  # this process's class store (memory or Redis: the pages never know which)


def role() -> str | None:
    return ss().get(ROLE)


def code() -> str | None:
    return ss().get(CODE)


def is_teacher() -> bool:
    return role() == "teacher"


def is_student() -> bool:
    return role() == "student"


def is_console() -> bool:
    """A teacher's session that is a console beside the projector: it asks, reveals, projects and paces, and never
    leads (what it shows is not the class's)."""
    return is_teacher() and bool(ss().get(CONSOLE))


def following() -> bool:
    return is_student() and bool(ss().get(FOLLOWING))


def notify(text: str) -> None:
    ss()[NOTICE] = text


def forget_class() -> None:
    """Forget the class in this session (nothing of it stays here); the URL is left as it is."""
    for key in KEYS:
        ss().pop(key, None)


def leave_class(notice: str | None = None) -> None:
    """Forget the class in this session; the URL loses its code."""
    forget_class()
    for param in (PARAM, FOLLOW_PARAM, TOKEN_PARAM):
        with contextlib.suppress(KeyError):
            del st.query_params[param]
    if notice:
        notify(notice)


def class_over(class_code: str | None, expired: bool = False) -> None:
    """The class ended (its teacher ended it, or it expired): the session leaves it, and a message that stays on the
    page until dismissed says so (a toast fades before a student looking at the projector reads it)."""
    was_teacher = is_teacher()
    leave_class()
    name = f"Class {class_code}" if class_code else "The class"
    ss()[ENDED] = (
        f"{name} has ended"
        + (" (or expired after two idle hours)" if expired else "")
        + ". "
        + (
            "Start a new class on the Classroom page whenever you like."
            if was_teacher
            else "Your screen is yours again: explore on your own, or join another class on the Classroom page."
        )
    )


# -- the shared state -----------------------------------------------------------------------------------
def shared_state(page: str | None) -> dict:
    """This session's values of the keys a class shares (ui/state.py's, the lesson's, the page)."""
    init_state()
    s = ss()
    state = {
        "sentence": s["sentence"],
        "model": s["model"] if s["model"] in SHAREABLE_MODELS else "base",
        "heads_off": sorted(s["heads_off"]),
        **{k: bool(s[k]) for k in TOGGLES},
    }
    if page:
        state["page"] = page
    if isinstance(s.get(lesson.STEP), int):
        state["step"] = s[lesson.STEP]
    picks = ((k, s.get(k)) for k in VIEW_KEYS.get(page or "", ()))
    view = {k: v for k, v in picks if isinstance(v, int | str) and not isinstance(v, bool)}  # (the store's form)
    if view:
        state["view"] = view
    return state


def own_model() -> bool:
    """The teacher's session shows a model of its own (trained or uploaded): it cannot be shared (it lives in
    this session only), so the class sees the shipped model instead."""
    s = ss()
    return s.get("model") == "mine" and s.get("my_model") is not None


def class_state(page: str | None) -> dict:
    """What a teacher shares: `shared_state`, and `own_model` when the class cannot see the teacher's model."""
    state = shared_state(page)
    if own_model():
        state["own_model"] = True
    return state


OWN_MODEL_TEACHER = (
    "Your class sees the shipped model, not yours: the model you trained or uploaded stays "
    "in your session and cannot be shared. Your figures and numbers can differ from theirs, "
    "and questions you ask are answered by your model. Choose “Shipped model” to show what "
    "they see."
)
OWN_MODEL_STUDENT = (
    "Your teacher shows a model they trained themselves, which stays on their side: you see the "
    "shipped model, so some figures and numbers differ from the teacher's screen."
)


def own_model_notice(published: dict | None) -> str | None:
    """The teacher's notice when the class does not see the teacher's model: computed from this session's
    model and the state last published to the class."""
    if published is None or not own_model() or published.get("model") == ss().get("model"):
        return None
    return OWN_MODEL_TEACHER


def publishable(state: dict) -> tuple[dict, list[str]]:
    """The part of `state` the store accepts, and the keys it refused (a sentence with < or >, too long)."""
    clean, refused = {}, []
    for key, value in state.items():
        try:
            clean[key] = STATE_FIELDS[key](value, key)
        except InvalidInput:
            refused.append(key)
    return clean, refused


def apply(state: dict, before: dict | None = None) -> None:
    """Write the teacher's state into this session (before any widget of the run is drawn). Of the page's pickers
    (`view`), those the teacher changed since `before` (the state applied last; None: all of them) and those this
    session has no value for: a student's own choice of a head stays until the teacher picks another. (Streamlit
    forgets a picker's value in every run that does not draw it, such as a request that crossed the class's move
    from the page it left: the picker then holds no choice of anyone's.)"""
    s = ss()
    view, old = state.get("view"), (before or {}).get("view") or {}
    if isinstance(view, dict):
        moved = {
            k: v
            for k, v in view.items()
            if k in ANY_VIEW_KEY and (before is None or old.get(k) != v or s.get(k) is None)
        }
        if moved:
            s[VIEW_AT] = ({k: (v, s.get(k)) for k, v in moved.items()}, time.monotonic())
        s.update(moved)  # (a key of no page's pickers is never written: the state is the teacher's, not the app's)
    if "sentence" in state and state["sentence"] != s.get("sentence"):
        s.pop(lesson.CHOICE, None)  # the lesson's widgets follow the new sentence (ui/lesson.init_lesson)
        s.pop(lesson.OWN_TEXT, None)
    for key in ("sentence", "model", "heads_off", *TOGGLES):
        if key == "model" and state.get("own_model") and s.get("_class_model_used") and s.get("model") == "mine":
            continue  # the teacher shows their own model, and this student explores it as theirs (ui/classroom/plans)
        if key in state:
            s[key] = list(state[key]) if key == "heads_off" else state[key]
    if "step" in state:
        s[lesson.STEP] = state["step"]
        s[lesson.NOTICE] = None
    s[lesson.READY] = True  # the lesson's link (if any) must not override the teacher's step


def changed_keys(page: str, applied: dict) -> list[str]:
    """The shared keys whose value in this session differs from the teacher's state last applied (the
    class page itself does not count: a following student may look at it)."""
    mine = shared_state(page)
    return [
        k
        for k, v in applied.items()
        if k in STATE_KEYS and mine.get(k) != v and (k != "page" or page not in NOT_SHARED)
    ]


def stale(page: str, keys: list[str], recent: tuple[dict, ...] | None) -> bool:
    """Every changed key holds a value of one of the teacher's recent states, or the one the browser's address
    still says: not the student's doing, but a request sent before the later states reached the browser (a
    click as a redraw ends, during a burst of the teacher's changes; a reconnected page, whose new session
    starts from its address): it carries all the widgets' values, and the run after it writes them back. The
    page counts as changed by the student unless the class moved this session away from it a moment ago
    (`late_from`): a request from the page the class just left (a student who had followed the teacher from the
    overview to the self-attention page was dropped by their overview's late request)."""
    mine = shared_state(page)
    link = read_link(st.query_params.to_dict())[0]
    olds = (*(recent or ()), link)
    return all(
        late_from(page) if k == "page" else any(k in old and mine.get(k) == old[k] for old in olds) for k in keys
    )


# -- joining --------------------------------------------------------------------------------------------
def client_id() -> str:
    """Rate limits count per client (the address the proxy saw, as `serving.identity` decides it for the
    training queue too), not per session."""
    try:
        return current_identity().client
    except Exception:  # noqa: BLE001 - no request context: one client
        return "local"


def browser() -> str | None:
    """This browser's id (`current_identity().browser`: a keyed hash of its XSRF cookie, the same on every
    app process when GLASS_REDIS_URL is set), or None (no cookie: AppTest, scripts)."""
    try:
        return current_identity().browser
    except Exception:  # noqa: BLE001 - no identity: the session's random id serves
        return None


# -- the student's side ---------------------------------------------------------------------------------
def open_question() -> tuple[str, bool] | None:
    """The class's question as this session last read it: (its text, revealed), or None. A student's from their
    snapshot, a teacher's from the top of their run (`teacher.adopt`)."""
    if is_student():
        snap = ss().get(SNAP)
        return (snap.question.text, snap.revealed) if snap is not None and snap.question is not None else None
    return ss().get(OPEN_QUESTION)


def poll() -> ClassSnapshot | None:
    """The class as this student sees it now (None: the class is gone; the session leaves it)."""
    try:
        snap = store().snapshot(code(), student_id=ss()[STUDENT])
    except StoreUnavailable:  # the store cannot be reached: keep the last snapshot, say so (once, not every run)
        unreachable()
        return ss().get(SNAP)
    except ClassStoreError as e:
        notify(f"The class cannot be reached just now ({e}).")
        return ss().get(SNAP)
    ss().pop(UNREACHABLE, None)
    if snap is None or snap.ended:
        class_over(code(), expired=snap is None)
        return None
    ss()[SNAP] = snap
    return snap


def shows(snap: ClassSnapshot) -> tuple[str, int]:
    """The counter this student's page watches, and its value in `snap`: a follower shows everything the class
    shares (`seq`), an explorer only its questions (`q`)."""
    return ("seq", snap.seq) if following() and class_leads() else ("q", snap.q)


def follow_on_run(page: str) -> None:
    """A full run of a student: poll; leave follow mode if the student changed something; else apply a
    new version of the teacher's state and go to the teacher's page."""
    snap = poll()
    if snap is None:
        return
    s = ss()
    if following() and class_leads():
        applied = s.get(APPLIED)  # (version, state, the RECENT states applied before it, newest first)
        changed = changed_keys(page, applied[1]) if applied is not None else []
        if changed and (asked_by_class() or stale(page, changed, applied[2])):
            apply(applied[1], before=applied[1])  # a late request wrote old values back: the teacher's again
            back = applied[1].get("page")
            if "page" in changed and back in PAGE_FILES:  # (from the page the class just left: back to the class's)
                moved_away(page)
                st.switch_page(PAGE_FILES[back], query_params=class_query(snap.code))
        elif changed:
            s[FOLLOWING], s[LEFT] = False, sorted(changed)
            notify(
                "You changed something yourself: you now explore on your own. "
                "“Follow the teacher” takes you back to the class."
            )
        if following() and applied is not None and applied[0] == snap.version:
            follow_view(applied[1])
        if following() and (applied is None or applied[0] != snap.version):
            apply(snap.state, before=applied[1] if applied is not None else None)
            s[APPLIED] = (
                snap.version,
                dict(snap.state),
                (applied[1], *applied[2])[:RECENT] if applied is not None else (),
            )
            target = snap.state.get("page")
            if target in PAGE_FILES and target != page:
                moved_away(page)
                st.switch_page(PAGE_FILES[target], query_params=class_query(snap.code))
    s[SHOWS] = shows(snap)


def follow_view(applied: dict) -> None:
    """A follower's run with no new state of the teacher's (`applied`, the one applied last). A picker with no value
    (Streamlit forgot it in a run of another page) takes the teacher's. A picker back at the value it had before the
    teacher's last move of it, a moment later, was written back by a request the browser sent before the move
    reached it (it carries every widget's value): the teacher's choice again. Later, a picker is the student's."""
    view = applied.get("view") or {}
    ss().update({k: v for k, v in view.items() if k in ANY_VIEW_KEY and ss().get(k) is None})
    at = ss().get(VIEW_AT)
    if at is None or time.monotonic() - at[1] > MOVED_SECONDS:
        return
    ss().update({k: new for k, (new, old) in at[0].items() if ss().get(k) == old != new})


def moved_away(page: str) -> None:
    """The class moves this session off `page` (to the teacher's page): for a few seconds a request that still
    comes from `page` is a late one (a page's stream asking again, a click's request crossing the move), not the
    student going back to it."""
    ss()[MOVED] = (page, time.monotonic())


def late_from(page: str) -> bool:
    """At the top of a run: a request from `page` as the browser still shows it, which the class moved this session
    away from a moment ago (`moved_away`): a click that crossed the move. A move back to `page` (a page link, the
    navigation, the browser's back button) is the user's own, however soon (`still_shown`)."""
    moved = ss().get(MOVED)
    return moved is not None and moved[0] == page and time.monotonic() - moved[1] < MOVED_SECONDS and still_shown(page)


def hold_page(page: str) -> None:
    """At the top of a run of the whole app, after the class's own moves (a plan's Next, `adopt`, `follow_on_run`):
    a request that crossed a move still comes from the page the move left (a click, or a page's own stream asking
    for the whole app). It goes back to the page this session showed last, with the request's values, not to the
    page left (where it took the teacher, and the class with it, or an exploring student). A console stays where it
    is. Then this page is the session's."""
    if role() is None:
        return
    shown = ss().get(PAGE_SHOWN)
    if shown in PAGE_FILES and shown != page and not ss().get(CONSOLE) and late_from(page):
        st.switch_page(PAGE_FILES[shown], query_params=class_query(code()) if is_student() else None)
    ss()[PAGE_SHOWN] = page


def still_shown(page: str) -> bool:
    """The request of this run came from a browser whose address still shows `page`. A click sends its request
    from the page it was made on; a move to `page` leaves from the page the browser showed before, and the back
    button changes the address first but says so (Streamlit 1.67's frontend sends the address with every request:
    `st.context.url`'s source). Without a browser's address (a run of the server's own, AppTest): True."""
    ctx = get_script_run_ctx()
    info = ctx.context_info if ctx is not None else None
    if info is None or not info.url:
        return True
    if ctx.is_history_navigation:
        return False
    return urlsplit(info.url).path.rstrip("/").rsplit("/", 1)[-1] == page


def set_following(on: bool) -> None:
    """Callback of the badge's buttons (their click reruns the whole app); the address says it at once."""
    ss()[FOLLOWING] = on
    ss().pop(APPLIED, None)  # following again: the teacher's state is applied afresh
    if on:
        ss().pop(LEFT, None)
    else:
        ss()[LEFT] = "chose"
    write_url()


def unreachable() -> None:
    """The class store could not be reached: the session says so once (its page's badge or panel says it until
    the store answers again; the page's event stream reruns it when the store is back)."""
    if not ss().get(UNREACHABLE):
        notify(UNREACHABLE_TEXT)
    ss()[UNREACHABLE] = True


# -- every run ------------------------------------------------------------------------------------------
def class_query(class_code: str) -> dict[str, str]:
    """A student's class in the address bar: the code, and the join link's token when they came by the link."""
    token = ss().get(LINK_TOKEN)
    return {PARAM: class_code, **({TOKEN_PARAM: token} if token else {})}


def join_link(class_code: str) -> str:
    """The address a student opens to join: this server's /classroom?class=CODE&k=TOKEN (the token lets a
    student holding the link in even when classmates behind the same address mistyped the code)."""
    query = "&".join(f"{k}={v}" for k, v in class_query(class_code).items())
    url = None
    with contextlib.suppress(Exception):
        url = st.context.url
    if url:
        parts = urlsplit(url)
        path = parts.path.rstrip("/")
        last = path.rsplit("/", 1)[-1]
        if last in PAGE_FILES or last == "home":
            path = path[: -len(last) - 1]
        return f"{parts.scheme}://{parts.netloc}{path}/{CLASS_PAGE}?{query}"
    return f"/{CLASS_PAGE}?{query}"


def write_url() -> None:
    """A student's address keeps the class (&follow=0 while exploring); a teacher's never shows it."""
    qp = st.query_params
    want = {PARAM: code()} if is_student() else {}
    if is_student() and ss().get(LINK_TOKEN):
        want[TOKEN_PARAM] = ss()[LINK_TOKEN]
    if is_student() and not following():
        want[FOLLOW_PARAM] = "0"
    for param in (PARAM, FOLLOW_PARAM, TOKEN_PARAM):
        if param in want and qp.get(param) != want[param]:
            qp[param] = want[param]
        elif param not in want and param in qp and (param != PARAM or is_teacher()):
            del qp[param]


def class_leads() -> bool:
    """The class's pace lets the teacher's screen lead its followers (ui/classroom/plans.py reads the pace into
    `_class_pace` at the top of every run): else every student explores, and nobody is moved."""
    return (ss().get("_class_pace") or {}).get("mode", "lead") == "lead"
