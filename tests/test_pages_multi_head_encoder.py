"""AppTest tests of the multi-head and encoder-layer pages against the shipped model: the heads' grid and their
concatenation, switching heads off, the coreference head, one head left; LayerNorm, the residuals, the FFN and the
span of the values.

Every number the pages show is compared with an independent pass of the shipped checkpoint through
model.pipeline (not through the app's cache), so a page that showed the wrong tensor would fail.
The self-attention page is in tests/test_pages_attention.py.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from model.pipeline import analyse, prepare, teacher_forced
from model.trace import Interventions
from tests.apptest_util import (
    all_text,
    chart_spec,
    decode,
    figures,
    no_exception,
    open_folds,
    run_app,
    run_page,
    table_with,
    tables,
)
from tests.attention_pages_util import (  # noqa: F401 - the fixtures bundle, ref
    bundle_fixture,
    expected_focus,
    frame,
    heatmaps,
    plain_text,
    ref_fixture,
    title_of,
    weights_rows_sum_to_one,
    z_of,
)

# --- Multi-head ----------------------------------------------------------------------------------


def grid(at) -> dict[str, dict]:
    return {title_of(f): f for f in heatmaps(at) if title_of(f).startswith("head ")}


def test_multi_head_grid_and_concat(ref):
    at = run_page("multi_head", multi_head_layer=0)
    no_exception(at)
    r = ref()
    g = grid(at)
    assert sorted(g) == ["head 0", "head 1", "head 2", "head 3"]  # one heatmap per head
    for h in range(4):
        assert np.allclose(z_of(g[f"head {h}"]), r.trace["enc.0.self_attn.weights"][0, h].numpy(), atol=1e-5)
    concat = r.trace["enc.0.self_attn.concat"][0].numpy()
    T = len(r.src_labels)
    assert concat.shape == (T, 128)
    blocks = [f for f in heatmaps(at) if z_of(f).shape == (T, 128)]
    assert any(np.allclose(z_of(f), concat, atol=1e-5) for f in blocks)
    assert any(np.allclose(z_of(f), r.trace["enc.0.self_attn.out"][0].numpy(), atol=1e-5) for f in blocks)
    assert f"[{T}, 128]" in all_text(at)
    assert "H\\cdot" in all_text(at) or "4\\cdot32 = 128" in all_text(at)
    assert weights_rows_sum_to_one(at) >= 6


def test_multi_head_switch_a_head_off_through_the_page(bundle, ref):
    at = run_page("multi_head", multi_head_layer=0)
    key = "multi_head_on_enc.0.self_attn_2"
    assert at.checkbox(key=key).value is True
    before_df = table_with(at, "p before")
    assert (before_df["change"] == 0).all()  # nothing switched off yet: before = after
    at.checkbox(key=key).uncheck().run()
    no_exception(at)
    assert at.session_state["heads_off"] == ["enc.0.self_attn:2"]
    assert at.checkbox(key=key).value is False
    g = grid(at)
    assert "head 2 (off)" in g and "head 2" not in g
    assert g["head 2 (off)"]["data"][0]["opacity"] < 1
    iv = Interventions(heads_off=frozenset({("enc.0.self_attn", 2)}))
    after = ref(iv=iv)
    assert np.allclose(decode(g["head 2 (off)"]["data"][0]["z"]), after.trace["enc.0.self_attn.weights"][0, 2])
    # probabilities before / after are the model's, scoring the unmodified translation
    r0 = ref()
    tf0 = teacher_forced(bundle, r0.prepared, r0.translation)
    tf1 = teacher_forced(bundle, r0.prepared, r0.translation, iv)
    df = table_with(at, "p before")
    assert np.allclose(df["p before"], tf0.gold_probs, atol=1e-4)
    assert np.allclose(df["p after"], tf1.gold_probs, atol=1e-4)
    assert (df["change"] != 0).any()
    zn = table_with(at, "head 2")
    assert (zn["head 2"] == 0).all() and (zn["head 0"] > 0).all()
    assert "heads 2 are off" in all_text(at)
    # translations before / after are both shown
    text = all_text(at)
    assert r0.translation in text and after.translation in text
    # switch it back on
    at.checkbox(key=key).check().run()
    assert at.session_state["heads_off"] == []
    assert "head 2" in grid(at)


def test_multi_head_checkbox_syncs_with_sidebar():
    at = run_app("multi_head", multi_head_layer=0)
    no_exception(at)
    key = "multi_head_on_enc.0.self_attn_1"
    at.checkbox(key=key).uncheck().run()
    no_exception(at)
    assert at.multiselect(key="heads_off").value == ["enc.0.self_attn:1"]
    at.multiselect(key="heads_off").set_value([]).run()  # the sidebar switches it back on
    assert at.checkbox(key=key).value is True
    assert "head 1" in grid(at)


def test_multi_head_cross_attention_and_word(ref):
    at = run_page("multi_head")
    at.radio(key="multi_head_kind").set_value("decoder cross-attention (encoder-decoder)").run()
    at.selectbox(key="multi_head_layer").set_value(1).run()
    no_exception(at)
    r = ref()
    g = grid(at)
    assert len(g) == 4
    fig = g["head 3"]
    assert fig["data"][0]["x"] == r.src_labels and fig["data"][0]["y"] == r.tgt_labels
    assert np.allclose(z_of(fig), r.trace["dec.1.cross_attn.weights"][0, 3].numpy(), atol=1e-5)
    at.selectbox(key="multi_head_word").set_value(1).run()
    want = r.trace["dec.1.cross_attn.weights"][0, :, 1].numpy()  # [H, Ts]
    assert any(z_of(f).shape == want.shape and np.allclose(z_of(f), want, atol=1e-5) for f in heatmaps(at))
    bars = [f for f in figures(at) if f["data"] and f["data"][0].get("type") == "bar"]
    assert len(bars) == 1 and len(bars[0]["data"]) == 1 + 2 + 4
    assert weights_rows_sum_to_one(at) >= 6


# --- Encoder layer -------------------------------------------------------------------------------


def test_encoder_layernorm_residual_ffn(bundle, ref):
    at = run_page("encoder")
    no_exception(at)
    r = ref()
    t = r.trace.tensors
    st = frame(at, "word")
    assert np.allclose(st["mean after"], 0.0, atol=1e-4)
    assert np.allclose(st["variance after"], 1.0, atol=1e-3)
    resid = t["enc.0.add_norm1.resid"][0]
    assert np.allclose(st["mean before"], resid.mean(-1).numpy(), atol=1e-4)
    assert np.allclose(st["variance before"], resid.var(-1, unbiased=False).numpy(), rtol=1e-4, atol=1e-4)
    # residual: x + attention output = resid, for word 0, first 8 dims
    res = next(df for df in tables(at) if "resid recorded by the model" in df.index)
    x = t["src.input"][0, 0, :8] + t["enc.0.self_attn.out"][0, 0, :8]
    assert np.allclose(res.loc["x + Sublayer(x), added here"], x.numpy(), atol=1e-4)
    assert np.allclose(res.loc["resid recorded by the model"], resid[0, :8].numpy(), atol=1e-4)
    # scale and shift: gamma * normed + beta = out (the trace), gamma/beta are the model's parameters
    aff = next(df for df in tables(at) if "out recorded by the model" in df.index)
    norm = bundle.model.encoder[0].add_norm1.norm
    assert np.allclose(aff.loc["γ (learned)"], norm.weight[:8].detach().numpy(), atol=1e-4)
    assert np.allclose(aff.loc["β (learned)"], norm.bias[:8].detach().numpy(), atol=1e-4)
    assert np.allclose(aff.loc["γ · x̂ + β, computed here"], t["enc.0.add_norm1.out"][0, 0, :8].numpy(), atol=1e-4)
    assert np.allclose(aff.loc["out recorded by the model"], t["enc.0.add_norm1.out"][0, 0, :8].numpy(), atol=1e-4)
    # FFN hidden = relu(x W_1 + b_1), recomputed here from the model's weights
    ffn = bundle.model.encoder[0].ffn
    with torch.no_grad():
        hidden = torch.relu(t["enc.0.add_norm1.out"][0] @ ffn.W_1.weight.T + ffn.W_1.bias).numpy()
    T = len(r.src_labels)
    hm = [f for f in heatmaps(at) if z_of(f).shape == (T, 256)]
    assert len(hm) == 1 and np.allclose(z_of(hm[0]), hidden, atol=1e-4)
    zeros = table_with(at, "ReLU zeros")
    assert zeros["ReLU zeros"].tolist() == (hidden == 0).sum(1).tolist()
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["hidden units set to 0 by the ReLU"] == f"{(hidden == 0).mean():.1%}"
    text = all_text(at)
    assert "N = 6" in text and "N = 2" in text


def test_encoder_second_sublayer_layer_1_and_stack(ref):
    at = run_page("encoder")
    at.selectbox(key="encoder_layer").set_value(1).run()
    at.radio(key="encoder_sub").set_value(2).run()
    at.selectbox(key="encoder_word").set_value(3).run()
    no_exception(at)
    t = ref().trace.tensors
    res = next(df for df in tables(at) if "resid recorded by the model" in df.index)
    assert np.allclose(res.loc["x (input of the sublayer)"], t["enc.1.add_norm1.out"][0, 3, :8].numpy(), atol=1e-4)
    assert np.allclose(res.loc["Sublayer(x)"], t["enc.1.ffn.out"][0, 3, :8].numpy(), atol=1e-4)
    assert np.allclose(res.loc["resid recorded by the model"], t["enc.1.add_norm2.resid"][0, 3, :8].numpy(), atol=1e-4)
    st = frame(at, "word")
    assert np.allclose(st["mean after"], 0.0, atol=1e-4) and np.allclose(st["variance after"], 1.0, atol=1e-3)
    stages = frame(at, "stage")
    assert len(stages) == 1 + 2 * 4
    assert stages["norm"].iloc[0] == pytest.approx(float(t["src.input"][0, 3].norm()), abs=1e-3)
    assert stages["norm"].iloc[-1] == pytest.approx(float(t["enc.out"][0, 3].norm()), abs=1e-3)
    assert stages["cosine to input"].iloc[0] == pytest.approx(1.0)
    text = all_text(at)
    assert r"\mathrm{LayerNorm}\big(x + \mathrm{Sublayer}(x)\big)" in text  # post-LN
    assert r"x + \mathrm{Sublayer}\big(\mathrm{LayerNorm}(x)\big)" in text  # pre-LN


# --- The coreference focus ------------------------------------------------------------------------


def test_multi_head_opens_on_the_coreference_head(ref):
    at = run_page("multi_head")
    no_exception(at)
    r = ref()
    layer, head = expected_focus(r, 1, 5)
    assert at.selectbox(key="multi_head_layer").value == layer
    assert at.selectbox(key="multi_head_head").value == head
    assert f"opens on **layer {layer}, head {head}**" in plain_text(at)
    w = r.trace[f"enc.{layer}.self_attn.weights"][0]  # [H, T, T]
    g = grid(at)
    assert np.allclose(z_of(g["head 0"]), w[0].numpy(), atol=1e-5)
    text = plain_text(at)
    top = w[:, 7].max(-1).values
    h = int(top.argmax())
    assert f"“7 it”: head {h} is the most focused, {float(top[h]):.2f}" in text
    c = r.trace[f"enc.{layer}.self_attn.concat"][0]
    share = torch.stack([c[:, i * 32 : (i + 1) * 32].pow(2).sum() for i in range(4)])
    share = share / share.sum()
    assert f"Head {int(share.argmax())} contributes the most ({float(share.max()):.0%}" in text


# --- Two seed points measured: one head left, the span of the values -----------------------------------


def test_multi_head_one_head_left_on_thinking_machines(bundle):
    """The button loads "thinking machines"; the fold's grid is the lowest teacher-forced p of the unmodified
    translation's words with one head left, computed here independently; decoder layer 1's encoder-decoder
    attention changes the translation with any single head."""
    at = run_page("multi_head")
    at.button(key="multi_head_load_tm").click().run()
    at = open_folds(at)
    no_exception(at)
    assert at.session_state["sentence"] == "thinking machines"
    p = prepare(bundle, "thinking machines")
    base = analyse(bundle, p).translation
    fig = chart_spec(at, "multi_head_one_grid")
    z = decode(fig["data"][0]["z"])
    assert z.shape == (6, 4)
    for h in range(4):
        iv = Interventions(frozenset(("dec.1.cross_attn", g) for g in range(4) if g != h))
        assert z[5, h] == pytest.approx(min(teacher_forced(bundle, p, base, iv).gold_probs), abs=1e-6)
        assert fig["data"][0]["text"][5][h].startswith("✗")
    text = all_text(at)
    assert "4 of 24 runs change the translation" in text and "needs more than one head" in text
    df = frame(at, "head left on")
    assert (
        list(df["translation"])[0]
        == analyse(bundle, p, Interventions(frozenset(("enc.0.self_attn", g) for g in (1, 2, 3)))).translation
    )  # the page's layer: encoder layer 0


def test_encoder_span_of_the_values(bundle, ref):
    at = run_page("encoder", encoder_layer=1)
    no_exception(at)
    r = ref()
    from explain.span import span_check

    c = span_check(bundle.model, r.trace, 1)
    fig = chart_spec(at, "encoder_span")
    for i, s in enumerate(c.steps):
        assert decode(fig["data"][1 + i]["y"]) == pytest.approx(np.maximum(s.share.numpy(), 1e-10), rel=1e-6)
    text = all_text(at)
    assert "Steps 1" in text and "stay inside their spans to float error" in text
    assert f"on average {float(c.steps[3].share.mean()):.0%} of its length" in text
