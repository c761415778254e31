"""Lesson plans, pacing and snapshots in a Streamlit session (the data and its checks: classroom/plans.py).

- The plan editor is ui/classroom/plan_editor.py: the draft it builds (`DRAFT`) is what a class starts with.
- A teacher's class with a plan: Back / Next in the sidebar move the teacher (the projector) to the stop, and
  with it every following student; a stop's question is asked, its mystery head hidden until the reveal.
- Pacing: lead (students who follow see the teacher's screen), free (every student explores), plan (students
  explore the plan's stops so far); pause shows every student "Eyes on the projector" until resumed.
- Snapshots: a student sends their view with a one-line note; the teacher's gallery projects one.

Session-state keys:

=====================  ==========================================================================
key                    meaning
=====================  ==========================================================================
plan_draft             the plan being built or loaded here (classroom.plans.Plan), or absent
_plan_last_page        the last walkthrough page this session showed (what "Add this view" takes)
_plan_goto             a page this session moves to at the top of its next run (Next, a stop, a snapshot)
_class_pace            the class's pace, as read on this run (classroom.plans.check_pace)
_class_plan            the class's plan as read: (its version, Plan)
_class_shots_seen      the number of the newest snapshot the teacher's gallery showed
=====================  ==========================================================================

Teacher operations go through the store with the class's secret (`session.teacher_call`); nothing of a plan
or a snapshot is drawn as HTML (`ui.widgets.md`).
"""

from __future__ import annotations

import contextlib
import time

import streamlit as st

import classroom.plans
from classroom import ClassStoreError, InvalidInput
from ui.classroom import session as cls
from ui.classroom import teacher
from ui.page_list import PAGES
from ui.study import session as study
from ui.widgets import md, page_link

DRAFT, LAST_PAGE, GOTO, PACE, PLAN = "plan_draft", "_plan_last_page", "_plan_goto", "_class_pace", "_class_plan"
SHOTS_SEEN = "_class_shots_seen"  # the newest snapshot the teacher's gallery showed (the sidebar counts the new ones)
SHOWN = "_plan_shown"  # (the state a move showed, the values it replaced, when): `hold_shown` keeps it for a moment
PLAN_PARAM = "plan"
STOP_PAGES = tuple(p.url_path for p in PAGES if p.url_path != cls.CLASS_PAGE)
TITLES = {p.url_path: p.title for p in PAGES}


def ss():
    return st.session_state


def heads() -> list[str]:
    """The heads a plan may name: the shipped model's (a class shares only shipped models, whatever this session
    shows: a student's own model may have other heads)."""
    from ui.models import load_shipped
    from ui.sidebar import head_keys

    return head_keys(load_shipped("base").config)


# -- every run ---------------------------------------------------------------------------------------------------
def on_run(here: str) -> None:
    """Top of every run of app.py: a plan link (?plan=) becomes the draft, the class's pace is read, and a move
    asked for by a callback (Next, a stop, a projected snapshot) happens."""
    s = ss()
    token = st.query_params.get(PLAN_PARAM)
    if token is not None:
        with contextlib.suppress(KeyError):
            del st.query_params[PLAN_PARAM]
        try:
            s[DRAFT] = classroom.plans.plan_from_link(token, STOP_PAGES, heads())
            cls.notify(f"Lesson plan “{s[DRAFT].title}” loaded from the link: {len(s[DRAFT].stops)} stops.")
        except InvalidInput as e:
            cls.notify(f"The link's lesson plan cannot be used: {e}")
    if here in cls.PAGE_FILES and here not in cls.NOT_SHARED:
        s[LAST_PAGE] = here
    read_pace()
    goto = s.pop(GOTO, None)
    if goto in cls.PAGE_FILES and goto != here:
        cls.moved_away(here)  # (a click that crossed the move still comes from `here`: ui/classroom/session.py)
        st.switch_page(cls.PAGE_FILES[goto], query_params=cls.class_query(cls.code()) if cls.is_student() else None)


def read_pace() -> dict | None:
    """The class's pace and (when its version moved) its plan, into the session; None outside a class."""
    s = ss()
    if cls.role() is None:
        s.pop(PACE, None)
        s.pop(PLAN, None)
        return None
    try:
        pace = cls.store().pace(cls.code())
        if pace["plan"] and (s.get(PLAN) or (None,))[0] != pace["plan"]:
            raw = cls.store().plan(cls.code())
            s[PLAN] = (pace["plan"], classroom.plans.plan_of(raw)) if raw else None
    except ClassStoreError:
        return s.get(PACE)  # the store is away: the last one read (the page's stream says so)
    s[PACE] = pace
    if not leads():
        s.pop(cls.APPLIED, None)  # when the teacher leads again, a follower takes the teacher's state afresh
    if cls.is_student():
        seen = s.get(cls.RECALLED)
        s[cls.RECALLED] = pace["recall"]
        if seen is not None and pace["recall"] > seen and not s.get(cls.FOLLOWING):
            cls.set_following(True)  # the teacher brought everyone back
            cls.notify("Your teacher brought the class back together: you follow the teacher's screen again.")
    return pace


def pace() -> dict:
    return ss().get(PACE) or classroom.plans.DEFAULT_PACE


def leads() -> bool:
    """The teacher's screen leads the students who follow (False: the teacher lets them explore)."""
    return pace()["mode"] == "lead"


def paused() -> bool:
    return cls.is_student() and pace()["paused"]


def class_plan() -> classroom.plans.Plan | None:
    got = ss().get(PLAN)
    return got[1] if got else None


def current_stop() -> tuple[int, classroom.plans.Stop] | None:
    plan, i = class_plan(), pace()["stop"]
    return (i, plan.stops[i]) if plan is not None and 0 <= i < len(plan.stops) else None


def shows(stop: classroom.plans.Stop, state: dict) -> bool:
    """`state` (a session's shared state) is the stop's view: every key the stop names (page, sentence, model,
    switches, lesson step) has the stop's value, and every picker it names (`view`: a layer, a kind of attention)
    the stop's choice (a picker it leaves out, the head in detail, is the teacher's to move)."""
    view = state.get("view") or {}
    return all(
        all(view.get(p) == c for p, c in v.items()) if k == "view" else state.get(k) == v
        for k, v in stop.state.items()
        if k != "own_model"
    )


def stop_of(state: dict) -> int | None:
    """The index of the first stop of the class's plan whose view `state` is, or None."""
    plan = class_plan()
    return next((i for i, stop in enumerate(plan.stops) if shows(stop, state)), None) if plan else None


def at_stop() -> bool:
    """This session shows the class's current stop. When the teacher leaves it (a new sentence, another page, a
    projected snapshot), its caption no longer belongs above the page."""
    stop = current_stop()
    page = ss().get(cls.TEACHER_PAGE) if cls.is_teacher() else ss().get(LAST_PAGE)
    return stop is not None and shows(stop[1], cls.shared_state(page))


def hidden_head() -> tuple[str, int] | None:
    """The mystery head of the class's current stop while it is not revealed: (module, head), else None. A stop's
    mystery also stays hidden on the stops after it while its question is still open and unrevealed: a Next (or a
    clicker's PageDown) in the middle of the vote drew its weights, the answer, under the vote still running.
    (Revealing the mystery reveals its open question too: `reveal_mystery`.)"""
    stop = current_stop()
    hidden = None
    if stop is not None and stop[1].hidden_head is not None:
        hidden = None if pace()["reveal"] else stop[1].hidden_head
    else:
        asked, plan = cls.open_question(), class_plan()
        if asked is not None and not asked[1] and plan is not None:
            hidden = next(
                (s.hidden_head for s in plan.stops if s.hidden_head and s.question and s.question["text"] == asked[0]),
                None,
            )
    if hidden is None:
        return None
    module, _, head = hidden.partition(":")
    return module, int(head)


def mystery_in(module_prefix: str) -> bool:
    """The class's unrevealed mystery head is in a module starting with `module_prefix` ("dec." and "cross_attn"
    in it, "enc."...): a section that draws every head of those modules (or numbers computed from all of them)
    waits for the reveal too."""
    hidden = hidden_head()
    return hidden is not None and hidden[0].startswith(module_prefix)


def mystery_wait(what: str) -> None:
    """Where a section would give the mystery head away: a line that says it waits for the reveal."""
    st.info(
        f":material/help: {what} would give the mystery head away: it appears when your teacher reveals it.",
        icon=":material/visibility_off:",
    )


def mystery_box(head: int, height: int | None = None) -> None:
    """Where a mystery head's weights would be drawn: a box that says so."""
    with st.container(border=True, height=height or "content", key=f"mystery_{head}_{height}"):
        st.markdown(f"**Head {head}: the mystery head**")
        st.markdown(
            ":material/help: Its weights stay hidden until your teacher reveals them. Which words do you "
            "think it links? Look at the other heads, switch it off, and predict."
        )


def pause_screen() -> None:
    """A paused student's whole page (app.py's body is not drawn): until the teacher resumes."""
    with st.container(border=True, key="class_paused"):
        st.markdown("# :material/co_present:")
        st.title("Eyes on the projector")
        st.markdown(
            "Your teacher paused the class to talk it through. Your screen comes back by itself when they "
            "resume, and nothing you did is lost."
        )


def stop_banner() -> None:
    """Above the page: the class's current stop, for the teacher and the students who follow (while the view is
    the stop's: the teacher may have left it); for a student exploring the stops so far, the stop they look at."""
    plan = class_plan()
    if cls.is_teacher() or led():
        shot_banner()
        stop = current_stop()
        if stop is None or not at_stop():  # the teacher left the stop: its caption no longer belongs here
            return
        i, s = stop
    elif cls.is_student() and pace()["mode"] == "plan" and plan is not None:
        i = stop_of(cls.shared_state(ss().get(LAST_PAGE)))
        if i is None or i > pace()["stop"]:
            return
        s = plan.stops[i]
    else:
        return
    text = f"**Stop {i + 1} of {len(class_plan().stops)}**" + (f": {md(s.caption)}" if s.caption else "")
    if hidden_head() is not None:
        text += " · one head is a mystery until the reveal"
    st.info(text, icon=":material/flag:")


def new_shots() -> None:
    """The teacher's sidebar: snapshots that arrived since the gallery last showed them, with a link to it."""
    shots = teacher.teacher_call(cls.store().shots) or []
    new = [shot for shot in shots if shot["n"] > ss().get(SHOTS_SEEN, 0)]
    if new:
        page_link(
            cls.PAGE_FILES[cls.CLASS_PAGE],
            f"{len(new)} new snapshot{'s' if len(new) != 1 else ''} from your students",
            icon=":material/photo_camera:",
        )


def shot_banner() -> None:
    """Above the page while the class shows a projected snapshot: whose it is and its note."""
    shot = pace().get("shot")
    page = ss().get(cls.TEACHER_PAGE) if cls.is_teacher() else ss().get(LAST_PAGE)
    if not shot or not all(cls.shared_state(page).get(k) == v for k, v in shot["state"].items()):
        return
    note = f": “{md(shot['note'])}”" if shot["note"] else " (no note)"
    st.info(
        f"**Snapshot {shot['n']} from student {shot['student']}**{note} · {describe(shot['state'])}",
        icon=":material/photo_camera:",
    )


# -- the teacher ------------------------------------------------------------------------------------------------
def go_to_stop(i: int) -> None:
    """Callback (teacher): the class moves to stop `i`: its state in this session, its page next run, its
    question asked, its mystery hidden."""
    plan = class_plan()
    if plan is None or not 0 <= i < len(plan.stops):
        return
    stop = plan.stops[i]
    if teacher.teacher_call(lambda c, k: cls.store().set_pace(c, k, stop=i, reveal=False, shot=None)) is None:
        return
    show_state(stop.state)
    if stop.question is None:
        # a revealed question is done with: it no longer fills the students' first screen above the next stop.
        # (Read from the store, not this run's top: another screen of the teacher's may have revealed it since.)
        before = teacher.teacher_call(lambda c, k: cls.store().snapshot(c, secret=k))
        if before is not None and before.question is not None and before.revealed:
            teacher.teacher_call(cls.store().close_question)
    else:
        q = stop.question
        # asked as every question is: a peer-instruction vote (vote, discuss, vote again, reveal)
        teacher.teacher_call(cls.store().ask_peer, q["text"], list(q["options"]), q["answer"], "plan")
    read_pace()


def show_state(state: dict) -> None:
    """This session shows `state` (a stop's, a snapshot's): its values now, its page at the next run. A teacher's
    console shows nothing itself: the class's state becomes `state`, which its lead screen (the projector) then
    shows (ui/classroom/session.py `adopt`), and the class with it."""
    if cls.is_console():
        teacher.teacher_call(cls.store().set_state, cls.publishable(state)[0])
        return
    if cls.is_teacher():
        ss()[SHOWN] = (state, cls.shared_state(state.get("page")), time.monotonic())
    cls.apply(state)
    page = state.get("page")
    if page in cls.PAGE_FILES:
        if cls.is_teacher():
            ss()[cls.TEACHER_PAGE] = page
        ss()[GOTO] = page


def hold_shown() -> None:
    """Top of a teacher's run, a moment after a move (Next, a stop, a projected snapshot): a value that is back to
    the one the move replaced came from a request the browser sent before the move's values reached it (a click
    or the panel's stream crossing the move: it carries every widget's value, and Streamlit takes them over the
    callback's). The move's value is shown again, so the teacher publishes the stop, not the stop before it; a
    value the teacher chose since is kept."""
    shown = ss().get(SHOWN)
    if shown is None or time.monotonic() - shown[2] > cls.MOVED_SECONDS:
        ss().pop(SHOWN, None)
        return
    state, before, _ = shown
    mine = cls.shared_state(state.get("page"))
    back = {k: v for k, v in state.items() if k in before and mine.get(k) == before[k] != v}
    if back:
        cls.apply(back)


def reveal_mystery() -> None:
    """Callback (teacher): the stop's mystery head is shown, and the stop's question with it when it is still open
    (the head's weights are its answer: a vote after them is not a vote, and the stops after it show the head)."""
    set_pace(reveal=True)
    stop, snap = current_stop(), teacher.teacher_call(lambda c, k: cls.store().snapshot(c, secret=k))
    q = snap.question if snap is not None else None
    if stop is not None and stop[1].question and q is not None and not snap.revealed:
        if q.text == stop[1].question["text"]:
            teacher.teacher_call(cls.store().reveal)


def set_pace(**changes) -> None:
    """Callback (teacher): pause / resume, a mode, the reveal."""
    teacher.teacher_call(lambda c, k: cls.store().set_pace(c, k, **changes))
    read_pace()


# paused or not -> the button that toggles it: its label, its key (+ the place's suffix), its icon, its type
PAUSE_BUTTONS = {
    True: ("Resume the class", "pace_resume", ":material/play_arrow:", "primary"),
    False: ("Pause: eyes on the projector", "pace_pause", ":material/pause:", "secondary"),
}


def pause_button(paused: bool, sfx: str, where, **kw) -> None:
    """The teacher's Pause / Resume button (key `pace_pause` or `pace_resume` + `sfx`), drawn in `where`."""
    label, key, icon, kind = PAUSE_BUTTONS[paused]
    where.button(label, key=key + sfx, icon=icon, type=kind, on_click=set_pace, kwargs={"paused": not paused}, **kw)


def start_with_plan() -> None:
    """Callback: a new class from the draft, on its first stop. The teacher stays on the class page, where the
    code and the QR code are: the class is on the first stop already (students who join land there)."""
    plan = ss().get(DRAFT)
    teacher.start_class()
    if plan is None or not cls.is_teacher():
        return
    if teacher.teacher_call(cls.store().set_plan, plan.as_dict()) is not None:
        read_pace()
        go_to_stop(0)
        ss().pop(GOTO, None)


def use_draft_in_class() -> None:
    """Callback (teacher of a running class): the draft becomes the class's plan, from its first stop."""
    plan = ss().get(DRAFT)
    if plan is not None and teacher.teacher_call(cls.store().set_plan, plan.as_dict()) is not None:
        read_pace()
        go_to_stop(0)


def teacher_bar(main: bool = False) -> None:
    """The teacher's plan controls: the stop, Back / Next, pause, the mystery's reveal. In the sidebar of every page
    (on top of it in presenter mode; Back / Next also on PageUp / PageDown, as a presentation clicker sends them, and
    pause on B); `main`: in the page itself (the console on a second device)."""
    if not cls.is_teacher():
        return
    sfx = "_console" if main else ""
    keys = {} if main else {"back": "PageUp", "next": "PageDown", "pause": "B"}
    p, stop = pace(), current_stop()
    with st.container(key=f"plan_bar{sfx}"):
        if stop is not None:
            i, s = stop
            n = len(class_plan().stops)
            left = "" if at_stop() else " · (you left it)"
            # the caption: on the console, and once the teacher left the stop (at it, the page's banner shows it)
            said = s.caption and (main or left)
            st.caption(f"Plan: **stop {i + 1} of {n}**{left}" + (f" · {md(s.caption)}" if said else ""))
            # one above the other: each label keeps its room beside its key (a sidebar's half is too narrow)
            st.button(
                "Next stop",
                key=f"plan_next{sfx}",
                icon=":material/arrow_forward:",
                disabled=i + 1 >= n,
                type="primary",
                on_click=go_to_stop,
                args=(i + 1,),
                width="stretch",
                shortcut=keys.get("next"),
            )
            st.button(
                "Back a stop",
                key=f"plan_back{sfx}",
                icon=":material/arrow_back:",
                disabled=i == 0,
                on_click=go_to_stop,
                args=(i - 1,),
                width="stretch",
                shortcut=keys.get("back"),
            )
            if left:
                st.button(
                    f"Back to stop {i + 1}",
                    key=f"plan_again{sfx}",
                    icon=":material/flag:",
                    on_click=go_to_stop,
                    args=(i,),
                    width="stretch",
                )
            if s.hidden_head is not None and not p["reveal"]:
                st.button(
                    "Reveal the mystery head",
                    key=f"plan_reveal{sfx}",
                    icon=":material/visibility:",
                    on_click=reveal_mystery,
                    width="stretch",
                )
        pause_button(p["paused"], sfx, st, width="stretch", shortcut=keys.get("pause"))


def leads_the_lesson() -> bool:
    """The teacher shows a stop of the class's plan on the guided lesson: its Back / Next are the plan's (one Next
    for the class, not the lesson's and the plan's disagreeing)."""
    return cls.is_teacher() and not cls.is_console() and at_stop()


def led() -> bool:
    """A student who follows a teacher who leads: the teacher moves this student's page."""
    return cls.following() and leads()


def led_lesson_bar() -> None:
    """Under a led student's lesson step, instead of the lesson's Back / Next / step picker (the sentence picker is
    not drawn either): the teacher moves the class, and one button lets the student go on alone. A click on the
    lesson's Next used to be the student's way out of follow mode, unannounced; on a phone the sidebar's "Explore on
    my own" is out of sight. (The click reruns the page's fragment, which finds the student no longer following and
    asks for a full run: ui/classroom/panels.py `around`.)"""
    with st.container(horizontal=True, vertical_alignment="center", key="lesson_led"):
        st.caption(":material/cast_for_education: Your teacher moves the class through the lesson.")
        st.button(
            "Explore on my own",
            key="lesson_explore",
            icon=":material/explore:",
            on_click=cls.set_following,
            args=(False,),
        )


# -- what a stop or a snapshot holds ---------------------------------------------------------------------------------
def view_state() -> dict:
    """What "Add this view as a stop" takes: the session's shareable state on its last walkthrough page."""
    state, _ = cls.publishable(cls.shared_state(ss().get(LAST_PAGE, "overview")))
    return state


def describe(state: dict) -> str:
    """A stop's or a snapshot's state in one line of plain words (escaped for markdown)."""
    parts = [TITLES.get(state.get("page"), str(state.get("page"))), f"“{md(state.get('sentence', ''))}”"]
    if state.get("model") == "no_mask":
        parts.append("model trained without the look-ahead mask")
    off = [
        label
        for k, label in (
            ("iv_look_ahead", "look-ahead mask"),
            ("iv_padding", "padding mask"),
            ("iv_scale", "√d_k scaling"),
            ("iv_pos", "positional encoding"),
        )
        if state.get(k) is False
    ]
    if state.get("heads_off"):
        off.append(", ".join(md(h) for h in state["heads_off"]))
    if off:
        parts.append("off: " + "; ".join(off))
    if isinstance(state.get("step"), int) and state.get("page") == "lesson":
        parts.append(f"lesson step {state['step']}")
    return " · ".join(parts)


def stop_label(plan: classroom.plans.Plan, i: int) -> str:
    text = plan.stops[i].caption or TITLES.get(plan.stops[i].state["page"], "")
    if len(text) > 80:
        text = text[:80].rsplit(" ", 1)[0] + " …"
    return f"{i + 1}. {text}"


# -- the student ---------------------------------------------------------------------------------------------------
def visit_stop() -> None:
    """Callback (student, plan mode): show one of the stops the class has reached."""
    plan, i = class_plan(), ss().get("plan_visit")
    if plan is not None and isinstance(i, int) and 0 <= i <= pace()["stop"]:
        show_state(plan.stops[i].state)


def send_shot() -> None:
    """Callback (student): this view and the note, to the teacher's gallery."""
    s = ss()
    try:
        n = cls.store().send_shot(
            cls.code(), s[cls.STUDENT], cls.client_id(), view_state(), str(s.get("shot_note", ""))
        )
        s["shot_note"] = ""
        cls.notify(f"Snapshot {n} sent to your teacher.")
        study.record("shared", "class/snapshot")  # a study's participant: "presenting" (ui/study/session.py)
    except ClassStoreError as e:
        cls.notify(f"Your snapshot was not sent: {e}")


def student_bar() -> None:
    """Under the student's badge: what the class's pace allows, the plan's stops so far, the snapshot button."""
    if not cls.is_student() or cls.SNAP not in ss():
        return
    p = pace()
    if p["mode"] == "free":
        st.caption(":material/explore: Your teacher lets the class explore freely for now.")
    elif p["mode"] == "plan" and class_plan() is not None and p["stop"] >= 0:
        plan = class_plan()
        st.caption(":material/flag: Your teacher lets you explore the lesson's stops so far.")
        options = list(range(p["stop"] + 1))
        if ss().get("plan_visit") not in options:
            ss()["plan_visit"] = options[-1]
        st.selectbox(
            "Stops so far", options, key="plan_visit", on_change=visit_stop, format_func=lambda i: stop_label(plan, i)
        )
    with st.popover("Send a snapshot to the teacher", icon=":material/photo_camera:", width="stretch"):
        # a text area: a text box's "Press Enter to apply" and its count covered the note in a narrow popover
        st.text_area(
            "One line for your teacher",
            max_chars=classroom.plans.MAX_NOTE,
            key="shot_note",
            height=80,
            placeholder="e.g. head 2 breaks il/elle!",
        )
        st.button("Send this view", key="shot_send", type="primary", icon=":material/send:", on_click=send_shot)


# -- the classroom page's sections ----------------------------------------------------------------------------------
def project(shot: dict) -> None:
    """Callback (teacher): show a student's snapshot; the class that follows moves to it, its note and its student's
    number above the page (the pace's `shot`) while the class shows it."""
    about = {"n": shot["n"], "student": shot["student"], "note": shot["note"], "state": shot["state"]}
    if teacher.teacher_call(lambda c, k: cls.store().set_pace(c, k, shot=about)) is not None:
        read_pace()
        show_state(shot["state"])


def bring_back() -> None:
    """Callback (teacher): every student follows the teacher's screen again, whatever they chose (the class's
    mode becomes "Students follow me")."""
    set_pace(mode="lead", recall=pace()["recall"] + 1)


@st.fragment
def gallery() -> None:
    """The class's snapshots, newest first; Project moves the teacher (and the class that follows) to one. A new
    snapshot moves the class's tally, whose event redraws the teacher's page (no timer)."""
    if GOTO in ss():  # a snapshot was chosen: the whole app moves to it
        st.rerun(scope="app")
    shots = teacher.teacher_call(cls.store().shots) or []
    ss()[SHOTS_SEEN] = max((shot["n"] for shot in shots), default=0)  # the sidebar's "new snapshots" are seen
    st.subheader(f"Snapshots from students ({len(shots)})")
    if not shots:
        st.caption(
            "A student sends one with “Send a snapshot to the teacher” in their sidebar: their view and a "
            "one-line note. Pick one here to project it."
        )
        return
    cols = st.columns(3)
    for i, shot in enumerate(reversed(shots)):
        with cols[i % 3].container(border=True, key=f"shot_{shot['n']}"):
            st.markdown(f"**Snapshot {shot['n']}** · student {shot['student']}")
            st.markdown(f"“{md(shot['note'])}”" if shot["note"] else "*(no note)*")
            st.caption(describe(shot["state"]))
            st.button(
                "Project this",
                key=f"shot_project_{shot['n']}",
                on_click=project,
                args=(shot,),
                icon=":material/cast:",
                width="stretch",
            )
