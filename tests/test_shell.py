"""The app's frame (ui/shell.py): a failing page apologises instead of showing a traceback, the optional
access code of a class server, and the safe defaults in .streamlit/config.toml."""

from __future__ import annotations

import importlib
import tomllib

import pytest

import ui.models
from tests.apptest_util import ROOT, all_text, run_app
from ui.state import DEFAULT_SENTENCE


def test_a_failing_page_apologises_and_logs(monkeypatch, caplog):
    def broken(*args, **kwargs):
        raise RuntimeError("/secret/server/path exploded")

    for name in ("ui.classroom.panels", "ui.rnn"):  # first: the modules that import `analysis` keep the real one
        importlib.import_module(name)  # after this test (imported during it, they kept the broken one for good)
    monkeypatch.setattr(ui.models, "analysis", broken)
    with caplog.at_level("ERROR", logger="glass.pages"):
        at = run_app("tokens")
    assert not at.exception
    text = all_text(at)
    assert "Sorry: something went wrong on this page" in text
    assert "/secret/server/path" not in text and "Traceback" not in text
    assert [b.proto.url for b in at.get("link_button")] == ["./tokens"]
    assert at.sidebar.text_input(key="sentence") is not None  # the sidebar still works
    assert any("/secret/server/path exploded" in r.exc_text for r in caplog.records if r.exc_text)


def test_no_access_code_lets_everyone_in(monkeypatch):
    monkeypatch.delenv("GLASS_ACCESS_CODE", raising=False)
    at = run_app()
    assert not at.exception, [e.value for e in at.exception]
    assert "Access code for this class" not in [t.label for t in at.text_input]  # no form before the app
    assert at.sidebar.text_input(key="sentence").value == DEFAULT_SENTENCE
    assert "Translation" in all_text(at)  # the page itself (what the form hides when a code is set)


def test_access_code_gates_the_app(monkeypatch):
    monkeypatch.setenv("GLASS_ACCESS_CODE", "tensor-42")
    at = run_app()
    assert not at.exception
    assert len(at.sidebar.text_input) == 0 and "Translation" not in all_text(at)  # nothing but the form
    at.text_input[0].set_value("wrong")
    at.button[0].click().run()
    assert "not this class's access code" in all_text(at)
    assert len(at.sidebar.text_input) == 0
    at.text_input[0].set_value("tensor-42")
    at.button[0].click().run()
    assert not at.exception
    assert at.sidebar.text_input(key="sentence") is not None


@pytest.fixture(scope="module")
def config():
    return tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())


def test_config_binds_to_loopback_and_hides_error_details(config):
    assert config["server"]["address"] == "127.0.0.1"
    assert config["client"]["showErrorDetails"] == "none"


def test_config_does_not_watch_the_source_files(config):
    """`streamlit run app.py` as the README gives it: no file watcher (a second off the cold start; the benchmarks'
    servers, serving.processes.app_command, run the same way)."""
    from serving.processes import app_command

    assert config["server"]["fileWatcherType"] == "none"
    command = app_command(8501)
    assert command[command.index("--server.fileWatcherType") + 1] == "none"


def test_walkthrough_order_and_next_links():
    from ui import page_list

    walk = [p.name for p in page_list.PAGES if p.walkthrough]
    assert walk[:4] == ["overview", "before", "why_attention", "tokens"] and walk[-2:] == ["output", "tracing"]
    for a, b in zip(walk, walk[1:], strict=False):
        assert page_list.next_page(a).name == b
    assert page_list.next_page(walk[-1]) is None and page_list.next_page("training") is None


def test_streamlit_accepts_every_checkpoint_the_app_accepts(config):
    from model import checkpoint

    assert config["server"]["maxUploadSize"] * 2**20 >= checkpoint.MAX_BYTES >= checkpoint.MAX_MODEL_BYTES


@pytest.mark.parametrize("page", ["overview", "multi_head", "self_attention", "cross_attention", "tracing"])
def test_presenter_mode_folds_a_pages_introduction(page):
    """On a projector (presenter mode) a page's introduction is one line, "About this page", that unfolds it: the
    first screen keeps room for the stop's caption and the figure. Elsewhere it is open text under the title."""
    content = importlib.import_module(f"pages.content.{page}")
    first = content.INTRO.split("\n")[0][:60]
    plain = run_app(page)
    assert not [e for e in plain.expander if e.label == "About this page"]
    assert any(first in m.value for m in plain.markdown)
    projected = run_app(page, query={"presenter": "1"})
    (folded,) = [e for e in projected.expander if e.label == "About this page"]
    assert any(first in m.value for m in folded.markdown)


def test_presenter_mode_folds_the_multi_head_formulas_so_the_heads_come_first():
    """On the projector the multi-head page's formulas and shapes table are one line too: its grid of heads (a plan's
    mystery stop) comes right after the sentence. Elsewhere they stand open before the grid."""
    plain = run_app("multi_head")
    assert len(plain.latex) >= 2 and not [e for e in plain.expander if e.label == "The formulas and the shapes"]
    projected = run_app("multi_head", query={"presenter": "1"})
    (folded,) = [e for e in projected.expander if e.label == "The formulas and the shapes"]
    content = importlib.import_module("pages.content.multi_head")
    assert len(folded.latex) == len(content.FORMULAS)
    assert any(c.value == content.SHAPES_CAPTION for c in folded.caption)
