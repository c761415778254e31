"""Questions in classroom mode (ui/classroom/panels.py, pages/classroom.py, explain/questions.py): predict, then reveal.

A teacher and three students, each its own AppTest session of app.py, on the memory store AND on a real
redis-server started here (tests/services.py): a question with live counts and the reveal, every kind of question,
the teacher's line kept while a question is open, and shared text shown as text; and explain/questions.py's
answers, recomputed from the model's tensors. AppTest runs no JavaScript: the class's event that reruns a
student's page in a browser is the test's next `run()` here.
"""

from __future__ import annotations

import json

import pytest
import torch

from classroom import QuestionClosed, check_question
from explain import questions
from model import checkpoint, pipeline
from model.trace import Interventions
from tests.apptest_util import all_text, decode, no_exception, state
from tests.classroom_util import SENTENCE, join_by_link, start_teacher, teacher_line
from tests.classroom_util import store as store  # noqa: F401 - the fixture
from ui.widgets import md


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
