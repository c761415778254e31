"""Classroom mode in the app (ui/classroom/session.py, panels.py, pages/classroom.py, explain/questions.py).

A teacher and three students, each its own AppTest session of app.py, on the memory store AND on a real
redis-server started here (tests/services.py): following (page, sentence, a switch, a head, the lesson's
step), leaving and rejoining, a question with live counts and the reveal, the end of the class, a
failover (a new session from the student's URL), and what a student cannot do. AppTest runs no JavaScript:
the class's event that reruns a student's page in a browser is the test's next `run()` here; the event path
itself runs against a real server (the last test) and in Chromium (tests/browser/test_classroom_browser.py).
"""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest
import torch

import classroom
from classroom import Forbidden, QuestionClosed, RedisClassStore, check_question
from explain import questions
from model import checkpoint, pipeline
from model.trace import Interventions
from tests.apptest_util import all_text, decode, no_exception, run_app, state, title
from tests.services import until
from ui.widgets import md

pytestmark = pytest.mark.usefixtures("one_torch_thread")
SENTENCE = "the animal didn't cross the street because it was too tired"


@pytest.fixture
def store(app_store):
    return app_store()


def start_teacher():
    teacher = run_app("classroom")
    teacher.button(key="class_start").click().run()
    no_exception(teacher)
    return teacher, state(teacher, "class_code")


def teacher_link(teacher) -> str:
    """The join link the teacher's page shows (and its QR code holds)."""
    return next(c.value for c in teacher.code if "class=" in c.value)


def join_by_link(code: str, **query):
    at = run_app(query={"class": code, **query})
    no_exception(at)
    return at


def teacher_line(at) -> str:
    """The line above a following student's page: the teacher's sentence, model and switches."""
    return " ".join(c.value for c in at.caption if "Your teacher's view" in c.value)


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


# -- predict, then reveal -------------------------------------------------------------------------------
def ask_attention(teacher) -> None:
    """The teacher asks the class an attention question (the class page's console)."""
    teacher.radio(key="class_kind").set_value("attention").run()
    teacher.button(key="class_ask").click().run()


def question_text(at) -> str:
    return " ".join(m.value for m in at.markdown if "Question from your teacher" in m.value)


def test_a_question_keeps_the_teachers_line_and_no_controls_for_those_who_follow(store):
    """While a question is open (drawn by a full run, not by the followed page's fragment), a following student still
    reads the teacher's line above the page, switches included, and has no sentence, model or switch of their own
    in the sidebar: those were live, and the line gone, for as long as a question stayed on the screen."""
    teacher, code = start_teacher()
    student = join_by_link(code)
    teacher.switch_page("pages/multi_head.py")
    teacher.run()
    teacher.sidebar.toggle(key="iv_scale").set_value(False).run()
    teacher.switch_page("pages/classroom.py")
    teacher.run()
    ask_attention(teacher)
    no_exception(teacher)
    student.run()
    no_exception(student)
    assert "Question from your teacher" in question_text(student)
    line = teacher_line(student)
    assert "no √d\\_k scaling" in line, line  # (markdown-escaped)
    assert not [w for w in student.sidebar.text_input if w.key == "sentence"]
    assert not [w for w in student.sidebar.toggle if w.key in ("iv_scale", "iv_pos")]
    assert not [w for w in student.sidebar.radio if w.key == "model"]


def test_a_question_live_answers_and_the_reveal(store):
    teacher, code = start_teacher()
    students = [join_by_link(code) for _ in range(3)]
    ask_attention(teacher)
    no_exception(teacher)
    snap = store.snapshot(code, secret=state(teacher, "_class_secret"))
    q = snap.question
    assert q is not None and not snap.revealed and snap.answered == 0
    # the model's answer, recomputed from the tensors: the largest weight of "it" in the asked head
    bundle = checkpoint.load(checkpoint.SHIPPED)
    a = pipeline.analyse(bundle, pipeline.prepare(bundle, SENTENCE))
    it = a.prepared.tokens.index("it")
    head = int(a.trace["enc.0.self_attn.weights"][0, :, it].max(-1).values.argmax())
    w = a.trace["enc.0.self_attn.weights"][0, head, it]
    words = [*a.prepared.tokens, "<eos>"]
    assert f"head {head}:" in q.text and q.options[snap.answer] == words[int(w.argmax())]
    assert float(w.max()) == pytest.approx(
        float(torch.softmax(a.trace["enc.0.self_attn.scaled"][0, head, it], -1).max()), abs=1e-6
    )

    right, wrong = snap.answer, (snap.answer + 1) % len(q.options)
    for s in students:
        s.run()
        no_exception(s)
        assert "Question from your teacher" in question_text(s)
        assert "The model's answer:" not in all_text(s)  # hidden until the reveal
        assert store.snapshot(code, student_id=state(s, "_class_student")).answer is None
    students[0].button(key=f"class_answer_{q.id}_{right}").click().run()
    students[1].button(key=f"class_answer_{q.id}_{right}").click().run()
    students[1].button(key=f"class_answer_{q.id}_{wrong}").click().run()  # changed their mind
    no_exception(students[1])
    # the teacher's live view (a fragment each second): the count; the distribution only on the teacher's word
    teacher.run()
    assert "2 of 3 students answered" in all_text(teacher)
    assert "The model's answer:" not in all_text(teacher) and not teacher.get("plotly_chart")  # nor the projector
    assert "Question: 2 answers" in all_text(teacher)  # the sidebar line (st.caption)
    teacher.toggle(key="class_peek").set_value(True).run()
    counts = [0] * len(q.options)
    counts[right] += 1
    counts[wrong] += 1
    chart = next(c for c in teacher.get("plotly_chart") if "First vote" in c.proto.spec)
    bars = json.loads(chart.proto.spec)["data"][0]
    assert [int(v) for v in decode(bars["x"])] == counts

    teacher.button(key="class_reveal").click().run()
    no_exception(teacher)
    assert f"The model's answer:** {md(q.options[right])}" in all_text(teacher)
    for s in students:
        s.run()
        no_exception(s)
        assert f"The model's answer:** {md(q.options[right])}" in all_text(s)
    assert "the same as the model's" in all_text(students[0])
    assert "not what the model does" in all_text(students[1])
    assert "You did not answer" in all_text(students[2])
    with pytest.raises(QuestionClosed):  # answers close with the reveal
        store.answer(code, state(students[2], "_class_student"), q.id, right)


@pytest.mark.parametrize("kind", ["next_word", "head_off", "no_mask"])
def test_every_kind_of_question_can_be_asked(store, kind):
    teacher, code = start_teacher()
    teacher.radio(key="class_kind").set_value(kind).run()
    teacher.button(key="class_ask").click().run()
    no_exception(teacher)
    snap = store.snapshot(code, secret=state(teacher, "_class_secret"))
    assert snap.question is not None and 2 <= len(snap.question.options) <= 6


def test_shared_text_is_shown_as_text(store):
    teacher, code = start_teacher()
    s1 = join_by_link(code)
    # markdown in the teacher's sentence reaches the students as the characters typed
    sentence = "the **animal** [it](javascript:alert(1)) was too `tired`"
    teacher.switch_page("pages/overview.py")
    teacher.run()
    teacher.sidebar.text_input(key="sentence").input(sentence).run()
    teacher.switch_page("pages/classroom.py")
    teacher.run()
    ask_attention(teacher)
    s1.run()
    no_exception(s1)
    assert state(s1, "sentence") == sentence
    shown = question_text(s1)
    q = store.snapshot(code).question
    assert md(q.text) in shown
    assert "[it](javascript" not in shown and "**animal**" not in shown
    # HTML cannot be shared at all: the teacher is told, the students keep the sentence before
    teacher.switch_page("pages/overview.py")
    teacher.run()
    teacher.sidebar.text_input(key="sentence").input("<b>bold</b> <script>x</script>").run()
    no_exception(teacher)
    assert any("cannot see your sentence" in w.value for w in teacher.warning)
    s1.run()
    assert state(s1, "sentence") == sentence


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


# -- explain/questions.py: the answers are the model's --------------------------------------------------------
@pytest.fixture(scope="module")
def bundles():
    return checkpoint.load(checkpoint.SHIPPED), checkpoint.load(checkpoint.SHIPPED_NO_MASK)


@pytest.mark.parametrize("text", [SENTENCE, "i am a student", "thinking machines", "the the cat <b>"])
def test_question_answers_are_recomputed_from_the_tensors(bundles, text):
    base, cheat = bundles
    prepared = pipeline.prepare(base, text)
    a = pipeline.analyse(base, prepared)
    qs = []
    for layer in range(base.config.n_enc_layers):
        for head in range(base.config.n_heads):
            q = questions.attention(a, layer, head)
            w = a.trace[f"enc.{layer}.self_attn.weights"][0, head, questions.default_query(a)]
            label = questions._labels([*a.prepared.tokens, "<eos>"])[int(w.argmax())]
            assert q.answer_text == label
            qs.append(q)
    for t in range(len(a.out_tokens) + 1):
        q = questions.next_word(a, base.tgt_vocab.itos, t)
        best = base.tgt_vocab.itos[int(a.trace["probs"][0, t].argmax())]
        assert q.answer_text == questions._labels([best])[0]
        if t < len(a.out_tokens):  # what greedy decoding picked
            assert best == a.out_tokens[t]
        qs.append(q)
    off = ("dec.0.cross_attn", 1)
    q = questions.head_off(base, prepared, Interventions(), off)
    changed = pipeline.analyse(base, prepared, Interventions().with_head(*off, on=False)).translation != a.translation
    assert q.answer == int(changed)
    qs.append(q)
    q = questions.no_mask(base, cheat, prepared)
    same = pipeline.analyse(cheat, pipeline.prepare(cheat, text)).translation == a.translation
    assert q.answer == (0 if same else 1)
    qs.append(q)
    for q in qs:  # every question is one a class store accepts as it is
        check_question(q.text, list(q.options), q.answer)
        assert "<" not in q.detail + q.text


def test_the_no_mask_model_gets_the_lecture_sentence_wrong(bundles):
    base, cheat = bundles
    q = questions.no_mask(base, cheat, pipeline.prepare(base, "i am a student"))
    assert q.answer_text.startswith("No") and "je je je" in q.detail


# -- several processes: one class through Redis, and a process killed mid-class ---------------------------
def test_two_processes_share_a_class_and_its_students_survive_a_killed_process():
    """2 × `streamlit run app.py` behind HAProxy with a redis-server (serving/replicas.py); a teacher on app1,
    students on both (websocket sessions, tools/ws_client.py). A question is open, half answered; app2 is
    killed. Its students reconnect through the proxy with their own address (``?class=CODE``) and widget
    values: they are in the class again on app1, following, and the class's state, question and counts are as
    they were; one who was exploring keeps exploring, with its own sentence (from its address: a sentence whose
    Enter met the dead process itself is lost, see README). Each student sends a browser's XSRF cookie: the moved
    students are the same students (the count is unchanged, an answer given on app2 is still theirs on app1)."""
    from bench.classroom_load import failover
    from serving.replicas import Cluster
    from tests.services import require_tool

    require_tool("haproxy")
    require_tool("redis-server")
    with Cluster(replicas=2, timeout=120) as c:
        res = asyncio.run(asyncio.wait_for(failover(c, 6, 60), 300))
    assert res["on_killed_process"] == 3 and res["rejoined"] == 3, res
    # each student is a browser (an XSRF cookie): the moved ones come back as the same students
    assert res["students_before"] == res["students_after"] == 6, res
    assert res["moved_who_answered"] == 1 and res["moved_answer_kept"] == 1, res
    assert res["class_state_unchanged"] and res["answers_after"] == res["answers_before"]
    assert sum(res["answers_after"]) == 3
    assert res["followed_next_change"] == 5 and res["explorer_kept_own_sentence"] and res["now_on"] == ["app1"], res


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


# -- a student keeps their id on every process ---------------------------------------------------------
XSRF = "2|0a0b0c0d|{}|1700000000"  # Streamlit's XSRF cookie: version|mask|token XOR mask|timestamp (hex)


def xsrf_cookie(token: bytes) -> str:
    mask = bytes.fromhex("0a0b0c0d")
    return XSRF.format(bytes(b ^ mask[i % 4] for i, b in enumerate(token)).hex())


def test_a_browser_is_the_same_student_on_every_process(redis_url, monkeypatch):
    """With GLASS_REDIS_URL, a browser's id (its XSRF cookie hashed with the key all processes share in
    Redis) names the same student on every app process: a student moved to another process (a failover)
    rejoins as themselves, their answer still theirs and the class not counting them twice. Each "process"
    here has its own class store client and its own fallback key; only Redis is shared."""
    from serving import identity, shared_redis
    from serving.identity import Identity
    from ui.classroom import session as class_session

    monkeypatch.setenv(shared_redis.REDIS_URL_ENV, redis_url)
    monkeypatch.setattr(shared_redis, "_clients", {})
    conn = shared_redis.client(redis_url)
    conn.delete(shared_redis.BROWSER_KEY)  # a fresh shared key for this test
    prefix = f"test:{uuid.uuid4().hex[:8]}"
    stores = [RedisClassStore(redis_url, prefix=prefix) for _ in range(2)]
    cookie = {"value": None}

    def on_process(i: int, browser_cookie: str | None) -> None:
        """What this process's next session sees: its store, its own key (until it reads Redis's)."""
        monkeypatch.setitem(classroom._stores, redis_url, stores[i])
        monkeypatch.setattr(identity, "_SECRET", uuid.uuid4().bytes)
        monkeypatch.setattr(identity, "_KEY", None)
        cookie["value"] = browser_cookie

    monkeypatch.setattr(
        class_session, "current_identity", lambda: Identity("local", identity.browser_id(cookie["value"]), None)
    )
    mine, other = xsrf_cookie(b"browser-one-token-0123456789"), xsrf_cookie(b"browser-two-token-0123456789")
    try:
        on_process(0, None)
        teacher, code = start_teacher()
        on_process(0, mine)
        s1 = join_by_link(code)
        sid = state(s1, "_class_student")
        assert sid.startswith("s-") and store_students(stores[0], code) == 1
        teacher.radio(key="class_kind").set_value("attention").run()
        teacher.button(key="class_ask").click().run()
        s1.run()
        q = stores[0].snapshot(code).question
        s1.button(key=f"class_answer_{q.id}_1").click().run()
        no_exception(s1)

        on_process(1, mine)  # process 0 died: the same browser, a new session on process 1
        again = join_by_link(code)
        assert state(again, "_class_student") == sid and identity._KEY != identity._SECRET
        assert store_students(stores[1], code) == 1  # not a second student
        votes = stores[1].votes(code, student_id=sid)
        assert votes.my_first == 1 and votes.voted == (1, 0)  # the answer is still theirs
        assert f"Your answer: **{md(q.options[1])}**" in all_text(again)
        again.button(key=f"class_answer_{q.id}_0").click().run()  # changing it replaces it
        assert stores[0].votes(code, secret=state(teacher, "_class_secret")).first == {0: 1}

        on_process(1, other)  # another browser: another student
        s2 = join_by_link(code)
        assert state(s2, "_class_student") not in (sid, None) and store_students(stores[1], code) == 2

        on_process(0, None)  # no cookie (a script, AppTest): a random id per session, as before
        s3, s4 = join_by_link(code), join_by_link(code)
        assert state(s3, "_class_student") != state(s4, "_class_student")
        assert not state(s3, "_class_student").startswith("s-") and store_students(stores[0], code) == 4

        on_process(1, mine)  # the same browser in another class: an unrelated id
        teacher2, code2 = start_teacher()
        s5 = join_by_link(code2)
        assert state(s5, "_class_student") not in (sid, None) and state(s5, "_class_student").startswith("s-")
    finally:
        for s in stores:
            s.close()


def store_students(store, code) -> int:
    return store.snapshot(code).students


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


# -- a browser that missed the end of a redraw ----------------------------------------------------------
def against_an_app(run, tmp_path) -> None:
    """`run(url)`, a coroutine, against one `streamlit run app.py` on 127.0.0.1 (180 s at the most)."""
    from serving.processes import running_app

    with running_app(log=tmp_path / "server.log", timeout=120) as server:
        asyncio.run(asyncio.wait_for(run(server.url), 180))


def test_a_page_whose_run_lost_its_end_asks_again_until_it_shows_the_class(tmp_path):
    """Streamlit can drop a run's last messages (a new script runner started as the old one stopped: Streamlit
    issue 9921). Simulated in the client, on a real `streamlit run app.py`: the redraw after the teacher's
    change loses everything after its first few messages, the class component (the run's last element)
    included. The page, like the component's JavaScript, compares the class's counter (its event stream) with
    the one its last complete run drew, and asks again (2.5 s later): the page is repaired, with no click and
    no timer, and then asks nothing more. Also: a student's page registers no fragment timer, and the stream
    is only for the class's members."""
    import http.client

    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    from bench.classroom_load import Cookie, shows, start_class

    class Lossy(Cookie):
        """Once armed (`keep`), drops every message of the next run after its first `keep` (its end included),
        up to the next run's start (a following student's page is redrawn by runs of its fragment)."""

        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            self.keep: int | None = None
            self.losing, self.seen, self.dropped = False, 0, []

        def _handle(self, msg):
            kind = msg.WhichOneof("type")
            if kind == "new_session":
                self.losing = self.keep is not None
                self.keep, self.seen = (None, 0) if self.losing else (self.keep, 0)
            if self.losing:
                self.seen += 1
                if self.seen > 2:  # the run's start and its first element arrive
                    self.dropped.append(msg.script_finished if kind == "script_finished" else kind)
                    return
            super()._handle(msg)

    def get(url: str, path: str) -> tuple[int, str]:
        host, port = url.split("//")[1].split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=10)
        conn.request("GET", path)
        r = conn.getresponse()
        body = r.read(200) if r.status != 200 else r.readline() + r.readline() + r.readline()
        conn.close()
        return r.status, body.decode(errors="replace")

    async def run(url: str) -> None:
        teacher, code = await start_class(url)
        student = Lossy(url, timeout=120)
        await student.connect("classroom", f"class={code}")
        try:
            assert f"Following class {code}" in student.text(1)
            assert not student.fragments  # no timer on a student's page
            events = student.sync["url"]
            assert student.sync["watch"] == "seq" and student.sync["drawn"] == 1
            status, body = await asyncio.to_thread(get, url, events)
            assert status == 200 and '"seq": 1' in body, body
            assert (await asyncio.to_thread(get, url, events[:-4] + "0000"))[0] == 403  # a forged token
            assert (await asyncio.to_thread(get, url, events.replace(code, "ZZZZZZ")))[0] == 403  # another class
            student.start_following()
            await until(
                lambda: student.latest is not None and student.page_hash == teacher.page_hash and not student.running,
                30,
                "the student's page to show the teacher's",
            )
            await asyncio.sleep(1.0)

            def redraws():
                return student.full_runs + student.page_runs

            runs, asks = redraws(), student.asks

            student.keep = 2
            await teacher.type_sentence("i am a student")  # the event reaches the page, which asks: a redraw...
            await until(  # (the page alone: a fragment's run)
                lambda: ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY in student.dropped,
                20,
                lambda: f"the redraw's end to be lost: {student.dropped}",
            )
            assert redraws() == runs and not shows(student, "i am a student")  # ...half drawn
            assert student.sync["drawn"] == 1  # the page knows it does not show the class's state
            await until(lambda: redraws() > runs, 10, lambda: f"the page to ask again: {student.runs[-6:]}")  # repaired
            assert shows(student, "i am a student") and not student.exceptions()
            assert "i am a student" in student.text() and student.sync["drawn"] == 2
            assert student.asks == asks + 2
            runs = redraws()
            await asyncio.sleep(3.0)
            assert redraws() == runs and student.asks == asks + 2  # and then nothing more
        finally:
            await asyncio.gather(teacher.close(), student.close(), return_exceptions=True)

    against_an_app(run, tmp_path)


def test_the_teachers_console_has_no_timer_and_follows_the_class_by_its_events(tmp_path):
    """The teacher's class page (answers, votes, arrivals, snapshots) is redrawn by the class's events: its only
    timer is the sidebar's touch of the class once a minute (before: the answers every second, the snapshots every
    two). A student's answer moves the class's tally; the teacher's page hears it and shows the answer, with no
    request of the teacher's own. (In Chromium the event reruns the sidebar's panel, which redraws the whole page
    because the console drew an older tally: tests/browser/test_classroom_peer_browser.py sees the answers arrive.)"""
    from bench.classroom_load import CODE, Cookie, _button, join

    async def run(url: str) -> None:
        teacher = Cookie(url, timeout=120)
        student = None
        try:
            await teacher.connect("classroom")
            await teacher.click("class_start")
            code = CODE.search(teacher.text())[1]
            await teacher.click("class_ask")
            assert set(teacher.fragments.values()) == {60.0}, teacher.fragments  # the touch, and nothing else
            teacher.start_following()
            assert "0 of 0 students answered" in teacher.text()
            student = await join(url, code)
            await until(lambda: _button(student, "class_answer_1_0"), 10, "the question's answer button")
            asks = teacher.asks
            await student.click("class_answer_1_0")
            await until(
                lambda: "1 of 1 students answered" in teacher.text(), 15, lambda: f"the tally: {teacher.text()[-400:]}"
            )
            assert teacher.asks > asks  # the teacher's page asked for the redraw itself, on the class's event
            # (the panel is drawn at the end of a full run: once the redraws are over, its one timer is back)
            await until(
                lambda: not teacher.running and set(teacher.fragments.values()) == {60.0},
                15,
                lambda: f"the one timer back: {teacher.fragments}",
            )
        finally:
            await asyncio.gather(teacher.close(), *([student.close()] if student else []), return_exceptions=True)

    against_an_app(run, tmp_path)


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
