"""Accessibility and readability in Chromium: axe-core on every page, text alternatives, font sizes, small screens.

- axe-core (bundled with axe-playwright-python) on every page as it opens, and in presenter mode and on a
  phone: no violation of impact "serious" or "critical". One exclusion, exactly scoped (AXE_EXCLUDED):
  Streamlit's own sectioned page navigation in the sidebar puts each section's <header> and <li>s in a
  <div> directly inside the <ul> (rules `list` and `listitem`); the app cannot change that markup (no
  option of st.navigation fixes it but position="top", which would move every page into drop-down menus).
  Every other rule still runs on the navigation.
- Every chart has a text equivalent a screen reader reaches: an aria-label (st.plotly_chart's `alt`).
- Plotly's text (ticks, labels, legends) is at least MIN_FONT_PX CSS px at 100 % zoom; cell labels of a
  heatmap never overlap each other.
- No horizontal scrolling of the whole page on a 390 x 844 phone, at 1366 x 768, or at 1280 x 720 with
  150 % browser zoom (a CSS viewport of 853 x 480 at device scale 1.5); wide tables scroll inside themselves.
"""

from __future__ import annotations

import pytest
from axe_playwright_python.sync_playwright import Axe

from tests.browser.conftest import expect_app_page
from tools.browser import wait_rendered
from ui import page_list

pytestmark = pytest.mark.browser

SENTENCE = "i am a student"
PAGES = [p.url_path for p in page_list.PAGES]
NAV = '[data-testid="stSidebarNavItems"]'
AXE_EXCLUDED = {NAV: ("list", "listitem")}  # selector -> the rules switched off there (see the docstring)
BLOCKING = ("serious", "critical")
MIN_FONT_PX = 12
AXE_SCRIPT = Axe().axe_script

AXE_RUN_JS = """async ([nav, excluded]) => {
  const off = Object.fromEntries(excluded.map(r => [r, {enabled: false}]));
  const opts = {resultTypes: ['violations']};
  const rest = await axe.run({exclude: [[nav]]}, opts);
  const inNav = document.querySelector(nav)
    ? await axe.run({include: [[nav]]}, {...opts, rules: off}) : {violations: []};
  return [...rest.violations, ...inNav.violations].map(v => ({
    id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.map(n => ({target: n.target.join(' '), html: n.html.slice(0, 160),
                              summary: (n.failureSummary || '').slice(0, 240)}))}));
}"""


def settle(app) -> None:
    app.wait_idle()
    wait_rendered(app.page, timeout=60_000)
    app.page.evaluate("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")


def axe_violations(app, impacts=BLOCKING) -> list[dict]:
    app.page.evaluate(AXE_SCRIPT)
    [(nav, rules)] = AXE_EXCLUDED.items()
    found = app.page.evaluate(AXE_RUN_JS, [nav, list(rules)])
    return [v for v in found if v["impact"] in impacts]


def describe(violations: list[dict]) -> str:
    lines = []
    for v in violations:
        lines.append(f"{v['id']} ({v['impact']}): {v['help']}, {len(v['nodes'])} node(s)")
        lines += [f"    {n['target']}  {n['html']}  {n['summary']}" for n in v["nodes"][:4]]
    return "\n".join(lines)


@pytest.mark.parametrize("path", ["overview", "self_attention", "decoder"])
def test_axe_presenter_and_phone(app, path):
    app.goto(path, s=SENTENCE, presenter="1")
    settle(app)
    bad = axe_violations(app)
    assert not bad, f"/{path} in presenter mode:\n{describe(bad)}"
    app.page.set_viewport_size({"width": 390, "height": 844})
    app.goto(path, s=SENTENCE)
    settle(app)
    bad = axe_violations(app)
    assert not bad, f"/{path} at 390 x 844:\n{describe(bad)}"


CHART_LABELS_JS = """() => [...document.querySelectorAll(
    '[data-testid="stPlotlyChart"], [data-testid="stGraphVizChart"]')].map(c => ({
  label: (c.getAttribute('aria-label') || c.querySelector('[aria-label]')?.getAttribute('aria-label') || '').trim(),
  testid: c.getAttribute('data-testid'), role: c.getAttribute('role') || ''}))"""


FONT_JS = """() => {
  const sizes = [];
  for (const t of document.querySelectorAll('[data-testid="stPlotlyChart"] svg text')) {
    if (!t.textContent.trim() || t.getBoundingClientRect().width === 0) continue;
    sizes.push([parseFloat(getComputedStyle(t).fontSize), t.textContent.slice(0, 30),
                t.closest('g[class]')?.getAttribute('class') || '']);
  }
  return sizes;
}"""

OVERLAP_JS = """() => {
  const out = [];
  for (const chart of document.querySelectorAll('[data-testid="stPlotlyChart"]')) {
    const boxes = [...chart.querySelectorAll('g.textpoint text, g.hm text, .heatmaplayer text')]
      .filter(t => t.textContent.trim()).map(t => t.getBoundingClientRect());
    for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
      const a = boxes[i], b = boxes[j];
      const ox = Math.min(a.right, b.right) - Math.max(a.left, b.left);
      const oy = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
      if (ox > 1 && oy > 1) {
        out.push(chart.getAttribute('aria-label') || '(unlabelled chart)'); i = boxes.length; break;
      }
    }
  }
  return out;
}"""


SCROLL_JS = """() => {
  const main = document.querySelector('[data-testid="stMain"]');
  const doc = document.scrollingElement;
  return {doc: [doc.scrollWidth, doc.clientWidth], main: main ? [main.scrollWidth, main.clientWidth] : [0, 0]};
}"""


VIEWPORTS = {"phone": (390, 844), "projector-zoom-150": (853, 480), "laptop": (1366, 768)}  # CSS px, narrowest first

STABLE_SCROLL_JS = """async (js) => {
  const measure = eval(js);
  let last = JSON.stringify(measure());
  for (let i = 0; i < 20; i++) {  // the layout after a resize: charts and columns follow their container's width
    await new Promise(r => setTimeout(r, 150));
    const now = JSON.stringify(measure());
    if (now === last) return JSON.parse(now);
    last = now;
  }
  return JSON.parse(last);
}"""


@pytest.mark.parametrize("path", PAGES)
def test_every_page_passes_axe_and_its_charts_are_labelled_and_legible(app, path):
    """One visit per page, by its own address (a visit costs a page's run and its drawing): the whole app answers
    there (its sidebar, the page marked current), no serious or critical axe violation, every chart with a text
    alternative, chart text at least MIN_FONT_PX and no overlapping heatmap labels; then the window narrows to a
    phone's width and widens to the zoomed projector's and the laptop's, and the page never scrolls sideways.

    Layout is in CSS px, so a phone's device scale (3) or the projector's zoom (1.5) changes no width that matters
    here: one device scale and one opening of each page serve all three viewports. (Opening wide and narrowing is
    the stricter order: whatever keeps the width it was first drawn at overflows the phone.)"""
    app.goto(path, s=SENTENCE)
    settle(app)
    expect_app_page(app.page, page_list.by_name(path).title, SENTENCE)
    bad = axe_violations(app)
    assert not bad, f"/{path}: serious or critical axe violations:\n{describe(bad)}"
    charts = app.page.evaluate(CHART_LABELS_JS)
    unlabelled = [c for c in charts if len(c["label"]) < 10]
    assert not unlabelled, f"/{path}: {len(unlabelled)} of {len(charts)} charts without an aria-label"
    sizes = app.page.evaluate(FONT_JS)
    small = [s for s in sizes if s[0] < MIN_FONT_PX]
    assert not small, f"/{path}: chart text under {MIN_FONT_PX} px, e.g. {small[:6]}"
    overlapping = app.page.evaluate(OVERLAP_JS)
    assert not overlapping, f"/{path}: heatmaps whose cell labels overlap: {overlapping}"
    wide = []
    for name, (width, height) in VIEWPORTS.items():
        app.page.set_viewport_size({"width": width, "height": height})
        m = app.page.evaluate(STABLE_SCROLL_JS, SCROLL_JS)
        if m["doc"][0] > m["doc"][1] + 1 or m["main"][0] > m["main"][1] + 1:
            wide.append((name, m))
    assert not wide, f"/{path} is wider than its viewport (scrollWidth, clientWidth): {wide}"


DIAGRAM_JS = """() => [...document.querySelectorAll('[data-testid="stGraphVizChart"] svg')].map(svg => {
  const scale = svg.getBoundingClientRect().width / svg.viewBox.baseVal.width;  // CSS px per diagram unit
  const texts = [...svg.querySelectorAll('text')].filter(t => t.textContent.trim());
  return {scale, width: svg.getBoundingClientRect().width,
          sizes: texts.map(t => [parseFloat(getComputedStyle(t).fontSize) * scale, t.textContent.slice(0, 30)])};
})"""


@pytest.mark.parametrize(
    ("width", "height", "query"),
    [(390, 844, {}), (1280, 720, {}), (1280, 720, {"presenter": "1"})],
    ids=["phone", "desktop", "presenter"],
)
def test_overview_diagram_is_legible(app, width, height, query):
    """The stack diagram's labels, as drawn (font size times the diagram's scale in its column), are at least
    MIN_FONT_PX on a 390 px phone, at 1280 x 720 and in presenter mode; the diagram fits its column."""
    app.page.set_viewport_size({"width": width, "height": height})
    app.goto("overview", s=SENTENCE, **query)
    settle(app)
    app.page.wait_for_selector('[data-testid="stGraphVizChart"] svg text', timeout=30_000)
    [diagram] = app.page.evaluate(DIAGRAM_JS)
    assert len(diagram["sizes"]) >= 20, diagram  # every block of the stack has its label
    small = [s for s in diagram["sizes"] if s[0] < MIN_FONT_PX]
    assert not small, f"diagram text under {MIN_FONT_PX} px at {width} px (scale {diagram['scale']:.2f}): {small[:6]}"
    assert diagram["width"] <= width
