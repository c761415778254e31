"""The why-attention page's fixes and notices (pages/why_attention.py), through AppTest. The rest of the page's
tests live in tests/test_pages_intro.py."""

from tests.apptest_util import all_text, no_exception, run_page, tables
from ui.widgets import md
from viz.complexity import bleu_frame, bleu_notice


def test_rnn_parallelism_is_stated_correctly():
    at = run_page("why_attention")
    no_exception(at)
    text = all_text(at)
    assert "cannot be spread over a GPU" not in text
    assert "the sentences of a batch and the hidden units of one step" in text
    assert "never across the positions of a sentence" in text


def test_notices_and_table2_caption():
    at = run_page("why_attention")
    at.number_input(key="why_n").set_value(50)
    at.number_input(key="why_d").set_value(512).run()
    no_exception(at)
    assert f"{50 * 50 * 512:,} operations against a recurrent layer's {50 * 512 * 512:,}" in at.success[0].value
    assert at.info[0].value == "**Notice:** " + md(bleu_notice(bleu_frame()))
    assert "one training cost for both tasks" in all_text(at)
    assert "not reported" in all_text(at)
    table = [e for e in at.expander if e.label == "Table 2 as numbers"]
    assert len(table) == 1 and len(tables(table[0])) == 1
    assert tables(table[0])[0]["training FLOPs EN-FR"].tolist()[-2:] == ["3.3e18", "2.3e19"]
    assert md("n = 700") not in all_text(at)


def test_long_sequences_warn():
    at = run_page("why_attention")
    at.number_input(key="why_n").set_value(700)
    at.number_input(key="why_d").set_value(128).run()
    no_exception(at)
    assert any("n = 700 ≥ d = 128" in w.value for w in at.warning)
    assert "restricted self-attention" in all_text(at)
