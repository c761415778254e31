"""Smaller claims of the fourth teaching audit (shared/audits/teaching-audit-4.md), each at the strength of what makes
it true: D1 (a gap of one sentence said as one sentence), D2 (the column form with this model's biases), D4 (a
question's label and its detail say what they measure), D5 (α = 0.6 is the paper's value), C2 (W2's decoder block
and the paper's code on the encoder-decoder page). The other findings are tested beside their code: A1, A2, B3
(tests/test_pages_attention.py, tests/test_lesson.py, tests/test_notice_rules*.py), B1 and D6 (tests/test_lesson.py),
B2, B4, B9, C1, D3 (tests/test_classroom_plan_files.py), B5-B7 (tests/test_ablations.py), B8 (tests/test_tracing.py).
"""

from __future__ import annotations

import json

import torch

from explain import questions
from explain.paper import RECIPE
from model import checkpoint, pipeline
from model.trace import Interventions
from model.transformer import traced
from pages.content import before, classroom
from pages.content import self_attention as sa
from tests.apptest_util import ROOT, all_text, no_exception, run_page
from viz import rnn_measured as vm


def test_d1_the_length_gap_is_counted_in_sentences():
    data = json.loads((ROOT / "assets" / "rnn_comparison.json").read_text())
    rows = data["accuracy_by_length"]["rows"]
    worst = min(rows, key=lambda r: r["rnn"] - r["transformer"])
    rnn, tf = (round(worst[m] * worst["n"]) for m in ("rnn", "transformer"))
    assert all(abs(worst[m] * worst["n"] - round(worst[m] * worst["n"])) < 1e-6 for m in ("rnn", "transformer"))
    n = vm.length_notice(data)
    gap = tf - rnn
    assert f"RNN right on {rnn} of {worst['n']} sentences" in n and f"Transformer on {tf} " in n
    assert f"{gap} sentence{'s' if gap != 1 else ''} apart" in n  # today: 142 against 143, 1 sentence
    total = sum(r["n"] for r in rows)
    assert f"Over all {total}: " in n


def test_d2_the_column_form_writes_the_bias_this_model_adds():
    b = checkpoint.load(checkpoint.SHIPPED)
    assert float(b.model.encoder[0].self_attn.W_q.bias.abs().max()) > 0  # the model has one, so the form must say it
    assert "q_:j = W_Q x_j + b_Q" in sa.COLUMN_FORM and "k_:i = W_K x_i + b_K" in sa.COLUMN_FORM
    latex = " ".join(before.DERIVATION_LATEX)
    assert "+ b_K" in latex and "+ b_V" in latex and "+ b_Q" in latex


def test_d4_the_no_mask_label_and_the_head_off_detail_say_what_they_measure():
    assert classroom.KINDS["no_mask"].endswith("give the same translation as the shipped model?")
    assert "correctly" not in classroom.KINDS["no_mask"]
    b = checkpoint.load(checkpoint.SHIPPED)
    p = pipeline.prepare(b, "the cat is big")
    q = questions.head_zero(b, p, Interventions(), 0, 1)
    tgt = torch.tensor([[1]])
    on = traced(b.model, p.src(), tgt)
    off = traced(b.model, p.src(), tgt, Interventions(heads_off=frozenset({("enc.0.self_attn", 1)})))
    n = "enc.0.self_attn.out"
    change = float((off[n] - on[n]).norm() / on[n].norm())
    assert f"the attention sublayer's output moves by {change:.0%} of its size" in q.detail
    assert "the layer's output" not in q.detail


def test_d5_and_c2_the_pages_credit_the_paper():
    out = run_page("output")
    no_exception(out)
    alpha = out.slider(key="output_beam_alpha")
    assert "the paper's value (section 6.1), taken from GNMT" in alpha.help
    assert any("α = 0.6 (§6.1)" in paper for _, paper, _ in RECIPE)
    cross = run_page("cross_attention")
    no_exception(cross)
    text = all_text(cross).replace("\\", "")
    assert "maps (X̃, X′) to H: X̃ the encoder's output (`enc.out`, the X₍₆₎ above)" in text
    assert "Tensor2Tensor" in text and "hello_t2t.ipynb" in text
