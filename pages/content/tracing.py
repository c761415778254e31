"""Prose of the causal-tracing page (pages/tracing.py). The numbers are never written here: they come from the
notices (viz/tracing.py), computed from the runs."""

INTRO = (
    "An attention weight says where a row reads, not what the model needs (Jain & Wallace 2019, *Attention is not "
    "Explanation*; Wiegreffe & Pinter 2019). To find what it needs, change something and watch the output. Take "
    "two sentences one word apart that the model translates differently, like “…because it was too **tired**” "
    "(il) and “…too **wide**” (elle). Run the second sentence, put back **one** vector of the first sentence's "
    "run at one place, let everything after it run on, and read the probability of the first run's word. If "
    "the word comes back, that vector carried the difference. This is **activation patching**, or causal "
    "tracing (Meng et al. 2022, *Locating and Editing Factual Associations in GPT*; Vig et al. 2020, causal "
    "mediation analysis of gender bias in Transformers). Every cell below is one such run of this very model."
)
SHARE_LATEX = (
    r"\text{restored} = \frac{p_{\text{patched}} - p_{\text{second}}}"
    r"{p_{\text{first}} - p_{\text{second}}} \qquad "
    r"\text{lost} = \frac{p_{\text{first}} - p_{\text{hidden}}}{p_{\text{first}} - p_{\text{second}}}"
)
SHARE = (
    "Both runs are fed the first sentence's translation up to the word followed, so the decoder sees the same "
    "French words in both. 1 means all of the difference came back (or went, for the last grid), 0 none; red "
    "is more, blue less than nothing. A part **carries** the difference when it alone brings back at least half "
    "of it; reading a word in a layer is **needed** when hiding it there loses at least half."
)
OTHER = (
    "Second sentence: the same number of words as the app's sentence, one or two of them changed. The app's "
    "sentence (the sidebar's) is the first."
)
OTHER_HELP = "For example “i am a teacher” against “i am a student”, or “too wide” against “too tired”."
EMPTY_OTHER = (
    "Type a second sentence above, with as many words as the first and one or two of them changed; or "
    "load the coreference pair."
)
FOLLOW = "Word to follow (in the first sentence's translation)"

ENCODER = (
    "Each cell: the encoder's vector at one source position after one sublayer, taken from the first "
    "sentence's run and put into the second's. Read down a column to see a word's vector move up the stack, "
    "and across a row to see which positions hold the difference at that height."
)
HEADS = (
    "Each cell: one encoder-decoder head's output z at one decoder position (the last row of each layer: all "
    "of that layer's heads at once), taken from the first run. A head whose z brings nothing back may still "
    "have large weights on the changed word: weights say where a head reads, this grid says what its output "
    "does."
)
DECODER = (
    "Each cell: the decoder's vector at one position after one sublayer, from the first run. Only the "
    "followed position (the last column) writes the word; earlier positions can reach it through the "
    "decoder's self-attention."
)
MASK = (
    "This grid runs the **first** sentence, with one source word hidden from one attention layer: its weight "
    "set to 0 in every row of every head and each row renormalised (exactly what a mask does: a softmax over "
    "the words left). Each cell: the share of the difference lost. The last row hides the word from every "
    "layer at once: nothing can read it any more."
)
HEAD = (
    "One head, part by part: its query q, its attention row and its output z at each query position, and "
    "its key k and value v at each key position, each patched alone from the first run. Patching the "
    "attention row keeps the second run's values (where it reads, changed); patching v keeps its weights (what "
    "it reads, changed)."
)
SWITCHES = "Both runs use the sidebar's switches (heads off, masks, scaling): the tracing is of the model you set up."
