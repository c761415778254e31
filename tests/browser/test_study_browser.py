"""A study in Chromium, on its own `streamlit run app.py` with a data folder of its own: a teacher creates it; a
participant (another browser) opens the link, agrees, answers the first test (a transfer item by clicking a cell of
the grid), follows the guided lesson (its "Check yourself"), answers the second test and the questionnaires; the
teacher's report then draws its figures (seven more participants, simulated through the store, make every cell
reach 5). Screenshots of each stage in tests/artifacts/."""

from __future__ import annotations

import functools
import re

import pytest
from playwright.sync_api import expect

from explain.questionnaires import KEYS, scale_of
from serving.processes import start_app
from study.database import SqliteDatabase
from study.store import StudyStore
from tests.browser.conftest import ARTIFACTS, SERVER_ENV, AppPage
from tests.browser.test_classroom_browser import new_tab

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def study_app(tmp_path_factory):
    data = tmp_path_factory.mktemp("study-data")
    server = start_app(
        log=ARTIFACTS / "streamlit-study.log", timeout=60, extra_env={**SERVER_ENV, "GLASS_DATA_DIR": str(data)}
    )
    try:
        yield server.url, data
    finally:
        server.stop()


def grids(study) -> dict[str, tuple[str, str]]:
    """Every transfer item's shaded row's label and its first column's: {item id: (row label, column label)}."""
    return {
        it["id"]: (it["grid"]["rows"][it["grid"]["row"]], it["grid"]["cols"][0])
        for form in study.instrument["forms"].values()
        for it in form
        if it.get("grid")
    }


# The middle of a cell on the screen: the x of its column's tick label, the y of its row's.
CELL_JS = """(el, [row, col]) => {
  const centre = (sel, text) => {
    const t = [...el.querySelectorAll(sel)].find(n => n.textContent === text).getBoundingClientRect();
    return [t.x + t.width / 2, t.y + t.height / 2];
  };
  return [centre('.xtick text', col)[0], centre('.ytick text', row)[1]];
}"""


def answer_test(p: AppPage, name: str) -> int:
    """Answer every item of the test on screen: the first option (a transfer item: a cell of the shaded row,
    clicked on the grid), "fairly sure", a reason on the first."""
    n = 0
    while p.main.get_by_role("button", name="Submit this answer").count():
        n += 1
        grid = p.main.locator('[class*="st-key-study_grid_"]')
        if grid.count():
            item = re.search(r"st-key-study_grid_(\w+)", grid.first.get_attribute("class"))[1]
            row_label, col_label = p.grids[item]  # the shaded row's label and the first column's
            grid.first.scroll_into_view_if_needed()
            p.page.wait_for_timeout(300)
            x, y = grid.first.evaluate(CELL_JS, [row_label, col_label])
            p.page.mouse.move(x, y)  # plotly finds the point under the mouse on hover, then the click selects it
            p.page.wait_for_timeout(400)
            p.act(functools.partial(p.page.mouse.click, x, y))  # the first column of the shaded row
            p.shot(f"{name}-grid")
            you = p.main.locator('[class*="st-key-study_grid_"] text', has_text=re.compile(r"^you$"))
            expect(you).to_have_count(1)  # the clicked cell is marked
        else:
            p.act(lambda: p.main.locator('[data-testid="stRadio"] [role="radiogroup"] label').first.click())
        p.act(lambda: p.main.get_by_text("3 · fairly sure").click())
        if n == 1:
            p.main.get_by_label("Why? (optional, one line)").fill("<i>the row adds up to 1</i>")
            p.shot(f"{name}-first-item")
        p.act(lambda: p.main.get_by_role("button", name="Submit this answer").click())
        p.no_exception()
        assert n <= 16
    return n


def test_a_participant_through_consent_tests_lesson_questionnaires_and_the_teachers_report(browser, study_app):
    url, data = study_app
    teacher = new_tab(browser, url, "study-teacher")
    teacher.goto("studies")
    teacher.main.get_by_label("Title (shown to participants)").fill("Attention, week 3")
    teacher.act(lambda: teacher.main.get_by_role("button", name="Create the study").click())
    link = teacher.main.get_by_text(re.compile(r"/studies\?study=[A-Z0-9]{8}&sk=")).first.inner_text()
    link = re.search(r"https?://\S+", link)[0].rstrip("`")
    code = re.search(r"study=([A-Z0-9]{8})", link)[1]
    key = re.search(r"key: ([A-Za-z0-9_-]+)", teacher.main.get_by_text("The study's key").first.inner_text())[1]
    teacher.shot("created")

    p = new_tab(browser, url, "study-participant")
    p.page.goto(link, wait_until="domcontentloaded")
    p.wait_idle()
    expect(p.main.get_by_text("What is stored.")).to_be_visible()
    p.shot("consent")
    p.act(lambda: p.main.get_by_role("button", name="I agree and take part").click())
    expect(p.main.get_by_text("Your deletion code")).to_be_visible()
    store = StudyStore(SqliteDatabase(data / "studies.sqlite3"))
    study = store.study(code)
    p.grids = grids(study)
    assert answer_test(p, "pre") == 16
    p.act(lambda: p.main.get_by_role("button", name="Go on").click())
    p.shot("path")
    p.act(lambda: p.main.get_by_role("link", name="Open the guided lesson").click())
    for _ in range(4):  # to step 5, the end of part 1: "Check yourself"
        p.act(lambda: p.main.get_by_role("button", name="Next").first.click())
    check = p.main.get_by_text(re.compile(r"Check yourself: \d question"))
    p.act(check.click)
    checks = p.main.locator('[data-testid="stExpander"]', has_text="Check yourself")
    p.act(lambda: checks.locator('[role="radiogroup"] label').first.click())
    p.act(lambda: checks.get_by_role("button", name="Check").first.click())
    expect(p.main.get_by_text(re.compile(r"Right:|The model's answer:"))).to_be_visible()
    p.shot("lesson-check-yourself")
    expect(p.sidebar.get_by_text(f"You are taking part in study {code}")).to_be_visible()
    p.act(lambda: p.sidebar.get_by_role("link", name="Back to the study").click())
    p.act(lambda: p.main.get_by_role("button", name=re.compile("I have finished the lesson")).click())
    assert answer_test(p, "post") == 16
    p.act(lambda: p.main.get_by_role("button", name="Go on").click())
    for group in p.main.locator('[data-testid="stRadio"] [role="radiogroup"]').all():
        group.locator("label").nth(2).click()
    for slider in p.main.locator('[data-testid="stSlider"] input[type="range"]').all():
        slider.press("ArrowRight")  # off "not answered": an untouched workload slider blocks sending
    p.shot("questionnaires")
    p.act(lambda: p.main.get_by_role("button", name="Send").click())
    expect(p.main.get_by_text("Thank you: you finished the study.")).to_be_visible()
    p.shot("done")

    people, events = store.records(code, key)[1:]
    assert [x["phase"] for x in people] == ["done"]
    verbs = [e["verb"] for e in events]
    assert verbs.count("answered") == 32 and verbs.count("rated") == 17 and "checked" in verbs
    assert any(e["object"] == "lesson/step/5" for e in events if e["verb"] == "viewed")
    for i in range(7):  # seven more participants, through the store, so that every figure has 5 people or more
        a = store.pseudonym(code, f"b-simulated-participant-{i:02d}")
        sp, _ = store.consent(code, a)
        for phase, nxt in (("pre", "path"), ("post", "survey")):
            form = sp.form(phase)
            for it in study.instrument["forms"][form]:
                right = (int(it["id"][1:]) + i) % (3 if phase == "pre" else 2) == 0
                store.answer(code, a, it["id"], it["answer"] if right else (it["answer"] + 1) % 3, 2)
            store.advance(code, a, nxt)
            if phase == "pre":
                store.advance(code, a, "post")
        for k in KEYS:
            store.rate(code, a, k, scale_of(k)[0] + (i % 3) * scale_of(k)[2], scale_of(k))
        store.advance(code, a, "done")
    teacher.act(lambda: teacher.main.get_by_text("I want to delete this study").click())  # any rerun reads again
    expect(teacher.main.get_by_text(re.compile(r"The 8 participants who took both tests"))).to_be_visible()
    assert teacher.main.locator('[class*="st-key-study_"] .js-plotly-plot').count() == 6  # every figure drawn
    teacher.shot("report", full=True)
    teacher.no_exception()
