"""classroom/ (the class store): what it lets in. Students joining (the failed-join rate limit, the teacher's join
link, IPv6 clients, students per address, presence and the grace before the absent leave, a full class), classes
starting (per client, per minute, one per browser, the codes), and every input (a state, a question, a student's
id, address and answer) validated as data. Every test runs on both back-ends, the in-process memory store and Redis
(a real redis-server on 127.0.0.1 and a free port, started here: tests/services.py).

Following the teacher, the teacher's rights, a class's end, the counters and several processes are in
tests/test_class_store.py."""

from __future__ import annotations

import contextlib
import uuid

import pytest

import classroom
from tests.store_util import STATE, Q, sid


# -- joining --------------------------------------------------------------------------------------------
def test_join_rate_limit(make_store):
    store = make_store(join_window_seconds=1.5)
    code, _ = store.create(STATE)
    for _ in range(3):
        store.join(code, "10.0.0.1", sid(1))  # successful joins do not count
    wrong = [c for c in ("222222", "333333", "444444") if c != code]
    for n in range(10):
        with pytest.raises(classroom.NotFound):
            store.join(["<script>", wrong[0], wrong[1], "nope"][n % 4], "10.0.0.66", sid(66))
    with pytest.raises(classroom.RateLimited) as refused:
        store.join(code, "10.0.0.66", sid(66))  # refused before the code is looked at: learns nothing
    assert 0 < refused.value.retry_after <= 1.5
    with pytest.raises(classroom.RateLimited):
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
        with pytest.raises(classroom.NotFound):
            store.join(wrong, "192.0.2.10", sid(1))
    with pytest.raises(classroom.RateLimited):
        store.join(code, "192.0.2.10", sid(2))  # a typed code (or a bare link) is a guess: refused
    with pytest.raises(classroom.RateLimited):
        store.join(code, "192.0.2.10", sid(2), token="0" * 20)  # a made-up token is no link
    assert store.join(code, "192.0.2.10", sid(2), token=token).students == 1  # the link: in
    with pytest.raises(classroom.RateLimited):
        store.join(wrong, "192.0.2.10", sid(3), token=token)  # another class's code with this token: still a guess
    with pytest.raises(classroom.Forbidden):
        store.join_token(code, "not the secret")


def test_exactly_the_limit_of_failed_joins_per_window(make_store):
    """10 failed joins a minute means 10, in any minute: the 11th is refused, right up to the window's end, and
    the address is let in after it (Redis: the failed-join window's real-time test)."""
    store = make_store(join_window_seconds=2.0)
    code, _ = store.create(STATE)
    wrong = next(c for c in ("222222", "333333") if c != code)
    for n in range(10):
        with pytest.raises(classroom.NotFound):
            store.join(wrong, "192.0.2.20", sid(n))
    make_store.wait(1.5)
    with pytest.raises(classroom.RateLimited):
        store.join(code, "192.0.2.20", sid(11))  # the right code too: refused before it is looked at
    if make_store.kind == "memory":  # (its own clock: to the boundary exactly)
        make_store.wait(0.5)
        with pytest.raises(classroom.RateLimited) as refused:
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
        with pytest.raises(classroom.NotFound):
            store.join("222222", client_address(f"2001:db8:1:2::{n + 1:x}"), sid(n))
    with pytest.raises(classroom.RateLimited):
        store.join("222222", client_address("2001:db8:1:2:ffff::9"), sid(20))  # same /64
    with pytest.raises(classroom.NotFound):
        store.join("222222", client_address("2001:db8:1:3::1"), sid(21))  # the next /64: another client


def test_one_address_cannot_fill_a_class_with_made_up_students(make_store):
    store = make_store(students_per_client=3)
    code, _ = store.create({})
    for n in range(3):
        store.join(code, "198.51.100.7", sid(n))  # cookieless sessions: a new student id each
    with pytest.raises(classroom.ClassFull, match="GLASS_STUDENTS_PER_ADDRESS"):
        store.join(code, "198.51.100.7", sid(3))
    store.join(code, "198.51.100.7", sid(1))  # a student already in may rejoin
    assert store.join(code, "198.51.100.8", sid(4)).students == 4  # another address: in


def test_creating_classes_is_limited_per_client_and_ended_classes_free_their_place(make_store):
    store = make_store(classes_per_client=2, class_starts_per_minute=100, max_classes=3)
    a, a_secret = store.create({}, "192.0.2.1")
    store.create({}, "192.0.2.1")
    with pytest.raises(classroom.ClassStoreError, match="already runs 2 classes"):
        store.create({}, "192.0.2.1")
    store.end(a, a_secret)
    store.create({}, "192.0.2.1")  # an ended class frees its client's place at once
    store.create({}, "192.0.2.2")  # the server's third live class
    with pytest.raises(classroom.ClassStoreError, match="Too many classes on this server"):
        store.create({}, "192.0.2.3")
    assert store.snapshot(a).ended  # (its marker does not count)


def test_starting_classes_is_rate_limited_per_client(make_store):
    store = make_store(classes_per_client=100, class_starts_per_minute=3)
    for _ in range(3):
        store.create({}, "192.0.2.30")
    with pytest.raises(classroom.RateLimited) as refused:
        store.create({}, "192.0.2.30")
    assert 0 < refused.value.retry_after <= 60
    store.create({}, "192.0.2.31")  # another address is not affected


def test_a_browser_runs_one_class_starting_another_ends_the_last(make_store):
    store = make_store()
    first, first_secret = store.create(STATE, "192.0.2.40", owner="browser-1")
    store.join(first, "192.0.2.41", sid(1))
    second, _ = store.create(STATE, "192.0.2.40", owner="browser-1")
    assert store.snapshot(first).ended and not store.snapshot(second).ended
    with pytest.raises(classroom.ClassEnded):
        store.set_state(first, first_secret, STATE)
    third, _ = store.create(STATE, "192.0.2.40", owner="browser-2")  # another browser's class is its own
    assert not store.snapshot(second).ended and not store.snapshot(third).ended


def test_a_class_counts_present_students_and_the_absent_leave_after_the_grace(make_store):
    store = make_store(presence_seconds=1.0, max_students=3)
    code, secret = store.create({})
    for n in range(3):
        store.join(code, "10.0.0.1", sid(n))
    assert store.snapshot(code).students == 3
    with pytest.raises(classroom.ClassFull):
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
    with pytest.raises(classroom.ClassFull):
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
        except classroom.ClassFull:
            pass
        for option in range(3):
            with contextlib.suppress(classroom.NotFound):
                store.answer(code, f, qid, option)
    assert joined == 5 and store.snapshot(code).students == 5
    assert sum(store.snapshot(code).counts) == 5  # one vote each, changed twice: never more than its students
    with pytest.raises(classroom.ClassFull, match="This class is full"):
        store.join(code, "198.51.100.20", sid(1))
    make_store.wait(1.1)  # the script's sessions are gone (no page of the class open anywhere)
    assert store.snapshot(code).students == 0
    assert store.join(code, "198.51.100.20", sid(1)).students == 1
    with pytest.raises(classroom.ClassFull, match="GLASS_STUDENTS_PER_ADDRESS"):  # the script cannot come back for more
        store.join(code, "203.0.113.5", fakes[-1])


def test_class_full(make_store):
    store = make_store(max_students=3)
    code, _ = store.create({})
    for n in range(3):
        store.join(code, "10.0.0.1", sid(n))
    with pytest.raises(classroom.ClassFull):
        store.join(code, "10.0.0.1", sid(3))
    store.join(code, "10.0.0.1", sid(1))  # a member may rejoin


def test_codes_are_distinct_and_unambiguous(make_store):
    store = make_store()
    codes = {store.create({})[0] for _ in range(50)}
    assert len(codes) == 50
    assert all(len(c) == 6 and not set(c) & set("01OIL") for c in codes)
    assert len(classroom.CODE_ALPHABET) ** 6 > 800_000_000


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
    with pytest.raises(classroom.InvalidInput):
        store.create(bad)
    code, secret = store.create(STATE)
    with pytest.raises(classroom.InvalidInput):
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
    with pytest.raises(classroom.InvalidInput):
        store.ask(code, secret, *bad)
    assert store.snapshot(code).question is None


def test_bad_student_input_rejected(make_store):
    store = make_store()
    code, secret = store.create({})
    for bad_id in ["<script>", "short", "x" * 65, "a b c d e f", 12345678, None]:
        with pytest.raises(classroom.InvalidInput):
            store.join(code, "10.0.0.1", bad_id)
    for bad_client in ["", "x" * 257, None]:
        with pytest.raises(classroom.InvalidInput):
            store.join(code, bad_client, sid(1))
    store.join(code, "10.0.0.1", sid(1))
    qid = store.ask(code, secret, *Q)
    for option in [-1, 6, 10**12, "1", 1.0, True, None]:
        with pytest.raises(classroom.InvalidInput):
            store.answer(code, sid(1), qid, option)
    for bad_qid in [True, "1", None, 1.0]:
        with pytest.raises(classroom.InvalidInput):
            store.answer(code, sid(1), bad_qid, 0)
    assert store.snapshot(code).counts == (0, 0, 0)
