"""pages/before.py through AppTest: the values drawn are the recorded tensors of both models."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from explain.recompute import agreement, closest_head
from model import checkpoint, pipeline
from tests.apptest_util import all_text, figures, heatmap_z, no_exception, run_page
from ui.rnn import RNN_STEM

SENTENCE = "the black cat is under the table"


@pytest.fixture(scope="module")
def rnn():
    return checkpoint.load(RNN_STEM)


@pytest.fixture(scope="module")
def transformer():
    return checkpoint.load(checkpoint.SHIPPED)


def text_of(at) -> str:
    return all_text(at).replace("\\", "")  # notices are markdown-escaped


def test_the_page_draws_the_recorded_tensors(rnn, transformer):
    at = run_page("before", sentence=SENTENCE)
    no_exception(at)
    a = pipeline.analyse(rnn, pipeline.prepare(rnn, SENTENCE))
    tf = pipeline.analyse(transformer, pipeline.prepare(transformer, SENTENCE))
    figs = figures(at)
    # 1. the encoder at its last step: every h_i
    np.testing.assert_allclose(heatmap_z(figs[0]), a.trace["rnn.enc.h"][0].numpy(), atol=1e-6)
    # 2. the first decoder step: scores and α as bars, c_1 as a row
    alpha = a.trace["rnn.dec.alpha"][0]  # [Tt, Ts]
    np.testing.assert_allclose(figs[1]["data"][1]["y"], alpha[0].numpy(), atol=1e-6)
    np.testing.assert_allclose(heatmap_z(figs[2])[0], a.trace["rnn.dec.context"][0, 0].numpy(), atol=1e-6)
    top = int(alpha[0].argmax())
    text = text_of(at)
    assert f"“{a.prepared.tokens[top] if top < len(a.prepared.tokens) else '<eos>'}” (α = {alpha[0, top]:.2f})" in text
    # 3. the alignment matrix
    np.testing.assert_allclose(heatmap_z(figs[3]), alpha.numpy(), atol=1e-6)
    # 4. the Transformer's encoder-decoder attention, on the head closest to the RNN's alignment
    assert a.out_tokens == tf.out_tokens  # both models translate this sentence alike
    layer, head = closest_head(tf.trace, alpha, True)
    best = agreement(alpha, tf.trace[f"dec.{layer}.cross_attn.weights"][0, head])
    assert all(
        agreement(alpha, tf.trace[f"dec.{i}.cross_attn.weights"][0, h]) <= best
        for i in range(transformer.config.n_dec_layers)
        for h in range(transformer.config.n_heads)
    )
    w = tf.trace[f"dec.{layer}.cross_attn.weights"][0, head]
    np.testing.assert_allclose(heatmap_z(figs[4]), w.numpy(), atol=1e-6)
    assert f"for {best} of {len(a.out_tokens) + 1} output words" in text
    z = tf.trace[f"dec.{layer}.cross_attn.z"][0, head]
    np.testing.assert_allclose(heatmap_z(figs[6])[1], z[0].numpy(), atol=1e-6)
    np.testing.assert_allclose(heatmap_z(figs[6])[0], z[0].numpy(), atol=1e-5)
    np.testing.assert_allclose(heatmap_z(figs[7]), z.numpy(), atol=1e-5)  # C stacked = the model's z
    assert a.translation in text
    assert "Measured" in text


def test_stepping_the_encoder_and_the_decoder(rnn):
    at = run_page("before", sentence=SENTENCE)
    at.slider(key="before_enc_step").set_value(2).run()
    no_exception(at)
    a = pipeline.analyse(rnn, pipeline.prepare(rnn, SENTENCE))
    h = heatmap_z(figures(at)[0])
    np.testing.assert_allclose(h[:2], a.trace["rnn.enc.h"][0, :2].numpy(), atol=1e-6)
    assert np.isnan(h[2:]).all()  # not computed yet
    assert "Step 2 of 8 reads “black”" in text_of(at)
    z = float(a.trace["rnn.enc.z"][0, 1].mean())
    assert f"keeps on average {z:.0%}" in text_of(at)
    at.select_slider(key="before_dec_step").set_value(2).run()
    no_exception(at)
    alpha = a.trace["rnn.dec.alpha"][0, 2]
    np.testing.assert_allclose(figures(at)[1]["data"][1]["y"], alpha.numpy(), atol=1e-6)
    assert f"Step 3, which outputs “{a.out_tokens[2]}”" in text_of(at)


def test_transformer_layer_head_and_word_pickers(transformer):
    at = run_page("before", sentence=SENTENCE)
    at.selectbox(key="before_layer").set_value(0).run()
    at.selectbox(key="before_head").set_value(2).run()
    at.select_slider(key="before_j").set_value(1).run()
    no_exception(at)
    tf = pipeline.analyse(transformer, pipeline.prepare(transformer, SENTENCE))
    figs = figures(at)
    np.testing.assert_allclose(heatmap_z(figs[4]), tf.trace["dec.0.cross_attn.weights"][0, 2].numpy(), atol=1e-6)
    q, k = tf.trace["dec.0.cross_attn.q"][0, 2, 1], tf.trace["dec.0.cross_attn.k"][0, 2]
    scores = (k @ q / q.numel() ** 0.5).numpy()
    np.testing.assert_allclose(figs[5]["data"][0]["y"], scores, atol=1e-5)
    np.testing.assert_allclose(figs[5]["data"][1]["y"], torch.softmax(torch.tensor(scores), 0).numpy(), atol=1e-6)


@pytest.mark.parametrize(
    "sentence", ["", "   ", "the zorblax florped under the table", "i am a student " * 30, "*bold* <b>x</b> $x$"]
)
def test_odd_sentences_do_not_break_the_page(sentence):
    at = run_page("before", sentence=sentence)
    no_exception(at)
    assert "Measured" in text_of(at)
    if not sentence.strip():
        assert any("Type a sentence" in i.value for i in at.info)


def test_unknown_words_are_flagged():
    at = run_page("before", sentence="the zorblax is under the table")
    no_exception(at)
    assert any("zorblax" in w.value for w in at.warning)


def test_a_shorter_sentence_after_moving_every_picker():
    at = run_page("before", sentence="the animal didn't cross the street because it was too tired")
    at.slider(key="before_enc_step").set_value(11).run()
    at.select_slider(key="before_dec_step").set_value(10).run()
    at.select_slider(key="before_j").set_value(10).run()
    at.session_state["sentence"] = "i am"
    at.run()
    no_exception(at)
    assert at.slider(key="before_enc_step").value <= 3


def test_the_lecture_form_of_attention():
    from ui.rnn import RNN_MODELS

    at = run_page("before", sentence=SENTENCE)
    at.radio(key="before_attention").set_value("qkv").run()
    no_exception(at)
    qkv = checkpoint.load(RNN_MODELS["qkv"])
    assert qkv.config.attention == "qkv"
    a = pipeline.analyse(qkv, pipeline.prepare(qkv, SENTENCE))
    figs = figures(at)
    np.testing.assert_allclose(heatmap_z(figs[0]), a.trace["rnn.enc.h"][0].numpy(), atol=1e-6)
    np.testing.assert_allclose(heatmap_z(figs[3]), a.trace["rnn.dec.alpha"][0].numpy(), atol=1e-6)
    assert any("K^\\top q_t" in el.value for el in at.latex)
    assert f"{qkv.meta['metrics']['exact_match']:.1%} exact match" in text_of(at)


def test_sidebar_interventions_reach_the_transformer_side(transformer):
    from model.trace import Interventions

    at = run_page("before", sentence=SENTENCE, heads_off=["dec.1.cross_attn:2"], iv_scale=False)
    at.selectbox(key="before_layer").set_value(1).run()
    at.selectbox(key="before_head").set_value(2).run()
    no_exception(at)
    iv = Interventions(heads_off=frozenset({("dec.1.cross_attn", 2)}), scale=False)
    tf = pipeline.analyse(transformer, pipeline.prepare(transformer, SENTENCE), iv)
    figs = figures(at)
    np.testing.assert_allclose(heatmap_z(figs[4]), tf.trace["dec.1.cross_attn.weights"][0, 2].numpy(), atol=1e-6)
    q, k = tf.trace["dec.1.cross_attn.q"][0, 2, 0], tf.trace["dec.1.cross_attn.k"][0, 2]
    np.testing.assert_allclose(figs[5]["data"][0]["y"], (k @ q).numpy(), atol=1e-5)  # no ÷√d_k
    assert "head 2 is switched off" in text_of(at)


def test_in_the_app_between_the_overview_and_why_attention():
    from tests.apptest_util import run_app
    from ui import page_list

    names = [p.name for p in page_list.PAGES]
    assert names.index("before") == names.index("overview") + 1
    assert names.index("why_attention") == names.index("before") + 1
    assert page_list.by_name("before").section == page_list.by_name("overview").section == "Start"
    at = run_app("before", sentence=SENTENCE)
    no_exception(at)
    assert "Before the Transformer" in text_of(at)


def row_of(i: int, rows: list[str], z: np.ndarray, h: np.ndarray) -> np.ndarray:
    """The encoder figure's row labelled i, checked to hold h_i (= h[i - 1]); h_0, the zero state, has no row."""
    if i == 0:
        assert not any(r.startswith("0 ") for r in rows)
        return np.zeros(h.shape[1])
    (row,) = [n for n, r in enumerate(rows) if r.split(" ")[0] == str(i)]
    np.testing.assert_allclose(z[row], h[i - 1], atol=1e-6)
    return z[row]


def test_the_notices_count_positions_as_the_rows_they_name(rnn):
    """One numbering on the page, from 1 as in its formulas: the state a notice calls h_i is the figure's row
    labelled i, and decoder step t (slider "t: word", notice "Step t", c_t) is the alignment row and table row t."""
    import re

    a = pipeline.analyse(rnn, pipeline.prepare(rnn, SENTENCE))
    h = a.trace["rnn.enc.h"][0].numpy()  # [Ts, H], row 0 = h_1
    at = run_page("before", sentence=SENTENCE)
    for step in (len(h), 3, 1):
        at.slider(key="before_enc_step").set_value(step).run()
        no_exception(at)
        fig = figures(at)[0]
        rows, z = list(fig["data"][0]["y"]), heatmap_z(fig)
        found = re.search(
            r"Step (\d+) of \d+ reads “([^”]+)”: .*? of h_(\d+) .*?‖h_(\d+) − h_(\d+)‖ = (\d+\.\d\d)", text_of(at)
        )
        assert found, text_of(at)
        k, word, kept, new, old, moved = found.groups()
        assert int(k) == step and int(kept) == int(old) == step - 1 and int(new) == step
        assert rows[step - 1] == f"{step} {word}"  # the slider's step i is the row labelled i, the word it read
        moved_again = row_of(int(new), rows, z, h) - row_of(int(old), rows, z, h)
        assert f"{np.linalg.norm(moved_again):.2f}" == moved  # the distance stated, between those rows
    # the decoder: the slider's "3: word", the notice's step 3 and c_3, the alignment's and the table's row 3
    at.select_slider(key="before_dec_step").set_value(2).run()
    no_exception(at)
    word = a.out_tokens[2]
    assert at.select_slider(key="before_dec_step").options[2] == f"3: {word}"
    text = text_of(at)
    assert f"Step 3, which outputs “{word}”" in text and "c_3, the α-weighted sum" in text
    alpha = a.trace["rnn.dec.alpha"][0].numpy()
    figs = figures(at)
    assert heatmap_z(figs[2]).shape[0] == 1 and figs[2]["data"][0]["y"] == ["c_3"]
    align = figs[3]
    assert align["data"][0]["y"][2] == f"3 {word}"
    np.testing.assert_allclose(heatmap_z(align)[2], alpha[2], atol=1e-6)
    src = [*a.prepared.tokens, "<eos>"]
    assert align["data"][0]["x"] == [f"{i} {w}" for i, w in enumerate(src, 1)] == figs[1]["data"][1]["x"]
    (table,) = [d.value for d in at.dataframe if f"3 {word}" in list(d.value.index)]
    np.testing.assert_allclose(table.loc[f"3 {word}"].to_numpy(dtype=float), alpha[2], atol=1e-4)
    # the Transformer's side counts the same way: output word 1 (the notice, V·α_:1) is row 1 of its α and of C
    first = a.out_tokens[0]
    assert f"Output word 1 (“{first}”)" in text and "V·α_:1 equals the model's z row 1" in text
    assert figs[4]["data"][0]["y"] == figs[7]["data"][0]["y"] == align["data"][0]["y"]
    assert figs[6]["data"][0]["y"][0] == "V·α_:1" and figs[4]["data"][0]["y"][0] == f"1 {first}"


@pytest.mark.parametrize("sentence", [SENTENCE, "he wants the good apple"])
def test_the_head_caption_says_the_rule_that_chose_the_head(rnn, transformer, sentence):
    """The head is matched to the recurrent model's alignment only when both translate into the same words; else it is
    the sharpest head, and the caption must say which (for "he wants the good apple" the recurrent model writes
    "bonne", the Transformer does not)."""
    a = pipeline.analyse(rnn, pipeline.prepare(rnn, sentence))
    tf = pipeline.analyse(transformer, pipeline.prepare(transformer, sentence))
    same = a.next_labels == tf.next_labels
    assert same == (sentence == SENTENCE)  # the two cases this test is about
    text = text_of(run_page("before", sentence=sentence))
    assert ("closest to the recurrent model's" in text) == same
    assert ("opens on the sharpest head" in text) == (not same)


def test_the_context_matrix_is_named_as_the_formula_writes_it(transformer):
    """C = [c_:1 … c_:t] has one column per output word (d × t); the figure draws one row per word, and the notice
    says both."""
    from explain.recompute import cross_attention
    from viz.rnn import c_matrix_notice

    tf = pipeline.analyse(transformer, pipeline.prepare(transformer, SENTENCE))
    x = cross_attention(tf.trace, 1, 0)
    t, d = x.c.shape
    assert t == len(tf.next_labels) and d == transformer.config.d_model // transformer.config.n_heads
    assert f"C = [c_:1 … c_:{t}] is {d} × {t}, drawn transposed ({t} rows of {d} numbers)" in c_matrix_notice(x)
