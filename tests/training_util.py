"""Shared by tests/test_pages_training.py and tests/test_pages_training_runs.py: the tiny run's settings, the page's
widgets set and read back, a run started and joined, the whole app opened on a page, and the fixtures (a fresh job
manager per test, the toy corpus).

A test module uses a fixture by importing it (`from tests.training_util import tsv as tsv`); the autouse
`no_job_left_behind` must be imported by every module whose tests start runs, so that it applies to them.
"""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

import training
from model.data import load_dataset
from tests.apptest_util import no_exception, run_app
from training.local_pool import LocalPool

TRAINS = pytest.mark.processes  # the test starts a training run: its own process (tests/conftest.py, tiers)
TINY = {
    "training_d_model": 16,
    "training_n_heads": 2,
    "training_n_layers": 1,
    "training_d_ff": 32,
    "training_batch_size": 16,
    "training_steps": 40,
    "training_warmup": 10,
    "training_eval_every": 20,
    "training_probe_every": 10,
}
PROBES = ["the animal didn't cross the street because it was too tired", "i am a student"]


def trace(fig: dict, name: str) -> dict:
    for t in fig["data"]:
        if t.get("name") == name:
            return t
    raise AssertionError(f"no trace {name!r} in {[t.get('name') for t in fig['data']]}")


def set_widgets(at, values: dict) -> None:
    for key, value in values.items():
        for kind in ("number_input", "slider", "toggle", "selectbox", "text_area", "radio"):
            try:
                widget = getattr(at, kind)(key=key)
            except KeyError:
                continue
            widget.set_value(value)
            break
        else:
            raise AssertionError(f"no widget {key!r}")
    at.run()


def start(at, **settings):
    """Set the settings by their widgets, press Start, and return this session's job."""
    set_widgets(at, {**TINY, **settings})
    at.button(key="training_start").click().run()
    no_exception(at)
    assert not at.error, [e.value for e in at.error]
    return at.session_state["training_job"]


def finish(at, job, timeout: float = 180):
    """Join the job's thread, then rerun the page (AppTest never fires the polling fragment)."""
    assert job.join(timeout), "the training job did not end in time"
    at.run()
    no_exception(at)
    return job.view()


def run_navigated(page: str) -> AppTest:
    """The whole app (app.py, its sidebar, then pages/<page>.py), as a student sees it."""
    at = run_app(page)
    assert at.sidebar.radio, "no sidebar: the page ran without app.py"
    return at


def upload(at, key: str, files) -> None:
    at.file_uploader(key=key).set_value(files)
    at.run()
    no_exception(at)


def texts(at, kind: str) -> list[str]:
    return [str(e.value) for e in at.get(kind)]


@pytest.fixture(autouse=True)
def no_job_left_behind(monkeypatch):
    """A fresh job manager per test (every AppTest session is the client "local": the per-client start
    rate would otherwise count the whole module's starts); a failing test must not leave a training
    thread running (torch aborts at interpreter exit)."""
    manager = LocalPool(starts_per_minute=1000, jobs_per_client=10)
    monkeypatch.setattr(training, "_SERVICE", manager)
    yield
    for job in manager.active_jobs():
        job.stop("test ended")
        job.join(60)
    manager.shutdown()


@pytest.fixture(scope="module")
def toy():
    return load_dataset()


@pytest.fixture(scope="module")
def tsv(toy) -> bytes:
    pairs = toy["train"][:60]
    return "".join(f"{p.src}\t{p.tgt}\n" for p in pairs).encode("utf-8")
