"""The recurrent encoder-decoder with attention (model/rnn.py): cells against torch's, attention against a
re-computation from its own recorded tensors, the trace names, training, checkpoints and the CLIs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from model import checkpoint
from model.checkpoint import Bundle
from model.data import Pair, build_vocabs, load_dataset
from model.decoding import greedy_decode
from model.pipeline import analyse, prepare
from model.rnn import ATTENTIONS, CELLS, GRUCell, LSTMCell, RNNConfig, RNNSeq2Seq, tensor_names, traced
from model.trace import Trace
from model.train import TrainConfig, Trainer

ROOT = Path(__file__).resolve().parents[1]
RNN_STEM = ROOT / "assets" / "checkpoints" / "rnn"


def small(cell="gru", attention="additive", **kw) -> RNNSeq2Seq:
    torch.manual_seed(0)
    cfg = RNNConfig(
        src_vocab=30, tgt_vocab=40, d_emb=12, hidden=16, d_attn=10, cell=cell, attention=attention, dropout=0.0, **kw
    )
    return RNNSeq2Seq(cfg).eval()


def batch() -> tuple[torch.Tensor, torch.Tensor]:
    """Two sentences, the second padded: src [2, 6], tgt_in [2, 5]."""
    src = torch.tensor([[5, 6, 7, 8, 9, 3], [11, 12, 3, 0, 0, 0]])
    tgt_in = torch.tensor([[1, 7, 8, 9, 10], [1, 20, 21, 0, 0]])
    return src, tgt_in


# --- The cells are the textbook's (and torch's) ---------------------------------------------------


def copy_into(ref: torch.nn.Module, cell, suffix: str = "") -> None:
    """Our cell's W_x and W_h into torch's reference (a cell, or with suffix "_l0" a one-layer GRU/LSTM)."""
    with torch.no_grad():
        for torch_name, ours in (("ih", cell.W_x), ("hh", cell.W_h)):
            getattr(ref, f"weight_{torch_name}{suffix}").copy_(ours.weight)
            getattr(ref, f"bias_{torch_name}{suffix}").copy_(ours.bias)


def test_gru_cell_equals_torch_grucell():
    torch.manual_seed(1)
    ours, ref = GRUCell(7, 5), torch.nn.GRUCell(7, 5)
    copy_into(ref, ours)
    x, h = torch.randn(4, 7), torch.randn(4, 5)
    new, gates = ours(x, h)
    torch.testing.assert_close(new, ref(x, h), atol=1e-6, rtol=0)
    assert set(gates) == {"r", "z", "n"}
    torch.testing.assert_close(new, (1 - gates["z"]) * gates["n"] + gates["z"] * h)  # h' = (1 - z) n + z h


def test_lstm_cell_equals_torch_lstmcell():
    torch.manual_seed(2)
    ours, ref = LSTMCell(7, 5), torch.nn.LSTMCell(7, 5)
    copy_into(ref, ours)
    x, h, c = torch.randn(4, 7), torch.randn(4, 5), torch.randn(4, 5)
    new, gates = ours(x, torch.cat([h, c], dim=-1))
    h_ref, c_ref = ref(x, (h, c))
    torch.testing.assert_close(new[:, :5], h_ref, atol=1e-6, rtol=0)
    torch.testing.assert_close(new[:, 5:], c_ref, atol=1e-6, rtol=0)
    torch.testing.assert_close(gates["c"], gates["f"] * c + gates["i"] * gates["g"])  # c' = f c + i g


@pytest.mark.parametrize("cell", CELLS)
def test_the_encoder_equals_torch_recurrent_layer(cell):
    """The whole encoder loop equals torch.nn.GRU / nn.LSTM over the sentence, with the same weights."""
    m = small(cell)
    ref = (torch.nn.GRU if cell == "gru" else torch.nn.LSTM)(12, 16, batch_first=True)
    copy_into(ref, m.encoder, "_l0")
    src, tgt_in = batch()
    t = traced(m, src[:1], tgt_in[:1])
    expected, _ = ref(t["rnn.src.embed"])
    torch.testing.assert_close(t["rnn.enc.h"], expected, atol=1e-6, rtol=0)


# --- Attention, recomputed from what the model recorded --------------------------------------------


@pytest.mark.parametrize("cell", CELLS)
@pytest.mark.parametrize("attention", ATTENTIONS)
def test_attention_equals_its_formula_on_the_recorded_tensors(cell, attention):
    m = small(cell, attention)
    src, tgt_in = batch()
    t = traced(m, src, tgt_in)
    q, k, v = t["rnn.dec.q"], t["rnn.attn.k"], t["rnn.attn.v"]  # [B, Tt, A], [B, Ts, A], [B, Ts, Dv]
    h = t["rnn.enc.h"]
    if attention == "additive":  # e_ti = vᵀ tanh(W s_{t-1} + U h_i), v_i = h_i
        scores = torch.tanh(q[:, :, None, :] + k[:, None, :, :]) @ m.attention.v.weight[0]
        torch.testing.assert_close(v, h)
        torch.testing.assert_close(k, h @ m.attention.W_k.weight.T)
    else:  # e_ti = k_iᵀ q_t with k = W_K h, q = W_Q s, v = W_V h
        scores = q @ k.transpose(1, 2)
        torch.testing.assert_close(v, h @ m.attention.W_v.weight.T)
    # the query of step t comes from the state before it: s_0 for the first step, then s_1, s_2, ...
    states = torch.cat([t["rnn.dec.init"][:, None], t["rnn.dec.s"][:, :-1]], dim=1)  # [B, Tt, H]
    torch.testing.assert_close(q, m.attention.W_q(states), atol=1e-6, rtol=0)
    pad = src == 0  # [B, Ts]
    scores = scores.masked_fill(pad[:, None, :], float("-inf"))
    torch.testing.assert_close(t["rnn.dec.scores"], scores, atol=1e-6, rtol=0)
    alpha = t["rnn.dec.alpha"]
    torch.testing.assert_close(alpha, torch.softmax(scores, dim=-1), atol=1e-6, rtol=0)
    torch.testing.assert_close(alpha.sum(-1), torch.ones(alpha.shape[:2]), atol=1e-6, rtol=0)
    assert (alpha[1, :, 3:] == 0).all()  # padded source positions get exactly no weight
    context = (alpha[..., None] * v[:, None]).sum(2)  # c_t = Σ_i α_ti v_i
    torch.testing.assert_close(t["rnn.dec.context"], context, atol=1e-6, rtol=0)


def test_s0_is_read_at_each_sentences_own_last_token():
    m = small()
    src, tgt_in = batch()
    t = traced(m, src, tgt_in)
    h = t["rnn.enc.h"]
    torch.testing.assert_close(t["rnn.dec.init"][0], torch.tanh(m.W_init(h[0, 5])))
    torch.testing.assert_close(t["rnn.dec.init"][1], torch.tanh(m.W_init(h[1, 2])))  # not the padding


def test_padding_does_not_change_a_sentence():
    m = small("lstm", "qkv")
    src, tgt_in = batch()
    both = m(src, tgt_in)
    alone = m(src[1:, :3], tgt_in[1:, :3])
    torch.testing.assert_close(both[1, :3], alone[0], atol=1e-6, rtol=0)


def test_untraced_and_traced_passes_agree_and_names_are_the_golden_list():
    m = small()
    src, tgt_in = batch()
    t = traced(m, src, tgt_in)
    torch.testing.assert_close(t["logits"], m(src, tgt_in, Trace(record=False)))
    assert list(t.tensors) == tensor_names("gru")
    assert tensor_names("gru") == [
        "rnn.src.tokens",
        "rnn.src.embed",
        "rnn.enc.r",
        "rnn.enc.z",
        "rnn.enc.n",
        "rnn.enc.h",
        "rnn.attn.k",
        "rnn.attn.v",
        "rnn.dec.init",
        "rnn.tgt.tokens",
        "rnn.tgt.embed",
        "rnn.dec.q",
        "rnn.dec.scores",
        "rnn.dec.alpha",
        "rnn.dec.context",
        "rnn.dec.r",
        "rnn.dec.z",
        "rnn.dec.n",
        "rnn.dec.s",
        "rnn.dec.out",
        "logits",
        "probs",
    ]
    assert list(traced(small("lstm"), src, tgt_in).tensors) == tensor_names("lstm")
    shapes = {n: tuple(x.shape) for n, x in t.tensors.items()}
    assert shapes["rnn.enc.h"] == (2, 6, 16) and shapes["rnn.dec.alpha"] == (2, 5, 6)
    assert shapes["rnn.dec.context"] == (2, 5, 16) and shapes["probs"] == (2, 5, 40)


def test_a_step_only_sees_its_past():
    """Decoder step t never reads a later target word (recurrence, no mask needed)."""
    m = small()
    src, tgt_in = batch()
    changed = tgt_in.clone()
    changed[0, 3:] = 2
    torch.testing.assert_close(m(src, tgt_in)[0, :3], m(src, changed)[0, :3])


@pytest.mark.parametrize("cell", CELLS)
@pytest.mark.parametrize("attention", ATTENTIONS)
def test_expected_tensors_are_the_state_dict(cell, attention):
    from model.rnn import expected_tensors

    m = small(cell, attention)
    assert expected_tensors(m.cfg) == {k: tuple(v.shape) for k, v in m.state_dict().items()}


@pytest.mark.parametrize(
    "kw",
    [
        {"hidden": 0},
        {"hidden": 10_000},
        {"cell": "rnn"},
        {"attention": "dot"},
        {"dropout": 1.0},
        {"src_vocab": True},
        {"max_len": 2},
    ],
)
def test_config_is_validated_with_bounds(kw):
    base = {"src_vocab": 30, "tgt_vocab": 40, **kw}
    with pytest.raises(ValueError, match="Invalid RNN config"):
        RNNConfig(**base)


def test_too_long_input_is_refused():
    m = small(max_len=8)
    with pytest.raises(ValueError, match="max_len"):
        m.encode(torch.ones(1, 9, dtype=torch.long))


# --- Training, decoding, checkpoints --------------------------------------------------------------


def tiny_data() -> dict[str, list[Pair]]:
    data = load_dataset()
    return {"train": data["train"][:400], "heldout": data["heldout"][:40]}


def test_a_tiny_rnn_trains():
    tcfg = TrainConfig(
        arch="rnn", d_model=32, batch_size=32, steps=60, warmup=20, lr_scale=1.0, eval_every=0, dropout=0.0
    )
    trainer = Trainer(tcfg, tiny_data())
    assert isinstance(trainer.model, RNNSeq2Seq)
    losses = [ev.loss for ev in trainer.run() if hasattr(ev, "loss")]
    assert len(losses) == 60
    assert sum(losses[-10:]) / 10 < 0.8 * sum(losses[:10]) / 10
    assert trainer.last_eval is not None and 0 <= trainer.last_eval.exact_match <= 1
    b = trainer.bundle()
    assert b.meta["arch"] == "rnn" and b.meta["training"]["cell"] == "gru"


def small_bundle(cell="lstm", attention="qkv") -> Bundle:
    src_vocab, tgt_vocab = build_vocabs(tiny_data()["train"], "en-fr")
    torch.manual_seed(3)
    cfg = RNNConfig(len(src_vocab), len(tgt_vocab), d_emb=8, hidden=12, d_attn=8, cell=cell, attention=attention)
    model = RNNSeq2Seq(cfg).eval()
    return Bundle(model, src_vocab, tgt_vocab, "en-fr", {"arch": "rnn"}, "tiny")


def test_checkpoint_round_trip(tmp_path):
    b = small_bundle()
    checkpoint.save(b, tmp_path / "tiny")
    meta = json.loads((tmp_path / "tiny.json").read_text())
    assert meta["arch"] == "rnn" and meta["config"]["cell"] == "lstm"
    back = checkpoint.load(tmp_path / "tiny")
    assert isinstance(back.model, RNNSeq2Seq) and back.config == b.config
    src, tgt_in = torch.tensor([[5, 6, 3]]), torch.tensor([[1, 7, 8]])
    torch.testing.assert_close(back.model(src, tgt_in), b.model(src, tgt_in), atol=0, rtol=0)


def test_uploads_and_training_jobs_accept_only_transformers():
    """`from_bytes` (uploads, the training page's jobs) feeds pages that draw a Transformer: an RNN
    checkpoint is refused there with a message; `load` (the command line) reads it."""
    weights, meta = checkpoint.to_bytes(small_bundle())
    with pytest.raises(checkpoint.CheckpointError, match="rnn"):
        checkpoint.from_bytes(weights, meta)
    assert isinstance(checkpoint.from_bytes(weights, meta, archs=("transformer", "rnn")).model, RNNSeq2Seq)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"hidden": 100_000}, "hidden must be in"),
        ({"cell": "x" * 10_000}, "cell must be one of"),
        ({"heads": 4}, "unknown field"),
        ({"d_attn": 12.5}, "whole number"),
        ({"dropout": "0.1"}, "dropout"),
        ({"attention": "additive"}, "weights do not match"),  # the qkv weights under an additive config
    ],
)
def test_a_hostile_rnn_config_is_refused_with_a_message(change, message):
    weights, meta = checkpoint.to_bytes(small_bundle("lstm", "qkv"))
    m = json.loads(meta)
    m["config"].update(change)
    m.pop("weights_sha256")
    with pytest.raises(checkpoint.CheckpointError, match=message) as e:
        checkpoint.from_bytes(weights, json.dumps(m).encode(), archs=("rnn",))
    assert len(str(e.value)) < 600


def test_a_transformer_checkpoint_is_not_read_as_an_rnn(tmp_path):
    b = small_bundle()
    checkpoint.save(b, tmp_path / "tiny")
    meta = json.loads((tmp_path / "tiny.json").read_text())
    meta["arch"] = "transformer"
    (tmp_path / "tiny.json").write_text(json.dumps(meta))
    with pytest.raises(checkpoint.CheckpointError):
        checkpoint.load(tmp_path / "tiny")
    meta["arch"] = "lstm-9000"
    (tmp_path / "tiny.json").write_text(json.dumps(meta))
    with pytest.raises(checkpoint.CheckpointError, match="arch"):
        checkpoint.load(tmp_path / "tiny")


def test_decoding_and_pipeline_work_unchanged():
    b = small_bundle("gru", "additive")
    p = prepare(b, "i am a student")
    g = greedy_decode(b.model, p.src(), max_len=6)
    assert len(g.tokens) <= 6
    a = analyse(b, p)
    Tt = len(a.out_tokens) + 1
    assert a.trace["rnn.dec.alpha"].shape == (1, Tt, len(p.ids))
    assert a.trace["probs"].shape[:2] == (1, Tt)


# --- The shipped checkpoint and the command line --------------------------------------------------


def run(*args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def test_shipped_rnn_checkpoint_is_small_and_documented():
    meta = json.loads(RNN_STEM.with_name("rnn.json").read_text())
    assert meta["arch"] == "rnn"
    assert RNN_STEM.with_name("rnn.safetensors").stat().st_size < 3_000_000
    m = meta["metrics"]
    assert {"exact_match", "bleu", "coref_accuracy", "n"} <= set(m) and m["n"] == 586
    b = checkpoint.load(RNN_STEM)
    assert isinstance(b.model, RNNSeq2Seq)


def test_translate_and_evaluate_cli_read_the_rnn_checkpoint():
    r = run("model.translate", "--checkpoint", str(RNN_STEM), "i am a student")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "je suis étudiant\n"
    r = run("model.translate", "--beam", "3", "--checkpoint", str(RNN_STEM), "i am a student")
    assert r.returncode == 0 and r.stdout == "je suis étudiant\n", r.stderr
    r = run("model.evaluate", "--checkpoint", str(RNN_STEM))
    assert r.returncode == 0, r.stderr
    assert "exact match" in r.stdout and "BLEU" in r.stdout and "il/elle" in r.stdout


def test_train_cli_writes_an_rnn_checkpoint_the_other_clis_read(tmp_path):
    stem = tmp_path / "mini"
    r = run(
        "model.train",
        "--arch",
        "rnn",
        "--cell",
        "lstm",
        "--attention",
        "qkv",
        "--d-model",
        "16",
        "--steps",
        "3",
        "--eval-every",
        "0",
        "--out",
        str(stem),
    )
    assert r.returncode == 0, r.stderr
    meta = json.loads(stem.with_name("mini.json").read_text())
    assert meta["arch"] == "rnn" and meta["config"]["cell"] == "lstm" and meta["config"]["attention"] == "qkv"
    r = run("model.translate", "--checkpoint", str(stem), "i am a student")
    assert r.returncode == 0, r.stderr
    r = run("model.translate", "--checkpoint", str(stem), "  ")
    assert r.returncode == 2 and "empty" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["--arch", "lstm"],
        ["--arch", "rnn", "--cell", "vanilla"],
        ["--arch", "rnn", "--attention", "dot"],
        ["--arch", "rnn", "--d-model", "0"],
        ["--arch", "rnn", "--d-model", "100000"],
    ],
)
def test_train_cli_rejects_bad_rnn_settings_with_exit_2(args, capsys):
    from model.cli import train as main

    try:
        code = main([*args, "--steps", "1"])
    except SystemExit as e:  # argparse's own refusal of an unknown choice
        code = e.code
    assert code == 2
    err = capsys.readouterr().err
    assert err and "Traceback" not in err


def test_evaluate_cli_rejects_a_missing_checkpoint(tmp_path, capsys):
    from model.cli import evaluate as main

    assert main(["--checkpoint", str(tmp_path / "nothing")]) == 2
    assert "cannot load" in capsys.readouterr().err


# --- The measurements (explain/compare.py) and their notices (viz/rnn.py) ---------------------------


def test_sequential_steps_count_the_real_pairs():
    from explain.compare import sequential_steps

    pairs = [Pair("i am a student", "je suis étudiant"), Pair("i am a cat", "je suis un chat")]
    rows = sequential_steps(pairs)
    assert rows == [{"m": 5, "t": 4, "n": 2, "rnn": 9, "transformer_decode": 5, "transformer_train": 2}]


def test_jacobian_norms_see_the_recurrence_is_causal():
    from explain.compare import jacobian_norms

    m = small()
    x = torch.randn(6, 12)
    norms = jacobian_norms(lambda v: m.recur(v[None])[0], x)  # [6, 6]
    assert norms.shape == (6, 6)
    assert (norms.triu(1) == 0).all()  # h_t never depends on a later word
    assert (norms[torch.ones(6, 6, dtype=torch.bool).tril()] > 0).all()
    w = torch.randn(3, 12)
    linear = jacobian_norms(lambda v: v @ w.T, x)  # out_t = W x_t: ‖W‖ on the diagonal, 0 elsewhere
    torch.testing.assert_close(linear, torch.eye(6) * w.norm())


def test_gradient_by_distance_is_relative_to_distance_0():
    from explain.compare import gradient_by_distance

    rnn_b = small_bundle("gru", "additive")
    tf_b = checkpoint.load(checkpoint.SHIPPED)
    tf_b = Bundle(tf_b.model, rnn_b.src_vocab, rnn_b.tgt_vocab, "en-fr")  # same data: the same vocabularies
    g = gradient_by_distance(rnn_b, tf_b, ["i am a student", "the cat is under the table"], max_distance=3)
    assert g["distance"] == [0, 1, 2, 3] and g["rnn"][0] == 1.0 and g["transformer"][0] == 1.0
    assert g["n_sentences"] == 2 and g["n_pairs"] == sum(g["count"])


def test_decoder_step_notice_states_the_recorded_weight():
    from viz.rnn import decoder_step, step_notice

    m = small()
    src, tgt_in = batch()
    t = traced(m, src[:1], tgt_in[:1])
    labels = [f"{i} w{i}" for i in range(6)]
    s = decoder_step(t, 2, [f"{i} y{i}" for i in range(5)])
    top = int(t["rnn.dec.alpha"][0, 2].argmax())
    assert f"“w{top}” (α = {float(t['rnn.dec.alpha'][0, 2, top]):.2f})" in step_notice(s, labels, 2)


COMPARISON = ROOT / "assets" / "rnn_comparison.json"


def test_shipped_comparison_and_its_notices():
    from viz import rnn_measured as vm

    data = json.loads(COMPARISON.read_text())
    parts = {"sequential_steps", "encode_time", "training", "accuracy_by_length", "coref", "gradient", "meta"}
    assert parts <= set(data)
    for fig in (vm.steps_figure, vm.encode_time_figure, vm.length_figure, vm.gradient_figure):
        assert fig(data).data
    last = data["encode_time"]["rows"][-1]
    assert f"{last['rnn_ms'] / last['transformer_ms']:.1f}x as long" in vm.encode_time_notice(data)
    t = data["training"]
    for arch in ("rnn", "transformer"):  # each model's result is the best recipe of the same sweep
        rows = [r for r in t["sweep"] if r["arch"] == arch]
        assert len(rows) == len(t["sweep"]) // 2
        assert t[arch]["cpu_seconds_to_target"] == min(r["cpu_seconds_to_target"] for r in rows)
    r, f = t["rnn"], t["transformer"]
    notice = vm.training_notice(data)
    assert f"after {r['steps_to_target']:.0f} steps and {r['cpu_seconds_to_target']:.1f} CPU s" in notice
    first = "the Transformer" if r["cpu_seconds_to_target"] > f["cpu_seconds_to_target"] else "the RNN"
    assert f"{first} got there first" in notice
    fewest = {
        a: min(x["steps_to_target"] for x in t["sweep"] if x["arch"] == a and x["steps_to_target"])
        for a in ("rnn", "transformer")
    }
    if first == "the Transformer":  # a lead said to come from fewer steps is checked against the whole sweep
        assert ("In steps alone the Transformer is not ahead" in notice) == (fewest["rnn"] <= fewest["transformer"])
    assert len(vm.sweep_table(data)) == len(t["sweep"])
    g = data["gradient"]
    assert f"{g['rnn'][-1]:.2g}" in vm.gradient_notice(data)
    assert len(vm.training_table(data)) == 2 and len(vm.length_table(data)) == len(data["accuracy_by_length"]["rows"])


def test_bench_prints_its_tables(capsys):
    from bench.bench_rnn import main

    assert main(["--skip-training", "--sentences", "2", "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    for part in ("1. sequential steps", "2. encode a batch", "4. held-out exact match", "5. ‖∂out_t/∂x_i‖"):
        assert part in out


def test_measured_charts_show_every_point_with_the_legend_off_the_data():
    """Each measured chart's axis ranges hold every point it draws (the steps chart's last RNN point, the one its
    notice cites, included), and its legend sits outside the plotting area: above it, bottom edge at its top."""
    import math

    from viz import rnn_measured as vm

    data = json.loads(COMPARISON.read_text())
    last = data["sequential_steps"]["rows"][-1]
    assert f"the RNN takes {last['rnn']} steps" in vm.steps_notice(data)
    for build in (vm.steps_figure, vm.encode_time_figure, vm.length_figure, vm.gradient_figure):
        fig = build(data)
        legend = fig.layout.legend
        assert (legend.yanchor == "bottom" and legend.y >= 1) or (legend.yanchor == "top" and legend.y <= 0), legend
        log = fig.layout.yaxis.type == "log"
        lo, hi = fig.layout.yaxis.range
        for trace in fig.data:
            for y in trace.y:
                assert lo < (math.log10(y) if log else y) < hi, (build.__name__, trace.name, y, (lo, hi))
            if trace.type == "scatter":
                x_lo, x_hi = fig.layout.xaxis.range
                assert all(x_lo < x < x_hi for x in trace.x), (build.__name__, trace.name, trace.x)
    steps = vm.steps_figure(data)
    rnn = next(tr for tr in steps.data if tr.name.startswith("RNN"))
    assert (rnn.x[-1], rnn.y[-1]) == (last["m"], last["rnn"])  # the notice's point, inside the ranges above
