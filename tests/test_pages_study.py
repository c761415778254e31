"""The Study page and the lesson's study hooks through AppTest, on a SQLite database in a temporary folder: a
participant's whole flow, the consent gate, hostile reasons, the conditions (view-only, predict before reveal),
the owner's report, and the lesson's "Check yourself" (nothing kept)."""

from __future__ import annotations

import re

import pytest
from streamlit.testing.v1 import AppTest

from explain.questionnaires import FEEL, SUS, TLX
from study import get_store
from tests.apptest_util import ROOT, TIMEOUT, run_app
from ui.study import participant, session
from ui.widgets import md


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("GLASS_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("GLASS_DATABASE_URL", raising=False)
    return get_store()


def new_study(store, **settings):
    code, secret = store.create(
        {"title": "Week 3", "instrument": "ct-1", **settings}, session.instrument("ct-1").as_dict()
    )
    return code, secret, store.link(code, secret)


def answer_test(at: AppTest, reason: str = "") -> int:
    n = 0
    while True:
        subs = [b for b in at.button if (b.key or "").startswith("study_submit_")]
        if not subs:
            return n
        item = subs[0].key.removeprefix("study_submit_")
        box = [s for s in at.selectbox if s.key == f"study_choice_{item}"]
        (box[0] if box else at.radio(key=f"study_choice_{item}")).set_value(0)
        at.radio(key=f"study_conf_{item}").set_value(3)
        at.text_input(key=f"study_reason_{item}").set_value(reason)
        subs[0].click().run()
        assert not at.exception
        n += 1
        assert n <= 16


def test_study_participant_flow_consent_pre_path_post_questionnaires(store):
    code, secret, token = new_study(store)
    at = run_app("studies", query={"study": code, "sk": token})
    assert "What is stored" in " ".join(m.value for m in at.markdown)
    assert store.records(code, secret)[1] == []  # the consent text is shown: nothing recorded yet
    at.button(key="study_agree").click().run()
    assert answer_test(at, "<b>sum</b> = 1") == 16
    at.button(key="study_finish_pre").click().run()
    assert any("guided lesson" in m.value for m in at.markdown)
    at.switch_page("pages/lesson.py")
    at.run()
    assert any("Back to the study" in (p.label or "") for p in at.get("page_link"))
    at.button(key="lesson_next").click().run()
    at.switch_page("pages/studies.py")
    at.run()
    at.button(key="study_path_done").click().run()
    assert answer_test(at) == 16
    at.button(key="study_finish_post").click().run()
    for k, _ in (*SUS, *FEEL):
        at.radio(key=f"study_q_{k}").set_value(4)
    for k, _ in TLX:
        at.select_slider(key=f"study_q_{k}").set_value(50)
    next(b for b in at.button if b.label == "Send").click().run()
    assert any("finished the study" in s.value for s in at.success)
    study, people, events = store.records(code, secret)
    assert [p["phase"] for p in people] == ["done"]
    verbs = [e["verb"] for e in events]
    assert verbs.count("answered") == 32 and verbs.count("rated") == 17
    assert {e["object"] for e in events if e["verb"] == "viewed"} >= {"lesson/step/1", "lesson/step/2"}
    reasons = {e["result"].get("reason") for e in events if e["verb"] == "answered"}
    assert "<b>sum</b> = 1" in reasons  # kept as typed, drawn as text
    assert not any("<b>" in m.value for m in at.markdown)


BROWSER = "s-" + "5e" * 16  # what a returning browser's pseudonym is made from (AppTest has no browser id)
DELETION_CODE = re.compile(r"Your deletion code: \*\*`([0-9A-F]{12})`\*\*")


def deletion_codes(at: AppTest) -> set[str]:
    """Every deletion code the page shows."""
    return {m for el in (*at.info, *at.markdown, *at.caption) for m in DELETION_CODE.findall(el.value)}


def reload(code: str, token: str, browser: str = BROWSER) -> AppTest:
    """The study's link opened again by the same browser (a reload, a new tab, another day)."""
    return run_app("studies", query={"study": code, "sk": token}, _study_session_source=browser)


def test_study_deletion_code_shown_after_a_reload_and_to_nobody_else(store):
    code, secret, token = new_study(store)
    at = reload(code, token)
    at.button(key="study_agree").click().run()
    (shown,) = deletion_codes(at)
    assert store.deletion_code(code, store.pseudonym(code, BROWSER)) == shown
    again = reload(code, token)
    assert any((b.key or "").startswith("study_submit_") for b in again.button)  # the same participant, mid-test
    assert deletion_codes(again) == {shown}
    other = reload(code, token, "s-" + "77" * 16)  # another browser opening the same link: no code of anyone's
    assert any(b.key == "study_agree" for b in other.button) and deletion_codes(other) == set()
    other.button(key="study_agree").click().run()
    assert len(deletion_codes(other)) == 1 and deletion_codes(other) != {shown}
    store.delete_mine(code, shown, "10.3.3.3")  # the code shown deletes this participant, and only them
    assert len(store.records(code, secret)[1]) == 1 and reload(code, token).button(key="study_agree")


def to_the_survey(store, code: str, choose=lambda n, item: 0) -> tuple[str, dict[tuple[str, str], int]]:
    """A participant (of BROWSER) through both tests, answering item n with `choose(n, item)`: (actor, answers)."""
    actor = store.pseudonym(code, BROWSER)
    p, _ = store.consent(code, actor)
    forms = store.study(code).instrument["forms"]
    answers = {}
    for phase, nxt in (("pre", "path"), ("post", "survey")):
        for n, item in enumerate(forms[p.form(phase)], start=1):
            answers[(phase, item["id"])] = choose(n, item)
            store.answer(code, actor, item["id"], answers[(phase, item["id"])], 2)
        store.advance(code, actor, nxt)
        if phase == "pre":
            store.advance(code, actor, "post")
    return actor, answers


def finish_survey(store, code: str, actor: str) -> None:
    for k, _ in (*SUS, *FEEL):
        store.rate(code, actor, k, 3, (1, 7, 1))
    for k, _ in TLX:
        store.rate(code, actor, k, 40, (0, 100, 5))
    store.advance(code, actor, "done")


def shown_answers(at: AppTest) -> dict[str, list[str]]:
    """Expander label -> the questions drawn in it (markdown), on the end page."""
    return {e.label: [m.value for m in e.markdown] for e in at.expander if " right" in e.label}


def test_study_end_page_shows_the_answers_and_the_deletion_code(store):
    code, secret, token = new_study(store, delay_days=0)
    choose = lambda n, item: (item["answer"] + (n % 2)) % len(item["options"])  # noqa: E731 - odd items wrong
    actor, answers = to_the_survey(store, code, choose)
    at = reload(code, token)
    assert any(b.label == "Send" for b in at.button)  # the questionnaires: no answers shown yet
    assert shown_answers(at) == {} and not any("Your answer:" in m.value for m in at.markdown)
    finish_survey(store, code, actor)
    at = reload(code, token)
    assert any("finished the study" in s.value for s in at.success) and not at.exception
    assert deletion_codes(at) == {store.deletion_code(code, actor)}
    p = store.participant(code, actor)
    forms = store.study(code).instrument["forms"]
    shown = shown_answers(at)
    assert len(shown) == 2
    for phase in ("pre", "post"):
        items = forms[p.form(phase)]
        right = sum(answers[(phase, it["id"])] == it["answer"] for it in items)
        label = f"{participant.TITLES[phase]}: {right} of {len(items)} right"
        assert right == 8 and label in shown
        assert len(shown[label]) == len(items)
        for n, (it, text) in enumerate(zip(items, shown[label], strict=True), start=1):
            mine, key = it["options"][answers[(phase, it["id"])]], it["options"][it["answer"]]
            assert text.startswith(f"**{n}.** {md(it['text'])}")
            assert f"Your answer: {md(mine)} ({':green[right]' if n % 2 == 0 else ':red[wrong]'})" in text
            assert f"Right answer: **{md(key)}**" in text
    explained = {c.value for e in at.expander for c in e.caption}
    assert {md(it["explain"]) for f in (p.form("pre"), p.form("post")) for it in forms[f] if it["explain"]} <= explained


def test_study_end_page_keeps_the_first_tests_answers_until_the_delayed_test(store):
    code, _, token = new_study(store)  # a delayed test (7 days): it asks the first test's questions again
    actor, answers = to_the_survey(store, code)
    finish_survey(store, code, actor)
    at = reload(code, token)
    assert [label.split(":")[0] for label in shown_answers(at)] == ["Second test"]
    assert any("after the delayed test" in c.value for c in at.caption)


def test_study_untouched_workload_slider_blocks_sending(store):
    code, secret, token = new_study(store)
    actor, _ = to_the_survey(store, code)
    at = reload(code, token)
    for k, _ in (*SUS, *FEEL):
        if k != "sus5":
            at.radio(key=f"study_q_{k}").set_value(4)
    next(b for b in at.button if b.label == "Send").click().run()  # no slider touched
    names = ", ".join(text.split(":")[0] for _, text in TLX)
    assert [w.value for w in at.warning] == [md(f"Still unanswered: using the app, question 5; workload: {names}.")]
    assert all(at.select_slider(key=f"study_q_{k}").value is None for k, _ in TLX)  # none starts on a value
    at.radio(key="study_q_sus5").set_value(2)
    values = {k: 5 * i for i, (k, _) in enumerate(TLX)}  # 0 for the first: a real answer, not "no answer"
    for k, v in values.items():
        if k != "tlx_effort":
            at.select_slider(key=f"study_q_{k}").set_value(v)
    next(b for b in at.button if b.label == "Send").click().run()
    assert [w.value for w in at.warning] == [md("Still unanswered: workload: Effort.")]
    _, people, events = store.records(code, secret)
    assert [p["phase"] for p in people] == ["survey"] and not any(e["verb"] == "rated" for e in events)
    at.select_slider(key="study_q_tlx_effort").set_value(50)  # moved to where the old slider used to start
    next(b for b in at.button if b.label == "Send").click().run()
    assert any("finished the study" in s.value for s in at.success)
    events = store.records(code, secret)[2]
    rated = {e["object"].removeprefix("survey/"): e["result"]["value"] for e in events if e["verb"] == "rated"}
    assert {k: rated[k] for k, _ in TLX} == {**values, "tlx_effort": 50} and rated["sus5"] == 2


def test_study_consent_gate_nothing_recorded_before_agreeing(store):
    code, secret, token = new_study(store)
    at = run_app("studies", query={"study": code, "sk": token})
    at.switch_page("pages/lesson.py")
    at.run()
    at.button(key="lesson_next").click().run()
    assert not at.exception
    assert store.records(code, secret)[1:] == ([], [])


def test_study_hostile_input_refused_with_a_message(store):
    code, secret, token = new_study(store)
    at = run_app("studies", query={"study": code, "sk": "forged-token-1234"})  # a wrong token still finds the code
    at.button(key="study_agree").click().run()
    item = next(b for b in at.button if (b.key or "").startswith("study_submit_")).key.removeprefix("study_submit_")
    at.radio(key=f"study_conf_{item}").set_value(2)
    at.text_input(key=f"study_reason_{item}").set_value("ring \x07 the bell")  # (the box cuts a long one at 200)
    (at.selectbox if item.endswith(("15", "16")) else at.radio)(key=f"study_choice_{item}").set_value(0)
    at.button(key=f"study_submit_{item}").click().run()
    assert any("one line of text only" in w.value for w in at.warning)
    assert [e["verb"] for e in store.records(code, secret)[2]] == ["consented"]
    at = run_app("studies", query={"study": "NOSUCH22", "sk": token})
    assert any("No study" in w.value for w in at.warning) and not at.exception


def _participant(store, code, condition):
    for i in range(8):
        actor = store.pseudonym(code, f"b-test-browser-{i:04d}")
        p, _ = store.consent(code, actor)
        if p.condition == condition:
            for phase in ("path",):
                store.advance(code, actor, phase)
            return actor
    raise AssertionError("no participant in that condition")


def test_study_view_only_condition_keeps_every_switch_on(store):
    code, secret, _ = new_study(store, factor="controls")
    actor = _participant(store, code, "view-only")
    at = run_app(
        "lesson",
        **{
            session.CODE: code,
            session.ACTOR: actor,
            session.PHASE: "path",
            session.CONDITION: "view-only",
            "iv_scale": False,
            "heads_off": ["enc.0.self_attn:1"],
        },
    )
    assert at.session_state["iv_scale"] is True and at.session_state["heads_off"] == []
    assert at.toggle(key="iv_scale").disabled and at.multiselect(key="heads_off").disabled


def test_study_predict_before_reveal_hides_the_figure_until_predicted(store):
    code, secret, _ = new_study(store, factor="predict")
    actor = _participant(store, code, "predict-on")
    at = run_app(
        "lesson",
        query={"step": "8"},
        **{session.CODE: code, session.ACTOR: actor, session.PHASE: "path", session.CONDITION: "predict-on"},
    )
    assert any("Predict first" in m.value for m in at.markdown)
    assert not any("lesson_fig_" in el.proto.id for el in at.get("plotly_chart"))
    radio = next(r for r in at.radio if (r.key or "").startswith("check_"))
    radio.set_value(0)
    next(b for b in at.button if b.label == "Predict and reveal").click().run()
    assert any("lesson_fig_scale" in el.proto.id for el in at.get("plotly_chart"))
    assert [e["verb"] for e in store.records(code, secret)[2]].count("predicted") == 1


def test_check_yourself_at_the_end_of_a_part_keeps_nothing(store):
    at = run_app("lesson", query={"step": "12"})  # "concat": the end of part 2, attention
    exp = [e for e in at.expander if "Check yourself" in e.label]
    assert exp and "part 2" in exp[0].label
    radio = next(r for r in at.radio if (r.key or "").startswith("check_"))
    radio.set_value(0)
    next(b for b in at.button if b.label == "Check").click().run()
    said = " ".join(x.value for x in [*at.success, *at.error])
    assert "Right" in said or "The model's answer" in said
    assert any(c.isdigit() for c in said)  # the feedback explains the answer with this model's numbers
    with store.db.transaction() as tx:
        assert tx.execute("SELECT COUNT(*) FROM events")[0][0] == 0


def test_study_owner_report_drawn_with_its_figures(store):
    code, secret, _ = new_study(store)
    for i in range(6):
        actor = store.pseudonym(code, f"b-report-browser-{i:04d}")
        p, _ = store.consent(code, actor)
        for phase in ("pre", "post"):
            form = p.form(phase)
            for n in range(1, 17):
                store.answer(code, actor, f"{form}{n:02d}", (n + i) % 3, 2, "=1+1" if n == 1 else "")
            store.advance(code, actor, "path" if phase == "pre" else "survey")
            if phase == "pre":
                store.advance(code, actor, "post")
        for k, _ in (*SUS, *FEEL):
            store.rate(code, actor, k, 1 + i % 5, (1, 7, 1))
        for k, _ in TLX:
            store.rate(code, actor, k, 5 * (i + 4), (0, 100, 5))
    at = AppTest.from_file(str(ROOT / "pages" / "studies.py"), default_timeout=TIMEOUT)
    at.session_state[session.OWNER] = (code, secret)
    at.run()
    assert not at.exception
    shown = " ".join(el.proto.id for el in at.get("plotly_chart"))
    assert all(k in shown for k in ("study_gain", "study_items", "study_steps", "study_tlx", "study_feel"))
    text = " ".join(i.value for i in at.info)
    assert "⟨g⟩" in text and "6 participants" in text
    assert "SUS " in " ".join(m.value for m in at.markdown)  # its mean and interval, beside the workload
    assert len(at.get("download_button")) == 4


def test_study_logs_a_participants_votes_and_reveal_in_a_class(store):
    from classroom import get_store as class_store

    code, secret, _ = new_study(store, path="class")
    actor = _participant(store, code, "all")
    classes = class_store()
    class_code, class_secret = classes.create({"page": "lesson"}, client_id="10.9.9.9")
    student = "s-study-test-student-01"
    classes.join(class_code, "10.9.9.10", student)
    qid = classes.ask_peer(class_code, class_secret, "Which?", ["a", "b"], 1)
    classes.vote(class_code, student, qid, 0, "10.9.9.10")
    state = {
        session.CODE: code,
        session.ACTOR: actor,
        session.PHASE: "path",
        session.CONDITION: "all",
        "class_code": class_code,
        "class_role": "student",
        "_class_student": student,
        "class_following": False,
    }
    at = run_app("overview", **state)
    classes.reveal(class_code, class_secret)
    at.run()
    at.run()  # nothing new: nothing recorded twice
    events = [
        (e["verb"], e["object"], e["result"])
        for e in store.records(code, secret)[2]
        if e["verb"] in ("voted", "revoted", "revealed", "clicked")
    ]
    assert events == [("voted", f"class/question/{qid}", {"choice": 0}), ("revealed", f"class/question/{qid}", {})]


def test_study_code_guessing_on_the_page_is_rate_limited(store):
    code, secret, _ = new_study(store)
    at = run_app("studies")
    for i in range(10):
        at.text_input(key="study_join_code").set_value(f"ZZZZZZ{'23456789AB'[i]}2")
        at.button(key="study_join").click().run()
        assert any("No study with this code" in w.value for w in at.warning)
    at.text_input(key="study_join_code").set_value(code)
    at.button(key="study_join").click().run()  # the right code, but guessing is held back first
    assert any("Too many attempts" in w.value for w in at.warning)
    assert not any(b.key == "study_agree" for b in at.button)
