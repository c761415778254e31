"""Screenshots of every page for the README: assets/screenshots/<url_path>.png.

Starts the app like the browser tests (`streamlit run` on a free loopback port), opens every page of
app.py in Debian's Chromium at 1400 px wide with the sentence "i am a student" (and the attention
pages once more with the app's default, coreference sentence: <url_path>-coreference.png), waits
until the script is idle and every plotly chart is drawn, and saves the page from the top down to
at most MAX_HEIGHT pixels. Each PNG is reduced to a 256-colour palette to stay small (< 400 KB).
Also writes assets/screenshots/README.md: a list of the images with captions, ready to paste.

Usage: python -m assets.make_screenshots [--pages url_path,...] [--max-height PX]
"""

from __future__ import annotations

import argparse
import io
import urllib.parse
from pathlib import Path

from PIL import Image  # (installed with streamlit)

from tests.browser.server import (
    RUN_COUNTER_JS,
    content_height,
    launch_chromium,
    running_server,
    wait_idle,
    wait_rendered,
)
from ui.page_list import PAGES, ROOT

OUT = ROOT / "assets" / "screenshots"
WIDTH = 1400
MAX_HEIGHT = 3600
MAX_BYTES = 400_000
SENTENCE = "i am a student"
COREFERENCE_PAGES = ("self_attention", "multi_head")  # shown again with the app's default (coreference) sentence

CAPTIONS = {p.url_path: p.summary for p in PAGES} | {  # the page's own summary (ui/page_list.py)
    "self_attention-coreference": "The same steps on \"the animal didn't cross the street because it was too "
                                  "tired\": the query is \"it\"",
    "multi_head-coreference": "The heads of the first encoder layer on the coreference sentence",
}


def wait_drawn(page) -> None:
    """Idle script, no placeholders, every plotly chart drawn, fonts loaded, one more frame."""
    wait_idle(page, timeout=60_000)
    wait_rendered(page, timeout=60_000)
    page.evaluate("document.fonts.ready")
    page.evaluate("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")


def shoot(page, url: str, path: Path, max_height: int) -> int:
    """Load the page in a viewport as tall as the picture may be (so every chart in it draws), shrink
    the viewport to the content when it is shorter, and save a palette PNG under MAX_BYTES if possible."""
    page.set_viewport_size({"width": WIDTH, "height": max_height})
    page.goto(url, wait_until="domcontentloaded")
    wait_drawn(page)
    height = min(max(content_height(page), 800), max_height)
    if height < max_height:
        page.set_viewport_size({"width": WIDTH, "height": height})
        wait_drawn(page)
    png = page.screenshot(full_page=False)
    img = Image.open(io.BytesIO(png)).convert("RGB")
    for colors in (256, 128, 64):
        buf = io.BytesIO()
        img.quantize(colors=colors, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE).save(
            buf, format="PNG", optimize=True)
        if buf.tell() <= MAX_BYTES:
            break
    path.write_bytes(buf.getvalue())
    return buf.tell()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pages", default="", help="comma list of url_paths (default: every page)")
    ap.add_argument("--max-height", type=int, default=MAX_HEIGHT)
    args = ap.parse_args()
    wanted = set(filter(None, args.pages.split(",")))

    shots: list[tuple[str, str, dict]] = []  # (file stem, url_path, query)
    for url_path in (p.url_path for p in PAGES):
        if wanted and url_path not in wanted:
            continue
        shots.append((url_path, url_path, {"s": SENTENCE}))
        if url_path in COREFERENCE_PAGES:
            shots.append((f"{url_path}-coreference", url_path, {}))  # no "s": the default sentence
    titles = {p.url_path: p.title for p in PAGES}

    from playwright.sync_api import sync_playwright

    OUT.mkdir(parents=True, exist_ok=True)
    written = []
    with running_server(log=ROOT / "tests" / "artifacts" / "screenshots-streamlit.log",
                        extra_env={"OMP_NUM_THREADS": "1"}) as server, \
            sync_playwright() as p:
        browser = launch_chromium(p)
        context = browser.new_context(viewport={"width": WIDTH, "height": 1000}, device_scale_factor=1)
        context.add_init_script(RUN_COUNTER_JS)
        page = context.new_page()
        page.goto(server.url + "/", wait_until="domcontentloaded")  # runs app.py once (see tests/browser)
        wait_drawn(page)
        for stem, url_path, query in shots:
            url = f"{server.url}/{url_path}" + ("?" + urllib.parse.urlencode(query, quote_via=urllib.parse.quote)
                                             if query else "")
            path = OUT / f"{stem}.png"
            size = shoot(page, url, path, args.max_height)
            written.append((stem, path, size))
            print(f"{path.relative_to(ROOT)}  {size / 1000:.0f} KB")
        browser.close()

    write_readme(titles)
    total = sum(s for _, _, s in written)
    print(f"{len(written)} screenshots written, {total / 1e6:.2f} MB; "
          f"captions in {(OUT / 'README.md').relative_to(ROOT)}")


def write_readme(titles: dict[str, str]) -> None:
    """assets/screenshots/README.md: every screenshot present, in page order, with its caption."""
    lines = ["<!-- generated by `python -m assets.make_screenshots`: paste into the README -->", ""]
    for url_path in titles:
        for stem in (url_path, f"{url_path}-coreference"):
            path = OUT / f"{stem}.png"
            if not path.is_file():
                continue
            title = titles[url_path] + (" (coreference sentence)" if stem != url_path else "")
            lines.append(f"- **{title}**: {CAPTIONS.get(stem, titles[url_path])}  ")
            lines.append(f"  ![{title}](assets/screenshots/{path.name})")
    (OUT / "README.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
