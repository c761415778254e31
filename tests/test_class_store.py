"""classroom/ (the class store): every test runs on both back-ends, the in-process memory store and Redis (a real
redis-server on 127.0.0.1 and a free port, started here: tests/services.py)."""

from __future__ import annotations

import contextlib
import threading
import uuid

import pytest

import classroom as cs
from classroom import (
    CODE_ALPHABET,
    ClassEnded,
    ClassFull,
    ClassStoreError,
    Forbidden,
    InvalidInput,
    MemoryClassStore,
    NotFound,
    QuestionClosed,
    RateLimited,
    RedisClassStore,
)
from serving.processes import MissingTool, require
from tests.services import require_tool
from tests.threads import at_once

STATE = {
    "page": "positional",
    "sentence": "i am a student",
    "model": "base",
    "heads_off": ["enc.0.self_attn:2"],
    "iv_look_ahead": True,
    "iv_padding": True,
    "iv_scale": False,
    "iv_pos": True,
    "lesson": "attention",
    "step": 3,
}
Q = ("Which word does 'it' attend to most?", ["animal", "street", "tired"], 0)


def redis_keys(store: RedisClassStore) -> list[str]:
    return sorted(store._r.keys(f"{store._p}:*"))


def sid(n: int = 0) -> str:
    return f"student-{n:04d}"


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


# -- joining --------------------------------------------------------------------------------------------
def test_join_rate_limit(make_store):
    store = make_store(join_window_seconds=1.5)
    code, _ = store.create(STATE)
    for _ in range(3):
        store.join(code, "10.0.0.1", sid(1))  # successful joins do not count
    wrong = [c for c in ("222222", "333333", "444444") if c != code]
    for n in range(10):
        with pytest.raises(NotFound):
            store.join(["<script>", wrong[0], wrong[1], "nope"][n % 4], "10.0.0.66", sid(66))
    with pytest.raises(RateLimited) as refused:
        store.join(code, "10.0.0.66", sid(66))  # refused before the code is looked at: learns nothing
    assert 0 < refused.value.retry_after <= 1.5
    with pytest.raises(RateLimited):
        store.join(wrong[0], "10.0.0.66", sid(67))  # a new student id does not help
    assert store.join(code, "10.0.0.2", sid(2)).students == 2  # others are not affected


def test_the_join_link_gets_a_class_in_whatever_classmates_mistyped(make_store):
    """Typos of the code by students behind one school address lock that address out of typed codes, not out
    of the class: the teacher's join link (its token) still gets every student in."""
    store = make_store()
    code, secret = store.create(STATE)
    token = store.join_token(code, secret)
    wrong = next(c for c in ("222222", "333333") if c != code)
    for _ in range(store.max_failed_joins):
        with pytest.raises(NotFound):
            store.join(wrong, "192.0.2.10", sid(1))
    with pytest.raises(RateLimited):
        store.join(code, "192.0.2.10", sid(2))  # a typed code (or a bare link) is a guess: refused
    with pytest.raises(RateLimited):
        store.join(code, "192.0.2.10", sid(2), token="0" * 20)  # a made-up token is no link
    assert store.join(code, "192.0.2.10", sid(2), token=token).students == 1  # the link: in
    with pytest.raises(RateLimited):
        store.join(wrong, "192.0.2.10", sid(3), token=token)  # another class's code with this token: still a guess
    with pytest.raises(Forbidden):
        store.join_token(code, "not the secret")


def test_exactly_the_limit_of_failed_joins_per_window(make_store):
    """10 failed joins a minute means 10, in any minute: the 11th is refused, right up to the window's end, and
    the address is let in after it (Redis: the failed-join window's real-time test)."""
    store = make_store(join_window_seconds=2.0)
    code, _ = store.create(STATE)
    wrong = next(c for c in ("222222", "333333") if c != code)
    for n in range(10):
        with pytest.raises(NotFound):
            store.join(wrong, "192.0.2.20", sid(n))
    make_store.wait(1.5)
    with pytest.raises(RateLimited):
        store.join(code, "192.0.2.20", sid(11))  # the right code too: refused before it is looked at
    if make_store.kind == "memory":  # (its own clock: to the boundary exactly)
        make_store.wait(0.5)
        with pytest.raises(RateLimited) as refused:
            store.join(code, "192.0.2.20", sid(11))  # 2.0 s after the failures: the window's last instant
        assert refused.value.retry_after == 0
        make_store.wait(0.001)
    else:
        make_store.wait(0.6)
    assert store.join(code, "192.0.2.20", sid(11)).students == 1


def test_ipv6_clients_count_per_64(make_store):
    """Every address of one /64 (one household, one device) is one client, as for the training queue."""
    from serving.identity import client_address

    store = make_store()
    for n in range(store.max_failed_joins):
        with pytest.raises(NotFound):
            store.join("222222", client_address(f"2001:db8:1:2::{n + 1:x}"), sid(n))
    with pytest.raises(RateLimited):
        store.join("222222", client_address("2001:db8:1:2:ffff::9"), sid(20))  # same /64
    with pytest.raises(NotFound):
        store.join("222222", client_address("2001:db8:1:3::1"), sid(21))  # the next /64: another client


def test_one_address_cannot_fill_a_class_with_made_up_students(make_store):
    store = make_store(students_per_client=3)
    code, _ = store.create({})
    for n in range(3):
        store.join(code, "198.51.100.7", sid(n))  # cookieless sessions: a new student id each
    with pytest.raises(ClassFull, match="GLASS_STUDENTS_PER_ADDRESS"):
        store.join(code, "198.51.100.7", sid(3))
    store.join(code, "198.51.100.7", sid(1))  # a student already in may rejoin
    assert store.join(code, "198.51.100.8", sid(4)).students == 4  # another address: in


def test_creating_classes_is_limited_per_client_and_ended_classes_free_their_place(make_store):
    store = make_store(classes_per_client=2, class_starts_per_minute=100, max_classes=3)
    a, a_secret = store.create({}, "192.0.2.1")
    store.create({}, "192.0.2.1")
    with pytest.raises(ClassStoreError, match="already runs 2 classes"):
        store.create({}, "192.0.2.1")
    store.end(a, a_secret)
    store.create({}, "192.0.2.1")  # an ended class frees its client's place at once
    store.create({}, "192.0.2.2")  # the server's third live class
    with pytest.raises(ClassStoreError, match="Too many classes on this server"):
        store.create({}, "192.0.2.3")
    assert store.snapshot(a).ended  # (its marker does not count)


def test_starting_classes_is_rate_limited_per_client(make_store):
    store = make_store(classes_per_client=100, class_starts_per_minute=3)
    for _ in range(3):
        store.create({}, "192.0.2.30")
    with pytest.raises(RateLimited) as refused:
        store.create({}, "192.0.2.30")
    assert 0 < refused.value.retry_after <= 60
    store.create({}, "192.0.2.31")  # another address is not affected


def test_a_browser_runs_one_class_starting_another_ends_the_last(make_store):
    store = make_store()
    first, first_secret = store.create(STATE, "192.0.2.40", owner="browser-1")
    store.join(first, "192.0.2.41", sid(1))
    second, _ = store.create(STATE, "192.0.2.40", owner="browser-1")
    assert store.snapshot(first).ended and not store.snapshot(second).ended
    with pytest.raises(ClassEnded):
        store.set_state(first, first_secret, STATE)
    third, _ = store.create(STATE, "192.0.2.40", owner="browser-2")  # another browser's class is its own
    assert not store.snapshot(second).ended and not store.snapshot(third).ended


def test_a_class_counts_present_students_and_the_absent_leave_after_the_grace(make_store):
    store = make_store(presence_seconds=1.0, max_students=3)
    code, secret = store.create({})
    for n in range(3):
        store.join(code, "10.0.0.1", sid(n))
    assert store.snapshot(code).students == 3
    with pytest.raises(ClassFull):
        store.join(code, "10.0.0.2", sid(3))
    make_store.wait(0.6)  # student 0 keeps a page of the class open (its process's hub says so every few seconds)
    store.mark_connected(code, "app-1", [sid(0)], 30)
    before = store.counters(code).tally
    make_store.wait(0.6)  # (Redis: presence's real-time test)
    store.mark_connected(code, "app-1", [sid(0)], 30)  # 1 and 2 were last seen 1.2 s ago: the teacher's count moves
    assert store.counters(code).tally > before
    assert store.snapshot(code).students == 1
    assert store.join(code, "10.0.0.2", sid(3)).students == 2  # their places are free
    assert store.join(code, "10.0.0.1", sid(1)).students == 3  # one comes back: present again, as themselves
    with pytest.raises(ClassFull):
        store.join(code, "10.0.0.2", sid(4))
    store.ask(code, secret, *Q)
    store.mark_connected(code, "app-1", ["not-a-member-0"], 30)  # a page of someone never admitted: not counted
    assert store.snapshot(code).students == 3


def test_a_script_without_cookies_cannot_pose_as_a_class(make_store):
    """A cookieless script gets a new student id per session: one address adds at most students_per_client, each
    votes once, and once its sessions are gone they leave the count and a real student gets in."""
    store = make_store(presence_seconds=1.0, max_students=5, students_per_client=5)
    code, secret = store.create({})
    qid = store.ask(code, secret, *Q)
    fakes = [f"fake-{n:04d}-{uuid.uuid4().hex[:6]}" for n in range(8)]
    joined = 0
    for f in fakes:
        try:
            store.join(code, "203.0.113.5", f)
            joined += 1
        except ClassFull:
            pass
        for option in range(3):
            with contextlib.suppress(NotFound):
                store.answer(code, f, qid, option)
    assert joined == 5 and store.snapshot(code).students == 5
    assert sum(store.snapshot(code).counts) == 5  # one vote each, changed twice: never more than its students
    with pytest.raises(ClassFull, match="This class is full"):
        store.join(code, "198.51.100.20", sid(1))
    make_store.wait(1.1)  # the script's sessions are gone (no page of the class open anywhere)
    assert store.snapshot(code).students == 0
    assert store.join(code, "198.51.100.20", sid(1)).students == 1
    with pytest.raises(ClassFull, match="GLASS_STUDENTS_PER_ADDRESS"):  # the script cannot come back for more
        store.join(code, "203.0.113.5", fakes[-1])


def test_class_full(make_store):
    store = make_store(max_students=3)
    code, _ = store.create({})
    for n in range(3):
        store.join(code, "10.0.0.1", sid(n))
    with pytest.raises(ClassFull):
        store.join(code, "10.0.0.1", sid(3))
    store.join(code, "10.0.0.1", sid(1))  # a member may rejoin


def test_codes_are_distinct_and_unambiguous(make_store):
    store = make_store()
    codes = {store.create({})[0] for _ in range(50)}
    assert len(codes) == 50
    assert all(len(c) == 6 and not set(c) & set("01OIL") for c in codes)
    assert len(CODE_ALPHABET) ** 6 > 800_000_000


# -- input is data, validated -----------------------------------------------------------------------------
BAD_STATES = [
    {"sentence": "<script>alert(1)</script>"},
    {"sentence": "<img src=x onerror=alert(1)>"},
    {"sentence": "x" * 501},
    {"sentence": "a\x00b"},
    {"sentence": "line\nbreak"},
    {"sentence": "\u202egnitirw"},  # a bidi override
    {"sentence": 42},
    {"unknown": 1},
    {"__proto__": {}},
    {"model": "mine"},
    {"model": "<b>"},
    {"iv_scale": 1},
    {"iv_scale": "false"},
    {"heads_off": ["<b>bold</b>"]},
    {"heads_off": "enc.0.self_attn:2"},
    {"heads_off": ["enc.0.self_attn:2"] * 65},
    {"heads_off": ["enc.0.cross_attn:1"]},
    {"page": "../../etc/passwd"},
    {"page": "Overview"},
    {"lesson": "x" * 65},
    {"step": 10**9},
    {"step": True},
    {"step": 1.5},
    ["page", "overview"],
    "page=overview",
]


@pytest.mark.parametrize("bad", BAD_STATES, ids=[repr(b)[:40] for b in BAD_STATES])
def test_bad_state_rejected(make_store, bad):
    store = make_store()
    with pytest.raises(InvalidInput):
        store.create(bad)
    code, secret = store.create(STATE)
    with pytest.raises(InvalidInput):
        store.set_state(code, secret, bad)
    assert store.snapshot(code).state == STATE and store.snapshot(code).version == 1


BAD_QUESTIONS = [
    ("<b>Which?</b>", ["a", "b"], 0),
    ("q" * 501, ["a", "b"], 0),
    ("", ["a", "b"], 0),
    ("Which?", ["a"], 0),
    ("Which?", ["a", "b", "c", "d", "e", "f", "g"], 0),
    ("Which?", ["a", "a"], 0),
    ("Which?", ["a", "<i>b</i>"], 0),
    ("Which?", ["a", "b" * 81], 0),
    ("Which?", ["a", ""], 0),
    ("Which?", ["a", 2], 0),
    ("Which?", "ab", 0),
    ("Which?", ["a", "b"], 2),
    ("Which?", ["a", "b"], -1),
    ("Which?", ["a", "b"], True),
    ("Which?", ["a", "b"], None),
]


@pytest.mark.parametrize("bad", BAD_QUESTIONS, ids=[repr(b)[:40] for b in BAD_QUESTIONS])
def test_bad_question_rejected(make_store, bad):
    store = make_store()
    code, secret = store.create({})
    with pytest.raises(InvalidInput):
        store.ask(code, secret, *bad)
    assert store.snapshot(code).question is None


def test_bad_student_input_rejected(make_store):
    store = make_store()
    code, secret = store.create({})
    for bad_id in ["<script>", "short", "x" * 65, "a b c d e f", 12345678, None]:
        with pytest.raises(InvalidInput):
            store.join(code, "10.0.0.1", bad_id)
    for bad_client in ["", "x" * 257, None]:
        with pytest.raises(InvalidInput):
            store.join(code, bad_client, sid(1))
    store.join(code, "10.0.0.1", sid(1))
    qid = store.ask(code, secret, *Q)
    for option in [-1, 6, 10**12, "1", 1.0, True, None]:
        with pytest.raises(InvalidInput):
            store.answer(code, sid(1), qid, option)
    for bad_qid in [True, "1", None, 1.0]:
        with pytest.raises(InvalidInput):
            store.answer(code, sid(1), bad_qid, 0)
    assert store.snapshot(code).counts == (0, 0, 0)


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
