"""The guided lesson in Chromium, on a fresh `streamlit run app.py`: a step's shared link opens that step; a walk
through every step; and its In-depth links keep the lesson's sentence (and layer, head, word).

One server (the session's `app_url`), one browser tab reused for every link: a teacher's
``/lesson?lesson=thinking+machines&step=N`` must show step N's title, the sidebar, and no exception box.
"""

from __future__ import annotations

import random
import re
from functools import cache

import pytest
from playwright.sync_api import expect

from explain import lesson
from model import checkpoint, pipeline
from model.data import load_dataset
from tests.browser.conftest import HeldDownstream
from ui.page_list import by_name

pytestmark = pytest.mark.browser

SENTENCE = "thinking machines"


def link(base_url: str, step: object, sentence: str = SENTENCE) -> str:
    return f"{base_url}/lesson?lesson={sentence.replace(' ', '+')}&step={step}"


def sentence_box(app):
    return app.sidebar.get_by_role("textbox", name="Your sentence", exact=True)


def heading(app):
    return app.main.locator("h2").first


# Steps opened from their links here: the first, one in every four (encoder, heads, decoder, output) and the last. A
# link is read alike for every step (ui/lesson.py); the Thinking Machines walk below draws every step in this browser,
# and AppTest opens steps from their links and walks every step on every preset (tests/test_lesson_page.py).
LINKED_STEPS = sorted({*range(1, lesson.N_STEPS + 1, 4), lesson.N_STEPS})


def test_a_step_opens_from_its_link(app):
    page = app.page
    for k in LINKED_STEPS:
        step = lesson.STEPS[k - 1]
        page.goto(link(app.base_url, k), wait_until="domcontentloaded")
        app.wait_idle()
        expect(heading(app)).to_contain_text(f"{k}. {step.title}")
        expect(page.get_by_text(f"Step {k} of {lesson.N_STEPS}").first).to_be_visible()  # above and below the step
        expect(app.sidebar.get_by_label("Your sentence").first).to_be_visible()  # through app.py: the sidebar
        app.no_exception()
        assert re.search(rf"[?&]step={k}(&|$)", page.url), page.url
        if k in (1, 9, lesson.N_STEPS):
            app.shot(f"step-{k}")


def test_next_by_keyboard_and_a_bad_step(app):
    page = app.page
    page.goto(link(app.base_url, 9), wait_until="domcontentloaded")
    app.wait_idle()
    next_button = app.main.get_by_role("button", name="Next").first  # the one above the step
    next_button.focus()
    app.act(lambda: page.keyboard.press("Enter"))
    expect(heading(app)).to_contain_text(f"10. {lesson.STEPS[9].title}")
    expect(page).to_have_url(re.compile(r"[?&]step=10(&|$)"))
    page.goto(link(app.base_url, "%D9%A3"), wait_until="domcontentloaded")  # "٣", an Arabic-Indic digit
    app.wait_idle()
    expect(heading(app)).to_contain_text(f"1. {lesson.STEPS[0].title}")
    expect(app.main.get_by_text("is not a step number")).to_be_visible()
    app.no_exception()


def toy_sentences(n: int = 2, seed: int = 0) -> list[str]:
    """Random held-out sentences of the toy set (seeded: the same ones every run)."""
    held = [p.src for p in load_dataset()["heldout"]]
    return random.Random(seed).sample(held, n)


@cache
def focus_of(sentence: str):
    b = checkpoint.load(checkpoint.SHIPPED)
    a = pipeline.analyse(b, pipeline.prepare(b, sentence))
    return a, lesson.focus(a)


DEPTH_STEPS = ("qkv", "heads", "cross", "output")  # In depth → self-attention, multi-head, cross-attention, output


@pytest.mark.parametrize("sentence", [*lesson.SENTENCES, *toy_sentences()])
def test_walk_the_lesson_and_in_depth_keeps_the_sentence(app, sentence):
    """Thinking Machines: Next through every step, then each In-depth link of DEPTH_STEPS opens its page on the
    lesson's sentence (the sidebar shows it) and, for self-attention, on the lesson's layer, head and word; the
    navigation brings the lesson back on the same step. The other sentences (an apostrophe, a long one, held-out
    ones) follow the self-attention link only: the link is built alike for every page, and AppTest opens every
    In-depth page on its sentence, layer, head and word (tests/test_lesson_page.py) and checks every step's contents for
    every preset (tests/test_notice_rules.py, tests/test_lesson*.py)."""
    page = app.page
    page.goto(link(app.base_url, 1, sentence), wait_until="domcontentloaded")
    app.wait_idle()
    expect(sentence_box(app)).to_have_value(sentence, timeout=20_000)  # one sentence: the lesson's is the sidebar's
    if sentence == lesson.THINKING:
        for k in range(1, lesson.N_STEPS):
            expect(heading(app)).to_contain_text(f"{k}. {lesson.STEPS[k - 1].title}")
            app.act(lambda: app.main.get_by_role("button", name="Next").first.click())
            app.no_exception()
        expect(heading(app)).to_contain_text(f"{lesson.N_STEPS}. {lesson.STEPS[-1].title}")
    a, f = focus_of(sentence)
    for key in DEPTH_STEPS if sentence == lesson.THINKING else DEPTH_STEPS[:1]:
        k = lesson.step_index(key)
        page.goto(link(app.base_url, k, sentence), wait_until="domcontentloaded")
        app.wait_idle()
        target = by_name(lesson.STEPS[k - 1].page)
        depth = app.main.get_by_role("link", name=re.compile(f"In depth: {re.escape(target.title)}"))
        app.act(depth.click)
        expect(page).to_have_url(re.compile(rf"/{target.url_path}(\?|$)"))
        app.no_exception()
        expect(sentence_box(app)).to_have_value(sentence, timeout=20_000)
        if key == "qkv":
            expect(
                app.main.get_by_text(f"Query word {a.src_labels[f.word]}, encoder layer {f.layer}, head {f.head}.")
            ).to_be_visible()
        app.shot(f"in-depth-{key}")
        app.act(lambda: app.sidebar.get_by_role("link", name="Guided lesson").click())  # back, same session
        expect(heading(app)).to_contain_text(f"{k}. {lesson.STEPS[k - 1].title}")


def test_root_link_opens_the_lesson(app):
    app.page.goto(f"{app.base_url}/?lesson=i+am+a+student&step=6", wait_until="domcontentloaded")
    app.wait_idle()
    expect(heading(app)).to_contain_text(f"6. {lesson.STEPS[5].title}")
    expect(sentence_box(app)).to_have_value("i am a student", timeout=20_000)
    app.no_exception()


def test_two_quick_nexts_go_two_steps(app):
    """Next pressed twice before the first Next's run reached the tab (a slow connection, a busy laptop): the second
    request carries the step picker as the tab still shows it, step 1, which once took the lesson back there before
    Next moved it on: step 2, not 3."""
    held = HeldDownstream(app.page)
    app.goto("lesson", lesson=SENTENCE, step="1")

    def next_twice() -> None:
        app.main.get_by_role("button", name="Next").first.click()
        app.page.wait_for_timeout(700)
        app.main.get_by_role("button", name="Next").first.click()

    held.during(app, next_twice)
    expect(app.main.get_by_text("Step 3 of 25").first).to_be_visible()
    expect(app.main.get_by_text("Step 2 of 25")).to_have_count(0)
    app.no_exception()
