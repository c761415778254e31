"""A training run survives the death of the app process that started it (training/redis_queue.py), for real:
`./dev.sh serve`'s cluster (two `streamlit run app.py`, one training queue worker, redis-server, HAProxy,
all on 127.0.0.1) and a Chromium tab through the proxy. The student starts a run, the process holding
their tab is killed, the tab reconnects through the proxy to the other process, and the training page
there shows the same run, still going, with its figures from the start; Stop there stops it."""

from __future__ import annotations

import re
import time

import pytest
from playwright.sync_api import sync_playwright

from serving.replicas import Cluster
from tests.browser.test_training_browser import SETTINGS
from tests.services import require_tool
from tools.browser import IDLE_SELECTOR, STEP_JS, assert_no_exception, launch_chromium, replica_cookie, start_training

pytestmark = pytest.mark.browser


def test_a_training_run_survives_the_death_of_its_app_process():
    require_tool("haproxy")
    require_tool("redis-server")
    with Cluster(replicas=2, workers=1, timeout=90) as cluster, sync_playwright() as pw:
        browser = launch_chromium(pw)
        try:
            ctx = browser.new_context(viewport={"width": 1280, "height": 900})
            page = ctx.new_page()
            page.goto(cluster.url + "/")
            page.wait_for_selector(IDLE_SELECTOR, state="attached", timeout=90_000)
            start_training(
                page, [*SETTINGS, ("d_model", 32), ("d_ff", 64), ("Batch size (sentence pairs)", 32)], timeout=60_000
            )
            main = page.get_by_test_id("stMain")
            page.wait_for_function(f"() => ({STEP_JS})() >= 30", timeout=90_000)

            victim = replica_cookie(ctx)
            assert victim in ("app1", "app2")
            before = page.evaluate(STEP_JS)
            cluster.kill_app(int(victim[3:]) - 1)
            t = time.monotonic()
            while replica_cookie(ctx) in (victim, None):  # the tab reconnects through the proxy by itself
                assert time.monotonic() - t < 60, "the tab did not reconnect to the other process"
                page.wait_for_timeout(200)
            # the other process's training page shows the same run, from its first step, still going
            page.wait_for_function(f"() => ({STEP_JS})() > {before} + 20", timeout=90_000)
            assert_no_exception(page)
            assert page.evaluate(STEP_JS) <= 3000

            page.wait_for_selector(IDLE_SELECTOR, state="attached", timeout=30_000)
            main.get_by_role("button", name=re.compile("Stop")).click()
            done = main.get_by_text(re.compile(r"Training stopped \(stopped by you\) after (\d+) of 3000 steps"))
            done.wait_for(timeout=90_000)
            stopped_at = int(re.search(r"after (\d+) of 3000", done.inner_text()).group(1))
            assert stopped_at > before + 20
            assert_no_exception(page)
        finally:
            browser.close()
