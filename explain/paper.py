"""Numbers from the paper, "Attention Is All You Need" (Vaswani et al., NeurIPS 2017): the one source.

Everything here is quoted from the paper, not measured on this app's model:

- `BASE`, `BIG`: the sizes of the base and big models (Table 3, section 3).
- `TABLE1`: per-layer complexity, sequential operations and maximum path length (Table 1).
- `BLEU_TABLE`: BLEU on newstest2014 and training cost in FLOPs (Table 2).
- `TABLE3`: the variations of the base model and what each did on the EN-DE development set (Table 3).
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
TABLE1_CAPTION = (
    "n: sequence length, d: representation dimension, k: kernel size of the convolutions, "
    "r: size of the neighbourhood in restricted self-attention."
)


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


@dataclass(frozen=True)
class Variation:
    """One row of Table 3: a change to the base model and its result on the English-German development set
    (newstest2013, beam search, no checkpoint averaging).

    `changes` holds only what differs from the base model, under the names of `TrainConfig` and
    `Config` where they exist: n_layers (N), d_model, d_ff, n_heads (h), d_k, d_v, dropout (P_drop),
    label_smoothing (eps_ls), train_steps, positions ("learned": learned positional embeddings).
    `params_millions` is None where the paper leaves the cell empty (by its caption, as the base model).
    """

    group: str  # "base", "A" to "E", or "big"
    changes: tuple[tuple[str, object], ...]
    ppl: float  # per-wordpiece perplexity (dev)
    bleu: float  # BLEU (dev)
    params_millions: int | None = None

    @property
    def change(self) -> dict[str, object]:
        return dict(self.changes)


def _v(group: str, ppl: float, bleu: float, params: int | None = None, **changes: object) -> Variation:
    return Variation(group, tuple(changes.items()), ppl, bleu, params)


TABLE3 = (
    _v("base", 4.92, 25.8, 65),
    _v("A", 5.29, 24.9, n_heads=1, d_k=512, d_v=512),
    _v("A", 5.00, 25.5, n_heads=4, d_k=128, d_v=128),
    _v("A", 4.91, 25.8, n_heads=16, d_k=32, d_v=32),
    _v("A", 5.01, 25.4, n_heads=32, d_k=16, d_v=16),
    _v("B", 5.16, 25.1, 58, d_k=16),
    _v("B", 5.01, 25.4, 60, d_k=32),
    _v("C", 6.11, 23.7, 36, n_layers=2),
    _v("C", 5.19, 25.3, 50, n_layers=4),
    _v("C", 4.88, 25.5, 80, n_layers=8),
    _v("C", 5.75, 24.5, 28, d_model=256, d_k=32, d_v=32),
    _v("C", 4.66, 26.0, 168, d_model=1024, d_k=128, d_v=128),
    _v("C", 5.12, 25.4, 53, d_ff=1024),
    _v("C", 4.75, 26.2, 90, d_ff=4096),
    _v("D", 5.77, 24.6, dropout=0.0),
    _v("D", 4.95, 25.5, dropout=0.2),
    _v("D", 4.67, 25.3, label_smoothing=0.0),
    _v("D", 5.47, 25.7, label_smoothing=0.2),
    _v("E", 4.92, 25.7, positions="learned"),
    _v("big", 4.33, 26.4, 213, d_model=1024, d_ff=4096, n_heads=16, dropout=0.3, train_steps=300_000),
)
TABLE3_CAPTION = (
    "Table 3 of the paper: variations of the base model (N = 6, d_model = 512, d_ff = 2048, h = 8, "
    "d_k = d_v = 64, P_drop = 0.1, ε_ls = 0.1, 100k steps), English-German development set "
    "newstest2013. Perplexity is per word piece; parameters in millions where the paper gives them."
)
TABLE3_FINDINGS = {  # what the paper concludes from each group (section 6.2), in our words
    "A": "at constant computation one head is 0.9 BLEU worse than the best setting, and too many heads hurt too.",
    "B": "a smaller key size d_k hurts: judging compatibility is not easy, and a richer function than the dot "
    "product may help.",
    "C": "bigger models are better on perplexity (more layers, a wider model, a wider feed-forward net); on BLEU "
    "not always: N = 8 scores 25.5 against the base's 25.8.",
    "D": "dropout helps a lot against over-fitting; label smoothing worsens perplexity but improves BLEU.",
    "E": "learned positional embeddings give nearly the same result as the sinusoids. The paper has no row without "
    "the division by √d_k: section 3.2.1 only suspects that large dot products push the softmax where its "
    "gradient vanishes.",
}

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
PAPER_PEAK_LR = BASE.d_model**-0.5 * 4000**-0.5  # the base model's learning rate at the end of warm-up (7.0e-4)
WARMUP = 4000
