"""Helpers shared by the classroom tests (tests/test_classroom*.py): a teacher and students, each its own AppTest
session of app.py, on the class store that the `store` fixture installs (the memory store AND a real redis-server);
and the shipped lesson plans (assets/plans/).

The `store` fixture is shared by importing it into a test module: `from tests.classroom_util import store as store`.
"""

from __future__ import annotations

import pytest

import classroom.plans
from tests.apptest_util import ROOT, no_exception, run_app, state
from ui.page_list import PAGES

SENTENCE = "the animal didn't cross the street because it was too tired"
PLANS = sorted((ROOT / "assets" / "plans").glob("*.json"))
STOP_PAGES = {p.url_path for p in PAGES if p.url_path != "classroom"}


@pytest.fixture
def store(app_store):
    return app_store()


def banner(at) -> str:
    """The plan's banner ("Stop 2 of 9 ...") on the page."""
    return " ".join(e.value for e in at.info if "Stop " in e.value)


def sidebar_text(at) -> str:
    return " ".join(m.value for m in at.sidebar.markdown) + " " + " ".join(c.value for c in at.sidebar.caption)


# -- a class and its students ---------------------------------------------------------------------------------------
def start_teacher():
    teacher = run_app("classroom")
    teacher.button(key="class_start").click().run()
    no_exception(teacher)
    return teacher, state(teacher, "class_code")


def join_by_link(code: str, **query):
    at = run_app(query={"class": code, **query})
    no_exception(at)
    return at


def teacher_line(at) -> str:
    """The line above a following student's page: the teacher's sentence, model and switches."""
    return " ".join(c.value for c in at.caption if "Your teacher's view" in c.value)


# -- a class led by a lesson plan -----------------------------------------------------------------------------------
def teacher_with_plan(name: str):
    t = run_app("classroom")
    t.selectbox(key="plan_shipped").set_value(name).run()
    t.button(key="plan_start").click().run()
    no_exception(t)
    return t, state(t, "class_code")


def students(code: str, n: int):
    out = [run_app(query={"class": code}) for _ in range(n)]
    for s in out:
        no_exception(s)
    return out


def shipped(name: str) -> classroom.plans.Plan:
    read = (classroom.plans.read_plan(f.read_bytes(), STOP_PAGES) for f in PLANS)
    return next(plan for plan in read if plan.title == name)
