"""Prose of "Before the Transformer" (pages/before.py lays it out). Texts that state a number are
functions of it."""

TITLE = "Before the Transformer: recurrence plus attention"

INTRO = (
    "Before 2017 most translation models read the source sentence with a **recurrent network**: one word per step, "
    "each step folding the new word into a running state. Bahdanau, Cho and Bengio (2015) added **attention**: "
    "at every output word the decoder looks back over *all* the encoder's states and takes a weighted mix of "
    "them, instead of squeezing the whole sentence into the last state. The Transformer keeps that attention "
    "and removes the recurrence. (Convolutional translators, ByteNet and ConvS2S, also worked without recurrence; "
    "the paper compares them too.) Bahdanau's encoder reads the sentence in both directions and its output layer "
    "is a maxout network; the recurrent model here reads left to right and predicts with tanh(W_o[s_t; c_t]), to "
    "keep the picture simple. Below, your sentence goes through a small recurrent model trained on the same "
    "toy data as the app's Transformer, then through the Transformer's own encoder-decoder attention."
)

NO_SENTENCE = (
    "Type a sentence in the sidebar (for example *i am a student*) to watch it go through the "
    "recurrent model; the measurements at the end of the page do not need one."
)


def model_line(cell: str, attention: str, hidden: int, params: int, metrics: dict) -> str:
    att = {"additive": "additive attention (Bahdanau)", "qkv": "key/query/value attention"}[attention]
    em, coref = metrics.get("exact_match"), metrics.get("coref_accuracy")
    score = f"; on the held-out pairs {em:.1%} exact match" if em is not None else ""
    score += (
        f", il/elle right in {coref:.1%} of the coreference sentences" if em is not None and coref is not None else ""
    )
    return (
        f"This recurrent model: a {cell.upper()} encoder and decoder with {att}, states of {hidden} numbers, "
        f"{params:,} parameters, trained on the same data with the same recipe as the Transformer{score}."
    )


ENCODER = (
    "The encoder reads the source left to right. Step i takes the word vector x_i and the previous state "
    "h_{i-1} and produces h_i. Nothing at step i can start before step i − 1 is done: a sentence of m words "
    "takes m steps, one after the other. Move the slider to run it."
)
GRU_LATEX = [
    r"r_i = \sigma(W_{xr} x_i + W_{hr} h_{i-1} + b_r), \qquad z_i = \sigma(W_{xz} x_i + W_{hz} h_{i-1} + b_z)",
    r"n_i = \tanh\big(W_{xn} x_i + r_i \odot (W_{hn} h_{i-1} + b_{hn}) + b_{xn}\big), \qquad "
    r"h_i = (1 - z_i) \odot n_i + z_i \odot h_{i-1}",
]
LSTM_LATEX = [
    r"i_i, f_i, o_i = \sigma(W_{x\cdot} x_i + W_{h\cdot} h_{i-1} + b_\cdot), \qquad "
    r"g_i = \tanh(W_{xg} x_i + W_{hg} h_{i-1} + b_g)",
    r"c_i = f_i \odot c_{i-1} + i_i \odot g_i, \qquad h_i = o_i \odot \tanh(c_i)",
]
ENCODER_GREY = (
    "Grey rows are states not computed yet. Each row is one h_i: the only summary of words 1 … i the next step gets. "
    "Positions on this page count from 1, as in the formulas: row i is h_i, the state after word i (h_0, the zero "
    "state before the first word, has no row)."
)

DECODER = (
    "The decoder writes the translation one word at a time from its own state s. Before step t it scores every "
    "encoder state h_i against its current state s_{t-1}, turns the scores into weights α with a softmax, and "
    "mixes the states' values into one **context vector** c_t. It then reads the previous output word together "
    "with c_t to update its state and predict the next word."
)
ADDITIVE_LATEX = [
    r"e_{ti} = v^\top \tanh(W s_{t-1} + b + U h_i), \qquad \alpha_{ti} = \frac{\exp(e_{ti})}{\sum_{i'} \exp(e_{ti'})}, "
    r"\qquad c_t = \sum_i \alpha_{ti}\, h_i",
]
QKV_LATEX = [
    r"q_t = W_Q s_{t-1},\quad k_{:i} = W_K h_i,\quad v_{:i} = W_V h_i, \qquad \alpha_{:t} = "
    r"\operatorname{softmax}(K^\top q_t), \qquad c_t = \sum_i \alpha_{it}\, v_{:i}",
]
STATE_LATEX = (
    r"s_t = \operatorname{cell}\big([\,y_{t-1};\ c_t\,],\ s_{t-1}\big), \qquad "
    r"p(y_t \mid y_{<t}, x) = \operatorname{softmax}\big(W_g \tanh(W_o [s_t; c_t])\big)"
)
INDEX_NOTE = (
    "Indexing: the lecture computes c_j from s_j and feeds it into step j + 1; here c_t is computed from "
    "s_{t-1} and fed into step t (Bahdanau's convention). Same data flow, index shifted by one."
)

ALIGNMENT = (
    "Stack the α of every step and you get Bahdanau's famous picture: one row per output word, one column per "
    "source word. Where French keeps the English order the bright cells run down the diagonal; where it swaps "
    "words (an adjective after its noun) they cross."
)

DERIVATION = (
    "Why keep the RNN at all? Attention already reaches every source state in one step; the recurrence only "
    "built the h_i and s_j. Replace h_i by the Transformer encoder's output vectors and s_j by the decoder's "
    "vectors, and the lecture's formulas become the Transformer's **encoder-decoder attention**: keys and values "
    "from the encoder side, the query from the decoder side. Below, x_i are the rows of enc.out, the last "
    "encoder layer's output (W2's X₍₆₎, after the paper's 6 layers), and x′_j the vectors the decoder layer takes its "
    "queries from: its stream after the masked self-attention and its add & norm, LayerNorm(y + masked "
    "self-attention(y)), where y is the layer's input (in layer 0, the French words so far). W2 calls this "
    "C = Attn(X′, X′), leaving the add & norm out: the lecture's Attn(X, X′) is W2's Attn(X₍₆₎, C)."
)
DERIVATION_LATEX = [
    r"k_{:i} = W_K x_i + b_K,\quad v_{:i} = W_V x_i + b_V \quad (\text{encoder side}), \qquad "
    r"q_{:j} = W_Q x'_j + b_Q \quad (\text{decoder side; the biases are this model's})",
    r"c_{:j} = V \cdot \operatorname{softmax}\!\big(K^\top q_{:j} / \sqrt{d_k}\big), \qquad "
    r"C = [\,c_{:1}, \dots, c_{:t}\,] = \operatorname{Attn}(X, X')",
]


def head_note(same_words: bool) -> str:
    """Why the page opens on its head: `explain.recompute.closest_head`'s rule for this sentence."""
    if same_words:
        return (
            "The page opens on the head whose alignment is closest to the recurrent model's (the most output words "
            "with the same strongest source word); the Transformer has one such matrix per head and layer."
        )
    return (
        "The two models translate this sentence into different words, so their rows cannot be matched: the page "
        "opens on the sharpest head (the largest average top weight per row); the Transformer has one such matrix "
        "per head and layer."
    )


SCALE_NOTE = (
    "The Transformer divides the scores by √d_k before the softmax (the lecture's form and the recurrent "
    "model's do not); with scaling switched off in the sidebar it does not either."
)
NO_RECURRENCE = (
    "Every c_:j here is computed from the whole source at once and no c_:j waits for another: with the whole "
    "target known (training), all t columns of C come out of one matrix product. Self-attention, C = Attn(X, X), "
    "then also replaces the recurrence *inside* the encoder and the decoder. (Self-attention itself came earlier, "
    "inside an RNN: Cheng, Dong and Lapata (2016) let an LSTM attend over its own earlier states as it reads.)"
)

MEASURED = (
    "The same comparison, measured. Both models were trained on the same toy data on one CPU thread, each with "
    "the best of the same sweep of recipes (widths, learning rates, warm-ups: neither model was tuned while the "
    "other was not); the figures below were measured in one run of `python -m bench.bench_rnn --write` and are "
    "shipped with the app (assets/rnn_comparison.json)."
)
PARALLEL_NOTE = (
    "An RNN is not unable to use parallel hardware: each of its steps is a matrix product over the whole batch "
    "and all hidden units, which a GPU spreads over its cores. What it cannot parallelise is the *positions*: "
    "step i needs h_{i-1}. The Transformer has no such chain, except in decoding, where each output word still "
    "waits for the previous one."
)
GRADIENT = (
    "The long-term dependency problem, measured: how much does the output at position t still react to the "
    "word at position i? For the RNN encoder, the norm of the Jacobian ∂h_t/∂x_i; for the Transformer encoder, "
    "∂out_t/∂x_i (x_i the word vector fed to each model), both divided by their value at distance 0."
)
NO_COMPARISON = "The measured comparison (assets/rnn_comparison.json) is not installed."
NEXT_WHY = "Next: **Why attention**: the paper's comparison of the layer types, with a calculator"
NEXT_TOKENS = "Or start the walkthrough: **Tokens and embeddings**, the Transformer from the first step"
