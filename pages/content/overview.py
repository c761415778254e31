"""Prose of the overview page (pages/overview.py). Texts that state a number take it as an argument."""

INTRO = (
    "The Transformer of *Attention Is All You Need* (Vaswani et al., 2017) translates a sentence with an "
    "**encoder** that reads all source words at once and a **decoder** that writes the translation one word at "
    "a time. It is a sequence-to-sequence model, but **not a recurrent network**: it is built only from "
    "attention and dense (feed-forward) layers. Unless a section says otherwise (the textbook's examples, the "
    "paper's tables, random-vector experiments, the recurrent model, shipped measurements), every number in this "
    "app comes from a real, small, trained Transformer running on your sentence."
)
EMPTY = "Type a sentence in the sidebar (for example *i am a student*) to follow it through the model."
STACK_CAPTION = (
    "Read bottom to top, as in the paper's Figure 1. Numbers in brackets are the pages on the right; "
    "dashed lines are the residual (skip) connections around each sub-layer: two in every encoder "
    "layer, three in every decoder layer."
)


def blocks(n_enc_layers: int, n_dec_layers: int) -> str:
    return (
        f"- **Encoder block** = multi-head self-attention + dense (feed-forward) layer, each followed by a skip "
        f"connection and layer normalisation. The paper stacks 6 blocks; this model {n_enc_layers}.\n"
        f"- **Decoder block** = *masked* multi-head self-attention (over the words written so far) + "
        f"encoder-decoder attention (queries from the decoder, keys and values from the encoder output) + dense "
        f"layer. The paper stacks 6; this model {n_dec_layers}.\n"
        "- Same structure in every block, different parameters.\n"
        "- The last decoder block feeds a linear layer and a softmax: a probability for every word of the "
        "target vocabulary."
    )


NAME = (
    "Each block **transforms a set of vectors into a new set of vectors of the same dimension**: one vector per "
    "word goes in, one vector per word comes out. The goal is a richer internal representation, in which "
    "each word's vector also carries what the task needs from the other words."
)
COLUMNS = (
    "The lecture notes write the vectors as columns: a sentence of m words is a D × m matrix. "
    "(The code stores the transpose, [m, D], one row per word.)"
)


def sizes_caption(citation: str, ratio: float, train_seconds: float | None = None, steps: int | None = None) -> str:
    """`train_seconds`, `steps`: what the checkpoint records of its own training (None: not recorded)."""
    out = (
        f"Paper figures from {citation} (Table 3). The base model has about {ratio:,.0f} times as many "
        "parameters as this one"
    )
    if train_seconds is not None:
        out += (
            f"; this checkpoint was trained on a CPU in {train_seconds:,.0f} s"
            + (f" ({steps:,} steps)" if steps else "")
            + ", on a toy data set."
        )
    else:
        out += ", which is small enough to train on a CPU, on a toy data set."
    return out


TOY_DATA = (
    "The toy English→French set (`assets/toy_en_fr.tsv`, made by `assets/make_dataset.py`): sentences "
    "generated from a small grammar, one right translation each, lower case. Held-out sentences use "
    "subject/verb/object combinations never seen in training, so the held-out score measures generalisation "
    "to new combinations of known words."
)
DATA_CHANGED = (
    "The data file has changed since this checkpoint was trained (its recorded hash differs); "
    "the counts above are those of the current file."
)
UPLOADED = "A corpus uploaded in *Train your own* (not the shipped toy set)."


def stack_alt(n_enc: int, n_dec: int) -> str:
    """The stack diagram in words (its text alternative for screen readers)."""
    return (
        f"Diagram of the Transformer, bottom to top. Left, the encoder: source tokens, embedding and positional "
        f"encoding, then {n_enc} encoder layer(s) of self-attention and a feed-forward net, each followed by "
        f"add & norm. Right, the decoder: target tokens shifted right, embedding and positional encoding, then "
        f"{n_dec} decoder layer(s) of masked self-attention, encoder-decoder attention reading the encoder's "
        f"output, and a feed-forward net, each followed by add & norm; then a linear layer and a softmax give "
        f"the next word's probabilities. The numbered blocks link to the pages listed beside it."
    )
