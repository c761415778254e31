"""The guided lesson in Chromium, on a fresh `streamlit run app.py`: every step's shared link opens that step.

One server (the session's `app_url`), one browser tab reused for every link: a teacher's
``/lesson?lesson=thinking+machines&step=N`` must show step N's title, the sidebar, and no exception box.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from model import lesson as L

pytestmark = pytest.mark.browser

SENTENCE = "thinking machines"


def link(base_url: str, step: object, sentence: str = SENTENCE) -> str:
    return f"{base_url}/lesson?lesson={sentence.replace(' ', '+')}&step={step}"


def heading(app):
    return app.main.locator("h2").first


def test_every_step_opens_from_its_link(app):
    page = app.page
    for k, step in enumerate(L.STEPS, start=1):
        page.goto(link(app.base_url, k), wait_until="domcontentloaded")
        app.wait_idle()
        expect(heading(app)).to_contain_text(f"{k}. {step.title}")
        expect(page.get_by_text(f"Step {k} of {L.N_STEPS}").first).to_be_visible()  # above and below the step
        expect(app.sidebar.get_by_label("Your sentence").first).to_be_visible()  # through app.py: the sidebar
        app.no_exception()
        assert re.search(rf"[?&]step={k}(&|$)", page.url), page.url
        if k in (1, 9, L.N_STEPS):
            app.shot(f"step-{k}")


def test_next_by_keyboard_and_a_bad_step(app):
    page = app.page
    page.goto(link(app.base_url, 9), wait_until="domcontentloaded")
    app.wait_idle()
    next_button = app.main.get_by_role("button", name="Next").first  # the one above the step
    next_button.focus()
    app.act(lambda: page.keyboard.press("Enter"))
    expect(heading(app)).to_contain_text(f"10. {L.STEPS[9].title}")
    expect(page).to_have_url(re.compile(r"[?&]step=10(&|$)"))
    page.goto(link(app.base_url, "%D9%A3"), wait_until="domcontentloaded")  # "٣", an Arabic-Indic digit
    app.wait_idle()
    expect(heading(app)).to_contain_text(f"1. {L.STEPS[0].title}")
    expect(app.main.get_by_text("is not a step number")).to_be_visible()
    app.no_exception()
