"""The output page's prose (pages/output.py lays it out). Texts that state a number are functions of it."""


def intro(vocab_size: int) -> str:
    return (
        "The decoder's last block leaves one vector of d_model numbers per position. A **linear layer** turns it "
        f"into one score (*logit*) per word of the target vocabulary ({vocab_size} words here), and a **softmax** "
        "turns the scores into probabilities. Training compares them with the right word; translating picks words "
        "from them, one at a time (greedy) or keeping several candidates (beam search)."
    )


LINEAR = (
    "Decoder position *t* reads word *t* and predicts word *t + 1*: position 0 reads `<bos>` and predicts "
    "the first word; the last position predicts `<eos>`."
)
LINEAR_LATEX = (
    r"\text{logits}_t = h_t W + b \in \mathbb{R}^{V},\qquad p_t = \mathrm{softmax}(\text{logits}_t),"
    r"\qquad \hat y_{t+1} = \arg\max_w p_t(w)"
)


def lookup(w_shape: str, best: int, word: str) -> str:
    return (
        f"W is {w_shape}: one column of weights per vocabulary word. The index with the highest value is looked "
        f"up in the vocabulary: index {best} is “{word}”."
    )


ONE_HOT = (
    "*Example from the lecture notes*: an output vocabulary of six words with indices 0-5; the word "
    "“am” as a target is a vector with a single 1 at its index."
)
CROSS_ENTROPY = (
    "In training, the output distribution of position *t* is compared with the one-hot vector of the right next "
    "word, word *t + 1* of the reference. The cross-entropy between them only keeps the log-probability of that "
    "word:"
)
CROSS_ENTROPY_LATEX = (
    r"L_t = -\sum_{w} y_{t+1}(w)\,\log p_t(w) = -\log p_t(\text{word}_{t+1}),\qquad "
    r"L = \frac{1}{T}\sum_t L_t"
)
REFERENCE_LABEL = "Reference translation (fed to the decoder: teacher forcing)"
REFERENCE_HELP = (
    "Defaults to the toy data set's translation of your sentence, or the model's own translation when "
    "the sentence is not in the set."
)
GRADIENT = (
    "1. **Compare** the output distribution p with the one-hot target y.\n"
    "2. **Loss**: the cross-entropy, as above.\n"
    "3. **Gradient**: for softmax + cross-entropy, the gradient of the loss with respect to the logits is simply "
    "p − y (negative on the gold word: raise its logit; positive elsewhere: lower them). Backpropagation carries "
    "it back to every weight.\n"
    "4. **Update** every parameter: θ ← θ − η ∂L/∂θ (this model was trained with Adam, a refined version)."
)


def smoothing(section: str) -> str:
    return (
        f"The paper (section {section}) trains against a softened target, the label smoothing of Szegedy et al.: "
        "keep **1 − ε** of the one-hot target and spread **ε** evenly over the whole vocabulary, the right word "
        "included. The model is discouraged from becoming certain, which hurts perplexity but helps accuracy and "
        "BLEU. This is also what this model's training computes (PyTorch's `cross_entropy(..., "
        "label_smoothing=ε)`). With the model's real outputs for your reference:"
    )


SMOOTHING_LATEX = (
    r"q = (1-\varepsilon)\,y + \frac{\varepsilon}{V}:\qquad q(\text{gold}) = 1-\varepsilon+"
    r"\frac{\varepsilon}{V},\qquad q(\text{other}) = \frac{\varepsilon}{V}"
)


def smoothing_latex(vocab_size: int, eps: float) -> str:
    return (
        rf"V = {vocab_size},\; \varepsilon = {eps:g}:\qquad q(\text{{gold}}) = {1 - eps + eps / vocab_size:.5g},"
        rf"\qquad q(\text{{other}}) = {eps / vocab_size:.3g}"
    )


def torch_smoothing(eps: float, ours: float, torch_loss: float) -> str:
    return (
        f"Check: PyTorch's `F.cross_entropy(logits, gold, label_smoothing={eps:g})`, the loss the trainer "
        f"minimises, gives {torch_loss:.6f} on these positions; the table's mean loss vs the smoothed target is "
        f"{ours:.6f}."
    )


GREEDY = (
    "Translating, there is no reference. The decoder starts from `<bos>`, takes the most probable word, appends "
    "it to its input and runs again, until it says `<eos>`. Each step is one pass of the decoder over the prefix."
)
BEAM = (
    "Greedy decoding can paint itself into a corner: a likely first word may lead to an unlikely sentence. Beam "
    "search keeps the **k** most probable prefixes at every step, expands each by its k best next words, and keeps "
    "the best of all expansions (by total log-probability). A hypothesis that says `<eos>` is finished and set "
    "aside, so the beam keeps k minus the finished ones: it narrows as hypotheses end. Finished hypotheses are "
    "ranked by a **length-normalised** score, so short outputs are not favoured just for having fewer factors < 1."
)
BEAM_LATEX = (
    r"\log P(y) = \sum_t \log p(y_t \mid y_{<t}, x),\qquad \text{score}(y) = "
    r"\frac{\log P(y)}{\left((5+|y|)/6\right)^{\alpha}}"
)
BEAM_TREE = (
    "Blue: kept in the beam; green squares: finished (said <eos>); grey: pruned; orange: the path of the "
    "winner. Hover a node for p(word | prefix), the total log-probability and the normalised score."
)
K1_NOTE = " With k = 1 the beam holds a single hypothesis: beam search *is* greedy decoding."
RUN_TWICE = (
    "Keeping the two best first words, running the model once on each to get the second word, and keeping "
    "the best two pairs is beam search with k = 2. Here are its first two steps on your sentence:"
)
