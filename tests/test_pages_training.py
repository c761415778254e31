"""The training page through AppTest before and around a run, and its figure builders (viz/training.py).

Before a run: the settings, their real sizes and what is refused before anything starts. Uploads and downloads: every
bad corpus or model gets its message, a valid one is used, the download is the checkpoint format. Runs train tiny
models (d_model 16, one layer, 40 steps) in the page's real background job; a test joins the job's thread (found in
the session state), reruns, and compares what the page shows with what the job recorded and with independent
computations (model.train.rate, the checkpoint format). The runs themselves (a short run, stop, divergence, the
slider, the queue, isolation between sessions, a run belonging to the browser) are in
tests/test_pages_training_runs.py.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

import training
from model import checkpoint
from model import train_settings as ts
from model.checkpoint import from_bytes, to_bytes
from model.data import Pair, build_vocabs, split_pairs
from model.probes import PROBES as DEFAULT_PROBES
from model.train import EvalEvent, rate
from serving import identity
from tests.apptest_util import ROOT, all_text, chart_spec, decode, no_exception, run_page
from tests.training_util import PROBES, TINY, TRAINS, finish, set_widgets, start, texts, trace, upload
from tests.training_util import no_job_left_behind as no_job_left_behind  # the autouse fixture: applies here
from tests.training_util import toy as toy
from tests.training_util import tsv as tsv
from ui.training import session as training_session
from viz import training as vt


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
