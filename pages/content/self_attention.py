"""Prose of the self-attention page (pages/self_attention.py)."""

from explain.coref import LINK

INTRO = (
    "Self-attention lets every word build its new vector from all the words of the sentence: each word "
    "scores every word of the sentence, itself included, turns the scores into weights with a softmax, and "
    "takes the weighted average of their values. Below, one word of your sentence goes through one head of "
    "the trained model; every number is read from the model's own forward pass."
)
QKV_TITLE = "Query, key, value: the words come from information retrieval"
QKV = (
    "Think of a film catalogue. Each film is described by attributes (genre, actors, length, "
    "year): those are its **key**. The film itself is its **value**. You search with a **query**; the "
    "catalogue compares the query with every key and hands you the films that match. Attention does a "
    "soft version of this: every key matches a little, and the answer is a weighted mix of all values."
)
RNN_TITLE = "Where attention comes from: RNN encoder-decoders (Bahdanau et al., 2015)"
RNN = (
    "Attention was first added to RNN translators: at decoder step j, weigh every encoder state "
    "h_i by how well it aligns with the decoder state s_j, and pass the weighted sum on as context."
)
RNN_LATEX = (
    r"\alpha_{ij} = \operatorname{align}(h_i, s_j), \qquad c_j = \sum_i \alpha_{ij}\, v_i",
    r"q_{:j} = W_Q s_j,\quad k_{:i} = W_K h_i,\quad v_{:i} = W_V h_i,\quad "
    r"\alpha_{:j} = \operatorname{softmax}(K^\top q_{:j})",
)
RNN_AFTER = (
    "The Transformer keeps the attention and drops the RNN: queries, keys and values are all "
    "computed from the words themselves (C = Attn(X, X))."
)
TEXTBOOK = (
    "**Textbook example** (the Illustrated Transformer's “Thinking Machines”, d_k = 64). The book prints "
    "the scores of the query of “Thinking” (112 and 96); the query of “Machines” is this app's own "
    "construction. The vectors are built so that the dot products come out so; they are real tensors sent "
    "through the same attention function as the model, but not weights of any trained model. (The layer, "
    "head and word pickers belong to the trained model and are hidden here.)"
)


def below_trained(layer: int, head: int) -> str:
    return (
        f"From here on the page is back on the trained model and your sentence (encoder layer {layer}, head "
        f"{head}): the textbook example has only the two vectors above."
    )


MATRIX_LATEX_QKV = r"Q = XW^Q + b^Q, \qquad K = XW^K + b^K, \qquad V = XW^V + b^V"
MATRIX_FORM = (
    "Stacking every word's q, k and v as rows of Q, K and V, all the dot products are one matrix "
    "product and the whole layer is one line:"
)
MATRIX_LATEX = r"Z = \operatorname{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}}\right) V"


def shapes_latex(T: int, d_k: int) -> str:
    return (
        rf"\underbrace{{[{T}, {d_k}]}}_{{Q}} \cdot \underbrace{{[{d_k}, {T}]}}_{{K^\top}} \to [{T}, {T}] "
        rf"\xrightarrow{{\ /\sqrt{{d_k}},\ \mathrm{{softmax}}\ }} [{T}, {T}] "
        rf"\cdot \underbrace{{[{T}, {d_k}]}}_{{V}} \to \underbrace{{[{T}, {d_k}]}}_{{Z}}"
    )


UNSCALED = "Scaling is switched off: “scaled” below equals the raw scores."

COLUMN_FORM = (
    "**The same layer in the lecture's column form** (Shusen Wang's notes write vectors as columns: "
    "q_:j = W_Q x_j + b_Q, k_:i = W_K x_i + b_K, v_:i = W_V x_i + b_V in this model, whose projections "
    "have a bias; the lecture writes them without. The transpose of the rows above). Each word j gets "
    "its own column of weights and its own context vector, computed from K, V and its query alone; with "
    "X′ = X this is the formula of encoder-decoder attention (page *Before the Transformer*) used for "
    "self-attention. This model also divides by √d_k, which the lecture's form leaves out."
)
COLUMN_LATEX = (
    r"\alpha_{:j} = \operatorname{softmax}\!\big(K^\top q_{:j} / \sqrt{d_k}\big), \qquad "
    r"c_{:j} = V \alpha_{:j}, \qquad C = [\,c_{:1}, \dots, c_{:T}\,] = \operatorname{Attn}(X, X) "
    r"= Z^\top"
)

WHY_SCALE = (
    "If the entries of q and k are independent with mean 0 and variance 1, q·k is a sum of d_k "
    "products of variance 1, so **Var(q·k) = d_k**: the longer the vectors, the larger the scores. Dividing "
    "by the standard deviation √d_k brings the variance back to 1. Try it with random vectors:"
)
SATURATION = (
    "Large scores make the softmax **saturate**: almost all the weight goes to one word, the others get "
    "almost none. There the softmax is flat, its Jacobian ∂a/∂s = diag(a) − aaᵀ is nearly 0, and hardly "
    "any gradient reaches Q and K during training. One query against 8 random keys:"
)


def saturation_caption(n_queries: int, n_keys: int) -> str:
    return (
        f"Averages over {n_queries} random queries, {n_keys} keys each. ‖Jacobian‖ is the Frobenius norm of the "
        "softmax's Jacobian: how strongly the weights react to a change of the scores."
    )


PLAIN = (
    "The simplest self-attention uses the input vectors themselves as queries, keys and values "
    "(“dot-product self-attention”):"
)
PLAIN_LATEX = (
    r"a_{nm} = \frac{\exp(x_n^\top x_m)}{\sum_{m'} \exp(x_n^\top x_{m'})}, \qquad "
    r"y_n = \sum_m a_{nm}\, x_m, \qquad Y = \operatorname{softmax}(XX^\top)\,X"
)
PLAIN_AFTER = (
    "Each a_nm ≥ 0 and each row sums to 1. Nothing is learned: every feature of a word counts equally "
    "when matching, and a word usually matches itself best. Learned W_Q, W_K, W_V let each head choose "
    "which features to compare and what to pass on."
)

COREF = (
    "In “…because **it** was too tired”, *it* is the animal; in “…too **wide**”, it is the street. "
    "Where does *it* look, in every head of every encoder layer? (Same model, both sentences.)"
)
NO_IT = "This model's vocabulary splits the sentence differently: no “it” to follow."


def focus(layer: int, head: int, referent: str, other: str, adjective: str, weight: float, other_weight: float) -> str:
    """Why the layer and head pickers opened where they did, on the coreference sentence (this page and the
    multi-head page). "Links" only at LINK (0.5) or more and twice the other noun's weight (explain/coref.py); the
    head is the one that gives the referent the most among the heads that give it more than the other noun
    (`viz.coref.coref_focus`), and the sentence says so (another head may give the referent more, and the other
    noun more still)."""
    opened = f"On this sentence the page opens on **layer {layer}, head {head}**, chosen from the weights"
    if weight >= LINK and weight >= 2 * other_weight:
        return (
            f"{opened}: it links “it” to “{referent}” ({weight:.2f}, against {other_weight:.2f} for “{other}”). "
            "A weight shows where “it” reads; what the pronoun needs is measured by tracing (page *Causal "
            "tracing*, and the last section of the self-attention page)."
        )
    return (
        f"{opened}: of the heads whose row for “it” gives “{referent}” more than “{other}”, it gives “{referent}” "
        f"the most, {weight:.2f}, against {other_weight:.2f} for “{other}”. Both weights are small: by the "
        f"weights, no encoder head of this model links “it” to “{referent}”, the noun “{adjective}” describes. "
        f"Where “{adjective}” reaches the "
        "pronoun is measured by tracing (page *Causal tracing*, and the last section of the self-attention page)."
    )


DECISION = (
    "A weight shows where a row reads, not what the pronoun needs. So we intervene: run the other sentence "
    "(“…too wide” for “…too tired”), put back one vector of this sentence's run, and see how much of the "
    "pronoun comes back; or hide the adjective from one attention layer (its weight 0, rows renormalised) "
    "and see how much goes. Each bar is one such run "
    "(page *Causal tracing* shows every layer and position, and any pair you type). **Question for the "
    "class** (predict before you look): which English word's encoder vector, put back, brings the pronoun "
    "back: the animal, the street, *it*, or the adjective?"
)
BLUNT_TITLE = "The blunt experiment: switch off the heads that read the adjective, or a whole decoder layer"
BLUNT = (
    "Every head whose row reads the adjective strongly, all at once, and each decoder layer's encoder-decoder "
    "attention, switched off. A switched-off head brings nothing at all, which is not the same as bringing the "
    "other sentence's evidence, and a whole layer off often changes other words too."
)


COREF_CAPTION = (
    "The translations (il / elle) show whether the model resolved *it*. A head with nothing useful to "
    "read for *it* parks its weight on <eos> or punctuation. Attention need not point at the referent "
    "itself: a head may read the adjective (tired / wide) instead, and later layers mix what each word "
    "has gathered. A small model trained on a toy set need not do it the way a person would."
)
