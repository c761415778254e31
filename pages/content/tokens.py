"""Prose of the tokens-and-embeddings page (pages/tokens.py). Texts that state a number take it as an argument."""

INTRO = (
    "A Transformer never sees letters. The sentence is cut into **tokens**, each token becomes an **id** (its "
    "number in the vocabulary), and each id selects one row of a learned **embedding table**: a vector of "
    "d_model numbers. Those vectors, one per token, are what the first encoder layer receives (after the "
    "positional encoding is added, next page)."
)
TOKENIZER = (
    "The tokenizer is word-level, so every token is a word you can read:\n"
    "- lower-case; spaces separate tokens;\n"
    "- every punctuation mark is a token of its own (`stop!` → `stop` `!`);\n"
    "- English contractions stay whole (`didn't` is one token); French elisions are split after the "
    "apostrophe (`l'animal` → `l'` `animal`, `qu'il` → `qu'` `il`);\n"
    "- a word the training data never contained becomes the special token `<unk>` (flagged above), and the "
    "encoder input always ends with `<eos>`.\n\n"
    "Real systems (the paper too) use sub-word pieces (BPE, word-pieces) so that no word is ever unknown."
)
IDS_CAPTION = (
    "Ids 0-3 are the special tokens <pad>, <bos>, <eos>, <unk>; the other words are numbered by "
    "how often they occur in the training data (most frequent first)."
)
ONE_HOT = "A one-hot vector has as many entries as the vocabulary: 1 at the token's id, 0 everywhere else."
LOOKUP_CAPTION = (
    "That is why frameworks implement the embedding as a table lookup: the matrix product with a "
    "one-hot row would multiply thousands of zeros."
)
SCALE = (
    "The paper multiplies the embedding weights by √d_model and does not say why. One effect, visible here "
    "and in the guided lesson: a row becomes about as long as a row of the positional encoding added next "
    "(whose values lie between −1 and 1). The paper also shares this matrix between the two embedding tables "
    "and the pre-softmax linear layer (section 3.4, weight tying: fewer parameters, and a word's input and "
    "output vectors are the same); this model keeps three separate matrices."
)


def window_caption(shown: int, vocab: int) -> str:
    return (
        f"Only the {shown} columns of ids that occur in the sentence are drawn: the other {vocab - shown} columns "
        f"of the {vocab}-wide rows are all 0."
    )


def decoder(n_tgt: int, bos: str) -> str:
    return (
        f"The decoder has its own vocabulary ({n_tgt:,} French tokens) and its own embedding table. "
        f"Its input is the translation **shifted right**: it starts with `{bos}`, so position t reads word t "
        f"(`{bos}` at 0) and predicts word t + 1. Here the decoder input is the model's own translation of your "
        "sentence."
    )
