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


def shown(at) -> str:
    """Everything the page says in words: its text, toasts and warnings."""
    return " ".join([all_text(at), *(t.value for t in at.toast), *(w.value for w in at.warning)])


def test_a_full_redis_tells_the_teacher_at_once_and_forgets_it_when_writes_pass_again(monkeypatch):
    """Redis over its memory ceiling answers reads and refuses writes. The teacher's Reveal and new sentence were
    dropped without a word, and the page then claimed "unreachable" (false: Redis is up, and full), a claim that
    stayed after Redis had room again. Now each refused change says the service is full and that the change did
    not reach the class; nothing says "unreachable"; once Redis has room the same buttons work and nothing
    about the outage stays on the page."""
    import training

    with redis_server(server=True) as server:
        monkeypatch.setenv(REDIS_URL_ENV, server.url)
        monkeypatch.setattr(training, "_SERVICE", None)  # (this test's pages use this Redis, and leave it with it)
        store = RedisClassStore(
            server.url, prefix=f"test:{uuid.uuid4().hex[:8]}", classes_per_client=1000, class_starts_per_minute=1000
        )
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
            if training._SERVICE is not None:
                training._SERVICE.shutdown()


def test_shared_class_models_have_a_server_wide_budget(make_store, monkeypatch):
    """Each class's model was bounded (16 MB), their number only by the classes' (1,000): 41 of them filled a 1 GB
    Redis, and the memory store could grow to 20 GB. All the classes' models together now stay within
    GLASS_CLASS_MODELS_MB (here 1): a model past it is refused with a message that says so, and the place comes
    back when a class that holds one ends."""
    from classroom import ClassStoreError

    monkeypatch.setenv("GLASS_CLASS_MODELS_MB", "1")
    store = make_store()
    state = {"page": "overview", "sentence": "thinking machines", "model": "base"}
    (a, a_secret), (b, b_secret) = store.create(state), store.create(state)
    weights = bytes(range(256)) * 1600  # 410 kB: 546 kB as base64 (two are over 1 MB)
    assert store.set_class_model(a, a_secret, weights, b"{}") == 1
    assert store.set_class_model(a, a_secret, weights, b"{}") == 2  # a class's new model replaces its last
    with pytest.raises(ClassStoreError, match=r"as many shared models as it can right now \(1 MB of them\)"):
        store.set_class_model(b, b_secret, weights, b"{}")
    assert store.class_model(b) is None
    assert store.set_class_model(b, b_secret, b"small", b"{}") == 1  # what fits still fits
    store.end(a, a_secret)
    assert store.set_class_model(b, b_secret, weights, b"{}") == 2 and store.class_model(b)[1] == weights


def test_students_exploring_the_teachers_model_share_one_copy_of_it(monkeypatch):
    """ "Explore this model on every page" gave every student their own copy of the teacher's model: 44-56 MB of their
    app process each for a 16 MB model, and a 3 s load each. Now the process loads it once per version, from one
    read of the store, and every student's "My model" is that copy, under one cache key (so the analyses of a
    sentence are made once for all of them too); a new version is loaded afresh. (The copy is the app process's,
    whichever store holds the model: the store's side, both back-ends, is the budget's test above.)"""
    from bench.class_models import RUN
    from classroom import MemoryClassStore
    from model import checkpoint

    monkeypatch.delenv(REDIS_URL_ENV, raising=False)
    store = MemoryClassStore(classes_per_client=1000, class_starts_per_minute=1000)
    monkeypatch.setitem(classroom._stores, "", store)
    reads = []
    real_read = store.class_model
    monkeypatch.setattr(store, "class_model", lambda code: reads.append(code) or real_read(code))
    teacher = run_app("classroom")
    teacher.button(key="class_start").click().run()
    code, secret = teacher.session_state["class_code"], teacher.session_state["_class_secret"]
    weights, meta = checkpoint.to_bytes(checkpoint.load(checkpoint.SHIPPED))
    store.set_class_run(code, secret, {**RUN, "model": store.set_class_model(code, secret, weights, meta)})
    students = [run_app(query={"class": code}) for _ in range(3)]
    for s in students:
        s.button(key="class_run_use").click().run()
        no_exception(s)
    mine = [s.session_state["my_model"] for s in students]
    assert all(m is mine[0] for m in mine) and len(reads) == 1  # one copy, one read of the store
    assert len({s.session_state["my_model_key"] for s in students}) == 1
    assert all(s.session_state["model"] == "mine" for s in students)

    store.set_class_run(code, secret, {**RUN, "model": store.set_class_model(code, secret, weights, meta)})
    students[0].run()
    students[0].button(key="class_run_use").click().run()  # version 2: loaded afresh
    assert students[0].session_state["my_model"] is not mine[0] and len(reads) == 2
    store.close()
