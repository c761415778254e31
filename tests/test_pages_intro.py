"""AppTest tests of the four intro pages (overview, tokens, positional, why attention) on the shipped model.

Every value shown is compared with an independent computation from the checkpoint (model.checkpoint.load
and model.pipeline here, not the page's helpers).
"""

import json
import math
import re

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
import pytest
import torch

from model import checkpoint, pipeline
from model.trace import Interventions, Trace
from model.transformer import sinusoidal_encoding
from model.vocab import EOS_ID, tokenize
from tests.apptest_util import all_text, chart_spec, decode, figures, no_exception, run_app, run_page, tables
from ui import page_list

SENT = "the animal didn't cross the street because it was too tired"
PAGES = ("overview", "tokens", "positional", "why_attention")
HTML = "<b>x</b><script>alert(1)</script>"


@pytest.fixture(scope="module")
def bundle():
    return checkpoint.load(checkpoint.SHIPPED)


def chart(at, key: str) -> go.Figure:
    """The plotly figure of the chart with this widget key (typed arrays decoded by plotly itself)."""
    return pio.from_json(json.dumps(chart_spec(at, key)))


def z_of(fig: go.Figure, trace: int = 0) -> np.ndarray:
    return decode(fig.data[trace].z).astype(float)


def y_of(fig: go.Figure, trace: int = 0) -> list[float | None]:
    y = fig.data[trace].y
    if isinstance(y, dict):
        return [float(v) for v in decode(y)]
    return [None if v is None else float(v) for v in y]


def frame(at, column: str) -> pd.DataFrame:
    """The first table on the page (a grid or a small table) having this column (or index entry)."""
    for v in tables(at):
        if column in v.columns or column in v.index:
            return v
    raise AssertionError(f"no table with {column!r}")


def metric(at, label_start: str) -> str:
    for m in at.metric:
        if m.label.startswith(label_start):
            return m.value
    raise AssertionError(f"no metric {label_start!r}")


def ids_of(bundle, text):
    ids, _ = bundle.src_vocab.encode(tokenize(text, "en"))
    return [*ids, EOS_ID]


# --- all four pages --------------------------------------------------------------------------------


@pytest.mark.parametrize("page", PAGES)
def test_page_runs_alone_and_in_app(page):
    no_exception(run_page(page))
    at = run_app(page)
    no_exception(at)
    assert at.title[0].value  # the page's own title, not a stub
    assert "Coming soon" not in all_text(at)


@pytest.mark.parametrize("page", PAGES)
def test_empty_sentence_prompts(page):
    for at in (run_page(page, sentence=""), run_app(page, sentence="   ")):
        no_exception(at)
        assert any("Type a sentence" in el.value for el in at.info)


@pytest.mark.parametrize("page", PAGES)
def test_html_is_not_rendered(page):
    for at in (run_page(page, sentence=HTML), run_app(page, sentence=HTML)):
        no_exception(at)
        for el in at.markdown:
            assert not el.proto.allow_html
            assert "<script>" not in el.value and "<b>" not in el.value


# --- overview ------------------------------------------------------------------------------------


def test_overview_sizes_are_the_checkpoint_and_the_paper(bundle):
    at = run_page("overview")
    no_exception(at)
    cfg = bundle.config
    t = frame(at, "paper: base")
    assert t.loc["d_model", "this model"] == str(cfg.d_model) == "128"
    assert t.loc["heads (h)", "this model"] == str(cfg.n_heads)
    assert t.loc["d_k = d_v = d_model / h", "this model"] == str(cfg.d_model // cfg.n_heads)
    assert t.loc["d_ff", "this model"] == str(cfg.d_ff)
    assert t.loc["encoder layers (N)", "this model"] == str(cfg.n_enc_layers)
    assert t.loc["source vocabulary", "this model"] == str(len(bundle.src_vocab))
    assert t.loc["target vocabulary", "this model"] == str(len(bundle.tgt_vocab))
    assert t.loc["max_len (positions)", "this model"] == str(cfg.max_len)
    assert t.loc["parameters", "this model"] == f"{sum(p.numel() for p in bundle.model.parameters()):,}"
    assert t.loc["d_model", "paper: base"] == "512" and t.loc["heads (h)", "paper: base"] == "8"
    assert t.loc["d_k = d_v = d_model / h", "paper: base"] == "64" and t.loc["d_ff", "paper: base"] == "2048"
    assert t.loc["encoder layers (N)", "paper: base"] == "6"
    text = all_text(at)
    assert r"\mathbb{R}^{512 \times m}" in text and r"8 \times (64 \times m)" in text
    m = len(ids_of(bundle, SENT))
    assert rf"\mathbb{{R}}^{{{cfg.d_model} \times {m}}}" in text


def test_overview_translation_diagram_and_record(bundle):
    at = run_page("overview", sentence="i am a student")
    no_exception(at)
    a = pipeline.analyse(bundle, pipeline.prepare(bundle, "i am a student"))
    text = all_text(at)
    assert a.translation and f"Translation:** {a.translation}" in text.replace("\\", "")
    dot = at.get("graphviz_chart")[0].proto.spec.replace("\\n", " ")  # labels are wrapped onto short lines
    assert f"Encoder layer  x {bundle.config.n_enc_layers}" in dot and "Masked multi-head self-attention" in dot
    steps = bundle.meta.get("training", {}).get("steps_done")
    if steps is not None:
        assert f"{steps:,}" in str([t.value for t in at.table])
    em = bundle.meta.get("metrics", {}).get("exact_match")
    if em is not None:
        assert f"{100 * em:.1f}%" in str([t.value for t in at.table])
    assert "seq" in text.lower() and "not a recurrent network" in text
    assert "same dimension" in text


def test_overview_links_to_every_walkthrough_page():
    at = run_app("overview")
    no_exception(at)
    links = at.get("page_link")
    pages = {el.proto.page for el in links}  # a page's address is its file's stem
    walk = {p.name for p in page_list.PAGES if p.walkthrough} - {"overview"}
    assert walk | {"why_attention", "before", "lesson"} <= pages
    by_label = {el.proto.label.split(" → ")[0]: el.proto.page for el in links}
    assert by_label["(1) Embeddings"] == "tokens" and by_label["(2) Positional encoding"] == "positional"
    assert by_label["(6) Masked self-attention"] == "decoder" and by_label["(8) Linear + softmax"] == "output"
    assert by_label["(7) Encoder-decoder attention"] == "cross_attention"
    assert by_label["Start here: follow one sentence step by step"] == "lesson"
    labels = {el.proto.label for el in links}
    assert "(1) Embeddings → **Tokens and embeddings**" in labels  # each link ends with its page's title
    assert all(
        el.proto.label.endswith(f" → **{page_list.by_name(el.proto.page).title}**")
        for el in links
        if " → " in el.proto.label
    )


def test_overview_data_summary():
    at = run_page("overview")
    df = frame(at, "family")
    assert {"coref", "thinking", "basic"} <= set(df["family"])
    assert df["training pairs"].sum() > 1000


# --- tokens ----------------------------------------------------------------------------------------


def test_tokens_ids_and_vocab(bundle):
    at = run_page("tokens")
    no_exception(at)
    df = frame(at, "status")
    expected = ids_of(bundle, SENT)
    assert df["id"].tolist() == expected
    assert df["token"].tolist() == [*tokenize(SENT, "en"), "<eos>"]
    assert metric(at, "Source vocabulary").startswith(f"{len(bundle.src_vocab):,}")
    assert metric(at, "Target vocabulary").startswith(f"{len(bundle.tgt_vocab):,}")
    # the one-hot heatmap: a single 1 per row, in the column of the token's id
    fig = chart(at, "tokens_onehot")
    z = z_of(fig)
    cols = [int(c.split(" ")[0]) for c in fig.data[0].x]
    assert cols == sorted(set(expected))
    assert (z.sum(1) == 1).all()
    assert [cols[j] for j in z.argmax(1)] == expected


def test_tokens_unknown_word_flagged(bundle):
    at = run_page("tokens", sentence="i am a zorblax")
    no_exception(at)
    assert any("zorblax" in w.value for w in at.warning)
    df = frame(at, "status")
    assert df["status"].tolist()[3] == "unknown: fed as <unk>" and df["id"].tolist()[3] == 3


def test_tokens_lookup_demo(bundle):
    at = run_page("tokens")
    at.selectbox(key="tokens_position").set_value(2).run()
    no_exception(at)
    tid = ids_of(bundle, SENT)[2]
    E = bundle.model.src_embed.lut.weight
    df = frame(at, "d0")
    np.testing.assert_allclose(df.loc["one-hot row @ E"].to_numpy(dtype=float), E[tid, :8].numpy(), atol=1e-5)
    np.testing.assert_allclose(df.loc["E[id] (row of the table)"].to_numpy(dtype=float), E[tid, :8].numpy(), atol=1e-5)
    np.testing.assert_allclose(
        df.loc["traced src.embed"].to_numpy(dtype=float), (E[tid, :8] * math.sqrt(128)).numpy(), atol=1e-4
    )
    assert float(metric(at, "max |onehot")) == 0.0
    assert float(metric(at, "max |E[id]")) < 1e-6
    assert f"has id **{tid}**" in all_text(at)


def test_tokens_sqrt_d_model_and_embed_heatmap(bundle):
    at = run_page("tokens")
    text = all_text(at)
    assert "11.3137" in text and f"{math.sqrt(bundle.config.d_model):.4f}" == "11.3137"
    E = bundle.model.src_embed.lut.weight
    ids = ids_of(bundle, SENT)
    want = (E[ids] * math.sqrt(128)).numpy()
    np.testing.assert_allclose(z_of(chart(at, "tokens_src_embed")), want[:, 0:32], atol=1e-5)
    at.slider(key="tokens_dims").set_value((40, 49)).run()  # both ends shown, as the title says: "dimensions 40-49"
    no_exception(at)
    fig = chart(at, "tokens_src_embed")
    assert fig.data[0].x[0] == "d40" and fig.data[0].x[-1] == "d49" and len(fig.data[0].x) == 10
    assert "dimensions 40-49" in all_text(at)
    np.testing.assert_allclose(z_of(fig), want[:, 40:50], atol=1e-5)
    at.slider(key="tokens_dims").set_value((7, 7)).run()  # one dimension
    assert list(chart(at, "tokens_src_embed").data[0].x) == ["d7"]


def test_tokens_decoder_side(bundle):
    at = run_page("tokens", sentence="i am a student")
    a = pipeline.analyse(bundle, pipeline.prepare(bundle, "i am a student"))
    tgt = [df for df in tables(at) if "status" in df.columns][1]
    assert tgt["token"].tolist()[0] == "<bos>" and tgt["id"].tolist() == a.trace["tgt.tokens"][0].tolist()
    E = bundle.model.tgt_embed.lut.weight
    np.testing.assert_allclose(
        z_of(chart(at, "tokens_tgt_embed")), (E[a.trace["tgt.tokens"][0]] * math.sqrt(128))[:, :32].numpy(), atol=1e-5
    )


def test_tokens_textbook_example():
    at = run_page("tokens")
    df = frame(at, "thanks")
    assert list(df.columns) == ["a", "am", "I", "thanks", "student", "<eos>"]
    assert df.iloc[1].tolist() == [0, 1, 0, 0, 0, 0]  # "am"
    at.selectbox(key="tokens_textbook").set_value("student").run()
    assert frame(at, "thanks").iloc[1].tolist() == [0, 0, 0, 0, 1, 0]


# --- positional --------------------------------------------------------------------------------------


def test_positional_heatmaps_are_the_encoding(bundle):
    at = run_page("positional")
    no_exception(at)
    cfg = bundle.config
    pe = sinusoidal_encoding(cfg.max_len, cfg.d_model).numpy()
    T = len(ids_of(bundle, SENT))
    np.testing.assert_allclose(z_of(chart(at, "positional_sentence")), pe[:T], atol=1e-6)
    np.testing.assert_allclose(z_of(chart(at, "positional_all")), pe, atol=1e-6)
    curves = chart(at, "positional_curves")
    np.testing.assert_allclose(y_of(curves, 2), pe[:, 10], atol=1e-6)


def test_positional_worked_numbers():
    at = run_page("positional")
    at.number_input(key="positional_pos").set_value(3)
    at.number_input(key="positional_i").set_value(1).run()
    no_exception(at)
    angle = 3 / 10000 ** (2 / 128)
    text = all_text(at)
    assert f"{angle:.6f}" in text and f"{math.sin(angle):.6f}" in text and f"{math.cos(angle):.6f}" in text
    df = frame(at, "PE(3, 2)")
    assert df.loc["formula (float64)", "PE(3, 2)"] == pytest.approx(math.sin(angle), abs=1e-6)
    assert df.loc["traced src.pos of your sentence", "PE(3, 3)"] == pytest.approx(math.cos(angle), abs=1e-6)


def test_positional_linear_map(bundle):
    at = run_page("positional")
    at.number_input(key="positional_k").set_value(7).run()
    no_exception(at)
    assert float(metric(at, "Largest error")) < 1e-5
    df = frame(at, "pos + k")
    assert (df["pos + k"] - df["pos"] == 7).all() and df.iloc[:, 2].max() < 1e-5
    assert len(df) == bundle.config.max_len - 7


def _enc(bundle, ids, pe):
    with torch.no_grad():
        return bundle.model.encode(torch.tensor([ids]), Trace(Interventions(positional_encoding=pe), record=False))[0]


def test_positional_permutation(bundle):
    at = run_page("positional")
    no_exception(at)
    diffs = [float(m.value) for m in at.metric if m.label.startswith("max |encoder outputs")]
    off, on = diffs
    assert off < 1e-5 and on > 1e-3
    # independently: reversed words, EOS last
    ids = ids_of(bundle, SENT)
    rev = ids[-2::-1] + [ids[-1]]
    e, er = _enc(bundle, ids, False), _enc(bundle, rev, False)
    assert torch.allclose(er[:-1].flip(0), e[:-1], atol=1e-5)
    assert not torch.allclose(_enc(bundle, rev, True)[:-1].flip(0), _enc(bundle, ids, True)[:-1], atol=1e-3)
    np.testing.assert_allclose(z_of(chart(at, "positional_enc_off_perm")), er[:, :16].numpy(), atol=1e-5)
    # another order through the widget
    at.selectbox(key="positional_order").set_value("shuffled").run()
    no_exception(at)
    off2, on2 = [float(m.value) for m in at.metric if m.label.startswith("max |encoder outputs")]
    assert off2 < 1e-5 and on2 > 1e-3


def test_positional_translation_with_and_without(bundle):
    a_on = pipeline.analyse(bundle, pipeline.prepare(bundle, SENT))
    a_off = pipeline.analyse(bundle, pipeline.prepare(bundle, SENT), Interventions(positional_encoding=False))
    at = run_app("positional", iv_pos=False)
    no_exception(at)
    text = all_text(at).replace("\\", "")
    assert f"With positional encoding:** {a_on.translation}" in text
    assert f"Without (sidebar switch off):** {a_off.translation}" in text
    assert any("switched **off**" in w.value for w in at.warning)
    # the page's PE heatmap still shows the encoding (from the unmodified model)
    pe = sinusoidal_encoding(bundle.config.max_len, bundle.config.d_model).numpy()
    np.testing.assert_allclose(z_of(chart(at, "positional_sentence")), pe[: len(ids_of(bundle, SENT))], atol=1e-6)


# --- why attention -----------------------------------------------------------------------------------


def test_why_table1():
    at = run_page("why_attention")
    no_exception(at)
    text = all_text(at)
    for cell in (
        r"$O(n^2 \cdot d)$",
        r"$O(n \cdot d^2)$",
        r"$O(k \cdot n \cdot d^2)$",
        r"$O(r \cdot n \cdot d)$",
        r"$O(\log_k(n))$",
        "$O(n/r)$",
    ):
        assert cell in text


@pytest.mark.parametrize("n,d,k,r", [(10, 64, 3, 4), (700, 128, 5, 16)])
def test_why_calculator(n, d, k, r):
    at = run_page("why_attention")
    for key, v in (("why_n", n), ("why_d", d), ("why_k", k), ("why_r", r)):
        at.number_input(key=key).set_value(v)
    at.run()
    no_exception(at)
    df = frame(at, "maximum path length")
    assert df["count"].tolist() == [n * n * d, n * d * d, k * n * d * d, r * n * d]
    assert df["sequential operations"].tolist() == [1, n, 1, 1]
    assert df["maximum path length"].tolist() == [1, n, math.ceil(math.log(n, k) - 1e-9), math.ceil(n / r)]
    costs = chart(at, "why_costs")
    assert y_of(costs) == [float(n * n * d), float(n * d * d), float(k * n * d * d), float(r * n * d)]
    assert costs.layout.yaxis.type == "log"
    if n < d:
        assert at.success and "cheaper" in at.success[0].value
    else:
        assert any("n = 700 ≥ d = 128" in w.value for w in at.warning)


def test_why_memory(bundle):
    at = run_page("why_attention")
    at.number_input(key="why_n").set_value(100)
    at.number_input(key="why_heads").set_value(8)
    at.number_input(key="why_layers").set_value(6).run()
    assert f"{100 * 100 * 8 * 6 * 4:,} bytes" in all_text(at)
    assert metric(at, "attention weights") == "1.8 MiB"
    T = len(ids_of(bundle, SENT))
    assert f"{T * T * bundle.config.n_heads * 4:,} bytes for one encoder layer" in all_text(at)


def test_why_bleu_table_and_chart():
    at = run_page("why_attention")
    df = frame(at, "BLEU EN-DE")
    assert df["model"].tolist() == [
        "ByteNet",
        "Deep-Att + PosUnk",
        "GNMT + RL",
        "ConvS2S",
        "MoE",
        "Deep-Att + PosUnk Ensemble",
        "GNMT + RL Ensemble",
        "ConvS2S Ensemble",
        "Transformer (base)",
        "Transformer (big)",
    ]
    assert df["BLEU EN-DE"].tolist() == ["23.75", "-", "24.6", "25.16", "26.03", "-", "26.3", "26.36", "27.3", "28.4"]
    assert df["BLEU EN-FR"].tolist() == [
        "-",
        "39.2",
        "39.92",
        "40.46",
        "40.56",
        "40.4",
        "41.16",
        "41.29",
        "38.1",
        "41.8",
    ]
    assert df["training FLOPs EN-DE"].tolist() == [
        "-",
        "-",
        "2.3e19",
        "9.6e18",
        "2.0e19",
        "-",
        "1.8e20",
        "7.7e19",
        "3.3e18",
        "2.3e19",
    ]
    assert df["training FLOPs EN-FR"].tolist() == [
        "-",
        "1.0e20",
        "1.4e20",
        "1.5e20",
        "1.2e20",
        "8.0e20",
        "1.1e21",
        "1.2e21",
        "3.3e18",
        "2.3e19",
    ]  # one cost for both tasks
    fig = chart(at, "why_bleu")
    assert y_of(fig, 0) == [23.75, None, 24.6, 25.16, 26.03, None, 26.3, 26.36, 27.3, 28.4]
    assert y_of(fig, 1)[2] == 2.3e19 and y_of(fig, 3)[6] == 1.1e21
    assert fig.layout.yaxis2.type == "log"
    text = all_text(at)
    assert "quadratic" in text and "one word at a time" in text and "BERT" in text


def test_why_figures_helper_sees_all_charts():
    at = run_page("why_attention")
    assert len(figures(at)) == 3  # the page's charts, Table 3's steps to 95% among them
    assert re.search(r"Table 2", all_text(at))


# --- Computed sentences, notices, layouts, next links, any model size --------------------


def plain(at) -> str:
    return all_text(at).replace("\\", "")


def test_overview_training_time_is_the_checkpoints(bundle):
    at = run_page("overview")
    training = bundle.meta["training"]
    text = all_text(at)
    assert f"trained on a CPU in {training['train_seconds']:,.0f} s ({training['steps_done']:,} steps)" in text
    assert "about a minute" not in text and "two CPU cores" not in text
    assert "three in every decoder layer" in text
    assert "Next: **Before the Transformer**" in text  # the motivation pages are on the path


NEXT = [
    ("before", "Why attention"),
    ("why_attention", "Tokens and embeddings"),
    ("tokens", "Positional encoding"),
    ("positional", "Self-attention, step by step"),
    ("self_attention", "Multi-head attention"),
    ("multi_head", "The encoder layer"),
    ("encoder", "Decoder and masking"),
]


@pytest.mark.parametrize("page, nxt", NEXT)
def test_next_links(page, nxt):  # ui.widgets.next_link, in the page list's order
    assert f"Next: **{nxt}**" in all_text(run_page(page))


def test_tokens_notices_are_the_tensors(bundle):
    at = run_page("tokens")
    no_exception(at)
    ids = ids_of(bundle, SENT)
    text = plain(at)
    assert f"Every row holds a single 1 (row sums 1 to 1) among {len(bundle.src_vocab)} columns" in text
    assert f"“0 the” and “4 the” are the same token: the same column {ids[0]}" in text
    E = bundle.model.src_embed.lut.weight.detach()
    rows = E[ids, :32] * math.sqrt(128)  # the drawn slice: dimensions 0-31
    rms = rows.pow(2).mean(1).sqrt()
    assert f"{float(rms.min()):.2f} to {float(rms.max()):.2f}, after × √d_model = 11.31" in text
    assert "identical (max difference 0)" in text


def test_positional_computed_sentences_and_layouts(bundle):
    at = run_page("positional")
    no_exception(at)
    text = plain(at)
    pe64 = torch.zeros(64, 128, dtype=torch.float64)
    ang = torch.arange(64, dtype=torch.float64)[:, None] / 10000 ** (torch.arange(0, 128, 2, dtype=torch.float64) / 128)
    pe64[:, 0::2], pe64[:, 1::2] = torch.sin(ang), torch.cos(ang)
    from explain.positional import rotation  # the block-diagonal M_k (tested against the formula in test_viz_intro)

    err = float((pe64[:62] @ rotation(2, 128).T - pe64[2:]).abs().max())
    assert f"computed in float64, the identity holds to {err:.0e}" in text
    assert "~1e-15" not in text and "~1e-6" not in text
    off = [float(m.value) for m in at.metric if m.label.startswith("max |encoder outputs")][0]
    assert f"the largest difference, {off:.0e}, is float rounding" in text
    assert "French → English" in text and "English → French" in text
    pe = sinusoidal_encoding(64, 128)
    np.testing.assert_allclose(z_of(chart(at, "positional_interleaved")), pe[:32], atol=1e-6)
    halves = z_of(chart(at, "positional_halves"))
    np.testing.assert_allclose(halves[:, :64], pe[:32, 0::2], atol=1e-6)
    np.testing.assert_allclose(halves[:, 64:], pe[:32, 1::2], atol=1e-6)
    assert "Every row has the same length, √(D/2) = 8.000" in text


@pytest.mark.parametrize("d_model, max_len", [(8, 8), (4, 3), (40, 2)])
def test_positional_defaults_follow_the_models_size(bundle, d_model, max_len):
    from dataclasses import replace

    from model.transformer import Config, Transformer

    torch.manual_seed(0)
    cfg = Config(
        bundle.config.src_vocab,
        bundle.config.tgt_vocab,
        d_model=d_model,
        n_heads=1,
        n_enc_layers=1,
        n_dec_layers=1,
        d_ff=8,
        max_len=max_len,
    )
    small = replace(bundle, model=Transformer(cfg).eval())
    at = run_app("positional", my_model=small, my_model_key=f"pe-{d_model}-{max_len}", model="mine")
    no_exception(at)
    assert not at.error, [e.value for e in at.error]
    dims = at.multiselect(key="positional_dims").value
    assert dims and all(d < d_model for d in dims)
    assert at.number_input(key="positional_pos").value <= max_len - 1
    assert at.number_input(key="positional_k").value <= max_len - 1
    assert at.number_input(key="positional_i").value <= d_model // 2 - 1
    np.testing.assert_allclose(z_of(chart(at, "positional_all")), sinusoidal_encoding(max_len, d_model), atol=1e-6)
