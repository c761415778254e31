"""The two changes tests/conftest.py makes to Streamlit's AppTest for speed keep its behaviour: a run is waited for
to its end, a run past its timeout is stopped with Streamlit's error, and the installed components are scanned once
per test process, not once per AppTest."""

from __future__ import annotations

import time

import pytest
from streamlit.components.v2 import manifest_scanner
from streamlit.testing.v1 import AppTest

SLOW = """
import time
import streamlit as st
time.sleep(0.3)
st.write("after the wait")
"""

ENDLESS = """
import time
import streamlit as st
for _ in range(400):
    time.sleep(0.05)
    st.empty()  # (a Streamlit call: where a stopped run ends)
"""


def test_a_run_is_waited_for_to_its_end():
    at = AppTest.from_string(SLOW, default_timeout=10)
    at.run()
    assert not at.exception and [m.value for m in at.markdown] == ["after the wait"]


def test_a_run_past_its_timeout_is_stopped_with_streamlits_error():
    at = AppTest.from_string(ENDLESS, default_timeout=0.5)
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match=r"AppTest script run timed out after 0\.5\(s\)"):
        at.run()
    assert time.monotonic() - t0 < 10  # stopped, not left to run its 20 s


def test_installed_components_are_scanned_once_per_process():
    for _ in range(3):
        AppTest.from_string("import streamlit as st\nst.write(1)").run()
    assert manifest_scanner.scan_component_manifests.cache_info().misses == 1
