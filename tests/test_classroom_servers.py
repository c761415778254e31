"""Classroom mode across real processes (serving/replicas.py, serving/identity.py, the class's event stream).

Two `streamlit run app.py` behind HAProxy with a redis-server, one killed mid-class: its students rejoin on the
other. A browser is the same student on every app process (its id hashed with the key they share in Redis). And
against one real `streamlit run app.py`: a page whose run lost its end asks again until it shows the class, and
the teacher's console follows the class by its events, with no timer. (The same in Chromium:
tests/browser/test_classroom_browser.py; the class followed in AppTest sessions: tests/test_classroom.py.)
"""

from __future__ import annotations

import asyncio
import uuid

import classroom
from classroom import RedisClassStore
from tests.apptest_util import all_text, no_exception, state
from tests.classroom_util import join_by_link, start_teacher
from tests.services import until
from ui.widgets import md


# -- several processes: one class through Redis, and a process killed mid-class ---------------------------
def test_two_processes_share_a_class_and_its_students_survive_a_killed_process():
    """2 × `streamlit run app.py` behind HAProxy with a redis-server (serving/replicas.py); a teacher on app1,
    students on both (websocket sessions, tools/ws_client.py). A question is open, half answered; app2 is
    killed. Its students reconnect through the proxy with their own address (``?class=CODE``) and widget
    values: they are in the class again on app1, following, and the class's state, question and counts are as
    they were; one who was exploring keeps exploring, with its own sentence (from its address: a sentence whose
    Enter met the dead process itself is lost, see README). Each student sends a browser's XSRF cookie: the moved
    students are the same students (the count is unchanged, an answer given on app2 is still theirs on app1)."""
    from bench.class_chaos import failover
    from serving.replicas import Cluster
    from tests.services import require_tool

    require_tool("haproxy")
    require_tool("redis-server")
    with Cluster(replicas=2, timeout=120) as c:
        res = asyncio.run(asyncio.wait_for(failover(c, 6, 60), 300))
    assert res["on_killed_process"] == 3 and res["rejoined"] == 3, res
    # each student is a browser (an XSRF cookie): the moved ones come back as the same students
    assert res["students_before"] == res["students_after"] == 6, res
    assert res["moved_who_answered"] == 1 and res["moved_answer_kept"] == 1, res
    assert res["class_state_unchanged"] and res["answers_after"] == res["answers_before"]
    assert sum(res["answers_after"]) == 3
    assert res["followed_next_change"] == 5 and res["explorer_kept_own_sentence"] and res["now_on"] == ["app1"], res


# -- a student keeps their id on every process ---------------------------------------------------------
XSRF = "2|0a0b0c0d|{}|1700000000"  # Streamlit's XSRF cookie: version|mask|token XOR mask|timestamp (hex)


def xsrf_cookie(token: bytes) -> str:
    mask = bytes.fromhex("0a0b0c0d")
    return XSRF.format(bytes(b ^ mask[i % 4] for i, b in enumerate(token)).hex())


def test_a_browser_is_the_same_student_on_every_process(redis_url, monkeypatch):
    """With GLASS_REDIS_URL, a browser's id (its XSRF cookie hashed with the key all processes share in
    Redis) names the same student on every app process: a student moved to another process (a failover)
    rejoins as themselves, their answer still theirs and the class not counting them twice. Each "process"
    here has its own class store client and its own fallback key; only Redis is shared."""
    from serving import identity, shared_redis
    from serving.identity import Identity
    from ui.classroom import session as class_session

    monkeypatch.setenv(shared_redis.REDIS_URL_ENV, redis_url)
    monkeypatch.setattr(shared_redis, "_clients", {})
    conn = shared_redis.client(redis_url)
    conn.delete(shared_redis.BROWSER_KEY)  # a fresh shared key for this test
    prefix = f"test:{uuid.uuid4().hex[:8]}"
    stores = [RedisClassStore(redis_url, prefix=prefix) for _ in range(2)]
    cookie = {"value": None}

    def on_process(i: int, browser_cookie: str | None) -> None:
        """What this process's next session sees: its store, its own key (until it reads Redis's)."""
        monkeypatch.setitem(classroom._stores, redis_url, stores[i])
        monkeypatch.setattr(identity, "_SECRET", uuid.uuid4().bytes)
        monkeypatch.setattr(identity, "_KEY", None)
        cookie["value"] = browser_cookie

    monkeypatch.setattr(
        class_session, "current_identity", lambda: Identity("local", identity.browser_id(cookie["value"]), None)
    )
    mine, other = xsrf_cookie(b"browser-one-token-0123456789"), xsrf_cookie(b"browser-two-token-0123456789")
    try:
        on_process(0, None)
        teacher, code = start_teacher()
        on_process(0, mine)
        s1 = join_by_link(code)
        sid = state(s1, "_class_student")
        assert sid.startswith("s-") and store_students(stores[0], code) == 1
        teacher.radio(key="class_kind").set_value("attention").run()
        teacher.button(key="class_ask").click().run()
        s1.run()
        q = stores[0].snapshot(code).question
        s1.button(key=f"class_answer_{q.id}_1").click().run()
        no_exception(s1)

        on_process(1, mine)  # process 0 died: the same browser, a new session on process 1
        again = join_by_link(code)
        assert state(again, "_class_student") == sid and identity._KEY != identity._SECRET
        assert store_students(stores[1], code) == 1  # not a second student
        votes = stores[1].votes(code, student_id=sid)
        assert votes.my_first == 1 and votes.voted == (1, 0)  # the answer is still theirs
        assert f"Your answer: **{md(q.options[1])}**" in all_text(again)
        again.button(key=f"class_answer_{q.id}_0").click().run()  # changing it replaces it
        assert stores[0].votes(code, secret=state(teacher, "_class_secret")).first == {0: 1}

        on_process(1, other)  # another browser: another student
        s2 = join_by_link(code)
        assert state(s2, "_class_student") not in (sid, None) and store_students(stores[1], code) == 2

        on_process(0, None)  # no cookie (a script, AppTest): a random id per session, as before
        s3, s4 = join_by_link(code), join_by_link(code)
        assert state(s3, "_class_student") != state(s4, "_class_student")
        assert not state(s3, "_class_student").startswith("s-") and store_students(stores[0], code) == 4

        on_process(1, mine)  # the same browser in another class: an unrelated id
        teacher2, code2 = start_teacher()
        s5 = join_by_link(code2)
        assert state(s5, "_class_student") not in (sid, None) and state(s5, "_class_student").startswith("s-")
    finally:
        for s in stores:
            s.close()


def store_students(store, code) -> int:
    return store.snapshot(code).students


# -- a browser that missed the end of a redraw ----------------------------------------------------------
def against_an_app(run, tmp_path) -> None:
    """`run(url)`, a coroutine, against one `streamlit run app.py` on 127.0.0.1 (180 s at the most)."""
    from serving.processes import running_app

    with running_app(log=tmp_path / "server.log", timeout=120) as server:
        asyncio.run(asyncio.wait_for(run(server.url), 180))


def test_a_page_whose_run_lost_its_end_asks_again_until_it_shows_the_class(tmp_path):
    """Streamlit can drop a run's last messages (a new script runner started as the old one stopped: Streamlit
    issue 9921). Simulated in the client, on a real `streamlit run app.py`: the redraw after the teacher's
    change loses everything after its first few messages, the class component (the run's last element)
    included. The page, like the component's JavaScript, compares the class's counter (its event stream) with
    the one its last complete run drew, and asks again (2.5 s later): the page is repaired, with no click and
    no timer, and then asks nothing more. Also: a student's page registers no fragment timer, and the stream
    is only for the class's members."""
    import http.client

    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    from bench.class_clients import Cookie, shows, start_class

    class Lossy(Cookie):
        """Once armed (`keep`), drops every message of the next run after its first `keep` (its end included),
        up to the next run's start (a following student's page is redrawn by runs of its fragment)."""

        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            self.keep: int | None = None
            self.losing, self.seen, self.dropped = False, 0, []

        def _handle(self, msg):
            kind = msg.WhichOneof("type")
            if kind == "new_session":
                self.losing = self.keep is not None
                self.keep, self.seen = (None, 0) if self.losing else (self.keep, 0)
            if self.losing:
                self.seen += 1
                if self.seen > 2:  # the run's start and its first element arrive
                    self.dropped.append(msg.script_finished if kind == "script_finished" else kind)
                    return
            super()._handle(msg)

    def get(url: str, path: str) -> tuple[int, str]:
        host, port = url.split("//")[1].split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=10)
        conn.request("GET", path)
        r = conn.getresponse()
        body = r.read(200) if r.status != 200 else r.readline() + r.readline() + r.readline()
        conn.close()
        return r.status, body.decode(errors="replace")

    async def run(url: str) -> None:
        teacher, code = await start_class(url)
        student = Lossy(url, timeout=120)
        await student.connect("classroom", f"class={code}")
        try:
            assert f"Following class {code}" in student.text(1)
            assert not student.fragments  # no timer on a student's page
            events = student.sync["url"]
            assert student.sync["watch"] == "seq" and student.sync["drawn"] == 1
            status, body = await asyncio.to_thread(get, url, events)
            assert status == 200 and '"seq": 1' in body, body
            assert (await asyncio.to_thread(get, url, events[:-4] + "0000"))[0] == 403  # a forged token
            assert (await asyncio.to_thread(get, url, events.replace(code, "ZZZZZZ")))[0] == 403  # another class
            student.start_following()
            await until(
                lambda: student.latest is not None and student.page_hash == teacher.page_hash and not student.running,
                30,
                "the student's page to show the teacher's",
            )
            await asyncio.sleep(1.0)

            def redraws():
                return student.full_runs + student.page_runs

            runs, asks = redraws(), student.asks

            student.keep = 2
            await teacher.type_sentence("i am a student")  # the event reaches the page, which asks: a redraw...
            await until(  # (the page alone: a fragment's run)
                lambda: ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY in student.dropped,
                20,
                lambda: f"the redraw's end to be lost: {student.dropped}",
            )
            assert redraws() == runs and not shows(student, "i am a student")  # ...half drawn
            assert student.sync["drawn"] == 1  # the page knows it does not show the class's state
            await until(lambda: redraws() > runs, 10, lambda: f"the page to ask again: {student.runs[-6:]}")  # repaired
            assert shows(student, "i am a student") and not student.exceptions()
            assert "i am a student" in student.text() and student.sync["drawn"] == 2
            assert student.asks == asks + 2
            runs = redraws()
            await asyncio.sleep(3.0)
            assert redraws() == runs and student.asks == asks + 2  # and then nothing more
        finally:
            await asyncio.gather(teacher.close(), student.close(), return_exceptions=True)

    against_an_app(run, tmp_path)


def test_the_teachers_console_has_no_timer_and_follows_the_class_by_its_events(tmp_path):
    """The teacher's class page (answers, votes, arrivals, snapshots) is redrawn by the class's events: its only
    timer is the sidebar's touch of the class once a minute (before: the answers every second, the snapshots every
    two). A student's answer moves the class's tally; the teacher's page hears it and shows the answer, with no
    request of the teacher's own. (In Chromium the event reruns the sidebar's panel, which redraws the whole page
    because the console drew an older tally: tests/browser/test_classroom_peer_browser.py sees the answers arrive.)"""
    from bench.class_clients import CODE, Cookie, button_states, join

    async def run(url: str) -> None:
        teacher = Cookie(url, timeout=120)
        student = None
        try:
            await teacher.connect("classroom")
            await teacher.click("class_start")
            code = CODE.search(teacher.text())[1]
            await teacher.click("class_ask")
            assert set(teacher.fragments.values()) == {60.0}, teacher.fragments  # the touch, and nothing else
            teacher.start_following()
            assert "0 of 0 students answered" in teacher.text()
            student = await join(url, code)
            await until(lambda: button_states(student, "class_answer_1_0"), 10, "the question's answer button")
            asks = teacher.asks
            await student.click("class_answer_1_0")
            await until(
                lambda: "1 of 1 students answered" in teacher.text(), 15, lambda: f"the tally: {teacher.text()[-400:]}"
            )
            assert teacher.asks > asks  # the teacher's page asked for the redraw itself, on the class's event
            # (the panel is drawn at the end of a full run: once the redraws are over, its one timer is back)
            await until(
                lambda: not teacher.running and set(teacher.fragments.values()) == {60.0},
                15,
                lambda: f"the one timer back: {teacher.fragments}",
            )
        finally:
            await asyncio.gather(teacher.close(), *([student.close()] if student else []), return_exceptions=True)

    against_an_app(run, tmp_path)
