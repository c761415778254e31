"""Classroom mode at the server's limits (issue 37): a full Redis says "full" to the teacher at once and nothing
else, and forgets it when writes go through again; shared class models have a server-wide budget, and a process
keeps one loaded copy of each however many students explore it.

Each test is a teacher and students as AppTest sessions of app.py (tests/test_classroom.py explains), on a real
redis-server started here where Redis is what is tested, and on both back-ends where the store is.
"""

from __future__ import annotations

import uuid

import pytest

import classroom
from classroom import RedisClassStore
from serving.shared_redis import REDIS_URL_ENV, new_client
from tests.apptest_util import all_text, no_exception, run_app
from tests.services import redis_server

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def shown(at) -> str:
    """Everything the page says in words: its text, toasts and warnings."""
    return " ".join([all_text(at), *(t.value for t in at.toast), *(w.value for w in at.warning)])


def test_a_full_redis_tells_the_teacher_at_once_and_forgets_it_when_writes_pass_again(monkeypatch):
    """Redis over its memory ceiling answers reads and refuses writes. The teacher's Reveal and new sentence were
    dropped without a word, and the page then claimed "unreachable" (false: Redis is up, and full), a claim that
    stayed after Redis had room again. Now each refused change says the service is full and that the change did
    not reach the class; nothing says "unreachable"; once Redis has room the same buttons work and nothing
    about the outage stays on the page."""
    with redis_server(server=True) as server:
        monkeypatch.setenv(REDIS_URL_ENV, server.url)
        store = RedisClassStore(server.url, prefix=f"test:{uuid.uuid4().hex[:8]}", classes_per_client=1000,
                                class_starts_per_minute=1000)
        monkeypatch.setitem(classroom._stores, server.url, store)
        conn = new_client(server.url)
        try:
            teacher = run_app("classroom")
            teacher.button(key="class_start").click().run()
            code = teacher.session_state["class_code"]
            teacher.button(key="class_ask").click().run()
            no_exception(teacher)
            assert store.votes(code) is not None and teacher.button(key="class_reveal")

            for i in range(40):  # Redis full: what it holds is over its ceiling, it refuses every write
                conn.set(f"filler:{i}", b"x" * 50_000)
            conn.config_set("maxmemory", "1mb")
            teacher.button(key="class_reveal").click().run()
            no_exception(teacher)
            words = shown(teacher)
            assert "full right now" in words and "did not reach the class" in words, words
            assert "unreachable" not in words
            assert not store.votes(code).revealed  # (the store is honest: nothing was revealed)

            teacher.switch_page("pages/overview.py").run()
            teacher.sidebar.text_input(key="sentence").set_value("the cat is small").run()  # a new sentence
            no_exception(teacher)
            words = shown(teacher)
            assert "full right now" in words and "unreachable" not in words, words
            assert store.snapshot(code).state["sentence"] != "the cat is small"

            conn.config_set("maxmemory", "1gb")  # room again: the next change goes through, nothing stays
            for i in range(40):
                conn.delete(f"filler:{i}")
            teacher.run()
            assert store.snapshot(code).state["sentence"] == "the cat is small"
            teacher.switch_page("pages/classroom.py").run()
            teacher.button(key="class_reveal").click().run()
            no_exception(teacher)
            assert store.votes(code).revealed
            words = shown(teacher)
            assert "full right now" not in words and "unreachable" not in words, words
        finally:
            conn.config_set("maxmemory", "1gb")
            store.close()
