"""The records between the app and a training process (training/messages.py) read back as they were written."""

import pytest

from training import messages as m


@pytest.mark.parametrize(
    "msg",
    [m.StopRequest("kill", "session ended"), m.StopRequest("stop", "stopped by you"), m.StopAfterStep(), m.Usage(1, 2)],
    ids=["kill", "stop", "stop-after-step", "usage"],
)
def test_a_plain_record_reads_back_as_it_was_written(msg):
    header, blobs = m.encode(msg)
    assert m.decode(header, blobs) == msg


def test_a_kill_over_redis_stays_a_kill_with_its_reason():
    """The stop key a page writes (training/redis_queue.py) is what the worker reads: a kill was read as a plain
    stop, its reason lost, while the record's field `kind` overwrote the header's kind."""
    told = m.from_value(m.to_value(m.StopRequest("kill", "session ended")), ("stop_request",))
    assert told == m.StopRequest("kill", "session ended")


def test_a_stop_request_of_another_kind_is_refused():
    raw = m.to_value(m.StopRequest("kill", "x")).replace(b'"kill"', b'"explode"')
    with pytest.raises(m.BadMessage, match="stop or kill"):
        m.from_value(raw, ("stop_request",))
