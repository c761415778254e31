"""The causal-tracing page in Chromium: the coreference pair drawn with its four grids, a pair typed by the reader,
a refused pair explained, and lesson step 19 showing the same tracing at the pronoun."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from model.examples import COREFERENCE

pytestmark = pytest.mark.browser

GRIDS = ("tracing_encoder", "tracing_heads", "tracing_decoder", "tracing_mask")


def second_box(app):
    return app.main.locator('input[aria-label^="Second sentence"]').first


def test_the_coreference_pair_then_a_typed_pair(app):
    page = app.page
    app.goto("tracing")  # the app's default sentence, against its partner
    expect(second_box(app)).to_have_value(COREFERENCE.replace("tired", "wide"))
    for key in GRIDS:
        expect(page.locator(f".st-key-{key} .js-plotly-plot").first).to_be_visible()
    text = app.main_text()
    assert "“tired” decides “il” here" in text and "Only “tired” carries the difference in the encoder" in text
    # another pair, typed: the app's sentence is the first, the box the second
    app.goto("tracing", s="i am a student")
    box = second_box(app)
    box.fill("i am a teacher")
    app.act(lambda: box.press("Enter"))
    expect(app.main.get_by_text("“student” decides “étudiant” here", exact=False).first).to_be_visible()
    for key in GRIDS:
        expect(page.locator(f".st-key-{key} .js-plotly-plot").first).to_be_visible()
    app.shot("typed-pair")
    # a pair of different lengths: a message, no grid, no exception
    app.act(lambda: (box.fill("i am a good teacher"), box.press("Enter")))
    expect(app.main.get_by_text("need the same number of words", exact=False).first).to_be_visible()
    assert page.locator(".st-key-tracing_encoder").count() == 0
    app.no_exception()


def test_lesson_step_19_shows_the_tracing_at_the_pronoun(app):
    app.goto("lesson", lesson=COREFERENCE, step="19")
    expect(app.main.locator("h2").first).to_contain_text("19. il or elle: tracing where the adjective's evidence goes")
    expect(app.main.locator(".js-plotly-plot").first).to_be_visible()
    text = app.main_text()
    assert "Only “tired” carries it in the encoder" in text and "reading it there is needed" in text
    app.no_exception()
