"""A class in real browsers, the short version of `python -m bench.classroom_browser` (tools/class_soak.py, six
students through the whole plan on both set-ups): a teacher and four Chromium students (a phone among them), each
its own browser context,
through the shipped "Thinking Machines" plan's first stops forward and back, a peer-instruction cycle and the end
on one `streamlit run app.py`; four students on two app processes behind HAProxy with Redis. Nothing is clicked on a
student's side: every student must be on the teacher's stop after every move (0 drop-outs: walk finding D1),
and every student told the class ended, in a message that stays (D14).
"""

from __future__ import annotations

import pytest

from bench.classroom_browser import soak
from serving.replicas import Cluster
from tests.browser.conftest import ARTIFACTS

pytestmark = pytest.mark.browser


def check(res, students: int, moves: int) -> None:
    print(res.summary())
    assert res.moves == moves and res.students == students
    assert res.dropouts == [], res.dropouts
    assert res.late == [], res.late
    assert len(res.seconds) == res.student_moves
    assert len(res.ended_seconds) == res.students


def test_d1_four_chromium_students_follow_a_plan_forward_and_back_on_one_process(app_url):
    # (four, not the benchmark's six: seven browsers on a CI machine's 2 cores timed out when anything else ran)
    check(soak(app_url, 4, stops_to=3, shots=ARTIFACTS / "soak-one"), 4, 5)  # joined on stop 1, 2 forward, 2 back


def test_d1_four_chromium_students_follow_a_plan_on_two_processes_behind_haproxy():
    """(The benchmark runs six students on two processes through the whole plan; here four, one stop and back.)"""
    with Cluster(2, env={"OMP_NUM_THREADS": "1"}, workers=0) as cluster:
        check(soak(cluster.url, 4, stops_to=2, peer=False, shots=ARTIFACTS / "soak-replicas"), 4, 3)
