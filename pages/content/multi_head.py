"""Prose of the multi-head attention page (pages/multi_head.py). Texts that state a number take it as an argument."""

from pages.content.self_attention import focus  # noqa: F401 - one sentence for both pages

INTRO = (
    "One attention pattern is one way for words to look at each other. Multi-head attention runs several "
    "attentions side by side, each with its own W_Q, W_K, W_V projecting to a smaller space of d_k "
    "dimensions, so different heads can follow different relations at the same time (which word a pronoun "
    "refers to, the verb's tense, the word next door, …). Their outputs are put side by side and mixed by "
    "one more matrix, W_O."
)
FORMULAS = (
    r"\mathrm{MultiHead}(Q, K, V) = \mathrm{Concat}(\mathrm{head}_1, \dots, \mathrm{head}_h)\,W^O",
    r"\mathrm{head}_i = \mathrm{Attention}(QW_i^Q,\ KW_i^K,\ VW_i^V)",
)  # two lines: one is too wide


def matrices(n_heads: int, d_model: int, d_k: int) -> str:
    return (
        f"Each head has its own three matrices, so h heads have 3h of them (here {3 * n_heads}, each "
        f"{d_model} × {d_k}), plus W^O ({d_model} × {d_model}). For self-attention Q, K and V are all the same "
        "input X."
    )


SHAPES_CAPTION = (
    "The lecture notes write these shapes with one column per word (512 × m); here each word is a "
    "row (m × 512). d_k = d_model / h keeps the total work the same as one full-width head."
)
DECODER_ROWS = (
    "Decoder rows are the decoder's inputs (<bos> and the translation so far); cross-attention "
    "columns are the source words."
)
ONE_WORD = (
    "With one head a word gets one weighted mix of the others. With more heads it gets several, each "
    "looking somewhere else; the layer combines them all."
)


def concat_latex(n_heads: int, T: int, d_k: int, d_model: int) -> str:
    H, D = n_heads, d_model
    return (
        rf"\underbrace{{Z_1, \dots, Z_{{{H}}}}}_{{{H}\ \times\ [{T},\ {d_k}]}} \xrightarrow{{\mathrm{{concat}}}} "
        rf"[{T},\ {H}\cdot{d_k} = {D}] \xrightarrow{{\times\, W^O\ [{D},\ {D}]}} [{T},\ {D}]"
    )


SWITCH_OFF = (
    "Untick a head above (or pick heads in the sidebar) and compare the model with and without it. "
    "A head that is off still computes its weights, but its z is set to 0. That is blunt: a head that brings "
    "nothing is not the same as a head that brings another sentence's evidence. Page *Causal tracing* puts "
    "back one head's output from another run instead, and measures how much of a word comes back."
)
ALL_ON = "All heads are on: before and after are the same model. Untick a head above to see its effect."
GREEDY_CAPTION = "Probability the model gave each token when it chose it (each model decoding on its own)."


ONE_HEAD = (
    "The lecture notes name the problem multi-head attention solves: with one attention, words have **only "
    "one way to interact**, one weighted mix per word, while a sentence needs several relations at once "
    "(which word a pronoun refers to, the tense, the word next door). Test it on this model: switch off "
    "every head of one layer but one, so that layer gives each word a single pattern, and run the whole "
    "translation again; then the next head, and the next layer. A ✗ marks a run whose translation "
    "changed; the colour is the lowest probability the model still gives a word of its unmodified "
    "translation (fed the whole translation at once, as in training: teacher forcing)."
)
ONE_HEAD_CAPTION = (
    "A layer that keeps the translation with any one head has heads that overlap on this sentence: "
    "each one alone carries what the sentence needs there, which a small model of a toy language can "
    "afford. Other sentences may show layers that need more than one head (try "
    "“thinking machines”). The sidebar's switches play no part here: every run starts from the "
    "unmodified model."
)
