"""The training page's runs through AppTest: a short run and what it shows on every page, stop, divergence, the
look-ahead mask switched off, the probe slider, the queue; one session never changes what another sees; a run
belongs to the browser (a reload, a second tab or another page of it reattaches).

Runs train tiny models (d_model 16, one layer, 40 steps) in the page's real background job; a test joins the job's
thread (found in the session state), reruns, and compares what the page shows with what the job recorded and with
independent computations (model.train.rate). The page before a run, its uploads and downloads, and its figure
builders are in tests/test_pages_training.py.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

import training
from model import train_settings as ts
from model.train import rate
from serving import identity
from tests.apptest_util import all_text, chart_spec, decode, figures, no_exception, run_app, run_page
from tests.services import wait_for
from tests.training_util import PROBES, TRAINS, finish, run_navigated, set_widgets, start, texts, trace, upload
from tests.training_util import no_job_left_behind as no_job_left_behind  # the autouse fixture: applies here
from tests.training_util import toy as toy
from tests.training_util import tsv as tsv
from training.local_pool import LocalPool
from ui.models import available_shipped
from ui.state import MODELS
from ui.training import session as training_session
from viz import training as vt

# --- helpers -----------------------------------------------------------------------------------------


def switch(at: AppTest, page: str) -> None:
    at.switch_page(f"pages/{page}.py")
    at.run()
    no_exception(at)


def wait_steps(job, n: int = 3, timeout: float = 60):
    wait_for(lambda: job.view().step >= n or job.done, timeout, f"{n} steps of the run (or its end)", every=0.02)


# --- a short run ----------------------------------------------------------------------------------


@TRAINS
def test_short_run_loss_falls_and_the_model_appears_on_every_page():
    at = run_navigated("training")
    job = start(at)
    assert job.view().state in ("running", "finished")
    v = finish(at, job)
    assert v.state == "finished" and v.step == 40

    # the loss curve shown is exactly the job's recorded losses, and it falls
    loss = chart_spec(at, "training_loss")
    shown = decode(trace(loss, "training loss")["y"])
    np.testing.assert_allclose(shown, v.losses, rtol=1e-12)
    np.testing.assert_array_equal(decode(trace(loss, "training loss")["x"]), np.arange(1, 41))
    assert shown[-10:].mean() < shown[:10].mean() - 0.5
    np.testing.assert_allclose(decode(trace(loss, "held-out loss")["y"]), [e.heldout_loss for e in v.evals])
    np.testing.assert_allclose(decode(trace(chart_spec(at, "training_ce"), "training loss")["y"]), v.cross_entropy)

    # the schedule in full, the current step marked
    lr = chart_spec(at, "training_lr")
    scale = ts.DEFAULTS.lr_scale
    np.testing.assert_allclose(decode(trace(lr, "learning rate")["y"]), [rate(s, 16, 10, scale) for s in range(1, 41)])
    assert decode(trace(lr, "now")["x"]).tolist() == [40]
    assert decode(trace(lr, "now")["y"])[0] == pytest.approx(v.lrs[-1])  # the rate of the last step taken

    # held-out metrics every 20 steps, and the fixed sentences
    assert [e.step for e in v.evals] == [20, 40]
    metrics = chart_spec(at, "training_metrics")
    np.testing.assert_allclose(decode(trace(metrics, "exact match %")["y"]), [100 * e.exact_match for e in v.evals])
    np.testing.assert_allclose(decode(trace(metrics, "BLEU")["y"]), [e.bleu for e in v.evals])
    samples = at.dataframe[-2].value if len(at.dataframe) >= 2 else None
    tables = [df.value for df in at.dataframe]
    samples = next(t for t in tables if "reference" in t.columns)
    assert list(samples["source"]) == [s for s, _, _ in v.evals[-1].samples]
    assert list(samples["step 40"]) == [("✓ " if h == r else "✗ ") + h for _, h, r in v.evals[-1].samples]
    probes = next(t for t in tables if "step" in t.columns and PROBES[1] in t.columns)
    assert probes["step"].tolist() == [40, 30, 20, 10, 0]

    # probe attention: the newest snapshot, layer 0, mean of the heads
    heat = next(f for f in figures(at) if f["data"][0]["type"] == "heatmap")
    snap = [s for s in v.snapshots if s.probe == 0][-1]
    assert snap.step == 40
    np.testing.assert_allclose(decode(heat["data"][0]["z"]), snap.enc_self[0].mean(axis=0), rtol=1e-6)
    assert heat["data"][0]["x"] == list(snap.src_labels)
    coref = chart_spec(at, "training_coref_timeline")
    it, animal = snap.src_labels.index("7 it"), snap.src_labels.index("1 animal")
    np.testing.assert_allclose(
        decode(trace(coref, "it → animal")["y"]),
        [s.enc_self[0].mean(0)[it, animal] for s in v.snapshots if s.probe == 0],
        rtol=1e-6,
    )

    # the model is "My model": in the sidebar radio here and on the other pages
    ss = at.session_state
    assert ss["my_model"] is job.result and ss["training_adopted"] == job.id
    assert len(ss["my_model_key"]) == 32
    shipped = [MODELS[name] for name in available_shipped()]
    assert at.radio(key="model").options == [*shipped, "My model"]
    assert "Training finished: 40 steps" in texts(at, "success")[0]
    if ss["model"] != "mine":  # the sidebar was drawn before the job was adopted: one click switches
        at.button(key="training_use_mine").click().run()
    assert ss["model"] == "mine" and at.radio(key="model").index == len(shipped)
    for page in ("overview", "decoder"):
        switch(at, page)
        assert at.session_state["model"] == "mine" and at.radio(key="model").index == len(shipped)
    assert ss["my_model"].config.d_model == 16


@TRAINS
def test_stop_keeps_the_model_so_far():
    at = run_page("training")
    job = start(at, training_steps=1000, training_eval_every=0)
    wait_steps(job, 20)
    at.run()
    no_exception(at)
    assert at.button(key="training_stop").disabled is False and at.button(key="training_start").disabled
    progress = at.get("progress")[0]  # AppTest reports the bar in percent
    shown = int(re.search(r"Step (\d+) of 1000", progress.proto.text).group(1))
    assert shown >= 20 and progress.value == int(100 * shown / 1000)
    assert re.search(r"[\d.]+ steps/s · about [\d,]+ s left", progress.proto.text), progress.proto.text
    at.button(key="training_stop").click().run()
    v = finish(at, job, 60)
    assert (v.state, v.reason) == ("stopped", "stopped by you") and shown <= v.step < 1000
    assert f"Training stopped (stopped by you) after {v.step} of 1000 steps" in texts(at, "warning")[-1]
    assert at.session_state["my_model"] is job.result
    assert job.result.meta["training"]["steps_done"] == v.step
    assert not at.button(key="training_start").disabled  # a new run can start


@TRAINS
def test_nan_stops_with_an_explanation_and_a_new_run_can_start():
    at = run_page("training")
    job = start(at, training_lr_scale=1e6, training_warmup=1, training_eval_every=0)
    v = finish(at, job)
    assert v.state == "failed"
    errors = texts(at, "error")
    assert any("Training diverged" in e and "smaller lr_scale" in e for e in errors), errors
    assert not any("clip" in e for e in errors), errors  # (no advice the page gives no control for)
    assert any("ended before its first evaluation" in i for i in texts(at, "info"))  # no promise of one to come
    assert "my_model" not in at.session_state  # a diverged model is not handed over
    assert at.button(key="training_start").disabled is False
    again = start(at, training_lr_scale=1.0, training_warmup=10, training_steps=10, training_eval_every=0)
    assert again is not job
    assert finish(at, again).state == "finished"
    assert not any("Training diverged" in e for e in texts(at, "error"))
    assert at.session_state["my_model"] is again.result


@TRAINS
def test_training_without_the_mask_is_announced():
    at = run_page("training")
    job = start(at, training_no_mask=True, training_steps=10, training_eval_every=0)
    v = finish(at, job)
    assert v.tcfg.look_ahead_mask is False
    assert any("without the look-ahead mask" in w for w in texts(at, "warning"))
    set_widgets(at, {"training_probe_kind": "dec_self"})
    fut = chart_spec(at, "training_future_timeline")
    ys = decode(trace(fut, "weight above the diagonal")["y"])
    expected = [vt.future_share(s.dec_self[0].mean(0)) for s in v.snapshots if s.probe == 0]
    np.testing.assert_allclose(ys, expected, rtol=1e-6)
    assert ys.max() > 0.05


@TRAINS
def test_the_slider_scrubs_through_training():
    at = run_page("training")
    v = finish(at, start(at, training_steps=20, training_eval_every=0, training_probe_every=5))
    slider = at.select_slider[0]
    assert slider.options == ["0", "5", "10", "15", "20"] and slider.value == 20  # following the newest
    slider.set_value(5).run()
    no_exception(at)
    assert at.select_slider[0].value == 5 and at.session_state["training_probe_follow"] is False
    at.run()  # pinned: stays at step 5 on the next poll
    assert at.select_slider[0].value == 5
    snap = next(s for s in v.snapshots if s.probe == 0 and s.step == 5)
    heat = next(f for f in figures(at) if f["data"][0]["type"] == "heatmap")
    np.testing.assert_allclose(decode(heat["data"][0]["z"]), snap.enc_self[0].mean(axis=0), rtol=1e-6)
    set_widgets(at, {"training_probe_kind": "cross", "training_probe_head": 1, "training_probe": 1})
    snap = next(s for s in v.snapshots if s.probe == 1 and s.step == 5)
    heat = next(f for f in figures(at) if f["data"][0]["type"] == "heatmap")
    np.testing.assert_allclose(decode(heat["data"][0]["z"]), snap.cross[0, 1], rtol=1e-6)
    assert heat["data"][0]["y"] == ["0 <bos>", "1 je", "2 suis", "3 étudiant"]
    at.select_slider[0].set_value(20).run()  # back at the end: follows the newest again
    assert at.session_state["training_probe_follow"] is True


@TRAINS
def test_queue_position_is_shown(monkeypatch):
    manager = LocalPool(max_running=1, poll=0.05)
    monkeypatch.setattr(training, "_SERVICE", manager)
    first, second = run_page("training"), run_page("training")
    try:
        a = start(first, training_steps=5000, training_eval_every=0)
        b = start(second, training_steps=5, training_eval_every=0)
        assert b.state == "queued"
        assert any("number 1" in i for i in texts(second, "info")), texts(second, "info")
        a.stop()
        v = finish(second, b)
        assert v.state == "finished"
        finish(first, a)
    finally:
        manager.shutdown()


# --- isolation ----------------------------------------------------------------------------------------


@TRAINS
def test_one_session_never_changes_what_another_sees(tsv):
    a = run_navigated("training")
    b = run_navigated("training")
    before = {k: b.session_state[k] for k in ("model", "iv_look_ahead", "heads_off", "sentence")}
    b_text = all_text(b)
    # A trains, uploads a corpus and a model, switches a part off, types a sentence
    job = start(a, training_steps=5, training_eval_every=0)
    finish(a, job)
    upload(a, "training_corpus_upload", ("a.tsv", tsv, "text/plain"))
    a.toggle(key="iv_look_ahead").set_value(False).run()
    a.sidebar.text_input(key="sentence").set_value("i like thinking machines").run()
    assert a.session_state["my_model"] is not None and a.session_state["iv_look_ahead"] is False
    # B, rerun: nothing of it
    b.run()
    no_exception(b)
    assert {k: b.session_state[k] for k in before} == before
    for key in ("my_model", "my_model_key", "training_job", "training_corpus"):
        assert key not in b.session_state, key
    shipped = [MODELS[name] for name in available_shipped()]
    assert b.radio(key="model").options == shipped and a.radio(key="model").options == [*shipped, "My model"]
    assert "No training yet" in all_text(b) and all_text(b) == b_text
    assert b.session_state["training_data"] == "toy"
    # the only shared thing is the manager, and it holds no finished job
    assert job not in training.service().active_jobs()


# --- a job belongs to the browser -------------------------------------------------------------------------


@TRAINS
def test_a_reload_or_second_tab_of_the_same_browser_reattaches(monkeypatch):
    """Two sessions with the same browser identity (a reload, a second tab): the second shows the first's
    running job and its figures, can stop it, and gets its model; a Start there starts nothing new."""
    same_browser = identity.Identity("local", "b-0123456789abcdef0123456789abcdef", None)
    monkeypatch.setattr(training_session, "current_identity", lambda: same_browser)
    first = run_page("training")
    job = start(first, training_steps=5000, training_eval_every=0)
    wait_steps(job, 3)
    reloaded = run_page("training")  # a new session: nothing in its session state but the browser's identity
    no_exception(reloaded)
    assert reloaded.session_state["training_job"] is job
    assert reloaded.button(key="training_stop").disabled is False
    assert reloaded.button(key="training_start").disabled
    assert re.search(r"Step \d+ of 5000", reloaded.get("progress")[0].proto.text)
    assert training.service().counts() == (1, 0)
    reloaded.button(key="training_stop").click().run()
    v = finish(reloaded, job, 60)
    assert (v.state, v.reason) == ("stopped", "stopped by you")
    assert reloaded.session_state["my_model"] is job.result
    other = identity.Identity("local", "b-ffffffffffffffffffffffffffffffff", None)
    monkeypatch.setattr(training_session, "current_identity", lambda: other)
    stranger = run_page("training")  # another browser sees nothing of it
    assert "training_job" not in stranger.session_state and "No training yet" in all_text(stranger)


@TRAINS
def test_any_page_of_the_browser_keeps_its_run(monkeypatch):
    """A reload on another page than the training page still attaches the new session to the browser's run
    (app.py asks on every page), so the run is not ended while the student reads another page."""
    browser = identity.Identity("local", "b-00000000000000000000000000000001", None)
    monkeypatch.setattr(training_session, "current_identity", lambda: browser)
    first = run_page("training")
    job = start(first, training_steps=5000, training_eval_every=0)
    wait_steps(job, 2)
    monkeypatch.setattr(
        training_session, "current_identity", lambda: identity.Identity("local", browser.browser, "session-on-overview")
    )
    at = run_app("overview")
    no_exception(at)
    assert at.session_state["training_job"] is job and "session-on-overview" in job.session_ids()
    first.button(key="training_stop").click().run()
    assert finish(first, job, 60).state == "stopped"


@TRAINS
def test_a_reload_on_another_page_after_the_run_keeps_my_model(monkeypatch):
    """The run ended while the student read another page; a reload there (a new session) gets the trained model as
    "My model" in the sidebar, with a toast saying so, without a visit to the training page first; the page goes on
    showing the model chosen (a teacher's choice would move the class)."""
    browser = identity.Identity("local", "b-00000000000000000000000000000002", None)
    monkeypatch.setattr(training_session, "current_identity", lambda: browser)
    first = run_page("training")
    job = start(first, training_steps=5000, training_eval_every=0)
    wait_steps(job, 2)
    first.button(key="training_stop").click().run()
    assert finish(first, job, 60).state == "stopped"
    monkeypatch.setattr(
        training_session, "current_identity", lambda: identity.Identity("local", browser.browser, "reloaded-session")
    )
    at = run_app()  # the reload, on the overview
    no_exception(at)
    assert at.session_state["my_model"] is job.result and at.session_state["model"] == "base"
    assert [t.value for t in at.toast] == [training_session.ADOPTED_ELSEWHERE]
    switch(at, "self_attention")  # once: the next page says nothing more, and offers the model
    assert not at.toast and "My model" in at.sidebar.radio(key="model").options
    at.sidebar.radio(key="model").set_value("mine").run()
    no_exception(at)
    assert at.session_state["model"] == "mine"
