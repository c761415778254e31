"""A tiny Streamlit script for tests/test_replicas.py, run by several processes behind the proxy: says
which process ran it, the client address the app sees, and uses the class store as a page would."""

import os

import streamlit as st

from classroom import get_store

store = get_store()
st.text(f"replica={os.environ.get('GLASS_REPLICA')}")
st.text(f"ip={st.context.ip_address}")
st.text(f"store={type(store).__name__}")
if st.query_params.get("create"):
    code, _ = store.create({"page": "overview", "sentence": "i am a student"})
    st.text(f"code={code}")
if st.query_params.get("code"):
    snap = store.join(st.query_params["code"], st.context.ip_address or "local", "probe-student-1")
    st.text(f"sentence={snap.state['sentence']}")
