"""What the class store hands out (classroom/store.py): a class's counters, its question and a snapshot of the
class as one reader sees it (`_snapshot_of` builds it from a back-end's record). Plain frozen data.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Counters:
    """A class's counters: each moves with one kind of change, so that a page compares the one it shows.

    `seq`: anything a student sees (the teacher's state, a question, its reveal, the end); `q`: a question,
    its reveal or the end (what a student exploring on their own sees); `tally`: joins and answers (what the
    teacher's counts show). Events carry only these numbers; each page reads what it needs in its own run."""

    seq: int
    q: int
    tally: int
    ended: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {"seq": self.seq, "q": self.q, "tally": self.tally, "ended": self.ended}


@dataclass(frozen=True)
class ClassQuestion:
    id: int
    text: str
    options: tuple[str, ...]


@dataclass(frozen=True)
class ClassSnapshot:
    """What a poll sees. `answer` (the model's) is None until revealed, except for the teacher.
    `version` counts the teacher's `set_state` calls (start 1); `question.id` counts questions."""

    code: str
    state: dict[str, Any] = field(default_factory=dict)
    version: int = 0
    question: ClassQuestion | None = None
    counts: tuple[int, ...] = ()
    revealed: bool = False
    answer: int | None = None
    my_answer: int | None = None  # the asking student's current answer
    students: int = 0  # the students present: seen within the store's `presence_seconds` (`mark_connected`)
    ended: bool = False
    seq: int = 0  # the class's counters when this snapshot was read (`Counters`)
    q: int = 0
    tally: int = 0

    @property
    def answered(self) -> int:
        return sum(self.counts)


def _snapshot_of(
    code: str,
    state: dict[str, Any],
    version: int,
    qid: int,
    q: dict[str, Any] | None,
    counts: list[int],
    revealed: bool,
    students: int,
    teacher: bool,
    my_answer: int | None,
    counters: Counters | None = None,
) -> ClassSnapshot:
    question = ClassQuestion(qid, q["text"], tuple(q["options"])) if q else None
    moved: dict[str, Any] = {"seq": counters.seq, "q": counters.q, "tally": counters.tally} if counters else {}
    n = len(question.options) if question else 0
    return ClassSnapshot(
        code=code,
        state=state,
        version=version,
        question=question,
        counts=tuple((counts + [0] * n)[:n]),
        revealed=revealed and question is not None,
        answer=q["answer"] if q and (revealed or teacher) else None,
        my_answer=my_answer if question else None,
        students=students,
        **moved,
    )
