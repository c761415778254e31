"""Peer instruction in the class store: vote, (discuss), vote again, reveal; and a class's results as CSV.

A question asked with `ask_peer` opens a *poll* beside it (one per class, for its current question): round 1
is open, students `vote` (and may change their vote) until the teacher locks it (`lock_vote`); the teacher
may then ask the class to discuss (`discuss`: students are told to talk to a neighbour who voted
differently) and open round 2 (`revote`: everyone votes again, their first vote kept apart); the existing
`reveal` shows the model's answer and closes the poll. A vote is a choice: an option's index, or for a
*click* question (`grid`: the rows and columns of a real tensor) the index ``row * len(cols) + col`` of the
cell a student clicked.

What a student sees of a poll is their own votes and how many voted; the distribution stays with the
teacher (`votes(code, secret=...)`) until the reveal. Votes are counted per student id only (no names
exist), so every screen is anonymous. Votes are limited per student and per client address (the rate limits
"votes" and "votes_client" of `rules.LIMITS`: settings, for a school behind one address); a refused vote raises
`RateLimited`. A student whose app process died rejoins with the same id (ui/classroom/session.py
`student_id_for`) and finds their votes: they live in the store (Redis), not in a process.

`suggest(share)` is the teacher's next move from the first vote's correct share (Vickrey et al. 2015's rule
for Peer Instruction): below `REVISIT_BELOW` revisit the idea, up to `REVEAL_ABOVE` discuss and vote again,
above it reveal. `results_csv` is the teacher's download: questions, both rounds' distributions and shares
correct, nothing about any student.

The mixin here adds the public operations to `ClassStore` (classroom/store.py); the back-ends implement them:
classroom/memory_votes.py (`MemoryVotes`) and classroom/redis_votes.py. Nothing here imports Streamlit.
"""

from __future__ import annotations

import csv
import io
import time
from abc import abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from classroom.errors import Forbidden, InvalidInput
from classroom.parts import StoreParts
from classroom.rules import MAX_OPTION, check_id, check_question, check_text, client_key, normalize_code

if TYPE_CHECKING:
    from classroom.snapshot import ClassSnapshot

REVISIT_BELOW, REVEAL_ABOVE = 0.35, 0.70  # the first vote's correct share: the rule `suggest` applies
MAX_GRID = 40  # rows and columns of a click question's grid (a sentence of 39 words and EOS)
MAX_RESULTS = 100  # questions a class keeps for its CSV
MAX_DETAIL = 600  # characters of a question's detail line (the numbers behind the answer)
GRID_KEYS = ("rows", "cols", "answer")


@dataclass(frozen=True)
class Grid:
    """A click question's grid: the labels of its rows and columns (the tensor's axes) and the model's cell."""

    rows: tuple[str, ...]
    cols: tuple[str, ...]
    answer: int  # row * len(cols) + col
    values: tuple[tuple[float, ...], ...] | None = None  # the model's real tensor (hidden until the reveal)
    row: int | None = None  # the row the question asks about (shown to students)

    @property
    def size(self) -> int:
        return len(self.rows) * len(self.cols)

    def cell(self, choice: int) -> tuple[int, int]:
        return divmod(choice, len(self.cols))

    def as_dict(self) -> dict[str, Any]:
        return {
            "rows": list(self.rows),
            "cols": list(self.cols),
            "answer": self.answer,
            **({"values": [list(r) for r in self.values]} if self.values is not None else {}),
            **({"row": self.row} if self.row is not None else {}),
        }


def check_grid(grid: object) -> Grid | None:
    if grid is None:
        return None
    if isinstance(grid, Grid):
        grid = grid.as_dict()
    if not isinstance(grid, dict) or not {"rows", "cols", "answer"} <= set(grid) <= {*GRID_KEYS, "values", "row"}:
        raise InvalidInput("a grid has rows, cols, answer and perhaps values")
    labels = []
    for axis in ("rows", "cols"):
        values = grid[axis]
        if not isinstance(values, list | tuple) or not 1 <= len(values) <= MAX_GRID:
            raise InvalidInput(f"a grid has 1 to {MAX_GRID} {axis}")
        labels.append(tuple(check_text(v, MAX_OPTION, "a grid label") for v in values))
    answer = grid["answer"]
    if not isinstance(answer, int) or isinstance(answer, bool) or not 0 <= answer < len(labels[0]) * len(labels[1]):
        raise InvalidInput("the grid's answer must be one of its cells")
    values = grid.get("values")
    if values is not None:
        ok = (
            isinstance(values, list | tuple)
            and len(values) == len(labels[0])
            and all(isinstance(r, list | tuple) and len(r) == len(labels[1]) for r in values)
            and all(isinstance(v, int | float) and not isinstance(v, bool) and 0 <= v <= 1 for r in values for v in r)
        )
        if not ok:
            raise InvalidInput("a grid's values are numbers from 0 to 1, one per cell")
        values = tuple(tuple(round(float(v), 4) for v in r) for r in values)
    row = grid.get("row")
    if row is not None and (not isinstance(row, int) or isinstance(row, bool) or not 0 <= row < len(labels[0])):
        raise InvalidInput("the grid's row must be one of its rows")
    return Grid(labels[0], labels[1], answer, values, row)


@dataclass(frozen=True)
class Poll:
    """A class's poll as one member may see it. `first`/`second`: {choice: count} of round 1 and 2 (None:
    hidden from this member, i.e. a student before the reveal, or a round not held); `voted`: how many voted
    in each round; `my_first`/`my_second`: the asking student's votes."""

    qid: int
    kind: str
    text: str
    options: tuple[str, ...]
    answer: int | None  # the model's option (None for a student before the reveal)
    grid: Grid | None
    round: int  # 1 or 2
    open: bool  # votes are accepted now
    discuss: bool  # round 1 is locked and the class discusses
    revealed: bool
    voted: tuple[int, int] = (0, 0)
    first: dict[int, int] | None = None
    second: dict[int, int] | None = None
    my_first: int | None = None
    my_second: int | None = None
    shown: bool = False  # the teacher showed the class the first vote's distribution, without the answer (Mazur)
    detail: str = ""  # the numbers behind the model's answer (for a student: after the reveal)

    @property
    def choices(self) -> int:
        return self.grid.size if self.grid else len(self.options)

    @property
    def correct(self) -> int | None:
        """The choice that is right: the model's option, or its cell."""
        if self.grid is not None:
            return self.grid.answer if (self.answer is not None or self.revealed) else None
        return self.answer

    @property
    def phase(self) -> str:
        """ "vote", "locked", "discuss", "revote", "locked again" or "revealed"."""
        if self.revealed:
            return "revealed"
        if self.round == 1:
            return "vote" if self.open else "discuss" if self.discuss else "locked"
        return "revote" if self.open else "locked again"

    def dense(self, counts: dict[int, int] | None) -> list[int]:
        return [int((counts or {}).get(i, 0)) for i in range(self.choices)]


def share_correct(counts: dict[int, int] | None, correct: int | None) -> float | None:
    """The share of votes on the right choice (None: no votes, or the answer unknown)."""
    total = sum((counts or {}).values())
    if not total or correct is None or counts is None:  # (no counts: no total)
        return None
    return counts.get(correct, 0) / total


def suggest(share: float | None) -> tuple[str, str]:
    """The teacher's next move from the first vote's correct share: (move, why), the rule written out."""
    if share is None:
        return "wait", "No votes yet."
    pct = f"{share:.0%} of the first votes are right"
    if share < REVISIT_BELOW:
        return "revisit", (
            f"{pct}, below {REVISIT_BELOW:.0%}: revisit the idea (a hint, another example), "
            "then let the class vote again."
        )
    if share <= REVEAL_ABOVE:
        return "discuss", (
            f"{pct}, between {REVISIT_BELOW:.0%} and {REVEAL_ABOVE:.0%}: ask the class to convince "
            "a neighbour who voted differently, then vote again."
        )
    return "reveal", f"{pct}, above {REVEAL_ABOVE:.0%}: reveal the answer, explain briefly and move on."


def suggest_after(first: float | None, second: float | None) -> tuple[str, str]:
    """The next move once the class voted twice: from the second vote's share right (the same thresholds), with the
    change from the first written out."""
    if second is None:
        return suggest(first)
    change = "" if first is None else f" ({(second - first) * 100:+.0f} points from the first vote)"
    pct = f"{second:.0%} of the second votes are right{change}"
    if second < REVISIT_BELOW:
        return "revisit", (
            f"{pct}, still below {REVISIT_BELOW:.0%}: the discussion did not settle it. Reveal, then "
            "explain the idea again with another example."
        )
    if second <= REVEAL_ABOVE:
        return "reveal and explain", (f"{pct}: reveal, and ask a student who changed their mind to explain why.")
    return "reveal", f"{pct}, above {REVEAL_ABOVE:.0%}: reveal the answer, confirm it briefly and move on."


def choice_label(poll_or_q: dict[str, Any] | Poll, choice: int) -> str:
    grid = poll_or_q.grid if isinstance(poll_or_q, Poll) else check_grid(poll_or_q.get("grid"))
    options = poll_or_q.options if isinstance(poll_or_q, Poll) else poll_or_q["options"]
    if grid is not None:
        r, c = grid.cell(choice)
        return f"{grid.rows[r]} → {grid.cols[c]}"
    return str(options[choice])


def results_csv(rows: list[dict[str, Any]]) -> str:
    """The class's results (`ClassStore.results`) as CSV: one line per question, no student data. A distribution
    names every option with its count ("option = n", zeros included: the right answer nobody chose shows as 0); a
    click question's, every cell of the asked row and then the clicks elsewhere. Also when it was asked (UTC), the
    plan's stop it was asked at and how many students were present."""
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(
        [
            "question",
            "kind",
            "text",
            "model's answer",
            "asked at (UTC)",
            "plan stop",
            "students present",
            "round 1 votes",
            "round 1 share correct",
            "round 1 distribution",
            "round 2 votes",
            "round 2 share correct",
            "round 2 distribution",
        ]
    )
    for r in rows:
        grid = check_grid(r.get("grid"))
        correct = grid.answer if grid else r["answer"]
        asked = r.get("asked")
        line = [
            r["qid"],
            r["kind"],
            r["text"],
            choice_label(r, correct),
            time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(asked)) if isinstance(asked, int | float) else "",
            r["stop"] + 1 if isinstance(r.get("stop"), int) and r["stop"] >= 0 else "",
            r.get("students", ""),
        ]
        for key in ("first", "second"):
            counts = {int(k): int(v) for k, v in (r.get(key) or {}).items()}
            share = share_correct(counts, correct)
            held = r.get(key) is not None
            line += [
                sum(counts.values()) if held else "",
                "" if share is None else f"{share:.3f}",
                distribution(r, grid, counts) if held else "",
            ]
        w.writerow([_cell(x) for x in line])
    return out.getvalue()


def distribution(r: dict[str, Any], grid: Grid | None, counts: dict[int, int]) -> str:
    """A round's votes in words: every option (or every cell of the asked row) with its count, zeros included."""
    if grid is None:
        return "; ".join(f"{choice_label(r, i)} = {counts.get(i, 0)}" for i in range(len(r["options"])))
    row = grid.row if grid.row is not None else grid.cell(grid.answer)[0]
    cells = range(row * len(grid.cols), (row + 1) * len(grid.cols))
    elsewhere = sum(n for c, n in counts.items() if c not in cells)
    return "; ".join(
        [
            *(f"{choice_label(r, c)} = {counts.get(c, 0)}" for c in cells),
            *([f"other rows = {elsewhere}"] if elsewhere else []),
        ]
    )


def _cell(value: object) -> object:
    """No spreadsheet formula can start a cell (=, +, -, @): a leading quote makes it text."""
    return "'" + value if isinstance(value, str) and value[:1] in ("=", "+", "-", "@") else value


# -- the public operations (mixed into ClassStore) ---------------------------------------------------------
class PeerVotes(StoreParts):
    """Peer instruction's operations on a `ClassStore` (the back-end implements the underscored ones)."""

    def ask_peer(
        self,
        code: str,
        secret: str,
        text: str,
        options: object,
        answer: int,
        kind: str = "question",
        grid: object = None,
        detail: str = "",
        stop: int | None = None,
    ) -> int:
        """Ask a question and open its first vote (`grid`: a click question's rows, columns and model's cell;
        `detail`: the numbers behind the model's answer, shown to students at the reveal; `stop`: the plan's stop it
        is asked at); returns the question's id. The poll before it goes to the class's results."""
        q = check_question(text, options, answer)
        checked = check_grid(grid)
        kind = check_text(kind, 32, "the kind")
        detail = check_text(detail or "", MAX_DETAIL, "the detail", allow_empty=True)
        if stop is not None and (not isinstance(stop, int) or isinstance(stop, bool) or not 0 <= stop < 100):
            raise InvalidInput("the stop is a whole number")
        qid = self.ask(code, secret, q["text"], q["options"], q["answer"])
        code = self._code(code)
        snap = self.snapshot(code, secret=secret)
        record = {
            **q,
            "kind": kind,
            "grid": checked.as_dict() if checked else None,
            "detail": detail,
            "stop": stop,
            "asked": int(time.time()),
            "students": snap.students if snap is not None else 0,
        }
        self._poll_open(code, self._teacher(code, secret), qid, record)
        return qid

    def show_first_vote(self, code: str, secret: str) -> None:
        """Show the class the first vote's distribution, without the answer (Mazur: before the discussion)."""
        code = self._code(code)
        self._poll_move(code, self._teacher(code, secret), "show")

    def close_question(self, code: str, secret: str) -> None:
        """The open question leaves every screen (its votes go to the class's results)."""
        code = self._code(code)
        self._close_question(code, self._teacher(code, secret))

    def vote(self, code: str, student_id: str, question_id: int, choice: int, client_id: str = "local") -> None:
        """A student's vote in the open round (changeable until the teacher locks it)."""
        code = self._code(code)
        student_id = check_id(student_id)
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (question_id, choice)):
            raise InvalidInput("the question id and the choice are whole numbers")
        if not 0 <= choice < MAX_GRID * MAX_GRID:
            raise InvalidInput("no such choice")
        self._vote(code, student_id, question_id, choice, client_key(client_id))

    def lock_vote(self, code: str, secret: str) -> None:
        code = self._code(code)
        self._poll_move(code, self._teacher(code, secret), "lock")

    def discuss(self, code: str, secret: str) -> None:
        """Round 1 locked: the class discusses (students are told to)."""
        code = self._code(code)
        self._poll_move(code, self._teacher(code, secret), "discuss")

    def revote(self, code: str, secret: str) -> None:
        """Open round 2: everyone votes again (round 1's votes are kept apart)."""
        code = self._code(code)
        self._poll_move(code, self._teacher(code, secret), "revote")

    def votes(self, code: str, *, secret: str | None = None, student_id: str | None = None) -> Poll | None:
        """The class's current poll (None: none). With the teacher's secret the distributions and the answer;
        for a student their own votes, the distributions only after the reveal."""
        norm = normalize_code(code)
        if norm is None:
            return None
        code = norm
        teacher = secret is not None and self.is_teacher(code, secret)
        if secret is not None and not teacher:
            raise Forbidden("Only the teacher can do this.")
        if student_id is not None:
            student_id = check_id(student_id)
        raw = self._poll_read(code, student_id)
        if raw is None:
            return None
        return _poll_of(raw, teacher)

    def results(self, code: str, secret: str) -> list[dict[str, Any]]:
        """Every question of this class with a poll (at most MAX_RESULTS, oldest first): text, options, the
        model's answer, both rounds' counts. For the teacher only; nothing about a student."""
        code = self._code(code)
        self._teacher(code, secret)
        rows = self._poll_results(code)
        current = self._poll_read(code, None)
        if current is not None and not any(r["qid"] == current["qid"] for r in rows):
            rows = [*rows, _summary(current)]
        return rows[-MAX_RESULTS:]

    # -- the store's part (classroom/store.py: `ClassStore`) ------------------------------------------------------
    def ask(self, code: str, secret: str, text: str, options: object, answer: int) -> int:
        raise NotImplementedError

    def snapshot(
        self, code: str | None, *, secret: str | None = None, student_id: str | None = None
    ) -> ClassSnapshot | None:
        raise NotImplementedError

    def is_teacher(self, code: str, secret: object) -> bool:
        raise NotImplementedError

    # -- the back-end's part (`MemoryVotes` below, classroom/redis_votes.py `RedisVotes`) ---------------------------
    @abstractmethod
    def _poll_open(self, code: str, shash: str, qid: int, record: dict[str, Any]) -> None:
        raise NotImplementedError

    @abstractmethod
    def _vote(self, code: str, student_id: str, question_id: int, choice: int, ckey: str) -> None:
        raise NotImplementedError

    @abstractmethod
    def _poll_move(self, code: str, shash: str, move: str) -> None:
        raise NotImplementedError

    @abstractmethod
    def _poll_read(self, code: str, student_id: str | None) -> dict[str, Any] | None:
        raise NotImplementedError

    @abstractmethod
    def _poll_results(self, code: str) -> list[dict[str, Any]]:
        raise NotImplementedError

    @abstractmethod
    def _close_question(self, code: str, shash: str) -> None:
        raise NotImplementedError

    @abstractmethod
    def _end_votes(self, code: str) -> None:
        raise NotImplementedError


RECORD_EXTRAS = ("detail", "stop", "asked", "students")  # what a poll's record may hold beside its question


def _summary(raw: dict[str, Any]) -> dict[str, Any]:
    """A poll as one row of the class's results (no student ids)."""
    return (
        {k: raw[k] for k in ("qid", "kind", "text", "options", "answer", "grid")}
        | {k: raw.get(k) for k in RECORD_EXTRAS}
        | {"first": raw["counts"][0], "second": raw["counts"][1] if raw["round"] == 2 else None}
    )


def check_extras(record: dict[str, Any]) -> dict[str, Any]:
    """A poll record's extras as read back: bounded, else dropped (an older record has none)."""
    out: dict[str, Any] = {}
    detail = record.get("detail")
    out["detail"] = detail if isinstance(detail, str) and len(detail) <= MAX_DETAIL and "<" not in detail else ""
    for key, high in (("stop", 99), ("asked", 2**40), ("students", 10**6)):
        v = record.get(key)
        out[key] = v if isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= high else None
    return out


def _poll_of(raw: dict[str, Any], teacher: bool) -> Poll:
    revealed = bool(raw["revealed"])
    shown = teacher or revealed
    first_shown = bool(raw.get("shown"))  # the first vote's distribution, shown to the class before the reveal
    grid = check_grid(raw["grid"])
    counts = [{int(k): int(v) for k, v in c.items() if int(v) > 0} for c in raw["counts"]]
    if grid is not None and not shown:
        grid = Grid(grid.rows, grid.cols, -1, None, grid.row)  # the model's cell and values hidden
    return Poll(
        qid=raw["qid"],
        kind=raw["kind"],
        text=raw["text"],
        options=tuple(raw["options"]),
        answer=raw["answer"] if shown else None,
        grid=grid,
        round=raw["round"],
        open=bool(raw["open"]) and not revealed,
        discuss=bool(raw["discuss"]),
        revealed=revealed,
        voted=tuple(raw["voted"]),
        first=counts[0] if shown or first_shown else None,
        second=counts[1] if shown and raw["round"] == 2 else None,
        my_first=raw["mine"][0],
        my_second=raw["mine"][1],
        shown=first_shown,
        detail=raw.get("detail", "") if shown else "",
    )
