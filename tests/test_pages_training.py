"""The training page through AppTest, and its figure builders (viz/training.py).

Runs train tiny models (d_model 16, one layer, 40 steps) in the page's real background job; a test
joins the job's thread (found in the session state), reruns, and compares what the page shows with
what the job recorded and with independent computations (model.train.rate, the checkpoint format).
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from apptest_util import ROOT, all_text, chart_spec, decode, figures, no_exception, run_app, run_page
from streamlit.testing.v1 import AppTest

import training
from model import checkpoint
from model import train_settings as ts
from model.checkpoint import from_bytes, to_bytes
from model.data import Pair, build_vocabs, load_dataset, split_pairs
from model.probes import PROBES as DEFAULT_PROBES
from model.train import EvalEvent, rate
from serving import identity
from tests.services import wait_for
from training.local_pool import LocalPool
from ui.models import available_shipped
from ui.state import MODELS
from ui.training import session as training_session
from viz import training as vt

TRAINS = pytest.mark.processes  # the test starts a training run: its own process (tests/conftest.py, tiers)
TINY = {
    "training_d_model": 16,
    "training_n_heads": 2,
    "training_n_layers": 1,
    "training_d_ff": 32,
    "training_batch_size": 16,
    "training_steps": 40,
    "training_warmup": 10,
    "training_eval_every": 20,
    "training_probe_every": 10,
}
PROBES = ["the animal didn't cross the street because it was too tired", "i am a student"]


# --- helpers -----------------------------------------------------------------------------------------


def trace(fig: dict, name: str) -> dict:
    for t in fig["data"]:
        if t.get("name") == name:
            return t
    raise AssertionError(f"no trace {name!r} in {[t.get('name') for t in fig['data']]}")


def set_widgets(at, values: dict) -> None:
    for key, value in values.items():
        for kind in ("number_input", "slider", "toggle", "selectbox", "text_area", "radio"):
            try:
                widget = getattr(at, kind)(key=key)
            except KeyError:
                continue
            widget.set_value(value)
            break
        else:
            raise AssertionError(f"no widget {key!r}")
    at.run()


def start(at, **settings):
    """Set the settings by their widgets, press Start, and return this session's job."""
    set_widgets(at, {**TINY, **settings})
    at.button(key="training_start").click().run()
    no_exception(at)
    assert not at.error, [e.value for e in at.error]
    return at.session_state["training_job"]


def finish(at, job, timeout: float = 180):
    """Join the job's thread, then rerun the page (AppTest never fires the polling fragment)."""
    assert job.join(timeout), "the training job did not end in time"
    at.run()
    no_exception(at)
    return job.view()


def run_navigated(page: str) -> AppTest:
    """The whole app (app.py, its sidebar, then pages/<page>.py), as a student sees it."""
    at = run_app(page)
    assert at.sidebar.radio, "no sidebar: the page ran without app.py"
    return at


def switch(at: AppTest, page: str) -> None:
    at.switch_page(f"pages/{page}.py")
    at.run()
    no_exception(at)


def wait_steps(job, n: int = 3, timeout: float = 60):
    wait_for(lambda: job.view().step >= n or job.done, timeout, f"{n} steps of the run (or its end)", every=0.02)


def upload(at, key: str, files) -> None:
    at.file_uploader(key=key).set_value(files)
    at.run()
    no_exception(at)


def texts(at, kind: str) -> list[str]:
    return [str(e.value) for e in at.get(kind)]


@pytest.fixture(autouse=True)
def no_job_left_behind(monkeypatch):
    """A fresh job manager per test (every AppTest session is the client "local": the per-client start
    rate would otherwise count the whole module's starts); a failing test must not leave a training
    thread running (torch aborts at interpreter exit)."""
    manager = LocalPool(starts_per_minute=1000, jobs_per_client=10)
    monkeypatch.setattr(training, "_SERVICE", manager)
    yield
    for job in manager.active_jobs():
        job.stop("test ended")
        job.join(60)
    manager.shutdown()


@pytest.fixture(scope="module")
def toy():
    return load_dataset()


@pytest.fixture(scope="module")
def tsv(toy) -> bytes:
    pairs = toy["train"][:60]
    return "".join(f"{p.src}\t{p.tgt}\n" for p in pairs).encode("utf-8")


@pytest.fixture(scope="module")
def shipped_files() -> tuple[bytes, bytes]:
    stem = checkpoint.SHIPPED
    return stem.with_suffix(".safetensors").read_bytes(), stem.with_suffix(".json").read_bytes()


# --- the page before training -----------------------------------------------------------------------


def test_page_alone_shows_defaults_and_their_real_sizes():
    at = run_page("training")
    no_exception(at)
    assert at.title[0].value == "Train your own Transformer"
    d = ts.DEFAULTS
    assert at.number_input(key="training_d_model").value == d.d_model
    assert at.number_input(key="training_steps").value == d.steps
    assert at.selectbox(key="training_direction").value == "en-fr"
    assert not at.toggle(key="training_no_mask").value
    text = all_text(at)
    prof = ts.toy_profile("en-fr")
    from model.train import Trainer

    real = sum(p.numel() for p in Trainer(d, data=ts.toy_data("en-fr")).model.parameters())
    assert f"{real:,} parameters" in text
    assert f"peak learning rate {rate(d.warmup, d.d_model, d.warmup, d.lr_scale):.2e} at step {d.warmup}" in text
    mem = ts.estimate_memory(d, prof)
    assert f"{mem.total / 1e6:,.0f} MB for this run" in text
    assert f"about {ts.worst_case().total / 1e6:,.0f} MB" in text
    assert f"at most {training.service().max_running} model(s) at once" in text
    assert "No training yet" in text
    assert "measured on one computer" in text and "your run of the same recipe can end a few points apart" in text
    lr = chart_spec(at, "training_lr_preview")
    np.testing.assert_allclose(
        decode(trace(lr, "learning rate")["y"]),
        [rate(s, d.d_model, d.warmup, d.lr_scale) for s in range(1, d.steps + 1)],
    )
    assert at.text_area(key="training_probes").value == "\n".join(PROBES)


def test_a_warm_up_longer_than_the_run_says_the_rate_never_peaks():
    """Warm-up 4,000 steps in a 50-step run: the summary gives the rate the run ends at (the highest it reaches),
    below the schedule's peak, and the chart's curve ends there too."""
    at = run_page("training")
    set_widgets(at, {"training_steps": 50, "training_warmup": 4000})
    d = ts.DEFAULTS
    end, peak = rate(50, d.d_model, 4000, d.lr_scale), rate(4000, d.d_model, 4000, d.lr_scale)
    text = all_text(at)
    assert f"warm-up (4,000 steps) is longer than the run (50 steps), so it ends at {end:.2e}" in text
    assert f"below the schedule's peak {peak:.2e}" in text and "at step 4000" not in text
    ys = decode(trace(chart_spec(at, "training_lr_preview"), "learning rate")["y"])
    assert max(ys) == pytest.approx(end) and end < peak


def test_probe_sentences_follow_the_direction_until_edited():
    at = run_page("training")
    set_widgets(at, {"training_direction": "fr-en"})
    assert at.text_area(key="training_probes").value == "\n".join(DEFAULT_PROBES["fr-en"])
    set_widgets(at, {"training_probes": "je suis étudiant"})
    set_widgets(at, {"training_direction": "en-fr"})
    assert at.text_area(key="training_probes").value == "je suis étudiant"


def test_impossible_settings_are_refused_before_anything_starts():
    at = run_page("training")
    set_widgets(at, {**TINY, "training_d_model": 130, "training_n_heads": 4})
    msg = "d_model (130) must be divisible by n_heads (4)"
    assert any(msg in e for e in texts(at, "error")), texts(at, "error")
    at.button(key="training_start").click().run()
    no_exception(at)
    assert "training_job" not in at.session_state
    assert sum(msg in e for e in texts(at, "error")) == 2  # under the settings and under the Start button
    assert "No training yet" in all_text(at)


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


# --- uploads ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, data, message",
    [
        ("c.tsv", "le café\tthe coffee\n".encode("latin-1") * 30, "not valid UTF-8"),
        ("c.tsv", b"a b\tc d\te f\n" * 30, "has 3 columns"),
        ("c.tsv", b"i am\tje suis\nhello\t \n" + b"x\ty\n" * 30, "Line 2: the target sentence is empty"),
        ("c.csv", b"i am,je suis\n,tu es\n" + b"x,y\n" * 30, "Line 2: the source sentence is empty"),
        ("c.tsv", b"", "The file is empty"),
        ("c.tsv", b"i am\tje suis\nyou are\ttu es\n", "Too few pairs: 2"),
        ("c.tsv", b"i am\tje suis\n" * 1_000_000, "The file is too large"),
        ("c.txt", b"abc", "neither a tab nor a comma"),
        ("c.csv", b"x\x00y,z\n", "binary file"),
        ("c.tsv", b"i am\tje suis\n" * 3 + "\u202elive\tmal\n".encode(), "Line 4 contains an invisible"),
    ],
)
def test_every_bad_corpus_gets_its_message(name, data, message):
    at = run_page("training")
    upload(at, "training_corpus_upload", (name, data, "text/plain"))
    assert any(message in e for e in texts(at, "error")), texts(at, "error")
    prof = ts.toy_profile("en-fr")
    assert at.radio(key="training_data").options == [
        f"The toy set ({prof.n_train:,} training pairs, {prof.n_heldout:,} held out)"
    ]  # no "My corpus"


def test_a_reload_keeps_the_browsers_uploaded_corpus_and_no_one_else_gets_it(tsv, monkeypatch):
    """An upload, then a reload (a new session of the same browser): the corpus is still offered and chosen, with
    its preview; another browser never sees it; removing the file forgets it for the next reload too."""
    browser = identity.Identity("local", "b-00000000000000000000000000000003", None)
    monkeypatch.setattr(training_session, "current_identity", lambda: browser)
    first = run_page("training")
    upload(first, "training_corpus_upload", ("mine.tsv", tsv, "text/tab"))
    assert first.session_state["training_data"] == "upload"
    reloaded = run_page("training")
    no_exception(reloaded)
    assert reloaded.session_state["training_data"] == "upload"
    assert reloaded.session_state["training_corpus"]["name"] == "mine.tsv"
    assert len(reloaded.radio(key="training_data").options) == 2
    rows = [line.split("\t") for line in tsv.decode().splitlines()[:20]]
    assert reloaded.dataframe[0].value["en"].tolist() == [r[0] for r in rows]
    other = identity.Identity("local", "b-00000000000000000000000000000004", None)
    monkeypatch.setattr(training_session, "current_identity", lambda: other)
    stranger = run_page("training")
    assert "training_corpus" not in stranger.session_state and len(stranger.radio(key="training_data").options) == 1
    monkeypatch.setattr(training_session, "current_identity", lambda: browser)
    upload(first, "training_corpus_upload", None)  # the student removes the file
    assert "training_corpus" not in run_page("training").session_state


@TRAINS
def test_duplicates_are_dropped_with_a_warning_and_the_corpus_trains(tsv):
    at = run_page("training")
    upload(at, "training_corpus_upload", ("mine.tsv", tsv + tsv.splitlines(keepends=True)[0] * 3, "text/tab"))
    assert not at.error, texts(at, "error")
    assert "Dropped 3 duplicate lines (the same pair more than once)." in texts(at, "warning")
    preview = at.dataframe[0].value
    rows = [line.split("\t") for line in tsv.decode().splitlines()[:20]]
    assert preview["en"].tolist() == [r[0] for r in rows] and preview["fr"].tolist() == [r[1] for r in rows]
    assert at.session_state["training_data"] == "upload"
    assert len(at.radio(key="training_data").options) == 2
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["pairs"] == "60" and metrics["training / held out"] == "54 / 6"
    job = start(at, training_steps=10, training_eval_every=0)
    v = finish(at, job)
    assert v.state == "finished" and v.data_label == "mine.tsv (60 pairs)"
    assert v.probes[0] == rows[9][0]  # the corpus' first held-out source (every 10th pair is held out)
    mine = at.session_state["my_model"]
    pairs = [Pair(r[0], r[1], "upload") for r in (line.split("\t") for line in tsv.decode().splitlines())]
    src_vocab, tgt_vocab = build_vocabs(split_pairs(pairs)["train"], "en-fr")  # the corpus' own words only
    assert mine.src_vocab.itos == src_vocab.itos and mine.tgt_vocab.itos == tgt_vocab.itos


def test_a_valid_model_upload_becomes_my_model(shipped_files):
    at = run_page("training")
    w, j = shipped_files
    upload(
        at,
        "training_model_upload",
        [("base.safetensors", w, "application/octet-stream"), ("base.json", j, "application/json")],
    )
    ss = at.session_state
    assert ss["model"] == "mine" and ss["my_model"].name == "base"
    assert any('it is now "My model" on every page' in s for s in texts(at, "success"))
    shipped = checkpoint.load(checkpoint.SHIPPED)
    for (k, a), (_, b) in zip(
        shipped.model.state_dict().items(), ss["my_model"].model.state_dict().items(), strict=True
    ):
        assert (a == b).all(), k
    assert [d.proto.label for d in at.get("download_button")] == [
        "Download weights (.safetensors)",
        "Download config (.json)",
    ]


def bad_models(shipped_files):
    w, j = shipped_files
    meta = json.loads(j)
    no_hash = {k: v for k, v in meta.items() if k != "weights_sha256"}
    wider = {**no_hash, "config": {**meta["config"], "d_ff": meta["config"]["d_ff"] * 2}}
    from model.train import Trainer

    other = to_bytes(
        Trainer(
            ts.make_config({k.removeprefix("training_"): v for k, v in TINY.items() if k != "training_probe_every"}),
            data=ts.toy_data("en-fr"),
        ).bundle()
    )[0]  # weights of another (untrained) model
    return [
        (
            "corrupt weights",
            [("m.safetensors", b"\x00garbage" * 100, ""), ("m.json", json.dumps(no_hash).encode(), "")],
            "not a readable safetensors file",
        ),
        ("not JSON", [("m.safetensors", w, ""), ("m.json", b"{not json", "")], "the JSON file cannot be read"),
        (
            "wrong format",
            [("m.safetensors", w, ""), ("m.json", json.dumps({**meta, "format": "x"}).encode(), "")],
            "unknown checkpoint format",
        ),
        ("weights of another model", [("m.safetensors", other, ""), ("m.json", j, "")], "does not belong to this JSON"),
        ("shapes", [("m.safetensors", w, ""), ("m.json", json.dumps(wider).encode(), "")], "has shape"),
        (
            "too large",
            [("m.safetensors", b"0" * (checkpoint.MAX_BYTES + 1), ""), ("m.json", j, "")],
            f"it is {(checkpoint.MAX_BYTES + 1 + len(j)) / 2**20:.1f} MB; "
            f"the limit is {checkpoint.MAX_BYTES / 2**20:.1f} MB",
        ),
        ("one file", [("m.json", j, "")], "exactly one .safetensors and one .json"),
    ]


def test_every_bad_model_upload_gets_its_message(shipped_files):
    at = run_page("training")
    for what, files, message in bad_models(shipped_files):
        upload(at, "training_model_upload", files)
        shown = texts(at, "error") + texts(at, "warning")
        assert any(message in s for s in shown), (what, shown)
        assert "my_model" not in at.session_state, what
        assert at.session_state["model"] == "base"


@TRAINS
def test_download_is_the_model_in_the_checkpoint_format():
    at = run_page("training")
    job = start(at, training_steps=3, training_eval_every=0)
    finish(at, job)
    mine = at.session_state["my_model"]
    weights, meta = to_bytes(mine)
    back = from_bytes(weights, meta)
    assert back.config == mine.config and back.meta["training"]["steps_done"] == 3
    labels = [d.proto.label for d in at.get("download_button")]
    assert labels == ["Download weights (.safetensors)", "Download config (.json)"]


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


# --- figures (viz/training.py) ---------------------------------------------------------------------------


def test_ema_is_bias_corrected():
    assert vt.ema([2.0, 2.0, 2.0]) == pytest.approx([2.0, 2.0, 2.0])
    s = vt.ema([1.0, 3.0], alpha=0.5)  # (0.5*1)/0.5 = 1; (0.25*1 + 0.5*3)/0.75 = 2.333
    assert s == pytest.approx([1.0, 1.75 / 0.75])
    assert vt.ema([1.0, float("nan"), 1.0]) == pytest.approx([1.0, 1.0, 1.0])


def test_future_share_on_literal_matrices():
    lower = np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.2, 0.3, 0.5]])
    assert vt.future_share(lower) == 0.0
    uniform = np.full((3, 3), 1 / 3)
    assert vt.future_share(uniform) == pytest.approx((2 / 3 + 1 / 3 + 0) / 3)
    copy_next = np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 1.0]])
    assert vt.future_share(copy_next) == pytest.approx(2 / 3)


def test_head_weights_and_find_token():
    w = np.arange(2 * 3 * 2 * 2, dtype=float).reshape(2, 3, 2, 2)
    np.testing.assert_array_equal(vt.head_weights(w, 1, 2), w[1, 2])
    np.testing.assert_array_equal(vt.head_weights(w, 0, None), w[0].mean(0))
    assert vt.find_token(["0 the", "1 animal", "2 the"], "the") == 0
    assert vt.find_token(["0 the"], "it") is None


def test_lr_figure_is_the_papers_formula():
    fig = vt.lr_figure(1000, 512, 400, 2.0, current=123)
    ys = [t for t in fig.data if t.name == "learning rate"][0].y
    assert len(ys) == 1000
    assert ys[0] == pytest.approx(2.0 * 512**-0.5 * 400**-1.5)
    assert ys[399] == pytest.approx(2.0 * 512**-0.5 * 400**-0.5) == max(ys)
    assert ys[999] == pytest.approx(2.0 * 512**-0.5 * 1000**-0.5)
    now = [t for t in fig.data if t.name == "now"][0]
    assert list(now.x) == [123] and now.y[0] == pytest.approx(rate(123, 512, 400, 2.0))
    assert len([t for t in vt.lr_figure(100, 64, 10).data if t.name == "now"]) == 0


def test_long_curves_are_thinned():
    fig = vt.loss_figure(list(range(1, 5001)), [1.0] * 5000)
    raw = fig.data[0]
    assert len(raw.x) == 2500 and raw.x[1] - raw.x[0] == 2


def test_a_run_of_one_step_draws_its_point_and_titles_fit_half_a_page():
    """A run that failed at its first update has one loss: drawn as a point (a line of one point is invisible), and
    the loss chart's title fits a half-width chart (it was cut at "nats per target toke")."""
    fig = vt.loss_figure([1], [6.16])
    assert [t.mode for t in fig.data] == ["markers", "markers"] and list(fig.data[1].y) == pytest.approx([6.16])
    assert [t.mode for t in vt.loss_figure([1, 2], [6.2, 6.1]).data] == ["lines", "lines"]
    assert len(fig.layout.title.text) <= 50, fig.layout.title.text


def test_a_run_that_ends_above_chance_says_it_did_not_learn():
    """A run at a huge learning-rate scale can end without a NaN, its loss far above chance (ln V): its "My model"
    translates noise on every page, and the page says so; a run below chance gets no such line."""

    def script():
        import streamlit as st

        from ui.training import panels

        panels.not_learned(st.session_state["loss"], 331)

    at = AppTest.from_function(script)
    at.session_state["loss"] = 39573.837
    at.run()
    (warning,) = [w.value for w in at.warning]
    assert "did not learn" in warning and "39,573.837" in warning and "ln V = 5.80" in warning and "331" in warning
    at.session_state["loss"] = 2.5
    at.run()
    assert not at.warning


def test_tables_of_translations():
    evals = [
        EvalEvent(10, 2.0, 0.0, 1.0, None, [("i am", "je", "je suis")]),
        EvalEvent(20, 1.0, 1.0, 100.0, None, [("i am", "je suis", "je suis")]),
    ]
    df = vt.samples_table(evals)
    assert df.columns.tolist() == ["source", "reference", "step 20", "step 10"]
    assert df.iloc[0].tolist() == ["i am", "je suis", "✓ je suis", "✗ je"]

    class S:
        def __init__(self, step, probe, translation):
            self.step, self.probe, self.translation = step, probe, translation

    snaps = [S(0, 0, "a"), S(0, 1, "b"), S(5, 0, "c"), S(5, 1, "d")]
    df = vt.probe_table(snaps, ["p0", "p1"])
    assert df.to_dict("list") == {"step": [5, 0], "p0": ["c", "a"], "p1": ["d", "b"]}


def test_metrics_figure_values():
    fig = vt.metrics_figure([10, 20], [0.25, 0.5], [10.0, 30.0], [None, 0.75])
    assert list(fig.data[0].y) == [25.0, 50.0] and list(fig.data[1].y) == [10.0, 30.0]
    assert list(fig.data[2].y) == [None, 75.0]
    assert len(vt.metrics_figure([10], [0.1], [1.0], [None]).data) == 2


def test_page_file_is_thin():
    """No torch arithmetic in the page: it imports no torch."""
    src = (ROOT / "pages" / "training.py").read_text()
    assert "import torch" not in src


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


def test_a_model_too_large_to_save_is_refused_before_start(monkeypatch):
    monkeypatch.setattr(checkpoint, "MAX_BYTES", 20 * 2**20)  # 4 layers of d_model 256 make about 30 MB
    at = run_page("training")
    set_widgets(
        at, {**TINY, "training_d_model": 256, "training_n_heads": 8, "training_d_ff": 1024, "training_n_layers": 4}
    )
    assert any("could not be saved and loaded again" in e for e in texts(at, "error")), texts(at, "error")
    at.button(key="training_start").click().run()
    no_exception(at)
    assert "training_job" not in at.session_state
