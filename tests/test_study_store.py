"""The study store on both databases (SQLite in a temporary folder, and Debian's PostgreSQL started here on
127.0.0.1): the consent gate, answers checked and recorded once, deletion and retention, hostile input, and a
restart (a killed process, a crashed server) that loses no answer already sent."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

import study.schema
from study import errors, export
from study.database import PostgresDatabase, SqliteDatabase
from study.store import MAX_FAILED, StudyStore
from tests.services import Clock, postgres_server
from tests.threads import at_once

ROOT = Path(__file__).resolve().parents[1]
SETTINGS = {"title": "Week 3", "path": "lesson", "instrument": "ct-1", "retention_days": 30, "delay_days": 7}
NOW = 1_800_000_000.0  # the study store runs on wall-clock time: this is January 2027
BROWSER = "b-0123456789abcdef0123456789abcdef"


def instrument() -> dict:
    forms = {
        f: [
            {
                "id": f"{f}{s:02d}",
                "objective": "row_sum",
                "template": "row_rest",
                "text": "?",
                "options": ["w", "x", "y", "z"],
                "answer": (s + (f == "B")) % 4,
                "explain": "",
                "tags": [None] * 4,
            }
            for s in range(1, 4)
        ]
        for f in "AB"
    }
    forms["A"].append(
        {
            "id": "A04",
            "objective": "transfer",
            "template": "transfer_row",
            "text": "click",
            "options": ["r → a", "r → b", "r → c"],
            "answer": 2,
            "explain": "",
            "tags": [None] * 3,
            "grid": {"rows": ["a", "b", "c"], "cols": ["a", "b", "c"], "row": 0, "answer": 2},
        }
    )
    return {"version": "test", "forms": forms}


@pytest.fixture(scope="module")
def pg():
    with postgres_server() as server:
        yield server


@pytest.fixture(params=["sqlite", "postgres"])
def make(request, tmp_path):
    """make(clock=None) -> a StudyStore on a fresh database of the parameter's kind (two calls: two app processes
    on one database)."""
    made = []
    if request.param == "postgres":
        server = request.getfixturevalue("pg")
        schema = "t" + uuid.uuid4().hex[:10]  # a database of its own per test
        import psycopg

        with psycopg.connect(server.url, autocommit=True) as c:
            c.execute(f"CREATE DATABASE {schema}")
        url = server.url.rsplit("/", 1)[0] + "/" + schema
        build_server = server

    def build(clock=None):
        db = PostgresDatabase(url) if request.param == "postgres" else SqliteDatabase(tmp_path / "studies.sqlite3")
        store = StudyStore(db, clock or Clock(NOW))
        made.append(store)
        return store

    build.kind = request.param
    build.server = build_server if request.param == "postgres" else None
    yield build
    for s in made:
        s.close_db()


def joined(store, browser=BROWSER):
    code, secret = store.create(SETTINGS, instrument())
    actor = store.pseudonym(code, browser)
    return code, secret, actor


def consented(store):
    """A new study and one participant who has consented: (code, secret, actor)."""
    code, secret, actor = joined(store)
    store.consent(code, actor)
    return code, secret, actor


def test_study_consent_gate_records_nothing_before_consent(make):
    store = make()
    code, secret, actor = joined(store)
    for call in (
        lambda: store.answer(code, actor, "A01", 0, 3),
        lambda: store.log(code, actor, "viewed", "page/x"),
        lambda: store.advance(code, actor, "path"),
        lambda: store.rate(code, actor, "sus1", 3, (1, 5, 1)),
    ):
        with pytest.raises(errors.NotConsented):
            call()
    _, people, events = store.records(code, secret)
    assert people == [] and events == []
    p, delete_code = store.consent(code, actor)
    assert p.phase == "pre" and len(delete_code) == 12
    assert store.consent(code, actor)[1] is None  # agreeing again: the same participant, no second code
    _, people, events = store.records(code, secret)
    assert [e["verb"] for e in events] == ["consented"] and len(people) == 1


def test_study_pseudonym_names_nobody_and_differs_between_studies(make):
    store = make()
    code, _, actor = joined(store)
    other, _, actor2 = joined(store)
    assert actor == store.pseudonym(code, BROWSER) != actor2
    assert BROWSER not in actor and actor.startswith("p-") and len(actor) == 34


def test_study_assigns_conditions_and_form_orders_balanced(make):
    store = make()
    code, secret = store.create({**SETTINGS, "factor": "predict"}, instrument())
    for i in range(40):
        store.consent(code, store.pseudonym(code, f"browser-{i:04d}"))
    _, people, _ = store.records(code, secret)
    cells = {}
    for p in people:
        cells[(p["condition"], p["first_form"])] = cells.get((p["condition"], p["first_form"]), 0) + 1
    assert cells == {(c, f): 10 for c in study.schema.CONDITIONS["predict"] for f in "AB"}


def test_item_answers_checked_against_the_frozen_key_and_recorded_once(make):
    store = make()
    code, secret, actor = joined(store)
    p, _ = store.consent(code, actor)
    form = p.first_form
    key = {it["id"]: it["answer"] for it in instrument()["forms"][form]}
    assert store.answer(code, actor, f"{form}01", key[f"{form}01"], 4, "<b>because</b> = sum", 2500) is True
    assert store.answer(code, actor, f"{form}02", (key[f"{form}02"] + 1) % 4, 1) is False
    with pytest.raises(errors.AlreadyRecorded):  # a double click, a replayed message: the first answer counts
        store.answer(code, actor, f"{form}01", (key[f"{form}01"] + 1) % 4, 1)
    other = "B" if form == "A" else "A"
    with pytest.raises(errors.InvalidInput):  # an item of the other form is not this participant's now
        store.answer(code, actor, f"{other}03", 0, 1)
    _, _, events = store.records(code, secret)
    answers = [e for e in events if e["verb"] == "answered"]
    assert [(e["object"], e["result"]["correct"]) for e in answers] == [
        (f"item/{form}01", True),
        (f"item/{form}02", False),
    ]
    assert answers[0]["result"]["reason"] == "<b>because</b> = sum"  # HTML is kept as text (pages draw it escaped)
    assert answers[0]["context"] == {"phase": "pre", "condition": "all", "form": form, "instrument": "test"}


def test_item_hostile_answers_refused_and_nothing_stored(make):
    store = make()
    code, secret, actor = joined(store)
    p, _ = store.consent(code, actor)
    item = f"{p.first_form}01"
    for kwargs in (
        {"reason": "x" * 201},
        {"reason": "two\nlines"},
        {"confidence": 5},
        {"confidence": True},
        {"choice": 9},
        {"choice": -1},
        {"latency_ms": -5},
    ):
        args = {"choice": 0, "confidence": 2, "reason": "", "latency_ms": 10, **kwargs}
        with pytest.raises(errors.InvalidInput):
            store.answer(code, actor, item, args["choice"], args["confidence"], args["reason"], args["latency_ms"])
    forged = "p-" + "0" * 32
    with pytest.raises(errors.NotConsented):  # an id nobody consented as
        store.answer(code, forged, item, 0, 2)
    with pytest.raises(errors.NotFound):
        store.answer("ZZZZZZZZ", actor, item, 0, 2)
    _, _, events = store.records(code, secret)
    assert [e["verb"] for e in events] == ["consented"]


def test_study_answers_after_close_refused(make):
    store = make()
    code, secret, actor = joined(store)
    p, _ = store.consent(code, actor)
    store.close(code, secret)
    with pytest.raises(errors.StudyClosed):
        store.answer(code, actor, f"{p.first_form}01", 0, 2)
    with pytest.raises(errors.StudyClosed):
        store.consent(code, store.pseudonym(code, "another-browser"))
    with pytest.raises(errors.Forbidden):
        store.close(code, "not the key", closed=False)
    store.close(code, secret, closed=False)
    store.answer(code, actor, f"{p.first_form}01", 0, 2)


def test_study_phases_in_order_and_the_delayed_test_after_its_days(make):
    clock = Clock(NOW)
    store = make(clock)
    code, secret, actor = consented(store)
    with pytest.raises(errors.WrongPhase):
        store.advance(code, actor, "post")
    for phase in ("path", "post", "survey"):
        store.advance(code, actor, phase)
    store.rate(code, actor, "tlx_mental", 55, (0, 100, 5))
    with pytest.raises(errors.InvalidInput):
        store.rate(code, actor, "tlx_effort", 52, (0, 100, 5))
    with pytest.raises(errors.AlreadyRecorded):
        store.rate(code, actor, "tlx_mental", 60, (0, 100, 5))
    store.advance(code, actor, "done")
    clock.t += 6 * 86400
    with pytest.raises(errors.WrongPhase):
        store.advance(code, actor, "delayed")
    clock.t += 86400
    p = store.advance(code, actor, "delayed")
    assert p.phase == "delayed" and p.form("delayed") == p.first_form
    with pytest.raises(errors.WrongPhase):  # a second tab pressing the same button: one step only
        store.advance(code, actor, "delayed")


def test_study_typed_sentence_hashed_unless_the_study_keeps_text(make):
    store = make()
    for keep in (False, True):
        code, secret = store.create({**SETTINGS, "keep_text": keep}, instrument())
        actor = store.pseudonym(code, BROWSER)
        store.consent(code, actor)
        store.advance(code, actor, "path")
        store.log(
            code,
            actor,
            "changed",
            "control/sentence",
            {"text": "my cat is called felix"},
            {"page": "lesson", "step": 3},
        )
        e = store.records(code, secret)[2][-1]
        if keep:
            assert e["result"] == {"text": "my cat is called felix"}
        else:
            assert "felix" not in json.dumps(e) and e["result"]["length"] == 22 and len(e["result"]["text_hash"]) == 16
        assert e["context"]["step"] == 3 and e["context"]["phase"] == "path"


def test_study_events_schema_enforced_and_rate_limited(make):
    store = make()
    code, secret, actor = consented(store)
    for verb, obj, result in (
        ("answered", "item/A01", {}),
        ("viewed", "<script>", {}),
        ("viewed", "page/x", {"score": 1}),
        ("voted", "class/question/1", {"choice": "1"}),
        ("nonsense", "page/x", {}),
    ):
        with pytest.raises(errors.InvalidInput):
            store.log(code, actor, verb, obj, result)
    with pytest.raises(errors.InvalidInput):
        store.log(code, actor, "viewed", "page/x", None, {"phase": "post"})  # the context's phase is the store's
    from study import store as module

    for _ in range(module.EVENTS_PER_MINUTE - 1):
        store.log(code, actor, "viewed", "lesson/step/1")
    with pytest.raises(errors.RateLimited):
        store.log(code, actor, "viewed", "lesson/step/1")


def test_study_code_guessing_rate_limited_like_class_codes(make):
    store = make()
    code, secret = store.create(SETTINGS, instrument())
    for i in range(MAX_FAILED):
        with pytest.raises(errors.NotFound):
            store.find(f"ABCDEF{i:02d}"[-8:].replace("0", "A").replace("1", "B"), "10.0.0.7")
    with pytest.raises(errors.RateLimited):  # refused before the code is looked at: a right guess learns nothing
        store.find(code, "10.0.0.7")
    assert store.find(code, "10.0.0.8").code == code  # another client is not held back
    assert store.find(code, "10.0.0.7", token=store.link(code, secret)).code == code  # the link holds the study
    with pytest.raises(errors.RateLimited):  # a deletion code is guessed no faster
        store.delete_mine(code, "AAAAAAAAAAAA", "10.0.0.7")


def test_delete_my_data_with_the_code_shown_at_consent(make):
    store = make()
    code, secret, actor = joined(store)
    p, delete_code = store.consent(code, actor)
    store.answer(code, actor, f"{p.first_form}01", 0, 2)
    other = store.pseudonym(code, "b-another-browser-000")
    store.consent(code, other)
    with pytest.raises(errors.NotFound):
        store.delete_mine(code, "000000000000", "10.1.1.1")
    store.delete_mine(code, delete_code.lower(), "10.1.1.1")
    _, people, events = store.records(code, secret)
    assert [p["actor"] for p in people] == [other] and {e["actor"] for e in events} == {other}
    with pytest.raises(errors.NotConsented):  # deleted: nothing more is recorded under that id
        store.log(code, actor, "viewed", "page/overview")
    assert store.delete_participant(code, other) and store.records(code, secret)[1] == []


def test_deletion_code_shown_again_to_its_own_participant_only(make):
    store = make()
    code, secret, actor = joined(store)
    assert store.deletion_code(code, actor) is None  # not a participant yet: no code
    _, delete_code = store.consent(code, actor)
    other = store.pseudonym(code, "b-another-browser-000")
    _, other_code = store.consent(code, other)
    assert store.deletion_code(code, actor) == delete_code  # the same code, whenever asked (a reload, the end)
    assert make().deletion_code(code, actor) == delete_code  # another app process on the same database
    assert store.deletion_code(code, other) == other_code != delete_code
    assert store.deletion_code(code, "p-" + "0" * 32) is None and store.deletion_code("ZZZZZZZZ", actor) is None
    with store.db.transaction() as tx:  # a participant whose code was random (agreed before codes were derived)
        tx.execute("UPDATE participants SET delete_hash = ? WHERE actor = ?", ("0" * 64, other))
    assert store.deletion_code(code, other) is None
    store.delete_mine(code, store.deletion_code(code, actor), "10.1.1.2")  # the code shown is the stored one
    assert [p["actor"] for p in store.records(code, secret)[1]] == [other]
    assert store.deletion_code(code, actor) is None


def test_answers_of_a_participant_are_theirs_by_test(make):
    store = make()
    code, _, actor = joined(store)
    p, _ = store.consent(code, actor)
    other = store.pseudonym(code, "b-another-browser-000")
    q, _ = store.consent(code, other)
    store.answer(code, other, f"{q.first_form}01", 3, 2)
    assert store.answers_of(code, actor) == {}
    for n, choice in ((1, 2), (2, 0)):
        store.answer(code, actor, f"{p.first_form}{n:02d}", choice, 3)
    store.advance(code, actor, "path")
    store.advance(code, actor, "post")
    store.answer(code, actor, f"{p.form('post')}01", 1, 4)
    assert store.answers_of(code, actor) == {
        ("pre", f"{p.first_form}01"): 2,
        ("pre", f"{p.first_form}02"): 0,
        ("post", f"{p.form('post')}01"): 1,
    }
    assert store.answers_of(code, other) == {("pre", f"{q.first_form}01"): 3}
    assert store.answers_of("ZZZZZZZZ", actor) == {}


def test_delete_this_study_and_retention_enforced(make):
    clock = Clock(NOW)
    store = make(clock)
    code, secret, actor = consented(store)
    with pytest.raises(errors.Forbidden):
        store.delete_study(code, "wrong")
    store.delete_study(code, secret)
    assert store.study(code) is None
    with pytest.raises(errors.NotFound):
        store.records(code, secret)
    code, secret, actor = consented(store)  # 30 days of retention
    clock.t += 29 * 86400
    assert store.purge(force=True) == 0 and store.study(code) is not None
    clock.t += 86400
    assert store.study(code) is None  # past its retention: gone for every read at once
    assert store.purge(force=True) == 1
    with store.db.transaction() as tx:
        assert tx.execute("SELECT COUNT(*) FROM events")[0][0] == 0
        assert tx.execute("SELECT COUNT(*) FROM participants")[0][0] == 0


def test_study_two_processes_one_database_lose_no_answer(make):
    stores = [make(), make()]  # two app processes on one database file (or server)
    code, secret = stores[0].create(SETTINGS, instrument())
    actors = [stores[0].pseudonym(code, f"browser-{i:04d}") for i in range(24)]

    def participant(i: int) -> None:
        s = stores[i % 2]
        p, _ = s.consent(code, actors[i])
        for n in range(1, 4):
            s.answer(code, actors[i], f"{p.first_form}{n:02d}", n % 4, 2)

    assert not at_once(participant, 24)
    _, people, events = stores[1].records(code, secret)
    assert len(people) == 24 and sum(e["verb"] == "answered" for e in events) == 72


WRITER = """
import sys, time
from study.database import SqliteDatabase
from study.store import StudyStore
store = StudyStore(SqliteDatabase(sys.argv[1]))
code, actor, form = sys.argv[2], sys.argv[3], sys.argv[4]
for n in range(1, 4):
    store.answer(code, actor, f"{form}{n:02d}", 1, 3)
    print(n, flush=True)  # acknowledged: the answer is on disk
time.sleep(60)
"""


def test_study_restart_loses_no_answer_already_sent(make, tmp_path):
    store = make()
    code, secret, actor = joined(store)
    p, _ = store.consent(code, actor)
    if make.kind == "sqlite":  # the app process is killed outright after its answers returned
        child = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(store.db.path), code, actor, p.first_form],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        for _ in range(3):
            assert child.stdout.readline().strip()
        child.send_signal(signal.SIGKILL)
        child.wait(10)
    else:  # the database server is killed outright after the answers returned, and starts again
        for n in range(1, 4):
            store.answer(code, actor, f"{p.first_form}{n:02d}", 1, 3)
        make.server.stop(crash=True)
        make.server.start()
    again = make()  # a new app process
    _, people, events = again.records(code, secret)
    assert sum(e["verb"] == "answered" for e in events) == 3 and len(people) == 1


def test_study_export_neutralises_spreadsheet_formulas():
    rows = [
        {
            "reason": '=HYPERLINK("http://x","y")',
            "n": -3,
            "other": "+1",
            "at": "@SUM(A1)",
            "ok": "fine",
            "nested": {"r": "-2+3"},
        }
    ]
    csv_text, jsonl = export.to_csv(rows), export.to_jsonl(rows)
    assert "'=HYPERLINK" in csv_text and ",-3," in csv_text and "'+1" in csv_text and "'@SUM" in csv_text
    line = json.loads(jsonl)
    assert line["reason"].startswith("'=") and line["n"] == -3 and line["nested"]["r"] == "'-2+3"
    assert line["ok"] == "fine"


def test_study_database_out_of_reach_is_a_clear_refusal(tmp_path):
    from study.errors import Unavailable

    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    with pytest.raises(Unavailable, match="GLASS_DATA_DIR"):
        SqliteDatabase(blocked / "studies.sqlite3")
    with pytest.raises(Unavailable):
        PostgresDatabase("postgresql://glass@127.0.0.1:1/postgres", timeout=2)
