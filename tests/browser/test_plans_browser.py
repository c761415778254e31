"""Lesson plans, pacing and snapshots in Chromium: a teacher starts a class from a shipped plan, a student
joins by the link and follows it; Next moves the student, a pause shows "Eyes on the projector" on the
student's screen until the teacher resumes, both by the class's events (no click on the student's side); the
student sends a snapshot and the teacher's gallery shows it. Screenshots of the plan editor, the paused student
and the gallery are kept in tests/artifacts/.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import FOLLOW_MS, HeldDownstream
from tests.browser.test_classroom_browser import new_tab

pytestmark = pytest.mark.browser


def start_the_plan(teacher) -> str:
    """As a teacher: start a class from the shipped plan "What decides il or elle" (on its first stop); the code."""
    teacher.goto("classroom")
    teacher.act(lambda: teacher.main.get_by_test_id("stSelectbox").filter(has_text="Start from a shipped plan").click())
    teacher.act(lambda: teacher.page.get_by_role("option", name="What decides il or elle").click())
    expect(teacher.main.get_by_text("What decides il or elle · 9 stops")).to_be_visible()
    teacher.main.get_by_text("Add this view as a stop").first.scroll_into_view_if_needed()
    teacher.shot("plan-editor")
    teacher.act(lambda: teacher.main.get_by_role("button", name="Start a class with this plan").click())
    expect(teacher.main.get_by_text("Stop 1 of 9")).to_be_visible()
    teacher.act(lambda: teacher.sidebar.get_by_role("link", name="Classroom", exact=True).click())
    link = teacher.main.get_by_text(re.compile(r"/classroom\?class=[A-Z0-9]{6}")).first.inner_text()
    return re.search(r"class=([A-Z0-9]{6})", link)[1]


def test_plan_pace_and_snapshot_in_chromium(browser, app_url, app):
    teacher = app
    code = start_the_plan(teacher)
    student = new_tab(browser, app_url, "student")
    try:
        student.goto("classroom", **{"class": code})
        expect(student.sidebar.get_by_text(f"Following class {code}")).to_be_visible(timeout=30_000)
        expect(student.main.get_by_text("Stop 1 of 9")).to_be_visible(timeout=FOLLOW_MS)

        teacher.act(lambda: teacher.sidebar.get_by_role("button", name=re.compile("^Next stop")).click())
        expect(student.main.get_by_text("Stop 2 of 9")).to_be_visible(timeout=FOLLOW_MS)
        expect(student.main.get_by_text("Which one word, changed, turned il into elle?")).to_be_visible()
        # with the question open, still the teacher's line above the page and no controls of the student's own
        expect(student.main.get_by_text(re.compile("Your teacher's view · sentence"))).to_be_visible()
        expect(student.sidebar.get_by_label("Your sentence")).to_have_count(0)

        teacher.act(lambda: teacher.sidebar.get_by_role("button", name="Pause: eyes on the projector").click())
        expect(student.main.get_by_role("heading", name="Eyes on the projector")).to_be_visible(timeout=FOLLOW_MS)
        student.wait_idle()
        student.shot("paused-student")
        teacher.act(lambda: teacher.sidebar.get_by_role("button", name="Resume the class").click())
        expect(student.main.get_by_text("Stop 2 of 9")).to_be_visible(timeout=FOLLOW_MS)

        student.act(lambda: student.sidebar.get_by_role("button", name="Send a snapshot to the teacher").click())
        student.page.get_by_label("One line for your teacher").fill("wide decides elle!")
        student.act(lambda: student.page.get_by_role("button", name="Send this view").click())
        expect(student.page.get_by_text("Snapshot 1 sent to your teacher.")).to_be_visible(timeout=FOLLOW_MS)
        teacher.act(lambda: teacher.sidebar.get_by_role("link", name="Classroom", exact=True).click())
        expect(teacher.main.get_by_text("Snapshots from students (1)")).to_be_visible(timeout=FOLLOW_MS)
        expect(teacher.main.get_by_text("wide decides elle!")).to_be_visible()
        teacher.main.get_by_text("Snapshots from students (1)").scroll_into_view_if_needed()
        teacher.shot("gallery")
        student.no_exception()
        teacher.no_exception()
    finally:
        student.page.context.close()


def test_a_stop_s_figure_and_the_teacher_s_pickers_reach_the_student_s_screen(browser, app_url, app):
    """Stop 5 of "What decides il or elle" names its figure (decoder cross-attention, layer 1, the mystery head's):
    the student's screen shows it without a click. The teacher, on the projector, picks layer 0: the student's
    picker follows, on a laptop and on a phone. The student's own choice of the head in detail keeps them
    following."""
    teacher = app
    code = start_the_plan(teacher)
    student, phone = new_tab(browser, app_url, "student"), new_tab(browser, app_url, "phone")
    phone.page.set_viewport_size({"width": 390, "height": 844})
    try:
        for tab in (student, phone):
            tab.goto("classroom", **{"class": code})
            expect(tab.main.get_by_text("Stop 1 of 9")).to_be_visible(timeout=FOLLOW_MS)
        for n in range(2, 6):
            teacher.act(lambda: teacher.sidebar.get_by_role("button", name=re.compile("^Next stop")).click())
            for tab in (student, phone):
                expect(tab.main.get_by_text(f"Stop {n} of 9")).to_be_visible(timeout=FOLLOW_MS)
        cross = "decoder cross-attention (encoder-decoder)"
        for tab in (student, phone):
            expect(tab.main.get_by_role("radio", name=cross)).to_be_checked(timeout=FOLLOW_MS)
            expect(tab.picker("Layer")).to_have_value("layer 1")
            expect(tab.main.get_by_text("the mystery head").first).to_be_visible()
            tab.wait_idle()
            tab.main.get_by_text("All heads of a layer").scroll_into_view_if_needed()
            tab.shot("stop-5")

        expect(teacher.main.get_by_role("radio", name=cross)).to_be_checked()
        teacher.choose("Layer", "layer 0")
        for tab in (student, phone):
            expect(tab.picker("Layer")).to_have_value("layer 0", timeout=FOLLOW_MS)
        student.choose("Head", "head 2")
        student.page.wait_for_timeout(1_000)
        student.wait_idle()
        expect(student.picker("Head")).to_have_value("head 2")
        expect(student.sidebar.get_by_text(f"Following class {code}")).to_be_visible()
        expect(student.picker("Layer")).to_have_value("layer 0")
        for tab in (student, phone, teacher):
            tab.no_exception()
    finally:
        student.page.context.close()
        phone.page.context.close()


@pytest.mark.parametrize(("left", "path"), [("Tokens and embeddings", "tokens"), ("Classroom", "classroom")])
def test_a_click_that_crosses_a_plans_next_stop_keeps_the_stop_and_the_click(browser, app_url, app, left, path):
    """On a slow connection the teacher, on a page off the plan's stop (the tokens page; the class page, where the
    plan starts), presses Next stop, then flips a switch before the stop's run has reached the tab. The switch's
    request still names the page the tab showed (and carries its widgets): it took the teacher back there, and from
    a shared page published it, and the class with it. Now teacher and class stay on the stop's page, with the switch
    off; a real move back, a moment later, still counts."""
    teacher = app
    held = HeldDownstream(teacher.page)
    code = start_the_plan(teacher)  # (the teacher ends on the class page)
    student = new_tab(browser, app_url, "student")
    try:
        student.goto("classroom", **{"class": code})
        expect(student.main.get_by_text("Stop 1 of 9")).to_be_visible(timeout=FOLLOW_MS)
        if path != "classroom":
            teacher.act(lambda: teacher.sidebar.get_by_role("link", name=left, exact=True).click())
            expect(student.main.get_by_role("heading", name=left)).to_be_visible(timeout=FOLLOW_MS)
        switch = teacher.page.get_by_role("switch", name="Divide by √d_k", exact=True)

        def next_then_switch() -> None:
            teacher.sidebar.get_by_role("button", name=re.compile("^Next stop")).click()
            teacher.page.wait_for_timeout(700)
            teacher.sidebar.get_by_test_id("stCheckbox").filter(has=switch).locator("label").click()

        held.during(teacher, next_then_switch)
        teacher.page.wait_for_timeout(1_500)  # (the runs the release sets off)
        teacher.wait_idle()
        assert teacher.page.url.split("?")[0].endswith("/overview"), teacher.page.url
        expect(switch).not_to_be_checked()
        # stop 2's question is asked; its banner is gone, as the switch left the stop (the same without the delay)
        expect(student.main.get_by_text("Which one word, changed, turned il into elle?")).to_be_visible()
        expect(student.page).to_have_url(re.compile(r"/overview\?.*\bscale=0\b"), timeout=FOLLOW_MS)  # the switch too

        # a move back to the page just left, a moment later, is the teacher's own (the class follows to a shared page)
        teacher.act(lambda: teacher.sidebar.get_by_role("link", name=left, exact=True).click())
        teacher.page.wait_for_timeout(1_500)
        teacher.wait_idle()
        assert teacher.page.url.split("?")[0].endswith(f"/{path}"), teacher.page.url
        if path != "classroom":
            expect(student.main.get_by_role("heading", name=left)).to_be_visible(timeout=FOLLOW_MS)
        teacher.no_exception()
        student.no_exception()
    finally:
        student.page.context.close()


def console_of(browser, app_url, teacher, code: str):
    """As the teacher (on the class page): the console on a second device, opened with the teacher's key."""
    teacher.act(lambda: teacher.main.get_by_text("Show my teacher key").click())
    key = re.search(rf"{code}-[A-Za-z0-9_-]+", teacher.main.locator('[data-testid="stCode"]').nth(1).inner_text())[0]
    teacher.act(lambda: teacher.main.get_by_text("Show my teacher key").click())
    console = new_tab(browser, app_url, "console")
    console.goto("classroom", console=key)
    expect(console.main.get_by_text(f"Teacher's console · class {code}")).to_be_visible(timeout=FOLLOW_MS)
    return console


def test_a_projector_keeps_its_page_when_a_click_crosses_the_consoles_next(browser, app_url, app):
    """The console moves the class to the next stop; half a second later the projector, whose messages come late,
    opens the tokens page. The sidebar's panel kept asking for its own run from the page the tab still showed; one
    such run, in the same burst as the run that changed the page, made the browser clear the page, and the
    projector stayed empty (a review found it 2 runs in 2). Now such an ask draws the whole page."""
    teacher = app
    held = HeldDownstream(teacher.page)
    code = start_the_plan(teacher)
    console = console_of(browser, app_url, teacher, code)
    try:
        teacher.act(lambda: teacher.sidebar.get_by_role("button", name=re.compile("^Next stop")).click())

        def console_next_then_link() -> None:
            console.main.get_by_role("button", name=re.compile("^Next stop")).click()
            teacher.page.wait_for_timeout(500)
            teacher.sidebar.get_by_role("link", name="Tokens and embeddings", exact=True).click()

        held.during(teacher, console_next_then_link)
        teacher.page.wait_for_timeout(3_000)  # (the panel's asks the release sets off)
        teacher.wait_idle()
        assert teacher.page.url.split("?")[0].endswith("/tokens"), teacher.page.url
        expect(teacher.main.get_by_role("heading", name="Tokens and embeddings").first).to_be_visible()
        expect(teacher.main.get_by_test_id("stPlotlyChart").first).to_be_visible()  # the page, not only its title
        teacher.no_exception()
    finally:
        console.page.context.close()


def test_a_student_who_opens_a_page_as_the_class_moves_gets_that_page(browser, app_url, app):
    """A following student, whose messages come late, opens the tokens page as the teacher's Next stop moves the
    class on. The page's own stream then asked for the whole app from the page the tab still showed, the one the
    class had left: the student ended exploring there, and in 3 runs of 4 under Streamlit's "Cached ForwardMsg MISS"
    with a page that never finished."""
    teacher = app
    code = start_the_plan(teacher)
    student = new_tab(browser, app_url, "student")
    held = HeldDownstream(student.page)
    try:
        student.goto("classroom", **{"class": code})
        expect(student.main.get_by_text("Stop 1 of 9")).to_be_visible(timeout=FOLLOW_MS)
        for stop in (2, 3):
            teacher.act(lambda: teacher.sidebar.get_by_role("button", name=re.compile("^Next stop")).click())
            expect(student.main.get_by_text(f"Stop {stop} of 9")).to_be_visible(timeout=FOLLOW_MS)

        def next_then_link() -> None:
            teacher.sidebar.get_by_role("button", name=re.compile("^Next stop")).click()
            student.page.wait_for_timeout(800)
            student.sidebar.get_by_role("link", name="Tokens and embeddings", exact=True).click()

        held.during(student, next_then_link)
        student.page.wait_for_timeout(3_000)
        student.wait_idle()
        assert student.page.url.split("?")[0].endswith("/tokens"), student.page.url
        expect(student.main.get_by_role("heading", name="Tokens and embeddings").first).to_be_visible()
        expect(student.sidebar.get_by_text(f"Exploring · class {code}")).to_be_visible()
        expect(student.page.get_by_text("Cached ForwardMsg MISS")).to_have_count(0)
        student.no_exception()
    finally:
        student.page.context.close()


def test_a_clicker_moves_the_plan_right_after_a_switch_was_flipped(app):
    """A presentation clicker sends PageDown / PageUp, and B pauses. Streamlit's own shortcuts ignore every key sent
    to an input, a switch's too: a teacher who flipped "Divide by √d_k" and then clicked on found the plan stuck.
    The keyboard script (ui/style.py) presses the plan's button for those keys on a switch."""
    teacher = app
    start_the_plan(teacher)
    switch = teacher.sidebar.get_by_role("switch", name="Divide by √d_k", exact=True)

    def on_the_switch(key: str) -> None:
        switch.focus()
        teacher.act(lambda: teacher.page.keyboard.press(key))

    on_the_switch("Space")
    expect(switch).not_to_be_checked()
    assert teacher.page.evaluate("document.activeElement.getAttribute('role')") == "switch"
    on_the_switch("PageDown")
    expect(teacher.sidebar.get_by_text("stop 2 of 9", exact=True)).to_be_visible(timeout=FOLLOW_MS)
    on_the_switch("PageUp")
    expect(teacher.sidebar.get_by_text("stop 1 of 9", exact=True)).to_be_visible(timeout=FOLLOW_MS)
    on_the_switch("b")
    expect(teacher.sidebar.get_by_role("button", name="Resume the class")).to_be_visible(timeout=FOLLOW_MS)
    on_the_switch("b")
    expect(teacher.sidebar.get_by_role("button", name="Pause: eyes on the projector")).to_be_visible(timeout=FOLLOW_MS)
    teacher.no_exception()
