"""Shared links: ui.state.read_link turns any query string into valid state plus notices, never an exception."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.apptest_util import run_app
from ui import page_list
from ui.state import MAX_LINK_SENTENCE, TOGGLES, parse_head, read_link


def test_a_valid_link_is_read_whole():
    values, notices = read_link(
        {"s": "i am a student", "m": "no_mask", "off": "enc.0.self_attn:2,dec.1.cross_attn:0", "la": "0", "pe": "1"}
    )
    assert notices == []
    assert values == {
        "sentence": "i am a student",
        "model": "no_mask",
        "heads_off": ["dec.1.cross_attn:0", "enc.0.self_attn:2"],
        "iv_look_ahead": False,
        "iv_pos": True,
    }


@pytest.mark.parametrize(
    "head",
    [
        "enc.0.self_attn:²",
        "enc.٣.self_attn:0",
        "enc.0.self_attn:٣",
        "enc.0.cross_attn:1",
        "enc.0.self_attn",
        "enc.0.self_attn:999",
        "x.0.self_attn:1",
        "enc.0.self_attn:-1",
        "enc.0.self_attn:1:2",
        "",
    ],
)
def test_malformed_heads_are_none(head):
    assert parse_head(head) is None


def test_invalid_parts_are_dropped_and_said():
    values, notices = read_link(
        {
            "off": "enc.0.self_attn:²,enc.0.self_attn:1",
            "m": "gpt",
            "scale": "yes",
            "s": "a" * (MAX_LINK_SENTENCE + 5),
            "lesson": "anything",
        }
    )
    assert values["heads_off"] == ["enc.0.self_attn:1"]
    assert "model" not in values and "iv_scale" not in values
    assert len(values["sentence"]) == MAX_LINK_SENTENCE
    assert len(notices) == 4, notices


def test_someone_elses_model_is_explained():
    values, notices = read_link({"m": "mine"})
    assert "model" not in values and "own model" in notices[0]


TEXT = st.text(max_size=40)
PARAMS = st.dictionaries(
    st.sampled_from(["s", "m", "off", "la", "pad", "scale", "pe", "lesson", "step", "x"]),
    TEXT | st.sampled_from(["0", "1", "base", "no_mask", "mine", "enc.0.self_attn:1", "²"]),
)


@settings(max_examples=300, derandomize=True, deadline=None)
@given(PARAMS)
def test_read_link_never_raises_and_gives_valid_state(params):
    values, notices = read_link(params)
    assert set(values) <= {"sentence", "model", "heads_off", *TOGGLES}
    assert values.get("model", "base") in ("base", "no_mask")
    assert all(parse_head(h) for h in values.get("heads_off", []))
    assert all(isinstance(values[k], bool) for k in TOGGLES if k in values)
    assert all(isinstance(n, str) and n for n in notices)


def test_the_unicode_digit_link_opens_with_a_notice():
    """Regression: '²' passes str.isdigit but not int(); the traceback replaced every page of the tab."""
    at = run_app(query={"off": "enc.0.self_attn:²", "s": "i am a student"})
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state["heads_off"] == []
    assert any("not understood" in t.value for t in at.toast)


@settings(max_examples=12, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck))
@given(PARAMS, st.sampled_from([p.name for p in page_list.PAGES if p.name != "training"]))
def test_every_page_opens_with_any_query_string(params, page):
    """Every page opens with what the link asked for (read_link's values, in the session)."""
    at = run_app(page, query=params)
    assert not at.exception, (page, params, [e.value for e in at.exception])
    values = read_link(params)[0]
    assert {k: at.session_state[k] for k in values} == values, (page, params)
