"""The app's own stylesheet and the presenter mode: readable in a classroom, on a projector and a phone.

`inject()` is called once per run by app.py (a style-only `st.html` goes to Streamlit's event container:
it takes no room on the page and is not redrawn when unchanged). What the stylesheet fixes, and why:

- **Contrast (WCAG 2.1 AA 1.4.3, 4.5:1)**: Streamlit's captions are body text at 60 % opacity
  (about 3.9:1 on white); they get the body colour at 80 % (about 7:1 on white, theme-aware).
- **Formulas**: a KaTeX display wider than its column scrolls sideways, and a scroll region must be
  reachable by keyboard (axe: scrollable-region-focusable). The formula is made a little smaller on
  narrow screens, and `KEYBOARD_JS` gives every display that overflows `tabindex="0"`, `role="group"`
  and a label, so a keyboard user can focus it and scroll it with the arrow keys.
- **Phones (390 px wide)**: the whole page never scrolls sideways; wide tables and formulas scroll
  inside themselves.
- **Tables written as text** (ui.widgets.small_table) scroll sideways inside themselves at any width when wider
  than their column (a narrow window, a half column), and one that does is made keyboard-focusable by the same
  script as the formulas (`tabindex="0"` and a label; its role stays a table's).
- **Presenter mode** (the sidebar's "Presenter mode" toggle, or `?presenter=1` in the address):
  larger text everywhere (the root font size, which Streamlit's rem-based sizes follow) and larger
  chart fonts (`PRESENTER_FONT`, applied to a figure by `chart_font`).
- A visible keyboard focus ring on links, buttons and switches.
- **A clicker after a switch**: Streamlit's shortcuts ignore keys sent to any input, so the plan's PageDown / PageUp
  / B did nothing once a switch had the focus; the same script presses the plan's button for those keys there.
- Page links wrap instead of being cut off with an ellipsis.
"""

from __future__ import annotations

import streamlit as st

from viz.overview import FONT_SIZE as DIAGRAM_FONT

PRESENTER_KEY = "presenter"  # session-state key of the sidebar toggle (URL parameter "presenter")
PRESENTER_SCALE = 1.3  # root font size in presenter mode, relative to the browser's 16 px
CHART_FONT = 13  # px, plotly figures' base font (tick labels, legends): >= 12 px at 100 % zoom
PRESENTER_FONT = 18  # px, the same in presenter mode

BASE_CSS = """
/* Captions: body colour at 80 % opacity instead of 60 % (contrast >= 4.5:1 in the light and dark themes). */
[data-testid="stCaptionContainer"] { color: inherit !important; opacity: 0.8; }
/* Formulas never push the page sideways: they scroll inside their own box (made focusable by a script). */
.katex-display { max-width: 100%; overflow-x: auto; overflow-y: hidden; padding: 2px 0; }
.katex-display:focus-visible, [data-testid="stMarkdownContainer"] table:focus-visible {
  outline: 2px solid #1c64d8; outline-offset: 2px;
}
/* Diagrams (st.graphviz_chart): Streamlit sets all their text to one small size (about 9.6 px before the diagram
   is scaled to its column); give it back the size Graphviz laid the boxes out for (viz/overview.py FONT_SIZE, in
   the diagram's units), so the labels fill their boxes and scale with the diagram. */
[data-testid="stGraphVizChart"] svg text { font-size: DIAGRAM_FONTpx !important; }
/* Links to other pages (st.page_link) wrap onto a second line instead of being cut off with an ellipsis: their
   labels say where they lead and what is there, and the cut-off part was the part that said it. */
[data-testid="stPageLink-NavLink"] span, [data-testid="stPageLink-NavLink"] p { white-space: normal !important;
  overflow: visible !important; }
/* A focus ring that is visible on every theme. */
a:focus-visible, button:focus-visible, [role="switch"]:focus-visible + *, summary:focus-visible {
  outline: 3px solid #1c64d8 !important; outline-offset: 2px;
}
/* Tables written as text: one wider than its column scrolls inside itself (made focusable by the script). */
[data-testid="stMarkdownContainer"] table { display: block; overflow-x: auto; max-width: 100%; }
/* Phones: the page itself never scrolls sideways; wide content scrolls inside its own element. */
@media (max-width: 640px) {
  [data-testid="stMainBlockContainer"] { padding-left: 0.75rem; padding-right: 0.75rem; max-width: 100vw; }
  .katex-display > .katex { font-size: 1em; }
  [data-testid="stPlotlyChart"], [data-testid="stGraphVizChart"], [data-testid="stDataFrame"] { max-width: 100%; }
}
"""

BASE_CSS = BASE_CSS.replace("DIAGRAM_FONT", str(DIAGRAM_FONT))

PRESENTER_CSS = f"""
/* Presenter mode: every rem-based size of Streamlit grows with the root font size. */
html {{ font-size: {PRESENTER_SCALE * 100:.0f}%; }}
/* the projector's first screen is for the figure: less room above the page */
[data-testid="stMainBlockContainer"] {{ max-width: 100%; padding-top: 2.5rem; }}
/* ...but a teacher's projector has the pages in a bar on top (78 px): the stop's caption starts below it */
.stApp:has([data-testid="stTopNav"]) [data-testid="stMainBlockContainer"] {{ padding-top: 4.5rem; }}
[data-testid="stSidebar"] {{ font-size: 1rem; }}
.katex {{ font-size: 1.3em; }}
"""

# Every KaTeX display that overflows its box becomes keyboard-focusable (WCAG 2.1.1), named for screen
# readers by its own TeX source (KaTeX keeps it in an <annotation>), re-checked when the page changes; so does
# every table written as text that overflows (named by its column headers; it keeps its table role).
KEYBOARD_JS = """
<script>
(() => {
  if (window.__glassFocusable) return;
  window.__glassFocusable = true;
  // an element wider than its box: focusable, named; when it fits again, as it was (a role only where given)
  const focusable = (el, role, label) => {
    const over = el.scrollWidth > el.clientWidth + 1;
    if (over && !el.hasAttribute('tabindex')) {
      el.setAttribute('tabindex', '0');
      if (role) el.setAttribute('role', role);
      el.setAttribute('aria-label', label());
    } else if (!over && el.getAttribute('tabindex') === '0') {
      el.removeAttribute('tabindex'); if (role) el.removeAttribute('role'); el.removeAttribute('aria-label');
    }
  };
  const mark = () => {
    for (const el of document.querySelectorAll('.katex-display')) {
      focusable(el, 'group', () => {
        const tex = el.querySelector('annotation');
        return 'Formula (scrolls sideways)' + (tex ? ': ' + tex.textContent : '');
      });
    }
    for (const el of document.querySelectorAll('[data-testid="stMarkdownContainer"] table')) {
      focusable(el, null, () => 'Table (scrolls sideways): '
        + [...el.querySelectorAll('th')].map(th => th.textContent.trim()).filter(Boolean).join(', '));
    }
  };
  // A presentation clicker's PageDown / PageUp (and B) right after a switch was flipped: Streamlit's shortcuts ignore
  // every key sent to an input, a switch's too, so the plan's button is pressed here (a teacher who flipped
  // "Divide by sqrt(d_k)" and then clicked on found the class stuck on its stop).
  const KEYS = {PageDown: 'plan_next', PageUp: 'plan_back', b: 'pace_pause', B: 'pace_pause'};
  document.addEventListener('keydown', (e) => {
    const t = e.target, key = KEYS[e.key];
    if (!key || e.ctrlKey || e.metaKey || e.altKey || !(t instanceof HTMLInputElement)) return;
    if (t.type !== 'checkbox' && t.type !== 'radio') return;
    const button = document.querySelector(`[data-testid="stSidebar"] .st-key-${key} button:not([disabled])`)
      || (key === 'pace_pause'
          && document.querySelector('[data-testid="stSidebar"] .st-key-pace_resume button:not([disabled])'));
    if (!button) return;
    e.preventDefault();
    t.blur();
    button.click();
  }, true);
  let queued = false;
  const later = () => { if (!queued) { queued = true; requestAnimationFrame(() => { queued = false; mark(); }); } };
  new MutationObserver(later).observe(document.body, {childList: true, subtree: true});
  window.addEventListener('resize', later);
  mark();
})();
</script>
"""


def presenter() -> bool:
    """Is this session in presenter mode?"""
    return bool(st.session_state.get(PRESENTER_KEY, False))


def presenter_asked() -> bool:
    """Presenter mode, also on a session's very first run, before the link's `presenter=1` is in its state (the
    navigation is built before that: a projector's reload got the sidebar's page list once)."""
    if PRESENTER_KEY in st.session_state:
        return presenter()
    return bool(read_flag(st.query_params.get(PRESENTER_KEY, "0")))


def read_flag(value) -> bool | None:
    """A URL flag read tolerantly: 1/true/yes/on (any case, or empty: `?presenter`) -> True,
    0/false/no/off -> False, anything else -> None (ignored)."""
    if isinstance(value, list | tuple):
        value = value[-1] if value else ""
    text = str(value).strip().lower()
    if text in ("", "1", "true", "yes", "on", "y", "t"):
        return True
    if text in ("0", "false", "no", "off", "n", "f"):
        return False
    return None


def css(presenter_mode: bool) -> str:
    return "<style>" + BASE_CSS + (PRESENTER_CSS if presenter_mode else "") + "</style>"


def inject() -> None:
    """The stylesheet (into the event container: no room taken) and the focusability script (at the
    bottom of the sidebar, out of sight). Call once per run, before the page."""
    st.html(css(presenter()))


def inject_script() -> None:
    """The keyboard script: an invisible element at the end of the sidebar (st.html with JavaScript
    takes a place in a container; the sidebar's end is out of the reader's way)."""
    st.sidebar.html(KEYBOARD_JS, unsafe_allow_javascript=True)


def chart_font(fig, presenter_mode: bool | None = None, narrow: bool = False):
    """Set a plotly figure's base font size for the current mode (in place; returns the figure). In presenter mode
    the numbers written in cells and on bars grow as much as the base font (a heatmap's cells wrote them 8 px tall
    on a projector), and the title of a `narrow` chart (half a page) goes on two lines when it is long."""
    present = presenter() if presenter_mode is None else presenter_mode
    fig.layout.font.size = PRESENTER_FONT if present else CHART_FONT
    if present:
        for trace in fig.data:
            font = getattr(trace, "textfont", None)
            if font is not None and isinstance(font.size, int | float):
                font.size = round(font.size * PRESENTER_FONT / CHART_FONT)
        title = fig.layout.title.text
        if narrow and title and "<br>" not in title and len(title) > TITLE_CHARS:  # (Plotly clips, never wraps)
            fig.layout.title.text = wrap(title, TITLE_CHARS)
            fig.layout.title.automargin = True
    return fig


TITLE_CHARS = 34  # a chart title in presenter mode longer than this goes on two lines (a half-width chart's title)


def wrap(text: str, width: int) -> str:
    """`text` on lines of about `width` characters, broken between words (Plotly's line break)."""
    lines, line = [], ""
    for word in text.split(" "):
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    return "<br>".join([*lines, line])
