"""Peer instruction in the app (ui/classroom/peer.py, pages/classroom.py), on the memory store AND a real
redis-server: a teacher and several students, each its own AppTest session of app.py, through vote → lock →
discuss → vote again → reveal, and through a click answer on a head's real attention grid. AppTest runs no
JavaScript: a student's `run()` here is what the class's event does in a browser."""

from __future__ import annotations

import csv
import io
import json

import plotly.io
import pytest

from classroom.votes import results_csv
from model import checkpoint, pipeline
from tests.apptest_util import all_text, decode, no_exception, state
from tests.classroom_util import join_by_link, start_teacher, store  # noqa: F401
from ui.widgets import md

SENTENCE = "the animal didn't cross the street because it was too tired"


def ask(teacher, class_store, code: str, kind: str):
    """The teacher asks the question of `kind` (the console's radio and button): the store's poll."""
    teacher.radio(key="class_kind").set_value(kind).run()
    teacher.button(key="class_ask").click().run()
    no_exception(teacher)
    return class_store.votes(code, secret=state(teacher, "_class_secret"))


def console_chart(at):
    return next(c for c in at.get("plotly_chart") if "First vote" in c.proto.spec)


def test_a_revote_cycle_with_a_teacher_and_four_students(store):  # noqa: F811 - the fixture
    teacher, code = start_teacher()
    secret = state(teacher, "_class_secret")
    students = [join_by_link(code) for _ in range(4)]
    poll = ask(teacher, store, code, "scaling")
    assert poll.phase == "vote" and poll.kind == "scaling"
    right, wrong = poll.answer, (poll.answer + 1) % len(poll.options)
    for s in students:
        s.run()
        no_exception(s)
        assert "Question from your teacher" in all_text(s) and "The model's answer" not in all_text(s)
        assert not s.get("plotly_chart")  # no distribution on a student's screen before the reveal
    # first vote: 1 of 4 right (one changes their mind, to a wrong answer)
    students[0].button(key=f"class_answer_{poll.qid}_{right}").click().run()
    for s in students[1:]:
        s.button(key=f"class_answer_{poll.qid}_{wrong}").click().run()
    students[1].button(key=f"class_answer_{poll.qid}_{right}").click().run()
    students[1].button(key=f"class_answer_{poll.qid}_{wrong}").click().run()
    no_exception(students[1])
    assert f"Your answer: **{md(poll.options[wrong])}**" in all_text(students[1])
    teacher.run()
    assert "4 of 4 students answered" in all_text(teacher) and "Question: 4 answers" in all_text(teacher)
    assert not [c for c in teacher.get("plotly_chart") if "First vote" in c.proto.spec]  # hidden by default
    teacher.toggle(key="class_peek").set_value(True).run()
    bars = json.loads(console_chart(teacher).proto.spec)["data"]
    first = [0] * len(poll.options)
    first[right], first[wrong] = 1, 3
    assert [int(v) for v in decode(bars[0]["x"])] == first and len(bars) == 1
    assert "Suggested next move: revisit.** 25% of the first votes are right, below 35%" in all_text(teacher)
    # a student's session claiming the teacher's role has no secret: it loses the claim, the vote stays open
    forger = join_by_link(code)  # (a fifth student: its session leaves the class, the class still counts it)
    forger.session_state["class_role"] = "teacher"
    forger.session_state["_class_secret"] = "forged-secret-forged-secret"
    forger.switch_page("pages/classroom.py")
    forger.run()
    no_exception(forger)
    assert state(forger, "class_role") is None and not [b for b in forger.button if b.key == "class_lock_vote"]
    assert store.votes(code, secret=secret).phase == "vote"
    teacher.button(key="class_lock_vote").click().run()
    students[2].button(key=f"class_answer_{poll.qid}_{right}").click().run()  # too late: locked
    assert store.votes(code, secret=secret).first == {right: 1, wrong: 3}
    assert md("The vote is closed.") in [w.value for w in students[2].warning]
    teacher.button(key="class_discuss").click().run()
    for s in students:
        s.run()
        assert "Discuss with a neighbour" in all_text(s)
    teacher.button(key="class_revote").click().run()
    for s in students[:3]:  # three of them now right; the fourth does not vote again
        s.run()
        s.button(key=f"class_answer_{poll.qid}_{right}_r2").click().run()
        no_exception(s)
    teacher.run()
    bars = json.loads(console_chart(teacher).proto.spec)["data"]
    second = [0] * len(poll.options)
    second[right] = 3
    assert [b["name"] for b in bars] == ["First vote", "Second vote"]
    assert [int(v) for v in decode(bars[1]["x"])] == second and "3 of 5 students answered (second vote)" in all_text(
        teacher
    )
    assert any(m.value == "100%" for m in teacher.metric)  # the second vote's share right
    teacher.button(key="class_lock_vote").click().run()
    teacher.button(key="class_reveal").click().run()
    no_exception(teacher)
    for s in students:
        s.run()
        no_exception(s)
        assert f"The model's answer:** {md(poll.options[right])}" in all_text(s)
    assert "the same as the model's" in all_text(students[0])
    assert "not what the model does" in all_text(students[3])  # their first (and only) vote was wrong
    shown = json.loads(next(c for c in students[3].get("plotly_chart")).proto.spec)["data"]
    assert [int(v) for v in decode(shown[0]["x"])] == first  # after the reveal the class sees both votes
    # the teacher's CSV (the download button's data): this question, both votes, no student
    assert "results (CSV)" in teacher.get("download_button")[0].proto.label
    rows = list(csv.DictReader(io.StringIO(results_csv(store.results(code, secret)))))
    assert rows[0]["round 1 share correct"] == "0.250" and rows[0]["round 2 share correct"] == "1.000"


def test_a_click_answer_on_the_real_attention_grid(store):  # noqa: F811 - the fixture
    teacher, code = start_teacher()
    secret = state(teacher, "_class_secret")
    students = [join_by_link(code) for _ in range(3)]
    poll = ask(teacher, store, code, "click")
    g = poll.grid
    # the grid is the model's: the asked row of "it", its largest weight in the head the question names
    bundle = checkpoint.load(checkpoint.SHIPPED)
    a = pipeline.analyse(bundle, pipeline.prepare(bundle, SENTENCE))
    it = a.prepared.tokens.index("it")
    head = int(poll.text.split("head ")[1].split(":")[0])
    w = a.trace["enc.0.self_attn.weights"][0, head]
    assert g.row == it and g.answer == it * len(g.cols) + int(w[it].argmax())
    assert g.values[it][int(w[it].argmax())] == pytest.approx(float(w[it].max()), abs=1e-4)
    for s in students:
        s.run()
        no_exception(s)
        fig = plotly.io.from_json(next(c for c in s.get("plotly_chart")).proto.spec)
        shading = {float(v) for t in fig.data if t.type == "heatmap" for row in t.z for v in row}
        assert shading == {0.0, 1.0}  # the asked row shaded, no value drawn
        assert str(round(float(w[it].max()), 4)) not in fig.to_json()
    right_col, wrong_col = int(w[it].argmax()), (int(w[it].argmax()) + 1) % len(g.cols)
    for s, col in zip(students, [right_col, right_col, wrong_col], strict=True):  # the keyboard way: the asked row
        s.selectbox(key=f"class_cell_col_{poll.qid}").set_value(col)
        s.button(key=f"class_cell_vote_{poll.qid}").click().run()
        no_exception(s)
    assert f"Your answer: **{md(f'{g.rows[it]} → {g.cols[right_col]}')}**" in all_text(students[0])  # escaped as one
    assert store.votes(code, secret=secret).first == {it * len(g.cols) + right_col: 2, it * len(g.cols) + wrong_col: 1}
    teacher.button(key="class_lock_vote").click().run()
    teacher.button(key="class_reveal").click().run()
    no_exception(teacher)
    s = students[2]
    s.run()
    no_exception(s)
    assert "not what the model does" in all_text(s)
    figs = [json.loads(c.proto.spec) for c in s.get("plotly_chart")]
    clicks = next(f["data"][0] for f in figs if f["layout"]["title"]["text"] == "The class's clicks")
    weights = next(f["data"][0] for f in figs if f["layout"]["title"]["text"] == "The model's weights")
    counts = decode(clicks["z"])
    assert int(counts[it][right_col]) == 2 and int(counts[it][wrong_col]) == 1 and int(sum(map(sum, counts))) == 3
    assert float(decode(weights["z"])[it][right_col]) == pytest.approx(float(w[it].max()), abs=1e-4)


def test_votes_and_revotes_reach_the_teacher_by_push_exactly():
    """The load benchmark's vote scenario, small (`python -m bench.classroom_load votes` runs 100): a real
    `streamlit run app.py`, a teacher and 8 students as websocket clients; every student votes, half change
    their vote, then everyone votes again. The teacher's page is redrawn only by the class's events (no fragment
    timer runs in this client); its last redraw shows every vote, and its count and distribution are exact."""
    import asyncio
    from pathlib import Path

    from bench.class_clients import ONE_ADDRESS
    from bench.classroom_load import votes
    from serving.processes import start_app

    server = start_app(log=Path("/tmp") / "glass-test-votes.log", timeout=120, extra_env=ONE_ADDRESS)
    try:
        res = asyncio.run(asyncio.wait_for(votes(server.url, 8, 30), 240))
    finally:
        server.stop()
    assert [r["clicks"] for r in res["rounds"]] == [12, 12]
    for r in res["rounds"]:
        assert r["count_exact"] and r["distribution_exact"], r
        assert r["teacher_shown_after_stored"] == r["teacher_shown_after_stored"]  # not NaN: it was shown
    assert res["rounds"][0]["expected"] != res["rounds"][1]["expected"]


def test_every_new_kind_is_asked_with_the_model_s_answer(store):  # noqa: F811 - the fixture
    """Each kind from the lecture, asked from the teacher's page, lands in the store with the answer the model
    gives on the teacher's sentence (recomputed here from explain/questions.py on the same state)."""
    from explain import questions
    from model.trace import Interventions

    teacher, code = start_teacher()
    secret = state(teacher, "_class_secret")
    bundle = checkpoint.load(checkpoint.SHIPPED)
    a = pipeline.analyse(bundle, pipeline.prepare(bundle, SENTENCE))
    expected = {
        "scaling": questions.scaling(a, 0, None),
        "look_ahead": questions.look_ahead(a),
        "pos_column": questions.pos_column(a),
        "head_zero": questions.head_zero(bundle, a.prepared, Interventions(), 0, 0),
    }
    for kind, q in expected.items():
        poll = ask(teacher, store, code, kind)
        assert (poll.kind, poll.text, poll.options, poll.answer) == (kind, q.text, q.options, q.answer)
    assert len(store.results(code, secret)) == len(expected)


def test_a_student_flooding_votes_is_told_to_wait(store, monkeypatch):  # noqa: F811 - the fixture
    monkeypatch.setenv("GLASS_VOTES_PER_STUDENT", "3")
    teacher, code = start_teacher()
    secret = state(teacher, "_class_secret")
    s = join_by_link(code)
    qid = ask(teacher, store, code, "pos_column").qid
    s.run()
    warnings = []
    for k in range(8):  # (8: over the limit of 3 even if the 10 s window turns over meanwhile)
        s.button(key=f"class_answer_{qid}_{k % 2}").click().run()
        no_exception(s)
        warnings += [w.value for w in s.warning]
    assert any("Too many attempts: try again in" in w for w in warnings), warnings
    assert sum(store.votes(code, secret=secret).first.values()) == 1  # one student, one vote


def test_an_answer_drawn_just_before_the_vote_opened_counts_as_a_vote(store):  # noqa: F811 - the fixture
    """The teacher's question is asked, then its vote opened (two steps): a student whose page was drawn in
    between has plain answer buttons; their click is still the vote it is meant to be."""
    teacher, code = start_teacher()
    secret = state(teacher, "_class_secret")
    student = join_by_link(code)
    qid = store.ask(code, secret, "Which word does it read?", ["animal", "street"], 0)
    student.run()
    assert student.button(key=f"class_answer_{qid}_1")  # the plain question's buttons
    record = {
        "text": "Which word does it read?",
        "options": ["animal", "street"],
        "answer": 0,
        "kind": "question",
        "grid": None,
    }
    store._poll_open(store._code(code), store._teacher(code, secret), qid, record)
    student.button(key=f"class_answer_{qid}_1").click().run()
    no_exception(student)
    assert store.votes(code, secret=secret).first == {1: 1}
