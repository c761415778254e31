"""Keyboard only, in Chromium: Tab reaches the sentence box, the sidebar's switches and the page links;
Space flips a switch (its state, the badge and the address change); Enter on a link opens its page;
presenter mode by keyboard enlarges the text.

Tab presses are bounded (MAX_TABS); what has focus is read from document.activeElement.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from ui.state import TOGGLES

pytestmark = pytest.mark.browser

MAX_TABS = 120
SWITCHES = [label for _, _, label in TOGGLES.values()]

FOCUSED_JS = """() => {
  const e = document.activeElement;
  if (!e || e === document.body) return null;
  const label = e.getAttribute('aria-label') || (e.labels && e.labels[0] ? e.labels[0].innerText : '')
                || e.innerText || '';
  return {tag: e.tagName.toLowerCase(), role: e.getAttribute('role') || '', label: label.trim().split('\\n').pop(),
          inSidebar: !!e.closest('[data-testid="stSidebar"]')};
}"""


def focused(app) -> dict | None:
    return app.page.evaluate(FOCUSED_JS)


def tab_until(app, match, limit: int = MAX_TABS) -> list[dict]:
    """Press Tab until `match(focused)` holds; return every element focused on the way (fails after `limit`)."""
    seen = []
    for _ in range(limit):
        app.page.keyboard.press("Tab")
        f = focused(app)
        seen.append(f)
        if f and match(f):
            return seen
    raise AssertionError(f"not reached in {limit} Tab presses; focused on the way: {seen}")


def start(app, path: str = "tokens") -> None:
    app.goto(path, s="i am a student")
    app.page.evaluate("document.activeElement && document.activeElement.blur()")  # Tab starts from the top


def test_tab_reaches_the_sentence_box_every_switch_and_a_page_link(app):
    start(app)
    seen = tab_until(app, lambda f: f["inSidebar"] and f["role"] == "switch" and f["label"] == SWITCHES[-1])
    labels = [(f or {}).get("label", "") for f in seen]
    roles = [(f or {}).get("role", "") for f in seen]
    assert any(f and f["tag"] == "input" and f["label"] == "Your sentence" for f in seen), seen
    for label in SWITCHES:
        assert label in labels, f"switch {label!r} never got focus: {labels}"
    assert any(f and f["tag"] == "a" and f["inSidebar"] and f["label"] == "Tokens and embeddings" for f in seen), (
        f"no page link reached: {list(zip(roles, labels, strict=True))}"
    )


def test_space_flips_a_switch(app):
    start(app)
    switch = app.sidebar.get_by_role("switch", name="Positional encoding", exact=True)
    expect(switch).to_be_checked()
    tab_until(app, lambda f: f["role"] == "switch" and f["label"] == "Positional encoding")
    app.act(lambda: app.page.keyboard.press("Space"))
    expect(switch).not_to_be_checked()
    assert "pe=0" in app.page.url, app.page.url
    expect(app.sidebar.get_by_text("1 intervention(s) active")).to_be_visible()
    assert focused(app)["label"] == "Positional encoding", "focus lost after the rerun"
    app.act(lambda: app.page.keyboard.press("Space"))
    expect(switch).to_be_checked()
    assert "pe=0" not in app.page.url, app.page.url


def test_enter_on_a_page_link_opens_it(app):
    start(app)
    tab_until(app, lambda f: f["tag"] == "a" and f["label"] == "Positional encoding")
    app.act(lambda: app.page.keyboard.press("Enter"))
    assert app.page.url.split("?")[0].endswith("/positional"), app.page.url
    expect(app.sidebar.get_by_role("link", name="Positional encoding", exact=True)).to_have_attribute(
        "aria-current", "page"
    )


def root_font_px(app, expect: float | None = None) -> float:
    """The page's root font size; with `expect`, once it is that (within 10 s: the stylesheet comes with the run,
    which a page drawn from replayed messages may finish a moment after the page looks idle)."""
    js = "parseFloat(getComputedStyle(document.documentElement).fontSize)"
    if expect is not None:
        try:
            app.page.wait_for_function(f"{js} === {expect}", timeout=10_000)
        except Exception:  # noqa: BLE001 - the assertion below says what it was
            pass
    return app.page.evaluate(js)


def test_presenter_mode_by_keyboard_and_by_link(app):
    start(app, "overview")
    normal = root_font_px(app)
    tab_until(app, lambda f: f["role"] == "switch" and f["label"].startswith("Presenter mode"))
    app.act(lambda: app.page.keyboard.press("Space"))
    expect(app.sidebar.get_by_role("switch", name="Presenter mode (large text)")).to_be_checked()
    assert "presenter=1" in app.page.url, app.page.url
    big = root_font_px(app)
    assert big >= normal * 1.2, (normal, big)
    # the address carries it, read tolerantly
    for value in ("1", "true", "ON", "yes"):
        app.goto("overview", presenter=value)
        assert root_font_px(app, big) == big, value
    app.goto("overview", presenter="0")
    assert root_font_px(app, normal) == normal
