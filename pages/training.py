"""Train your own: the paper's recipe, live, in the background of this session only.

A layout: the data, the settings, what they would cost (`ui.training.session.run_preview`), Start / Stop,
the live panels (`ui.training.panels`) and "My model". The session state and the callbacks are in
`ui.training.session`, the job in `training.job`, the prose in `pages/content/training.py`.
"""

from __future__ import annotations

import streamlit as st

from model.data import MIN_PAIRS, langs
from model.train import TrainConfig
from model.train_settings import DEFAULTS, SettingsError, toy_profile
from pages.content import training as text
from ui import shell
from ui.classroom.board import board_button
from ui.state import init_state
from ui.training import session
from ui.training.panels import corpus_preview, live_figures, live_status, my_model_card
from ui.training.settings import settings_columns
from ui.widgets import chart
from viz import training as vt

shell.enter(__file__)  # first: re-enter through app.py if Streamlit ran this page bare

init_state()
session.init()
ss = st.session_state

# A job that ended while this session was elsewhere: adopt its model, then redraw with it in the sidebar.
if session.adopt_finished():
    st.rerun()

job = session.job()
busy = job is not None and job.active

st.title("Train your own Transformer")
st.markdown(text.INTRO)

# --- 1. Data ------------------------------------------------------------------------------------

st.header("1. Data")
direction = ss["training_direction"]
src_lang, tgt_lang = langs(direction)
toy = toy_profile(direction)
parsed, corpus_error = session.corpus()
options = ["toy"] + (["upload"] if parsed is not None else [])
if ss["training_data"] not in options:
    ss["training_data"] = "toy"
labels = {"toy": f"The toy set ({toy.n_train:,} training pairs, {toy.n_heldout:,} held out)"}
if parsed is not None:
    labels["upload"] = f"My corpus ({ss[session.CORPUS_KEY]['name']}, {len(parsed.pairs):,} pairs)"
st.radio("Train on", options, key="training_data", horizontal=True, disabled=busy, format_func=labels.get)
with st.expander("Upload your own parallel corpus", expanded=ss.get(session.CORPUS_KEY) is not None):
    st.markdown(text.corpus_help(src_lang, tgt_lang, MIN_PAIRS, session.CORPUS_MAX_MB))
    st.file_uploader(
        "Corpus file",
        type=["tsv", "csv", "txt"],
        key="training_corpus_upload",
        on_change=session.on_corpus_upload,
        max_upload_size=session.CORPUS_MAX_MB,
        disabled=busy,
    )
    if corpus_error:
        st.error(corpus_error)
    elif parsed is not None:
        corpus_preview(parsed, src_lang, tgt_lang)

# --- 2. Settings ----------------------------------------------------------------------------------

st.header("2. Settings")
st.caption(text.defaults_note(DEFAULTS, TrainConfig()))
settings_columns(busy, src_lang, text)

try:
    preview = session.run_preview()
except SettingsError as e:
    st.error(str(e))
else:
    st.markdown(text.summary(preview))
    with st.expander("The learning-rate schedule of these settings", expanded=job is None):
        st.latex(text.LR_FORMULA)
        t = preview.tcfg
        chart(
            vt.lr_figure(t.steps, t.d_model, t.warmup, t.lr_scale),
            key="training_lr_preview",
            config={"displayModeBar": False},
        )

b1, b2, _ = st.columns([1, 1, 4])
b1.button(
    "Start",
    type="primary",
    on_click=session.on_start,
    disabled=busy,
    key="training_start",
    icon=":material/play_arrow:",
)
b2.button("Stop", on_click=session.on_stop, disabled=not busy, key="training_stop", icon=":material/stop:")
if ss.get(session.ERROR_KEY):
    st.error(ss[session.ERROR_KEY])

# --- 3. Training (live) ---------------------------------------------------------------------------

st.header("3. Training")
# Polling only while this session's job is queued or running (or has just ended and is not handed over
# yet): the status every second, the figures every 3 s. Idle sessions cost the server nothing. Each
# redraw of the figures costs the browser far more than the server (a training page polling twice as
# often took most of a core in Chromium), so the intervals serve a projector laptop as well.
polling = session.waiting_for_adoption()
running = job is not None and job.state == "running"
st.fragment(live_status, run_every=(1.0 if running else 2.0) if polling else None)()
st.fragment(live_figures, run_every=3.0 if running else None)()
board_button(job.view() if job is not None else None)  # a student in a class: their finished run on its board

# --- 4. My model -----------------------------------------------------------------------------------

st.header("4. My model")
my_model_card(ss.get("my_model"))
st.file_uploader(
    "Upload a model: its .safetensors and .json files together",
    type=["safetensors", "json"],
    accept_multiple_files=True,
    key="training_model_upload",
    on_change=session.on_model_upload,
    max_upload_size=session.MODEL_MAX_MB,
    help=text.MODEL_UPLOAD_HELP,
)
if ss.get(session.MODEL_MSG_KEY):
    level, msg = ss[session.MODEL_MSG_KEY]
    getattr(st, level)(msg)
