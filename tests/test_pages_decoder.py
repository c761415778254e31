"""AppTest of the decoder page (pages/decoder.py) with the shipped checkpoints: the look-ahead mask step by step,
the no-mask model that reads the answer, the reference input; and what the three decoder-side pages (pages/decoder.py,
pages/cross_attention.py, pages/output.py) share: an empty or HTML sentence, navigation, the sidebar's other model.

Every check compares what the page shows (figure JSON, dataframes, metrics, text) with an independent
computation: the checkpoint loaded here with model.checkpoint.load and run through the model directly.
The encoder-decoder attention and output pages are in tests/test_pages_cross_attention_output.py.
"""

import math

import numpy as np
import pytest
import torch

from model import checkpoint, pipeline
from model.trace import Interventions
from tests.apptest_util import all_text, chart_spec, heatmap_z, no_exception, run_app, run_page, table_with
from tests.pages_decoder_util import (  # noqa: F401 - fixtures base, dec_page, own
    REF,
    SHOWN,
    S,
    base_fixture,
    dec_page_fixture,
    infos,
    metric,
    own_fixture,
    pick_layer_head,
    text_of,
)
from ui.widgets import md

HTML = "<img src=x onerror=alert(1)> i am <b>a</b> student <script>alert('x')</script>"


@pytest.fixture(scope="module")
def nomask():
    return checkpoint.load(checkpoint.SHIPPED_MODELS["no_mask"])


# --- Decoder page ---------------------------------------------------------------------------------


def test_masked_equals_scaled_plus_mask(dec_page, own):
    at = dec_page
    scaled = heatmap_z(chart_spec(at, "decoder_scaled"))
    mask_text = text_of(chart_spec(at, "decoder_mask"))
    masked_f = chart_spec(at, "decoder_masked")
    T = len(own.tgt_labels)
    assert scaled.shape == (T, T)
    mask = np.where(mask_text == "-inf", -np.inf, 0.0)
    # the look-ahead mask is the literal upper triangle of -inf
    assert np.array_equal(mask, np.triu(np.full((T, T), -np.inf), 1) + 0.0 * np.tril(np.ones((T, T))))
    summed = scaled + mask
    masked_text, masked_z = text_of(masked_f), heatmap_z(masked_f)
    assert np.array_equal(np.isneginf(summed), masked_text == "-inf")
    fin = np.isfinite(summed)
    assert np.allclose(summed[fin], masked_z[fin], atol=1e-6)
    # ... and equals the model's own trace, computed independently
    tr_masked = own.trace["dec.0.self_attn.masked"][0, 0].double().numpy()
    assert np.array_equal(np.isneginf(tr_masked), np.isneginf(summed))
    assert np.allclose(tr_masked[fin], summed[fin], atol=1e-6)
    assert np.allclose(scaled, own.trace["dec.0.self_attn.scaled"][0, 0].double().numpy(), atol=1e-6)
    # the table under the heatmap shows the same -inf
    table = table_with(at, own.tgt_labels[0], 2)  # scaled, mask, masked, ... in page order
    assert np.isneginf(table.to_numpy()[0, 1:]).all()


def test_weights_above_diagonal_zero_with_mask(dec_page, own):
    w = heatmap_z(chart_spec(dec_page, "decoder_weights"))
    assert np.all(np.triu(w, 1) == 0.0)
    assert np.allclose(w.sum(1), 1.0, atol=1e-6)
    assert np.allclose(w, own.trace["dec.0.self_attn.weights"][0, 0].double().numpy(), atol=1e-6)
    assert metric(dec_page, "Weights above the diagonal") == "0"
    # section 4(a): the same head with the mask on and off, side by side
    assert np.all(np.triu(heatmap_z(chart_spec(dec_page, "decoder_la_on")), 1) == 0.0)
    assert (np.triu(heatmap_z(chart_spec(dec_page, "decoder_la_off")), 1) > 0).any()


def test_look_ahead_off_in_sidebar(base):
    at = run_page("decoder", iv_look_ahead=False)
    no_exception(at)
    w = heatmap_z(chart_spec(at, "decoder_weights"))
    ref = pipeline.analyse(base, pipeline.prepare(base, S), Interventions(look_ahead_mask=False))
    w_ref = ref.trace["dec.0.self_attn.weights"][0, 0]
    assert np.allclose(w, w_ref.double().numpy(), atol=1e-6)
    n_future = int((torch.triu(w_ref, 1) > 0).sum())
    assert n_future > 0 and (np.triu(w, 1) > 0).sum() == n_future
    assert int(metric(at, "Weights above the diagonal")) == n_future
    assert "look-ahead mask is switched off" in all_text(at)
    assert not np.isneginf(np.where(text_of(chart_spec(at, "decoder_mask")) == "-inf", -np.inf, 0)).any()


def test_layer_and_head_pickers(own):
    at = run_page("decoder")
    pick_layer_head(at, "decoder_mask", 1, 2)
    assert np.allclose(
        heatmap_z(chart_spec(at, "decoder_scaled")),
        own.trace["dec.1.self_attn.scaled"][0, 2].double().numpy(),
        atol=1e-6,
    )
    w = heatmap_z(chart_spec(at, "decoder_weights"))
    assert np.allclose(w, own.trace["dec.1.self_attn.weights"][0, 2].double().numpy(), atol=1e-6)
    assert np.all(np.triu(w, 1) == 0.0)


def test_lecture_example(dec_page):
    masked = chart_spec(dec_page, "decoder_ex_masked")
    assert text_of(masked)[1].tolist() == ["0.100", "0.600", "-inf", "-inf"]
    assert heatmap_z(masked)[1, :2].tolist() == pytest.approx([0.1, 0.6])
    assert text_of(chart_spec(dec_page, "decoder_ex_mask")).tolist() == [
        ["0.000", "-inf", "-inf", "-inf"],
        ["0.000", "0.000", "-inf", "-inf"],
        ["0.000", "0.000", "0.000", "-inf"],
        ["0.000", "0.000", "0.000", "0.000"],
    ]
    assert np.allclose(
        heatmap_z(chart_spec(dec_page, "decoder_ex_scaled")),
        [[0.7, 0.1, 0.1, 0.1], [0.1, 0.6, 0.2, 0.1], [0.1, 0.3, 0.6, 0.1], [0.1, 0.3, 0.3, 0.3]],
    )
    w = heatmap_z(chart_spec(dec_page, "decoder_ex_weights"))
    e = math.exp(0.5)
    assert w[1].tolist() == pytest.approx([1 / (1 + e), e / (1 + e), 0, 0], abs=1e-6)
    assert w[3].tolist() == pytest.approx(torch.softmax(torch.tensor([0.1, 0.3, 0.3, 0.3]), 0).tolist(), abs=1e-6)
    tables = [d.value for d in dec_page.dataframe if list(d.value.columns) == ["t=1", "t=2", "t=3", "t=4"]]
    assert len(tables) == 4
    assert tables[2].loc["t=2"].tolist() == [0.1, 0.6, -np.inf, -np.inf]
    assert "Example from the lecture notes" in all_text(dec_page)


def test_renormalisation_table(dec_page, own):
    df = table_with(dec_page, "masked softmax (the weights)")
    row = min(len(own.tgt_labels) - 1, 2)
    assert np.allclose(
        df["masked softmax (the weights)"], own.trace["dec.0.self_attn.weights"][0, 0, row].numpy(), atol=SHOWN
    )
    assert np.allclose(df["÷ share of allowed keys"], df["masked softmax (the weights)"], atol=2 * SHOWN)
    assert df["softmax over all keys"].sum() == pytest.approx(1.0, abs=len(df) * SHOWN)


def test_no_mask_model_reads_the_answer_but_cannot_generate(dec_page, base, nomask):
    at = dec_page
    assert at.text_input(key="decoder_reference").value == REF
    off = Interventions(look_ahead_mask=False)
    prep = pipeline.prepare(nomask, S)
    tf = pipeline.teacher_forced(nomask, prep, REF, off)
    acc = sum(p == g for p, g in zip(tf.predicted, tf.gold, strict=True)) / len(tf.gold)
    tf_base = pipeline.teacher_forced(base, pipeline.prepare(base, S), REF, Interventions())
    acc_base = sum(p == g for p, g in zip(tf_base.predicted, tf_base.gold, strict=True)) / len(tf_base.gold)
    shown = at.table[0].value
    assert shown.iloc[0, 1] == f"{acc:.0%}" and shown.iloc[1, 1] == f"{acc_base:.0%}"
    assert shown.iloc[0, 2] == f"{sum(tf.gold_probs) / len(tf.gold_probs):.3f}"
    assert acc >= 0.8  # teacher-forced, it reads the answer
    gen = pipeline.analyse(nomask, prep, off).translation
    gen_base = pipeline.analyse(base, pipeline.prepare(base, S)).translation
    translations = table_with(at, "translation")["translation"].tolist()
    assert translations[:2] == [gen or "(empty)", gen_base or "(empty)"]
    assert gen != REF and gen != gen_base  # generating, it fails
    # the head the page picks looks at position t+1 (the word to predict)
    best, best_score = None, -1.0
    for layer in range(nomask.config.n_dec_layers):
        w = tf.trace[f"dec.{layer}.self_attn.weights"][0]
        for h in range(nomask.config.n_heads):
            s = float(w[h].diagonal(1).mean())
            if s > best_score:
                best, best_score = (layer, h), s
    assert at.selectbox(key="decoder_cheat_head").value == best
    w = tf.trace[f"dec.{best[0]}.self_attn.weights"][0, best[1]]
    share = float((w.argmax(-1)[:-1] == torch.arange(1, w.size(0))).float().mean())
    assert metric(at, "rows whose largest weight is on position t + 1") == f"{share:.0%}"
    assert np.allclose(heatmap_z(chart_spec(at, "decoder_cheat_weights")), w.double().numpy(), atol=1e-6)
    # training figures straight from the JSON files
    figures = at.table[1].value
    row = figures.loc["held-out exact match (greedy)"]
    assert row["base model"] == f"{base.meta['metrics']['exact_match']:.1%}"
    assert row["no-mask model"] == f"{nomask.meta['metrics']['exact_match']:.1%}"
    assert figures.loc["look-ahead mask in training"].tolist() == ["on", "off"]
    assert nomask.meta["metrics"]["exact_match"] < base.meta["metrics"]["exact_match"]


def test_reference_input_and_unknown_words(nomask):
    at = run_page("decoder", sentence="i am a student")
    assert at.text_input(key="decoder_reference").value == "je suis étudiant"
    at.text_input(key="decoder_reference").input("je suis zorglub <b>x</b>").run()
    no_exception(at)
    text = all_text(at)
    assert "zorglub" in text and "<unk>" in text
    tf = pipeline.teacher_forced(
        nomask,
        pipeline.prepare(nomask, "i am a student"),
        "je suis zorglub <b>x</b>",
        Interventions(look_ahead_mask=False),
    )
    acc = sum(p == g for p, g in zip(tf.predicted, tf.gold, strict=True)) / len(tf.gold)
    assert at.table[0].value.iloc[0, 1] == f"{acc:.0%}"


def test_reference_default_falls_back_to_the_base_translation(base):
    text = "the horse is tired"
    at = run_page("decoder", sentence=text)
    no_exception(at)
    from model.data import dataset_reference

    expected = dataset_reference(text) or pipeline.analyse(base, pipeline.prepare(base, text)).translation
    assert at.text_input(key="decoder_reference").value == expected


@pytest.mark.parametrize("page", ["decoder", "cross_attention", "output"])
def test_empty_sentence_prompts(page):
    at = run_page(page, sentence="")
    no_exception(at)
    assert "Type a sentence" in all_text(at)
    assert not at.get("plotly_chart")


@pytest.mark.parametrize("page", ["decoder", "cross_attention", "output"])
def test_html_sentence(page):
    at = run_page(page, sentence=HTML)
    no_exception(at)
    assert "<script>" not in all_text(at).replace("\\<script\\>", "")


@pytest.mark.parametrize("page", ["decoder", "cross_attention", "output"])
def test_through_navigation(page):
    at = run_app(page)
    no_exception(at)
    assert (
        at.title[0].value
        == {
            "decoder": "The decoder and masking",
            "cross_attention": "Encoder-decoder attention",
            "output": "Output and decoding",
        }[page]
    )
    assert at.get("plotly_chart")


def test_other_model_in_sidebar():
    at = run_app("decoder", model="no_mask")
    no_exception(at)
    at = run_app("output", model="no_mask")
    no_exception(at)
    at = run_app("cross_attention", model="no_mask")
    no_exception(at)


# --- What the decoder page says to look at (notices), folded tables, the fixed facts ----------------


def test_decoder_notices_match_the_tensors(dec_page, own, base):
    from viz import decoder as vd

    w = own.trace["dec.0.self_attn.weights"][0, 0]
    T = w.size(0)
    shown = infos(dec_page)
    assert md(vd.masked_notice(w, own.tgt_labels)) in shown
    assert md(f"the {T * (T - 1) // 2} cells above the diagonal (the future) are exactly 0") in shown
    assert md(f"row <bos> has only itself to look at (weight {float(w[0, 0]):.3f})") in shown
    # the lecture notice: softmax(0.1, 0.6)
    e = math.exp(0.5)
    assert md(f"({1 / (1 + e):.3f}, {e / (1 + e):.3f})") in shown
    # mask on vs off, same head: the notice's totals are the sums above the diagonal
    off = pipeline.analyse(base, pipeline.prepare(base, S), Interventions(look_ahead_mask=False))
    w_off = off.trace["dec.0.self_attn.weights"][0, 0]
    assert md(f"get {float(torch.triu(w_off, 1).sum()):.3f}, most in row") in shown
    # the renormalised row (row 2 by default): the allowed keys' share of the plain softmax
    scaled = own.trace["dec.0.self_attn.scaled"][0, 0, 2]
    assert md(f"would get {float(torch.softmax(scaled, -1)[:3].sum()):.3f} of the weight") in shown
    # the block notice: shapes from the trace
    assert md(f"the block takes {list(own.trace['tgt.input'].shape)}") in shown


def test_decoder_tables_are_folded(dec_page):
    exact = [e for e in dec_page.expander if e.label == "Exact numbers of the four matrices"]
    assert len(exact) == 2 and all(len(e.dataframe) == 4 for e in exact)  # real head and lecture example
    # the figures come first: no T x T table outside an expander
    folded = {id(d.proto) for e in dec_page.expander for d in e.dataframe}
    open_frames = [d.value for d in dec_page.dataframe if id(d.proto) not in folded]
    assert all(not (len(f) > 2 and len(f) == len(f.columns)) for f in open_frames)


def test_peek_notice_on_the_no_mask_model(dec_page, nomask):
    prep = pipeline.prepare(nomask, S)
    tf = pipeline.teacher_forced(nomask, prep, REF, Interventions(look_ahead_mask=False))
    layer, head = dec_page.selectbox(key="decoder_cheat_head").value
    w = tf.trace[f"dec.{layer}.self_attn.weights"][0, head]
    hits = int((w.argmax(-1)[:-1] == torch.arange(1, w.size(0))).sum())
    assert md(f"in {hits} of {w.size(0) - 1} rows the largest weight sits on position t + 1") in infos(dec_page)


def test_decoder_says_position_t_predicts_t_plus_1_and_where_dropout_is(dec_page, base):
    text = all_text(dec_page)
    assert "position t reads word t and predicts word t + 1" in text
    assert "section 5.4" in text and "section 5.3" not in text
    assert f"P_drop = {base.config.dropout:g}" in text
    assert "drops attention weights after the softmax and the feed-forward net's hidden layer" in text
    assert all(m.bias is not None for layer in base.model.decoder for m in (layer.self_attn.W_q, layer.cross_attn.W_o))
    assert "have bias vectors" in text
    assert "Encoder-decoder attention" in text  # the next link, from ui/page_list.py


def test_decoder_intro_shifts_the_sentences_own_translation():
    at = run_app("decoder", sentence="i am a student")
    a = pipeline.analyse(
        checkpoint.load(checkpoint.SHIPPED), pipeline.prepare(checkpoint.load(checkpoint.SHIPPED), "i am a student")
    )
    words = " ".join(a.out_tokens)
    assert f"input `<bos> {words}`, output `{words} <eos>`" in all_text(at)


def test_the_decoder_intro_names_its_example_when_there_is_no_sentence():
    """With no sentence the shifted-right example is the textbook's, and says so (the intro ends "Everything below is
    computed on your sentence"); with one, it is that sentence's own translation."""
    from pages.content import decoder as text

    assert "(for “thinking machines”: input `<bos> les machines pensantes`" in text.intro([])
    mine = text.intro(["je", "suis"])
    assert "(input `<bos> je suis`, output `je suis <eos>`)" in mine and "thinking machines" not in mine
