"""Lesson plans, pacing and snapshots in the class store (classroom/plans.py, the store's plan/pace/shot methods),
on both back-ends (the memory store and a real redis-server started here), and hostile plans."""

from __future__ import annotations

import base64
import json
import threading
import uuid
import zlib

import pytest

from classroom import (
    ClassEnded,
    Forbidden,
    InvalidInput,
    MemoryClassStore,
    NotFound,
    RateLimited,
    RedisClassStore,
    plans,
)
from classroom.rules import LIMITS
from tests.services import wait_for

PAGES = {"overview", "multi_head", "self_attention", "decoder", "lesson"}
HEADS = {
    f"{m}:{h}" for m in ("enc.0.self_attn", "enc.1.self_attn", "dec.0.self_attn", "dec.0.cross_attn") for h in range(4)
}
STATE = {
    "page": "multi_head",
    "sentence": "the animal didn't cross the street because it was too tired",
    "model": "base",
    "heads_off": [],
    "iv_look_ahead": True,
    "iv_padding": True,
    "iv_scale": True,
    "iv_pos": True,
}


def plan_dict(n: int = 3, **stop_extra) -> dict:
    stops = [
        {"caption": f"stop {i}", "state": {**STATE, "page": ["overview", "multi_head", "decoder"][i % 3]}, **stop_extra}
        for i in range(n)
    ]
    return {"format": plans.FORMAT, "title": "A test plan", "stops": stops}


@pytest.fixture(params=["memory", "redis"])
def store(request):
    kw = {"classes_per_client": 1000, "class_starts_per_minute": 1000}
    if request.param == "memory":
        s = MemoryClassStore(**kw)
    else:
        s = RedisClassStore(request.getfixturevalue("redis_url"), prefix=f"test:{uuid.uuid4().hex[:8]}", **kw)
    yield s
    s.close()


# -- the plan format ------------------------------------------------------------------------------------------------
def test_plan_file_and_link_round_trip():
    plan = plans.check_plan(
        plan_dict(
            question={"text": "Which word?", "options": ["animal", "street"], "answer": 0},
            hidden={"head": "enc.1.self_attn:2"},
        ),
        PAGES,
        HEADS,
    )
    assert [s.state["page"] for s in plan.stops] == ["overview", "multi_head", "decoder"]
    assert plan.stops[1].hidden_head == "enc.1.self_attn:2"
    assert plan.stops[0].question["options"] == ["animal", "street"]
    assert plans.read_plan(plan.to_json().encode(), PAGES, HEADS) == plan
    token = plans.plan_to_link(plan)
    assert set(token) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    assert plans.plan_from_link(token, PAGES, HEADS) == plan
    assert plan.with_stop(plan.stops[0]).stops[-1] == plan.stops[0] and len(plan.without(0).stops) == 2


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.update(format="other"), "not a lesson plan of this app"),
        (lambda d: d["stops"][1]["state"].update(page="admin"), "Stop 2: the page 'admin' is not a page of this app"),
        (lambda d: d["stops"][0].update(caption="<script>alert(1)</script>"), "Stop 1: the caption may not contain <"),
        (lambda d: d.update(title="<b>x</b>"), "title"),
        (lambda d: d["stops"][2].update(caption="x" * 5000), "Stop 3: the caption is longer than 400"),
        (lambda d: d["stops"][0]["state"].update(exec="import os"), "Stop 1: unknown state keys: exec"),
        (lambda d: d["stops"][0]["state"].update(model="mine"), "Stop 1: model must be one of base, no_mask"),
        (lambda d: d["stops"][0].update(hidden={"head": "enc.9.self_attn:2"}), "not a head of the model"),
        (lambda d: d["stops"][0].update(question={"text": "q", "options": ["a"], "answer": 0}), "2 to 6 options"),
        (lambda d: d["stops"][0].update(onload="x"), "unknown field 'onload'"),
        (lambda d: d.update(stops=[]), "1 to 30 stops"),
        (lambda d: d.update(stops=d["stops"] * 11), "1 to 30 stops"),
    ],
)
def test_hostile_plan_gets_one_clear_message(mutate, message):
    data = plan_dict()
    mutate(data)
    with pytest.raises(InvalidInput, match=message.replace("(", r"\(").replace("'", "'")):
        plans.read_plan(json.dumps(data), PAGES, HEADS)


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"{",
        b"\xff\xfe",
        b"[" * 20000 + b"]" * 20000,
        b"NaN",
        b'{"format": "glass-plan/1", "title": "t", "stops": [{"caption": NaN}]}',
        b"x" * (plans.MAX_PLAN_BYTES + 1),
        b"[1, 2]",
    ],
)
def test_hostile_plan_file_is_refused_with_a_message(raw):
    with pytest.raises(InvalidInput) as e:
        plans.read_plan(raw, PAGES, HEADS)
    assert len(str(e.value)) < 200 and "Traceback" not in str(e.value)


def test_hostile_plan_link_is_refused():
    bomb = base64.urlsafe_b64encode(zlib.compress(b" " * 5_000_000, 9)).decode().rstrip("=")
    assert len(bomb) < plans.MAX_LINK_CHARS  # five megabytes deflate to a short link: inflating must stop early
    for token in (
        bomb,
        "!!!",
        "A" * (plans.MAX_LINK_CHARS + 1),
        "",
        None,
        42,
        base64.urlsafe_b64encode(zlib.compress(b"<html>")).decode(),
    ):
        with pytest.raises(InvalidInput):
            plans.plan_from_link(token, PAGES, HEADS)


def test_pace_is_checked():
    assert plans.check_pace({}) == {
        "mode": "lead",
        "paused": False,
        "stop": -1,
        "reveal": False,
        "plan": 0,
        "recall": 0,
        "shot": None,
    }
    shot = {"n": 2, "student": 3, "note": "wide!", "state": STATE}
    assert plans.check_pace({"recall": 4, "shot": shot})["shot"] == shot
    for bad in (
        {"mode": "chaos"},
        {"paused": "yes"},
        {"stop": 99},
        {"stop": True},
        {"other": 1},
        [],
        {"recall": -1},
        {"recall": "1"},
        {"shot": {"n": 1}},
        {"shot": {**shot, "note": "<b>"}},
        {"shot": {**shot, "state": {"evil": 1}}},
        {"shot": {**shot, "student": True}},
    ):
        with pytest.raises(InvalidInput):
            plans.check_pace(bad)


# -- the store, both back-ends ----------------------------------------------------------------------------------------
def test_plan_and_pace_on_the_store(store):
    code, secret = store.create(STATE)
    c0 = store.counters(code)
    assert store.plan(code) is None and store.pace(code)["mode"] == "lead"
    assert store.set_plan(code, secret, plan_dict()) == 1
    c1 = store.counters(code)
    assert (c1.seq, c1.q) == (c0.seq + 1, c0.q + 1)  # explorers hear a plan too
    assert [s["caption"] for s in store.plan(code)["stops"]] == ["stop 0", "stop 1", "stop 2"]
    assert store.pace(code) == {
        "mode": "lead",
        "paused": False,
        "stop": 0,
        "reveal": False,
        "plan": 1,
        "recall": 0,
        "shot": None,
    }
    assert store.set_pace(code, secret, paused=True, stop=2)["paused"] is True
    assert store.counters(code).q == c1.q + 1
    assert store.set_plan(code, secret, plan_dict(2)) == 2
    assert store.pace(code) == {
        "mode": "lead",
        "paused": True,
        "stop": 0,
        "reveal": False,
        "plan": 2,
        "recall": 0,
        "shot": None,
    }
    with pytest.raises(InvalidInput):
        store.set_pace(code, secret, mode="anarchy")
    store.end(code, secret)
    with pytest.raises(Exception, match="ended"):
        store.plan(code)


def test_pace_forged_by_a_student_does_nothing(store):
    code, secret = store.create(STATE)
    store.join(code, "10.0.0.2", "student-aaaa")
    store.set_pace(code, secret, mode="lead")
    before = (store.pace(code), store.counters(code))
    near = secret[:-1] + ("y" if secret.endswith("x") else "x")  # (one character off: a secret ending in "x" was kept)
    for forged in ("student-aaaa", near, "", None, code):
        with pytest.raises(Forbidden):
            store.set_pace(code, forged, paused=True)
        with pytest.raises(Forbidden):
            store.set_plan(code, forged, plan_dict())
        with pytest.raises(Forbidden):
            store.shots(code, forged)
    assert (store.pace(code), store.counters(code)) == before


def test_snapshot_gallery_and_its_limits(store):
    code, secret = store.create(STATE)
    for i in range(4):
        store.join(code, "10.0.0.9", f"student-{i:04d}")
    tally = store.counters(code).tally
    n1 = store.send_shot(
        code, "student-0001", "10.0.0.9", {**STATE, "heads_off": ["enc.1.self_attn:2"]}, "head 2 breaks il/elle!"
    )
    n2 = store.send_shot(code, "student-0003", "10.0.0.9", {**STATE, "page": "decoder"}, "")
    assert (n1, n2) == (1, 2) and store.counters(code).tally == tally + 2
    gallery = store.shots(code, secret)
    # students are numbered in the order they joined (student-0001 came second), the same number everywhere
    assert [(g["n"], g["student"], g["note"], g["state"]["heads_off"]) for g in gallery] == [
        (1, 2, "head 2 breaks il/elle!", ["enc.1.self_attn:2"]),
        (2, 4, "", []),
    ]
    assert "student-0001" not in json.dumps(gallery)  # the teacher sees numbers, never ids
    store.send_shot(code, "student-0001", "10.0.0.9", STATE, "again")
    store.send_shot(code, "student-0001", "10.0.0.9", STATE, "and again")
    with pytest.raises(RateLimited):  # 3 a minute per student
        store.send_shot(code, "student-0001", "10.0.0.9", STATE, "one more")
    assert [g["student"] for g in store.shots(code, secret)] == [2, 4, 2, 2]
    with pytest.raises(NotFound):  # not in the class
        store.send_shot(code, "student-zzzz", "10.0.0.9", STATE, "")
    for bad in ({**STATE, "page": "<x>"}, {"evil": 1}):
        with pytest.raises(InvalidInput):
            store.send_shot(code, "student-0002", "10.0.0.9", bad, "")
    with pytest.raises(InvalidInput):
        store.send_shot(code, "student-0002", "10.0.0.9", STATE, "<img src=x onerror=alert(1)>")


def test_snapshot_limit_per_address(store, monkeypatch):
    monkeypatch.setenv("GLASS_SHOTS_PER_ADDRESS", "4")
    code, _ = store.create(STATE)
    for i in range(6):
        store.join(code, "10.0.0.7", f"student-{i:04d}")
    for i in range(4):
        store.send_shot(code, f"student-{i:04d}", "10.0.0.7", STATE, "")
    with pytest.raises(RateLimited):
        store.send_shot(code, "student-0005", "10.0.0.7", STATE, "")
    store.join(code, "10.0.0.8", "student-other")
    assert store.send_shot(code, "student-other", "10.0.0.8", STATE, "") == 5  # another address is not limited


def test_readme_states_the_plan_and_snapshot_limits_of_the_code():
    from pathlib import Path

    readme = " ".join((Path(__file__).resolve().parents[1] / "docs" / "teachers.md").read_text().split())
    for sentence in (
        f"a file over {plans.MAX_PLAN_BYTES:,} bytes",
        f"a caption over {plans.MAX_CAPTION} characters",
        f"a title over {plans.MAX_TITLE}",
        f"more than {plans.MAX_STOPS} stops",
        f"a link over {plans.MAX_LINK_CHARS:,} characters",
        f"(at most {plans.MAX_NOTE} characters)",
        f"At most {LIMITS['shots'].most} snapshots a minute per student and {LIMITS['shots_client'].most} per address",
        f"a class keeps its newest {plans.SHOTS_KEPT}",
        f"at most {LIMITS['runs'].most} posts a minute",
    ):
        assert sentence in readme, sentence
    from ui.classroom.board import SHARE_SECONDS

    assert f"at most once every {SHARE_SECONDS:g} seconds while it runs" in readme
    assert f"(at most {plans.MAX_CLASS_MODEL_BYTES // 2**20} MB, base64" in readme


def board_run(loss: float = 0.5, **settings) -> dict:
    return {
        "settings": {"d_model": 64, "n_heads": 2, "steps": 300, "look_ahead_mask": True, **settings},
        "steps": [100, 200, 300],
        "losses": [3.0, 1.2, loss],
        "exact_match": 0.42,
        "source": "i am a student",
        "translation": "je suis étudiant",
    }


def test_shared_run_board_side_by_side(store):
    code, secret = store.create(STATE)
    for sid in ("student-aaaa", "student-bbbb"):
        store.join(code, "10.0.0.3", sid)
    tally = store.counters(code).tally
    # the students' numbers are the order they joined in, whoever posts first
    assert store.post_run(code, "student-bbbb", "10.0.0.3", board_run(0.9, d_model=32)) == 2
    assert store.post_run(code, "student-aaaa", "10.0.0.3", board_run(0.4)) == 1
    assert store.post_run(code, "student-bbbb", "10.0.0.3", board_run(0.7, d_model=32)) == 2  # replaces
    assert store.counters(code).tally == tally + 3
    board = store.board(code)
    assert [(r["student"], r["settings"]["d_model"], r["losses"][-1]) for r in board] == [(1, 64, 0.4), (2, 32, 0.7)]
    assert board[1]["translation"] == "je suis étudiant" and board[1]["exact_match"] == 0.42
    store.post_run(code, "student-bbbb", "10.0.0.3", board_run())
    with pytest.raises(RateLimited):  # 3 posts a minute per student
        store.post_run(code, "student-bbbb", "10.0.0.3", board_run())
    with pytest.raises(NotFound):
        store.post_run(code, "student-zzzz", "10.0.0.3", board_run())
    for bad in (
        {**board_run(), "translation": "<script>"},
        {**board_run(), "losses": [float("nan")] * 3},
        {**board_run(), "settings": {"exec": 1}},
        {**board_run(), "exact_match": 2.0},
        {**board_run(), "steps": list(range(61)), "losses": [1.0] * 61},
        {"settings": {}},
    ):
        with pytest.raises(InvalidInput):
            store.post_run(code, "student-aaaa", "10.0.0.3", bad)
    store.end(code, secret)
    with pytest.raises(ClassEnded):  # the board ends with its class
        store.board(code)


def test_shared_run_followed_by_the_class_on_the_store(store):
    code, secret = store.create(STATE)
    store.join(code, "10.0.0.4", "student-aaaa")
    assert store.class_run(code) is None
    before = store.counters(code)
    run = {**board_run(1.1), "state": "running", "step": 200, "total": 300}
    assert store.set_class_run(code, secret, run)["step"] == 200
    after = store.counters(code)
    assert (after.seq, after.q) == (before.seq + 1, before.q + 1)  # every student's page hears it
    assert store.class_run(code) == {
        **board_run(1.1),
        "state": "running",
        "step": 200,
        "total": 300,
        "model": 0,
        "attention": None,
    }
    for bad in ({**run, "state": "hacked"}, {**run, "step": -1}, {**run, "translation": "<b>"}):
        with pytest.raises(InvalidInput):
            store.set_class_run(code, secret, bad)
    with pytest.raises(Forbidden):
        store.set_class_run(code, "student-aaaa", {**run, "state": "finished"})
    assert store.class_run(code)["state"] == "running"


def test_shared_run_model_for_the_class(store):
    code, secret = store.create(STATE)
    assert store.class_model(code) is None
    assert store.set_class_model(code, secret, b"\x00weights\xff" * 1000, b'{"format": 1}') == 1
    assert store.set_class_model(code, secret, b"second", b"{}") == 2
    assert store.class_model(code) == (2, b"second", b"{}")
    with pytest.raises(Forbidden):
        store.set_class_model(code, "student-aaaa", b"evil", b"{}")
    with pytest.raises(InvalidInput):
        store.set_class_model(code, secret, b"x" * (plans.MAX_CLASS_MODEL_BYTES + 1), b"{}")
    assert store.class_model(code)[0] == 2
    store.end(code, secret)
    with pytest.raises(ClassEnded):
        store.class_model(code)


def test_shared_run_board_notice_says_what_the_runs_show():
    from viz.classroom import board_notice

    def run(n, loss, exact):
        return {"student": n, "losses": [5.0, loss], "exact_match": exact}

    assert board_notice([run(1, 2.5, 0.3), run(2, 1.5, 0.6)]) == (
        "student 2's run ends with the lowest training loss (1.500); student 2's translates the most held-out "
        "sentences exactly (60%)."
    )
    assert board_notice([run(1, 2.5, 0.0), run(2, 1.5, 0.0)]).endswith(
        "no run translates a held-out sentence exactly yet."
    )
    assert board_notice([run(1, 2.5, 0.5), run(3, 1.5, 0.5), run(4, 1.0, 0.2)]).endswith(
        "students 1 and 3 tie for the most held-out sentences translated exactly (50%)."
    )
    assert board_notice([]) == ""


def test_plan_pace_snapshot_across_two_app_processes(redis_url):
    """Two app processes (two stores on one Redis): what the teacher's process sets, the student's reads, and the
    student's process hears it as an event."""
    prefix = f"test:{uuid.uuid4().hex[:8]}"
    teacher_side, student_side = RedisClassStore(redis_url, prefix=prefix), RedisClassStore(redis_url, prefix=prefix)
    heard, up = [], threading.Event()
    stop = student_side.watch(lambda code, c: heard.append(c), lambda ok: up.set() if ok else None)
    try:
        assert up.wait(10)  # the student's process has subscribed
        code, secret = teacher_side.create(STATE)
        student_side.join(code, "10.0.0.5", "student-aaaa")
        teacher_side.set_plan(code, secret, plan_dict())
        teacher_side.set_pace(code, secret, paused=True)
        assert student_side.pace(code)["paused"] is True and student_side.plan(code)["title"] == "A test plan"
        student_side.send_shot(code, "student-aaaa", "10.0.0.5", STATE, "from the other process")
        assert [g["note"] for g in teacher_side.shots(code, secret)] == ["from the other process"]
        # the pause reached the other process as an event
        wait_for(lambda: any(c.q >= 2 for c in heard), 5, lambda: f"the pause's event: {heard}")
    finally:
        stop()
        teacher_side.close()
        student_side.close()


def test_shared_run_curve_of_a_long_or_diverged_run_is_what_the_board_takes():
    from types import SimpleNamespace

    from model.train import TrainConfig
    from ui.classroom.board import _run_of

    losses = [5.0 - i / 100 for i in range(500)] + [float("nan")] * 3 + [1e9]
    view = SimpleNamespace(steps=list(range(1, 505)), losses=losses, evals=[], tcfg=TrainConfig(d_model=32))
    run = _run_of(view)
    assert len(run["steps"]) == plans.MAX_CURVE and run["steps"][0] == 1 and run["steps"][-1] == 504
    assert run["losses"][0] == 5.0 and run["losses"][-1] == 1e6  # NaN left out, a huge loss capped
    assert run["settings"]["d_model"] == 32 and run["exact_match"] is None
    assert plans.check_run(run) == run


def test_shared_run_attention_is_checked():
    """The followed run's attention snapshot is plain, bounded data: shapes that agree, shares in [0, 1], tokens
    without < or >, at most MAX_ATTENTION_TOKENS each way; a run without one still reads."""
    att = {
        "step": 40,
        "title": "Encoder-decoder attention",
        "queries": ["‹bos›", "je"],
        "keys": ["i", "am", "‹eos›"],
        "weights": [[0.5, 0.25, 0.25], [0.9, 0.05, 0.05]],
    }
    assert plans.check_attention(att) == att and plans.check_attention(None) is None
    bad = [
        {**att, "weights": [[0.5, 0.5]] * 2},
        {**att, "weights": [[1.5, 0, 0], [1, 0, 0]]},
        {**att, "queries": ["<bos>", "je"]},
        {**att, "keys": ["w"] * (plans.MAX_ATTENTION_TOKENS + 1)},
        {**att, "weights": [[float("nan"), 0, 0], [1, 0, 0]]},
        {**att, "extra": 1},
        [att],
    ]
    for b in bad:
        with pytest.raises(InvalidInput):
            plans.check_attention(b)
