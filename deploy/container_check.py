"""The container recipe, run for real: build the images, bring compose.yaml's stack up on 127.0.0.1, use it
as a class would, break two of its parts, tear it all down, and print the figures.

    .venv/bin/python -m deploy.container_check [--cold] [--workers 1] [--shots DIR]

Not a test and not part of CI: it needs a Docker daemon, Docker Compose (`docker compose` or Debian's
`docker-compose`), root or the docker group, Debian's chromium (as the browser tests) and minutes of
building. tests/test_compose.py checks compose.yaml's structure without Docker.

1. The base image: $GLASS_BASE_IMAGE, else glass-base:bookworm or debian:bookworm-slim if Docker has one,
   else glass-base:bookworm made by deploy/base_image.sh. The wheelhouse: deploy/wheelhouse.sh if
   deploy/wheels/ has no torch. Both timed when made.
2. Build the three images twice (app, redis, proxy; the worker runs the app's image): the first with
   --no-cache under --cold, the second from the cache. Timed; the images' sizes. (--skip-build: use
   the images Docker has, to try the stack's part again.)
3. Secrets into a temporary folder (deploy.make_secrets); `up -d` as project glass-check-PID on 127.0.0.1
   and a free port: 2 app replicas, Redis, HAProxy, --workers training queue workers; wait until every
   container is healthy.
4. A teacher in Chromium opens the classroom page through the proxy and starts a class (its code noted).
   A student, in a browser context of their own, opens the first page (seconds until it is drawn), goes
   to the training page and starts a short run, which a queue worker trains.
5. Mid-run, the app container holding the student's websocket dies (its main process SIGKILLed, as a
   crash): the tab reconnects through the proxy to the other replica by itself, and the training page
   there shows the same run again and then its end ("Training finished").
6. A queue worker dies the same way and comes back healthy. Then Redis: Docker restarts it (restart
   policy), it reloads its append-only file, and the class is still there: its keys, and a new student
   joining it with its code through the proxy (reloading, as a student would, a page that did not join).
7. `down -v` (containers, networks, the Redis volume), the secrets deleted. The images stay, so the next
   run's builds are cached.

Every wait is bounded (--timeout per wait, --deadline for the whole run); the stack is torn down whatever
happens. The exit status is 0 only when the run survived and the class did.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from deploy.healthcheck import WORKERS_KEY
from deploy.make_secrets import make_secrets
from serving.processes import free_port
from tools.browser import (
    IDLE_SELECTOR,
    STEP_JS,
    assert_no_exception,
    launch_chromium,
    replica_cookie,
    start_training,
    wait_rendered,
)

ROOT = Path(__file__).resolve().parents[1]
IMAGES = {"app": "glass-transformer:app", "redis": "glass-transformer:redis", "proxy": "glass-transformer:proxy"}
# the check's own backend network, so that it can run beside a stack with compose.yaml's defaults
SUBNET, PROXY_ADDRESS = "172.30.84.0/24", "172.30.84.10"
RUN = [
    ("d_model", 16),
    ("Heads", 2),
    ("Layers (encoder and decoder each)", 1),
    ("d_ff", 32),
    ("Batch size (sentence pairs)", 16),
    ("Steps", 1500),
    ("Evaluate on held-out pairs every … steps (0: only at the end)", 0),
]
JOIN_TRIES, JOIN_WAIT = 6, 20  # a student reloading a join link that did not join
REDIS_PING = 'REDISCLI_AUTH="$(cat /run/secrets/redis_password)" redis-cli -h 127.0.0.1 '


@dataclass
class Figures:
    lines: list[str] = field(default_factory=list)
    ok: bool = True

    def add(self, what: str, value: str) -> None:
        self.lines.append(f"{what:<44} {value}")
        print(f"[check] {what}: {value}", flush=True)


class Deadline:
    def __init__(self, seconds: float, per_wait: float):
        self.end, self.per_wait = time.monotonic() + seconds, per_wait

    def ms(self) -> float:
        """Milliseconds for the next wait: --timeout, or what is left of --deadline."""
        left = self.end - time.monotonic()
        if left <= 0:
            raise TimeoutError("the check took longer than --deadline")
        return min(self.per_wait, left) * 1000


def sh(cmd: list[str], timeout: float = 120, env: dict | None = None, check: bool = True) -> str:
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)
    if check and r.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout[-3000:]}{r.stderr[-3000:]}")
    return r.stdout


def timed(cmd: list[str], timeout: float, env: dict | None = None) -> float:
    """Run `cmd` with its output to this terminal; its wall time in seconds."""
    t = time.monotonic()
    subprocess.run(cmd, check=True, timeout=timeout, env=env, cwd=ROOT)
    return time.monotonic() - t


def compose_command() -> list[str]:
    """`docker compose` (the v2 plugin) where it exists, else Debian's `docker-compose` (v1)."""
    if subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    raise SystemExit("no Docker Compose: apt-get install docker-compose (or the compose plugin)")


def image_exists(name: str) -> bool:
    return subprocess.run(["docker", "image", "inspect", name], capture_output=True).returncode == 0


def base_image(fig: Figures) -> str:
    chosen = os.environ.get("GLASS_BASE_IMAGE")
    if chosen:
        if not image_exists(chosen):
            raise SystemExit(f"GLASS_BASE_IMAGE={chosen} is not in Docker (deploy/base_image.sh makes one)")
        return chosen
    for name in ("glass-base:bookworm", "debian:bookworm-slim"):
        if image_exists(name):
            return name
    fig.add("base image (deploy/base_image.sh)", f"{timed(['deploy/base_image.sh'], 1800):.0f} s")
    return "glass-base:bookworm"


def size_mb(image: str) -> float:
    return int(sh(["docker", "image", "inspect", "-f", "{{.Size}}", image]).strip()) / 1e6


def containers(compose: list[str], env: dict, service: str) -> list[str]:
    return sh([*compose, "ps", "-q", service], env=env).split()


def inspect(container: str, fmt: str) -> str:
    return sh(["docker", "inspect", "-f", fmt, container]).strip()


def health(container: str) -> str:
    return inspect(container, "{{if .State.Health}}{{.State.Health.Status}}{{else}}none{{end}}")


def wait_for(what: str, ok, seconds: float, every: float = 0.5):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        with contextlib.suppress(Exception):
            value = ok()
            if value:
                return value
        time.sleep(every)
    raise TimeoutError(f"{what}: not within {seconds:.0f} s")


def main_process(container: str) -> int:
    """The host pid of the container's program: the child of its init (compose.yaml's `init: true`)."""
    init = int(inspect(container, "{{.State.Pid}}"))
    children = Path(f"/proc/{init}/task/{init}/children").read_text().split()
    return int(children[0]) if children else init


def crash(container: str) -> None:
    """SIGKILL the container's program, as a crash would: Docker's restart policy applies (`docker kill`
    would count as stopping it by hand, and Docker would leave it down)."""
    os.kill(main_process(container), signal.SIGKILL)


def websockets_on(container: str) -> int:
    """Established connections to Streamlit's port (8501) from elsewhere than the container itself: the
    browser tabs' websockets, through the proxy (its health checks are short-lived)."""
    rows = sh(["docker", "exec", container, "cat", "/proc/net/tcp"]).splitlines()[1:]
    n = 0
    for row in rows:
        local, remote, state = row.split()[1:4]
        if local.endswith(":2135") and state == "01" and not remote.startswith("0100007F"):
            n += 1
    return n


def student_container(apps: list[str]) -> str:
    """The app container holding the student's websocket (the only tab open): the one with an established
    connection in three looks out of three."""
    counts = {c: 0 for c in apps}
    for _ in range(3):
        for c in apps:
            counts[c] += websockets_on(c) > 0
        time.sleep(0.3)
    holding = [c for c, n in counts.items() if n == 3]
    if len(holding) != 1:
        raise RuntimeError(f"cannot tell which replica holds the student's tab: {counts}")
    return holding[0]


def class_keys(redis: str, code: str) -> int:
    out = sh(["docker", "exec", redis, "sh", "-c", REDIS_PING + f"--scan --pattern 'glass:class:*{code}*'"])
    return len(out.split())


def worker_names(redis: str) -> list[str]:
    """The training queue workers' heartbeats (training.queue_worker: host-pid-random names)."""
    return sh(["docker", "exec", redis, "sh", "-c", REDIS_PING + f"zrange {WORKERS_KEY} 0 -1"]).split()


def redis_answers(redis: str) -> bool:
    r = subprocess.run(
        ["docker", "exec", redis, "sh", "-c", REDIS_PING + "ping"], capture_output=True, text=True, timeout=10
    )
    return r.stdout.strip() == "PONG"


def idle(page, dl: Deadline) -> None:
    page.wait_for_selector(IDLE_SELECTOR, state="attached", timeout=dl.ms())


def join(page, link: str, code: str, dl: Deadline, shots: Path) -> list[str]:
    """Open the class's join link until the page says "Following class CODE", as a student would reload a
    page that did not join (at most JOIN_TRIES loads of JOIN_WAIT s): what each load that did not join said."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    failed = []
    for n in range(1, JOIN_TRIES + 1):
        page.goto(link)
        try:
            page.get_by_test_id("stSidebar").get_by_text(f"Following class {code}").wait_for(
                timeout=min(JOIN_WAIT * 1000, dl.ms())
            )
            assert_no_exception(page)
            page.screenshot(path=str(shots / "4-joined-after-redis-restart.png"))
            return failed
        except PlaywrightTimeout:
            page.screenshot(path=str(shots / f"4-join-{n}-did-not-join.png"))
            alerts = page.get_by_test_id("stAlert").all_inner_texts()
            failed.append(" / ".join(a.strip() for a in alerts)[:160] or "no message")
    raise TimeoutError(f"no join in {JOIN_TRIES} loads: {failed}")


def use_the_stack(url: str, compose: list[str], env: dict, fig: Figures, dl: Deadline, shots: Path) -> None:
    from playwright.sync_api import sync_playwright

    apps = containers(compose, env, "app")
    redis = containers(compose, env, "redis")[0]
    with sync_playwright() as pw:
        browser = launch_chromium(pw)
        try:
            # the teacher starts a class, then closes the tab (the class stays until ended, or 2 h)
            teacher = browser.new_context(viewport={"width": 1280, "height": 900})
            page = teacher.new_page()
            page.goto(url + "/classroom")
            idle(page, dl)
            page.get_by_test_id("stMain").get_by_role("button", name="Start a class").click()
            link = page.get_by_test_id("stMain").get_by_text(re.compile(r"/classroom\?class=[A-Z0-9]{6}")).first
            link.wait_for(timeout=dl.ms())
            code = re.search(r"class=([A-Z0-9]{6})", link.inner_text())[1]
            page.screenshot(path=str(shots / "1-teacher-class.png"))
            teacher.close()
            keys_before = class_keys(redis, code)
            fig.add("class started by a teacher", f"{code} ({keys_before} keys in Redis)")

            # a student: the first page through the proxy, then a training run
            ctx = browser.new_context(viewport={"width": 1280, "height": 900})
            page = ctx.new_page()
            t = time.monotonic()
            page.goto(url + "/")
            idle(page, dl)
            wait_rendered(page, timeout=dl.ms())
            first = time.monotonic() - t
            assert_no_exception(page)
            page.screenshot(path=str(shots / "2-first-page.png"))
            fig.add("first page through the proxy (Chromium)", f"{first:.1f} s to drawn, new session")
            start_training(page, RUN, timeout=dl.ms())
            page.wait_for_function(f"() => ({STEP_JS})() >= 50", timeout=dl.ms())

            # the app container holding the student dies mid-run
            victim = student_container(apps)
            cookie, before = replica_cookie(ctx), page.evaluate(STEP_JS)
            crash(victim)
            killed = time.monotonic()
            fig.add("app container killed mid-run", f"{victim[:12]} at step {before} of 1500")
            while replica_cookie(ctx) in (cookie, None):
                if (time.monotonic() - killed) * 1000 > dl.ms():
                    raise TimeoutError("the tab did not come back through the proxy")
                page.wait_for_timeout(100)
            moved = time.monotonic() - killed
            page.wait_for_function(f"() => ({STEP_JS})() > {before}", timeout=dl.ms())
            again = time.monotonic() - killed
            done = main.get_by_text(re.compile(r"Training finished: \d+ steps"))
            done.wait_for(timeout=dl.ms())
            finished = time.monotonic() - killed
            assert_no_exception(page)
            done.scroll_into_view_if_needed()
            page.screenshot(path=str(shots / "3-run-finished.png"))
            fig.add(
                "run survived the app container's death",
                f"yes: the tab's cookie named the other replica after {moved:.1f} s, the run on screen again "
                f'after {again:.1f} s, "{done.inner_text().strip()}" {finished:.0f} s after the kill',
            )
            wait_for("the killed app container back and healthy", lambda: health(victim) == "healthy", dl.ms() / 1000)
            fig.add(
                "killed app container restarted by Docker",
                f"healthy again, restarts: {inspect(victim, '{{.RestartCount}}')}",
            )
            ctx.close()

            # a training queue worker dies (idle now); Docker restarts it and a new worker there says it is alive
            worker = containers(compose, env, "worker")[0]
            before = set(worker_names(redis))
            crash(worker)
            killed = time.monotonic()
            wait_for(
                "a new worker in the killed worker's container",
                lambda: any(n.startswith(worker[:12]) for n in set(worker_names(redis)) - before),
                dl.ms() / 1000,
                every=0.2,
            )
            back = time.monotonic() - killed
            wait_for("the killed worker's container healthy", lambda: health(worker) == "healthy", dl.ms() / 1000)
            fig.add(
                "killed worker restarted by Docker",
                f"its new worker's first heartbeat {back:.1f} s after the kill, "
                f"container healthy after {time.monotonic() - killed:.0f} s",
            )

            # Redis dies; Docker restarts it; the class is still there
            crash(redis)
            killed = time.monotonic()
            wait_for("Redis back", lambda: redis_answers(redis), dl.ms() / 1000, every=0.2)
            back = time.monotonic() - killed
            keys_after = class_keys(redis, code)
            student = browser.new_context(viewport={"width": 1280, "height": 900})
            page = student.new_page()
            tries = join(page, f"{url}/classroom?class={code}", code, dl, shots)
            kept = keys_after >= keys_before > 0
            fig.ok = fig.ok and kept
            fig.add(
                "Redis restart kept the class",
                f"{'yes' if kept else 'NO'}: Redis answered an authenticated PING {back:.1f} s after the kill "
                f"(restarts: {inspect(redis, '{{.RestartCount}}')}), "
                f"class {code} keys {keys_before} -> {keys_after}",
            )
            fig.add(
                "a new student joins it through the proxy",
                f"{time.monotonic() - killed:.1f} s after the kill, "
                + (
                    "at the first try"
                    if not tries
                    else f"after {len(tries)} loads that did not join ({'; '.join(tries)}), each given {JOIN_WAIT} s"
                ),
            )
        finally:
            browser.close()


def build(cmd: list[str], env: dict, cold: bool, fig: Figures, base: str) -> None:
    """Build the images (the worker's is the app's) twice, timed: first as asked, then from the cache.

    Cold, the app is built first with --no-cache, which builds every stage before its own (redis, proxy)
    with the legacy builder, and the other two then come from its layers: built each with --no-cache,
    three copies of the common stages would exist and a later build might follow another copy than the
    app's and miss the cache of its packages."""
    t = time.monotonic()
    if cold:
        timed([*cmd, "build", "--no-cache", "app"], 3600, env)
    timed([*cmd, "build", "app", "redis", "proxy"], 3600, env)
    fig.add(
        "build, " + ("cold (--no-cache)" if cold else "first (what Docker had cached)"),
        f"{time.monotonic() - t:.0f} s (base {base})",
    )
    again = timed([*cmd, "build", "app", "redis", "proxy"], 3600, env)
    fig.add("build, cached (again, nothing changed)", f"{again:.0f} s")


def run(args) -> Figures:
    fig = Figures()
    compose = compose_command()
    base = base_image(fig)
    if not list((ROOT / "deploy" / "wheels").glob("torch-*+cpu-*.whl")):
        fig.add(
            "wheelhouse (deploy/wheelhouse.sh)",
            f"{timed(['deploy/wheelhouse.sh'], 1800, {**os.environ, 'GLASS_BASE_IMAGE': base}):.0f} s",
        )
    project = f"glass-check-{os.getpid()}"
    port = free_port()
    secrets_dir = Path(tempfile.mkdtemp(prefix="glass-check-secrets-"))
    env = {
        **os.environ,
        "GLASS_BASE_IMAGE": base,
        "GLASS_BIND": "127.0.0.1",
        "GLASS_PORT": str(port),
        "GLASS_BACKEND_SUBNET": SUBNET,
        "GLASS_PROXY_ADDRESS": PROXY_ADDRESS,
        "COMPOSE_PROJECT_NAME": project,
    }
    cmd = [*compose, "--env-file", str(make_secrets(secrets_dir))]
    shots = Path(args.shots) if args.shots else Path(tempfile.mkdtemp(prefix="glass-check-shots-"))
    shots.mkdir(parents=True, exist_ok=True)
    try:
        if not args.skip_build:
            build(cmd, env, args.cold, fig, base)
        fig.add("image sizes", ", ".join(f"{s} {size_mb(i):.0f} MB" for s, i in IMAGES.items()))
        dl = Deadline(args.deadline, args.timeout)
        t = time.monotonic()
        sh([*cmd, "up", "-d", "--no-build", "--scale", "app=2", "--scale", f"worker={args.workers}"], 600, env)
        every = [c for s in ("redis", "app", "worker", "proxy") for c in containers(cmd, env, s)]
        wait_for("every container healthy", lambda: all(health(c) == "healthy" for c in every), dl.ms() / 1000)
        fig.add(
            "stack up (up -d until all healthy)",
            f"{time.monotonic() - t:.0f} s: 2 app replicas, Redis, HAProxy, {args.workers} worker(s), "
            f"http://127.0.0.1:{port}",
        )
        use_the_stack(f"http://127.0.0.1:{port}", cmd, env, fig, dl, shots)
    except Exception as e:  # noqa: BLE001 - a failed step is a result: print it, tear down, exit 1
        fig.ok = False
        fig.add("FAILED", f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
        with contextlib.suppress(Exception):
            print(sh([*cmd, "logs", "--tail", "30"], 60, env, check=False)[-6000:], file=sys.stderr)
    finally:
        subprocess.run(
            [*cmd, "down", "-v", "--remove-orphans", "--timeout", "10"],
            env=env,
            cwd=ROOT,
            capture_output=True,
            timeout=300,
        )
        shutil.rmtree(secrets_dir, ignore_errors=True)
        left = sh(["docker", "ps", "-aq", "--filter", f"label=com.docker.compose.project={project}"], check=False)
        fig.add(
            "torn down", "containers, networks, volume, secrets" + (f"; LEFT: {left.split()}" if left.strip() else "")
        )
        fig.add("screenshots", str(shots))
    return fig


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m deploy.container_check", description=__doc__.split("\n\n")[0])
    ap.add_argument("--cold", action="store_true", help="build with --no-cache first (the cached build follows)")
    ap.add_argument("--skip-build", action="store_true", help="use the images Docker has (to try the stack again)")
    ap.add_argument("--workers", type=int, default=1, choices=(1, 2), help="training queue workers")
    ap.add_argument("--timeout", type=float, default=240, help="seconds per wait")
    ap.add_argument("--deadline", type=float, default=1200, help="seconds for the stack's part (after the builds)")
    ap.add_argument("--shots", default=None, help="folder for the screenshots (default: a temporary one)")
    args = ap.parse_args(argv)
    if subprocess.run(["docker", "info"], capture_output=True).returncode:
        raise SystemExit("no Docker daemon answers `docker info` (start dockerd)")
    fig = run(args)
    print("\n== container check: figures")
    print("\n".join(fig.lines))
    return 0 if fig.ok else 1


if __name__ == "__main__":
    sys.exit(main())
