"""The span argument measured (explain/span.py, viz/span.py): attention's outputs stay in the span of its values,
the feed-forward net's ReLU takes them out. Values, on the shipped model and on small constructed ones."""

from __future__ import annotations

import copy
import math

import pytest
import torch

from explain.span import outside_share, span_check
from model import checkpoint, pipeline
from model.transformer import Config, Transformer, traced
from viz import span as vspan


@pytest.fixture(scope="module")
def bundle():
    return checkpoint.load(checkpoint.SHIPPED)


def test_outside_share_is_the_sine_of_the_angle_to_the_span():
    basis = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]], dtype=torch.float64)
    rows = torch.tensor([[3.0, -2.0, 0.0], [0.0, 0.0, 5.0], [1.0, 0.0, 1.0], [0.0, 0.0, 0.0]])
    share = outside_share(rows, basis)
    assert share.tolist() == pytest.approx([0.0, 1.0, math.sin(math.pi / 4), 0.0])


@pytest.mark.parametrize(
    "text", ["thinking machines", "the animal didn't cross the street because it was too tired", "i am a student"]
)
def test_attention_stays_in_its_span_and_the_ffn_leaves(bundle, text):
    a = pipeline.analyse(bundle, pipeline.prepare(bundle, text))
    T, H = len(a.src_labels), bundle.config.n_heads
    for layer in range(bundle.config.n_enc_layers):
        c = span_check(bundle.model, a.trace, layer)
        assert [s.vectors for s in c.steps] == [H * T, H * T, T + H * T + 1, T + H * T + 3]
        assert all(s.confining and s.dims == 128 for s in c.steps)
        for s in c.steps[:3]:
            assert float(s.share.max()) < 1e-5, (layer, s.name)  # float error, nothing more
        assert float(c.steps[3].share.mean()) > 0.25 and float(c.steps[3].share.min()) > 0.1
        text_ = vspan.span_notice(c, a.src_labels)
        assert "Steps 1-3 stay inside their spans" in text_ and "The FFN's output leaves" in text_
        assert f"on average {float(c.steps[3].share.mean()):.0%}" in text_


def test_without_clipping_the_ffn_stays_too(bundle):
    """Shift b_1 so that no hidden unit is ever negative: the ReLU then changes nothing, the FFN is linear, and its
    output stays in the span as well. So what leaves the span in the real model is the ReLU."""
    model = copy.deepcopy(bundle.model)
    with torch.no_grad():
        model.encoder[0].ffn.W_1.bias += 40.0
    p = pipeline.prepare(bundle, "the animal didn't cross the street because it was too tired")
    t = traced(model, p.src(), torch.tensor([[1]]))
    assert float(t["enc.0.ffn.hidden"].min()) > 0  # nothing clipped
    ffn = span_check(model, t, 0).steps[3]
    assert float(ffn.share.max()) < 1e-4


def test_pre_ln_model_and_a_sentence_too_long_to_tell():
    torch.manual_seed(0)
    m = Transformer(Config(src_vocab=40, tgt_vocab=40, d_model=16, n_heads=2, d_ff=32, norm_first=True)).eval()
    t = traced(m, torch.tensor([[5, 6, 7, 2]]), torch.tensor([[1, 9]]))
    c = span_check(m, t, 1)
    assert c.steps[2].name == "after the residual"  # pre-LN: no LayerNorm after the sum
    assert all(float(s.share.max()) < 1e-5 for s in c.steps[:3]) and float(c.steps[3].share.mean()) > 0.05
    long = torch.tensor([[*range(5, 25), 2]])  # 21 tokens: H·T = 42 vectors fill d_model = 16 dimensions
    c = span_check(m, traced(m, long, torch.tensor([[1, 9]])), 0)
    assert not any(s.confining for s in c.steps)
    text = vspan.span_notice(c, [str(i) for i in range(21)])
    assert "stay inside" not in text and "leaves" not in text
    assert "fill all 16 dimensions, so it cannot be told" in text and "there is nothing to test" in text


def test_span_figure_and_table_show_the_shares(bundle):
    a = pipeline.analyse(bundle, pipeline.prepare(bundle, "thinking machines"))
    c = span_check(bundle.model, a.trace, 1)
    fig = vspan.span_figure(c, a.src_labels)
    assert fig.data[0].y == pytest.approx([max(float(s.share.max()), vspan.FLOOR) for s in c.steps])
    for i, s in enumerate(c.steps):
        assert list(fig.data[1 + i].y) == pytest.approx([max(float(x), vspan.FLOOR) for x in s.share])
    df = vspan.span_table(c, a.src_labels)
    assert list(df.index) == [*a.src_labels, "the span"]
    assert df.iloc[-1, 3] == "18 vectors, rank 18 of 128"
