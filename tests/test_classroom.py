"""Classroom mode in the app (ui/classroom/session.py, panels.py, pages/classroom.py, model/questions.py).

A teacher and three students, each its own AppTest session of app.py, on the memory store AND on a real
redis-server started here (tests/services.py): following (page, sentence, a switch, a head, the lesson's
step), leaving and rejoining, a question with live counts and the reveal, the end of the class, a
failover (a new session from the student's URL), and what a student cannot do. AppTest never fires
`st.fragment(run_every=...)`: a student's poll is its next run.
"""

from __future__ import annotations

import uuid

import pytest

from tests.apptest_util import all_text, no_exception, run_app
from tests.services import redis_server
from ui import classroom
from ui.classroom import MemoryClassStore, RedisClassStore

pytestmark = pytest.mark.usefixtures("one_torch_thread")
SENTENCE = "the animal didn't cross the street because it was too tired"


@pytest.fixture(scope="module")
def redis_url():
    with redis_server() as url:
        yield url


@pytest.fixture(params=["memory", "redis"])
def store(request, monkeypatch):
    """A fresh class store for the app's sessions (get_store() returns it), on either back-end."""
    kw = getattr(request, "param_kw", {})
    if request.param == "memory":
        monkeypatch.delenv(classroom.REDIS_URL_ENV, raising=False)
        s, key = MemoryClassStore(**kw), ""
    else:
        url = request.getfixturevalue("redis_url")
        monkeypatch.setenv(classroom.REDIS_URL_ENV, url)
        s, key = RedisClassStore(url, prefix=f"test:{uuid.uuid4().hex[:8]}", **kw), url
    monkeypatch.setitem(classroom._stores, key, s)
    yield s
    s.close()


def state(at, key, default=None):
    try:
        return at.session_state[key]
    except KeyError:
        return default


def start_teacher():
    teacher = run_app("classroom")
    teacher.button(key="class_start").click().run()
    no_exception(teacher)
    return teacher, state(teacher, "class_code")


def join_by_link(code: str, **query):
    at = run_app(query={"class": code, **query})
    no_exception(at)
    return at


def title(at) -> str:
    return at.title[0].value if at.title else ""


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
    assert store.snapshot(code).students == 3

    # the teacher goes to a page, types a sentence, switches the scaling and a head off
    teacher.switch_page("pages/multi_head.py")
    teacher.run()
    teacher.sidebar.text_input(key="sentence").input("i am a student").run()
    teacher.sidebar.toggle(key="iv_scale").set_value(False).run()
    teacher.sidebar.multiselect(key="heads_off").select("enc.0.self_attn:1").run()
    no_exception(teacher)
    snap = store.snapshot(code)
    assert snap.state["sentence"] == "i am a student" and snap.state["page"] == "multi_head"
    assert snap.state["iv_scale"] is False and snap.state["heads_off"] == ["enc.0.self_attn:1"]
    for s in students:
        s.run()  # the poll (a fragment each second in a browser)
        no_exception(s)
        assert title(s) == "Multi-head attention"
        assert state(s, "sentence") == "i am a student" and state(s, "iv_scale") is False
        assert state(s, "heads_off") == ["enc.0.self_attn:1"]
        assert s.sidebar.text_input(key="sentence").value == "i am a student"
        assert s.sidebar.toggle(key="iv_scale").value is False

    # the guided lesson: a step forward
    teacher.switch_page("pages/lesson.py")
    teacher.run()
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
    # s3 just types: that alone leaves follow mode (its sentence stays its own)
    s3.sidebar.text_input(key="sentence").input("we are students").run()
    assert state(s3, "class_following") is False
    version = store.snapshot(code).version
    teacher.sidebar.text_input(key="sentence").input("thinking machines").run()
    assert store.snapshot(code).version == version + 1  # the students' own typing changed nothing shared
    for s in students:
        s.run()
        no_exception(s)
    assert state(s1, "sentence") == "thinking machines"
    assert state(s2, "sentence") == "she is a student" and state(s3, "sentence") == "we are students"

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
