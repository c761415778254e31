"""The study under load, short: participants answering at once through HAProxy on 2 app processes that share one
SQLite file; no answer lost or doubled, and the report from the store equals the report from what was sent.
(The figure for 100 participants is bench/study_load.py's.)"""

from __future__ import annotations

from bench import study_load


def test_study_answers_of_participants_at_once_on_two_processes_none_lost():
    result = study_load.run(participants=12, items=4, processes=2, timeout=120)
    assert result["failed"] == 0, result["text"]
    assert result["sent"] == 48 and result["stored"] == 48, result["text"]
    assert result["lost"] == 0 and result["duplicates"] == 0 and result["report_equal"], result["text"]
