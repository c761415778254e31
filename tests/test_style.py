"""The app's stylesheet (ui/style.py) stays a style-only block: Streamlit applies a style-only `st.html` as a
stylesheet; anything that looks like a tag inside it (a "<page>" in a CSS comment did) turns the whole block
into sanitised HTML and no rule of it is applied (captions lost their contrast, diagrams their font size)."""

from __future__ import annotations

import re

from ui import style


def test_stylesheet_is_style_only():
    for presenter in (False, True):
        inner = style.css(presenter)
        assert inner.startswith("<style>") and inner.endswith("</style>")
        body = inner[len("<style>") : -len("</style>")]
        assert "<" not in body, re.findall(r".{20}<.{20}", body)


def test_page_links_wrap():
    assert re.search(r'\[data-testid="stPageLink-NavLink"\] span[^{]*\{[^}]*white-space: normal', style.BASE_CSS)
