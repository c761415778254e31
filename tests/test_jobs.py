"""The background training job, its worker process, the server-wide job manager and the run settings
(model/train_settings.py, model/probes.py), without Streamlit."""

from __future__ import annotations

import dataclasses
import threading
import time

import numpy as np
import pytest
import torch

from model import train_settings as ts
from model.checkpoint import from_bytes, to_bytes
from model.data import load_dataset
from model.limits import BOUNDS, MAX_VOCAB
from model.probes import default_probes, find_reference, probe_snapshot
from model.trace import Trace
from model.train import Trainer
from model.train_settings import SettingsError
from tests.services import wait_for
from training import run_process
from training.contract import FAIR_REASON, JobRefused
from training.job import Job, make_job
from training.local_pool import LocalPool
from ui import session_info

TINY = dict(d_model=16, n_heads=2, n_layers=1, d_ff=32, batch_size=16, steps=40, warmup=10, eval_every=0, dropout=0.0)
LONG = {**TINY, "steps": 5000}


@pytest.fixture(scope="module")
def small_data():
    """200 training and 8 held-out pairs of the toy set: evaluations take milliseconds."""
    toy = load_dataset()
    return {"train": toy["train"][:200], "heldout": toy["heldout"][:8]}


@pytest.fixture
def manager():
    m = LocalPool(max_running=2, poll=0.05, grace=0.0)
    yield m
    m.shutdown()


def job(data, probe_every=0, owner=None, session_id=None, **settings) -> Job:
    return make_job(
        {**TINY, **settings},
        data=data,
        probe_every=probe_every,
        owner=owner,
        session_id=session_id,
        probes=["i am a student"] if probe_every else [],
    )


def wait_steps(j: Job, n: int = 2):
    wait_for(lambda: j.view().step >= n or j.done)


# --- Settings ------------------------------------------------------------------------------------


def test_defaults_are_valid_and_inside_the_bounds():
    tcfg = ts.make_config(
        {
            f.name: getattr(ts.DEFAULTS, f.name)
            for f in dataclasses.fields(ts.DEFAULTS)
            if f.name in BOUNDS or f.name == "direction"
        }
    )
    assert tcfg.d_model % tcfg.n_heads == 0
    for name, (lo, hi) in BOUNDS.items():
        assert lo <= getattr(ts.DEFAULTS, name) <= hi, name


@pytest.mark.parametrize(
    "settings, words",
    [
        ({"d_model": 130, "n_heads": 4}, "divisible by n_heads"),
        ({"d_model": 33, "n_heads": 1}, "must be even"),
        ({"d_model": 512}, "d_model must be between 8 and 256"),
        ({"n_layers": 5}, "layers must be between 1 and 4"),
        ({"batch_size": 0}, "batch size must be between 1 and 128"),
        ({"steps": 6000}, "steps must be between 1 and 5000"),
        ({"dropout": 0.9}, "dropout must be between 0 and 0.5"),
        ({"direction": "de-fr"}, "direction must be one of"),
    ],
)
def test_impossible_settings_are_refused_with_a_message(settings, words):
    with pytest.raises(SettingsError) as e:
        ts.make_config({**TINY, **settings})
    assert words in str(e.value)


def test_every_out_of_bounds_setting_is_named_at_once():
    with pytest.raises(SettingsError) as e:
        ts.make_config({**TINY, "n_layers": 9, "d_ff": 4096})
    assert "layers must be" in str(e.value) and "d_ff must be" in str(e.value)


# --- Memory bound -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kw",
    [
        dict(d_model=32, n_heads=2, n_layers=1, d_ff=64),
        dict(d_model=64, n_layers=3, d_ff=256),
        dict(d_model=128, n_heads=8, n_layers=2, d_ff=512),
    ],
)
def test_parameter_count_is_the_models(kw):
    tcfg = dataclasses.replace(ts.DEFAULTS, **kw)
    prof = ts.toy_profile("en-fr")
    model = Trainer(tcfg, data=ts.toy_data("en-fr")).model
    assert ts.parameters(tcfg, prof) == sum(p.numel() for p in model.parameters())


def saved_for_backward(trainer: Trainer, B: int, T: int) -> int:
    """Bytes autograd keeps for the backward pass of one batch (parameters excluded)."""
    g = torch.Generator().manual_seed(0)
    src = torch.randint(4, len(trainer.src_vocab), (B, T), generator=g)
    tgt = torch.randint(4, len(trainer.tgt_vocab), (B, T + 1), generator=g)
    params = {p.untyped_storage().data_ptr() for p in trainer.model.parameters()}
    seen: dict[int, int] = {}

    def pack(t):
        s = t.untyped_storage()
        if s.data_ptr() not in params:
            seen[s.data_ptr()] = s.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        trainer.loss(trainer.model(src, tgt[:, :-1], Trace(trainer.interventions, record=False)), tgt[:, 1:])
    return sum(seen.values())


@pytest.mark.parametrize(
    "kw",
    [
        dict(d_model=32, n_heads=2, n_layers=1, d_ff=64, batch_size=16),
        dict(d_model=64, n_heads=4, n_layers=2, d_ff=256, batch_size=32),
        dict(d_model=128, n_heads=8, n_layers=3, d_ff=128, batch_size=8),
    ],
)
def test_activation_estimate_matches_a_measurement(kw):
    """The fit is for dropout on (its masks are kept for backward); without dropout it is an upper bound."""
    prof = ts.toy_profile("en-fr")
    for dropout, lo, hi in ((0.1, 0.75, 1.3), (0.0, 1.0, 2.5)):
        tcfg = dataclasses.replace(ts.DEFAULTS, dropout=dropout, **kw)
        trainer = Trainer(tcfg, data=ts.toy_data("en-fr"))
        measured = saved_for_backward(trainer, tcfg.batch_size, prof.longest - 1)
        estimated = ts.estimate_memory(tcfg, prof).activation_bytes / 1.5  # the estimate adds 50% for backward's peak
        assert lo < estimated / measured < hi, (dropout, estimated, measured)


def test_the_worst_case_fits_the_limit_and_bigger_runs_are_refused(small_data, monkeypatch):
    worst = ts.worst_case()
    assert worst.total <= ts.MAX_JOB_BYTES
    assert worst.parameters > 5_000_000  # d_model 256, 4+4 layers, d_ff 1024
    monkeypatch.setattr(ts, "MAX_JOB_BYTES", 1_000_000)
    with pytest.raises(SettingsError, match="limit per job"):
        job(small_data)


def test_a_corpus_with_a_huge_vocabulary_is_refused():
    from model.data import Pair

    pairs = [Pair(f"w{i} x{i}", f"y{i} z{i}") for i in range(MAX_VOCAB)]
    with pytest.raises(SettingsError, match="limit is 8,000 per side"):
        make_job(TINY, data={"train": pairs, "heldout": pairs[:5]})


# --- The queue ------------------------------------------------------------------------------------


def test_third_job_waits_with_position_1_then_runs_when_one_ends(small_data, manager):
    a, b, c = (job(small_data, **LONG) for _ in range(3))
    for j in (a, b, c):
        manager.submit(j)
    assert (a.state, b.state, c.state) == ("running", "running", "queued")
    assert manager.position(c) == 1 and c.view().position == 1 and a.view().position is None
    assert c.thread is None and manager.counts() == (2, 1)
    d = manager.submit(job(small_data, **LONG))
    assert manager.position(d) == 2
    wait_steps(a)
    a.stop()
    assert a.join(30)
    assert a.state == "stopped"
    wait_for(lambda: c.state == "running")  # the freed slot goes to the first in line
    assert manager.position(d) == 1 and manager.counts() == (2, 1)
    manager.stop(d)  # a queued job leaves the queue at once, without ever running
    assert d.done and d.state == "stopped" and d.thread is None and d.result is None
    assert manager.counts() == (2, 0)


def test_one_address_keeps_its_share_of_the_slots_while_another_waits(small_data):
    """One address's two runs took both slots of a 2-core server for the whole time limit (600 s) while a class's
    first run waited. Now, while another address waits, a run beyond its address's share (2 slots over 2 addresses:
    1 each) stops once it has trained `fair_seconds`, with its model so far, and its slot goes to the waiting
    address; its address's other run goes on. Nobody waiting, nobody is stopped; a freed slot goes to the first
    queued run of the address running fewest."""
    pool = LocalPool(max_running=2, poll=0.05, grace=0.0, fair_seconds=1.5, jobs_per_client=10, starts_per_minute=100)
    try:
        greedy = [
            pool.submit(make_job({**TINY, **LONG}, data=small_data, probes=[], owner=f"g{i}", client="A"))
            for i in range(2)
        ]
        time.sleep(2.0)  # past fair_seconds, with nobody else waiting: both go on
        assert [g.state for g in greedy] == ["running", "running"]
        late = pool.submit(make_job({**TINY, **LONG}, data=small_data, probes=[], owner="g2", client="A"))
        waiting = pool.submit(make_job({**TINY, **LONG}, data=small_data, probes=[], owner="b0", client="B"))
        assert (late.state, waiting.state) == ("queued", "queued") and pool.position(waiting) == 2
        wait_for(lambda: waiting.state == "running", 30)  # B's run, though A's third was queued first
        assert greedy[1].join(30) and greedy[1].state == "stopped" and greedy[1].result is not None
        assert greedy[1].reason == FAIR_REASON  # the newest of A's runs gave its slot back, with its model so far
        assert greedy[0].state == "running" and late.state == "queued"
        time.sleep(2.0)  # A and B hold one slot each: their share; nobody else waits
        assert greedy[0].state == "running" and waiting.state == "running"
    finally:
        pool.shutdown()


def test_a_finished_job_frees_its_slot(small_data):
    m = LocalPool(max_running=1, poll=0.05)
    first, second = job(small_data, steps=5), job(small_data, steps=5)
    m.submit(first)
    m.submit(second)
    assert second.state == "queued"
    assert first.join(60) and second.join(60)
    assert (first.state, second.state) == ("finished", "finished")
    assert second.started >= first.ended


def test_one_active_job_per_owner(small_data, manager):
    a = manager.submit(job(small_data, owner="student-1", **LONG))
    second = job(small_data, owner="student-1", **LONG)
    assert manager.submit(second) is a  # idempotent: the owner's running job, the new one is dropped
    assert second.state == "new" and second.thread is None and manager.counts() == (1, 0)
    other = manager.submit(job(small_data, owner="student-2", **LONG))  # another session is not affected
    assert other.state == "running"
    a.stop()
    assert a.join(120)  # (a busy machine: the worker ends after its current step and hands its model over)
    again = manager.submit(job(small_data, owner="student-1", steps=3))
    assert again.join(60) and again.state == "finished"


def test_full_queue_refuses(small_data):
    m = LocalPool(max_running=1, max_queue=1, poll=0.05)
    try:
        m.submit(job(small_data, **LONG))
        m.submit(job(small_data, **LONG))
        with pytest.raises(JobRefused, match="queue is full"):
            m.submit(job(small_data, **LONG))
    finally:
        m.shutdown()


# --- Stop, time limit, ended sessions, divergence -----------------------------------------------


def test_stop_hands_over_the_model_so_far(small_data, manager):
    j = manager.submit(job(small_data, **LONG))
    wait_steps(j, 3)
    j.stop()
    assert j.join(30)
    v = j.view()
    assert (v.state, v.reason) == ("stopped", "stopped by you")
    assert 3 <= v.step < 5000 and j.result is not None
    assert j.result.meta["training"]["steps_done"] == v.step
    assert not j.result.model.training


def test_time_limit_stops_the_job(small_data):
    m = LocalPool(max_running=1, max_seconds=0.5, poll=0.05)
    j = m.submit(job(small_data, **LONG))
    assert j.tcfg.max_seconds == 0.5
    assert j.join(60)
    assert j.state == "stopped" and j.reason.startswith("time limit") and 0 < j.view().step < 5000
    assert j.result is not None


def test_jobs_of_an_ended_session_are_cancelled(small_data):
    alive = {"s1": True, "s2": True, "s3": True}
    m = LocalPool(max_running=1, session_alive=lambda sid: alive[sid], grace=0.0, poll=3600)  # sweeps by hand
    running = m.submit(job(small_data, session_id="s1", **LONG))
    queued = m.submit(job(small_data, session_id="s2", **LONG))
    other = m.submit(job(small_data, session_id="s3", **LONG))
    wait_steps(running)
    assert m.sweep() == []
    alive["s1"] = alive["s2"] = False  # both browser tabs closed
    assert set(m.sweep()) == {running, queued}
    assert running.join(30) and running.state == "stopped" and running.reason == "session ended"
    assert running.process.returncode == -9  # killed at once: nobody is left to look at its model
    assert running.result is None
    assert queued.done and queued.state == "stopped" and queued.thread is None
    wait_for(lambda: other.state == "running")  # the living session's job gets the slot
    m.shutdown()


def test_a_short_disconnection_is_forgiven(small_data):
    alive = {"s1": True}
    m = LocalPool(max_running=1, session_alive=lambda sid: alive[sid], grace=10.0, poll=3600)
    j = m.submit(job(small_data, session_id="s1", **LONG))
    t0 = time.monotonic()
    alive["s1"] = False  # a page reload: the websocket is gone for a moment
    assert m.sweep(now=t0) == [] and m.sweep(now=t0 + 9) == []
    alive["s1"] = True
    assert m.sweep(now=t0 + 11) == [] and j.active
    alive["s1"] = False
    assert m.sweep(now=t0 + 12) == []
    assert m.sweep(now=t0 + 23) == [j]
    assert j.join(30) and j.reason == "session ended"


def test_the_watchdog_sweeps_by_itself(small_data):
    alive = {"s1": True}
    m = LocalPool(max_running=1, session_alive=lambda sid: alive[sid], grace=0.0, poll=0.02)
    j = m.submit(job(small_data, session_id="s1", **LONG))
    wait_steps(j)
    alive["s1"] = False
    assert j.join(30) and j.reason == "session ended"


def test_outside_streamlit_every_session_counts_as_alive():
    assert session_info.streamlit_session_alive("no such session") is True
    assert session_info.current_session_id() is None


def test_nan_fails_the_job_with_an_explanation_and_the_manager_goes_on(small_data, manager):
    j = manager.submit(job(small_data, owner="me", lr_scale=1e6, warmup=1))
    assert j.join(60)
    v = j.view()
    assert (v.state, v.reason) == ("failed", "diverged")
    assert "Training diverged" in v.error and "smaller lr_scale" in v.error and "warm-up" in v.error
    assert f"after {v.step} update" in v.error and v.steps == list(range(1, v.step + 1))  # curve and panel agree
    assert j.result is None
    assert manager.counts() == (0, 0)
    again = manager.submit(job(small_data, owner="me", steps=3))  # the same session trains again
    assert again.join(60) and again.state == "finished"


def test_an_unexpected_error_fails_the_job_not_the_server(small_data, manager):
    bad = job(small_data)
    bad._data = {"train": [], "heldout": []}  # no training pairs: the training process refuses the spec
    manager.submit(bad)
    assert bad.join(30) and bad.state == "failed"
    assert bad.error.startswith("Training failed: this run's settings could not be read"), bad.error
    assert manager.counts() == (0, 0)
    again = manager.submit(job(small_data, steps=3))  # the server goes on
    assert again.join(60) and again.state == "finished"


def test_a_worker_that_dies_fails_its_job_with_a_message(small_data, manager):
    j = manager.submit(job(small_data, **LONG))
    wait_steps(j)
    j.process.kill()  # as the kernel's out-of-memory killer would
    assert j.join(30) and j.state == "failed"
    assert "ended unexpectedly (exit code -9 (killed: perhaps out of memory))" in j.error
    assert manager.counts() == (0, 0)


# --- What the job records ------------------------------------------------------------------------


def test_loss_falls_on_a_tiny_config(small_data, manager):
    j = manager.submit(job(small_data, steps=40, dropout=0.0, warmup=10))
    assert j.join(120) and j.state == "finished"
    v = j.view()
    assert v.steps == list(range(1, 41))
    assert len(v.losses) == len(v.cross_entropy) == len(v.lrs) == 40
    assert np.mean(v.losses[-10:]) < np.mean(v.losses[:10]) - 0.5
    assert v.lrs[9] == pytest.approx(j.tcfg.lr_scale * 16**-0.5 * 10**-0.5)  # the peak, at warm-up
    assert j.result.meta["training"]["steps_done"] == 40
    assert [e.step for e in v.evals] == [40]  # eval_every 0: once at the end
    assert v.eval_seconds[-1] <= v.seconds


def test_the_job_trains_in_its_own_process_with_one_torch_thread_at_a_lower_priority(small_data, manager):
    import os

    before = torch.get_num_threads()
    nice = os.getpriority(os.PRIO_PROCESS, 0)
    j = manager.submit(job(small_data, steps=2))
    assert j.join(60) and j.state == "finished", j.view().error
    info = j.worker_info
    assert info["pid"] != os.getpid()  # not a thread of the server: no shared interpreter lock
    assert info["torch_threads"] == 1
    assert info["nice"] == min(19, nice + run_process.NICE)
    assert torch.get_num_threads() == before  # the server's threads are untouched
    assert os.getpriority(os.PRIO_PROCESS, 0) == nice
    assert j.process.poll() is not None  # the worker is gone once the job has ended


def test_probe_snapshots(small_data, manager):
    j = manager.submit(job(small_data, steps=20, probe_every=5))
    assert j.join(60) and j.state == "finished"
    snaps = j.view().snapshots
    assert [s.step for s in snaps] == [0, 5, 10, 15, 20]
    for s in snaps:
        assert s.src_labels == ("0 i", "1 am", "2 a", "3 student", "4 <eos>")
        assert s.tgt_labels == ("0 <bos>", "1 je", "2 suis", "3 étudiant")  # the reference, teacher-forced
        assert s.enc_self.shape == (1, 2, 5, 5) and s.dec_self.shape == (1, 2, 4, 4) and s.cross.shape == (1, 2, 4, 5)
        for kind in ("enc_self", "dec_self", "cross"):
            w = s.weights(kind)
            assert w.dtype == np.float32
            np.testing.assert_allclose(w.sum(-1), 1.0, atol=1e-5)
        assert np.triu(s.dec_self, k=1).max() == 0.0  # the look-ahead mask
    assert not np.allclose(snaps[0].enc_self, snaps[-1].enc_self)  # attention changed with training
    assert j.result.model.training is False


def test_probe_snapshots_without_the_mask_look_ahead(small_data, manager):
    j = manager.submit(job(small_data, steps=5, probe_every=5, look_ahead_mask=False))
    assert j.join(60)
    s = j.view().snapshots[-1]
    assert np.triu(s.dec_self, k=1).sum() > 0.1


def test_probe_snapshot_of_the_shipped_recipe_matches_a_traced_pass():
    """The snapshot holds exactly the weights of a traced teacher-forced pass over the reference."""
    from model.pipeline import prepare, teacher_forced

    data = ts.toy_data("en-fr")
    trainer = Trainer(dataclasses.replace(ts.DEFAULTS, **TINY), data=data)
    bundle = trainer.bundle()
    text = "the animal didn't cross the street because it was too tired"
    ref = find_reference(data, text, "en")
    assert ref == "l'animal n'a pas traversé la rue parce qu'il était trop fatigué"
    snap = probe_snapshot(bundle, text, ref, step=7)
    tf = teacher_forced(bundle, prepare(bundle, text), ref)
    np.testing.assert_array_equal(snap.enc_self[0], tf.trace["enc.0.self_attn.weights"][0].numpy())
    np.testing.assert_array_equal(snap.cross[0], tf.trace["dec.0.cross_attn.weights"][0].numpy())
    assert snap.step == 7 and snap.src_labels[7] == "7 it"


def test_snapshots_are_capped_for_long_runs():
    assert Job(dataclasses.replace(ts.DEFAULTS, steps=5000), probe_every=1).probe_every == 50
    assert Job(dataclasses.replace(ts.DEFAULTS, steps=600), probe_every=25).probe_every == 25
    assert Job(ts.DEFAULTS, probe_every=0).probe_every == 0


def test_default_probes():
    assert default_probes("en-fr")[0] == "the animal didn't cross the street because it was too tired"
    fr = default_probes("fr-en")
    data = ts.toy_data("fr-en")
    assert find_reference(data, fr[1], "fr") == "i am a student"
    custom = {"train": [], "heldout": load_dataset()["heldout"][:3]}
    assert default_probes("en-fr", custom) == [p.src for p in custom["heldout"][:2]]


def test_the_result_survives_download_and_upload(small_data, manager):
    j = manager.submit(job(small_data, steps=3))
    assert j.join(60)
    weights, meta = to_bytes(j.result)
    back = from_bytes(weights, meta)
    for (k, a), (_, b) in zip(j.result.model.state_dict().items(), back.model.state_dict().items(), strict=True):
        assert torch.equal(a, b), k
    assert back.src_vocab.itos == j.result.src_vocab.itos


def test_view_is_a_consistent_copy_while_training(small_data, manager):
    j = manager.submit(job(small_data, **LONG))
    views = []
    stop = threading.Event()

    def reader():
        while not stop.is_set():
            views.append(j.view())

    t = threading.Thread(target=reader)
    t.start()
    wait_steps(j, 20)
    stop.set()
    t.join()
    j.stop()
    j.join(30)
    for v in views:
        assert len(v.steps) == len(v.losses) == len(v.lrs) == len(v.cross_entropy) == v.step
    v = j.view()
    v.losses.append(1.0)  # a copy: the job's own list is untouched
    assert len(j.view().losses) == v.step
