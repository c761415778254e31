"""The classroom walk's findings (../shared/audits/classroom-walk-4.md) that a session run through AppTest can show,
each test named after the findings it covers; the ones that need a browser are
tests/browser/test_classroom_walk_browser.py and tests/browser/test_class_soak.py.
Both class stores where the store is involved."""

from __future__ import annotations

import json

import plotly.io

from classroom.plans import check_plan
from explain import questions
from model import checkpoint, pipeline
from tests.apptest_util import all_text, no_exception, run_app, state, title
from tests.classroom_util import PLANS, banner, sidebar_text, start_teacher, students, teacher_with_plan
from tests.classroom_util import store as store  # noqa: F401 - the fixture
from ui.classroom import console as class_page
from ui.widgets import md

COREF = "the animal didn't cross the street because it was too tired"


def to_stop(t, n: int) -> None:
    for _ in range(n):
        t.sidebar.button(key="plan_next").click().run()
    no_exception(t)


def charts(at) -> list:
    return [plotly.io.from_json(c.proto.spec) for c in at.get("plotly_chart")]


# -- the mystery head ----------------------------------------------------------------------------------------------
def test_d4_d5_the_mystery_head_stays_hidden_on_every_page_until_the_reveal(store):  # noqa: F811
    t, code = teacher_with_plan("What decides il or elle")
    plan = check_plan(json.loads(next(p for p in PLANS if "il-or-elle" in p.name).read_text()), None)
    mystery = next(i for i, s in enumerate(plan.stops) if s.hidden_head)
    to_stop(t, mystery)
    (s,) = students(code, 1)
    s.sidebar.button(key="class_detach").click().run()  # exploring: every page is open to the student
    module, _, head = plan.stops[mystery].hidden_head.partition(":")
    layer = int(module.split(".")[1])
    s.switch_page("pages/cross_attention.py")
    s.session_state["cross_layer"], s.session_state["cross_head"] = layer, int(head)
    s.run()
    no_exception(s)
    assert "the mystery head" in all_text(s)
    assert not any(f"head {head}" in (f.layout.title.text or "") for f in charts(s))  # D4: its weights are not drawn
    s.session_state["cross_head"] = -1  # the average of the heads leaves it out too
    s.run()
    assert f"but head {head}, the mystery head" in all_text(s)
    s.switch_page("pages/self_attention.py")
    s.run()
    no_exception(s)
    hidden = md("The mystery head is left out until your teacher reveals it")
    assert hidden in all_text(s)  # D5: the experiment's per-head numbers wait for the reveal
    t.sidebar.button(key="plan_reveal").click().run()
    s.run()
    assert hidden not in all_text(s)


def test_d6_a_grid_names_its_rows_and_outlines_the_pronoun_row(store):  # noqa: F811
    at = run_app("multi_head", query={"s": COREF})
    at.radio(key="multi_head_kind").set_value("decoder cross-attention (encoder-decoder)").run()
    no_exception(at)
    grids = [f for f in charts(at) if (f.layout.title.text or "").startswith("head ")]
    first = grids[0]
    assert first.layout.yaxis.showticklabels is not False and len(first.data[0].y) > 14  # a long French row named
    bundle = checkpoint.load(checkpoint.SHIPPED)
    a = pipeline.analyse(bundle, pipeline.prepare(bundle, COREF))
    row = list(a.out_tokens).index("il")
    assert all(any(round(sh.y0 + 0.5) == row for sh in g.layout.shapes) for g in grids)  # the pronoun's row framed
    assert "where the decoder writes “il”" in all_text(at)


# -- questions ---------------------------------------------------------------------------------------------------
def test_d12_d20_a_question_names_its_word_as_the_grid_does_and_its_detail_gives_the_whole_row():
    bundle = checkpoint.load(checkpoint.SHIPPED)
    a = pipeline.analyse(bundle, pipeline.prepare(bundle, COREF))
    it = a.prepared.tokens.index("it")
    q = questions.attention(a, 0, None, it)
    assert f"({it}:it in" in q.text and "word 8" not in q.text  # the grids' "7:it"
    grid = questions.attention_grid(a, 0, int(q.text.split("head ")[1].split(":")[0]), it)
    assert grid["rows"][it] == f"{it}:it"
    words = [*a.prepared.tokens, "EOS"]
    assert all(f"{w} " in q.detail for w in words)  # every word of the row, not the four options
    assert "add up to 1.00" in q.detail


def test_d18_d42_a_revealed_question_is_put_away_by_a_student_and_closed_by_the_teacher(store):  # noqa: F811
    teacher, code = start_teacher()
    teacher.button(key="class_ask").click().run()
    s1, s2 = students(code, 2)
    for s in (s1, s2):
        assert "Question from your teacher" in all_text(s)
    teacher.button(key="class_lock_vote").click().run()
    teacher.button(key="class_reveal").click().run()
    qid = store.snapshot(code).question.id
    s1.run()
    s1.button(key=f"class_hide_{qid}").click().run()
    assert "Question from your teacher" not in all_text(s1)  # put away on this screen only
    s2.run()
    assert "Question from your teacher" in all_text(s2)
    teacher.button(key="class_close_question").click().run()
    s2.run()
    assert store.snapshot(code).question is None and "Question from your teacher" not in all_text(s2)


def test_d21_d22_d43_the_console_shows_the_votes_the_suggestion_after_round_two_and_mazurs_first_vote(store):  # noqa: F811
    teacher, code = start_teacher()
    key = f"{code}-{state(teacher, '_class_secret')}"
    teacher.button(key="class_ask").click().run()
    console = run_app("classroom", query={"console": key})
    no_exception(console)
    assert "Teacher's console" in all_text(console) and not console.get("toggle") == []
    assert not [t for t in console.toggle if t.key == "class_peek"]  # D22: its votes need no toggle
    assert [t for t in teacher.toggle if t.key == "class_peek"]  # (the projected page keeps it)
    s1, s2 = students(code, 2)
    poll = store.votes(code, secret=state(teacher, "_class_secret"))
    wrong = (poll.answer + 1) % len(poll.options)
    for s, choice in ((s1, wrong), (s2, wrong)):
        s.button(key=f"class_answer_{poll.qid}_{choice}").click().run()
    console.button(key="class_lock_vote").click().run()
    console.button(key="class_show_first_vote").click().run()  # D43: the spread of the first vote, no answer
    s1.run()
    assert "How the class voted the first time" in all_text(s1) and "The model's answer" not in all_text(s1)
    console.button(key="class_revote").click().run()
    for s in (s1, s2):
        s.run()
        s.button(key=f"class_answer_{poll.qid}_{poll.answer}_r2").click().run()
    console.run()
    text = all_text(console)
    assert "100% of the second votes are right" in text and "+100 points" in text  # D21: from round 2
    metric = next(m for m in console.metric if m.label == "Second vote: right")
    assert metric.value == "100%"


def test_d38_no_change_between_the_votes_is_not_drawn_green(store):  # noqa: F811
    teacher, code = start_teacher()
    teacher.button(key="class_ask").click().run()
    (s,) = students(code, 1)
    poll = store.votes(code, secret=state(teacher, "_class_secret"))
    s.button(key=f"class_answer_{poll.qid}_{poll.answer}").click().run()
    teacher.button(key="class_lock_vote").click().run()
    teacher.button(key="class_revote").click().run()
    s.run()
    s.button(key=f"class_answer_{poll.qid}_{poll.answer}_r2").click().run()
    teacher.toggle(key="class_peek").set_value(True).run()
    metric = next(m for m in teacher.metric if m.label == "Second vote: right")
    assert metric.proto.delta == "+0 points" and metric.proto.color == 2  # delta_color "off": grey, not green


# -- plans, pacing, snapshots ----------------------------------------------------------------------------------------
def test_d16_d23_one_next_at_a_stop_and_the_code_after_starting_with_a_plan(store):  # noqa: F811
    t, code = teacher_with_plan("Thinking Machines in a dozen stops")
    assert title(t) == "Classroom" and any(code in c.value for c in t.code)  # D23: the code and QR code first
    t.switch_page("pages/lesson.py")
    t.run()
    no_exception(t)
    keys = {b.key for b in t.button}
    assert "lesson_next" not in keys and "lesson_next_bottom" not in keys  # D16: the plan's Next only
    assert "plan_next" in {b.key for b in t.sidebar.button}
    assert "move you and the class" in all_text(t)


def test_d17_the_stop_caption_leaves_with_the_teacher(store):  # noqa: F811
    t, code = teacher_with_plan("Thinking Machines in a dozen stops")
    t.switch_page("pages/lesson.py")
    t.run()
    (s,) = students(code, 1)
    assert "Stop 1 of 12" in banner(s)
    t.sidebar.text_input(key="sentence").input("i am a student").run()  # the teacher leaves the stop's view
    s.run()
    no_exception(s)
    assert "Stop 1 of" not in banner(s) and state(s, "sentence") == "i am a student"
    assert "you left it" in sidebar_text(t)


def test_d25_a_student_exploring_the_stops_so_far_sees_the_stops_caption(store):  # noqa: F811
    t, code = teacher_with_plan("Thinking Machines in a dozen stops")
    to_stop(t, 2)
    t.session_state["_class_moved"] = None  # (AppTest sends no browser address: a move back so soon looks late)
    t.switch_page("pages/classroom.py")
    t.run()
    t.radio(key="pace_mode").set_value("plan").run()
    (s,) = students(code, 1)
    s.sidebar.selectbox(key="plan_visit").set_value(1).run()
    s.run()
    no_exception(s)
    assert "Stop 2 of 12" in banner(s)


def test_d26_d27_a_projected_snapshot_carries_its_note_and_its_student(store):  # noqa: F811
    teacher, code = start_teacher()
    s1, s2 = students(code, 2)
    s2.sidebar.button(key="class_detach").click().run()
    s2.switch_page("pages/positional.py")
    s2.run()
    s2.sidebar.text_area(key="shot_note").input("positions make waves")
    s2.sidebar.button(key="shot_send").click().run()
    teacher.switch_page("pages/overview.py")
    teacher.run()
    links = [el.proto.label for el in teacher.sidebar.get("page_link")]
    assert "1 new snapshot from your students" in links  # D27: on any of the teacher's pages
    teacher.switch_page("pages/classroom.py")
    teacher.run()
    teacher.button(key="shot_project_1").click().run()
    teacher.run()
    no_exception(teacher)
    s1.run()
    s1.run()
    text = all_text(s1)
    assert "Snapshot 1 from student 2" in text and md("positions make waves") in text  # D26
    assert title(s1) == "Positional encoding"


def test_d29_a_student_who_explores_has_the_way_back_in_the_page(store):  # noqa: F811
    _, code = start_teacher()
    (s,) = students(code, 1)
    s.sidebar.button(key="class_detach").click().run()
    back = [b for b in s.main.button if b.key == "class_follow_main"]
    assert back and back[0].label == "Follow the teacher"  # in the page itself (a phone's sidebar is folded)
    back[0].click().run()
    assert state(s, "class_following") is True


def test_d39_d24_the_join_link_wraps_and_a_loopback_link_is_warned_about(store):  # noqa: F811
    teacher, _ = start_teacher()
    link = next(c for c in teacher.code if "class=" in c.value)
    assert link.proto.wrap_lines is True  # D39: never cut off in its box
    assert class_page.loopback("http://127.0.0.1:8501/classroom?class=X") and class_page.loopback("http://localhost")
    assert not class_page.loopback("http://192.168.1.20:8501/classroom") and not class_page.loopback("/classroom")


# -- the roster ----------------------------------------------------------------------------------------------------
def test_d41_the_roster_tells_who_follows_and_brings_everyone_back(store):  # noqa: F811
    teacher, code = start_teacher()
    teacher.switch_page("pages/overview.py")
    teacher.run()
    s1, s2, s3 = students(code, 3)
    s1.sidebar.button(key="class_detach").click().run()  # chose to explore
    s2.switch_page("pages/positional.py")  # left by going to another page, without the button
    s2.run()
    teacher.run()
    line = " ".join(c.value for c in teacher.sidebar.caption)
    assert "3 students here" in line and "1 following" in line and "1 exploring" in line
    assert "1 left without choosing to" in line
    assert "You are **student 1**" in sidebar_text(s1)
    teacher.switch_page("pages/classroom.py")
    teacher.run()
    table = all_text(teacher)
    assert md("left without choosing to (changed the page)") in table and md("exploring (chose to)") in table
    teacher.button(key="class_bring_back").click().run()
    for s in (s1, s2, s3):
        s.run()
        s.run()
        assert state(s, "class_following") is True and title(s) == "The Transformer at a glance"


def test_d9_a_teachers_browser_is_the_teacher_again_after_a_reload(store, monkeypatch):  # noqa: F811
    from ui.classroom import session, teacher

    for module in (session, teacher):
        monkeypatch.setattr(module, "browser", lambda: "browser-of-the-teacher")
    first, code = start_teacher()
    first.switch_page("pages/lesson.py")
    first.run()
    reload = run_app()  # a new session of the same browser (its first run says so)
    no_exception(reload)
    assert any("You are still the teacher of class" in str(t.proto.body) for t in reload.get("toast"))
    assert state(reload, "class_code") == code and state(reload, "class_role") == "teacher"
    assert state(reload, "sentence") == store.snapshot(code).state["sentence"]  # it shows the class's view
    assert title(reload) == "Guided lesson"  # and the class's page


def test_d14_the_end_of_a_class_stays_on_a_students_screen(store):  # noqa: F811
    teacher, code = start_teacher()
    (s,) = students(code, 1)
    teacher.button(key="class_end").click().run()
    s.run()
    s.run()
    assert f"Class {code} has ended" in all_text(s) and state(s, "class_code") is None
    s.button(key="class_ended_ok").click().run()
    assert "has ended" not in all_text(s)
