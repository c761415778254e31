"""The why-attention page's notice lines (viz/complexity.py), checked against the numbers they describe."""

import pytest

from explain.paper import BLEU_TABLE, SECTIONS
from viz.complexity import bleu_frame, bleu_notice, costs_notice, layer_costs


@pytest.mark.parametrize("n,d", [(50, 512), (700, 128), (64, 64)])
def test_costs_notice(n, d):
    note = costs_notice(layer_costs(n, d, 3, 8), d)
    attn, rnn = n * n * d, n * d * d
    assert f"{attn:,} operations against a recurrent layer's {rnn:,}" in note
    assert f"the recurrent layer takes {n}" in note
    if n < d:
        assert (
            f"n = {n} < d = {d}, so self-attention is cheaper" in note
            and f"(the recurrent layer needs {rnn / attn:.3g}× as many)" in note
        )
    else:
        assert f"n = {n} ≥ d = {d}" in note and f"(self-attention needs {attn / rnn:.3g}× as many)" in note


def test_bleu_notice():
    note = bleu_notice(bleu_frame())
    # EN-DE: big 28.4 vs the best earlier model, ConvS2S Ensemble 26.36 at 7.7e19 FLOPs
    assert (
        "EN-DE: Transformer (big) scores 28.4 BLEU, 2.04 above the best earlier model (ConvS2S Ensemble, 26.36)"
    ) in note
    assert f"{7.7e19 / 2.3e19:.2g}× less training" in note
    # EN-FR: big 41.8 vs ConvS2S Ensemble 41.29 at 1.2e21; the Transformer's one cost (2.3e19) counts for EN-FR too
    assert (
        "EN-FR: Transformer (big) scores 41.8 BLEU, 0.51 above the best earlier model (ConvS2S Ensemble, 41.29)"
    ) in note
    assert f"{1.2e21 / 2.3e19:.2g}× less training (2.3e19 vs 1.2e21 FLOPs)" in note
    assert max(r.bleu_en_fr or 0 for r in BLEU_TABLE) == 41.8


def test_paper_sections():
    """Section 5 of the paper: 5.3 is the optimizer, 5.4 regularization (dropout and label smoothing)."""
    assert SECTIONS["dropout"] == SECTIONS["label smoothing"] == "5.4"
    assert SECTIONS["optimizer"] == SECTIONS["learning rate"] == "5.3"
