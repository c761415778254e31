"""The guided lesson's prose: two to four sentences per step, and the bridges to the pictures students bring
from the Illustrated Transformer. Placeholders in braces are the model's sizes (`explain.lesson.sizes`) and the
steps' numbers (`step_<key>`); the numbers of the sentence itself are never written here, they come from the
notices (viz/lesson.py, viz/lesson_encoder.py, viz/lesson_decoder.py).
"""

from __future__ import annotations

INTRO = (
    "Follow one sentence through the Transformer of *Attention Is All You Need*, from why it was built, through "
    "its words and every layer, to its translation and how it was trained. Each step shows one figure; the "
    "line under it says what to notice, with numbers read from this very run of the model."
)
# the intro's end: for a reader who moves through the lesson themselves, and for a student whose teacher leads
INTRO_OWN = (
    " The sentence is the app's sentence (the sidebar's): every *In depth* link opens its page on it. Pick a "
    "sentence, or type your own, then press **Next**."
)
INTRO_LED = (
    " The sentence is your teacher's, and your teacher moves the class from step to step. To go on alone, press "
    "**Explore on my own** under the step."
)
# a toast, once, when the lesson has moved the app from its untouched default sentence to its own
SWITCHED = "The lesson follows its own sentence, “{sentence}”: every page shows it now."
SWITCHED_CLASS = " Your class sees it too."

TEXT: dict[str, str] = {
    "why": (
        "Before 2017, most translation models read a sentence with a **recurrent network** (RNN): one word per step, "
        "each step waiting for the one before. **Attention** was added to them so that, while writing each "
        "output word, the model could look back at every input word and take a weighted mix of them. The "
        "Transformer keeps the attention and drops the recurrence: every word is processed at once, and every word "
        "can read every other word directly. The figure counts the steps that must wait for each other on your "
        "sentence."
    ),
    "sentence": (
        "The model is an **encoder-decoder**. The sentence is cut into **tokens** (here: words and punctuation "
        "marks), and an end-of-sentence token **<eos>** is added. The **encoder** reads all the English tokens at "
        "once and turns each into a vector of {d_model} numbers. The **decoder** then writes the French "
        "translation one token at a time, looking back at the encoder's vectors at every step, and stops when it "
        "writes <eos>. The next steps open both halves."
    ),
    "tokens": (
        "The model never sees letters. Each token of the sentence (here whole words and punctuation marks, "
        "then `<eos>`) is looked up in a fixed vocabulary of {src_vocab} English tokens, and the model receives "
        "only their numbers, the **ids**. A word the vocabulary lacks becomes `<unk>`."
    ),
    "embedding": (
        "Each id selects one row of a learned table, the **embedding**, with {d_model} numbers per row. As in the "
        "paper, the row is multiplied by √d_model = {sqrt_d_model:.2f}. Each row of the figure is one token, each "
        "column one of the {d_model} dimensions."
    ),
    "positional": (
        "Attention by itself ignores word order: shuffle the words and each one gets the same result. So a fixed "
        "pattern of sines and cosines, the **positional encoding** (PE), is added to each embedding: "
        "PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d_model)). Early "
        "dimensions oscillate fast with the position, later ones slowly."
    ),
    "qkv": (
        "Self-attention starts from the encoder input X, one row per token. Three learned matrices turn each row "
        "into a **query** (what this word is looking for), a **key** (what it offers to be found by) and a "
        "**value** (what it passes on): Q = XW^Q, K = XW^K, V = XW^V. The {d_model} columns are split into "
        "{n_heads} **heads** of d_k = {d_k} (a head is one attention of its own, with its own W^Q, W^K, W^V; "
        "step {step_heads} shows them all). The figure shows the product for one word in one head: its row x of X, "
        "times this head's W^Q (a learned [{d_model}, {d_k}] matrix), plus a learned bias b^Q, gives its query "
        "q. In matrix form, for every word at once: Q = XW^Q + b^Q."
    ),
    "scores": (
        "To decide how much one word should take from each word of the sentence (itself included), the model "
        "takes the dot product of its query with every key: score_j = q · k_j. A large score means a good match. "
        "The orange bar is the highest score, the key this query matches best: a learned head need not score the "
        "word itself highest."
    ),
    "scale": (
        "The dot product of two vectors of d_k numbers grows with d_k: with unit-variance entries its variance is "
        "d_k. Large scores would make the next softmax all-or-nothing and its gradients vanish, so every score "
        "is divided by √d_k = {sqrt_d_k:.3f}."
    ),
    "softmax": (
        "Softmax turns the scaled scores into weights: exp(s_j) / Σ exp(s_j'). Every weight is between 0 and 1 "
        "and together they add up to 1, so the word's new vector will be a weighted average. Softmax keeps the "
        "order of the scores: the orange bar, the largest weight, goes to the key that scored highest."
    ),
    "z": (
        "Each value vector is multiplied by its weight, and the results are added: z = Σ_j a_j v_j. A word with "
        "a large weight contributes much of its value, one with a tiny weight almost nothing. In matrix form, "
        "for every word at once: Z = softmax(QKᵀ / √d_k) V."
    ),
    "heads": (
        "All of this happens {n_heads} times in parallel, in {n_heads} **heads** with their own W^Q, W^K, W^V. "
        "Each head can look for something different. Each row of the figure is one head's weights for the "
        "word we follow."
    ),
    "concat": (
        "The heads' outputs z are put side by side (concatenated) into one row of {n_heads} × {d_k} = {d_model} "
        "numbers per word, and a last learned matrix **W^O** mixes them: MultiHead(Q, K, V) = "
        "Concat(head_1, …, head_h) W^O. The thick lines separate the heads."
    ),
    "add_norm": (
        "A **sublayer** is one of the two parts of an encoder layer: the attention of the last steps, and the "
        "feed-forward network of the next one. Around each sublayer there is a **residual connection** (the "
        "input is added back: x + Sublayer(x)) "
        "followed by **LayerNorm**, which shifts and scales each word's vector to mean 0 and standard "
        "deviation 1 before a learned scale γ and shift β. As in the paper: LayerNorm(x + Sublayer(x))."
    ),
    "ffn": (
        "Next, every word passes on its own through the same small two-layer network: "
        "FFN(x) = max(0, x W_1 + b_1) W_2 + b_2, widening {d_model} numbers to d_ff = {d_ff} and back. The "
        "ReLU, max(0, ·), switches many hidden units off. Another residual connection and LayerNorm follow. Why "
        "this net at all? Attention's output is a weighted average of the value vectors, so it can never leave "
        "the space those vectors span; the ReLU, applied number by number, can (measured on the encoder layer's "
        "page, *In depth*)."
    ),
    "stack": (
        "Attention plus feed-forward network, each with its residual connection and LayerNorm (“add & norm”), is "
        "one **encoder layer**. This model stacks "
        "{n_enc} of them; each reads the previous one's output and has its own weights. The last layer's output "
        "is the encoder's result: one vector per source word. A cosine similarity of 1 means a vector still points "
        "where the word's input pointed; lower values mean the layers have turned it. Attention turns it by mixing in "
        "other words, but the feed-forward net and LayerNorm turn it too, word by word, so a drop alone does not "
        "say how much came from context."
    ),
    "decoder_input": (
        "The decoder writes one word at a time. Its input is the translation so far, shifted one place to the "
        "right behind a start token `<bos>`. Our convention on every step: **position t predicts word t + 1** "
        "(the input at position t is the word before the one it predicts). Like the encoder, the decoder turns "
        "each input token into a vector with its own embedding table (French tokens), × √d_model, plus the "
        "same positional encoding. Here the decoder runs over the model's own finished translation, so every "
        "position can be shown at once."
    ),
    "masked": (
        "The decoder's first sublayer is self-attention over the French words, with one change: the "
        "**look-ahead mask** adds −∞ to the score of every later position before the softmax, so their weights "
        "become exactly 0. A position may use the words already written, never the ones it is about to predict. "
        "While translating, the newest position has no later word to see, but the decoder recomputes every "
        "earlier position at each step, and without the mask those would read the words written after them: the "
        "numbers, and sometimes the translation, change (switch the mask off in the sidebar on step {step_chosen}). "
        "The mask matters most in **training**, where the whole right translation is fed in at once (teacher "
        "forcing, step {step_training}): without it, position t could read word t + 1, the very word it must "
        "predict, and learn to copy it."
    ),
    "cross": (
        "The second sublayer is **encoder-decoder attention**: the queries come from the decoder, the keys and "
        "values from the encoder's output. This is where the decoder reads the English sentence. Each row "
        "says which source words a decoder position draws on. A feed-forward network follows, as in the encoder, "
        "each sublayer with add & norm; the decoder stacks {n_dec} such layers. A row that reads one source word "
        "with a large weight says where it reads, not why it writes its word; the next step tests that with "
        "an experiment."
    ),
    "coref": (
        "In “the animal didn't cross the street because it was too tired”, *it* is the animal; with “too wide” "
        "it is the street. French must choose **il** or **elle** by the gender of that noun. The Illustrated "
        "Transformer pictures an encoder head linking *it* to the noun: a weight. Step {step_cross} said a weight "
        "shows where a row reads, not what the model needs, so here we **intervene** instead. Run the “wide” "
        "sentence, put back one vector of the “tired” run (one word's vector in the encoder, the decoder's vector "
        "at the pronoun after one sublayer, the output of encoder-decoder heads) and see how much of il comes back; "
        "then run “tired” with the adjective hidden from a layer and see how much of il goes. **Question for the "
        "class** (predict before you look at the bars): put back the encoder's vector of one English word from the "
        "“tired” run into the “wide” run: which word brings il back, *animal*, *street*, *it* or *tired*? The top "
        "bars answer it. Where both "
        "nouns have the same gender (the dog, the bridge), the adjective cannot change the pronoun."
    ),
    "output": (
        "Back to the position followed in steps {step_masked} and {step_cross}. After {n_dec} decoder layers, "
        "each position has a vector of {d_model} numbers. A final linear layer "
        "turns it into one score (a **logit**) for each of the {tgt_vocab} French tokens, and softmax turns "
        "the scores into probabilities that add up to 1."
    ),
    "chosen": (
        "**Greedy decoding** simply takes the most probable token. (Beam search, on the page linked below, "
        "keeps several candidates instead.) The chosen word is appended to the decoder's input."
    ),
    "next": (
        "Then the decoder runs again on the longer input, and the last position predicts the next word. The "
        "encoder is not run again: its output is reused at every step."
    ),
    "finished": (
        "This repeats until the model predicts `<eos>` (or a length limit is reached). Each bar is the probability "
        "the model gave the word it chose at that step."
    ),
    "loss": (
        "How did the model learn all this? In training it is shown the right translation. The right next word at "
        "each position is a **one-hot** vector (1 for that word, 0 for the {tgt_others} others), and the loss is "
        "the **cross-entropy** −log p(right word): 0 when the model is sure and right, large when it gives the "
        "right word little probability. Training averages it over the positions and adjusts every weight to lower "
        "it. The paper softens the target with **label smoothing**: 1 − ε on the right word, ε spread over the "
        "whole vocabulary."
    ),
    "training": (
        "In training the decoder's input is the right translation itself, shifted right (**teacher forcing**): "
        "all positions are trained at once, in one pass, which is why the look-ahead mask is needed. The "
        "optimizer (Adam) follows a **warm-up** schedule: the learning rate grows for the first steps, then "
        "shrinks like step^−0.5. The table under the curves sets the paper's recipe (8 GPUs, 12 hours; beam "
        "search for decoding) beside this model's. Train your own on the training page."
    ),
}

BRIDGES: dict[str, str] = {
    "sentence": (
        "The Illustrated Transformer's pictures translate French into English (*je suis étudiant* → *I am a "
        "student*). This model runs the other way, English → French, so the encoder reads English and the "
        "decoder writes French."
    ),
    "positional": (
        "The Illustrated Transformer draws the encoding as two halves, all the sines then all the cosines. This "
        "model, like the paper, interleaves them: even dimensions are sines, odd dimensions cosines. Same "
        "numbers, different column order."
    ),
    "decoder_input": (
        "In the Illustrated Transformer's animation the decoder outputs English words; here it writes French. "
        "Either way the input is shifted right by one position behind the start token."
    ),
}
