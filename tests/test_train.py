"""Training: the paper's schedule, the config checks, and a tiny model that really learns.

Every training here uses a tiny model on a small subset so the file runs in a few seconds.
"""

import math
import threading

import pytest
import torch
import torch.nn.functional as F

from bench.reference import TorchReference
from model.checkpoint import Bundle
from model.data import Pair, load_dataset, pairs_hash
from model.evaluate import evaluate
from model.train import EvalEvent, StepEvent, TrainConfig, Trainer, TrainingDiverged, rate
from model.transformer import Config, Transformer

TINY = {
    "d_model": 32,
    "n_heads": 2,
    "n_layers": 1,
    "d_ff": 64,
    "batch_size": 32,
    "warmup": 10,
    "lr_scale": 0.3,
    "dropout": 0.0,
    "eval_every": 0,
}


@pytest.fixture(scope="module")
def subset() -> dict[str, list[Pair]]:
    """Short, simple pairs of the "basic" family ("i am a student"): 160 to train; 15 of them and 5 coref held out."""
    data = load_dataset()
    train = [p for p in data["train"] if p.tag == "basic"][:160]
    heldout = [p for p in data["heldout"] if p.tag == "basic"][:15] + [p for p in data["heldout"] if p.tag == "coref"][
        :5
    ]
    return {"train": train, "heldout": heldout}


def tiny(subset, **kw) -> Trainer:
    return Trainer(TrainConfig(**{**TINY, "steps": 40, **kw}), subset)


# --- the learning-rate schedule -----------------------------------------------------------------


def test_rate_matches_the_paper_formula():
    # lrate = d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)
    assert rate(1, 512, 4000) == pytest.approx(512**-0.5 * 4000**-1.5)
    assert rate(4000, 512, 4000) == pytest.approx(512**-0.5 * 4000**-0.5)  # the peak, about 7.0e-4
    assert rate(4000, 512, 4000) == pytest.approx(6.9877e-4, rel=1e-4)
    assert rate(16000, 512, 4000) == pytest.approx(512**-0.5 * 16000**-0.5)
    assert rate(100, 128, 200, scale=2.0) == pytest.approx(2 * rate(100, 128, 200))


def test_rate_warms_up_linearly_peaks_at_warmup_then_decays_as_inverse_sqrt():
    peak = rate(200, 128, 200)
    assert rate(100, 128, 200) == pytest.approx(peak / 2)  # linear: half way up at half the warm-up
    assert rate(199, 128, 200) < peak and rate(201, 128, 200) < peak
    assert max(rate(s, 128, 200) for s in range(1, 2000)) == peak
    assert rate(800, 128, 200) == pytest.approx(peak / 2)  # 1/sqrt(step): 4x the steps, half the rate
    assert TrainConfig(d_model=128, warmup=200, lr_scale=1.5).peak_lr == pytest.approx(1.5 * peak)


def test_rate_counts_steps_from_one():
    with pytest.raises(ValueError, match="from 1"):
        rate(0, 128, 200)


# --- the configuration ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kw, words",
    [
        ({"d_model": 130, "n_heads": 4}, "divisible"),
        ({"n_heads": 0}, "n_heads must be a positive"),
        ({"steps": -5}, "steps must be a positive"),
        ({"batch_size": 2.5}, "batch_size"),
        ({"dropout": 1.0}, "dropout must be a number in [0, 1)"),
        ({"dropout": -0.1}, "dropout"),
        ({"label_smoothing": 1.2}, "label_smoothing"),
        ({"lr_scale": 0}, "lr_scale must be a positive"),
        ({"lr_scale": float("nan")}, "lr_scale"),
        ({"warmup": 0}, "warmup"),
        ({"direction": "en-de"}, "direction must be one of en-fr, fr-en"),
        ({"max_seconds": -1.0}, "max_seconds"),
        ({"clip_grad_norm": 0.0}, "clip_grad_norm"),
        ({"eval_every": -1}, "eval_every"),
        ({"d_model": 9, "n_heads": 3}, "even"),
        ({"n_layers": 0}, "n_layers must be a positive integer (got 0)"),
        ({"dropout": True}, "dropout must be a number"),
        ({"positions": "rotary"}, "positions must be one of sinusoidal, learned, none (got 'rotary')"),
        ({"key_size": 64, "d_model": 128, "n_heads": 4}, "key_size must be None or a whole number from 1 to"),
        ({"key_size": 0}, "key_size"),
        ({"scale_scores": "no"}, "scale_scores must be True or False"),
        ({"arch": "rnn", "d_model": 512}, "d_model must be in [8, 256] (got 512)"),
    ],
)
def test_invalid_training_config_says_what_is_wrong(kw, words):
    with pytest.raises(ValueError, match="Invalid training config") as info:
        TrainConfig(**kw)
    assert words in str(info.value)


def test_a_model_size_problem_is_named_once_under_the_training_name():
    """The sizes are checked by the model's own config: n_layers sets both stacks, and d_model every size of the
    recurrent model, so each problem is reported once, under the name the user typed."""
    with pytest.raises(ValueError) as info:
        TrainConfig(n_layers=-1)
    assert str(info.value).count("n_layers") == 1 and "n_enc_layers" not in str(info.value)
    with pytest.raises(ValueError) as info:
        TrainConfig(arch="rnn", d_model=4)
    assert str(info.value).count("d_model must be") == 1 and "hidden" not in str(info.value)
    with pytest.raises(ValueError) as info:
        TrainConfig(positions="x")  # TrainConfig names it with its own choices; the model's complaint is dropped
    assert str(info.value).count("positions") == 1


def test_config_gives_the_model_config():
    cfg = TrainConfig(d_model=64, n_heads=8, n_layers=3, d_ff=128, dropout=0.2).model_config(50, 60)
    assert cfg == Config(
        src_vocab=50, tgt_vocab=60, d_model=64, n_heads=8, n_enc_layers=3, n_dec_layers=3, d_ff=128, dropout=0.2
    )


def test_defaults_are_the_documented_recipe():
    t = TrainConfig()
    assert (t.direction, t.d_model, t.n_heads, t.n_layers, t.d_ff) == ("en-fr", 128, 4, 2, 256)
    assert (t.dropout, t.label_smoothing, t.batch_size, t.look_ahead_mask) == (0.1, 0.1, 64, True)


# --- the trainer ----------------------------------------------------------------------------------


def test_loss_falls_and_events_carry_the_schedule(subset):
    trainer = tiny(subset, steps=60)
    events = list(trainer.run())
    steps = [e for e in events if isinstance(e, StepEvent)]
    assert [e.step for e in steps] == list(range(1, 61))
    assert [e.lr for e in steps] == pytest.approx([rate(s, 32, 10, 0.3) for s in range(1, 61)])
    first = sum(e.loss for e in steps[:5]) / 5
    last = sum(e.loss for e in steps[-5:]) / 5
    assert first > math.log(len(trainer.tgt_vocab)) * 0.8  # starts near a uniform guess
    assert last < 0.6 * first, (first, last)
    assert all(e.cross_entropy < e.loss for e in steps[-5:])  # label smoothing costs something
    assert all(e.tokens_per_s > 0 and e.elapsed > 0 and e.train_seconds <= e.elapsed + 1e-6 for e in steps)
    assert steps[-1].elapsed >= steps[0].elapsed
    assert isinstance(events[-1], EvalEvent) and events[-1].step == 60  # one evaluation at the end
    assert trainer.step == 60


def test_eval_events_every_n_steps_with_sane_figures(subset):
    trainer = tiny(subset, steps=20, eval_every=10)
    evals = [e for e in trainer.run() if isinstance(e, EvalEvent)]
    assert [e.step for e in evals] == [10, 20]  # no extra evaluation when the last step was evaluated
    for e in evals:
        assert 0.0 <= e.exact_match <= 1.0 and 0.0 <= e.bleu <= 100.0
        assert e.coref_accuracy is not None and 0.0 <= e.coref_accuracy <= 1.0  # the subset has coref pairs
        assert e.heldout_loss > e.heldout_cross_entropy > 0 and e.n == 20
        assert len(e.samples) == Trainer.n_samples
        src, hyp, ref = e.samples[0]
        assert src == subset["heldout"][0].src and ref == subset["heldout"][0].tgt and isinstance(hyp, str)
    assert trainer.last_eval is evals[-1]
    assert trainer.model.training  # evaluation switched dropout off only for itself


def test_stop_event_stops_training(subset):
    trainer = tiny(subset, steps=1000)
    stop = threading.Event()
    seen = []
    for e in trainer.run(stop):
        if isinstance(e, StepEvent):
            seen.append(e.step)
            if e.step == 3:
                stop.set()
    assert seen == [1, 2, 3] and trainer.step == 3


def test_max_seconds_stops_training(subset):
    trainer = tiny(subset, steps=100_000, max_seconds=0.3)
    events = list(trainer.run())
    assert 0 < trainer.step < 100_000
    assert isinstance(events[-1], EvalEvent)


def test_run_continues_where_it_stopped(subset):
    trainer = tiny(subset, steps=6)
    stop = threading.Event()
    stop.set()
    assert list(trainer.run(stop)) != [] and trainer.step == 0  # stopped at once: only the final evaluation
    assert [e.step for e in trainer.run() if isinstance(e, StepEvent)] == [1, 2, 3, 4, 5, 6]


def test_same_seed_same_weights(subset):
    a, b = tiny(subset, seed=3), tiny(subset, seed=3)
    c = tiny(subset, seed=4)
    pa, pb, pc = (next(t.model.parameters()) for t in (a, b, c))
    assert torch.equal(pa, pb) and not torch.equal(pa, pc)


def test_nan_loss_raises_and_keeps_the_last_good_weights(subset):
    trainer = tiny(subset)
    trainer.train_step()
    trainer.train_step()
    good = [p.detach().clone() for p in trainer.model.parameters()]  # after 2 updates
    trainer.train_step()
    with torch.no_grad():
        next(trainer.model.parameters()).fill_(float("nan"))  # something went badly wrong in update 3
    with pytest.raises(TrainingDiverged, match="lr_scale") as info:
        trainer.train_step()
    assert "nan" in str(info.value) and "after 2 updates" in str(info.value)
    assert trainer.step == 2
    assert all(torch.equal(p, g) for p, g in zip(trainer.model.parameters(), good, strict=True))
    bundle = trainer.bundle()  # still usable
    assert all(torch.isfinite(p).all() for p in bundle.model.parameters())


def test_a_huge_learning_rate_diverges_with_advice(subset):
    trainer = tiny(subset, steps=200, lr_scale=1e30, warmup=1)
    with pytest.raises(TrainingDiverged, match="smaller lr_scale"):
        for _ in trainer.run():
            pass
    assert isinstance(TrainingDiverged("x"), RuntimeError)
    assert all(torch.isfinite(p).all() for p in trainer.model.parameters())


def test_bundle_is_an_independent_eval_copy(subset):
    trainer = tiny(subset, steps=5)
    list(trainer.run())
    bundle = trainer.bundle(name="tiny")
    assert isinstance(bundle, Bundle) and bundle.name == "tiny" and bundle.direction == "en-fr"
    assert not bundle.model.training and bundle.model is not trainer.model
    assert not any(p.requires_grad for p in bundle.model.parameters())
    before = [p.clone() for p in bundle.model.parameters()]
    trainer.tcfg = TrainConfig(**{**TINY, "steps": 10})
    list(trainer.run())  # five more updates
    assert trainer.step == 10
    assert all(torch.equal(p, q) for p, q in zip(bundle.model.parameters(), before, strict=True))
    assert not all(torch.equal(p, q) for p, q in zip(trainer.model.parameters(), before, strict=True))
    meta = bundle.meta
    assert meta["training"]["steps_done"] == 5 and meta["training"]["d_model"] == 32
    assert meta["metrics"]["step"] == 5 and 0 <= meta["metrics"]["exact_match"] <= 1
    assert meta["data_sha256"] == pairs_hash(trainer.train_pairs + trainer.heldout)
    assert bundle.src_vocab.itos == trainer.src_vocab.itos and bundle.src_vocab is not trainer.src_vocab


def test_training_without_the_look_ahead_mask_cheats(subset):
    """Without the mask the decoder sees the word it must predict: a far lower training loss, yet its own
    greedy translations (where the future is not there to copy) are useless."""
    ce, em = {}, {}
    for mask in (True, False):
        trainer = tiny(subset, steps=80, look_ahead_mask=mask)
        losses = [e.cross_entropy for e in trainer.run() if isinstance(e, StepEvent)]
        ce[mask] = sum(losses[-5:]) / 5
        em[mask] = evaluate(trainer.bundle(), subset["train"][:80], trainer.interventions).exact_match
    assert ce[False] < 0.75 * ce[True], ce
    assert em[True] > 0.5 and em[False] < 0.2, em


def test_model_factory_trains_torch_reference(subset):
    trainer = Trainer(TrainConfig(**{**TINY, "steps": 3}), subset, model_factory=TorchReference)
    assert isinstance(trainer.model, TorchReference)
    events = list(trainer.run())
    assert trainer.step == 3 and isinstance(events[-1], EvalEvent)


def test_custom_data_needs_training_pairs():
    with pytest.raises(ValueError, match="training pairs"):
        Trainer(TrainConfig(**TINY), {"train": [], "heldout": []})


def test_default_data_is_the_shipped_set():
    trainer = Trainer(TrainConfig(**TINY))
    data = load_dataset()
    assert len(trainer.train_pairs) == len(data["train"]) and len(trainer.heldout) == len(data["heldout"])
    assert len(trainer.data_sha256) == 64
    assert isinstance(trainer.model, Transformer)


def test_french_to_english_has_no_il_elle_figure():
    data = load_dataset(direction="fr-en")
    subset = {"train": data["train"][:100], "heldout": [p for p in data["heldout"] if p.tag == "coref"][:5]}
    trainer = Trainer(TrainConfig(**{**TINY, "steps": 2, "direction": "fr-en"}), subset)
    ev = [e for e in trainer.run() if isinstance(e, EvalEvent)][-1]
    assert ev.coref_accuracy is None and ev.n == 5  # "it" is "it" whatever the noun: nothing to score
    assert trainer.bundle().langs == ("fr", "en")


@pytest.mark.parametrize("eps", [0.0, 0.1, 0.3])
def test_losses_are_torch_cross_entropy_with_and_without_smoothing(eps):
    """The trainer writes label smoothing out (1 - eps on the right word, eps spread over the vocabulary) and
    takes both losses from one log-softmax: the numbers are torch's own."""
    trainer = Trainer(TrainConfig(**{**TINY, "label_smoothing": eps}), {"train": [Pair("a b", "c d", "x")]})
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 5, 11, generator=g, requires_grad=True)
    gold = torch.tensor([[4, 5, 6, 2, 0], [7, 2, 0, 0, 0], [8, 9, 10, 4, 2]])  # 0 = <pad>
    smoothed, plain = trainer.losses(logits, gold)
    flat = logits.reshape(-1, 11), gold.reshape(-1)
    assert smoothed.item() == pytest.approx(
        F.cross_entropy(*flat, ignore_index=0, label_smoothing=eps).item(), rel=1e-6
    )
    assert plain.item() == pytest.approx(F.cross_entropy(*flat, ignore_index=0).item(), rel=1e-6)
    smoothed.backward()
    expected = torch.autograd.grad(F.cross_entropy(*flat, ignore_index=0, label_smoothing=eps), logits)[0]
    assert torch.allclose(logits.grad, expected, atol=1e-7)


def test_the_whole_schedule_at_once_is_rate_at_every_step():
    from model.train import rates

    got = rates(500, 128, 200, scale=1.5)
    assert got.shape == (500,) and got.dtype == torch.float64
    assert got.tolist() == pytest.approx([rate(s, 128, 200, 1.5) for s in range(1, 501)], rel=1e-12)
    assert int(got.argmax()) + 1 == 200  # the peak at the end of the warm-up
