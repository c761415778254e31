"""The class's roster in the store (classroom/roster.py): students numbered in the order they joined, each one's
status as their session reports it, who voted, and teachers' devices remembered with a wrapped secret; on both
back-ends (the memory store and a real redis-server started by the tests)."""

from __future__ import annotations

import json

import pytest

from classroom import Forbidden, InvalidInput, NotFound
from classroom.roster import check_status, device_key, unwrap, wrap

STATE = {"page": "lesson", "sentence": "thinking machines", "model": "base", "heads_off": [], "step": 3}


def test_students_are_numbered_in_the_order_they_joined_and_keep_their_number(make_store):
    store = make_store()
    code, secret = store.create(STATE)
    for sid in ("student-cccc", "student-aaaa", "student-bbbb"):
        store.join(code, "10.0.0.1", sid)
    store.join(code, "10.0.0.1", "student-aaaa")  # again (a reload): the same number
    assert [store.number(code, s) for s in ("student-cccc", "student-aaaa", "student-bbbb")] == [1, 2, 3]
    assert store.number(code, "student-zzzz") is None
    assert [r["number"] for r in store.roster(code, secret)] == [1, 2, 3]


def test_a_change_of_mode_moves_the_tally_a_change_of_page_does_not(make_store):
    store = make_store()
    code, secret = store.create(STATE)
    store.join(code, "10.0.0.1", "student-aaaa")
    t0 = store.counters(code).tally
    store.report(code, "student-aaaa", {"mode": "following", "page": "lesson", "step": 3, "stop": 0})
    t1 = store.counters(code).tally
    assert t1 == t0 + 1  # the first report: the teacher's counts redraw
    store.report(code, "student-aaaa", {"mode": "following", "page": "lesson", "step": 4, "stop": 1})
    assert store.counters(code).tally == t1  # a follower moved with the class: nothing to redraw at once
    store.report(code, "student-aaaa", {"mode": "left", "page": "lesson", "step": 4, "changed": ["sentence"]})
    assert store.counters(code).tally == t1 + 1  # a student who left: visible at once
    (row,) = store.roster(code, secret)
    assert row["status"] == {"mode": "left", "page": "lesson", "step": 4, "changed": ["sentence"]}
    assert row["present"] is True and row["voted"] == (False, False)


def test_the_roster_says_who_voted_in_each_round(make_store):
    store = make_store()
    code, secret = store.create(STATE)
    for sid in ("student-aaaa", "student-bbbb"):
        store.join(code, "10.0.0.1", sid)
    qid = store.ask_peer(code, secret, "Which?", ["a", "b"], 0)
    store.vote(code, "student-bbbb", qid, 1)
    assert [r["voted"] for r in store.roster(code, secret)] == [(False, False), (True, False)]
    store.lock_vote(code, secret)
    store.revote(code, secret)
    store.vote(code, "student-aaaa", qid, 0)
    assert [r["voted"] for r in store.roster(code, secret)] == [(False, True), (True, False)]
    store.ask_peer(code, secret, "Another?", ["a", "b"], 0)  # a new question: nobody voted in it yet
    assert [r["voted"] for r in store.roster(code, secret)] == [(False, False), (False, False)]


def test_only_the_teacher_reads_the_roster_and_only_members_report(make_store):
    store = make_store()
    code, secret = store.create(STATE)
    store.join(code, "10.0.0.1", "student-aaaa")
    with pytest.raises(Forbidden):
        store.roster(code, "not-the-secret")
    with pytest.raises(NotFound):
        store.report(code, "student-zzzz", {"mode": "following"})
    roster = store.roster(code, secret)
    assert "student-aaaa" not in json.dumps(roster)  # numbers, never ids


@pytest.mark.parametrize(
    "bad",
    [
        None,
        {},
        {"mode": "asleep"},
        {"mode": "following", "page": "<script>"},
        {"mode": "following", "step": -1},
        {"mode": "following", "step": True},
        {"mode": "following", "stop": 1000},
        {"mode": "left", "changed": "sentence"},
        {"mode": "left", "changed": ["x"] * 9},
        {"mode": "following", "evil": 1},
        {"mode": "left", "changed": ["<b>"]},
    ],
)
def test_a_status_out_of_shape_is_refused(bad):
    with pytest.raises(InvalidInput):
        check_status(bad)


def test_the_roster_goes_with_its_class(make_store):
    store = make_store()
    code, secret = store.create(STATE)
    store.join(code, "10.0.0.1", "student-aaaa")
    store.report(code, "student-aaaa", {"mode": "chose", "page": "overview"})
    store.end(code, secret)
    with pytest.raises(Exception):  # noqa: B017 - ended: ClassEnded (the record is gone)
        store.report(code, "student-aaaa", {"mode": "chose"})
    if make_store.kind == "redis":
        assert not store._r.exists(f"{make_store.prefix}:{code}:status")


def test_a_teachers_device_is_remembered_with_a_secret_only_its_browser_unwraps(make_store):
    store = make_store()
    code, secret = store.create(STATE)
    store.remember_device(code, secret, "browser-of-the-teacher", "lead")
    assert store.device("browser-of-the-teacher") == (code, "lead", secret)
    assert store.device("another-browser") is None
    with pytest.raises(Forbidden):  # only the teacher names devices
        store.remember_device(code, "wrong", "browser-x", "lead")
    with pytest.raises(InvalidInput):
        store.remember_device(code, secret, "browser-x", "owner")
    if make_store.kind == "redis":  # what the store holds: neither the browser's id nor the secret
        raw = store._r.get(f"{make_store.prefix}:device:{device_key('browser-of-the-teacher')}")
        assert secret not in raw and "browser-of-the-teacher" not in raw
    store.forget_device("browser-of-the-teacher")
    assert store.device("browser-of-the-teacher") is None


def test_a_wrapped_secret_needs_the_browser_and_the_class():
    w = wrap("s3cr3t-AbC_123", "browser-1", "ABCDEF")
    assert unwrap(w, "browser-1", "ABCDEF") == "s3cr3t-AbC_123"
    assert unwrap(w, "browser-2", "ABCDEF") != "s3cr3t-AbC_123"
    assert unwrap(w, "browser-1", "ABCDEG") != "s3cr3t-AbC_123"
    assert unwrap("not base64!", "browser-1", "ABCDEF") is None
