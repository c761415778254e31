"""A class in real browsers: a teacher and several students in Chromium, each its own browser context (its own
cookies, so its own Streamlit session and student id), through a lesson plan forward and back, a peer-instruction
cycle and the class's end, counting every student who is not on the teacher's stop after a move.

Used by the benchmark (`python -m bench.classroom_browser`, which starts the servers: one process, or two behind
HAProxy with Redis) and by its short version in the suite (tests/browser/test_class_soak.py). The app is given by
its URL; nothing here starts a server or imports the app.

What counts as a drop-out: a student whose badge says "Exploring" (or whose address says follow=0, or whose page
asks for a sentence) when the teacher only moved: nothing was clicked on the student's side. A dropped student is
brought back with the page's own "Follow the teacher" button, so that one drop-out is counted once and the next
moves are still measured. Seconds to the stop: from the teacher's click to the student's page showing the stop's
banner and the lesson's step, with no script run in progress.
"""

from __future__ import annotations

import re
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tools.browser import RUN_COUNTER_JS, launch_chromium, wait_idle

# (name, viewport, phone): a projector, laptops of two sizes, phones
TEACHER_VIEW = {"width": 1280, "height": 720}
STUDENT_VIEWS = [
    ("laptop", {"width": 1280, "height": 800}, False),
    ("phone", {"width": 390, "height": 844}, True),
    ("small-laptop", {"width": 1024, "height": 768}, False),
    ("tablet", {"width": 820, "height": 1180}, True),
    ("laptop-2", {"width": 1440, "height": 900}, False),
    ("phone-2", {"width": 412, "height": 915}, True),
    ("laptop-3", {"width": 1366, "height": 768}, False),
    ("laptop-4", {"width": 1280, "height": 720}, False),
]
STATUS_JS = """() => {
  const app = document.querySelector('[data-testid="stApp"]');
  const main = document.querySelector('[data-testid="stMain"]');
  const side = document.querySelector('[data-testid="stSidebar"]');
  return {idle: !!app && app.getAttribute('data-test-script-state') === 'notRunning',
          main: main ? main.innerText : '', side: side ? side.textContent : '', url: location.href};
}"""


@dataclass(frozen=True)
class ExpectedStop:
    """Where the class should be after a move: the plan's stop (1-based) of `of`, and the lesson step it shows."""

    number: int
    of: int
    step: int | None = None

    def shown(self, text: str) -> bool:
        return f"Stop {self.number} of {self.of}" in text and (self.step is None or f"Step {self.step} of " in text)


@dataclass
class Tab:
    name: str
    page: object
    phone: bool = False

    def status(self) -> dict:
        return self.page.evaluate(STATUS_JS)


@dataclass
class SoakResult:
    students: int = 0
    moves: int = 0  # teacher moves after which every student was checked
    dropouts: list[tuple[str, str, str]] = field(default_factory=list)  # (move, student, what was seen)
    late: list[tuple[str, str]] = field(default_factory=list)  # (move, student): not on the stop in time
    seconds: list[float] = field(default_factory=list)  # click -> a student on the stop, every student and move
    ended_seconds: list[float] = field(default_factory=list)  # "End the class" -> each student told it ended
    events: list[str] = field(default_factory=list)

    @property
    def student_moves(self) -> int:
        return self.students * self.moves

    def summary(self) -> str:
        p50, p95 = percentile(self.seconds, 50), percentile(self.seconds, 95)
        return (
            f"{self.students} students, {self.moves} moves: {len(self.dropouts)} drop-outs, "
            f"p50 {p50:.2f} s / p95 {p95:.2f} s to the stop ({len(self.late)} late of {self.student_moves})"
        )


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[min(98, max(0, int(q) - 1))]


def dropped(status: dict) -> str | None:
    """What shows that a student left follow mode (None: they still follow)."""
    if "follow=0" in status["url"]:
        return "follow=0 in the address"
    if "Exploring · class" in status["side"] and "your teacher's choice" not in status["side"]:
        return "the badge says Exploring"
    if "Choose a sentence above" in status["main"]:
        return "an empty sentence"
    return None


class Classroom:
    """One teacher and `n` students on the app at `url` (Chromium via playwright's sync API, given)."""

    def __init__(self, playwright, url: str, students: int, shots: Path | None = None, log: Callable = print):
        self.url, self.shots, self.log = url.rstrip("/"), shots, log
        self.browser = launch_chromium(playwright)
        self.teacher = self._tab("teacher", TEACHER_VIEW, False)
        self.n = students
        self.students: list[Tab] = []
        self.code: str | None = None
        self.link: str | None = None
        self.result = SoakResult(students=students)

    def _tab(self, name: str, viewport: dict, phone: bool) -> Tab:
        context = self.browser.new_context(viewport=viewport, device_scale_factor=1, is_mobile=phone, has_touch=phone)
        context.set_default_timeout(60_000)
        context.add_init_script(RUN_COUNTER_JS)
        return Tab(name, context.new_page(), phone)

    def close(self) -> None:
        self.browser.close()

    def shot(self, tab: Tab, name: str) -> None:
        if self.shots is not None:
            self.shots.mkdir(parents=True, exist_ok=True)
            safe = re.sub(r"[^\w.-]+", "_", name)
            tab.page.screenshot(path=str(self.shots / f"{tab.name}-{safe}.png"))

    # -- the teacher -------------------------------------------------------------------------------------------
    def start(self, plan_link: str) -> None:
        """The teacher opens the plan's link (/classroom?plan=...), starts a class with it, reads the join link."""
        t = self.teacher.page
        t.goto(f"{self.url}/{plan_link.lstrip('/')}", wait_until="domcontentloaded")
        wait_idle(t, timeout=60_000)
        self.teacher_click(lambda: t.get_by_role("button", name="Start a class with this plan").click())
        self.teacher_click(lambda: self.sidebar(t).get_by_role("link", name="Classroom", exact=True).click())
        text = t.get_by_text(re.compile(r"/classroom\?class=[A-Z0-9]{6}")).first.inner_text()
        self.link = re.search(r"(http\S+)", text)[1]
        self.code = re.search(r"class=([A-Z0-9]{6})", self.link)[1]
        self.log(f"class {self.code}: {self.link}")

    @staticmethod
    def sidebar(page):
        return page.locator('[data-testid="stSidebar"]')

    def teacher_click(self, action: Callable[[], None]) -> None:
        wait_idle(self.teacher.page, timeout=60_000)
        try:
            action()
        except Exception:
            self.shot(self.teacher, "teacher-click-failed")  # what the teacher's screen showed instead
            raise
        wait_idle(self.teacher.page, timeout=60_000)

    def join(self) -> None:
        """Every student opens the join link; each must follow within a minute."""
        for i in range(self.n):
            name, viewport, phone = STUDENT_VIEWS[i % len(STUDENT_VIEWS)]
            tab = self._tab(f"s{i + 1}-{name}", viewport, phone)
            tab.page.goto(self.link, wait_until="domcontentloaded")
            self.students.append(tab)
        for tab in self.students:
            self.wait_for(tab, lambda s: f"Following class {self.code}" in s["side"], 60, "to follow")

    def wait_for(self, tab: Tab, check: Callable[[dict], bool], seconds: float, what: str) -> float:
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            if check(tab.status()):
                return time.perf_counter() - t0
            time.sleep(0.1)
        self.shot(tab, f"timeout-{what}")
        raise AssertionError(f"{tab.name}: not {what} within {seconds} s ({tab.page.url})")

    # -- moves ---------------------------------------------------------------------------------------------------
    def move(self, label: str, button: str, stop: ExpectedStop, timeout: float = 30) -> None:
        """The teacher presses the plan's `button` ("Next stop" / "Back a stop" in the sidebar; its name may end
        with its key); every student must reach `stop`."""
        t0 = time.perf_counter()
        name = re.compile("^" + re.escape(button))
        self.teacher_click(lambda: self.sidebar(self.teacher.page).get_by_role("button", name=name).click())
        self.check_students(label, stop, t0, timeout)

    def check_students(self, label: str, stop: ExpectedStop, t0: float, timeout: float) -> None:
        self.result.moves += 1
        waiting = {tab.name: tab for tab in self.students}
        while waiting and time.perf_counter() - t0 < timeout:
            for name, tab in list(waiting.items()):
                status = tab.status()
                why = dropped(status)
                if why is not None:
                    self.result.dropouts.append((label, name, why))
                    self.log(f"{label}: {name} dropped out ({why}): {status['url']}")
                    self.shot(tab, f"dropout-{label}")
                    self.bring_back(tab)
                    del waiting[name]
                elif status["idle"] and stop.shown(status["main"]):
                    self.result.seconds.append(time.perf_counter() - t0)
                    del waiting[name]
            time.sleep(0.05)
        for name, tab in waiting.items():
            self.result.late.append((label, name))
            self.log(f"{label}: {name} not on {stop} after {timeout} s: {tab.page.url}")
            self.shot(tab, f"late-{label}")

    def bring_back(self, tab: Tab) -> None:
        """The student's own way back: the "Follow the teacher" button (in the page on a phone, else the sidebar)."""
        buttons = tab.page.get_by_role("button", name="Follow the teacher")
        for i in range(buttons.count()):
            if buttons.nth(i).is_visible():
                buttons.nth(i).click()
                break
        self.wait_for(
            tab, lambda s: dropped(s) is None and f"Following class {self.code}" in s["side"], 30, "back following"
        )

    def plan(self, stops: list[ExpectedStop], back: bool = True) -> None:
        """Next through every stop after the first, then Back to the first (the whole plan forward and back)."""
        for i in range(1, len(stops)):
            self.move(f"next-{i + 1}", "Next stop", stops[i])
        if back:
            for i in range(len(stops) - 2, -1, -1):
                self.move(f"back-{i + 1}", "Back a stop", stops[i])

    # -- peer instruction ------------------------------------------------------------------------------------------
    def peer_cycle(self, stop: ExpectedStop, timeout: float = 30) -> None:
        """From the Classroom page: ask, every student votes, lock, discuss, second vote, lock, reveal. Every student
        must see each step and still follow the teacher, on the stop, at the end."""
        t = self.teacher.page
        self.teacher_click(lambda: self.sidebar(t).get_by_role("link", name="Classroom", exact=True).click())
        self.teacher_click(lambda: t.get_by_role("button", name="Ask the class").click())
        self.everyone("asked", lambda s: "Question from your teacher" in s["main"], timeout)
        self.vote(0)
        self.everyone("voted", lambda s: "Your answer: " in s["main"] and "none yet" not in s["main"], timeout)
        for button, seen in (
            ("Lock the vote", "The vote is locked"),
            ("Discuss, then vote again", "Discuss with a"),
            ("Open the second vote", "Vote again after your discussion"),
        ):
            self.teacher_click(lambda b=button: t.get_by_role("button", name=b).click())
            self.everyone(button, lambda s, seen=seen: seen in s["main"], timeout)
        self.vote(1)
        self.teacher_click(lambda: t.get_by_role("button", name="Lock the second vote").click())
        self.teacher_click(lambda: t.get_by_role("button", name="Reveal the model's answer").click())
        self.everyone("revealed", lambda s: "The model's answer" in s["main"], timeout)
        for tab in self.students:
            status = tab.status()
            if dropped(status) is not None or not stop.shown(status["main"]):
                self.result.dropouts.append(("peer", tab.name, dropped(status) or "not on the stop"))
                self.shot(tab, "peer-dropout")

    def everyone(self, what: str, check: Callable[[dict], bool], timeout: float) -> None:
        t0 = time.perf_counter()
        for tab in self.students:
            self.wait_for(tab, check, max(1.0, timeout - (time.perf_counter() - t0)), what)
        self.result.events.append(f"{what}: every student in {time.perf_counter() - t0:.1f} s")

    def vote(self, option: int) -> None:
        for tab in self.students:
            panel = tab.page.locator(".st-key-class_question")
            panel.get_by_role("button").nth(option).click()

    # -- the end ----------------------------------------------------------------------------------------------------
    def end(self, timeout: float = 20) -> None:
        """The teacher ends the class; every student must be told, in a message that stays on their page."""
        t = self.teacher.page
        if "/classroom" not in t.url:
            self.teacher_click(lambda: self.sidebar(t).get_by_role("link", name="Classroom", exact=True).click())
        t0 = time.perf_counter()
        self.teacher_click(lambda: t.get_by_role("button", name="End the class for everyone").click())
        for tab in self.students:
            self.wait_for(
                tab,
                lambda s: "has ended" in s["main"],
                max(1.0, timeout - (time.perf_counter() - t0)),
                "told the class ended",
            )
            self.result.ended_seconds.append(time.perf_counter() - t0)
        time.sleep(5)  # the message stays (it is not a toast that fades)
        for tab in self.students:
            if "has ended" not in tab.status()["main"]:
                raise AssertionError(f"{tab.name}: the message that the class ended did not stay")
