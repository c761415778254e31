"""Peer instruction in the app: the teacher's console (vote, lock, discuss, vote again, reveal; both votes side by
side, the suggested next move, the CSV) and the student's panel (vote buttons or a grid to click, then the
reveal). The store does the work (classroom/votes.py); this module draws it and holds the callbacks.

Projected screens stay anonymous (the store counts votes, never names) and keep the distribution to themselves
until the reveal: the teacher sees it on their screen by a toggle that says "not on the projector".
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import streamlit as st

from classroom import ClassStoreError
from classroom.votes import (
    REVEAL_ABOVE,
    REVISIT_BELOW,
    Poll,
    choice_label,
    results_csv,
    share_correct,
    suggest_after,
)
from ui.classroom import asking
from ui.classroom.session import ASKED, SECRET, STUDENT, client_id, code, notify, ss, store
from ui.classroom.teacher import teacher_call
from ui.widgets import chart, md, metrics_row
from viz.peer import click_grid, clicks_figure, rounds_figure, weights_figure

PEEK = "class_peek"
REFUSED = "_class_vote_refused"  # why the student's last vote was refused (shown once)
WIDE_OPTION = 24  # characters: longer options are drawn one per line  # the teacher's toggle: the votes on this screen
RULE = (
    f"The rule (Peer Instruction, Vickrey et al. 2015), from the first vote's share of right answers: below "
    f"{REVISIT_BELOW:.0%} revisit the idea; from {REVISIT_BELOW:.0%} to {REVEAL_ABOVE:.0%} let students convince "
    f"a neighbour and vote again; above {REVEAL_ABOVE:.0%} reveal and move on."
)
PHASES = {
    "vote": "Students vote (they may change their vote until you lock it).",
    "locked": "The first vote is locked.",
    "discuss": "The class discusses: each student convinces a neighbour who voted differently.",
    "revote": "Students vote again.",
    "locked again": "The second vote is locked.",
    "revealed": "The model's answer is revealed.",
}


# -- asking -----------------------------------------------------------------------------------------------
def ask(kind: str, params: dict) -> None:
    """Callback of the Ask button: a question of `kind`, its first vote open."""
    try:
        q, grid = asking.make_question(kind, **params)
    except ValueError as e:
        notify(str(e))
        return
    stop = (ss().get("_class_pace") or {}).get("stop", -1)  # the plan's stop the class is at (for the CSV)
    qid = teacher_call(
        store().ask_peer,
        q.text,
        list(q.options),
        q.answer,
        q.kind,
        grid,
        q.detail,
        stop if isinstance(stop, int) and stop >= 0 else None,
    )
    if qid is not None:
        ss()[ASKED] = (qid, q)
        ss()[PEEK] = False  # a new question: its votes off the projector again


MOVES = ("lock_vote", "discuss", "revote", "reveal", "show_first_vote", "close_question")


def move(name: str) -> None:
    """Callback of the console's buttons: lock_vote, discuss, revote, reveal, show_first_vote or close_question."""
    if name == "reveal":
        asking.reveal()
    elif name in MOVES:
        teacher_call(getattr(store(), name))


# -- voting -------------------------------------------------------------------------------------------------
def vote(qid: int, choice: int) -> None:
    """Callback of a vote (its arguments are the server's, not the browser's)."""
    try:
        store().vote(code(), ss()[STUDENT], qid, choice, client_id())
    except ClassStoreError as e:
        ss()[REFUSED] = str(e)  # shown in the panel (a vote reruns the panel only, where a toast would not show)


def vote_cell(qid: int, row: int, col_key: str, cols: int) -> None:
    """Callback of the grid's keyboard way: the asked row, and the column chosen (read now, not when the button was
    drawn)."""
    vote(qid, int(row) * cols + int(ss().get(col_key) or 0))


def outside_row(r: int, asked: int | None, rows: tuple[str, ...]) -> bool:
    """A click in another row than the one asked about is refused with a message (never counted as a wrong vote)."""
    if asked is None or r == asked:
        return False
    ss()[REFUSED] = (
        f"That cell is in the row of {rows[r]}: the question asks about the row of {rows[asked]}. "
        "Click a cell of that row (it is framed)."
    )
    return True


def clicked(qid: int, key: str, cols: tuple[str, ...], row_labels: tuple[str, ...], asked: int | None = None) -> None:
    """Callback of the grid's selection: the clicked cell is the vote (in the asked row only)."""
    event = ss().get(key) or {}
    points = (event.get("selection") or {}).get("points") or []
    for p in points:
        if p.get("x") in cols and p.get("y") in row_labels:
            r, c = row_labels.index(p["y"]), cols.index(p["x"])
            if outside_row(r, asked, row_labels):
                return
            suffix = key.removeprefix(f"class_grid_{qid}")
            ss()[f"class_cell_col_{qid}{suffix}"] = c  # the keyboard way shows the clicked column too
            vote(qid, r * len(cols) + c)
            return


def option_buttons(cols, qid: int, options, mine: int | None, on_click: Callable, suffix: str = "") -> None:
    """A question's options as buttons, one in each of `cols` (key `class_answer_<qid>_<i><suffix>`): the one
    chosen (`mine`) is primary, a click calls `on_click(qid, i)`. A plain question's and a peer vote's."""
    for i, (col, option) in enumerate(zip(cols, options, strict=True)):
        col.button(
            md(option),
            key=f"class_answer_{qid}_{i}{suffix}",
            on_click=on_click,
            args=(qid, i),
            type="primary" if mine == i else "secondary",
            width="stretch",
        )


def _vote_widgets(poll: Poll) -> None:
    mine = poll.my_first if poll.round == 1 else poll.my_second
    suffix = "" if poll.round == 1 else "_r2"
    if poll.grid is None:  # side by side when short, else one per line (a button cuts a long label)
        long = max(map(len, poll.options)) > WIDE_OPTION
        cols = [st.container() for _ in poll.options] if long else st.columns(len(poll.options))
        option_buttons(cols, poll.qid, poll.options, mine, vote, suffix)
    else:
        g = poll.grid
        key = f"class_grid_{poll.qid}{suffix}"
        row = g.row if g.row is not None else 0
        st.caption(
            f"Click a cell in the framed row, {md(g.rows[row])}: the word you think it gives its largest weight to."
        )
        st.plotly_chart(
            click_grid(g.rows, g.cols, g.row, mine),
            key=key,
            selection_mode="points",
            on_select=functools.partial(clicked, poll.qid, key, g.cols, g.rows, g.row),
            config={"displayModeBar": False},
            width="stretch",
        )
        c1, c2 = st.columns([4, 1], vertical_alignment="bottom")
        col_key = f"class_cell_col_{poll.qid}{suffix}"
        c1.selectbox(
            f"Or choose the column in the row of {g.rows[row]}",
            range(len(g.cols)),
            format_func=g.cols.__getitem__,
            key=col_key,
        )
        c2.button(
            "Choose",
            key=f"class_cell_vote_{poll.qid}{suffix}",
            on_click=vote_cell,
            args=(poll.qid, row, col_key, len(g.cols)),
            width="stretch",
        )
    you = choice_label(poll, mine) if mine is not None else None
    st.caption(
        "Your answer: " + (f"**{md(you)}** (you can change it until the teacher locks the vote)" if you else "none yet")
    )


def student_panel(question) -> bool:
    """The student's side of the open question when it has a poll (False: a plain question, drawn as before)."""
    try:
        poll = store().votes(code(), student_id=ss()[STUDENT])
    except ClassStoreError:
        return False
    if poll is None or poll.qid != question.id:
        return False
    refused = ss().pop(REFUSED, None)
    if refused:
        st.warning(md(refused), icon=":material/block:")
    phase = poll.phase
    if phase == "vote":
        st.caption(
            "Vote on your own first: nobody sees who voted what, and the class's votes stay hidden until the reveal."
        )
        _vote_widgets(poll)
    elif phase == "revote":
        first = choice_label(poll, poll.my_first) if poll.my_first is not None else "none"
        st.caption(f"Vote again after your discussion (your first vote: {md(first)}).")
        _vote_widgets(poll)
    elif phase == "discuss":
        st.info(
            "Discuss with a neighbour, ideally one who voted differently: convince each other. You will vote again.",
            icon=":material/forum:",
        )
        _mine_line(poll)
    elif phase in ("locked", "locked again"):
        st.info("The vote is locked: wait for your teacher.", icon=":material/lock:")
        _mine_line(poll)
    else:
        _revealed(poll, question)
        return True
    if poll.shown and poll.first is not None:  # the teacher showed how the class's first vote spread (no answer)
        st.caption("How the class voted the first time (which answer is right stays hidden until the reveal):")
        _distribution(poll, key=f"class_first_{poll.qid}")
    return True


def _mine_line(poll: Poll) -> None:
    parts = [
        f"{name}: **{md(choice_label(poll, v))}**"
        for name, v in (("Your first vote", poll.my_first), ("your second vote", poll.my_second))
        if v is not None
    ]
    st.caption(" · ".join(parts) if parts else "You did not vote.")


def _revealed(poll: Poll, question) -> None:
    right = poll.correct
    st.success(f"**The model's answer:** {md(choice_label(poll, right))}", icon=":material/smart_toy:")
    last = poll.my_second if poll.my_second is not None else poll.my_first
    if last is None:
        st.info("You did not answer this one.")
    elif last == right:
        st.markdown(f"**Yours:** {md(choice_label(poll, last))}: the same as the model's.")
    else:
        st.markdown(f"**Yours:** {md(choice_label(poll, last))}: not what the model does.")
    if poll.round == 2:
        _mine_line(poll)
    if poll.detail:  # the numbers behind the model's answer, as the teacher sees them
        st.caption(":material/calculate: " + md(poll.detail))
    _distribution(poll, key=f"class_result_{poll.qid}")


def _distribution(poll: Poll, key: str) -> None:
    first = poll.dense(poll.first)
    second = poll.dense(poll.second) if poll.round == 2 and poll.second is not None else None
    if poll.grid is None:
        chart(rounds_figure(poll.options, first, second, poll.correct), key=key)
    elif poll.correct is None:  # the first vote shown before the reveal: the clicks only, no weights, no answer
        g = poll.grid
        chart(clicks_figure(g.rows, g.cols, first, None), key=key)
    else:  # the class's clicks beside the model's weights (a phone stacks the two columns)
        g = poll.grid
        latest = second if second is not None else first
        c1, c2 = st.columns(2)
        with c1:
            chart(clicks_figure(g.rows, g.cols, latest, poll.correct), key=key)
        with c2:
            chart(weights_figure(g.rows, g.cols, g.values, poll.correct), key=f"{key}_weights")


# -- the teacher's console ------------------------------------------------------------------------------------
def console(snap, private: bool = False) -> bool:
    """The teacher's view of the open question when it has a poll (False: draw the plain question as before).
    `private`: a console on the teacher's own device (ui/classroom/console.py), away from the projector: the votes
    and the suggested move are shown at once; on the projected class page they wait behind a toggle."""
    try:
        poll = store().votes(code(), secret=ss().get(SECRET))
    except ClassStoreError:
        return False
    if poll is None or snap.question is None or poll.qid != snap.question.id:
        return False
    st.markdown(f"**Question {poll.qid}:** {md(poll.text)}")
    st.caption(PHASES[poll.phase])
    n = poll.voted[poll.round - 1]
    st.caption(f"{n} of {snap.students} students answered" + (" (second vote)" if poll.round == 2 else ""))
    reveal = ("reveal", "Reveal the model's answer", ":material/visibility:")
    buttons = {
        "vote": [("lock_vote", "Lock the vote", ":material/lock:"), reveal],
        "locked": [
            ("discuss", "Discuss, then vote again", ":material/forum:"),
            ("revote", "Vote again now", ":material/replay:"),
            reveal,
        ],
        "discuss": [("revote", "Open the second vote", ":material/replay:"), reveal],
        "revote": [("lock_vote", "Lock the second vote", ":material/lock:"), reveal],
        "locked again": [reveal],
        "revealed": [],
    }[poll.phase]
    if poll.phase in ("locked", "discuss") and not poll.shown:  # Mazur: the spread of the first vote, no answer
        buttons.append(("show_first_vote", "Show the class the first vote (not the answer)", ":material/bar_chart:"))
    buttons.append(("close_question", "Close the question", ":material/close:"))
    cols = st.columns(len(buttons))
    for col, (name, label, icon) in zip(cols, buttons, strict=True):
        col.button(
            label,
            key="class_reveal" if name == "reveal" else f"class_{name}",
            on_click=move,
            args=(name,),
            icon=icon,
            type="primary" if col is cols[0] else "secondary",
            width="stretch",
        )
    if poll.shown and not poll.revealed:
        st.caption(":material/bar_chart: The class sees how the first vote spread, without the answer.")
    shown = (
        poll.revealed
        or private
        or st.toggle("Show the votes and the suggested next move (not on the projector)", key=PEEK)
    )
    if poll.revealed:
        st.success(f"**The model's answer:** {md(choice_label(poll, poll.correct))}", icon=":material/smart_toy:")
        if poll.detail:
            st.caption(md(poll.detail))
    if shown:
        first, second = share_correct(poll.first, poll.correct), share_correct(poll.second, poll.correct)
        with metrics_row():
            st.metric("First vote: right", "–" if first is None else f"{first:.0%}", border=True)
            change = None if first is None or second is None else round((second - first) * 100)
            st.metric(
                "Second vote: right",
                "–" if second is None else f"{second:.0%}",
                border=True,
                delta=None if change is None else f"{change:+d} points",
                delta_color="off" if change == 0 else "normal",
            )
        _distribution(poll, key="class_rounds")
        move_name, why = suggest_after(first, second if poll.round == 2 else None)
        if not poll.revealed:
            st.info(f"**Suggested next move: {move_name}.** {why}", icon=":material/lightbulb:")
        st.caption(RULE)
    return True


def download() -> None:
    """The class's results as CSV: questions, both votes' distributions, shares right; nobody's name or id."""
    try:
        rows = store().results(code(), ss().get(SECRET))
    except ClassStoreError:
        return
    if rows:
        st.download_button(
            "Download the class's results (CSV)",
            results_csv(rows),
            file_name=f"class-{code()}.csv",
            mime="text/csv",
            key="class_csv",
            icon=":material/download:",
        )


def answered(snap) -> int:
    """How many students answered the open question: its poll's current round, else the plain answers."""
    try:
        poll = store().votes(code(), secret=ss().get(SECRET))
    except ClassStoreError:
        poll = None
    if poll is None or snap.question is None or poll.qid != snap.question.id:
        return snap.answered
    return poll.voted[poll.round - 1]
