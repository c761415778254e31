"""The why-attention page's prose (pages/why_attention.py lays it out). Texts that state a number are functions
of it."""

from explain.seeds import chance_apart

INTRO = (
    "Before the Transformer, most translation models read a sentence with a **recurrent network** (RNN, LSTM): one "
    "word after the other, each step waiting for the previous one. Attention was first added to RNNs to reach "
    "back to distant words. The paper's question: since attention can reach *any* word directly, do we still "
    "need the recurrence? This page compares the layer types the way the paper does, then shows its results."
)
NO_SENTENCE = (
    "Type a sentence in the sidebar (for example *i am a student*) to see its own attention matrices "
    "below; the tables on this page do not need one."
)
TABLE1_NOTES = (
    "- **Sequential operations**: how many steps must wait for each other. An RNN needs O(n) steps for a "
    "sentence of n words: step t needs the hidden state of step t − 1. It still keeps a GPU busy, but only across "
    "the sentences of a batch and the hidden units of one step, never across the positions of a sentence. "
    "Self-attention handles all positions of a sentence at once, in O(1) sequential steps.\n"
    "- **Maximum path length**: how many layers a signal crosses between two words. In an RNN the first word "
    "reaches the last through n steps, and long-range dependencies fade on the way (even with LSTM/GRU, RNNs "
    "needed attention for them). In self-attention every word is one step from every other: O(1).\n"
    "- **Complexity per layer**: self-attention compares all n² pairs of words; a recurrent layer multiplies "
    "a d × d matrix at each of n steps."
)


def table1(rows) -> str:
    """The paper's Table 1 as a markdown table (complexities in LaTeX)."""
    body = "\n".join(f"| {t.name} | ${t.complexity}$ | ${t.sequential}$ | ${t.path}$ |" for t in rows)
    return (
        "| Layer type | Complexity per layer | Sequential operations | Maximum path length |\n"
        "|---|---|---|---|\n" + body
    )


def restricted(n: int, d: int) -> str:
    return (
        f"n = {n} ≥ d = {d}: for sequences this long the paper suggests restricted self-attention over a "
        "neighbourhood of r positions, at the price of a path length of n/r."
    )


COUNTS = (
    "Counts are the formulas inside the O(·), constant factors dropped. The convolution's path length "
    "⌈log_k n⌉ is for dilated convolutions (contiguous kernels need ⌈n/k⌉ layers)."
)
MEMORY = (
    "Self-attention stores a weight for every pair of positions: an n × n matrix per head and per layer. "
    "Memory grows with the square of the sentence length."
)


def memory(n: int, heads: int, layers: int, total: int) -> str:
    return (
        f"{n} × {n} × {heads} heads × {layers} layers × 4 bytes = {total:,} bytes, for one sentence. "
        "Doubling n multiplies it by 4."
    )


def your_sentence(shape: str, per_layer: int, n_layers: int, total: str) -> str:
    return (
        f"**Your sentence in this model:** enc.0.self_attn.weights is {shape}: {per_layer:,} bytes for one "
        f"encoder layer; {n_layers} encoder layers hold {total}."
    )


def table2(citation: str) -> str:
    return (
        f"From the paper ({citation}), Table 2: BLEU on the newstest2014 English-German and English-French "
        'test sets, and the estimated training cost in floating-point operations. "-": not reported. The '
        "paper gives each Transformer one training cost for both tasks (a single cell spanning EN-DE and "
        "EN-FR), so the same figure stands in both columns. The BLEU axis starts at 0."
    )


TABLE3_INTRO = (
    "The paper's Table 3 changes one part of the base model at a time and measures what it costs: the heads, the "
    "key size d_k, the size of the model, dropout and label smoothing, learned instead of sinusoidal positions. "
    "Here the same changes were made to the small model the training page trains by default, each trained a few "
    "times with different seeds on the toy set. The dots show how soon each reached 95% held-out exact match; "
    "pick a group to compare its rows with the paper's."
)
NO_ABLATIONS = (
    "The measured rows (assets/ablations.json) are not installed: `python -m bench.ablations --write` makes them."
)


def ablations_setup(meta: dict, n_rows: int) -> str:
    b, p = meta["base"], chance_apart(meta["seeds"])
    return (
        f"{n_rows} rows × {meta['seeds']} seeds, {meta['steps']} steps each. The base is the training page's "
        f"default: h = {b['n_heads']}, d_k = {b['d_model'] // b['n_heads']}, N = {b['n_layers']}, d_model = "
        f"{b['d_model']}, d_ff = {b['d_ff']}, dropout {b['dropout']:g}, label smoothing {b['label_smoothing']:g}; "
        f"held-out evaluation every {meta['eval_every']} steps; measured with `{meta['command']}` "
        f"({meta['measured']}) on one computer ({meta['cpus']} cores, torch {meta['torch']}). Another processor rounds "
        f"floats differently and {meta['steps']} updates amplify the difference, so the same recipe and seed can end "
        "several points away on yours (the training page's Start runs the base with seed 0): the seeds' spread is "
        f"the least of the noise. A row lies *apart from the base* when none of its seeds overlaps the base's "
        f"seeds; with {meta['seeds']} seeds a side a change that does nothing does so by chance {p:.2f} of the "
        f"time per metric, so read one such row as a hint. Every verdict is at {meta['steps']} steps: "
        "“worse” may mean slower."
    )


def table3(citation: str, caption: str) -> str:
    return (
        f"{caption} From the paper ({citation}). Our figures are exact match, BLEU and il/elle accuracy of greedy "
        "translations of the toy set's held-out pairs; the paper's are perplexity and BLEU with beam search on "
        "real news text, so compare directions, not numbers."
    )


SUMMARY = (
    "- **Upside:** the big Transformer outperformed every earlier model on both tasks, recurrent and "
    "convolutional, single models and ensembles, at a fraction of the ensembles' training cost: all positions "
    "are processed in parallel.\n"
    "- **Downside:** it is expensive: large models, and time and memory that grow quadratically with the "
    "sequence length (the n × n attention matrices).\n"
    "- **Decoding is still one word at a time**: the decoder must see its previous words before choosing the "
    "next, so generation stays sequential (greedy or beam search).\n"
    "- **Recent trends:** stacked Transformer blocks became the general-purpose sequence (and set) encoder; "
    "pre-trained with self-supervision and transferred to many tasks (BERT, GPT-2, GPT-3, XLNet, ALBERT, "
    "RoBERTa, Reformer, T5, ...), and adopted beyond language: vision, recommender systems, drug discovery."
)
