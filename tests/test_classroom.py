"""Classroom mode in the app (ui/classroom/session.py, panels.py, pages/classroom.py): joining, following, leaving.

A teacher and three students, each its own AppTest session of app.py, on the memory store AND on a real
redis-server started here (tests/services.py): following (page, sentence, a switch, a head, the lesson's
step), leaving and rejoining, the end of the class, a failover (a new session from the student's URL), late
requests that must not detach a student, the teacher's own model, and what a student cannot do. AppTest runs no
JavaScript: the class's event that reruns a student's page in a browser is the test's next `run()` here; the event
path itself runs against a real server (tests/test_classroom_servers.py) and in Chromium
(tests/browser/test_classroom_browser.py). Questions and their reveal: tests/test_classroom_questions.py.
"""

from __future__ import annotations

import uuid

import pytest

from classroom import Forbidden, RedisClassStore
from model import checkpoint
from tests.apptest_util import all_text, no_exception, run_app, state, title
from tests.classroom_util import SENTENCE, join_by_link, start_teacher, teacher_line
from tests.classroom_util import store as store  # noqa: F401 - the fixture (tests/test_classroom_walk.py's too)


def teacher_link(teacher) -> str:
    """The join link the teacher's page shows (and its QR code holds)."""
    return next(c.value for c in teacher.code if "class=" in c.value)


def sidebar_text(at) -> str:
    """The sidebar's markdown (st.badge is markdown: ":green-badge[...]")."""
    return " ".join(m.value for m in at.sidebar.markdown)


def published(store, code):
    return store.snapshot(code)


# -- following ----------------------------------------------------------------------------------------
def test_students_follow_the_teacher_leave_and_come_back(store):
    teacher, code = start_teacher()
    assert code and state(teacher, "class_role") == "teacher"
    assert "class" not in teacher.query_params  # the teacher's address never carries the class
    secret = state(teacher, "_class_secret")
    assert code in all_text(teacher) and secret not in all_text(teacher)  # projected: no secret on it
    teacher.toggle(key="class_show_key").set_value(True).run()
    assert f"{code}-{secret}" in all_text(teacher)
    teacher.toggle(key="class_show_key").set_value(False).run()

    s1 = join_by_link(code)  # the join link
    s2 = run_app("classroom")  # the join form
    s2.text_input(key="class_join_code").input(code.lower())
    s2.button(key="class_join").click().run()
    no_exception(s2)
    s2._page_hash = ""  # AppTest keeps at.switch_page's page for good; a browser follows st.switch_page
    s3 = join_by_link(code)
    students = [s1, s2, s3]
    for s in students:
        assert state(s, "class_role") == "student" and state(s, "class_following") is True
        assert s.query_params.get("class") == code
        assert title(s) == "The Transformer at a glance"  # the overview: the teacher's page at the start
        assert f"Following class {code}" in sidebar_text(s)
        # the page says where the model is chosen: by the teacher, while the student follows
        assert any("Your teacher chose it." in m.value for m in s.markdown)
        assert not any("Change it in the sidebar." in m.value for m in s.markdown)
    assert store.snapshot(code).students == 3

    # the teacher goes to a page, types a sentence, switches the scaling and a head off
    teacher.switch_page("pages/multi_head.py")
    teacher.run()
    teacher.sidebar.text_input(key="sentence").input("i am a student").run()
    teacher.sidebar.toggle(key="iv_scale").set_value(False).run()
    teacher.sidebar.multiselect(key="heads_off").select("enc.0.self_attn:1").run()
    teacher.sidebar.radio(key="model").set_value("no_mask").run()
    no_exception(teacher)
    snap = store.snapshot(code)
    assert snap.state["sentence"] == "i am a student" and snap.state["page"] == "multi_head"
    assert snap.state["iv_scale"] is False and snap.state["heads_off"] == ["enc.0.self_attn:1"]
    assert snap.state["model"] == "no_mask"
    for s in students:
        s.run()  # the poll (a fragment each second in a browser)
        no_exception(s)
        assert title(s) == "Multi-head attention"
        assert state(s, "sentence") == "i am a student" and state(s, "iv_scale") is False
        assert state(s, "heads_off") == ["enc.0.self_attn:1"] and state(s, "model") == "no_mask"
        # while following, the sidebar has none of these controls: one line above the page says them
        assert not [w for w in s.sidebar.text_input if w.key == "sentence"]
        assert not [w for w in s.sidebar.toggle if w.key == "iv_scale"]
        line = teacher_line(s)
        assert "sentence “i am a student”" in line and "no √d\\_k scaling" in line, line
        assert "trained without look-ahead mask" in line, line

    # the guided lesson: a step forward
    teacher.switch_page("pages/lesson.py")
    teacher.run()
    students[0].run()  # (step 1: the intro tells a led student who moves the lesson, not to press a Next it lacks)
    intro = " ".join(m.value for m in students[0].markdown)
    assert "your teacher moves the class from step to step" in intro and "press **Next**" not in intro, intro
    teacher.button(key="lesson_next").click().run()
    no_exception(teacher)
    assert store.snapshot(code).state["step"] == 2
    for s in students:
        s.run()
        no_exception(s)
        assert title(s) == "Guided lesson" and state(s, "lesson_step") == 2
        assert "2 of" in str(s.get("progress")[0].proto.text)

    # s2 leaves follow mode and types its own sentence; the teacher moves on; s2 keeps its own
    s2.sidebar.button(key="class_detach").click().run()
    assert state(s2, "class_following") is False and s2.query_params.get("follow") == "0"
    s2.sidebar.text_input(key="sentence").input("she is a student").run()
    # s3, led through the lesson, has no Back / Next, step picker or sentence picker: the teacher moves it. One button
    # under the step lets it go on alone, and then the lesson's own are back (its step stays its own)
    keys = {w.key for w in [*s3.button, *s3.selectbox, *s3.radio, *s3.text_input]}
    assert not keys & {"lesson_back", "lesson_next", "lesson_next_bottom", "lesson_choice"}, keys
    assert not [k for k in keys if k and k.startswith("lesson_jump")], keys  # (a step picker, of any step)
    assert "Your teacher moves the class through the lesson." in " ".join(c.value for c in s3.caption)
    s3.button(key="lesson_explore").click().run()
    no_exception(s3)
    assert state(s3, "class_following") is False and state(s3, "lesson_step") == 2
    assert "Your teacher moves the class" not in " ".join(c.value for c in s3.caption)
    s3.button(key="lesson_next").click().run()
    assert state(s3, "class_following") is False and state(s3, "lesson_step") == 3
    assert s3.sidebar.text_input(key="sentence").value == "i am a student"  # its controls are back
    version = store.snapshot(code).version
    teacher.sidebar.text_input(key="sentence").input("thinking machines").run()
    assert store.snapshot(code).version == version + 1  # the students' own typing changed nothing shared
    for s in students:
        s.run()
        no_exception(s)
    assert state(s1, "sentence") == "thinking machines"
    assert state(s2, "sentence") == "she is a student" and state(s3, "sentence") == "i am a student"

    # one click back: the teacher's state again
    s2.sidebar.button(key="class_follow").click().run()
    no_exception(s2)
    assert state(s2, "class_following") is True and state(s2, "sentence") == "thinking machines"
    assert "follow" not in s2.query_params and s2.query_params.get("class") == code
    assert title(s2) == "Guided lesson"

    # a failover: the student's next run is a new session (another process) opened from its own address
    moved = run_app(query=dict(s1.query_params))
    no_exception(moved)
    assert state(moved, "class_role") == "student" and state(moved, "sentence") == "thinking machines"
    exploring = run_app(query=dict(s3.query_params))  # &follow=0: rejoins, still exploring
    assert state(exploring, "class_role") == "student" and state(exploring, "class_following") is False

    # the teacher ends the class: every student leaves it, nothing of it stays
    teacher.switch_page("pages/classroom.py")
    teacher.run()
    teacher.button(key="class_end").click().run()
    no_exception(teacher)
    assert state(teacher, "class_role") is None and state(teacher, "_class_secret") is None
    assert store.snapshot(code).ended
    for s in students:
        s.run()
        no_exception(s)
        assert state(s, "class_role") is None and "class" not in s.query_params
    if isinstance(store, RedisClassStore):
        assert store._r.keys(f"{store._p}:{code}*") == [f"{store._p}:{code}"]  # the "ended" marker only


# -- what a student cannot do ---------------------------------------------------------------------------
def test_a_student_cannot_act_as_the_teacher(store):
    teacher, code = start_teacher()
    s1 = join_by_link(code)
    before = store.snapshot(code)
    # keys that mimic the teacher's, with a forged secret (a browser cannot even set these keys)
    s1.session_state["class_role"] = "teacher"
    s1.session_state["_class_secret"] = "forged-secret-forged-secret"
    s1.session_state["sentence"] = "i am a student"
    s1.run()
    no_exception(s1)
    assert state(s1, "class_role") is None  # told, and no longer claiming it
    s1.switch_page("pages/classroom.py")
    s1.run()
    no_exception(s1)
    assert not [b for b in s1.button if b.key in ("class_reveal", "class_end", "class_ask")]
    after = store.snapshot(code)
    assert (after.version, after.state, after.question) == (before.version, before.state, before.question)
    # every teacher operation needs the secret (what the callbacks call)
    for op, args in (
        (store.set_state, ({"sentence": "x"},)),
        (store.ask, ("q?", ["a", "b"], 0)),
        (store.reveal, ()),
        (store.end, ()),
        (store.touch, ()),
    ):
        with pytest.raises(Forbidden):
            op(code, "forged-secret-forged-secret", *args)
    # a student's own messages (typing, switching, answering, leaving) change nothing shared
    s2 = join_by_link(code)
    s2.sidebar.button(key="class_detach").click().run()
    s2.sidebar.toggle(key="iv_pos").set_value(False).run()
    s2.sidebar.button(key="class_follow").click().run()
    assert store.snapshot(code).version == before.version and not store.snapshot(code).ended
    # the teacher key resumes the class in a new session (a reload, a failover); a wrong key does not
    resumed = run_app("classroom")
    resumed.text_input(key="class_resume_key").input(f"{code}-nottherightsecret").run()
    resumed.button(key="class_resume").click().run()
    assert state(resumed, "class_role") is None and "not the key of a running class" in all_text(resumed)
    resumed.text_input(key="class_resume_key").input(f"{code}-{state(teacher, '_class_secret')}").run()
    resumed.button(key="class_resume").click().run()
    no_exception(resumed)
    assert state(resumed, "class_role") == "teacher" and state(resumed, "class_resume_key") == ""


def test_class_codes_cannot_be_enumerated(store):
    teacher, code = start_teacher()
    at = run_app("classroom")
    wrong = "ZZZZZZ" if code != "ZZZZZZ" else "YYYYYY"
    for _ in range(store.max_failed_joins):
        at.text_input(key="class_join_code").input(wrong).run()
        at.button(key="class_join").click().run()
        assert "No class with this code" in all_text(at)
    at.text_input(key="class_join_code").input(code).run()  # even the right code, now
    at.button(key="class_join").click().run()
    no_exception(at)
    assert "Too many attempts: try again in" in all_text(at) and state(at, "class_role") is None
    bare = run_app(query={"class": code})  # a link with the code alone is a guess too: refused, and kept for a reload
    assert state(bare, "class_role") is None and bare.query_params["class"] == code
    token = state(teacher, "_class_link_token")
    assert token and f"k={token}" in teacher_link(teacher)
    linked = run_app(query={"class": code, "k": token})  # the teacher's join link: in, whatever classmates mistyped
    no_exception(linked)
    assert state(linked, "class_role") == "student" and linked.query_params["k"] == token
    forged = run_app(query={"class": code, "k": "0" * 20})  # a made-up token is no link
    assert state(forged, "class_role") is None


@pytest.mark.parametrize("make_store", ["memory"], indirect=True)
def test_an_idle_class_ends_by_itself(app_store, make_store):
    """What the student's page does with a class gone idle (the rule's real-time test on Redis is
    tests/test_class_store.py's): the store's clock moves past the idle time, no sleep."""
    store = app_store(idle_seconds=1.5)
    teacher, code = start_teacher()
    s1 = join_by_link(code)
    make_store.wait(1.25)  # idle, not yet gone: the page still follows it
    s1.run()
    no_exception(s1)
    assert state(s1, "class_role") == "student" and s1.query_params["class"] == code
    make_store.wait(0.25)  # 1.5 s without the teacher: gone
    s1.run()
    no_exception(s1)
    assert state(s1, "class_role") is None and "class" not in s1.query_params
    assert store.snapshot(code) is None or store.snapshot(code).ended


def _join_and_stop_short() -> None:
    """A student's run cut short right after its join: it ends before the page and the run's end are drawn,
    as a run does that the next request (a click, the class's next change) interrupts."""
    import streamlit as st

    from ui.classroom import joining

    joining.join_from_link()
    st.stop()


def test_the_address_holds_the_class_from_the_moment_a_student_joins(store):
    """The address is what a page's next session starts from (its process restarted, its websocket reconnected
    to another process): a joining run cut short must leave the class in it. (Before: joining first removed the
    code from the address, and only the run's end wrote it back; `python -m bench.classroom_load chaos` left
    about one student in six outside the class after an app process was killed.)"""
    from streamlit.testing.v1 import AppTest

    _, code = start_teacher()
    at = AppTest.from_function(_join_and_stop_short)
    at.query_params.update({"class": code, "k": "not-the-token"})
    at.run()
    no_exception(at)
    assert state(at, "class_code") == code and state(at, "class_role") == "student"
    assert at.query_params.get("class") == code, dict(at.query_params)
    assert at.query_params.get("k") == "not-the-token"  # the link's token stays with the code


def teacher_and_follower(sentence: str):
    """A teacher on the overview who typed `sentence`, and a student who joined by the link and shows it."""
    teacher, code = start_teacher()
    s1 = join_by_link(code)
    teacher.switch_page("pages/overview.py")
    teacher.run()
    teacher.sidebar.text_input(key="sentence").input(sentence).run()
    s1.run()
    return teacher, s1


def test_a_late_request_with_old_values_does_not_detach_a_student(store):
    """A request carries every widget's value; one sent before the teacher's last changes reached the
    student's browser (a click as a redraw ends, during a burst of changes) writes an old sentence back. That
    is one of the teacher's recent values, not the student's doing: the student keeps following and shows
    the teacher's sentence again."""
    teacher, s1 = teacher_and_follower("i am a student")
    assert state(s1, "sentence") == "i am a student"
    s1.session_state["sentence"] = SENTENCE  # the value before the change, sent late (a widget's old value)
    s1.run()
    no_exception(s1)
    assert state(s1, "class_following") is True and state(s1, "sentence") == "i am a student"
    for text in ("thinking machines", "we are students"):  # a burst: the session applies both...
        teacher.sidebar.text_input(key="sentence").input(text).run()
        s1.run()
    s1.session_state["sentence"] = "i am a student"  # ...the browser sends one 2 states old
    s1.run()
    assert state(s1, "class_following") is True and state(s1, "sentence") == "we are students"
    s1.session_state["sentence"] = "she is a student"  # a sentence of the student's own
    s1.run()
    assert state(s1, "class_following") is False and state(s1, "sentence") == "she is a student"


def test_a_run_the_class_s_component_asked_for_never_detaches_a_student(store, monkeypatch):
    """The page's stream asks for a run on its own (the class's component, its trigger). Such a run carries the
    values of the page as it was when it asked, from the page the class may have just left: never the student's
    choice. In Chromium, a follower walking a plan's stops fast was dropped from following by one such run (its
    browser's address already showed the new page, so it read as the student's own move back)."""
    import ui.classroom.session

    _, s1 = teacher_and_follower("i am a student")
    monkeypatch.setattr(ui.classroom.session, "asked_by_class", lambda: True)
    s1.session_state["sentence"] = "she is a student"  # not one of the teacher's: a student's, but for the ask
    s1.run()
    no_exception(s1)
    assert state(s1, "class_following") is True and state(s1, "sentence") == "i am a student"
    monkeypatch.setattr(ui.classroom.session, "asked_by_class", lambda: False)
    s1.session_state["sentence"] = "she is a student"  # the same change by the student's own request
    s1.run()
    assert state(s1, "class_following") is False and state(s1, "sentence") == "she is a student"


def test_asked_by_class_holds_for_the_run_the_component_asked_for_only():
    """`push.asked_by_class` is true in the run whose callback the component's trigger called, and false in the
    run after it (no callback): the mark is of one run, not a flag that lingers."""
    from streamlit.testing.v1 import AppTest

    def script():
        import streamlit as st

        from ui.classroom import push

        if st.session_state.get("ask", False):
            push._asked()
        st.write(f"asked={push.asked_by_class()}")

    at = AppTest.from_function(script)
    at.session_state["ask"] = True
    at.run()
    assert at.markdown[0].value == "asked=True"
    at.session_state["ask"] = False
    at.run()
    assert at.markdown[0].value == "asked=False"


# -- the teacher's own model ----------------------------------------------------------------------------
def test_a_teacher_showing_their_own_model_is_told_and_so_are_the_students(store):
    """A model the teacher trained lives in the teacher's session: the class sees the shipped one. The
    teacher is told (the sidebar, from the state published), and so are the following students; both
    notices go as soon as the teacher shows the shipped model again."""
    from ui.classroom.session import OWN_MODEL_STUDENT, OWN_MODEL_TEACHER

    mine = checkpoint.load(checkpoint.SHIPPED)  # any bundle of the teacher's own will do
    teacher = run_app("classroom", my_model=mine, my_model_key=f"own-{uuid.uuid4().hex}", model="mine")
    teacher.button(key="class_start").click().run()
    no_exception(teacher)
    code = state(teacher, "class_code")
    snap = store.snapshot(code)
    assert snap.state["model"] == "base" and snap.state["own_model"] is True
    assert state(teacher, "model") == "mine"  # the teacher still sees their own
    assert [w.value for w in teacher.sidebar.warning] == [OWN_MODEL_TEACHER]

    s1 = join_by_link(code)
    s1.run()  # a poll
    no_exception(s1)
    assert state(s1, "model") == "base" and state(s1, "class_following") is True  # the notice is no change of theirs
    assert OWN_MODEL_STUDENT in [c.value for c in s1.sidebar.caption]
    assert "own_model" not in s1.session_state

    teacher.sidebar.radio(key="model").set_value("no_mask").run()  # a shipped model: shared, no notice
    no_exception(teacher)
    snap = store.snapshot(code)
    assert snap.state["model"] == "no_mask" and "own_model" not in snap.state
    assert not [w for w in teacher.sidebar.warning if w.value == OWN_MODEL_TEACHER]
    s1.run()
    assert state(s1, "model") == "no_mask" and OWN_MODEL_STUDENT not in [c.value for c in s1.sidebar.caption]


# -- the guided lesson -----------------------------------------------------------------------------------
def test_a_teacher_opens_the_guided_lesson_without_an_error(store):
    """The lesson's first run in a session asks for its own sentence and reruns the app; that run, cut short
    after the sidebar's box was drawn, must not publish (publishing applied the asked-for sentence to the drawn
    box: Streamlit's error, on the teacher's screen, the first time a class went to the lesson)."""
    from ui.lesson import DEFAULT_SENTENCE

    teacher, code = start_teacher()
    teacher.switch_page("pages/lesson.py")
    teacher.run()
    no_exception(teacher)
    assert title(teacher) == "Guided lesson" and state(teacher, "sentence") == DEFAULT_SENTENCE
    assert [t.value for t in teacher.toast if "Your class sees it too." in t.value], "the teacher is told"
    snap = store.snapshot(code)
    assert snap.state["page"] == "lesson" and snap.state["sentence"] == DEFAULT_SENTENCE
