"""The class's event stream at its end, in Chromium (ui/classroom/push.py): a class that ends says so on its students'
streams once and the server closes them; the students' pages leave the class and do not open them again (an
EventSource whose stream the server closed opens it again a second later, unless its page closes it)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.test_classroom_browser import new_tab

pytestmark = pytest.mark.browser


def test_a_class_that_ends_closes_its_students_streams_for_good(browser, app_url, app):
    teacher = app
    _, code = teacher.start_class()
    student = new_tab(browser, app_url, "student")
    try:
        student.goto("classroom", **{"class": code})
        expect(student.sidebar.get_by_text(f"Following class {code}")).to_be_visible(timeout=30_000)
        student.wait_idle()
        assert len(student.page.streams) == 1, student.page.streams
        teacher.act(lambda: teacher.main.get_by_role("button", name="End the class for everyone").click())
        expect(student.sidebar.get_by_text(f"Following class {code}")).to_have_count(0, timeout=20_000)
        expect(student.page.get_by_text(f"Class {code} has ended")).to_be_visible()  # (the message that stays)
        student.wait_idle()
        student.shot("class-ended")
        student.page.wait_for_timeout(5_000)  # (a stream the server closed and the page opened again: within 1-4 s)
        assert len(student.page.streams) == 1, student.page.streams
        student.no_exception()
    finally:
        student.page.context.close()
