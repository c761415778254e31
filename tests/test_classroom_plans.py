"""Lesson plans, pacing and snapshots in the app (ui/classroom/plans.py, pages/classroom.py): a teacher and
several students, each its own AppTest session of app.py, on the memory store AND a real redis-server started
here: a plan moving the class stop by stop (its questions, its mystery head, the pickers it shares), the pace
(pause, free, plan, lead), and the snapshots students send. Plans built, saved, loaded, hostile and shipped:
tests/test_classroom_plan_files.py; the class board and the teacher's shared run: tests/test_classroom_shared_runs.py.

AppTest runs no JavaScript: the class's event that reruns a student's page in a browser is the test's `run()`.
"""

from __future__ import annotations

import pytest

from tests.apptest_util import all_text, no_exception, run_app, title
from tests.apptest_util import state as ss
from tests.classroom_util import banner, shipped, sidebar_text, students, teacher_with_plan
from tests.classroom_util import store as store  # noqa: F401 - the fixture
from ui.page_list import PAGES


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
