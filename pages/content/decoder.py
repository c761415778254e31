"""The decoder page's prose (pages/decoder.py lays it out). Texts that state a number are functions of it."""

INTRO = (
    "The decoder writes the translation one word at a time. Each of its blocks has **three** sub-layers: "
    "**masked self-attention** over the words written so far, **encoder-decoder attention** over the encoded "
    "source sentence, and a **feed-forward** net; each is wrapped in a residual connection and layer "
    "normalisation (add & norm). Masks decide what each position may look at: the **look-ahead mask** hides "
    "future target words, the **padding mask** hides `<pad>` filler. Everything below is computed on your "
    "sentence by the real model, unless it says *example from the lecture notes*."
)


def block(n_layers: int, t: int, d_model: int) -> str:
    return (
        f"- **Masked self-attention**: each target position mixes in the positions *up to itself*.\n"
        f"- **Encoder-decoder attention**: queries from the decoder, keys and values from the encoder output, so "
        f"every target position can read the whole source sentence.\n"
        f"- **Feed-forward**: the same two-layer net at every position.\n"
        f"- Stacked N times: the paper uses N = 6, this model N = {n_layers}. Every block keeps the shape "
        f"[t, d_model] = [{t}, {d_model}] for your translation (t = {t} decoder positions)."
    )


MASKED = (
    "While translating, the word at position *t* is not written yet when position *t − 1* predicts it. In "
    "training the whole reference is fed in at once (teacher forcing), so the decoder must be kept from peeking: "
    "before the softmax, a mask adds **0** where a query may look (itself and earlier positions) and **−∞** where "
    "it may not (later positions). Since e^−∞ = 0, the future gets exactly zero weight."
)
MASKED_LATEX = (r"\mathrm{MaskedAttention}(Q,K,V)=\mathrm{softmax}\!\left(\frac{QK^{\top}}{\sqrt{d_k}}+M\right)V,"
                r"\qquad M_{ij}=\begin{cases}0 & j\le i\\ -\infty & j>i\end{cases}")
def step_titles(module: str, head: int) -> list[str]:
    return [f"Scaled scores ({module}.scaled, head {head})", f"Look-ahead mask ({module}.mask)",
            f"Masked scores ({module}.masked)", f"Weights ({module}.weights)"]


MASK_OFF = ("The look-ahead mask is switched off in the sidebar: the mask below has no −∞ above the diagonal "
            "and the weights reach into the future.")
MASKED_CAPTION = ("Rows are queries (the position that looks), columns are keys. Grey cells are −∞. Each row of the "
                  "weights sums to 1; with the mask on, everything above the diagonal is exactly 0.")
RENORM = (
    "Masking does not just delete the future's share: the softmax is taken over the allowed keys only, so their "
    "weights again sum to 1. The same numbers come out if you take the softmax over *all* keys and then divide "
    "the allowed ones by their share, as this row shows."
)
RENORM_LATEX = r"\alpha_{ij}=\frac{e^{s_{ij}}}{\sum_{k\le i} e^{s_{ik}}}\quad (j\le i),\qquad \alpha_{ij}=0\quad (j>i)"

LECTURE = ("*Example from the lecture notes* (made-up scaled scores for 4 positions, not the model): the same "
           "three steps, computed with the model's own `look_ahead_mask`, `additive_mask` and `torch.softmax`.")


def mask_off_intro(layer: int, head: int) -> str:
    return (f"Decoder layer {layer}, head {head} (chosen in section 2). Other switches from the sidebar stay as "
            "they are.")


SAME_WORDS = "The same words come out here, but the attention weights above differ."
MASK_OFF_CAPTION = ("While generating there is no future word to read, yet the earlier positions now read each other "
                    "in both directions, something this model never saw in training, so its hidden states shift.")
WRONG_DIRECTION = ("The shipped no-mask model translates English → French; pick the shipped model in the sidebar and "
                   "type an English sentence to see it.")
CHEAT = (
    "The shipped *no-mask* model was trained with the same recipe, but its decoder could see the whole "
    "reference during training. At position *t* it must predict word *t + 1*, which sits right there in its "
    "input, so it learns to **copy the answer**. Teacher forcing with a reference shows it; generating, where "
    "the next word does not exist yet, gives it away."
)
REFERENCE_LABEL = "Reference translation fed to the decoder (teacher forcing)"
REFERENCE_HELP = ("Defaults to the toy data set's translation of your sentence, or the base model's own translation "
                  "when the sentence is not in the set.")
TRAINING_FIGURES = (
    "**Training figures** (from each checkpoint's JSON). Compare the teacher-forced figures (training loss, "
    "held-out cross-entropy), where the answer is in the decoder's input, with the generated ones (exact match, "
    "BLEU), where it is not: the no-mask model looks as good as the base model on the first and fails on the "
    "second."
)

PADDING = (
    "Training runs on batches, and the sentences of a batch differ in length. Shorter ones are filled up with "
    "`<pad>` tokens so that the batch is a rectangle. The padding mask, shape [B, 1, 1, T], hides the `<pad>` "
    "*keys* from every query (in encoder self-attention, in encoder-decoder attention, and in the decoder), so "
    "a padded sentence is encoded exactly as if it were alone. Here your sentence shares a batch with another one."
)
PADDING_CAPTION = (
    "With the mask on, the <pad> columns are exactly 0 and the shorter sentence's encoding equals its encoding "
    "alone (up to rounding). With the mask off, its words also attend to <pad>, and its encoding (and possibly its "
    "translation) changes just because it was batched with a longer sentence."
)

CROSS = (
    "The second sub-layer of every decoder block. Its **queries** come from the decoder (the layer below), its "
    "**keys and values** from the encoder output `enc.out`: each target position asks which source words matter "
    "for the word it is about to write. The weights form a target × source *alignment* matrix."
)
CROSS_LATEX = (r"\mathrm{Attention}(Q_{\text{dec}},K_{\text{enc}},V_{\text{enc}})=\mathrm{softmax}\!\left("
               r"\frac{Q_{\text{dec}}K_{\text{enc}}^{\top}}{\sqrt{d_k}}\right)V_{\text{enc}},\quad "
               r"Q_{\text{dec}}=YW^Q,\; K_{\text{enc}}=\mathrm{enc.out}\,W^K,\; V_{\text{enc}}=\mathrm{enc.out}\,W^V")


def cross_caption(n_src: int) -> str:
    return ("Each row is one decoder position (labelled with its input word) while it predicts the next word; "
            f"its weights over the {n_src} source positions sum to 1.")


OUTRO = ("After the last block, a linear layer and a softmax turn each decoder position into a probability for every "
         "word of the target vocabulary:")
