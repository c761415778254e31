"""Classroom mode in Chromium: one teacher tab and two student tabs (three browser contexts, so three
Streamlit sessions) on one `streamlit run app.py`. The students join with the link; the teacher changes
the sentence and a switch; both students' screens show it, with nothing clicked on their side and no timer
on their pages: the class's event stream (ui/classroom/push.py, one EventSource per page) reaches the page's
class component, which reruns it. A student's tab out of sight redraws nothing until it is seen again.
"""

from __future__ import annotations

import re
import time

import pytest
from playwright.sync_api import expect
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

from tests.browser.conftest import FOLLOW_MS, VIEWPORT, AppPage, HeldDownstream
from tools.browser import RUN_COUNTER_JS

pytestmark = pytest.mark.browser


def new_tab(browser, app_url: str, name: str) -> AppPage:
    context = browser.new_context(viewport=VIEWPORT, device_scale_factor=1)
    context.set_default_timeout(30_000)
    context.add_init_script(RUN_COUNTER_JS)
    page = context.new_page()
    page.full_runs = []  # the start of every run of the page the server sent this tab (a full run, or a following
    # student's page redrawn alone: the fragment that holds it)
    page.timers = []  # fragment timers the server registered in this tab (auto_rerun messages)
    page.streams = []  # the class event streams this tab opened
    page.on("websocket", lambda ws: ws.on("framereceived", lambda frame: count_full_run(page, frame)))
    page.on("request", lambda r: page.streams.append(r.url) if "/api/class/" in r.url else None)
    return AppPage(page, app_url, name)


def count_full_run(page, frame) -> None:
    if isinstance(frame, bytes | bytearray):
        msg = ForwardMsg()
        msg.ParseFromString(bytes(frame))
        if msg.WhichOneof("type") == "new_session":
            page.full_runs.append(time.perf_counter())
        elif msg.WhichOneof("type") == "auto_rerun":
            page.timers.append(msg.auto_rerun.interval)


def look(tab: AppPage, state: str) -> None:
    """The tab goes out of sight ("hidden": another tab in front) or comes back ("visible"), as far as the page's
    scripts can tell (headless Chromium keeps every page visible)."""
    tab.page.evaluate(
        """state => {
        Object.defineProperty(document, "visibilityState", {configurable: true, get: () => state});
        document.dispatchEvent(new Event("visibilitychange"));
    }""",
        state,
    )


def sentence_box(tab: AppPage):
    return tab.sidebar.get_by_role("textbox", name="Your sentence", exact=True)


def scale_switch(tab: AppPage):
    return tab.sidebar.get_by_role("switch", name="Divide by √d_k", exact=True)


def teacher_line(tab: AppPage, text: str):
    """In the line above a following student's page (the teacher's sentence, model and switches)."""
    return tab.main.get_by_text(re.compile("Your teacher's view .*" + re.escape(text)))


def test_two_students_follow_the_teacher(browser, app_url, app):
    teacher = app
    _, code = teacher.start_class()
    expect(teacher.main.get_by_role("img")).to_have_count(1)  # the QR code
    teacher.shot("teacher-console")
    students = [new_tab(browser, app_url, f"student{i}") for i in (1, 2)]
    try:
        for s in students:
            s.goto("classroom", **{"class": code})  # the join link
            expect(s.sidebar.get_by_text(f"Following class {code}")).to_be_visible(timeout=30_000)
            expect(s.main.get_by_role("heading", name="The Transformer at a glance")).to_be_visible()
            assert f"class={code}" in s.page.url
        # the teacher's sidebar counts them as they join, with nothing clicked (its stream's `tally`)
        expect(teacher.sidebar.get_by_text("2 students here")).to_be_visible(timeout=FOLLOW_MS)

        # the teacher goes to the overview (in the app: the session stays the teacher's), types, switches
        teacher.act(lambda: teacher.sidebar.get_by_role("link", name="Overview", exact=True).click())
        box = sentence_box(teacher)
        box.fill("i am a student")
        t0 = time.perf_counter()
        teacher.act(lambda: box.press("Enter"))
        seen = []
        for s in students:
            expect(teacher_line(s, "sentence “i am a student”")).to_be_visible(timeout=FOLLOW_MS)
            seen.append(time.perf_counter() - t0)
            expect(sentence_box(s)).to_have_count(0)  # while following: the teacher's, in that line
        expect(scale_switch(teacher)).to_be_checked()
        t1 = time.perf_counter()
        switch = teacher.page.get_by_role("switch", name="Divide by √d_k", exact=True)
        teacher.act(lambda: teacher.sidebar.get_by_test_id("stCheckbox").filter(has=switch).locator("label").click())
        expect(scale_switch(teacher)).not_to_be_checked()
        for s in students:
            expect(teacher_line(s, "no √d_k scaling")).to_be_visible(timeout=FOLLOW_MS)
            assert "Source tokens: i am a student" in s.main_text()
            seen.append(time.perf_counter() - t1)
            s.no_exception()
            s.shot("following")
        # no timer: the students' pages moved by the class's events alone, over one stream each; a page that
        # shows the class's state is not redrawn, and its class component shows nothing
        for s in students:
            s.wait_idle()
            assert s.page.timers == [], s.page.timers
            assert len(s.page.streams) == 1 and f"/api/class/{code}/events" in s.page.streams[0], s.page.streams
            expect(s.page.get_by_role("status")).to_be_hidden()
        runs = [len(s.page.full_runs) for s in students]
        for s in students:
            s.page.wait_for_timeout(3_000)
        assert [len(s.page.full_runs) for s in students] == runs
        assert all(r >= 3 for r in runs), runs

        # a tab out of sight (another tab in front) hears the class but redraws nothing; seen again, it catches up
        here, away = students
        look(away, "hidden")
        before = len(away.page.full_runs)
        box.fill("you are a teacher")
        teacher.act(lambda: box.press("Enter"))
        expect(teacher_line(here, "“you are a teacher”")).to_be_visible(timeout=FOLLOW_MS)
        away.page.wait_for_timeout(3_000)  # (the component asks again after 2.5 s when a page stays behind)
        assert len(away.page.full_runs) == before
        expect(teacher_line(away, "“i am a student”")).to_be_visible()
        t2 = time.perf_counter()
        look(away, "visible")
        expect(teacher_line(away, "“you are a teacher”")).to_be_visible(timeout=FOLLOW_MS)
        seen.append(time.perf_counter() - t2)
        assert "Source tokens: you are a teacher" in away.main_text()
        away.no_exception()
        print(f"students showed the teacher's change after {', '.join(f'{x:.1f}' for x in seen)} s")

        # the guided lesson: the teacher moves the students; they have no Back / Next or sentence picker of their own,
        # only a button to go on alone, which gives them back (and the sidebar says they explore)
        teacher.act(lambda: teacher.sidebar.get_by_role("link", name="Guided lesson", exact=True).click())
        teacher.act(lambda: teacher.main.get_by_role("button", name="Next").first.click())
        for s in students:
            expect(s.main.get_by_text("Step 2 of 25").first).to_be_visible(timeout=FOLLOW_MS)
            expect(s.main.get_by_text("Your teacher moves the class through the lesson.")).to_be_visible()
            expect(s.main.get_by_role("button", name="Next")).to_have_count(0)
            expect(s.main.get_by_text("choose another, or type your own")).to_have_count(0)
        here.shot("led-lesson")
        here.act(lambda: here.main.get_by_role("button", name="Explore on my own").click())
        expect(here.sidebar.get_by_text(f"Exploring · class {code}")).to_be_visible()
        here.act(lambda: here.main.get_by_role("button", name="Next").first.click())
        expect(here.main.get_by_text("Step 3 of 25").first).to_be_visible()
        expect(away.main.get_by_text("Step 2 of 25").first).to_be_visible()  # the other still follows the teacher
        here.no_exception()
        teacher.no_exception()
    finally:
        for s in students:
            s.page.context.close()


# (title in the sidebar, the page's heading)
MOVES = [("Guided lesson", "Guided lesson"), ("Overview", "The Transformer at a glance")] * 2


def test_teacher_moves_between_pages(browser, app_url, app):
    """The teacher's own move publishes the class's state, whose event reaches the teacher's tab before the move's
    run does: the teacher's sidebar panel then asks for its fragment's run with the page left. Such a run once moved
    the session back to that page: it dropped the new page's state and the browser cleared its main area (the
    projector showed an empty page). The pages are drawn first in another session, so that their runs are quick (the
    race was lost most often then)."""
    other = new_tab(browser, app_url, "other")
    try:
        for path in ("lesson", "overview"):
            other.goto(path)
    finally:
        other.page.context.close()
    teacher = app
    teacher.start_class()
    teacher.act(lambda: teacher.sidebar.get_by_role("link", name="Overview", exact=True).click())
    box = sentence_box(teacher)
    box.fill("i am a student")
    teacher.act(lambda: box.press("Enter"))
    for title, heading in MOVES:
        teacher.act(lambda title=title: teacher.sidebar.get_by_role("link", name=title, exact=True).click())
        teacher.page.wait_for_timeout(1_500)  # (the panel's fragment run comes after the page's)
        teacher.wait_idle()
        expect(teacher.main.get_by_role("heading", name=heading, exact=True)).to_be_visible()
        expect(sentence_box(teacher)).to_have_value("i am a student")
        expect(teacher.sidebar.get_by_role("link", name=title, exact=True)).to_have_attribute("aria-current", "page")
        assert "s=i" in teacher.page.url, teacher.page.url
    teacher.shot("last-move")
    teacher.no_exception()


def steps_shown(tab: AppPage, seconds: float) -> list[int]:
    """The lesson steps `tab` shows over `seconds` (looked at every 0.1 s)."""
    seen, end = [], time.monotonic() + seconds
    while time.monotonic() < end:
        m = re.search(r"Step (\d+) of 25", tab.main_text())
        if m and (not seen or seen[-1] != int(m[1])):
            seen.append(int(m[1]))
        tab.page.wait_for_timeout(100)
    return seen


@pytest.fixture
def class_on_the_lesson(browser, app_url, app):
    """A class on the guided lesson's step 1 (the teacher: `app`, its websocket can be held back), one student
    following. Yields (held, student)."""
    teacher = app
    held = HeldDownstream(teacher.page)
    link, _ = teacher.start_class()
    student = new_tab(browser, app_url, "student")
    try:
        student.page.goto(link)
        student.wait_idle()
        teacher.act(lambda: teacher.sidebar.get_by_role("link", name="Guided lesson", exact=True).click())
        expect(student.main.get_by_text("Step 1 of 25").first).to_be_visible(timeout=FOLLOW_MS)
        yield held, student
        teacher.no_exception()
    finally:
        student.page.context.close()


def test_a_teachers_lesson_step_holds_when_the_run_reaches_the_browser_late(app, class_on_the_lesson):
    """The teacher's Next publishes the new step: its event reaches the teacher's tab, whose sidebar panel asks for
    its fragment's run, before the run's messages do. The ask carries the step picker's old value, whose callback
    took the teacher's lesson back a step; the teacher's next move (here: to the class page) published that step, and
    took the class back with it."""
    (held, student), teacher = class_on_the_lesson, app
    held.during(app, lambda: teacher.main.get_by_role("button", name="Next").first.click())
    expect(teacher.main.get_by_text("Step 2 of 25").first).to_be_visible()
    expect(student.main.get_by_text("Step 2 of 25").first).to_be_visible(timeout=FOLLOW_MS)
    teacher.act(lambda: teacher.sidebar.get_by_role("link", name="Classroom", exact=True).click())
    assert steps_shown(student, 5.0) == [2]  # the class stays where the teacher took it


def test_a_teachers_next_and_a_switch_at_once_both_reach_the_class(app, class_on_the_lesson):
    """On a slow connection the teacher presses Next, then flips a switch before Next's run has reached the tab: the
    switch's run carries the step picker as the tab still shows it (step 1). That old value took the lesson back to
    step 1, for the whole class; the picker of a step the lesson has left now changes nothing."""
    (held, student), teacher = class_on_the_lesson, app
    switch = teacher.page.get_by_role("switch", name="Positional encoding", exact=True)

    def next_then_switch() -> None:
        teacher.main.get_by_role("button", name="Next").first.click()
        teacher.page.wait_for_timeout(700)
        teacher.sidebar.get_by_test_id("stCheckbox").filter(has=switch).locator("label").click()

    held.during(app, next_then_switch)
    expect(teacher.main.get_by_text("Step 2 of 25").first).to_be_visible()
    expect(student.main.get_by_text("Step 2 of 25").first).to_be_visible(timeout=FOLLOW_MS)
    assert steps_shown(student, 3.0) == [2]
    expect(teacher_line(student, "positional encoding off")).to_be_visible()
