"""Prose of the encoder-layer page (pages/encoder.py). Texts that state a number take it as an argument."""


def intro(n_enc_layers: int, d_model: int) -> str:
    return (
        f"One encoder block is **self-attention followed by a small feed-forward net** (“dense” layer), each "
        f"wrapped in a residual connection and a LayerNorm. The encoder stacks N such blocks with the same shape "
        f"and different weights: the paper uses N = 6, this model N = {n_enc_layers}. Every word enters as "
        f"a {d_model}-number vector and leaves as one."
    )


PRE_LN = (
    "This model is **pre-LN** (LayerNorm before each sublayer, one more at the end of the stack), not the "
    "paper's post-LN; the steps below follow what this model does."
)
RESIDUAL_POST = r"\text{post-LN (paper, this model):}\quad \mathrm{LayerNorm}\big(x + \mathrm{Sublayer}(x)\big)"
RESIDUAL_PRE = r"\text{pre-LN:}\quad x + \mathrm{Sublayer}\big(\mathrm{LayerNorm}(x)\big)"


def residual(d_model: int) -> str:
    return (
        "The sublayer's output is **added** to its input, so each sublayer only has to learn a correction, "
        "and gradients have a short path down the stack (in post-LN it still passes through each LayerNorm; "
        "pre-LN, below, leaves it untouched). Adding needs both vectors to have the same size: "
        f"that is why every sublayer maps d_model = {d_model} back to d_model = {d_model}."
    )


NORMALISE_LATEX = (
    r"\hat x = \frac{x - \mu}{\sqrt{\sigma^2 + \epsilon}}, \qquad \mu = \frac1D\sum_i x_i, \quad "
    r"\sigma^2 = \frac1D \sum_i (x_i - \mu)^2"
)


def normalise(pre_ln: bool) -> str:
    return (
        "Each word's vector separately (over its features, not over the sentence) is shifted to mean 0 and "
        "scaled to variance 1."
        + (" Here x = x + Sublayer(x) from above." if not pre_ln else " In pre-LN, x is the sublayer's input.")
    )


def scale_shift(d_model: int) -> str:
    return (
        f"γ and β are {d_model} learned numbers each, the same for every word: after forcing mean 0 and "
        "variance 1, the layer may give each feature back its own scale and offset."
    )


FFN_LATEX = r"\mathrm{FFN}(x) = \max(0,\ xW_1 + b_1)\,W_2 + b_2"


def ffn_shapes(T: int, D: int, F: int) -> str:
    return (
        rf"[{T},\ {D}] \xrightarrow{{W_1\ [{D},\ {F}],\ \mathrm{{ReLU}}}} [{T},\ {F}] "
        rf"\xrightarrow{{W_2\ [{F},\ {D}]}} [{T},\ {D}]"
    )


def ffn(d_model: int, d_ff: int) -> str:
    return (
        f"The same two-layer net (d_model = {d_model} → d_ff = {d_ff} → d_model) is applied to every "
        "word on its own: attention mixes information between words, the FFN transforms each word. Why is it "
        "needed? Attention's output for a word is a weighted average of value vectors, so it stays in the span "
        "of the values; the ReLU net adds the non-linear capacity to compute new features (measured in the next "
        "section)."
    )


SPAN_LATEX = (
    r"z_i = \sum_j a_{ij}\, v_j \;\in\; \operatorname{span}\{v_1, \dots, v_T\} \quad "
    r"\text{whatever the weights } a_{ij}"
)


def span(n_heads: int, d_k: int, d_model: int) -> str:
    return (
        "The lecture notes' reason for the FFN: self-attention's outputs are weighted sums of the value vectors, "
        "so they **stay in the subspace the values span**, whatever the weights. Exactly what stays where, in this "
        "layer, for a sentence of T words (each step measured below as the share of every word's vector that lies "
        "outside its span):\n\n"
        f"1. **Each head's z** is a mix of that head's T values: {n_heads} heads side by side, H·T vectors, each in "
        f"its own block of d_k = {d_k} columns.\n"
        "2. **W^O is linear**: the attention output minus its bias b^O stays in the span of those vectors times W^O "
        f"(H·T vectors in {d_model} dimensions).\n"
        "3. **The residual adds x**, the word's own input, which is not a value: the sum lies in the span of the T "
        "inputs, the H·T mapped values and b^O. LayerNorm subtracts each row's mean (a fixed projection), divides "
        "the row by one number (it keeps its direction) and multiplies by γ: still a span fixed before any "
        "weight a_ij was chosen (minus β; a pre-LN model has no LayerNorm here).\n"
        "4. **The FFN**, max(0, xW_1 + b_1)W_2 + b_2: without the ReLU it would be one more linear map, and its "
        "output (minus b_2) would stay in the span of what W_1, W_2 make of step 3's span. The ReLU, applied to "
        "each number separately, takes it out.\n\n"
        f"“Inside” means something only while the spanning vectors cannot fill all {d_model} dimensions: step 3 "
        f"has T + H·T + 1 of them, fewer than {d_model} for sentences under {-(-(d_model - 1) // (n_heads + 1))} "
        "tokens (every sentence of the toy set)."
    )


STACK = (
    "after the embedding and after every sublayer of every layer. LayerNorm keeps "
    "the size of the vector in check; the cosine similarity shows how far each step moves it."
)
POST_LN_LATEX = (
    r"\mathrm{LayerNorm}\big(x + \mathrm{Sublayer}(x)\big)",
    r"Z = \mathrm{LayerNorm}\big[Y(X) + X\big]",
    r"\tilde X = \mathrm{LayerNorm}\big[\mathrm{MLP}[Z] + Z\big]",
)
POST_LN_LETTERS = "The same in the lecture notes' letters: Y = self-attention, MLP = the feed-forward net."
POST_LN = "Every layer's output is normalised. Deep post-LN stacks need a learning-rate warm-up to train stably."
PRE_LN_LATEX = r"x + \mathrm{Sublayer}\big(\mathrm{LayerNorm}(x)\big)"
PRE_LN_ABOUT = (
    "The residual path is never normalised, so gradients pass straight through: more stable for deep "
    "stacks. Since nothing normalises the last layer's output, a final LayerNorm follows the stack."
)
POST_LN_ALT = (
    "Diagram, bottom to top: x goes into the sublayer; x and the sublayer's output are added; LayerNorm "
    "follows the addition; its output goes to the next sublayer."
)
PRE_LN_ALT = (
    "Diagram, bottom to top: x goes through LayerNorm into the sublayer; the sublayer's output is added to "
    "the untouched x; no LayerNorm after the addition."
)
