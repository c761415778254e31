"""The classroom walk's findings (../shared/audits/classroom-walk-4.md) checked in Chromium, each test named after
the findings it covers: a phone's tap on the click grid, a teacher's reload, nothing asked of any other server,
the roster and "Bring everyone back", the console on a second device, a projected snapshot opening at its top, and
the projector's first screen in presenter mode. (Following that holds, D1 and D14, is tests/browser/
test_class_soak.py.)
"""

from __future__ import annotations

import re
import urllib.parse

import pytest
from playwright.sync_api import expect

from bench.classroom_browser import plan_and_stops
from tests.browser.conftest import FOLLOW_MS, AppPage
from tools.browser import RUN_COUNTER_JS

pytestmark = pytest.mark.browser
COREF = "the animal didn't cross the street because it was too tired"


def tab(
    browser,
    app_url: str,
    name: str,
    width: int = 1280,
    height: int = 800,
    phone: bool = False,
    outside: list | None = None,
) -> AppPage:
    """A new browser context (its own cookies: its own session, student or teacher) on the app. `outside`: every
    request to another host than the server is refused and recorded there."""
    context = browser.new_context(
        viewport={"width": width, "height": height}, device_scale_factor=1, is_mobile=phone, has_touch=phone
    )
    context.set_default_timeout(60_000)
    context.add_init_script(RUN_COUNTER_JS)
    if outside is not None:
        here = urllib.parse.urlsplit(app_url).hostname

        def route(r):
            if urllib.parse.urlsplit(r.request.url).hostname not in (here, None):
                outside.append(r.request.url)
                r.abort()
            else:
                r.continue_()

        context.route("**/*", route)
    return AppPage(context.new_page(), app_url, name)


def cell_centre(page, row: int, col: int, rows: int, cols: int) -> tuple[float, float]:
    """The centre of cell (row, col) of the click grid, from its plot area in the page."""
    box = page.locator('[data-testid="stPlotlyChart"] .nsewdrag').first.bounding_box()
    return box["x"] + (col + 0.5) * box["width"] / cols, box["y"] + (row + 0.5) * box["height"] / rows


def test_d2_d8_d36_a_phone_taps_the_cell_under_its_finger_and_another_row_is_refused(browser, app_url):
    teacher = tab(browser, app_url, "teacher")
    phone = tab(browser, app_url, "phone", 390, 844, phone=True)
    try:
        link, _ = teacher.start_class(s=COREF)
        teacher.act(lambda: teacher.main.get_by_text("Click the tensor").click())
        teacher.act(lambda: teacher.main.get_by_role("button", name="Ask the class").click())
        phone.page.goto(link)
        phone.wait_idle()
        expect(phone.main.get_by_text("Click a cell in the framed row")).to_be_visible(timeout=FOLLOW_MS)
        words = COREF.split() + ["EOS"]
        it, street = words.index("it"), words.index("street")
        phone.main.locator('[data-testid="stPlotlyChart"]').first.scroll_into_view_if_needed()
        phone.page.wait_for_timeout(500)
        x, y = cell_centre(phone.page, it, street, len(words), len(words))
        # (a phone's tap ends in a click, which Plotly selects on; Playwright's touchscreen.tap sends touch events only)
        phone.act(lambda: phone.page.mouse.click(x, y))
        expect(phone.main.get_by_text(f"{it}:it → {street}:street")).to_be_visible(timeout=FOLLOW_MS)
        phone.shot("tapped-cell")
        x, y = cell_centre(phone.page, 0, 1, len(words), len(words))  # row 0: not the asked row
        phone.act(lambda: phone.page.mouse.click(x, y))
        expect(phone.main.get_by_text("the question asks about the row of")).to_be_visible(timeout=FOLLOW_MS)
        expect(phone.main.get_by_text(f"{it}:it → {street}:street")).to_be_visible()  # the vote stays as it was
        teacher.act(lambda: teacher.main.get_by_role("button", name="Lock the vote").click())
        teacher.act(lambda: teacher.main.get_by_role("button", name="Reveal the model's answer").click())
        # D3: "7:it → 5:street: not what the model does" is written as it is (":it:" was drawn as a flag)
        expect(
            phone.main.get_by_text(re.compile(f"Yours: {it}:it → {street}:street: (not what|the same)"))
        ).to_be_visible(timeout=FOLLOW_MS)
        expect(phone.main.get_by_text("The model's weights")).to_be_visible()
        phone.shot("reveal-on-a-phone", full=True)
    finally:
        for t in (teacher, phone):
            t.page.context.close()


def test_d9_d11_d27_d41_d44_a_class_with_a_console_a_roster_a_reload_and_nothing_from_outside(browser, app_url):
    outside: list[str] = []
    teacher = tab(browser, app_url, "teacher", outside=outside)
    student = tab(browser, app_url, "student", outside=outside)
    console = tab(browser, app_url, "console", 390, 844, phone=True, outside=outside)
    try:
        link, _ = teacher.start_class()
        code = re.search(r"class=([A-Z0-9]{6})", link)[1]
        teacher.page.reload()  # D9: the teacher's reload is still the teacher of the class
        teacher.wait_idle()
        expect(teacher.sidebar.get_by_text(f"Teaching class {code}")).to_be_visible(timeout=FOLLOW_MS)
        expect(teacher.main.get_by_role("button", name="Start a class")).to_have_count(0)
        student.page.goto(link)
        student.wait_idle()
        expect(student.sidebar.get_by_text(f"Following class {code}")).to_be_visible(timeout=FOLLOW_MS)
        expect(teacher.sidebar.get_by_text("1 student here · 1 following")).to_be_visible(timeout=FOLLOW_MS)

        # D41: a student who leaves follow mode without the button shows at once on the teacher's screen
        teacher.act(lambda: teacher.sidebar.get_by_role("link", name="Overview", exact=True).click())
        student.act(lambda: student.sidebar.get_by_role("button", name="Explore on my own").click())
        student.act(lambda: student.main.get_by_role("button", name="Follow the teacher").click())
        box = student.sidebar.get_by_role("textbox", name="Your sentence", exact=True)
        expect(box).to_have_count(0)  # following: the sentence is the teacher's
        student.act(lambda: student.sidebar.get_by_role("link", name="Positional encoding", exact=True).click())
        expect(teacher.sidebar.get_by_text("left without choosing to")).to_be_visible(timeout=FOLLOW_MS)
        teacher.shot("roster-in-the-sidebar")
        teacher.act(lambda: teacher.sidebar.get_by_role("button", name="Bring everyone back").click())
        expect(student.sidebar.get_by_text(f"Following class {code}")).to_be_visible(timeout=FOLLOW_MS)

        # D44: the console on a second device (the link the teacher's private toggle shows): it moves the class's
        # view only when asked, and sees the snapshots
        teacher.act(lambda: teacher.sidebar.get_by_role("link", name="Classroom", exact=True).click())
        teacher.act(lambda: teacher.main.get_by_text("Show my teacher key").click())
        codes = teacher.main.locator('[data-testid="stCode"]')
        key = re.search(rf"{code}-[A-Za-z0-9_-]+", codes.nth(1).inner_text())[0]
        console.goto("classroom", console=key)
        expect(console.main.get_by_text(f"Teacher's console · class {code}")).to_be_visible(timeout=FOLLOW_MS)
        assert "console=" not in console.page.url  # the key leaves the address at once
        teacher.act(lambda: teacher.sidebar.get_by_role("link", name="Overview", exact=True).click())
        student.act(lambda: student.sidebar.get_by_role("button", name="Explore on my own").click())
        student.act(lambda: student.sidebar.get_by_role("link", name="Positional encoding", exact=True).click())
        student.act(lambda: student.sidebar.get_by_role("button", name="Send a snapshot to the teacher").click())
        student.page.get_by_label("One line for your teacher").fill("positions make waves")
        student.act(lambda: student.page.get_by_role("button", name="Send this view").click())
        student.act(lambda: student.main.get_by_role("button", name="Follow the teacher").click())
        console.page.reload()  # (a console's reload is still the console)
        console.wait_idle()
        expect(console.main.get_by_text("positions make waves")).to_be_visible(timeout=FOLLOW_MS)
        console.shot("console-gallery", full=True)
        expect(teacher.sidebar.get_by_text("1 new snapshot from your students")).to_be_visible(timeout=FOLLOW_MS)  # D27
        console.act(lambda: console.main.get_by_role("button", name="Project this").click())
        # the projector (the lead screen) and the class move to the snapshot's view, its note above the page
        expect(teacher.main.get_by_text("positions make waves")).to_be_visible(timeout=FOLLOW_MS)
        heading = teacher.main.get_by_role("heading", name="Positional encoding", exact=True)
        expect(heading).to_be_visible(timeout=FOLLOW_MS)
        expect(student.main.get_by_text("Snapshot 1 from student 1")).to_be_visible(timeout=FOLLOW_MS)
        assert teacher.page.evaluate("document.querySelector('[data-testid=\"stMain\"]').scrollTop") == 0  # D13
        teacher.shot("projected-snapshot")
        assert outside == [], outside  # D11: no page asked anything of another host
    finally:
        for t in (teacher, student, console):
            t.page.context.close()


def test_d32_d33_d34_the_projectors_first_screen_holds_the_stop_and_its_figure(browser, app_url):
    """Presenter mode at 1280 x 720, a lesson stop of the Thinking Machines plan: its caption and its whole figure
    on the first screen, the plan's Next at the top of the sidebar, the pages in a bar above the page."""
    teacher = tab(browser, app_url, "projector", 1280, 720)
    try:
        link, _ = plan_and_stops()  # the shipped plan's link: /classroom?plan=...
        teacher.page.goto(app_url + link)
        teacher.wait_idle()
        teacher.act(lambda: teacher.main.get_by_role("button", name="Start a class with this plan").click())
        teacher.goto("lesson", presenter=1)  # (a reload: still the teacher, on the class's view)
        for _ in range(9):  # stop 10: all heads at once, a heatmap of numbers
            teacher.act(lambda: teacher.sidebar.get_by_role("button", name=re.compile("^Next stop")).click())
        expect(teacher.main.get_by_text("Stop 10 of 12")).to_be_visible(timeout=FOLLOW_MS)
        teacher.page.wait_for_function("document.querySelector('[data-testid=\"stPlotlyChart\"] .main-svg')")
        chart = teacher.main.locator('[data-testid="stPlotlyChart"]').first.bounding_box()
        banner = teacher.main.get_by_text("Stop 10 of 12").bounding_box()
        assert banner["y"] >= 0 and chart["y"] + chart["height"] <= 720, (banner, chart)
        assert chart["height"] >= 200 and chart["width"] >= 600, chart  # to read from the back of the room
        nxt = teacher.sidebar.get_by_role("button", name=re.compile("^Next stop")).bounding_box()
        assert nxt["y"] + nxt["height"] <= 360, nxt  # the plan's buttons first in the sidebar
        assert teacher.sidebar.get_by_role("link", name="Overview", exact=True).count() == 0  # the pages: on top
        teacher.shot("presenter-first-screen")
    finally:
        teacher.page.context.close()
