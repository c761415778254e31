"""The training page in Chromium: start a tiny run, watch the progress bar move, stop it, get "My model"."""

from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.browser

SETTINGS = [  # (label of the number input, value): a tiny model that trains in the background for a while
    ("d_model", 16),
    ("Heads", 2),
    ("Layers (encoder and decoder each)", 1),
    ("d_ff", 32),
    ("Batch size (sentence pairs)", 16),
    ("Steps", 3000),
    ("Evaluate on held-out pairs every … steps (0: only at the end)", 0),
]


def progress(app) -> tuple[int, int]:
    """(aria-valuenow of the bar, the step written on it)."""
    box = app.main.get_by_test_id("stProgress").first
    text = box.inner_text()
    step = int(re.search(r"Step (\d+) of 3000", text).group(1))
    value = int(box.get_by_role("progressbar").get_attribute("aria-valuenow") or 0)
    return value, step


def test_start_watch_progress_and_stop(app):
    app.goto("")  # app.py first: a deep link on a fresh server can miss the navigation (see test_browser.py)
    app.act(app.sidebar.get_by_role("link", name="Train your own", exact=True).click)
    assert app.main.locator("h1").first.inner_text().strip() == "Train your own Transformer"
    for label, value in SETTINGS:
        box = app.main.get_by_role("spinbutton", name=label, exact=True)
        box.fill(str(value))
        app.act(lambda box=box: box.press("Enter"))
        assert box.input_value() == str(value), label
    start = app.main.get_by_role("button", name=re.compile("Start"))
    stop = app.main.get_by_role("button", name=re.compile("Stop"))
    assert stop.is_disabled()
    start.click()

    # the bar appears and moves (read it twice)
    app.main.get_by_test_id("stProgress").first.wait_for(state="visible", timeout=60_000)
    app.page.wait_for_function(
        "() => /Step [1-9]\\d* of 3000/.test(document.querySelector('[data-testid=\"stProgress\"]')?.innerText)",
        timeout=60_000,
    )
    first_value, first_step = progress(app)
    app.page.wait_for_function(
        f"""() => {{
            const m = /Step (\\d+) of 3000/.exec(document.querySelector('[data-testid="stProgress"]')?.innerText);
            return m && Number(m[1]) > {first_step} + 20;
        }}""",
        timeout=60_000,
    )
    second_value, second_step = progress(app)
    assert second_step > first_step and second_value >= first_value
    assert re.search(r"[\d.]+ steps/s · about [\d,]+ s left", app.main_text())
    app.shot("training")
    assert start.is_disabled()

    # stop: the stopped state, and the model is "My model" in the sidebar
    app.act(stop.click)
    app.main.get_by_text(re.compile(r"Training stopped \(stopped by you\) after \d+ of 3000 steps")).wait_for(
        timeout=30_000
    )
    mine = app.sidebar.get_by_role("radio", name="My model", exact=True)
    mine.wait_for(state="attached", timeout=30_000)
    assert mine.is_checked()
    app.shot("stopped")
    app.no_exception()
    assert not start.is_disabled()
