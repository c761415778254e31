"""Peer instruction in the class store (classroom/votes.py, classroom/redis_votes.py), on both back-ends: a
vote, its lock, the discussion, the revote and the reveal; click answers on a grid; what students may see; the
rate limits; forged teacher moves; a student on another process keeps their votes; the CSV."""

from __future__ import annotations

import csv
import io
import uuid

import pytest

from classroom import Forbidden, InvalidInput, QuestionClosed, RateLimited, RedisClassStore
from classroom.votes import REVEAL_ABOVE, REVISIT_BELOW, results_csv, share_correct, suggest

Q = ("The cat is big: which word does “big” attend to most?", ["the", "cat", "is", "big"], 1)


def sid(n: int) -> str:
    return f"student-{n:04d}"


def a_class(store, n: int = 10):
    code, secret = store.create({"sentence": "the cat is big"})
    for i in range(n):
        store.join(code, f"10.0.{i // 200}.{i % 200}", sid(i))
    return code, secret


def test_a_revote_cycle_keeps_both_rounds_and_hides_them_from_students(make_store):
    store = make_store()
    code, secret = a_class(store)
    qid = store.ask_peer(code, secret, *Q, kind="attention")
    poll = store.votes(code, student_id=sid(0))
    assert poll.phase == "vote" and poll.answer is None and poll.first is None  # nothing given away
    for i, choice in enumerate([1, 1, 1, 0, 0, 3, 3, 2]):  # 3 of 8 right
        store.vote(code, sid(i), qid, choice)
    store.vote(code, sid(7), qid, 1)  # changed their mind: 4 of 8
    store.vote(code, sid(7), qid, 1)  # the same again changes nothing
    teacher = store.votes(code, secret=secret)
    assert teacher.first == {0: 2, 1: 4, 3: 2} and teacher.voted == (8, 0) and teacher.answer == 1
    assert share_correct(teacher.first, teacher.correct) == 0.5
    assert suggest(0.5)[0] == "discuss"
    mine = store.votes(code, student_id=sid(7))
    assert mine.my_first == 1 and mine.first is None and mine.second is None and mine.voted == (8, 0)
    with pytest.raises(QuestionClosed):
        store.revote(code, secret)  # the first vote must be locked first
    store.lock_vote(code, secret)
    with pytest.raises(QuestionClosed):
        store.vote(code, sid(8), qid, 1)  # locked: no more votes
    store.discuss(code, secret)
    assert store.votes(code, student_id=sid(0)).phase == "discuss"
    store.revote(code, secret)
    assert store.votes(code, student_id=sid(0)).phase == "revote"
    for i, choice in enumerate([1, 1, 1, 1, 1, 1, 0, 1, 1]):  # 8 of 9 right, one who had not voted
        store.vote(code, sid(i), qid, choice)
    teacher = store.votes(code, secret=secret)
    assert teacher.first == {0: 2, 1: 4, 3: 2} and teacher.second == {0: 1, 1: 8} and teacher.voted == (8, 9)
    student = store.votes(code, student_id=sid(5))
    assert (student.my_first, student.my_second, student.second) == (3, 1, None)
    with pytest.raises(QuestionClosed):
        store.revote(code, secret)  # twice is the cycle
    store.reveal(code, secret)
    with pytest.raises(QuestionClosed):
        store.vote(code, sid(9), qid, 1)
    after = store.votes(code, student_id=sid(9))
    assert after.phase == "revealed" and after.answer == 1 and after.second == {0: 1, 1: 8}  # shown now
    # the CSV: this question, both rounds, no student
    store.ask_peer(code, secret, "Which head?", ["0", "1"], 0)
    rows = list(csv.DictReader(io.StringIO(results_csv(store.results(code, secret)))))
    assert [r["question"] for r in rows] == [str(qid), str(qid + 1)]
    assert rows[0]["round 1 votes"] == "8" and rows[0]["round 1 share correct"] == "0.500"
    assert rows[0]["round 2 votes"] == "9" and rows[0]["round 2 share correct"] == "0.889"
    # every option with its count, zeros included (nobody chose "is")
    assert rows[0]["round 1 distribution"] == "the = 2; cat = 4; is = 0; big = 2" and rows[0]["model's answer"] == "cat"
    assert rows[0]["students present"] == "10" and rows[0]["asked at (UTC)"].startswith("20")
    assert rows[1]["round 1 votes"] == "0" and rows[1]["round 2 votes"] == ""
    assert not any("student" in v for r in rows for v in r.values())
    store.end(code, secret)
    if isinstance(store, RedisClassStore):
        assert store._r.keys(f"{store._p}:{code}*") == [f"{store._p}:{code}"]  # votes and results deleted too


def test_a_class_a_teacher_ends_by_starting_another_takes_its_votes_along(make_store):
    """One class per teacher's browser: starting a new one ends the last, and its polls and results go with it,
    as when the teacher ends it (before: on Redis they stayed until their two-hour expiry)."""
    store = make_store()
    first, secret = store.create({"sentence": "the cat is big"}, owner="browser-1")
    store.join(first, "10.0.0.1", sid(0))
    qid = store.ask_peer(first, secret, *Q, kind="attention")
    store.vote(first, sid(0), qid, 1)
    assert store.results(first, secret)
    second, _ = store.create({"sentence": "the cat is big"}, owner="browser-1")
    assert store.snapshot(first).ended and not store.snapshot(second).ended
    assert store._poll_results(first) == [] and store._poll_results(second) == []
    if isinstance(store, RedisClassStore):
        assert store._r.keys(f"{store._p}:{first}*") == [f"{store._p}:{first}"]  # only its "ended" marker
    other, _ = store.create({"sentence": "the cat is big"}, owner="browser-2")  # another teacher ends nothing
    assert not store.snapshot(second).ended and not store.snapshot(other).ended


def test_a_click_answer_counts_cells_of_the_grid(make_store):
    store = make_store()
    code, secret = a_class(store, 4)
    grid = {"rows": ["the", "cat", "is", "big"], "cols": ["the", "cat", "is", "big", "EOS"], "answer": 3 * 5 + 1}
    qid = store.ask_peer(code, secret, *Q, kind="attention", grid=grid)
    student = store.votes(code, student_id=sid(0))
    assert student.grid.rows == tuple(grid["rows"]) and student.grid.answer == -1 and student.correct is None
    store.vote(code, sid(0), qid, 16)
    store.vote(code, sid(1), qid, 16)
    store.vote(code, sid(2), qid, 19)
    with pytest.raises(InvalidInput):
        store.vote(code, sid(3), qid, 20)  # 4 x 5 cells
    poll = store.votes(code, secret=secret)
    assert poll.first == {16: 2, 19: 1} and poll.correct == 16 and poll.grid.cell(19) == (3, 4)
    assert share_correct(poll.first, poll.correct) == pytest.approx(2 / 3)
    with pytest.raises(InvalidInput):
        store.ask_peer(code, secret, *Q, grid={**grid, "answer": 20})
    with pytest.raises(InvalidInput):
        store.ask_peer(code, secret, *Q, grid={**grid, "rows": ["<b>"]})


def test_votes_are_rate_limited_per_student_and_per_address(make_store, monkeypatch):
    monkeypatch.setenv("GLASS_VOTES_PER_STUDENT", "5")
    monkeypatch.setenv("GLASS_VOTES_PER_ADDRESS", "8")
    store = make_store()
    code, secret = a_class(store, 3)
    qid = store.ask_peer(code, secret, *Q)
    refused = 0
    for k in range(12):  # one student flips between two answers
        try:
            store.vote(code, sid(0), qid, k % 2, client_id="10.1.1.1")
        except RateLimited as e:
            refused += 1
            assert 0 < e.retry_after <= 10
    assert refused >= 2  # 7 in one 10 s window; at least 2 if the window turned over meanwhile (6 + 6)
    spread = 0
    for k in range(10):  # two more students behind the same address
        try:
            store.vote(code, sid(1 + k % 2), qid, 1, client_id="10.1.1.1")
        except RateLimited:
            spread += 1
    assert spread >= 1  # the address's limit holds whoever sends
    assert sum(store.votes(code, secret=secret).first.values()) <= 3


def test_a_forged_teacher_move_does_nothing(make_store):
    store = make_store()
    code, secret = a_class(store, 2)
    qid = store.ask_peer(code, secret, *Q)
    store.vote(code, sid(0), qid, 1)
    for op in (store.lock_vote, store.discuss, store.revote):
        with pytest.raises(Forbidden):
            op(code, "forged-secret-forged-secret")
    with pytest.raises(Forbidden):
        store.votes(code, secret="forged-secret-forged-secret")
    with pytest.raises(Forbidden):
        store.results(code, "forged-secret-forged-secret")
    with pytest.raises(Forbidden):
        store.ask_peer(code, "forged-secret-forged-secret", *Q)
    assert store.votes(code, secret=secret).phase == "vote" and store.votes(code, secret=secret).first == {1: 1}


def test_a_student_on_another_process_keeps_their_revote(redis_url):
    """Two stores on one Redis are two app processes: a student's votes live in Redis, under their id."""
    prefix = f"test:{uuid.uuid4().hex[:8]}"
    one, two = (RedisClassStore(redis_url, prefix=prefix, classes_per_client=100) for _ in range(2))
    try:
        code, secret = a_class(one, 2)
        qid = one.ask_peer(code, secret, *Q)
        one.vote(code, sid(0), qid, 2)
        one.lock_vote(code, secret)
        one.revote(code, secret)
        two.join(code, "10.0.0.0", sid(0))  # rejoins on the other process: the same student
        mine = two.votes(code, student_id=sid(0))
        assert mine.my_first == 2 and mine.my_second is None and mine.phase == "revote"
        two.vote(code, sid(0), qid, 1)
        assert one.votes(code, secret=secret).second == {1: 1} and one.snapshot(code).students == 2
    finally:
        one.close()
        two.close()


@pytest.mark.parametrize("share", [0.0, 0.2, 0.349, 0.35, 0.5, 0.7, 0.71, 1.0])
def test_the_suggestion_follows_the_written_rule(share):
    move, why = suggest(share)
    assert move == ("revisit" if share < REVISIT_BELOW else "discuss" if share <= REVEAL_ABOVE else "reveal")
    assert f"{share:.0%}" in why


def a_result(**fields) -> list[dict]:
    """One question's results as the store hands them to `results_csv` (one round of votes), but for `fields`."""
    question = {"qid": 1, "kind": "question", "text": "?", "options": ["a", "b"], "answer": 0, "grid": None}
    return [{**question, "first": {}, "second": None, **fields}]


def test_the_csv_cannot_carry_a_spreadsheet_formula():
    rows = a_result(text='=HYPERLINK("http://x")', options=["+1", "@a"], first={"1": 2})
    header, line = list(csv.reader(io.StringIO(results_csv(rows))))
    cell = dict(zip(header, line, strict=True))
    assert cell["text"].startswith("'=") and cell["model's answer"] == "'+1"
    assert cell["round 1 distribution"] == "'+1 = 0; @a = 2" and cell["round 1 share correct"] == "0.000"


def test_a_hostile_poll_record_in_redis_is_a_message(redis_url):
    from classroom import StoreUnavailable

    store = RedisClassStore(redis_url, prefix=f"test:{uuid.uuid4().hex[:8]}")
    try:
        code, secret = a_class(store, 1)
        store.ask_peer(code, secret, *Q)
        key = f"{store._p}:{code}:poll"
        good = store._r.hget(key, "record")
        for bad in (
            "not json",
            '{"text": "<script>", "options": ["a", "b"], "answer": 0, "kind": "q", "grid": null}',
            '{"text": "q", "options": ["a", "b"], "answer": 5, "kind": "q", "grid": null}',
        ):
            store._r.hset(key, "record", bad)
            with pytest.raises(StoreUnavailable, match="could not be read"):
                store.votes(code, secret=secret)
        store._r.hset(key, "record", good)
        assert store.votes(code, secret=secret).options == tuple(Q[1])
    finally:
        store.close()


def test_mazur_the_first_votes_shown_to_the_class_without_the_answer(make_store):
    """Before the discussion the teacher may show the class how the first vote spread (Mazur's practice): students
    then see the distribution, never which option is right, until the reveal."""
    store = make_store()
    code, secret = a_class(store, 4)
    qid = store.ask_peer(code, secret, *Q, detail="Attention weights of “big”: cat 0.61, big 0.20, the 0.12, is 0.07.")
    for i, choice in enumerate([1, 1, 0, 3]):
        store.vote(code, sid(i), qid, choice)
    assert store.votes(code, student_id=sid(0)).first is None
    store.lock_vote(code, secret)
    store.show_first_vote(code, secret)
    seen = store.votes(code, student_id=sid(0))
    assert seen.shown and seen.first == {0: 1, 1: 2, 3: 1}
    assert seen.answer is None and seen.correct is None and seen.detail == ""  # the answer stays hidden
    with pytest.raises(Forbidden):
        store.show_first_vote(code, "forged-secret-forged-secret")
    store.reveal(code, secret)
    assert store.votes(code, student_id=sid(0)).detail.startswith("Attention weights of")  # the evidence, at the reveal


def test_close_question_takes_it_off_every_screen_and_keeps_its_results(make_store):
    store = make_store()
    code, secret = a_class(store, 2)
    qid = store.ask_peer(code, secret, *Q, stop=4)
    store.vote(code, sid(0), qid, 1)
    store.reveal(code, secret)
    before = store.counters(code)
    store.close_question(code, secret)
    after = store.counters(code)
    assert after.seq > before.seq and after.q > before.q  # every page hears it
    assert store.snapshot(code, student_id=sid(0)).question is None and store.votes(code, student_id=sid(0)) is None
    (row,) = list(csv.DictReader(io.StringIO(results_csv(store.results(code, secret)))))
    assert row["question"] == str(qid) and row["round 1 votes"] == "1" and row["plan stop"] == "5"
    with pytest.raises(QuestionClosed):
        store.close_question(code, secret)
    with pytest.raises(Forbidden):
        store.close_question(code, "forged-secret-forged-secret")


def test_the_suggestion_after_a_second_vote_comes_from_it():
    from classroom.votes import suggest_after

    assert suggest_after(0.2, None) == suggest(0.2)
    move, why = suggest_after(0.3, 0.9)
    assert move == "reveal" and "90%" in why and "+60 points" in why
    assert suggest_after(0.3, 0.5)[0] == "reveal and explain" and suggest_after(0.1, 0.2)[0] == "revisit"


def test_a_click_questions_csv_names_every_cell_of_its_row():
    grid = {"rows": ["0:the", "1:cat"], "cols": ["0:the", "1:cat"], "answer": 3, "row": 1}
    rows = a_result(kind="click", text="Click", grid=grid, first={"3": 2, "0": 1})
    (row,) = list(csv.DictReader(io.StringIO(results_csv(rows))))
    assert row["round 1 distribution"] == "1:cat → 0:the = 0; 1:cat → 1:cat = 2; other rows = 1"


def test_a_back_end_must_say_every_part_of_the_contract_the_votes_and_the_roster_rely_on():
    """The underscored operations the votes and roster mixins call (`_vote`, `_poll_open`, `_report`, ...) are
    abstract: a back-end that leaves one out cannot be built (before: a NotImplementedError at the first vote)."""
    from classroom.memory import MemoryClassStore
    from classroom.roster import RosterOps
    from classroom.votes import PeerVotes

    needed = {"_vote", "_poll_open", "_poll_move", "_poll_read", "_poll_results", "_close_question", "_end_votes"}
    assert needed <= PeerVotes.__abstractmethods__
    assert {"_report", "_number", "_roster", "_set_device", "_device"} <= RosterOps.__abstractmethods__
    assert {"_code", "_teacher"} <= PeerVotes.__abstractmethods__ & RosterOps.__abstractmethods__  # the store's part
    lacking = type("Lacking", (MemoryClassStore,), {"_vote": PeerVotes._vote})  # the abstract one back
    with pytest.raises(TypeError, match="_vote"):
        lacking()
    assert not MemoryClassStore.__abstractmethods__
