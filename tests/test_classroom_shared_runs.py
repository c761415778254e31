"""Training runs shared with a class (ui/classroom/, pages/classroom.py, pages/training.py): students' own runs side
by side on the class board, and the teacher's run followed by the class, its model then explored by a student. A
teacher and students, each its own AppTest session of app.py, with real background training jobs (a local pool).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import classroom
import training
from classroom import MemoryClassStore
from model import checkpoint, pipeline
from serving.shared_redis import REDIS_URL_ENV
from tests.apptest_util import all_text, chart_spec, heatmap_z, no_exception
from tests.apptest_util import state as ss
from tests.classroom_util import students, teacher_with_plan
from ui.widgets import md


@pytest.fixture
def local_training(monkeypatch):
    """A fresh local pool for a test that trains: an earlier test of the session may have left the process-wide
    training service on a Redis queue (tests/training_util.py's `no_job_left_behind` does the same)."""
    from training.local_pool import LocalPool

    pool = LocalPool(starts_per_minute=1000, jobs_per_client=10)
    monkeypatch.delenv(REDIS_URL_ENV, raising=False)
    monkeypatch.setattr(training, "_SERVICE", pool)
    yield pool
    for job in pool.active_jobs():
        job.stop("test ended")
        job.join(60)
    pool.shutdown()


# -- the class board: students' own runs side by side -------------------------------------------------------------
def test_shared_run_board_of_students_runs(monkeypatch, local_training):
    """Two students train their own tiny models (the real background job) and put them on the class board; the
    teacher's classroom page shows both side by side. (The board on Redis: tests/test_class_plans.py.)"""
    from tests.training_util import finish, start

    monkeypatch.delenv(REDIS_URL_ENV, raising=False)
    monkeypatch.setitem(classroom._stores, "", MemoryClassStore(classes_per_client=1000, class_starts_per_minute=1000))
    t, code = teacher_with_plan("Masks: how a decoder could cheat")
    runs = []
    for d_model in (16, 24):
        (s,) = students(code, 1)
        s.switch_page("pages/training.py")
        s.run()
        view = finish(s, start(s, training_d_model=d_model, training_steps=10, training_eval_every=0))
        s.button(key="board_post").click().run()
        no_exception(s)
        assert any(f"Your run is on the class board, as student {len(runs) + 1}" in el.value for el in s.toast)
        runs.append(view)
    t.switch_page("pages/classroom.py")
    t.run()
    no_exception(t)
    table = t.dataframe[-1].value
    assert list(table["d_model"]) == [16, 24]
    for (_, row), view in zip(table.iterrows(), runs, strict=True):
        assert row["last loss"] == round(view.losses[-1], 3)
        assert row["exact match"] == f"{view.evals[-1].exact_match:.0%}"
        assert row["translation"] == view.evals[-1].samples[0][1].replace("<", "‹").replace(">", "›")
    best = min((0, 1), key=lambda i: runs[i].losses[-1])
    said = f"student {best + 1}'s run ends with the lowest training loss ({runs[best].losses[-1]:.3f})"
    assert md(said) in all_text(t)
    lines = [
        tr
        for el in t.get("plotly_chart")
        for tr in json.loads(el.proto.spec)["data"]
        if tr.get("name", "").startswith("student ")
    ]
    assert [tr["name"] for tr in lines] == ["student 1", "student 2"]


def test_shared_run_of_the_teacher_followed_by_the_class(monkeypatch, local_training):
    """The teacher trains on "Train your own" while teaching: the run reaches every following student's page (its
    step, its loss curve), and its result when it ends; a student who explores on their own is left alone."""
    from tests.training_util import finish, start

    monkeypatch.delenv(REDIS_URL_ENV, raising=False)
    store = MemoryClassStore(classes_per_client=1000, class_starts_per_minute=1000)
    monkeypatch.setitem(classroom._stores, "", store)
    t, code = teacher_with_plan("Masks: how a decoder could cheat")
    follower, explorer = students(code, 2)
    explorer.sidebar.button(key="class_detach").click().run()
    t.switch_page("pages/training.py")
    t.run()
    job = start(t, training_steps=12, training_eval_every=0)
    seq = store.counters(code).seq
    view = finish(t, job)  # the teacher's page redraws its panel: the finished run is shared
    shared = store.class_run(code)
    assert store.counters(code).seq > seq
    assert (shared["state"], shared["step"], shared["total"]) == ("finished", 12, 12)
    assert shared["losses"][-1] == pytest.approx(view.losses[-1]) and shared["steps"][-1] == 12
    assert shared["exact_match"] == pytest.approx(view.evals[-1].exact_match)
    snap = [s for s in view.snapshots if s.probe == 0][-1]  # the run's latest attention snapshot reaches the class
    att = shared["attention"]
    assert att["step"] == snap.step and att["keys"] == [w.replace("<", "‹").replace(">", "›") for w in snap.src_labels]
    assert np.allclose(att["weights"], snap.cross[-1].mean(axis=0), atol=5e-4)
    follower.run()
    no_exception(follower)
    assert (
        ":material/model_training: **Your teacher's training run finished after 12 steps** · training loss "
        f"{view.losses[-1]:.3f}" in all_text(follower)
    )
    assert np.allclose(heatmap_z(chart_spec(follower, "class_run_attention")), att["weights"], atol=1e-6)
    curve = next(
        tr
        for el in follower.get("plotly_chart")
        for tr in json.loads(el.proto.spec)["data"]
        if tr.get("name") == "teacher's run"
    )
    assert curve["x"][-1] == 12 and curve["y"][-1] == pytest.approx(view.losses[-1])
    explorer.run()
    assert "Your teacher's training run" not in all_text(explorer)

    # the class explores the teacher's model: one click makes it the student's own, on every page
    assert shared["model"] == 1
    follower.button(key="class_run_use").click().run()
    no_exception(follower)
    mine, theirs = ss(follower, "my_model"), job.result
    assert ss(follower, "model") == "mine" and mine.config == theirs.config
    assert all(
        torch.equal(a, b)
        for a, b in zip(mine.model.state_dict().values(), theirs.model.state_dict().values(), strict=True)
    )
    assert "You explore this model" in all_text(follower) and not any(b.key == "class_run_use" for b in follower.button)
    t.button(key="training_use_mine").click().run()  # the teacher shows the run's model: the class is told
    assert ss(t, "model") == "mine" and "your finished run's model is shared with the class" in all_text(t)
    follower.run()
    assert "and so do you: it is “My model”" in " ".join(c.value for c in follower.sidebar.caption)
    follower.switch_page("pages/overview.py")
    follower.run()
    no_exception(follower)
    sentence = ss(follower, "sentence")
    expected = pipeline.analyse(theirs, pipeline.prepare(theirs, sentence)).translation
    shipped_says = pipeline.analyse(
        checkpoint.load(checkpoint.SHIPPED), pipeline.prepare(checkpoint.load(checkpoint.SHIPPED), sentence)
    ).translation
    assert expected != shipped_says  # (the page below shows the teacher's model, not the shipped one)
    assert f"**Translation:** {md(expected) or '*(empty)*'}" in all_text(follower)
