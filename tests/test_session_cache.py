"""ui.models.session_cache: a session reuses its own copy of a cached result; sessions never share one."""

from __future__ import annotations

from apptest_util import TIMEOUT
from streamlit.testing.v1 import AppTest


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
