"""Unit tests of the intro pages' helpers: paper data, complexity calculator, embeddings, positional encoding (the
formulas they draw are explain/'s, tested in tests/test_explain_formulas.py)."""

import math

import pandas as pd
import pytest
import torch

from explain import positional as ep
from explain.embeddings import lookup_demo, one_hot
from explain.experiments import permutation_check
from explain.paper import BASE, BIG, BLEU_TABLE, TABLE1
from explain.positional import rotation
from model.checkpoint import Bundle, count_parameters
from model.data import Pair
from model.transformer import Config, Transformer, sinusoidal_encoding
from model.vocab import Vocab
from ui.page_list import by_file
from viz import embeddings as ve
from viz import positional as vp
from viz.complexity import (
    attention_matrix_bytes,
    bleu_display,
    bleu_figure,
    bleu_frame,
    cheaper_than_recurrence,
    costs_figure,
    human_bytes,
    layer_costs,
    path_length_conv,
    stored_bytes,
)
from viz.embeddings import (
    TEXTBOOK_VOCAB,
    column_labels,
    lookup_table,
    textbook_one_hot,
    token_table,
    vocab_window,
)
from viz.overview import (
    BLOCKS,
    RESIDUAL_EDGES_DEC,
    architecture_dot,
    data_summary,
    heads_latex,
    model_record,
    shape_rows,
    sizes_table,
)
from viz.positional import (
    ORDERS,
    curves_figure,
    make_order,
    shift_check,
)

# --- The paper's numbers (written out here independently of explain/paper.py) ---------------------

EXPECTED_BLEU = [
    ("ByteNet", 23.75, None, None, None),
    ("Deep-Att + PosUnk", None, 39.2, None, 1.0e20),
    ("GNMT + RL", 24.6, 39.92, 2.3e19, 1.4e20),
    ("ConvS2S", 25.16, 40.46, 9.6e18, 1.5e20),
    ("MoE", 26.03, 40.56, 2.0e19, 1.2e20),
    ("Deep-Att + PosUnk Ensemble", None, 40.4, None, 8.0e20),
    ("GNMT + RL Ensemble", 26.30, 41.16, 1.8e20, 1.1e21),
    ("ConvS2S Ensemble", 26.36, 41.29, 7.7e19, 1.2e21),
    ("Transformer (base)", 27.3, 38.1, 3.3e18, 3.3e18),  # one cost for both tasks: a merged cell in the paper
    ("Transformer (big)", 28.4, 41.8, 2.3e19, 2.3e19),
]


def test_bleu_table_rows_exactly():
    assert [(r.model, r.bleu_en_de, r.bleu_en_fr, r.cost_en_de, r.cost_en_fr) for r in BLEU_TABLE] == EXPECTED_BLEU


def test_table2_cells():
    """Table 2's cells as printed in the paper: the Transformers' training cost is one figure for both tasks."""
    rows = {r.model: r for r in BLEU_TABLE}
    for name, cost in (("Transformer (base)", 3.3e18), ("Transformer (big)", 2.3e19)):
        r = rows[name]
        assert r.cost_shared and r.cost_en_de == r.cost_en_fr == cost
    assert [r.model for r in BLEU_TABLE if r.cost_shared] == ["Transformer (base)", "Transformer (big)"]
    assert (rows["Transformer (big)"].bleu_en_de, rows["Transformer (big)"].bleu_en_fr) == (28.4, 41.8)
    assert (rows["Transformer (base)"].bleu_en_de, rows["Transformer (base)"].bleu_en_fr) == (27.3, 38.1)
    assert rows["ByteNet"].cost_en_de is None and rows["Deep-Att + PosUnk"].cost_en_de is None  # truly not reported
    shown = bleu_display(bleu_frame())
    assert shown["training FLOPs EN-FR"].tolist()[-2:] == ["3.3e18", "2.3e19"]
    assert shown["training FLOPs EN-DE"].tolist()[-2:] == ["3.3e18", "2.3e19"]
    fig = bleu_figure(bleu_frame())
    assert fig.layout.yaxis.range[0] == 0  # BLEU bars start at 0
    assert max(v for v in fig.data[2].y if v is not None) <= fig.layout.yaxis.range[1]
    assert list(fig.data[3].y)[-2:] == [3.3e18, 2.3e19]  # the EN-FR cost bars of the Transformers are drawn


def test_bleu_frame_and_display():
    f = bleu_frame()
    assert list(f["model"]) == [r[0] for r in EXPECTED_BLEU]
    for col, j in (("BLEU EN-DE", 1), ("BLEU EN-FR", 2), ("training FLOPs EN-DE", 3), ("training FLOPs EN-FR", 4)):
        got = [None if pd.isna(v) else v for v in f[col]]
        assert got == [r[j] for r in EXPECTED_BLEU]
    shown = bleu_display(f)
    assert shown.loc[0, "BLEU EN-FR"] == "-"
    assert shown.loc[2, "training FLOPs EN-DE"] == "2.3e19"
    assert shown.loc[6, "training FLOPs EN-FR"] == "1.1e21"
    assert shown.loc[8, "BLEU EN-DE"] == "27.3"


def test_bleu_figure_values_and_log_axis():
    fig = bleu_figure(bleu_frame())
    bleu_de = fig.data[0]
    assert bleu_de.name == "BLEU EN-DE"
    assert list(bleu_de.y) == [r[1] for r in EXPECTED_BLEU]
    cost_fr = fig.data[3]
    assert cost_fr.name == "FLOPs EN-FR" and list(cost_fr.y) == [r[4] for r in EXPECTED_BLEU]
    assert fig.layout.yaxis2.type == "log"


def test_table1_and_paper_sizes():
    assert [t.name for t in TABLE1] == ["Self-attention", "Recurrent", "Convolutional", "Self-attention (restricted)"]
    assert TABLE1[0].complexity == r"O(n^2 \cdot d)" and TABLE1[1].sequential == "O(n)"
    assert TABLE1[2].path == r"O(\log_k(n))" and TABLE1[3].path == "O(n/r)"
    assert (BASE.n_layers, BASE.d_model, BASE.n_heads, BASE.d_k, BASE.d_ff) == (6, 512, 8, 64, 2048)
    assert (BIG.d_model, BIG.n_heads, BIG.d_ff) == (1024, 16, 4096)
    assert BASE.d_model == BASE.n_heads * BASE.d_k


# --- Complexity calculator -----------------------------------------------------------------------


@pytest.mark.parametrize("n,d,k,r", [(10, 64, 3, 4), (50, 512, 3, 8), (1000, 128, 5, 1000), (1, 1, 1, 1)])
def test_layer_costs_are_the_formulas(n, d, k, r):
    c = layer_costs(n, d, k, r)
    rr = min(r, n)
    assert list(c["count"]) == [n * n * d, n * d * d, k * n * d * d, rr * n * d]
    assert list(c["sequential operations"]) == [1, n, 1, 1]
    assert c["maximum path length"][0] == 1 and c["maximum path length"][1] == n
    assert c["maximum path length"][3] == math.ceil(n / rr)


def test_conv_path_length_is_ceil_log():
    assert path_length_conv(9, 3) == 2  # an exact power: no float trouble
    assert path_length_conv(10, 3) == 3
    assert path_length_conv(1000, 10) == 3
    assert path_length_conv(1, 3) == 1
    assert path_length_conv(7, 1) == 7
    for n in range(2, 300):
        assert path_length_conv(n, 2) == math.ceil(math.log2(n))


def test_layer_costs_rejects_nonpositive():
    with pytest.raises(ValueError):
        layer_costs(0, 64, 3, 4)


def test_cheaper_and_memory():
    assert cheaper_than_recurrence(10, 64) and not cheaper_than_recurrence(64, 64)
    assert attention_matrix_bytes(10, 8, 6) == 10 * 10 * 8 * 6 * 4
    assert attention_matrix_bytes(3, 2, 1, n_keys=5) == 3 * 5 * 2 * 4
    assert human_bytes(512) == "512 bytes" and human_bytes(1536) == "1.5 KiB" and human_bytes(3 * 1024**2) == "3.0 MiB"
    assert stored_bytes(torch.zeros(1, 2, 5, 5)) == 50 * 4 and stored_bytes(torch.zeros(3, dtype=torch.float64)) == 24


def test_costs_figure():
    c = layer_costs(10, 64, 3, 4)
    fig = costs_figure(c)
    assert list(fig.data[0].y) == [float(v) for v in c["count"]]
    assert fig.layout.yaxis.type == "log"


# --- Embeddings ----------------------------------------------------------------------------------


def test_one_hot():
    oh = one_hot([2, 0, 2], 4)
    assert oh.tolist() == [[0, 0, 1, 0], [1, 0, 0, 0], [0, 0, 1, 0]]


def test_textbook_one_hot_of_am():
    df = textbook_one_hot("am")
    assert list(df.columns) == ["a", "am", "I", "thanks", "student", "<eos>"] == list(TEXTBOOK_VOCAB)
    assert df.iloc[0].tolist() == [0, 1, 2, 3, 4, 5]
    assert df.iloc[1].tolist() == [0, 1, 0, 0, 0, 0]
    with pytest.raises(ValueError):
        textbook_one_hot("cat")


def test_lookup_table_draws_the_lookup():
    torch.manual_seed(0)
    E = torch.randn(50, 16)
    demo = lookup_demo(E, 7, traced=E[7] * 4.0)
    t = lookup_table(demo, dims=4)
    assert list(t.index) == ["one-hot row @ E", "E[id] (row of the table)", "E[id] x √16", "traced src.embed"]
    assert t.loc["E[id] (row of the table)"].tolist() == [round(float(x), 5) for x in E[7, :4]]
    assert t.loc["E[id] x √16"].tolist() == [round(float(x), 5) for x in E[7, :4] * 4]
    assert list(t.columns) == ["d0", "d1", "d2", "d3"] and lookup_table(lookup_demo(E, 7)).shape == (3, 8)


def test_token_table_and_window():
    vocab = Vocab(["<pad>", "<bos>", "<eos>", "<unk>", "i", "am"])
    ids, unknown = vocab.encode(["i", "am", "zorg"])
    df = token_table(["i", "am", "zorg", "<eos>"], [*ids, 2], vocab, unknown)
    assert df["id"].tolist() == [4, 5, 3, 2]
    assert df["status"].tolist() == ["in vocabulary", "in vocabulary", "unknown: fed as <unk>", "special token"]
    assert vocab_window([5, 4, 5, 2]) == [2, 4, 5]
    assert column_labels(vocab, [2, 4]) == ["2 <eos>", "4 i"]


# --- Positional encoding -------------------------------------------------------------------------


def test_shift_check_on_model_buffer():
    pe = sinusoidal_encoding(64, 128)
    df = shift_check(pe, 5)
    assert df["pos"].tolist() == list(range(59)) and df["pos + k"].tolist() == list(range(5, 64))
    assert df.iloc[:, 2].max() < 1e-5
    assert shift_check(pe, 3, positions=[0, 60, 61]).shape[0] == 2  # 61 + 3 is outside


def test_curves_figure():
    pe = sinusoidal_encoding(20, 8)
    fig = curves_figure(pe, [0, 3])
    assert list(fig.data[1].y) == pytest.approx(pe[:, 3].tolist())
    assert "cos" in fig.data[1].name and "sin" in fig.data[0].name


def test_make_order():
    assert make_order(4, "reversed") == [3, 2, 1, 0]
    assert make_order(4, "rotated by one") == [1, 2, 3, 0]
    assert make_order(4, "first two swapped") == [1, 0, 2, 3]
    assert make_order(1, "first two swapped") == [0]
    for how in ORDERS:
        assert sorted(make_order(9, how, seed=3)) == list(range(9))
    assert make_order(9, "shuffled", 1) == make_order(9, "shuffled", 1)
    with pytest.raises(ValueError):
        make_order(3, "sideways")


@pytest.fixture(scope="module")
def tiny_bundle():
    torch.manual_seed(0)
    words = ["<pad>", "<bos>", "<eos>", "<unk>"] + [f"w{i}" for i in range(12)]
    vocab = Vocab(words)
    model = Transformer(
        Config(len(vocab), len(vocab), d_model=32, n_heads=4, n_enc_layers=2, n_dec_layers=2, d_ff=64, max_len=24)
    ).eval()
    return Bundle(model, vocab, Vocab(words), "en-fr")


def test_permutation_check(tiny_bundle):
    ids = [4, 5, 6, 7, 8, 2]  # five words + EOS
    order = make_order(5, "reversed")
    off = permutation_check(tiny_bundle, ids, order, positional_encoding=False)
    on = permutation_check(tiny_bundle, ids, order, positional_encoding=True)
    assert off.order == (4, 3, 2, 1, 0, 5)
    assert off.max_diff < 1e-5
    assert on.max_diff > 1e-3
    assert off.translation == off.translation_perm  # cross-attention sums over a set: order cannot matter
    # the un-permuting itself: row j of the permuted output is row order[j] of the original
    assert torch.allclose(off.enc_perm[0], off.enc[4], atol=1e-5)
    with pytest.raises(ValueError):
        permutation_check(tiny_bundle, ids, [0, 1, 2], False)


# --- Overview ------------------------------------------------------------------------------------


def test_architecture_dot():
    cfg = Config(100, 120, d_model=64, n_heads=2, n_enc_layers=3, n_dec_layers=1, d_ff=96)
    dot = architecture_dot(cfg)
    assert dot.startswith("digraph") and dot.count("{") == dot.count("}")
    assert "Encoder layer  x 3" in dot and "Decoder layer  x 1" in dot
    assert "2 heads x d_k 32" in dot and "64 -> 96 -> 64" in dot
    for b in BLOCKS:
        assert f"({b.number})" in dot
    assert [b.number for b in BLOCKS] == list(range(1, 9))
    assert [by_file(b.page).name for b in BLOCKS] == [
        "tokens",
        "positional",
        "self_attention",
        "multi_head",
        "encoder",
        "decoder",
        "cross_attention",
        "output",
    ]


def test_sizes_table_and_parameters():
    cfg = Config(100, 120)
    model = Transformer(cfg)
    n = count_parameters(cfg)
    assert n == sum(p.numel() for p in model.parameters())
    t = sizes_table(cfg, n)
    assert t.loc["d_model"].tolist() == ["128", "512", "1024"]
    assert t.loc["heads (h)"].tolist() == ["4", "8", "16"]
    assert t.loc["d_k = d_v = d_model / h"].tolist() == ["32", "64", "64"]
    assert t.loc["d_ff"].tolist() == ["256", "2048", "4096"]
    assert t.loc["encoder layers (N)"].tolist() == ["2", "6", "6"]
    assert t.loc["source vocabulary", "this model"] == "100" and t.loc["target vocabulary", "this model"] == "120"
    assert t.loc["parameters", "this model"] == f"{n:,}"


def test_shape_rows():
    rows = dict((r[0], r[1:]) for r in shape_rows(Config(10, 10), 7, 5))
    assert rows["encoder input X"] == ("512 x m", "128 x 7")
    assert rows["heads concatenated"] == ("8·64 x m = 512 x m", "4·32 x 7 = 128 x 7")
    assert rows["decoder output"][1] == "128 x 5"


def test_heads_latex():
    tex = heads_latex(512, 8, 64, "m")
    assert r"\mathbb{R}^{512 \times m}" in tex and r"8 \times (64 \times m)" in tex and tex.endswith(r"512 \times m")
    assert heads_latex(128, 4, 32, 12).endswith(r"128 \times 12")


def test_model_record():
    rec = dict(
        model_record(
            {
                "training": {"steps_done": 1200, "n_train": 3000, "look_ahead_mask": True},
                "metrics": {"exact_match": 0.953, "bleu": 97.12, "coref_accuracy": None},
            }
        )
    )
    assert rec == {
        "training steps": "1,200",
        "look-ahead mask in training": "on",
        "training pairs": "3,000",
        "held-out exact match": "95.3%",
        "held-out BLEU": "97.1",
    }
    assert model_record({}) == []


def test_data_summary():
    data = {"train": [Pair("a", "b", "x"), Pair("c", "d", "y"), Pair("e", "f", "x")], "heldout": [Pair("g", "h", "y")]}
    df = data_summary(data)
    assert df["family"].tolist() == ["x", "y"]
    assert df["training pairs"].tolist() == [2, 1] and df["held-out pairs"].tolist() == [0, 1]
    assert df["example (English)"].tolist() == ["a", "c"]


# --- Notices, sizes and layouts of the intro pages (recomputed from the tensors) -------------------


def test_architecture_dot_draws_the_decoders_three_residuals():
    dot = architecture_dot(Config(100, 120, d_model=64, n_heads=2))
    for a, b in (
        ("src_pos", "enc_norm1"),
        ("enc_norm1", "enc_norm2"),  # the encoder's two
        ("tgt_pos", "dec_norm1"),
        ("dec_norm1", "dec_norm2"),
        ("dec_norm2", "dec_norm3"),
    ):  # the decoder's 3
        assert f"{a} -> {b} [style=dashed" in dot, (a, b)
    assert len(RESIDUAL_EDGES_DEC) == 3 and dot.count("style=dashed") == 5


def test_positional_defaults_fit_any_model():
    assert vp.default_dims(128) == [0, 1, 10, 40]
    assert vp.default_dims(8) == [0, 1, 6, 7] and vp.default_dims(2) == [0, 1]
    assert all(d < 40 for d in vp.default_dims(40))
    assert vp.clamp(3, 0, 7) == 3 and vp.clamp(3, 0, 1) == 1 and vp.clamp(2, 0, 0) == 0


def test_formula_table_layouts_and_float64_error():
    pe64 = ep.formula_table(16, 8)
    assert torch.allclose(pe64.float(), sinusoidal_encoding(16, 8), atol=1e-6)
    err = ep.float64_shift_error(64, 128, 2)
    assert 0 < err < 1e-12  # the identity itself holds to rounding in float64
    halves = vp.concatenated(pe64)
    assert torch.equal(halves[:, :4], pe64[:, 0::2]) and torch.equal(halves[:, 4:], pe64[:, 1::2])
    assert "column 2i+1 here is column 4 + i there" in vp.layouts_notice(pe64)


def test_positional_notices_are_the_encoding():
    pe = sinusoidal_encoding(64, 128)
    step = (pe[1:12] - pe[:11]).abs().mean(0)
    text = vp.sentence_notice(pe[:12])
    assert f"dimension 0 changes by {float(step[0]):.2f} on average and dimension 127 by {float(step[-1]):.1e}" in text
    assert f"PE(0) and PE(11) are {float((pe[0] - pe[11]).norm()):.2f} apart" in text
    text = vp.table_notice(pe)
    assert "√(D/2) = 8.000" in text and f"‖PE(0) − PE(63)‖ = {float((pe[0] - pe[63]).norm()):.2f}" in text
    # sin(pos · w) over pos = 0 .. 63 crosses zero at pos = π/w, 2π/w, ...: floor(63 w / π) times (its 0 at pos 0 is no
    # crossing: counted as one, the notice said 21 where the chart shows 20)
    crossings = [math.floor(63 * 10000 ** (-d / 128) / math.pi) for d in (0, 40)]
    assert crossings == [20, 1]
    assert f"dim 0: {crossings[0]}, dim 40: {crossings[1]}" in vp.curves_notice(pe, [0, 40])
    M = rotation(2, 128)
    assert "Only 256 of the 16,384 entries of M_2 are non-zero" in vp.rotation_notice(M, 2, 1)
    assert f"k·w_1 = {2 * float(ep.frequencies(128)[1]):.4f} rad" in vp.rotation_notice(M, 2, 1)
    enc = torch.randn(4, 3)
    order = [1, 0, 2, 3]
    assert (
        "Row 0 of the permuted output is row 1 (“b”) of the original, moved: the largest difference is 0e+00"
        in vp.permuted_notice(enc, enc[order], order, list("abcd"))
    )


def test_embedding_notices():
    ids = [4, 7, 4, 2]
    oh = one_hot(ids, 10)
    labels = ["0 the", "1 cat", "2 the", "3 <eos>"]
    text = ve.one_hot_notice(oh, ids, labels)
    assert "Every row holds a single 1 (row sums 1 to 1) among 10 columns" in text
    assert "“0 the” and “2 the” are the same token: the same column 4" in text
    E = torch.randn(10, 16)
    embed = E[ids] * 4.0
    rms = embed.pow(2).mean(1).sqrt()
    text = ve.embed_notice(embed, ids, labels, 4.0)
    assert f"{float(rms.min()):.2f} to {float(rms.max()):.2f}, after × √d_model = 4.00" in text
    assert "identical (max difference 0)" in text
