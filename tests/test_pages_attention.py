"""AppTest tests of the self-attention page against the shipped model, and of what every encoder-side page shares:
navigation, an empty or HTML sentence, big tables folded away, tiny and large random-weight models.

Every number the pages show is compared with an independent pass of the shipped checkpoint through
model.pipeline (not through the app's cache), so a page that showed the wrong tensor would fail.
The multi-head and encoder-layer pages are in tests/test_pages_multi_head_encoder.py.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from explain.coref import decision as coref_decision
from model.examples import COREFERENCE, COREFERENCE_WIDE
from model.trace import Interventions
from tests.apptest_util import (
    TIMEOUT,
    all_text,
    chart_spec,
    no_exception,
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
from viz.attention import STEP_COLUMNS

WIDE = COREFERENCE_WIDE
TIRED = COREFERENCE
HTML = "<script>alert('x')</script> <b>the animal</b> is <i>tired</i> & \"it\" <img src=x onerror=alert(1)>"

# --- Self-attention -----------------------------------------------------------------------------


def check_step_table(at, r, layer: int, head: int, word: int, scale: bool = True):
    t = r.trace.tensors
    m = f"enc.{layer}.self_attn"
    df = frame(at, "word")
    assert list(df.columns) == list(STEP_COLUMNS)
    assert list(df["word"]) == r.src_labels
    q, k = t[f"{m}.q"][0, head, word], t[f"{m}.k"][0, head]
    qk = (q @ k.T).numpy()  # [T]
    assert np.allclose(df["q·k"], qk, atol=2e-3)
    if scale:
        assert np.allclose(df["÷√d_k"], qk / 5.657, rtol=2e-4, atol=2e-3)  # d_k = 32: sqrt = 5.657
    else:
        assert np.allclose(df["÷√d_k"], df["q·k"])
    w = df["softmax weight"].to_numpy()
    assert w.sum() == pytest.approx(1.0, abs=1e-3)
    assert np.allclose(w, t[f"{m}.weights"][0, head, word].numpy(), atol=1e-4)
    z = next(df_.value for df_ in at.dataframe if "z recorded by the model" in df_.value.index)
    z_model = t[f"{m}.z"][0, head, word].numpy()
    assert np.allclose(z.loc["z recorded by the model"], z_model, atol=1e-4)
    assert np.allclose(z.loc["Σ weight × v (sum of the rows above)"], z_model, atol=1e-4)


def test_self_attention_step_table_is_the_models(ref):
    at = run_page("self_attention")
    no_exception(at)
    r = ref()
    assert r.prepared.tokens[7] == "it"
    assert at.selectbox(key="self_attention_word").value == 7  # "it" is picked by default
    layer, head = expected_focus(r, 1, 5)  # the coreference sentence opens on the head linking "it" to "animal"
    check_step_table(at, r, layer, head, 7)
    text = all_text(at)
    assert "5.657" in text and "d_k = 32" in text
    # pick another layer, head and word: the table follows
    at.selectbox(key="self_attention_layer").set_value(1).run()
    at.selectbox(key="self_attention_head").set_value(2).run()
    at.selectbox(key="self_attention_word").set_value(1).run()
    no_exception(at)
    check_step_table(at, r, 1, 2, 1)
    # the matrix-form heatmaps are the trace's scores / scaled / weights of that head
    hm = heatmaps(at)
    t = r.trace.tensors
    for name in ("scores", "scaled", "weights"):
        want = t[f"enc.1.self_attn.{name}"][0, 2].numpy()
        assert any(z_of(f).shape == want.shape and np.allclose(z_of(f), want, atol=1e-5) for f in hm), name
    assert weights_rows_sum_to_one(at) == 6  # matrix form, column form, plain, learned, "it" tired / wide


def test_self_attention_textbook_mode():
    at = run_page("self_attention")
    at.radio(key="self_attention_mode").set_value("Thinking Machines (textbook example)").run()
    no_exception(at)
    text = all_text(at)
    for number in ("112", "96", "14", "12", "0.88", "0.12", "√64 = 8"):
        assert number in text, number
    assert "Textbook example" in text
    df = frame(at, "word")
    assert df["q·k"].tolist() == [112.0, 96.0]
    assert df["÷√d_k"].tolist() == [14.0, 12.0]
    assert np.allclose(df["softmax weight"], [0.8808, 0.1192], atol=1e-4)
    tb = frame(at, "0 Thinking")
    assert tb.loc["Softmax"].tolist() == ["0.88", "0.12"]
    # the query of "Machines": q2·k1 = 32, q2·k2 = 80
    at.radio(key="self_attention_tb_word").set_value(1).run()
    assert frame(at, "word")["q·k"].tolist() == [32.0, 80.0]


def test_self_attention_scaling_off(ref):
    at = run_page("self_attention", iv_scale=False, self_attention_layer=0, self_attention_head=0)
    no_exception(at)
    r = ref(iv=Interventions(scale=False))
    check_step_table(at, r, 0, 0, 7, scale=False)
    assert "equals the raw score" in all_text(at)
    on = ref()
    assert not np.allclose(r.trace["enc.0.self_attn.weights"], on.trace["enc.0.self_attn.weights"])


def test_self_attention_head_off_shows_z_zero(ref):
    at = run_page("self_attention", heads_off=["enc.0.self_attn:0"], self_attention_layer=0, self_attention_head=0)
    no_exception(at)
    r = ref(iv=Interventions(heads_off=frozenset({("enc.0.self_attn", 0)})))
    z = next(df for df in tables(at) if "z recorded by the model" in df.index)
    assert np.allclose(z.loc["z recorded by the model"], 0.0)
    assert np.allclose(
        z.loc["Σ weight × v (sum of the rows above)"],
        (r.trace["enc.0.self_attn.weights"][0, 0, 7] @ r.trace["enc.0.self_attn.v"][0, 0]).numpy(),
        atol=1e-4,
    )
    assert "switched off" in all_text(at)


def test_self_attention_why_scale_demo():
    at = run_page("self_attention")
    var = frame(at, "d_k")
    assert np.allclose(var["Var(q·k) measured"], var["theory (= d_k)"], rtol=0.1)
    at.select_slider(key="self_attention_dk").set_value(1024).run()
    no_exception(at)
    metrics = {m.label: m.value for m in at.metric}
    assert float(metrics["measured Var(q·k), d_k = 1024"]) == pytest.approx(1024, rel=0.1)
    assert float(metrics["max weight, no scaling"]) > float(metrics["max weight, ÷√d_k"])
    sat = table_with(at, "max weight, no scaling")
    big = sat[sat["d_k"] == 1024].iloc[0]
    assert big["max weight, no scaling"] > 0.9 and big["‖Jacobian‖, no scaling"] < big["‖Jacobian‖, ÷√d_k"]


def test_self_attention_plain_and_coreference(ref):
    at = run_page("self_attention")
    r, w = ref(), ref(WIDE)
    hm = heatmaps(at)
    x = r.trace["src.input"][0].double()
    plain = torch.softmax(x @ x.T, -1).numpy()
    assert any(np.allclose(z_of(f), plain, atol=1e-5) for f in hm if z_of(f).shape == plain.shape)
    # "it" across every head of every layer, for both sentences
    for a in (r, w):
        it = a.prepared.tokens.index("it")
        want = np.concatenate([a.trace[f"enc.{i}.self_attn.weights"][0, :, it].numpy() for i in range(2)])
        assert any(z_of(f).shape == want.shape and np.allclose(z_of(f), want, atol=1e-5) for f in hm)
    text = all_text(at)
    assert "too tired" in text and "too wide" in text
    assert weights_rows_sum_to_one(at) == 6  # matrix form, column form, plain, learned, "it" tired / wide
    # the button loads the "wide" sentence for the whole page
    at.button(key="self_attention_load_wide").click().run()
    no_exception(at)
    assert at.session_state["sentence"] == WIDE
    layer, head = expected_focus(w, 5, 1)  # a new coreference sentence moves the pickers to its own focus
    assert (at.selectbox(key="self_attention_layer").value, at.selectbox(key="self_attention_head").value) == (
        layer,
        head,
    )
    check_step_table(at, w, layer, head, 7)


# --- Every page: through navigation, empty input, HTML input -------------------------------------

PAGES = ["self_attention", "multi_head", "encoder"]
TITLES = {
    "self_attention": "Self-attention, step by step",
    "multi_head": "Multi-head attention",
    "encoder": "The encoder layer",
}


@pytest.mark.parametrize("page", PAGES)
def test_page_through_the_app(page):
    at = run_app(page)
    no_exception(at)
    assert at.title[0].value == TITLES[page]
    assert len(heatmaps(at)) >= 3


@pytest.mark.parametrize("page", PAGES)
@pytest.mark.parametrize("text", ["", "   "])
def test_empty_sentence_prompts(page, text):
    at = run_page(page, sentence=text)
    no_exception(at)
    assert any("Type a sentence" in i.value for i in at.info)
    assert not heatmaps(at)


@pytest.mark.parametrize("page", PAGES)
def test_html_input_is_harmless(page):
    at = run_app(page, sentence=HTML)
    no_exception(at)
    assert heatmaps(at)
    for el in at.markdown:
        assert "<script" not in el.value and "<img" not in el.value


# --- The coreference focus, the projection, textbook labels, collapsed tables, notices --------


def visible_numbers(at) -> int:
    """Cells of the dataframes that are not folded away in an expander."""
    folded = sum(df.size for exp in at.expander for df in tables(exp))
    return sum(df.size for df in tables(at)) - folded


def test_self_attention_opens_on_the_coreference_head_and_says_why(ref, bundle):
    at = run_page("self_attention")
    r = ref()
    layer, head = expected_focus(r, 1, 5)
    assert (layer, head) != (0, 0)  # today's weights: layer 0, head 0 parks "it" on <eos>
    w = r.trace[f"enc.{layer}.self_attn.weights"][0, head, 7]
    text = plain_text(at)
    assert f"opens on **layer {layer}, head {head}**" in text
    # audit 4, A1: the head is the best among those that give "animal" more than "street", and the text says so (another
    # head gives "animal" more, and "street" more still)
    enc = torch.stack([r.trace[f"enc.{i}.self_attn.weights"][0, :, 7] for i in range(2)])  # [L, H, Ts]
    assert float(enc[..., 1].max()) > float(w[1])  # so "the most" alone would be false
    assert (
        f"of the heads whose row for “it” gives “animal” more than “street”, it gives “animal” the most, "
        f"{float(w[1]):.2f}, against {float(w[5]):.2f} for “street”. Both weights are small: by the weights, no "
        "encoder head of this model links “it” to “animal”, the noun “tired” describes."
    ) in text
    assert float(w[1]) < 0.5 and "no real preference" not in text
    assert "park" in text and "<eos>" in text  # attention to <eos> is explained up front
    # the coreference heatmaps say plainly that no encoder head picks out the deciding noun
    assert f"No encoder head picks out “animal”: the most any head gives it is {float(enc[..., 1].max()):.2f}" in text
    assert "No encoder head picks out “street”" in text
    # audit 4, A2: no claim from weights that the pronoun is decided where the decoder reads the adjective; the
    # tracing says where "tired" reaches it, and the switch-off runs name every head that reads it (B3)
    assert "the pronoun is decided later" not in text and "Only “tired” carries it in the encoder" in text
    d = coref_decision(bundle, TIRED)
    assert d.readers == ((0, 0), (0, 1), (0, 2), (0, 3), (1, 3)) and d.readers_off.pronoun == "il"
    assert (
        "Heads whose row gives “tired” 0.5 or more: layer 0 heads 0, 1, 2, 3; layer 1 head 3. All of them "
        "switched off at once: still “il”" in text
    )
    assert f"reads “tired” with {d.average(0):.2f} on average in decoder layer 0" in text
    assert "without layer 1's: “il” instead" in text  # "… too wide"
    wide = expected_focus(ref(WIDE), 5, 1)
    outlined = [f["layout"]["shapes"][0] for f in heatmaps(at) if f["layout"].get("shapes")]
    assert [(s_["y0"] + 0.5) for s_ in outlined] == [layer * 4 + head, wide[0] * 4 + wide[1]]  # tired, wide
    # another sentence: no focus, the pickers keep their defaults
    other = run_page("self_attention", sentence="i am a student")
    no_exception(other)
    assert "open on" not in plain_text(other) and other.selectbox(key="self_attention_layer").value == 0


def test_self_attention_projection_step(bundle, ref):
    at = run_page("self_attention", self_attention_layer=1, self_attention_head=2, self_attention_word=3)
    no_exception(at)
    r = ref()
    W = bundle.model.encoder[1].self_attn.W_q
    q = r.trace["enc.1.self_attn.q"][0, 2, 3].numpy()
    x = r.trace["enc.0.add_norm2.out"][0, 3].numpy()  # post-LN: layer 1 reads layer 0's output
    hm = heatmaps(at)
    assert any(z_of(f).shape == (1, 32) and np.allclose(z_of(f)[0], q, atol=1e-5) for f in hm)
    assert any(z_of(f).shape == (1, 128) and np.allclose(z_of(f)[0], x, atol=1e-5) for f in hm)
    wq = W.weight[64:96].T.detach().numpy()  # head 2: columns 64..95 of x·W^Q
    assert any(z_of(f).shape == (128, 32) and np.allclose(z_of(f), wq, atol=1e-6) for f in hm)
    assert np.allclose(x @ wq + W.bias[64:96].detach().numpy(), q, atol=1e-4)
    text = all_text(at)
    assert r"\underbrace{q}_{[1,\,32]} = \underbrace{x}_{[1,\,128]} \cdot \underbrace{W^Q}_{[128,\,32]}" in text
    assert "b^Q" in text and "bias" in text
    assert r"Q = XW^Q + b^Q, \qquad K = XW^K + b^K, \qquad V = XW^V + b^V" in text


def test_self_attention_textbook_labels_q2_and_hides_the_pickers():
    at = run_page("self_attention")
    at.radio(key="self_attention_mode").set_value("Thinking Machines (textbook example)").run()
    no_exception(at)
    keys = {s.key for s in at.selectbox}
    assert not keys & {"self_attention_layer", "self_attention_head", "self_attention_word"}
    assert "From the Illustrated Transformer: q1·k1 = 112, q1·k2 = 96" in all_text(at)
    at.radio(key="self_attention_tb_word").set_value(1).run()
    tb = frame(at, "0 Thinking")
    assert tb.loc["Score"].tolist() == ["q2·k1 = 32", "q2·k2 = 80"]
    text = all_text(at)
    assert "This app's own construction" in text and "q2·k1 = 32, q2·k2 = 80 → ÷ √64 = 8 → 4, 10" in text
    assert "q1·k1 = 32" not in text and "Textbook numbers" not in text
    # back to the trained model: the pickers return where they were
    at.radio(key="self_attention_mode").set_value("Your sentence, the trained model").run()
    assert at.selectbox(key="self_attention_word").value == 7


@pytest.mark.parametrize("page, most", [("self_attention", 120), ("multi_head", 400), ("encoder", 200)])
def test_big_tables_are_folded_away(page, most):
    at = run_page(page)
    no_exception(at)
    assert visible_numbers(at) <= most, visible_numbers(at)
    assert sum(df.size for df in tables(at)) > 1000  # the numbers are still one click away
    assert plain_text(at).count("Notice:") >= 5


# --- Issue 11: every encoder-side page on tiny and large random-weight models ----------------------------

SIZES = {
    "tiny": dict(d_model=8, n_heads=1, n_enc_layers=1, n_dec_layers=1, d_ff=16, max_len=8),
    "large": dict(d_model=256, n_heads=8, n_enc_layers=4, n_dec_layers=4, d_ff=512, max_len=512),
}


@pytest.fixture(scope="module")
def sized(bundle):
    from dataclasses import replace

    from model.transformer import Config, Transformer

    out = {}
    for name, kw in SIZES.items():
        torch.manual_seed(0)
        cfg = Config(bundle.config.src_vocab, bundle.config.tgt_vocab, **kw)
        out[name] = replace(bundle, model=Transformer(cfg).eval())
    return out


@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("page", ["overview", "tokens", "positional", "self_attention", "multi_head", "encoder"])
def test_encoder_side_pages_at_any_size(sized, page, size):
    # (the large model's pages with every fold open took 68 s on a loaded machine: three minutes before a timeout)
    at = run_app(
        page,
        my_model=sized[size],
        my_model_key=f"test-{size}",
        model="mine",
        timeout=180 if size == "large" else TIMEOUT,
    )
    no_exception(at)
    assert not at.error, [e.value for e in at.error]  # the app's apology box: a page failed
    d = SIZES[size]["d_model"]
    if page in ("self_attention", "multi_head", "encoder", "positional"):
        assert any(d in z_of(f).shape for f in heatmaps(at)), page  # the page shows this model, not the shipped one


# --- A seed point measured: Wang's column form ---------------------------------------------------------


def test_self_attention_column_form_equals_z(ref):
    at = run_page("self_attention", self_attention_layer=1, self_attention_head=3, self_attention_word=7)
    no_exception(at)
    r = ref()
    z = r.trace["enc.1.self_attn.z"][0, 3].numpy()  # [T, d_k]
    C = z_of(chart_spec(at, "self_attention_col_C"))
    assert C.shape == z.T.shape and np.abs(C - z.T).max() < 1e-5
    alpha = z_of(chart_spec(at, "self_attention_col_alpha"))
    assert np.allclose(alpha, r.trace["enc.1.self_attn.weights"][0, 3].numpy().T, atol=1e-6)
    text = all_text(at)
    assert "C = Attn\\(X, X\\) is 32 × 12" in text and "The column of “it” \\(position 7\\)" in text
    assert "equal within float error" in text
