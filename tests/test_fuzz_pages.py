"""Any text in the sentence box, through every page: no traceback, and HTML is never rendered.

Each page runs on its own under AppTest with `session_state["sentence"]` preset (the sidebar's key),
for a fixed list of awkward inputs and for hypothesis-generated text (derandomized, bounded).
"""

from __future__ import annotations

import os
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.apptest_util import all_text, run_app, run_page
from ui import page_list

PAGES = [p.name for p in page_list.PAGES]  # every page of the app, in navigation order

AWKWARD = [
    "",
    " ",
    "the cat " * 1_250,  # 10,000 characters of real words: cut at the model's limit, the largest tensors
    "<script>alert(1)</script>",
    "<b>bold</b>",
    "?!...",
    "zzz qqq",
    "\u202e\u0645\u0631\u062d\u0628\u0627",  # right-to-left override + Arabic
    "\x00\x07",
    "🙂🙂",
    "$x^2$ **not bold** `code` [link](http://example.com) :red[red] | a | b |\n# heading",
]
# Generated examples through every page. Each costs one run per page (~0.1-0.5 s each on 2 cores);
# raise it for a longer hunt: FUZZ_EXAMPLES=200 pytest tests/test_fuzz_pages.py
FUZZ_EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "8"))


RAW_HTML = re.compile(r"(?<!\\)<(?:b|/b|script|/script)>")  # a tag from the user's text, not escaped


def markdown_bodies(at) -> list[tuple[str, str, bool]]:
    """(kind, body, allow_html) of every markdown-like element of the page."""
    out = []
    for kind in ("markdown", "caption", "info", "warning", "error", "success"):
        for el in at.get(kind):
            body = getattr(el.proto, "body", None)
            out.append((kind, str(el.value) if body is None else body, bool(getattr(el.proto, "allow_html", False))))
    for el in at.get("html"):
        out.append(("html", el.proto.body, True))
    return out


def html_leaks(at, text: str) -> list[str]:
    words = re.findall(r"\w{3,}", text)
    leaks = []
    for kind, body, allow_html in markdown_bodies(at):
        if RAW_HTML.search(body):
            leaks.append(f"user HTML unescaped in a {kind} element: {body[:200]!r}")
        if allow_html and any(w in body for w in words):
            leaks.append(f"user text inside an HTML element: {body[:200]!r}")
    return leaks


def failures(text: str) -> dict[str, list[str]]:
    """Run every page with `text` as the sentence; page -> what went wrong (empty dict: all fine).

    Wrong: an exception shown, or (when the text holds tags) the user's HTML left unescaped in a
    markdown-like element, or the user's text inside an element that renders HTML.
    """
    out = {}
    for page in PAGES:
        at = run_page(page, sentence=text)
        problems = [f"exception: {e.value}" for e in at.exception]
        if "<" in text:
            problems += html_leaks(at, text)
        if problems:
            out[page] = problems
    return out


def test_every_page_is_listed():
    """Every listed page exists, and every script in pages/ is listed: Streamlit serves any pages/*.py as a
    page of its own on a fresh server, so helper modules live in pages/content/ (not globbed)."""
    assert len(PAGES) >= 10
    for p in page_list.PAGES:
        assert p.path.is_file(), p.file
    assert sorted(f.stem for f in (page_list.ROOT / "pages").glob("*.py")) == sorted(PAGES)


@pytest.mark.parametrize("text", AWKWARD, ids=lambda t: repr(t[:24]))
def test_awkward_text_on_every_page(text):
    assert failures(text) == {}


@settings(
    max_examples=FUZZ_EXAMPLES,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    st.text(max_size=120)
    | st.text(st.characters(codec="utf-8"), min_size=1, max_size=12).map(lambda w: f"i am {w} student")
)
def test_any_text_on_every_page(text):
    assert failures(text) == {}


SIDEBAR_PAGE = page_list.DEFAULT.name  # the page the sidebar tests type on: the landing page


@pytest.mark.parametrize(
    "text", ["<b>bold</b>", "\x00\x07", "", "a" * 10_000], ids=["html", "control", "empty", "long"]
)
def test_any_text_through_the_sidebar(text):
    """The whole app (sidebar, URL sync) with the text typed in the sidebar box."""
    at = run_app(SIDEBAR_PAGE)
    at.text_input(key="sentence").set_value(text).run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state["sentence"] == text
    assert at.text_input(key="sentence").value == text


@pytest.mark.parametrize("page", PAGES)
def test_sidebar_survives_a_rerun(page):
    """Through the app: switch to the page, change the sentence in the sidebar; the sidebar is still there."""
    at = run_app(page)
    assert at.sidebar.text_input(key="sentence") is not None
    at.text_input(key="sentence").set_value("i am a student").run()
    assert not at.exception, [e.value for e in at.exception]
    assert "sentence" in at.session_state and at.session_state["sentence"] == "i am a student"
    at.run()  # a rerun without the sidebar would have dropped the widget state: KeyError in the pages
    assert not at.exception, [e.value for e in at.exception]


def test_html_in_the_sentence_is_shown_escaped_on_the_overview():
    at = run_page("overview", sentence="<b>bold</b>")
    text = all_text(at)
    assert "bold" in text
    assert r"\<" in text or "&lt;" in text, text[:1000]  # the "<" is there, escaped
