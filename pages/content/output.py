"""The output page's prose (pages/output.py lays it out). Texts that state a number are functions of it."""


def intro(vocab_size: int) -> str:
    return (
        "The decoder's last block leaves one vector of d_model numbers per position. A **linear layer** turns it "
        f"into one score (*logit*) per word of the target vocabulary ({vocab_size} words here), and a **softmax** "
        "turns the scores into probabilities. Training compares them with the right word; translating picks words "
        "from them, one at a time (greedy) or keeping several candidates (beam search)."
    )


LINEAR_LATEX = (r"\text{logits}_t = h_t W + b \in \mathbb{R}^{V},\qquad p_t = \mathrm{softmax}(\text{logits}_t),"
                r"\qquad \hat y_t = \arg\max_w p_t(w)")


def lookup(w_shape: str, best: int, word: str) -> str:
    return (f"W is {w_shape}: one column of weights per vocabulary word. The index with the highest value is looked "
            f"up in the vocabulary: index {best} is “{word}”.")


ONE_HOT = ("*Example from the lecture notes*: an output vocabulary of six words with indices 0-5; the word "
           "“am” as a target is a vector with a single 1 at its index.")
CROSS_ENTROPY = (
    "In training, the model's output distribution at each position is compared with the one-hot vector of the "
    "right next word. The cross-entropy between them only keeps the log-probability of the right word:"
)
CROSS_ENTROPY_LATEX = r"L_t = -\sum_{w} y_t(w)\,\log p_t(w) = -\log p_t(\text{gold}_t),\qquad L = \frac{1}{T}\sum_t L_t"
REFERENCE_LABEL = "Reference translation (fed to the decoder: teacher forcing)"
REFERENCE_HELP = ("Defaults to the toy data set's translation of your sentence, or the model's own translation when "
                  "the sentence is not in the set.")
GRADIENT = (
    "1. **Compare** the output distribution p with the one-hot target y.\n"
    "2. **Loss**: the cross-entropy, as above.\n"
    "3. **Gradient**: for softmax + cross-entropy, the gradient of the loss with respect to the logits is simply "
    "p − y (negative on the gold word: raise its logit; positive elsewhere: lower them). Backpropagation carries "
    "it back to every weight.\n"
    "4. **Update** every parameter: θ ← θ − η ∂L/∂θ (this model was trained with Adam, a refined version)."
)

SMOOTHING = (
    "The paper (section 5.4) trains against a softened target: **1 − ε** on the right word and **ε** shared by "
    "all the others. The model is discouraged from becoming certain, which hurts perplexity but helps accuracy "
    "and BLEU. With the model's real probabilities for your reference:"
)


def smoothing_latex(vocab_size: int, eps: float) -> str:
    return (rf"q(w) = \begin{{cases}} 1-\varepsilon & w = \text{{gold}} \\ \varepsilon/(V-1) & \text{{otherwise}}"
            rf"\end{{cases}}\qquad V = {vocab_size},\; \varepsilon = {eps:g}:\; q(\text{{gold}}) = {1 - eps:.4g},\;"
            rf" q(\text{{other}}) = {eps / (vocab_size - 1):.3g}")


def torch_smoothing(vocab_size: int, eps: float) -> str:
    return ("The training code uses PyTorch's `label_smoothing`, which spreads ε over all V words including the "
            f"gold one (gold gets 1 − ε + ε/V = {1 - eps + eps / vocab_size:.4f}): the same idea, a hair different.")


GREEDY = (
    "Translating, there is no reference. The decoder starts from `<bos>`, takes the most probable word, appends "
    "it to its input and runs again, until it says `<eos>`. Each step is one pass of the decoder over the prefix."
)
BEAM = (
    "Greedy decoding can paint itself into a corner: a likely first word may lead to an unlikely sentence. Beam "
    "search keeps the **k** most probable prefixes at every step, expands each by its k best next words, and keeps "
    "the k best of all expansions (by total log-probability). Finished hypotheses (that said `<eos>`) are ranked by "
    "a **length-normalised** score, so short outputs are not favoured just for having fewer factors < 1."
)
BEAM_LATEX = (r"\log P(y) = \sum_t \log p(y_t \mid y_{<t}, x),\qquad \text{score}(y) = "
              r"\frac{\log P(y)}{\left((5+|y|)/6\right)^{\alpha}}")
BEAM_TREE = ("Blue: kept in the beam; green squares: finished (said <eos>); grey: pruned; orange: the path of the "
             "winner. Hover a node for p(word | prefix), the total log-probability and the normalised score.")
K1_NOTE = " With k = 1 the beam holds a single hypothesis: beam search *is* greedy decoding."
RUN_TWICE = ("Keeping the two best first words, running the model once on each to get the second word, and keeping "
             "the best two pairs is beam search with k = 2. Here are its first two steps on your sentence:")
