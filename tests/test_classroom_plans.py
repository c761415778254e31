"""Lesson plans, pacing and snapshots in the app (ui/classroom/plans.py, pages/classroom.py): a teacher and
several students, each its own AppTest session of app.py, on the memory store AND a real redis-server started
here; the shipped plans' captions checked against the model; hostile plan files and links.

AppTest runs no JavaScript: the class's event that reruns a student's page in a browser is the test's `run()`.
"""

from __future__ import annotations

import base64
import json
import re
import zlib
from pathlib import Path

import numpy as np
import pytest
import torch

import classroom
import classroom.plans
import training
from classroom import MemoryClassStore
from explain import coref
from model import checkpoint, pipeline
from model.data import pad
from model.trace import Interventions
from serving.shared_redis import REDIS_URL_ENV
from tests.apptest_util import ROOT, all_text, chart_spec, heatmap_z, no_exception, run_app, title
from tests.apptest_util import state as ss
from ui.page_list import PAGES
from ui.widgets import md

pytestmark = pytest.mark.usefixtures("one_torch_thread")
PLANS = sorted((ROOT / "assets" / "plans").glob("*.json"))
STOP_PAGES = {p.url_path for p in PAGES if p.url_path != "classroom"}


@pytest.fixture
def store(app_store):
    return app_store()


def banner(at) -> str:
    return " ".join(e.value for e in at.info if "Stop " in e.value)


def sidebar_text(at) -> str:
    return " ".join(m.value for m in at.sidebar.markdown) + " " + " ".join(c.value for c in at.sidebar.caption)


def teacher_with_plan(name: str):
    t = run_app("classroom")
    t.selectbox(key="plan_shipped").set_value(name).run()
    t.button(key="plan_start").click().run()
    no_exception(t)
    return t, ss(t, "class_code")


def students(code: str, n: int):
    out = [run_app(query={"class": code}) for _ in range(n)]
    for s in out:
        no_exception(s)
    return out


def shipped(name: str) -> classroom.plans.Plan:
    read = (classroom.plans.read_plan(f.read_bytes(), STOP_PAGES) for f in PLANS)
    return next(plan for plan in read if plan.title == name)


def grids(at) -> set[str]:
    """The keys of the charts the page drew: "multi_head_grid_0" is the multi-head page's grid of head 0."""
    return {el.proto.id.rsplit("-", 1)[-1] for el in at.get("plotly_chart")}


def cross_attention_grids(s) -> set[str]:
    """The multi-head page's head grids drawn for decoder layer 1's encoder-decoder attention (where the plan's
    mystery head is), by their keys: "multi_head_grid_0" is head 0's."""
    s.radio(key="multi_head_kind").set_value("decoder cross-attention (encoder-decoder)").run()
    s.selectbox(key="multi_head_layer").set_value(1).run()
    no_exception(s)
    return grids(s)


# -- a whole plan --------------------------------------------------------------------------------------------------
def test_plan_moves_the_class_stop_by_stop(store):
    plan = shipped("What decides il or elle")
    t, code = teacher_with_plan(plan.title)
    assert store.pace(code)["stop"] == 0 and store.plan(code)["title"] == plan.title
    assert title(t) == "Classroom"  # the teacher stays where the code and the QR code are (walk finding D23)
    assert store.snapshot(code).state["page"] == plan.stops[0].state["page"]  # the class is at the first stop
    class_ = students(code, 3)
    for s in class_:
        assert ss(s, "sentence") == plan.stops[0].state["sentence"] and title(s) == "The Transformer at a glance"
        assert f"Stop 1 of {len(plan.stops)}" in banner(s) and "became il" in banner(s)

    t.sidebar.button(key="plan_next").click().run()  # stop 2: the wide sentence and a question
    no_exception(t)
    for s in class_:
        s.run()
        assert ss(s, "sentence").endswith("too wide") and f"Stop 2 of {len(plan.stops)}" in banner(s)
        assert ss(s, "_class_snap").question.options == ("animal", "street", "it", "wide")
    class_[0].button(key="class_answer_1_3").click().run()  # a stop's question is a peer-instruction vote
    assert store.votes(code, secret=ss(t, "_class_secret")).first == {3: 1}

    for _ in range(3):  # to stop 5: the mystery head, on the multi-head page
        t.sidebar.button(key="plan_next").click().run()
    no_exception(t)
    assert store.pace(code)["stop"] == 4 and ss(t, "_class_published")["page"] == "multi_head"
    s = class_[1]
    s.run()
    assert title(s) == "Multi-head attention" and "mystery" in banner(s)
    grid = cross_attention_grids(s)
    assert "multi_head_grid_0" not in grid and {"multi_head_grid_1", "multi_head_grid_3"} <= grid
    assert "the mystery head" in all_text(s)
    t.sidebar.button(key="plan_reveal").click().run()
    assert store.pace(code)["reveal"] is True
    s.run()
    assert "multi_head_grid_0" in grids(s)

    # a student who explores is not moved; Follow takes them back to the class's stop
    leaver = class_[2]
    leaver.sidebar.button(key="class_detach").click().run()
    t.sidebar.button(key="plan_next").click().run()  # stop 6: one head off
    leaver.run()
    assert ss(leaver, "heads_off") == [] and "Exploring" in sidebar_text(leaver)
    class_[0].run()
    assert ss(class_[0], "heads_off") == ["dec.1.cross_attn:0"]
    leaver.sidebar.button(key="class_follow").click().run()
    leaver.run()
    assert ss(leaver, "heads_off") == ["dec.1.cross_attn:0"]
    t.sidebar.button(key="plan_back").click().run()
    class_[0].run()
    assert store.pace(code)["stop"] == 4 and ss(class_[0], "heads_off") == []
    for at in (t, *class_):
        no_exception(at)


def test_a_next_in_the_middle_of_the_mystery_vote_keeps_the_head_hidden(store):
    """Stop 5 asks where the mystery head looks; the teacher presses Next (stop 6, the same page) before revealing:
    the head's weights stay hidden while the vote is open, and appear with the reveal of the question."""
    plan = shipped("What decides il or elle")
    t, code = teacher_with_plan(plan.title)
    (s,) = students(code, 1)
    for _ in range(4):  # to stop 5: the mystery head, and its question
        t.sidebar.button(key="plan_next").click().run()
    assert plan.stops[4].hidden_head and plan.stops[4].question
    t.sidebar.button(key="plan_next").click().run()  # stop 6, the vote still open
    no_exception(t)
    s.run()
    assert store.pace(code)["stop"] == 5 and not store.snapshot(code).revealed
    grid = cross_attention_grids(s)
    assert "multi_head_grid_0" not in grid and {"multi_head_grid_1", "multi_head_grid_3"} <= grid
    assert "the mystery head" in all_text(s)
    t.session_state["_class_moved"] = None  # (AppTest sends no browser address: its next clicks would count as late)
    t.switch_page("pages/multi_head.py")  # the teacher's screen, the one the projector shows, hides it too
    t.run()
    assert "multi_head_grid_0" not in cross_attention_grids(t)
    t.session_state["_class_moved"] = None  # (AppTest sends no browser address: a move back would count as late)
    t.switch_page("pages/classroom.py")
    t.run()
    t.button(key="class_lock_vote").click().run()
    t.button(key="class_reveal").click().run()  # the question's reveal gives the head back
    no_exception(t)
    s.run()
    assert "multi_head_grid_0" in grids(s)


def test_the_stop_s_and_the_teacher_s_pickers_are_every_follower_s(store):
    """Stop 5 names its figure (decoder cross-attention, layer 1, where the mystery head is): every follower lands on
    it without choosing. The teacher's next choice of a picker moves every follower's; a student's own choice of
    the head in detail keeps them following, and stays theirs until the teacher picks another head. A request
    that crossed the teacher's move (it carries the picker's old value) is the teacher's again."""
    plan = shipped("What decides il or elle")
    t, code = teacher_with_plan(plan.title)
    a, b = students(code, 2)
    for _ in range(4):  # to stop 5
        t.sidebar.button(key="plan_next").click().run()
    for s in (a, b):
        s.run()
        no_exception(s)
        assert title(s) == "Multi-head attention" and "mystery" in banner(s)
        assert (
            ss(s, "multi_head_kind") == "decoder cross-attention (encoder-decoder)" and ss(s, "multi_head_layer") == 1
        )
        assert "multi_head_grid_0" not in grids(s) and {"multi_head_grid_1", "multi_head_grid_3"} <= grids(s)
    a.selectbox(key="multi_head_head").set_value(2).run()  # a's own look at head 2: a still follows
    assert ss(a, "class_following") and "Exploring" not in sidebar_text(a)

    t.session_state["_class_moved"] = None  # (AppTest sends no browser address: its next clicks would count as late)
    t.switch_page("pages/multi_head.py")  # the projector's screen
    t.run()
    t.selectbox(key="multi_head_layer").set_value(0).run()  # the teacher looks at layer 0
    assert ss(t, "_class_published")["view"]["multi_head_layer"] == 0
    assert "Stop 5" not in banner(t)  # layer 0 is not the stop's figure any more
    for s in (a, b):
        s.run()
        no_exception(s)
        assert ss(s, "multi_head_layer") == 0 and ss(s, "class_following")
    assert ss(a, "multi_head_head") == 2 and ss(b, "multi_head_head") == 0  # a's own head: the teacher moved none
    a.selectbox(key="multi_head_layer").set_value(1).run()  # a request sent before the move reached a's browser
    assert ss(a, "multi_head_layer") == 0
    a.session_state["_class_view_at"] = ({}, 0.0)  # later, a picker is the student's to change
    a.selectbox(key="multi_head_layer").set_value(1).run()
    assert ss(a, "multi_head_layer") == 1 and ss(a, "class_following")
    t.selectbox(key="multi_head_head").set_value(3).run()  # the teacher's head in detail: everyone's
    a.run()
    assert ss(a, "multi_head_head") == 3 and ss(a, "multi_head_layer") == 1  # (the layer the teacher did not move)


def test_a_picker_streamlit_forgot_takes_the_teacher_s_choice_again():
    """Streamlit forgets a picker's value in a run that does not draw it (a request that crossed the class's move, from
    the page the move left): in Chromium a follower then showed encoder self-attention at the mystery stop. A picker
    with no value takes the teacher's, in a state that did not move it and in a run with no new state; a picker
    with a value of the student's own keeps it while the teacher does not move it."""
    from streamlit.testing.v1 import AppTest

    def script():
        import streamlit as st

        from ui.classroom import session

        kind = "decoder cross-attention (encoder-decoder)"
        before = {"page": "multi_head", "view": {"multi_head_kind": kind, "multi_head_layer": 1, "multi_head_head": 0}}
        st.session_state["multi_head_head"] = 2  # the student's own head; kind and layer: forgotten
        session.apply({**before, "iv_scale": False}, before)
        st.write(repr([st.session_state.get(k) for k in ("multi_head_kind", "multi_head_layer", "multi_head_head")]))
        del st.session_state["multi_head_layer"]
        session.follow_view(before)
        st.write(repr(st.session_state.get("multi_head_layer")))

    at = AppTest.from_function(script)
    at.run()
    assert [m.value for m in at.markdown] == ["['decoder cross-attention (encoder-decoder)', 1, 2]", "1"]


@pytest.mark.parametrize("page", [p for p in PAGES if p.view], ids=lambda p: p.name)
def test_every_shared_picker_is_a_widget_of_its_page(page):
    """ui/page_list.py names each page's shared pickers by their keys: each one is a widget the page draws (the
    self-attention page's textbook query, in its textbook mode)."""
    at = run_app(page.name)
    drawn: set[str] = set()
    for kind in ("radio", "selectbox", "select_slider"):
        drawn |= {w.key for w in at.get(kind)}
    if page.name == "self_attention":
        at.radio(key="self_attention_mode").set_value(at.radio(key="self_attention_mode").options[1]).run()
        drawn |= {w.key for w in at.get("radio")}
    assert set(page.view) <= drawn


def test_a_shared_view_writes_only_the_pages_pickers(store):
    """The view a teacher shares is checked for its form by the store, and a student's session takes only the keys
    of pages' pickers from it: a hostile teacher cannot write a student's role, secret or sentence through it."""
    from classroom import InvalidInput
    from classroom.rules import check_state

    for bad in (
        [1],
        {"multi_head_layer": True},
        {"multi_head_layer": 1000},
        {"a b": 1},
        {f"k{i}": 1 for i in range(9)},
    ):
        with pytest.raises(InvalidInput):
            check_state({"page": "multi_head", "view": bad})
    with pytest.raises(InvalidInput):
        check_state({"page": "multi_head", "view": {"multi_head_kind": "<b>x</b>"}})
    t = run_app("classroom")
    t.button(key="class_start").click().run()
    code = ss(t, "class_code")
    (s,) = students(code, 1)
    view = {
        "class_role": "teacher",
        "_class_secret": "x",
        "sentence": "go",
        "multi_head_kind": "decoder self-attention (masked)",
    }
    store.set_state(code, ss(t, "_class_secret"), {"page": "multi_head", "view": view})
    s.run()
    no_exception(s)
    assert ss(s, "multi_head_kind") == "decoder self-attention (masked)" and ss(s, "class_role") == "student"
    assert ss(s, "sentence") != "go" and "_class_secret" not in s.session_state


def test_a_revealed_question_leaves_with_the_stop_and_an_open_one_stays(store):
    """Stop 2's question, revealed, then Next (stop 3 asks nothing): it leaves every screen instead of filling a
    phone's first screen above the next stop; a question still open when the teacher moves on stays open."""
    plan = shipped("What decides il or elle")
    t, code = teacher_with_plan(plan.title)
    (s,) = students(code, 1)
    t.sidebar.button(key="plan_next").click().run()  # stop 2: the question
    assert plan.stops[1].question and not plan.stops[2].question
    s.run()
    assert "Question from your teacher" in " ".join(m.value for m in s.markdown)
    t.session_state["_class_moved"] = None  # (AppTest sends no browser address: a move back would count as late)
    t.switch_page("pages/classroom.py")
    t.run()
    t.button(key="class_lock_vote").click().run()
    t.button(key="class_reveal").click().run()
    assert store.snapshot(code).revealed
    t.sidebar.button(key="plan_next").click().run()  # stop 3
    no_exception(t)
    assert store.snapshot(code).question is None
    s.run()
    no_exception(s)
    assert "Question from your teacher" not in " ".join(m.value for m in s.markdown)
    t.sidebar.button(key="plan_back").click().run()  # stop 2 again: asked again, open
    t.sidebar.button(key="plan_next").click().run()  # stop 3, the vote not revealed: it stays
    assert store.snapshot(code).question is not None and not store.snapshot(code).revealed


def test_revealing_the_mystery_head_reveals_its_open_question_and_the_next_stop_shows_the_head(store):
    """At stop 5, "Reveal the mystery head" during the vote: the question is revealed with it (its answer is now on
    every screen), so the next stop, the vote closed, draws the head too."""
    plan = shipped("What decides il or elle")
    t, code = teacher_with_plan(plan.title)
    (s,) = students(code, 1)
    for _ in range(4):
        t.sidebar.button(key="plan_next").click().run()
    assert store.snapshot(code).question is not None and not store.snapshot(code).revealed
    t.sidebar.button(key="plan_reveal").click().run()
    no_exception(t)
    assert store.pace(code)["reveal"] is True and store.snapshot(code).revealed
    t.sidebar.button(key="plan_next").click().run()
    s.run()
    assert "multi_head_grid_0" in cross_attention_grids(s)


def test_the_projector_drops_the_stops_banner_in_the_run_that_leaves_the_stops_page(store):
    """The teacher, at stop 1 (the overview), moves to the tokens page: that very run says the teacher left the stop
    (the plan's bar and the stop's banner were drawn with the page before, until the projector's next run)."""
    t, _ = teacher_with_plan("What decides il or elle")
    t.switch_page("pages/overview.py")
    t.run()
    assert "Stop 1 of 9" in banner(t) and "you left it" not in sidebar_text(t)
    t.switch_page("pages/tokens.py")
    t.run()
    no_exception(t)
    assert title(t) == "Tokens and embeddings"
    assert banner(t) == "" and "you left it" in sidebar_text(t)


# -- pacing --------------------------------------------------------------------------------------------------------
def test_pace_pause_free_and_plan_modes(store):
    t, code = teacher_with_plan("Masks: how a decoder could cheat")
    follower, explorer = students(code, 2)
    explorer.sidebar.button(key="class_detach").click().run()
    q_before = store.counters(code).q
    t.sidebar.button(key="pace_pause").click().run()
    assert store.pace(code)["paused"] is True and store.counters(code).q == q_before + 1  # explorers hear it too
    for s in (follower, explorer):
        s.run()
        no_exception(s)
        assert title(s) == "Eyes on the projector" and not s.get("plotly_chart")
    assert title(t) != "Eyes on the projector"  # the projector itself is not paused
    t.sidebar.button(key="pace_resume").click().run()
    for s in (follower, explorer):
        s.run()
        assert title(s) == "The decoder and masking"
    assert "Following class" in sidebar_text(follower) and "Exploring · class" in sidebar_text(explorer)

    # free: nobody is moved, the badge says so; the teacher's next stop reaches nobody
    t.switch_page("pages/classroom.py")
    t.run()
    t.radio(key="pace_mode").set_value("free").run()
    assert store.pace(code)["mode"] == "free"
    t.sidebar.button(key="plan_next").click().run()  # stop 2: the mask switched off
    follower.run()
    assert ss(follower, "iv_look_ahead") is True and "your teacher's choice" in sidebar_text(follower)
    assert "explore freely" in sidebar_text(follower)

    # plan: students pick among the stops so far
    t.session_state["_class_moved"] = None  # (AppTest sends no browser address: a move back so soon looks late)
    t.switch_page("pages/classroom.py")
    t.run()
    t.radio(key="pace_mode").set_value("plan").run()
    follower.run()
    box = follower.sidebar.selectbox(key="plan_visit")
    plan = shipped("Masks: how a decoder could cheat")
    assert len(box.options) == 2  # the stops so far: the class is on the second
    for i, option in enumerate(box.options):
        assert option.startswith(f"{i + 1}. {plan.stops[i].caption[:40]}") and len(option) <= 90
    follower.sidebar.toggle(key="iv_look_ahead").set_value(False).run()
    follower.sidebar.selectbox(key="plan_visit").set_value(0).run()  # stop 1: the mask on
    assert ss(follower, "iv_look_ahead") is True
    follower.sidebar.selectbox(key="plan_visit").set_value(1).run()  # stop 2: the mask off
    assert ss(follower, "iv_look_ahead") is False

    # lead again: the follower takes the teacher's state (stop 2)
    t.radio(key="pace_mode").set_value("lead").run()
    follower.run()
    assert ss(follower, "iv_look_ahead") is False and "Following class" in sidebar_text(follower)

    # free again: a follower on the lesson is not led, and has the lesson's own Back / Next
    t.radio(key="pace_mode").set_value("free").run()
    follower.switch_page("pages/lesson.py")
    follower.run()
    keys = {b.key for b in follower.button}
    assert "lesson_next" in keys and "lesson_explore" not in keys, keys
    for at in (t, follower, explorer):
        no_exception(at)


def test_pace_forged_by_a_student_session_does_nothing(store):
    t, code = teacher_with_plan("Masks: how a decoder could cheat")
    (s,) = students(code, 1)
    before = store.pace(code)
    s.session_state["class_role"] = "teacher"  # a session claiming the role, without the class's secret
    s.session_state["_class_secret"] = "forged-secret-forged-secret"
    s.run()  # the teacher's panel asks the store with that secret: refused, the session loses the role
    assert store.pace(code) == before and ss(s, "class_role") is None and ss(s, "_class_secret") is None
    assert not any(b.key == "pace_pause" for b in s.sidebar.button)
    no_exception(s)


# -- snapshots -----------------------------------------------------------------------------------------------------
def test_snapshot_sent_shown_in_the_gallery_and_projected(store):
    t, code = teacher_with_plan("What decides il or elle")
    sender, follower = students(code, 2)
    sender.sidebar.button(key="class_detach").click().run()  # explores on their own: the controls are theirs
    sender.sidebar.multiselect(key="heads_off").select("dec.1.cross_attn:0").run()
    sender.sidebar.text_area(key="shot_note").input("head 0 breaks il/elle!")
    sender.sidebar.button(key="shot_send").click().run()
    no_exception(sender)
    assert any("Snapshot 1 sent" in el.value for el in sender.toast)
    t.switch_page("pages/classroom.py")
    t.run()
    assert "head 0 breaks il/elle\\!" in all_text(t) and "Snapshots from students (1)" in all_text(t)
    t.button(key="shot_project_1").click().run()
    t.run()
    no_exception(t)
    assert ss(t, "heads_off") == ["dec.1.cross_attn:0"] and store.snapshot(code).state["heads_off"] == [
        "dec.1.cross_attn:0"
    ]
    follower.run()
    assert ss(follower, "heads_off") == ["dec.1.cross_attn:0"] and title(follower) == "The Transformer at a glance"
    for note in ("two", "three"):
        sender.sidebar.text_area(key="shot_note").input(note)
        sender.sidebar.button(key="shot_send").click().run()
    sender.sidebar.button(key="shot_send").click().run()  # the fourth in a minute
    assert any("not sent: Too many attempts" in el.value for el in sender.toast)
    assert len(store.shots(code, ss(t, "_class_secret"))) == 3


# -- building, saving and loading a plan ---------------------------------------------------------------------------
def test_plan_built_in_the_app_saved_as_link_and_file():
    at = run_app("multi_head")
    at.sidebar.text_input(key="sentence").input("i am a student").run()
    at.sidebar.toggle(key="iv_scale").set_value(False).run()
    at.switch_page("pages/classroom.py")
    at.run()
    at.text_input(key="plan_title").input("My plan")
    at.text_input(key="plan_caption").input("Without scaling, look at the rows")
    at.selectbox(key="plan_hidden").set_value("enc.0.self_attn:1")
    at.selectbox(key="plan_question").set_value("no_mask")
    at.button(key="plan_add_stop").click().run()
    no_exception(at)
    plan = ss(at, "plan_draft")
    q = plan.stops[0].question  # made from the view and answered by the models: "je je je" is not "je suis étudiant"
    assert q["options"][q["answer"]].startswith("No") and "i am a student" in q["text"]
    assert "Without scaling, look at the rows" in all_text(at) and "off: √d_k scaling" in all_text(at)
    assert plan.title == "My plan" and len(plan.stops) == 1
    stop = plan.stops[0]
    assert (stop.state["page"], stop.state["sentence"], stop.state["iv_scale"], stop.hidden_head) == (
        "multi_head",
        "i am a student",
        False,
        "enc.0.self_attn:1",
    )
    link = next(c.value for c in at.code if "?plan=" in c.value)
    assert classroom.plans.plan_from_link(link.split("?plan=")[1], STOP_PAGES) == plan
    opened = run_app("classroom", query={"plan": link.split("?plan=")[1]})
    no_exception(opened)
    assert ss(opened, "plan_draft") == plan and "plan" not in opened.query_params
    assert "Without scaling, look at the rows" in all_text(opened)
    uploaded = run_app("classroom")
    uploaded.file_uploader(key="plan_file").set_value(("plan.json", plan.to_json().encode(), "application/json"))
    uploaded.run()
    assert ss(uploaded, "plan_draft") == plan


@pytest.mark.parametrize(
    "raw",
    [
        b"{not json",
        b"[]" * 40_000,
        json.dumps(
            {
                "format": classroom.plans.FORMAT,
                "title": "x",
                "stops": [{"caption": "<img src=x onerror=alert(1)>", "state": {"page": "overview"}}],
            }
        ).encode(),
        json.dumps(
            {
                "format": classroom.plans.FORMAT,
                "title": "x",
                "stops": [{"caption": "x", "state": {"page": "../../etc"}}],
            }
        ).encode(),
    ],
)
def test_hostile_plan_file_in_the_app(raw):
    at = run_app("classroom")
    at.file_uploader(key="plan_file").set_value(("plan.json", raw, "application/json"))
    at.run()
    no_exception(at)
    warnings = [w.value for w in at.warning]
    assert len(warnings) == 1 and warnings[0].startswith("This file cannot be used as a lesson plan")
    assert ss(at, "plan_draft") is None and "onerror" not in all_text(at).replace(warnings[0], "")


@pytest.mark.parametrize("token", ["garbage!", "A" * 9000, "eJwLycgsVgCiRIWS1OISAE6XBoY"])
def test_hostile_plan_link_in_the_app(token):
    at = run_app("classroom", query={"plan": token})
    no_exception(at)
    warnings = [w.value for w in at.warning]
    assert len(warnings) == 1 and "link's lesson plan cannot be used" in warnings[0]
    assert ss(at, "plan_draft") is None and "plan" not in at.query_params


# A lone surrogate is valid JSON ("\\ud800") but no page can send it: the refusal quotes it escaped (issue 37, F6)
SURROGATE_PLAN = (
    '{"format": "glass-plan/1", "title": "t", "stops": [{"caption": "", "state": {"page": "overview", "\\ud800x": 1}}]}'
)


@pytest.mark.parametrize("page", ["classroom", "overview"])
def test_a_plan_with_a_lone_surrogate_is_refused_in_words_on_every_page(page):
    """The refusal's message quotes the key escaped: on the Classroom page a warning, elsewhere app.py's toast
    (before: an apology, and on any other page Streamlit's bare error box)."""
    token = base64.urlsafe_b64encode(zlib.compress(SURROGATE_PLAN.encode(), 9)).decode().rstrip("=")
    at = run_app(page, query={"plan": token})
    no_exception(at)
    shown = [w.value for w in at.warning] + [t.value for t in at.toast]
    assert any(
        "link's lesson plan cannot be used" in m and "unknown state keys" in m and "ud800x" in m for m in shown
    ), shown
    assert ss(at, "plan_draft") is None


def test_a_plan_file_saved_with_a_byte_order_mark_opens():
    """Some editors save UTF-8 with a byte-order mark: it is no reason to refuse the file as "not JSON"."""
    plan = next(iter(classroom.plans.read_plan(path.read_bytes(), STOP_PAGES) for path in PLANS))
    at = run_app("classroom")
    at.file_uploader(key="plan_file").set_value(
        ("plan.json", b"\xef\xbb\xbf" + plan.to_json().encode(), "application/json")
    )
    at.run()
    no_exception(at)
    assert ss(at, "plan_draft") == plan


# -- the shipped plans say what the model does ---------------------------------------------------------------------
def _iv(state: dict) -> Interventions:
    heads = frozenset((h.split(":")[0], int(h.split(":")[1])) for h in state["heads_off"])
    return Interventions(
        heads_off=heads,
        look_ahead_mask=state["iv_look_ahead"],
        padding_mask=state["iv_padding"],
        scale=state["iv_scale"],
        positional_encoding=state["iv_pos"],
    )


@pytest.fixture(scope="module")
def bundles():
    return {"base": checkpoint.load(checkpoint.SHIPPED), "no_mask": checkpoint.load(checkpoint.SHIPPED_NO_MASK)}


def test_shipped_plans_quote_the_models_own_translations(bundles):
    titles, quoted = set(), 0
    for path in PLANS:
        plan = classroom.plans.read_plan(path.read_bytes(), STOP_PAGES)
        titles.add(plan.title)
        for stop in plan.stops:
            b = bundles[stop.state["model"]]
            a = pipeline.analyse(b, pipeline.prepare(b, stop.state["sentence"]), _iv(stop.state))
            for claim in re.findall("«([^»]*)»", stop.caption):  # a quoted translation is the stop's own output
                assert claim == a.translation, (plan.title, stop.caption)
                quoted += 1
    assert titles == {
        "Thinking Machines in a dozen stops",
        "What decides il or elle",
        "Masks: how a decoder could cheat",
    }
    assert quoted >= 10
    assert len(shipped("Thinking Machines in a dozen stops").stops) == 12


def test_shipped_plans_questions_and_claims_hold(bundles):
    base, cheat = bundles["base"], bundles["no_mask"]
    elle = shipped("What decides il or elle")
    # stop 3: no encoder head picks the animal out for "it"
    tired = elle.stops[2].state["sentence"]
    p = pipeline.prepare(base, tired)
    links = coref.encoder_links(pipeline.analyse(base, p).trace, base.config.n_enc_layers, coref.coref_parts(p.tokens))
    assert not links.links
    # stop 4: in decoder layer 0, every head's pronoun row looks most at the adjective
    d = coref.decision(base, tired)
    a = pipeline.analyse(base, p)
    rows = a.trace["dec.0.cross_attn.weights"][0, :, d.row]  # [H, Ts]
    assert torch.all(rows.argmax(-1) == d.adjective_pos) and a.out_tokens[d.row] == "il"
    # stops 2 and 5: the answers of their questions
    assert elle.stops[1].question["options"][elle.stops[1].question["answer"]] == "wide"
    wide = elle.stops[4]
    pw = pipeline.prepare(base, wide.state["sentence"])
    dw = coref.decision(base, wide.state["sentence"])
    module, head = wide.hidden_head.split(":")
    row = pipeline.analyse(base, pw).trace[f"{module}.weights"][0, int(head), dw.row]
    assert pw.tokens[int(row.argmax())] == wide.question["options"][wide.question["answer"]] == "wide"
    # the masks plan: what the model trained without the mask writes
    masks = shipped("Masks: how a decoder could cheat")
    q = next(s.question for s in masks.stops if s.question)
    sentence = masks.stops[2].state["sentence"]
    assert pipeline.analyse(cheat, pipeline.prepare(cheat, sentence)).translation == q["options"][q["answer"]]
    # the dozen stops: √d_k as the caption says
    assert "√d_k = √32" in shipped("Thinking Machines in a dozen stops").stops[6].caption
    assert base.config.d_model // base.config.n_heads == 32


def test_shipped_plans_claim_only_what_their_runs_show(bundles):
    """Audit 4: every caption and question of the shipped plans at the strength its run gives it (B2, B4, B9, C1,
    D3), and the il/elle plan's tracing stops answered by the tracing itself."""
    from explain import tracing
    from explain.lesson import STEPS
    from model.data import load_dataset
    from model.decoding import greedy_batch
    from viz import lesson

    base = bundles["base"]
    elle = shipped("What decides il or elle")
    # B4: the question has one answer: the one word of the options that differs between the two sentences
    q = elle.stops[1].question
    changed = set(elle.stops[0].state["sentence"].split()) ^ set(elle.stops[1].state["sentence"].split())
    assert q["text"] == "Which one word, changed, turned il into elle?"
    assert [o for o in q["options"] if o in changed] == [q["options"][q["answer"]]] == ["wide"]
    assert not any(w in elle.stops[1].caption.split() for w in changed | {"tired", "wide"})  # the caption: no answer
    # B9: no head gives either noun more than 0.13 of "it"'s attention (L1 h0 gives "animal" 4.7x "street": no
    # "clearly more" claim either way)
    p = pipeline.prepare(base, elle.stops[2].state["sentence"])
    t = pipeline.analyse(base, p).trace
    it = torch.stack([t[f"enc.{i}.self_attn.weights"][0, :, 7] for i in range(2)])  # [L, H, Ts]
    assert round(float(it[..., [1, 5]].max()), 2) <= 0.13 < round(float(it[..., [1, 5]].max()), 2) + 0.01
    assert "no head gives either noun more than 0.13" in elle.stops[2].caption
    # stop 6: the mystery head is the one whose pronoun row reads "wide" most
    d = coref.decision(base, elle.stops[5].state["sentence"])
    best = max(((i, h) for i in range(2) for h in range(4)), key=lambda lh: d.reads[lh[0]][lh[1]])
    assert f"dec.{best[0]}.cross_attn:{best[1]}" == elle.stops[4].hidden_head == elle.stops[5].state["heads_off"][0]
    assert "carr" not in elle.stops[5].caption  # a head switched off: the pronoun survives, nothing "carries"
    # the tracing stops: the question's answer is what the tracing measures
    trace_tw = tracing.trace_pair(
        base, tracing.pair(base, elle.stops[7].state["sentence"], coref.partner(elle.stops[7].state["sentence"]))
    )
    assert elle.stops[7].state["page"] == "tracing"
    q = elle.stops[7].question
    words = trace_tw.pair.clean.tokens
    restored = {o: max(row[words.index(o)] for row in trace_tw.encoder.share) for o in q["options"]}
    assert max(restored, key=restored.get) == q["options"][q["answer"]] == "tired"
    assert sorted(restored.values())[-2] < 0.5 <= restored["tired"]
    wide = elle.stops[8].state["sentence"]
    trace_wt = tracing.trace_pair(base, tracing.pair(base, wide, coref.partner(wide)))
    lost = trace_wt.mask.share[-1][10]
    q = elle.stops[8].question
    assert q["options"][q["answer"]] == (
        "almost none" if lost < 0.1 else "almost all of it" if lost > 0.9 else "about half"
    )
    # B2: with the mask off, "i am a student" keeps its translation but 17 of the 586 held-out sentences change
    masks = shipped("Masks: how a decoder could cheat")
    held = load_dataset()["heldout"]
    src = pad([list(pipeline.prepare(base, x.src).ids) for x in held])
    on, off = (greedy_batch(base.model, src, Interventions(look_ahead_mask=m)) for m in (True, False))
    changed = sum(a != b for a, b in zip(on, off, strict=True))
    assert f"on {changed} of the {len(held)} held-out sentences the translation changes" in masks.stops[1].caption
    assert "no future to see yet" not in masks.stops[1].caption
    # C1: the dozen stops answer their first question at the step that shows where "pensantes" reads; D3: z is one
    # head's share, joined at the step that concatenates the heads
    tm = shipped("Thinking Machines in a dozen stops")
    last = tm.stops[-1].state["step"]
    assert STEPS[last - 1].key == "cross" and "“pensantes”" in tm.stops[0].caption
    a = pipeline.analyse(base, pipeline.prepare(base, "thinking machines"))
    notice = lesson.view("cross", lesson.context(a, base.tgt_vocab.itos, len(base.src_vocab))).notice
    assert "the row writing “pensantes” reads “thinking”" in notice and "“pensantes”" in tm.stops[-1].caption
    concat = next(i for i, st in enumerate(STEPS, start=1) if st.key == "concat")
    assert f"one head's share of what self-attention hands on (step {concat} joins the heads)" in tm.stops[8].caption


def test_shipped_plan_files_are_small_and_linkable():
    for path in PLANS:
        plan = classroom.plans.read_plan(Path(path).read_bytes(), STOP_PAGES)
        assert len(classroom.plans.plan_to_link(plan)) < 2000


@pytest.fixture
def local_training(monkeypatch):
    """A fresh local pool for a test that trains: an earlier test of the session may have left the process-wide
    training service on a Redis queue (tests/test_pages_training.py does the same)."""
    from training.local_pool import LocalPool

    pool = LocalPool(starts_per_minute=1000, jobs_per_client=10)
    monkeypatch.delenv(REDIS_URL_ENV, raising=False)
    monkeypatch.setattr(training, "_SERVICE", pool)
    yield pool
    for job in pool.active_jobs():
        job.stop("test ended")
        job.join(60)
    pool.shutdown()


# -- the class board: students' own runs side by side -------------------------------------------------------------
def test_shared_run_board_of_students_runs(monkeypatch, local_training):
    """Two students train their own tiny models (the real background job) and put them on the class board; the
    teacher's classroom page shows both side by side. (The board on Redis: tests/test_class_plans.py.)"""
    from tests.test_pages_training import finish, start

    monkeypatch.delenv(REDIS_URL_ENV, raising=False)
    monkeypatch.setitem(classroom._stores, "", MemoryClassStore(classes_per_client=1000, class_starts_per_minute=1000))
    t, code = teacher_with_plan("Masks: how a decoder could cheat")
    runs = []
    for d_model in (16, 24):
        (s,) = students(code, 1)
        s.switch_page("pages/training.py")
        s.run()
        view = finish(s, start(s, training_d_model=d_model, training_steps=10, training_eval_every=0))
        s.button(key="board_post").click().run()
        no_exception(s)
        assert any(f"Your run is on the class board, as student {len(runs) + 1}" in el.value for el in s.toast)
        runs.append(view)
    t.switch_page("pages/classroom.py")
    t.run()
    no_exception(t)
    table = t.dataframe[-1].value
    assert list(table["d_model"]) == [16, 24]
    for (_, row), view in zip(table.iterrows(), runs, strict=True):
        assert row["last loss"] == round(view.losses[-1], 3)
        assert row["exact match"] == f"{view.evals[-1].exact_match:.0%}"
        assert row["translation"] == view.evals[-1].samples[0][1].replace("<", "‹").replace(">", "›")
    best = min((0, 1), key=lambda i: runs[i].losses[-1])
    said = f"student {best + 1}'s run ends with the lowest training loss ({runs[best].losses[-1]:.3f})"
    assert md(said) in all_text(t)
    lines = [
        tr
        for el in t.get("plotly_chart")
        for tr in json.loads(el.proto.spec)["data"]
        if tr.get("name", "").startswith("student ")
    ]
    assert [tr["name"] for tr in lines] == ["student 1", "student 2"]


def test_shared_run_of_the_teacher_followed_by_the_class(monkeypatch, local_training):
    """The teacher trains on "Train your own" while teaching: the run reaches every following student's page (its
    step, its loss curve), and its result when it ends; a student who explores on their own is left alone."""
    from tests.test_pages_training import finish, start

    monkeypatch.delenv(REDIS_URL_ENV, raising=False)
    store = MemoryClassStore(classes_per_client=1000, class_starts_per_minute=1000)
    monkeypatch.setitem(classroom._stores, "", store)
    t, code = teacher_with_plan("Masks: how a decoder could cheat")
    follower, explorer = students(code, 2)
    explorer.sidebar.button(key="class_detach").click().run()
    t.switch_page("pages/training.py")
    t.run()
    job = start(t, training_steps=12, training_eval_every=0)
    seq = store.counters(code).seq
    view = finish(t, job)  # the teacher's page redraws its panel: the finished run is shared
    shared = store.class_run(code)
    assert store.counters(code).seq > seq
    assert (shared["state"], shared["step"], shared["total"]) == ("finished", 12, 12)
    assert shared["losses"][-1] == pytest.approx(view.losses[-1]) and shared["steps"][-1] == 12
    assert shared["exact_match"] == pytest.approx(view.evals[-1].exact_match)
    snap = [s for s in view.snapshots if s.probe == 0][-1]  # the run's latest attention snapshot reaches the class
    att = shared["attention"]
    assert att["step"] == snap.step and att["keys"] == [w.replace("<", "‹").replace(">", "›") for w in snap.src_labels]
    assert np.allclose(att["weights"], snap.cross[-1].mean(axis=0), atol=5e-4)
    follower.run()
    no_exception(follower)
    assert (
        ":material/model_training: **Your teacher's training run finished after 12 steps** · training loss "
        f"{view.losses[-1]:.3f}" in all_text(follower)
    )
    assert np.allclose(heatmap_z(chart_spec(follower, "class_run_attention")), att["weights"], atol=1e-6)
    curve = next(
        tr
        for el in follower.get("plotly_chart")
        for tr in json.loads(el.proto.spec)["data"]
        if tr.get("name") == "teacher's run"
    )
    assert curve["x"][-1] == 12 and curve["y"][-1] == pytest.approx(view.losses[-1])
    explorer.run()
    assert "Your teacher's training run" not in all_text(explorer)

    # the class explores the teacher's model: one click makes it the student's own, on every page
    assert shared["model"] == 1
    follower.button(key="class_run_use").click().run()
    no_exception(follower)
    mine, theirs = ss(follower, "my_model"), job.result
    assert ss(follower, "model") == "mine" and mine.config == theirs.config
    assert all(
        torch.equal(a, b)
        for a, b in zip(mine.model.state_dict().values(), theirs.model.state_dict().values(), strict=True)
    )
    assert "You explore this model" in all_text(follower) and not any(b.key == "class_run_use" for b in follower.button)
    t.button(key="training_use_mine").click().run()  # the teacher shows the run's model: the class is told
    assert ss(t, "model") == "mine" and "your finished run's model is shared with the class" in all_text(t)
    follower.run()
    assert "and so do you: it is “My model”" in " ".join(c.value for c in follower.sidebar.caption)
    follower.switch_page("pages/overview.py")
    follower.run()
    no_exception(follower)
    sentence = ss(follower, "sentence")
    expected = pipeline.analyse(theirs, pipeline.prepare(theirs, sentence)).translation
    shipped_says = pipeline.analyse(
        checkpoint.load(checkpoint.SHIPPED), pipeline.prepare(checkpoint.load(checkpoint.SHIPPED), sentence)
    ).translation
    assert expected != shipped_says  # (the page below shows the teacher's model, not the shipped one)
    assert f"**Translation:** {md(expected) or '*(empty)*'}" in all_text(follower)
