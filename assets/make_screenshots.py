"""Screenshots of every page for the README: assets/screenshots/<url_path>.png.

Starts the app like the browser tests (`streamlit run` on a free loopback port), opens every page of
app.py in Debian's Chromium in a 1280 x 720 window (a projector's) with the sentence "i am a student"
(and the attention pages once more with the app's default, coreference sentence:
<url_path>-coreference.png; the tracing page with that sentence only, against its partner), waits until the
script is idle and every plotly chart is drawn, and saves
the page from the top down to at most MAX_HEIGHT pixels. Then the first screen of a few pages as a
phone shows them (390 x 844: <url_path>-phone.png) and in presenter mode at 1280 x 720
(<url_path>-presenter.png). Each PNG is reduced to a 256-colour palette to stay small (< 400 KB).
Also writes assets/screenshots/README.md: a list of the images with captions, ready to paste.

Usage: python -m assets.make_screenshots [--pages url_path,...] [--max-height PX]
"""

from __future__ import annotations

import argparse
import io
import json
import urllib.parse
from pathlib import Path

from PIL import Image  # (installed with streamlit)

from explain.lesson import STEPS as LESSON
from model.examples import COREFERENCE
from serving.processes import running_app
from tools.browser import (
    RUN_COUNTER_JS,
    content_height,
    launch_chromium,
    wait_idle,
    wait_rendered,
)
from ui.page_list import PAGES, ROOT

OUT = ROOT / "assets" / "screenshots"
WIDTH = 1280
HEIGHT = 720
MAX_HEIGHT = 3600
PHONE = {"width": 390, "height": 844}
PHONE_PAGES = ("overview", "self_attention", "decoder")  # also shot on a phone, first screen
PRESENTER_PAGES = ("overview", "self_attention")  # also shot in presenter mode, first screen
# also shot on a phone scrolled to one element (<url_path>-phone-<name>.png): the overview's stack diagram
PHONE_SCROLLED = {"overview": ("diagram", '[data-testid="stGraphVizChart"]')}
MAX_BYTES = 400_000
SENTENCE = "i am a student"
COREFERENCE_PAGES = ("self_attention", "multi_head")  # shown again with the app's default (coreference) sentence
DEFAULT_SENTENCE_PAGES = ("tracing",)  # shown with the app's default sentence only (a pair needs its partner)
LESSON_STEPS = (6, 18)  # guided-lesson steps shot on "thinking machines": x·W^Q + b^Q = q, cross-attention
LESSON_COREF_STEP = 19  # and on the coreference sentence: il or elle, traced

CAPTIONS = (
    {p.url_path: p.summary for p in PAGES}
    | {  # the page's own summary (ui/page_list.py)
        "self_attention-coreference": "The same steps on \"the animal didn't cross the street because it was too "
        'tired": the query is "it"',
        "multi_head-coreference": "The heads of the first encoder layer on the coreference sentence",
        "tracing": 'Causal tracing of "…too tired" against "…too wide": which vectors, put back from one run into '
        "the other, bring il back",
    }
    | {f"{p}-phone": "On a phone (390 x 844), first screen" for p in PHONE_PAGES}
    | {
        f"{p}-phone-{name}": f"On a phone (390 x 844), scrolled to the {name}"
        for p, (name, _) in PHONE_SCROLLED.items()
    }
    | {
        f"{p}-presenter": "Presenter mode (sidebar toggle or ?presenter=1) at 1280 x 720, first screen"
        for p in PRESENTER_PAGES
    }
    | {
        f"lesson-step{k}": f'Step {k} of the guided lesson on "thinking machines": {LESSON[k - 1].title}'
        for k in LESSON_STEPS
    }
    | {
        f"lesson-step{LESSON_COREF_STEP}": f"Step {LESSON_COREF_STEP} on the coreference sentence: "
        f"{LESSON[LESSON_COREF_STEP - 1].title}"
    }
)


def wait_drawn(page) -> None:
    """Idle script, no placeholders, every plotly chart drawn, fonts loaded, one more frame."""
    wait_idle(page, timeout=60_000)
    wait_rendered(page, timeout=60_000)
    page.evaluate("document.fonts.ready")
    page.evaluate("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")


def shoot(
    page, url: str, path: Path, max_height: int, viewport: dict | None = None, scroll_to: str | None = None
) -> int:
    """Load the page in a 1280 x 720 window, grow it to the content's height (up to `max_height`, so every
    chart in it draws) and save a palette PNG under MAX_BYTES if possible. With `viewport`: only the first
    screen in that viewport, or with `scroll_to` (a CSS selector) the screen that starts at that element."""
    page.set_viewport_size(viewport or {"width": WIDTH, "height": HEIGHT})
    page.goto(url, wait_until="domcontentloaded")
    wait_drawn(page)
    if scroll_to:
        page.locator(scroll_to).first.evaluate("e => e.scrollIntoView({block: 'start'})")
        page.wait_for_timeout(300)  # the diagram is drawn; let the scroll settle before the picture
    if viewport is None:
        height = min(max(content_height(page), HEIGHT), max_height)
        if height > HEIGHT:
            page.set_viewport_size({"width": WIDTH, "height": height})
            wait_drawn(page)
    png = page.screenshot(full_page=False)
    return save_small(png, path)


def save_small(png: bytes, path: Path) -> int:
    img = Image.open(io.BytesIO(png)).convert("RGB")
    for colors in (256, 128, 64):
        buf = io.BytesIO()
        img.quantize(colors=colors, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE).save(
            buf, format="PNG", optimize=True
        )
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

    shots: list[tuple] = []  # (file stem, url_path, query, viewport[, selector to scroll to])
    for url_path in (p.url_path for p in PAGES):
        if wanted and url_path not in wanted:
            continue
        shots.append((url_path, url_path, {} if url_path in DEFAULT_SENTENCE_PAGES else {"s": SENTENCE}, None))
        if url_path in COREFERENCE_PAGES:
            shots.append((f"{url_path}-coreference", url_path, {}, None))  # no "s": the default sentence
        if url_path in PHONE_PAGES:
            shots.append((f"{url_path}-phone", url_path, {"s": SENTENCE}, PHONE))
        if url_path in PHONE_SCROLLED:
            name, selector = PHONE_SCROLLED[url_path]
            shots.append((f"{url_path}-phone-{name}", url_path, {"s": SENTENCE}, PHONE, selector))
        if url_path == "lesson":
            shots += [
                (f"lesson-step{k}", url_path, {"lesson": "thinking machines", "step": str(k)}, None)
                for k in LESSON_STEPS
            ]
            shots.append(
                (
                    f"lesson-step{LESSON_COREF_STEP}",
                    url_path,
                    {"lesson": COREFERENCE, "step": str(LESSON_COREF_STEP)},
                    None,
                )
            )
        if url_path in PRESENTER_PAGES:
            shots.append(
                (
                    f"{url_path}-presenter",
                    url_path,
                    {"s": SENTENCE, "presenter": "1"},
                    {"width": WIDTH, "height": HEIGHT},
                )
            )
    titles = {p.url_path: p.title for p in PAGES}

    from playwright.sync_api import sync_playwright

    OUT.mkdir(parents=True, exist_ok=True)
    written = []
    with (
        running_app(
            log=ROOT / "tests" / "artifacts" / "screenshots-streamlit.log", extra_env={"OMP_NUM_THREADS": "1"}
        ) as server,
        sync_playwright() as p,
    ):
        browser = launch_chromium(p)
        context = browser.new_context(viewport={"width": WIDTH, "height": HEIGHT}, device_scale_factor=1)
        context.add_init_script(RUN_COUNTER_JS)
        page = context.new_page()
        page.goto(server.url + "/", wait_until="domcontentloaded")  # runs app.py once (see tests/browser)
        wait_drawn(page)
        for stem, url_path, query, viewport, *scroll in shots:
            url = f"{server.url}/{url_path}" + (
                "?" + urllib.parse.urlencode(query, quote_via=urllib.parse.quote) if query else ""
            )
            path = OUT / f"{stem}.png"
            size = shoot(page, url, path, args.max_height, viewport, *scroll)
            written.append((stem, path, size))
            print(f"{path.relative_to(ROOT)}  {size / 1000:.0f} KB")
        browser.close()
        if not wanted or "classroom" in wanted:
            written += class_shots(p, server.url, args.max_height)
            for _, path, size in written[-len(CLASS_SHOTS) :]:
                print(f"{path.relative_to(ROOT)}  {size / 1000:.0f} KB")

    write_readme(titles)
    total = sum(s for _, _, s in written)
    print(
        f"{len(written)} screenshots written, {total / 1e6:.2f} MB; captions in {(OUT / 'README.md').relative_to(ROOT)}"
    )


CLASS_SHOTS = {  # a class with three students on the Thinking Machines plan (`class_shots`)
    "classroom-roster": "The teacher's Classroom page in a class: the code and the QR code, then the roster "
    "(who follows, who explores, who left without choosing to, who voted)",
    "classroom-console": "The teacher's console on a phone (390 x 844): the plan's Next, the open question's votes "
    "and the suggested move, the roster, the snapshots",
    "classroom-projector": "The projector in presenter mode at 1280 x 720, at a stop of the plan: the stop's "
    "caption and its figure on the first screen, the class's controls first in the sidebar",
}


def class_shots(playwright, url: str, max_height: int) -> list[tuple]:
    """The class's screens: the teacher's page with its roster, the console on a phone, the projector at a stop."""
    from classroom import plans
    from tools.class_soak import Classroom

    plan = plans.check_plan(json.loads((ROOT / "assets" / "plans" / "thinking-machines.json").read_text()), None)
    room = Classroom(playwright, url, 3)
    out = []
    try:
        room.start(f"/classroom?plan={plans.plan_to_link(plan)}")
        room.join()
        s1, s2 = room.students[0].page, room.students[2].page
        s1.get_by_role("button", name="Explore on my own").click()  # one chose to explore
        wait_idle(s1)
        s2.locator('[data-testid="stSidebar"]').get_by_role("link", name="Positional encoding").click()  # one left
        wait_idle(s2)
        teacher = room.teacher.page
        teacher.wait_for_timeout(2000)
        path = OUT / "classroom-roster.png"
        out.append(("classroom-roster", path, shoot(teacher, f"{url}/classroom", path, max_height)))
        teacher.get_by_text("Show my teacher key").click()  # (the key, from the private toggle)
        wait_idle(teacher)
        key = teacher.locator('[data-testid="stCode"]').nth(1).inner_text().strip()
        phone = room._tab("console", PHONE, True).page
        path = OUT / "classroom-console.png"
        phone.goto(f"{url}/classroom?console={key}", wait_until="domcontentloaded")
        wait_drawn(phone)
        phone.set_viewport_size({"width": PHONE["width"], "height": min(content_height(phone), max_height)})
        wait_drawn(phone)
        out.append(("classroom-console", path, save_small(phone.screenshot(), path)))
        teacher.goto(f"{url}/lesson?presenter=1", wait_until="domcontentloaded")
        wait_drawn(teacher)
        for _ in range(3):  # stop 4: positional encoding
            teacher.locator('[data-testid="stSidebar"]').get_by_role("button", name="Next stop").click()
            wait_drawn(teacher)
        teacher.wait_for_timeout(5000)  # the reload's toast ("You are still the teacher ...") fades
        path = OUT / "classroom-projector.png"
        out.append(("classroom-projector", path, save_small(teacher.screenshot(), path)))
    finally:
        room.close()
    return out


def write_readme(titles: dict[str, str]) -> None:
    """assets/screenshots/README.md: every screenshot present, in page order, with its caption."""
    lines = ["<!-- generated by `python -m assets.make_screenshots`: paste into the README -->", ""]
    for url_path in titles:
        for stem, what in (
            (url_path, ""),
            (f"{url_path}-coreference", " (coreference sentence)"),
            (f"{url_path}-phone", " (phone)"),
            *((f"{url_path}-phone-{n}", f" (phone, {n})") for n, _ in PHONE_SCROLLED.values()),
            (f"{url_path}-presenter", " (presenter mode)"),
            *((f"{url_path}-step{k}", f" (step {k})") for k in (*LESSON_STEPS, LESSON_COREF_STEP)),
        ):
            path = OUT / f"{stem}.png"
            if not path.is_file():
                continue
            title = titles[url_path] + what
            lines.append(f"- **{title}**: {CAPTIONS.get(stem, titles[url_path])}  ")
            lines.append(f"  ![{title}](assets/screenshots/{path.name})")
        if url_path == "classroom":  # a class in progress: the teacher's page, the console, the projector
            for stem, caption in CLASS_SHOTS.items():
                if (OUT / f"{stem}.png").is_file():
                    lines.append(f"- **Classroom ({stem.split('-', 1)[1]})**: {caption}  ")
                    lines.append(f"  ![Classroom ({stem.split('-', 1)[1]})](assets/screenshots/{stem}.png)")
    (OUT / "README.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
