"""Heatmaps drawn in one pass: the margins the server reserved (viz/margins.py) hold every label in Chromium.

When a label does not fit, Plotly grows the margin and draws the whole chart again (its automargin): the page
still looks right, only slower. So the test reads, for every heatmap on the page, the margins Plotly ended with
(`_fullLayout._size`, Plotly's own record: an internal name, checked here so that an upgrade that renames it fails
loudly) against the ones the figure asked for (`_fullLayout.margin`).
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.browser

SENTENCE = "the animal didn't cross the street because it was too tired."

GROWN_JS = """() => [...document.querySelectorAll('[data-testid="stPlotlyChart"] .js-plotly-plot')]
  .filter(gd => gd.data && gd.data.length && gd.data.every(t => t.type === 'heatmap'))
  .map(gd => {
    const fl = gd._fullLayout, size = fl._size, asked = fl.margin;
    const key = ((gd.closest('[class*="st-key-"]') || {className: ''}).className.match(/st-key-(\\S+)/) || [])[1];
    if (!size || !asked) return {key, error: 'Plotly no longer keeps _fullLayout._size / margin'};
    const grown = ['l', 'r', 't', 'b'].filter(s => size[s] > asked[s] + 0.5)
      .map(s => `${s}: asked ${asked[s]}, drawn ${Math.round(size[s])}`);
    return {key, grown};
  })"""


@pytest.mark.parametrize(
    "path, query",
    [
        ("decoder", {}),  # four heatmaps, slanted words, a grey and white mask
        ("multi_head", {}),  # the grid of heads: words upright, no colour bar
        ("tokens", {"presenter": "1"}),  # presenter mode: every size grows with the root font
        ("cross_attention", {"s": "naïve café ümlaut 机器 学习"}),  # accents, another script, unknown words
    ],
)
def test_every_heatmap_keeps_the_margins_it_asked_for(app, path, query):
    app.goto(path, **({"s": SENTENCE} | query))
    app.page.wait_for_function("() => document.querySelectorAll('.js-plotly-plot .main-svg').length > 0")
    charts = app.page.evaluate(GROWN_JS)
    assert len(charts) >= 2, f"{path}: expected its heatmaps, found {charts}"
    for c in charts:
        assert "error" not in c, c["error"]
        assert not c["grown"], f"{path} {c['key']}: Plotly grew the margins (a second drawing pass): {c['grown']}"
