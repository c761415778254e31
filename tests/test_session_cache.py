"""ui.session_cache.session_cache: a session reuses its own copy of a cached result; sessions never share one."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from tests.apptest_util import TIMEOUT


def script():
    import streamlit as st

    from ui.models import analysis

    a = analysis()
    st.session_state.setdefault("ids", []).append(id(a))
    w = a.trace["enc.0.self_attn.weights"]
    if st.session_state.get("vandal"):
        w.fill_(7.0)  # a page that (wrongly) wrote into a result would only spoil its own session
    st.write(f"max {float(w.max()):.3f}")


def session(**state) -> AppTest:
    at = AppTest.from_function(script, default_timeout=TIMEOUT)
    for k, v in state.items():
        at.session_state[k] = v
    return at.run()


def shown(at: AppTest) -> float:
    return float(at.markdown[-1].value.split()[-1])


def test_a_rerun_reuses_the_sessions_own_copy():
    at = session()
    at.run()
    ids = at.session_state["ids"]
    assert len(ids) == 2 and ids[0] == ids[1]  # no second copy of the server-wide entry


def test_sessions_never_share_a_result():
    spoiler = session(vandal=True)
    assert shown(spoiler) == 7.0
    other = session()  # same sentence, same model: the same server-wide entry
    assert 0 < shown(other) <= 1.0  # attention weights, untouched by the other session
    spoiler.run()
    assert shown(spoiler) == 7.0  # its own (spoiled) copy, still its own
    assert other.session_state["ids"][0] != spoiler.session_state["ids"][0]


def test_a_sessions_copy_shares_no_tensor_and_nothing_mutable():
    import copy
    from dataclasses import dataclass

    import torch

    from model.decoding import Candidate
    from ui.session_cache import fresh_copy

    @dataclass
    class Box:  # mutable: copied
        t: torch.Tensor
        items: list

    @dataclass(frozen=True)
    class Frozen:  # frozen, but holds a tensor: copied too
        name: str
        t: torch.Tensor

    shared_t = torch.arange(6.0).reshape(2, 3)
    numbers = (Candidate(3, 0.5), Candidate(4, 0.25))  # immutable all the way down: shared, not copied
    value = {
        "box": Box(shared_t, [1, 2, numbers]),
        "frozen": Frozen("f", shared_t[0].clone()),
        "pair": (shared_t, "x"),
        "again": shared_t,
        "odd": {1, 2},
    }
    c = fresh_copy(value)

    tensors = [c["box"].t, c["frozen"].t, c["pair"][0], c["again"]]
    originals = [shared_t, value["frozen"].t, shared_t, shared_t]
    for new, old in zip(tensors, originals, strict=True):
        assert torch.equal(new, old) and new.untyped_storage().data_ptr() != old.untyped_storage().data_ptr()
    assert c["pair"][0] is c["again"] is c["box"].t  # one tensor stays one tensor (as deepcopy keeps it)
    assert c["box"] is not value["box"] and c["box"].items is not value["box"].items
    assert c["box"].items[2] is numbers  # nothing in it can change: no copy
    assert c["odd"] == {1, 2} and c["odd"] is not value["odd"]
    c["box"].t.fill_(-1.0)
    c["box"].items.append(9)
    assert shared_t[0, 1] == 1.0 and value["box"].items == [1, 2, numbers]
    assert copy.deepcopy(value)["pair"][1] == c["pair"][1] == "x"


def test_a_traces_tensors_are_cloned_as_the_session_reads_them():
    import torch

    from model.trace import Trace
    from ui.session_cache import ClonedOnRead, fresh_copy

    cached = Trace(record=True)
    cached("a", torch.ones(2))
    cached("b", torch.zeros(3))
    c = fresh_copy({"trace": cached})["trace"]
    assert isinstance(c, Trace) and c is not cached and isinstance(c.tensors, ClonedOnRead)
    assert list(c.tensors) == ["a", "b"] and "a" in c.tensors and "z" not in c.tensors and len(c.tensors) == 2
    assert c.tensors._own == {}  # nothing cloned until read
    a = c["a"]
    assert torch.equal(a, cached["a"]) and a.untyped_storage().data_ptr() != cached["a"].untyped_storage().data_ptr()
    assert c["a"] is a and list(c.tensors._own) == ["a"]  # cloned once, then the session's own
    a.fill_(5.0)
    assert cached["a"].tolist() == [1.0, 1.0] and c["a"].tolist() == [5.0, 5.0]
    assert [t.tolist() for t in c.tensors.values()] == [[5.0, 5.0], [0.0, 0.0, 0.0]]
    try:
        c["z"]
        raise AssertionError("a missing name must raise KeyError")
    except KeyError:
        pass


def once_script():
    import streamlit as st

    from ui.widgets import once

    ss = st.session_state
    n = ss.get("n", 3)

    def draw():
        ss["calls"] = ss.get("calls", 0) + 1
        st.table({"n": [n], "square": [n * n]})

    once("test.square", (n, ss.get("salt", "")), draw)


def test_once_draws_a_content_once_and_replays_it():
    import uuid

    salt = uuid.uuid4().hex  # this test's own cache entries (the cache is the process's)
    at = AppTest.from_function(once_script, default_timeout=TIMEOUT)
    at.session_state["salt"] = salt
    at.run()
    assert at.session_state["calls"] == 1 and at.table[0].value["square"].tolist() == [9]
    at.run()  # the same content: replayed, not drawn
    assert at.session_state["calls"] == 1 and at.table[0].value["square"].tolist() == [9]
    at.session_state["n"] = 4
    at.run()  # another content: drawn
    assert at.session_state["calls"] == 2 and at.table[0].value["square"].tolist() == [16]
    other = AppTest.from_function(once_script, default_timeout=TIMEOUT)
    other.session_state["salt"] = salt
    other.run()  # another session, a content this process has drawn: replayed
    assert "calls" not in other.session_state and other.table[0].value["square"].tolist() == [9]


def nested_script():
    import streamlit as st

    from ui.widgets import heatmap_chart, once

    ss = st.session_state
    salt = ss["salt"]

    def piece(name: str, z: float) -> None:  # a cached heatmap and a once caption
        heatmap_chart([[z, z]], ["a", "b"], ["r"], "weights", key=name, alt=name)
        once("test.inner", (salt, name), lambda: st.caption(name))

    if ss["only_second"]:
        piece("second", 2.0)  # (a first run: the second piece's heatmap and caption are now in their caches)
    else:
        once("test.outer", (salt,), lambda: (piece("first", 1.0), piece("second", 2.0)))


def test_a_section_drawn_once_replays_its_cached_pieces_in_order():
    """A once section holding cached pieces (a heatmap, an inner once), recorded while one of them was already
    cached, then replayed: every piece in its place."""
    import uuid

    at = AppTest.from_function(nested_script, default_timeout=TIMEOUT)
    at.session_state["salt"], at.session_state["only_second"] = uuid.uuid4().hex, True
    at.run()
    at.session_state["only_second"] = False
    for _ in range(2):  # recorded, then replayed
        at.run()
        assert not at.exception
        assert [c.value for c in at.caption] == ["first", "second"]
        assert [("first" in str(c.proto), "second" in str(c.proto)) for c in at.get("plotly_chart")] == [
            (True, False),
            (False, True),
        ]


def test_the_server_collects_young_garbage_in_batches():
    """ui/startup.py raises the collector's first threshold (Python's 700 made a class's redraws collect some 50
    times a second and brought 40-50 ms full collections every few changes): the process runs with it."""
    import gc

    from ui.startup import GC_THRESHOLDS

    assert GC_THRESHOLDS[0] >= 10_000
    assert gc.get_threshold() == GC_THRESHOLDS
    assert gc.get_freeze_count() > 100_000  # the start-up's libraries stay out of every collection


def test_the_server_warms_up_the_first_visitors_page(monkeypatch):
    """app.py's warm-up thread (ui/models.py warm_up) loads the shipped model and analyses the default sentence into
    the server-wide cache: a new session's first page then analyses nothing (and gets its own copy)."""
    from model import pipeline
    from ui import models

    models._analyse.server_wide.clear()
    models.warm_up()
    calls = []
    analyse = pipeline.analyse
    monkeypatch.setattr(pipeline, "analyse", lambda *a, **kw: calls.append(a) or analyse(*a, **kw))
    at = session()
    assert not at.exception and shown(at) > 0 and calls == []  # the default sentence, as the warm-up analysed it
    at = session(sentence="i am a student")
    assert not at.exception and len(calls) == 1  # (what the warm-up did not see is analysed as before)


def _one_word_after_its_first_session_changed_its_trace() -> None:
    """A session computes one word's steps (kept server-wide), then writes into its own trace; a second lookup (any
    session's) still has the model's numbers."""
    import streamlit as st

    from model import checkpoint, pipeline
    from model.trace import Interventions
    from ui import models

    b = checkpoint.load(checkpoint.SHIPPED)
    text = "the animal didn't cross the street because it was too tired"
    a = pipeline.analyse(b, pipeline.prepare(b, text), Interventions())
    key = models.shipped_key("base", b)
    models._one_word.server_wide.clear()
    steps, _ = models._one_word.server_wide(key, text, a.interventions, 0, 1, 8, a, b.model)
    before = steps.weights.clone()
    a.trace.tensors["enc.0.self_attn.weights"].zero_()  # (the first session's own tensors, changed in place)
    again, _ = models._one_word.server_wide(key, text, a.interventions, 0, 1, 8, a, b.model)
    st.session_state["same"] = bool((again.weights == before).all()) and float(before.sum()) > 0.99


def test_a_result_kept_server_wide_shares_no_tensor_with_the_session_that_computed_it():
    """`ui.models.one_word` reads one word's steps from the session's trace (views of its tensors): what the process
    keeps for every other session is its own copy, so a session writing into its trace changes nobody else's page."""
    at = AppTest.from_function(_one_word_after_its_first_session_changed_its_trace, default_timeout=TIMEOUT).run()
    assert not at.exception and at.session_state["same"] is True
