"""The decoder page's prose (pages/decoder.py lays it out). Texts that state a number are functions of it."""


def intro(words: list[str]) -> str:
    """The page's opening, with the sentence's own translation as the shifted-right example (with no sentence, the
    textbook's, named as such: the page's "computed on your sentence" would not be true of it)."""
    shown = " ".join(w.replace("`", "'") for w in (words or ["les", "machines", "pensantes"])[:12])
    example = f"input `<bos> {shown}`, output `{shown} <eos>`"
    return INTRO.format(example=example if words else f"for “thinking machines”: {example}")


INTRO = (
    "The decoder writes the translation one word at a time. Its input is the translation shifted right by one: "
    "**position t reads word t and predicts word t + 1** ({example}). Each of its blocks "
    "has **three** sub-layers: **masked self-attention** over the "
    "words written so far, **encoder-decoder attention** over the encoded source sentence (next page), and a "
    "**feed-forward** net; each is wrapped in a residual connection and layer normalisation (add & norm). This "
    "page is about the **look-ahead mask**, which keeps position t from reading word t + 1 and later. Everything "
    "below is computed on your sentence by the real model, unless it says *example from the lecture notes*."
)


def block(n_layers: int, t: int, d_model: int) -> str:
    return (
        f"- **Masked self-attention**: each target position mixes in the positions *up to itself*.\n"
        f"- **Encoder-decoder attention**: queries from the decoder, keys and values from the encoder output, so "
        f"every target position can read the whole source sentence.\n"
        f"- **Feed-forward**: the same two-layer net at every position.\n"
        f"- Stacked N times: the paper uses N = 6, this model N = {n_layers}. Every block keeps the shape "
        f"[T, d_model] = [{t}, {d_model}] for your translation (T = {t} decoder positions: <bos> and the words)."
    )


def regularisation(section: str, p_paper: float, p_model: float, biases: bool) -> str:
    bias = (
        "All its attention projections W^Q, W^K, W^V, W^O have bias vectors, which the paper's formulas do not "
        "write (its feed-forward net has b_1, b_2 in both)."
        if biases
        else "Its attention projections have no bias vectors, as in the paper's formulas."
    )
    return (
        f"**Dropout** (the paper's section {section}, P_drop = {p_paper:g} in the base model) is applied to the "
        "output of every sub-layer before the add & norm, and to the sums of embeddings and positional encodings. "
        f"This model (P_drop = {p_model:g}) also drops attention weights after the softmax and the feed-forward "
        "net's hidden layer, as `torch.nn.Transformer` does. In training, dropout sets each of those numbers to 0 "
        "with probability P_drop and multiplies the others by 1 / (1 − P_drop), so that no unit can count on "
        "another one being there. Dropout acts only in training, never while "
        f"translating, so the numbers on these pages are the same every time. {bias}"
    )


MASKED = (
    "Position *t* reads word *t* and predicts word *t + 1*. While translating, word *t + 1* is not written yet. "
    "In training the whole reference is fed in at once (teacher forcing), so word *t + 1* sits right there in the "
    "input at position *t + 1*, and the decoder must be kept from peeking: before the softmax, a mask adds **0** "
    "where a query may look (itself and earlier positions) and **−∞** where it may not (later positions). Since "
    "e^−∞ = 0, the future gets exactly zero weight."
)
MASKED_LATEX = (
    r"\mathrm{MaskedAttention}(Q,K,V)=\mathrm{softmax}\!\left(\frac{QK^{\top}}{\sqrt{d_k}}+M\right)V,"
    r"\qquad M_{ij}=\begin{cases}0 & j\le i\\ -\infty & j>i\end{cases}"
)


def step_titles(module: str, head: int) -> list[str]:
    return [
        f"Scaled scores ({module}.scaled, head {head})",
        f"Look-ahead mask ({module}.mask)",
        f"Masked scores ({module}.masked)",
        f"Weights ({module}.weights)",
    ]


MASK_OFF = (
    "The look-ahead mask is switched off in the sidebar: the mask below has no −∞ above the diagonal "
    "and the weights reach into the future."
)
MASKED_CAPTION = (
    "Rows are queries (the position that looks), columns are keys. Grey cells are −∞. Each row of the "
    "weights sums to 1; with the mask on, everything above the diagonal is exactly 0."
)
RENORM = (
    "Masking does not just delete the future's share: the softmax is taken over the allowed keys only, so their "
    "weights again sum to 1. The same numbers come out if you take the softmax over *all* keys and then divide "
    "the allowed ones by their share, as this row shows."
)
RENORM_LATEX = r"\alpha_{ij}=\frac{e^{s_{ij}}}{\sum_{k\le i} e^{s_{ik}}}\quad (j\le i),\qquad \alpha_{ij}=0\quad (j>i)"

LECTURE = (
    "*Example from the lecture notes* (made-up scaled scores for 4 positions, not the model): the same "
    "three steps, computed with the model's own `look_ahead_mask`, `additive_mask` and `torch.softmax`."
)


def mask_off_intro(layer: int, head: int) -> str:
    return (
        f"Decoder layer {layer}, head {head} (chosen in section 2). Other switches from the sidebar stay as they are."
    )


SAME_WORDS = "The same words come out here, but the attention weights above differ."
MASK_OFF_CAPTION = (
    "While generating there is no future word to read, yet the earlier positions now read each other "
    "in both directions, something this model never saw in training, so its hidden states shift."
)
WRONG_DIRECTION = (
    "The shipped no-mask model translates English → French; pick the shipped model in the sidebar and "
    "type an English sentence to see it."
)
CHEAT = (
    "The shipped *no-mask* model was trained with the same recipe, but its decoder could see the whole "
    "reference during training. Position *t* must predict word *t + 1*, which is the input of position *t + 1*, "
    "so it learns to **copy the answer**. Teacher forcing with a reference shows it; generating, where "
    "the next word does not exist yet, gives it away."
)
REFERENCE_LABEL = "Reference translation fed to the decoder (teacher forcing)"
REFERENCE_HELP = (
    "Defaults to the toy data set's translation of your sentence, or the base model's own translation "
    "when the sentence is not in the set."
)
TRAINING_FIGURES = (
    "**Training figures** (from each checkpoint's JSON). Compare the teacher-forced figures (training loss, "
    "held-out cross-entropy), where the answer is in the decoder's input, with the generated ones (exact match, "
    "BLEU), where it is not: the no-mask model looks as good as the base model on the first and fails on the "
    "second."
)

OUTRO = (
    "Masked self-attention is the decoder reading its own words. What it reads from the source sentence, "
    "through encoder-decoder attention and the source's padding mask, is the next page."
)
EXACT = "Exact numbers of the four matrices"
BLOCK_ALT = (
    "Diagram of one decoder block, bottom to top: the target words so far enter masked self-attention, then "
    "add & norm, encoder-decoder attention reading the encoder's output, add & norm, the feed-forward net, "
    "add & norm; the block is repeated for every decoder layer."
)
