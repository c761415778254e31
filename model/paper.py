"""Numbers from the paper, "Attention Is All You Need" (Vaswani et al., NeurIPS 2017): the one source.

Everything here is quoted from the paper, not measured on this app's model:

- `BASE`, `BIG`: the sizes of the base and big models (Table 3, section 3).
- `TABLE1`: per-layer complexity, sequential operations and maximum path length (Table 1).
- `BLEU_TABLE`: BLEU on newstest2014 and training cost in FLOPs (Table 2).
- `SECTIONS`: where the paper describes each part of its training recipe.

The app's pages read these constants; no page writes a paper figure by hand.
"""

from __future__ import annotations

from dataclasses import dataclass

CITATION = "Vaswani et al., Attention Is All You Need, NeurIPS 2017"


@dataclass(frozen=True)
class PaperModel:
    """The sizes of one of the paper's models (Table 3)."""

    name: str
    n_layers: int  # N: encoder layers, and as many decoder layers
    d_model: int
    n_heads: int  # h
    d_k: int  # = d_v = d_model / h
    d_ff: int
    dropout: float  # P_drop
    params_millions: int  # parameter count, in millions
    train_steps: int
    vocab: str  # the paper's vocabularies (sub-word, shared between source and target)


VOCAB = "≈37k (EN-DE), 32k (EN-FR) sub-words"
BASE = PaperModel("base", 6, 512, 8, 64, 2048, 0.1, 65, 100_000, VOCAB)
BIG = PaperModel("big", 6, 1024, 16, 64, 4096, 0.3, 213, 300_000, VOCAB)


@dataclass(frozen=True)
class LayerType:
    """One row of Table 1, as LaTeX (big-O) and as the plain formula the calculator evaluates."""

    name: str
    complexity: str  # LaTeX, complexity per layer
    sequential: str  # LaTeX, minimum number of sequential operations
    path: str  # LaTeX, maximum path length between two positions


TABLE1 = (
    LayerType("Self-attention", r"O(n^2 \cdot d)", r"O(1)", r"O(1)"),
    LayerType("Recurrent", r"O(n \cdot d^2)", r"O(n)", r"O(n)"),
    LayerType("Convolutional", r"O(k \cdot n \cdot d^2)", r"O(1)", r"O(\log_k(n))"),
    LayerType("Self-attention (restricted)", r"O(r \cdot n \cdot d)", r"O(1)", r"O(n/r)"),
)
TABLE1_CAPTION = ("n: sequence length, d: representation dimension, k: kernel size of the convolutions, "
                  "r: size of the neighbourhood in restricted self-attention.")


@dataclass(frozen=True)
class Result:
    """One row of Table 2: BLEU on newstest2014 and training cost in FLOPs (None: not reported).

    `cost_shared`: the paper prints one training cost for both tasks (a cell merged across EN-DE and EN-FR, as
    for the two Transformers); it is then stored in both columns.
    """

    model: str
    bleu_en_de: float | None
    bleu_en_fr: float | None
    cost_en_de: float | None
    cost_en_fr: float | None
    cost_shared: bool = False


BLEU_TABLE = (
    Result("ByteNet", 23.75, None, None, None),
    Result("Deep-Att + PosUnk", None, 39.2, None, 1.0e20),
    Result("GNMT + RL", 24.6, 39.92, 2.3e19, 1.4e20),
    Result("ConvS2S", 25.16, 40.46, 9.6e18, 1.5e20),
    Result("MoE", 26.03, 40.56, 2.0e19, 1.2e20),
    Result("Deep-Att + PosUnk Ensemble", None, 40.4, None, 8.0e20),
    Result("GNMT + RL Ensemble", 26.30, 41.16, 1.8e20, 1.1e21),
    Result("ConvS2S Ensemble", 26.36, 41.29, 7.7e19, 1.2e21),
    Result("Transformer (base)", 27.3, 38.1, 3.3e18, 3.3e18, cost_shared=True),
    Result("Transformer (big)", 28.4, 41.8, 2.3e19, 2.3e19, cost_shared=True),
)

# Section 5 of the paper, "Training": 5.1 data and batching, 5.2 hardware and schedule, 5.3 the optimizer (Adam and
# the learning-rate schedule), 5.4 regularization (residual dropout and label smoothing).
SECTIONS = {
    "batching": "5.1",
    "optimizer": "5.3",
    "learning rate": "5.3",
    "dropout": "5.4",
    "label smoothing": "5.4",
}

# How the paper trained and decoded (sections 5.1, 5.2, 5.3, 5.4, 6.1), beside which the lesson and the training page
# show this model's own values. (label, the paper's base model, the paper's big model)
RECIPE = (
    ("batch", "≈ 25,000 source + 25,000 target tokens (§5.1)", "the same"),
    ("hardware", "one machine, 8 NVIDIA P100 GPUs (§5.2)", "the same"),
    ("training", "100,000 steps, about 12 hours (0.4 s a step)", "300,000 steps, 3.5 days (1.0 s a step)"),
    ("optimizer", "Adam, β₁ = 0.9, β₂ = 0.98, ε = 10⁻⁹ (§5.3)", "the same"),
    ("warm-up", "4,000 steps, then ∝ step^−0.5 (§5.3)", "the same"),
    ("dropout", "P_drop = 0.1 (§5.4)", "P_drop = 0.3 (EN-DE), 0.1 (EN-FR)"),
    ("label smoothing", "ε_ls = 0.1 (§5.4)", "the same"),
    ("checkpoints", "the average of the last 5, written every 10 minutes (§6.1)", "the average of the last 20"),
    ("decoding", "beam search, beam 4, length penalty α = 0.6 (§6.1)", "the same"),
    ("output length", "at most input length + 50, stopping early at <eos> (§6.1)", "the same"),
)
PAPER_PEAK_LR = BASE.d_model ** -0.5 * 4000 ** -0.5  # the base model's learning rate at the end of warm-up (7.0e-4)
WARMUP = 4000
