"""Peer instruction in Chromium: a teacher tab and two student tabs (three browser contexts) on one `streamlit run
app.py`, through one cycle: vote, lock, discuss, vote again, reveal. Every step reaches the students' pages by the
class's events (nothing clicked on their side but their votes); the projected console shows no distribution until
the teacher asks for it; the students see it only after the reveal."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import FOLLOW_MS
from tests.browser.test_classroom_browser import new_tab

pytestmark = pytest.mark.browser


def vote(student, option: int, second: bool = False) -> None:
    button = student.main.locator(f".st-key-class_answer_1_{option}{'_r2' if second else ''} button")
    expect(button).to_be_visible(timeout=FOLLOW_MS)
    student.act(button.click)
    expect(button).to_have_attribute("data-testid", "stBaseButton-primary", timeout=FOLLOW_MS)  # their vote, marked


def test_a_teacher_and_two_students_through_one_peer_instruction_cycle(browser, app_url, app):
    teacher = app
    _, code = teacher.start_class()
    students = [new_tab(browser, app_url, f"pi-student{i}") for i in (1, 2)]
    try:
        for s in students:
            s.goto("classroom", **{"class": code})
            expect(s.sidebar.get_by_text(f"Following class {code}")).to_be_visible(timeout=30_000)
        teacher.act(lambda: teacher.main.get_by_text("What does dividing the scores by √d_k do").click())
        teacher.act(lambda: teacher.main.get_by_role("button", name="Ask the class").click())
        expect(teacher.main.get_by_text("Students vote (they may change")).to_be_visible(timeout=FOLLOW_MS)

        vote(students[0], 1)  # a wrong answer first, then changed before the lock
        vote(students[0], 0)
        vote(students[1], 1)
        expect(students[0].main.get_by_text("Vote on your own first")).to_be_visible()
        assert not students[0].main.locator('[data-testid="stPlotlyChart"]').count()  # no distribution
        students[0].shot("student-vote")
        expect(teacher.main.get_by_text("2 of 2 students answered")).to_be_visible(timeout=FOLLOW_MS)
        assert not teacher.main.locator('[data-testid="stPlotlyChart"]').count()  # the projector shows no votes

        teacher.act(lambda: teacher.main.get_by_role("button", name="Lock the vote").click())
        teacher.act(lambda: teacher.main.get_by_role("button", name="Discuss, then vote again").click())
        for s in students:
            expect(s.main.get_by_text("Discuss with a neighbour")).to_be_visible(timeout=FOLLOW_MS)
        teacher.act(lambda: teacher.main.get_by_role("button", name="Open the second vote").click())
        vote(students[0], 0, second=True)
        vote(students[1], 0, second=True)
        expect(teacher.main.get_by_text("2 of 2 students answered (second vote)")).to_be_visible(timeout=FOLLOW_MS)
        teacher.act(lambda: teacher.main.get_by_text("Show the votes and the suggested next move").click())
        expect(teacher.main.get_by_text("Suggested next move:")).to_be_visible(timeout=FOLLOW_MS)
        expect(teacher.main.locator('[data-testid="stPlotlyChart"]')).to_have_count(1)
        chart = teacher.main.locator('[data-testid="stPlotlyChart"]')
        expect(chart.get_by_text("Second vote")).to_be_visible()
        chart.scroll_into_view_if_needed()
        teacher.shot("teacher-console")

        teacher.act(lambda: teacher.main.get_by_role("button", name="Lock the second vote").click())
        teacher.act(lambda: teacher.main.get_by_role("button", name="Reveal the model's answer").click())
        for s in students:
            expect(s.main.get_by_text("The model's answer:")).to_be_visible(timeout=FOLLOW_MS)
            expect(s.main.locator('[data-testid="stPlotlyChart"]').first).to_be_visible()  # now the class's votes
            s.no_exception()
        students[1].main.locator('[data-testid="stPlotlyChart"]').first.scroll_into_view_if_needed()
        students[1].shot("reveal")
        teacher.no_exception()
    finally:
        for s in students:
            s.page.context.close()
