"""classroom/ (the class store): following the teacher, questions and the reveal, what only the teacher may do, a
class's end and idle expiry, the counters and their events, several app processes on one Redis, and the back-end
setting. Every test on `make_store` runs on both back-ends, the in-process memory store and Redis (a real
redis-server on 127.0.0.1 and a free port, started here: tests/services.py).

Who gets into a class and who may start one (joins, rate limits, caps, presence) and the validation of every input
are in tests/test_class_store_admission.py."""

from __future__ import annotations

import threading
import uuid

import pytest

import classroom as cs
from classroom import (
    CODE_ALPHABET,
    ClassEnded,
    Forbidden,
    InvalidInput,
    MemoryClassStore,
    NotFound,
    QuestionClosed,
    RedisClassStore,
)
from serving.processes import MissingTool, require
from tests.services import require_tool
from tests.store_util import STATE, Q, sid
from tests.threads import at_once


def redis_keys(store: RedisClassStore) -> list[str]:
    return sorted(store._r.keys(f"{store._p}:*"))


# -- following the teacher ------------------------------------------------------------------------------
def test_create_follow_and_join(make_store):
    store = make_store()
    code, secret = store.create(STATE)
    assert len(code) == 6 and set(code) <= set(CODE_ALPHABET)
    assert secret not in code and len(secret) >= 32
    snap = store.join(code, "10.0.0.1", sid(1))
    assert snap.state == STATE and snap.version == 1 and snap.students == 1 and not snap.ended
    assert snap.question is None and snap.counts == () and snap.answer is None
    # the student's copy is data: changing it changes nothing in the store
    snap.state["sentence"] = "changed"
    assert store.snapshot(code).state["sentence"] == "i am a student"

    assert store.set_state(code, secret, {**STATE, "page": "decoder", "step": 4}) == 2
    snap = store.snapshot(code)
    assert snap.version == 2 and snap.state["page"] == "decoder" and snap.state["step"] == 4
    assert store.set_state(code, secret, {"page": "overview"}) == 3  # replaces the state
    assert store.snapshot(code).state == {"page": "overview"}
    # rejoining (the same student after a detach) does not count twice; codes are read leniently
    store.join(code.lower()[:3] + " " + code.lower()[3:], "10.0.0.1", sid(1))
    store.join(code, "10.0.0.2", sid(2))
    assert store.snapshot(code).students == 2
    assert store.snapshot("ZZZZZZ") is None and store.snapshot("<b>") is None


def test_question_answer_reveal(make_store):
    store = make_store()
    code, secret = store.create(STATE)
    for n in range(4):
        store.join(code, f"10.0.0.{n}", sid(n))
    qid = store.ask(code, secret, *Q)
    snap = store.snapshot(code)
    assert snap.question == cs.ClassQuestion(qid, Q[0], tuple(Q[1]))
    assert snap.answer is None and not snap.revealed and snap.counts == (0, 0, 0)
    assert store.snapshot(code, secret=secret).answer == 0  # the teacher sees the model's answer

    store.answer(code, sid(0), qid, 0)
    store.answer(code, sid(1), qid, 1)
    store.answer(code, sid(2), qid, 1)
    store.answer(code, sid(2), qid, 1)  # the same answer again changes nothing
    assert store.snapshot(code).counts == (1, 2, 0)
    store.answer(code, sid(1), qid, 2)  # changed before the reveal: one answer per student
    snap = store.snapshot(code, student_id=sid(1))
    assert snap.counts == (1, 1, 1) and snap.answered == 3 and snap.my_answer == 2
    assert store.snapshot(code, student_id=sid(3)).my_answer is None

    with pytest.raises(InvalidInput):
        store.answer(code, sid(3), qid, 3)  # no fourth option
    with pytest.raises(NotFound):
        store.answer(code, "not-a-member", qid, 0)  # must join first
    with pytest.raises(QuestionClosed):
        store.answer(code, sid(3), qid + 1, 0)  # not the current question

    store.reveal(code, secret)
    snap = store.snapshot(code)
    assert snap.revealed and snap.answer == 0 and snap.counts == (1, 1, 1)
    with pytest.raises(QuestionClosed):
        store.answer(code, sid(3), qid, 0)  # closed at the reveal

    qid2 = store.ask(code, secret, "Which head?", ["0", "1"], 1)
    assert qid2 == qid + 1
    snap = store.snapshot(code)
    assert snap.counts == (0, 0) and not snap.revealed and snap.answer is None
    with pytest.raises(QuestionClosed):
        store.answer(code, sid(0), qid, 0)  # an answer to the old question does not land on the new one
    store.answer(code, sid(0), qid2, 1)
    assert store.snapshot(code).counts == (0, 1)


def test_reveal_without_question(make_store):
    store = make_store()
    code, secret = store.create({})
    with pytest.raises(QuestionClosed):
        store.reveal(code, secret)


# -- only the teacher -----------------------------------------------------------------------------------
def test_students_cannot_act_as_teacher(make_store):
    store = make_store()
    code, secret = store.create(STATE)
    other_code, other_secret = store.create(STATE)
    qid = store.ask(code, secret, *Q)
    snap = store.join(code, "10.0.0.9", sid(9))
    seen_by_student = repr(snap)
    assert secret not in seen_by_student and cs.secret_hash(code, secret) not in seen_by_student
    for wrong in [
        None,
        "",
        "x",
        secret[:-1],
        secret + "x",
        other_secret,
        code,
        sid(9),
        "a" * 10_000,
        12345,
        cs.secret_hash(code, secret),
    ]:
        with pytest.raises(Forbidden):
            store.set_state(code, wrong, {"page": "overview"})
        with pytest.raises(Forbidden):
            store.ask(code, wrong, *Q)
        with pytest.raises(Forbidden):
            store.reveal(code, wrong)
        with pytest.raises(Forbidden):
            store.end(code, wrong)
        with pytest.raises(Forbidden):
            store.touch(code, wrong)
        if wrong is not None:
            with pytest.raises(Forbidden):
                store.snapshot(code, secret=wrong)  # the model's answer stays hidden
        assert not store.is_teacher(code, wrong)
    snap = store.snapshot(code)
    assert snap.state == STATE and snap.version == 1 and snap.question.id == qid and not snap.revealed
    assert snap.answer is None and not snap.ended
    assert store.is_teacher(code, secret) and store.is_teacher(other_code, other_secret)


def class_with_an_answer(store, option: int) -> tuple[str, str, str]:
    """A class with one student who answered `option` to the open question: (code, secret, question id)."""
    code, secret = store.create(STATE)
    store.join(code, "10.0.0.1", sid(1))
    qid = store.ask(code, secret, *Q)
    store.answer(code, sid(1), qid, option)
    return code, secret, qid


def test_end_deletes_everything(make_store):
    store = make_store(tombstone_seconds=1.0)
    code, secret, qid = class_with_an_answer(store, 2)
    store.end(code, secret)
    snap = store.snapshot(code)
    assert snap.ended and snap.state == {} and snap.question is None and snap.counts == () and snap.students == 0
    assert store.snapshot(code, secret=secret).ended
    with pytest.raises(ClassEnded):
        store.join(code, "10.0.0.1", sid(1))
    with pytest.raises(ClassEnded):
        store.answer(code, sid(1), qid, 0)
    with pytest.raises(ClassEnded):
        store.set_state(code, secret, STATE)
    with pytest.raises(ClassEnded):
        store.end(code, secret)
    if make_store.kind == "redis":  # only the "ended" marker (and its client's recent starts, kept a minute)
        assert [k for k in redis_keys(store) if ":starts:" not in k] == [f"{store._p}:{code}"]
        assert not store._r.zscore(f"{store._p}:live", code)  # its place is free at once
        assert set(store._r.hgetall(f"{store._p}:{code}")) == {"ended", "version", "seq", "q", "tally"}
    make_store.wait(1.2)  # (Redis: the ended marker's real-time test)
    assert store.snapshot(code) is None
    if make_store.kind == "redis":
        assert [k for k in redis_keys(store) if ":starts:" not in k] == []  # starts: a minute


def test_idle_expiry_and_teacher_actions_postpone_it(make_store):
    store = make_store(idle_seconds=1.0)
    code, secret, qid = class_with_an_answer(store, 1)
    for _ in range(2):  # 1.1 s in all: alive because the teacher acted (Redis: idle expiry's real-time test)
        make_store.wait(0.55)
        store.touch(code, secret)
    make_store.wait(0.5)
    store.snapshot(code)  # students polling does not keep a class alive
    store.answer(code, sid(1), qid, 2)
    assert store.snapshot(code).counts == (0, 0, 1)
    make_store.wait(0.7)  # 1.2 s after the teacher's last action, 0.7 s after the students' poll and answer
    assert store.snapshot(code) is None
    with pytest.raises(NotFound):
        store.join(code, "10.0.0.1", sid(1))
    with pytest.raises(NotFound):
        store.set_state(code, secret, STATE)
    if make_store.kind == "redis":
        # answers, counts, students too; what is left is per client or server-wide, pruned as classes start
        assert [
            k for k in redis_keys(store) if not any(p in k for p in (":joinfail:", ":client:", ":starts:", ":live"))
        ] == []
    else:
        assert code not in store._classes


# -- several processes (Redis) --------------------------------------------------------------------------
def test_two_processes_share_a_class(redis_url):
    prefix = f"test:{uuid.uuid4().hex[:8]}"
    a, b = RedisClassStore(redis_url, prefix=prefix), RedisClassStore(redis_url, prefix=prefix)
    try:
        code, secret = a.create(STATE)  # the teacher's session lives in process A
        assert b.join(code, "10.0.0.1", sid(1)).state == STATE  # a student's in process B
        assert b.is_teacher(code, secret)
        a.set_state(code, secret, {**STATE, "page": "encoder"})
        assert b.snapshot(code).version == 2 and b.snapshot(code).state["page"] == "encoder"
        qid = b.ask(code, secret, *Q)  # the teacher's next request may land on B (a failover)
        b.answer(code, sid(1), qid, 2)
        assert a.snapshot(code).counts == (0, 0, 1)

        # 60 students answer at once through both processes: every answer is counted once
        for n in range(60):
            (a, b)[n % 2].join(code, f"10.1.0.{n}", sid(100 + n))

        def student(n: int) -> None:
            s = (a, b)[n % 2]
            s.answer(code, sid(100 + n), qid, n % 3)
            s.answer(code, sid(100 + n), qid, (n + 1) % 3)  # and changes it

        assert not at_once(student, 60, timeout=30)
        assert a.snapshot(code).counts == (20, 20, 21) and b.snapshot(code).answered == 61
        b.end(code, secret)
        assert a.snapshot(code).ended
    finally:
        a.close()
        b.close()


def test_unreachable_redis_is_a_clear_error():
    store = RedisClassStore(f"redis://127.0.0.1:{_closed_port()}/0")
    with pytest.raises(cs.StoreUnavailable):
        store.snapshot("ABCDEF")
    with pytest.raises(cs.StoreUnavailable):
        store.create({})


def _closed_port() -> int:
    from serving.processes import free_port

    return free_port()  # nothing listens there once the probe socket is closed


def test_memory_store_is_bounded():
    store = MemoryClassStore(max_classes=3, classes_per_client=100)
    for _ in range(3):
        store.create({})
    with pytest.raises(cs.ClassStoreError):
        store.create({})


def test_get_store_follows_the_setting(monkeypatch, redis_url):
    monkeypatch.delenv("GLASS_REDIS_URL", raising=False)
    assert isinstance(cs.get_store(), MemoryClassStore) and cs.get_store() is cs.get_store()
    monkeypatch.setenv("GLASS_REDIS_URL", redis_url)
    store = cs.get_store()
    assert isinstance(store, RedisClassStore) and store is cs.get_store()
    code, secret = store.create({})
    assert store.snapshot(code).version == 1


def test_a_missing_tool_fails_with_the_install_command():
    with pytest.raises(MissingTool, match="apt-get install -y glass-no-such-tool"):
        require("glass-no-such-tool")
    with pytest.raises(pytest.fail.Exception, match="dev.sh test"):
        require_tool("glass-no-such-tool")


def test_the_counters_move_with_each_kind_of_change_and_are_announced(make_store):
    """`counters` (one small read) moves `seq` with everything a student sees (a new state, a question, the
    reveal, the end), `q` with the questions only, `tally` with joins and answers (the teacher's counts); each
    snapshot carries the counters it was read with, and every change is announced to the store's watchers
    (with Redis: to every app process, through the PUBLISH in the change's own script), never before it."""
    from classroom import Counters

    store = make_store()
    other = make_store() if make_store.kind == "redis" else store  # another app process on the same Redis
    heard: list[tuple[str, Counters]] = []
    seen_by_then: list[int | None] = []
    got = threading.Event()

    def on_event(code, c):
        snap = other.snapshot(code)  # the change is there by the time its event is
        seen_by_then.append(snap.seq if snap is not None else None)
        heard.append((code, c))
        got.set()

    subscribed = threading.Event()
    stop = other.watch(on_event, lambda up: subscribed.set() if up else None)
    assert make_store.kind == "memory" or subscribed.wait(10)  # (Redis: the subscription is confirmed)
    code, secret = store.create(STATE)
    assert store.counters(code) == Counters(1, 0, 0) and store.counters(code.lower()) == Counters(1, 0, 0)

    def step(action, expect: tuple[int, int, int], ended: bool = False) -> None:
        got.clear()
        action()
        assert got.wait(5), "no event"
        assert heard[-1] == (code, Counters(*expect, ended))
        assert store.counters(code) == Counters(*expect, ended)
        assert seen_by_then[-1] == expect[0]

    step(lambda: store.join(code, "203.0.113.1", sid(1)), (1, 0, 1))
    n = len(heard)
    store.join(code, "203.0.113.1", sid(1))  # the same student again: nothing moved
    step(lambda: store.set_state(code, secret, {**STATE, "sentence": "i am a student"}), (2, 0, 1))
    assert len(heard) == n + 1  # (the second join announced nothing)
    assert store.snapshot(code, student_id=sid(1)).seq == 2
    step(lambda: store.ask(code, secret, "Which word?", ["a", "b"], 1), (3, 1, 1))
    qid = store.snapshot(code).question.id
    step(lambda: store.answer(code, sid(1), qid, 0), (3, 1, 2))
    n = len(heard)
    store.touch(code, secret)  # nothing anyone sees
    store.answer(code, sid(1), qid, 0)  # the same answer again
    step(lambda: store.reveal(code, secret), (4, 2, 2))
    assert len(heard) == n + 1
    snap = store.snapshot(code)
    assert (snap.seq, snap.q, snap.tally) == (4, 2, 2)
    step(lambda: store.end(code, secret), (5, 3, 2), ended=True)
    assert store.snapshot(code).ended
    assert store.counters("ZZZZZZ") is None and store.counters("not a code") is None
    stop()
    got.clear()
    store.create(STATE)
    assert not got.wait(0.5)  # no longer watching


def test_a_state_stored_by_an_older_version_still_reads():
    """`lesson_sentence` (the lesson shares the app's `sentence` now) is dropped on read, not refused: a class
    stored before an upgrade keeps working."""
    from classroom.rules import check_state

    assert check_state({"sentence": "the cat", "lesson_sentence": "a dog"}) == {"sentence": "the cat"}
    with pytest.raises(InvalidInput):
        check_state({"sentence": "the cat", "lesson_sentenc": "a dog"})
