"""The class board and the teacher's training run, followed by the class (ui/classroom/plans.py holds the
plans, pacing and snapshots; the data and its checks are classroom/plans.py's).

- The class board: a student puts their finished run on it from the training page (`board_button`); the
  classroom page shows every run side by side (`board`).
- The teacher's run: while the teacher trains, `share_run` (the training page's status panel) hands it to the
  class, at most every SHARE_SECONDS, then its result and its model; a following student's page shows it
  above the page (`class_run_panel`), and one click makes the teacher's model their own (`use_teacher_model`).

Session-state keys:

=====================  ==========================================================================
key                    meaning
=====================  ==========================================================================
_class_run             the teacher's training run as the class follows it (classroom.plans.check_class_run)
_class_run_shared      (when, state, step) the teacher's session last shared its run
_class_model_used      (class code, version) of the teacher's model this student made their own
_class_model_job       the training job whose model this teacher shared with the class
=====================  ==========================================================================
"""

from __future__ import annotations

import hashlib
import math
import threading
import time
import weakref

import numpy as np
import streamlit as st

import classroom.plans
from classroom import ClassStoreError
from model.checkpoint import Bundle
from ui.classroom import session as cls
from ui.classroom import teacher
from ui.classroom.plans import led, ss
from ui.models import ADOPTED_KEY, use_model
from ui.widgets import chart, figure, md
from viz.classroom import board_figure, board_notice, board_table

RUN, SHARED, USED, SHARED_JOB = "_class_run", "_class_run_shared", "_class_model_used", "_class_model_job"
RUN_HIDDEN = "_class_run_hidden"  # the teacher's finished run this student put away: (class, state, step, model)
SHARE_SECONDS = 3.0  # the teacher's running job reaches the class at most this often (each share reruns its pages)


def read_run() -> None:
    """Every run of a class member: the teacher's shared run, into the session."""
    if cls.role() is None:
        ss().pop(RUN, None)
        return
    try:
        ss()[RUN] = cls.store().class_run(cls.code())
    except ClassStoreError:
        pass  # the store is away: the last one read (the page's stream says so)


# -- the class board ------------------------------------------------------------------------------------------------
def run_for_board(view) -> dict | None:
    """A finished training run (`training.JobView`) as the board keeps it, or None when it has nothing to show."""
    if view is None or view.state != "finished" or not view.losses:
        return None
    return _run_of(view)


def _run_of(view) -> dict:
    """A run's settings, at most MAX_CURVE points of its loss (finite ones: a diverged run's NaN is left out),
    its last held-out exact match and one held-out translation."""
    curve = [(int(x), min(float(y), 1e6)) for x, y in zip(view.steps, view.losses, strict=False) if math.isfinite(y)]
    n = len(curve)
    kept = min(classroom.plans.MAX_CURVE, n)
    picks = sorted({round(i * (n - 1) / max(1, kept - 1)) for i in range(kept)})
    last = view.evals[-1] if view.evals else None
    source, translation = (last.samples[0][0], last.samples[0][1]) if last is not None and last.samples else ("", "")
    plain = {"<": "‹", ">": "›"}  # special tokens (<unk>) as the lesson draws them: the board takes no < or >
    t = view.tcfg
    return {
        "settings": {k: getattr(t, k) for k in classroom.plans.RUN_SETTINGS if hasattr(t, k)},
        "steps": [curve[i][0] for i in picks],
        "losses": [curve[i][1] for i in picks],
        "exact_match": float(last.exact_match) if last is not None else None,
        "source": source.translate(str.maketrans(plain))[: classroom.plans.MAX_RUN_TEXT],
        "translation": translation.translate(str.maketrans(plain))[: classroom.plans.MAX_RUN_TEXT],
    }


def post_run(run: dict) -> None:
    """Callback (student): their finished run onto the class board."""
    try:
        n = cls.store().post_run(cls.code(), ss()[cls.STUDENT], cls.client_id(), run)
        cls.notify(f"Your run is on the class board, as student {n}.")
    except ClassStoreError as e:
        cls.notify(f"Your run was not put on the board: {e}")


def board_button(view) -> None:
    """On the training page of a student in a class: put the finished run on the class board."""
    if not cls.is_student():
        return
    run = run_for_board(view)
    if run is None:
        st.caption(":material/leaderboard: When your run has finished, you can put it on your class's board.")
        return
    st.button(
        "Put my run on the class board", key="board_post", icon=":material/leaderboard:", on_click=post_run, args=(run,)
    )


def board() -> None:
    """The class board on the classroom page: every posted run side by side (a table and the loss curves)."""
    try:
        runs = cls.store().board(cls.code())
    except ClassStoreError as e:
        st.caption(str(e))
        return
    st.subheader(f"Class board: students' own runs ({len(runs)})")
    if not runs:
        st.caption(
            "A student who trained a model on “Train your own” puts it here with “Put my run on the class "
            "board”: its settings, its loss, how many held-out sentences it translates exactly, and one "
            "translation, side by side with the others."
        )
        return
    st.markdown(md(board_notice(runs)))
    chart(board_figure(runs), key="class_board_figure")
    st.dataframe(board_table(runs))


# -- the teacher's run, followed by the class ------------------------------------------------------------------------
def share_run(view, job=None) -> None:
    """In the teacher's training panel (every poll): the run reaches the class, at most every SHARE_SECONDS while
    it runs, and at once when it ends, with its model (`job.result`) for the class to explore."""
    if not cls.is_teacher() or view is None or not view.losses or view.state not in classroom.plans.RUN_STATES:
        return
    last, now = ss().get(SHARED), time.monotonic()
    if last is not None and last[1] == view.state and (last[2] == view.step or now - last[0] < SHARE_SECONDS):
        return
    version = 0
    if view.state != "running" and getattr(job, "result", None) is not None:
        from model.checkpoint import to_bytes

        version = teacher.teacher_call(cls.store().set_class_model, *to_bytes(job.result)) or 0
        ss()[SHARED_JOB] = job.id if version else None
    run = {
        **_run_of(view),
        "state": view.state,
        "step": int(view.step),
        "total": int(view.tcfg.steps),
        "model": version,
        "attention": _attention_of(view),
    }
    if teacher.teacher_call(lambda c, k: cls.store().set_class_run(c, k, run)) is not None:
        ss()[SHARED] = (now, view.state, view.step)


def _attention_of(view) -> dict | None:
    """The run's latest attention snapshot of its first probe sentence, as the class sees it: the last decoder
    layer's encoder-decoder attention, the mean of its heads (the alignment forming), rounded to 3 decimals."""
    snaps = [s for s in view.snapshots if s.probe == 0]
    if not snaps:
        return None
    snap = snaps[-1]
    queries, keys = snap.labels("cross")
    if max(len(queries), len(keys)) > classroom.plans.MAX_ATTENTION_TOKENS:
        return None
    plain = str.maketrans({"<": "‹", ">": "›"})  # special tokens as the lesson draws them: the store takes no < >
    weights = snap.cross[-1].mean(axis=0)  # [L, H, Tt, Ts] -> the last layer's mean over heads: [Tt, Ts]
    title = f"Encoder-decoder attention on “{view.probes[0]}”"[: classroom.plans.MAX_RUN_TEXT].translate(plain)
    return {
        "step": int(snap.step),
        "title": title,
        "queries": [t.translate(plain) for t in queries],
        "keys": [t.translate(plain) for t in keys],
        "weights": [[round(min(1.0, max(0.0, float(w))), 3) for w in row] for row in weights],
    }


def attention_panel(run: dict) -> None:
    """The followed run's latest attention snapshot, as a heatmap."""
    att = run.get("attention")
    if not att:
        return
    figure(
        np.array(att["weights"]),
        att["keys"],
        att["queries"],
        "weights",
        key="class_run_attention",
        title=f"{att['title']}: last decoder layer, mean of its heads, step {att['step']}",
        x_title="English word (key)",
        y_title="French word (query)",
        numbers=False,
    )


# A class's shared model, loaded once per process and version: every student who explores it holds this one copy
# (read-only, as the shipped models are shared), and it goes when the last of them lets go of it. Each student's own
# copy cost their app process 44-56 MB (a 16 MB model): 1.3-1.7 GB for a class of 30.
_LOADED: weakref.WeakValueDictionary = weakref.WeakValueDictionary()  # (code, version) -> Bundle
_KEYS: dict[tuple[str, int], str] = {}  # (code, version) -> the key naming its weights in the caches
_LOADING = threading.Lock()


def shared_class_model(code: str, version: int | None) -> tuple[Bundle, int, str]:
    """Class `code`'s shared model in this process (version `version`, when known): (bundle, version, cache key). The
    first student to ask loads it from the store (`model.checkpoint.from_bytes` checks it as any upload); the others
    get the same bundle."""
    from model.checkpoint import CheckpointError, from_bytes

    bundle = _LOADED.get((code, version)) if version else None
    if bundle is not None:
        return bundle, version, _KEYS[(code, version)]
    with _LOADING:  # (thirty students pressing the button at once load it once)
        bundle = _LOADED.get((code, version)) if version else None
        if bundle is None:
            got = cls.store().class_model(code)
            if got is None:
                raise CheckpointError("Your teacher has not shared a model.")
            version, weights, meta = got
            bundle = _LOADED.get((code, version))
            if bundle is None:
                bundle = from_bytes(weights, meta, name="my teacher's model")
                for gone in [k for k in _KEYS if k not in _LOADED] if len(_KEYS) > 100 else ():
                    del _KEYS[gone]
                _KEYS[(code, version)] = "shared-" + hashlib.sha256(weights).hexdigest()[:32]
                _LOADED[(code, version)] = bundle
        return bundle, version, _KEYS[(code, version)]


def use_teacher_model() -> None:
    """Callback (student): the teacher's shared model becomes this session's own ("My model"), on every page."""
    from model.checkpoint import CheckpointError

    try:
        bundle, version, key = shared_class_model(cls.code(), (ss().get(RUN) or {}).get("model"))
        use_model(ss(), bundle, key)
        ss()[USED] = (cls.code(), version)
        cls.notify("Your teacher's model is now “My model” in your sidebar: every page shows it.")
    except (ClassStoreError, CheckpointError) as e:
        cls.notify(f"Your teacher's model could not be loaded: {e}")


def class_run_panel() -> None:
    """Above a following student's page: the teacher's training run, live (its loss curve, its step), then its
    result."""
    run = ss().get(RUN)
    if run is None or not led():  # (following: a student)
        return
    loss = run["losses"][-1] if run["losses"] else None
    line = f"training loss {loss:.3f}" if loss is not None else "starting"
    if run["exact_match"] is not None:
        line += f" · held-out exact match {run['exact_match']:.0%}"
    if run["translation"]:
        line += f" · “{md(run['source'])}” → “{md(run['translation'])}”"
    figure = board_figure([{**run, "name": "teacher's run"}], title="Your teacher's run: training loss")
    if run["state"] == "running":
        with st.expander(
            f"Your teacher's training run: step {run['step']} of {run['total']}",
            expanded=True,
            icon=":material/model_training:",
        ):
            st.caption(line)
            chart(figure, key="class_run_figure")
            attention_panel(run)
        return
    which = (cls.code(), run["state"], run["step"], run["model"])
    if ss().get(RUN_HIDDEN) == which:  # put away by this student
        return
    with st.container(border=True, key="class_run_done"):
        st.markdown(
            f":material/model_training: **Your teacher's training run {run['state']} after {run['step']} "
            f"steps** · {line}"
        )
        st.button(
            "Put this away",
            key="class_run_hide",
            icon=":material/close:",
            on_click=lambda: ss().__setitem__(RUN_HIDDEN, which),
        )
        if run["model"] and ss().get(USED) == (cls.code(), run["model"]) and ss().get("model") == "mine":
            st.caption("You explore this model: it is “My model” in your sidebar, on every page.")
        elif run["model"]:
            st.button(
                "Explore this model on every page (it becomes “My model”)",
                key="class_run_use",
                icon=":material/download:",
                on_click=use_teacher_model,
            )
        with st.expander("Its training loss and its attention"):
            chart(figure, key="class_run_figure")
            attention_panel(run)


def own_model_note() -> str | None:
    """A student's note when the teacher shows their own model and this student explores it too (else None)."""
    run = ss().get(RUN)
    if run and run["model"] and ss().get(USED) == (cls.code(), run["model"]) and ss().get("model") == "mine":
        return "Your teacher shows the model they trained, and so do you: it is “My model” in your sidebar."
    if run and run["model"]:
        return (
            "Your teacher shows the model they trained: you see the shipped model until you choose “Explore "
            "this model on every page” above the page."
        )
    return None


def shared_model_notice() -> str | None:
    """The teacher's notice when the model they show is the one their finished run shared with the class."""
    if ss().get(SHARED_JOB) is not None and ss().get(ADOPTED_KEY) == ss().get(SHARED_JOB):
        return (
            "Your class sees the shipped model until each student chooses “Explore this model on every page”: "
            "your finished run's model is shared with the class, and your questions are answered by it."
        )
    return None
