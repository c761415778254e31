"""The load tests' websocket client (tools/ws_client.py) reads a run chain as Streamlit's frontend does, including the
race where Streamlit never sends a run's end: messages written here as the server sends them, no server."""

from __future__ import annotations

import asyncio

from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.proto.WidgetStates_pb2 import WidgetState

from tools.ws_client import StreamlitSession


def started(fragment: str = "") -> ForwardMsg:
    msg = ForwardMsg()
    msg.new_session.page_script_hash = "page"
    if fragment:
        msg.metadata.run.fragment_ids.append(fragment)
    return msg


def finished(status: int) -> ForwardMsg:
    msg = ForwardMsg()
    msg.script_finished = status  # type: ignore[assignment]
    return msg


async def chain(*messages: ForwardMsg) -> bool:
    """Whether a rerun waiting on this session is answered by `messages` (in this order)."""
    s = StreamlitSession("http://127.0.0.1:1", timeout=1)
    s._waiter, s._started = asyncio.get_running_loop().create_future(), False
    for m in messages:
        s._handle(m)
    return s._waiter.done()


def test_a_run_chain_ends_at_a_full_run_s_end_not_at_an_early_stop_or_a_fragment_s():
    done = ForwardMsg.FINISHED_SUCCESSFULLY
    early = ForwardMsg.FINISHED_EARLY_FOR_RERUN
    fragment = ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY
    assert asyncio.run(chain(started(), finished(done)))
    assert not asyncio.run(chain(started(), finished(early)))
    assert asyncio.run(chain(started(), finished(early), started(), finished(done)))
    assert not asyncio.run(chain(started("f"), finished(fragment)))  # a fragment's run is not the rerun's answer
    assert asyncio.run(chain(started(), finished(done), started("f")))  # answered before the fragment began
    assert not asyncio.run(chain(started(), started("f")))


def test_a_run_whose_end_streamlit_dropped_is_ended_by_the_run_that_replaced_it():
    """Streamlit (1.67) drops a finished runner's last events when a request reaches the session between that run's
    end and its runner's shutdown: a full run's new_session, then a fragment's new_session and its end, and no end of
    the full run. A rerun waiting for the full run is answered at the fragment's end (it waited 120 s before)."""
    fragment = ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY
    assert asyncio.run(chain(started(), started("f"), finished(fragment)))


def test_a_fragment_s_request_carries_no_pending_click():
    """A click's trigger is true for the one request that carries it: the class's event crossing a click (a
    fragment's rerun) must not send the click again, as the frontend would not."""
    s = StreamlitSession("http://127.0.0.1:1")
    s.widgets = {
        "button": WidgetState(id="button", trigger_value=True),
        "box": WidgetState(id="box", string_value="the cat"),
        "sync": WidgetState(id="sync", json_trigger_value="[]"),
    }
    assert [w.id for w in s._values()] == ["box"]


def test_after_a_dropped_end_the_page_is_redrawn_by_a_full_run_without_the_click():
    """The dropped run may also have lost its last elements (a button the click made appear): the client asks for
    one full run more, with every widget's value but not the click's trigger, and answers the click after it."""
    from streamlit.proto.BackMsg_pb2 import BackMsg

    s = StreamlitSession("http://127.0.0.1:1", timeout=5)
    s.elements[(0, 0)] = ("page", button_element("id-class_lock_vote"))
    sent: list[BackMsg] = []
    answers = [
        [started(), started("f"), finished(ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY)],
        [started(), finished(ForwardMsg.FINISHED_SUCCESSFULLY)],
    ]

    class Socket:
        async def send(self, raw: bytes) -> None:
            sent.append(BackMsg.FromString(raw))
            for m in answers[len(sent) - 1]:
                asyncio.get_running_loop().call_soon(s._handle, m)

    s._ws = Socket()
    asyncio.run(s.click("class_lock_vote"))
    assert len(sent) == 2
    triggers = [[w.id for w in m.rerun_script.widget_states.widgets if w.trigger_value] for m in sent]
    assert triggers == [["id-class_lock_vote"], []]


def button_element(widget_id: str):
    from streamlit.proto.Element_pb2 import Element

    el = Element()
    el.button.id = widget_id
    el.button.label = "Lock"
    return el
