"""The guided lesson: one sentence from words to its translation, as a list of steps and their numbers.

Pure Python/PyTorch (no Streamlit, no plotly). `STEPS` is the path, in order; each step names the
page of the app that explains it in depth. The functions below read, from one `Analysis` (the
sentence through the model and the trace of every named tensor), the few numbers each step's
"notice" line states. Nothing here knows a particular sentence: which word the lesson follows is
chosen by `focus` from the sentence itself.

Conventions (the same on every step):

- Encoder positions are the source tokens followed by <eos>; the lesson follows one source word
  (`Focus.word`) through encoder layer 0, in the head that is most decided about it (`Focus.head`).
- Decoder positions: the decoder input at position t is the word *before* the one it predicts, so
  "position t predicts word t+1" (input <bos> at 0 predicts the first word). The lesson follows
  `Focus.row`, the position whose input is the first translated word (position 0 when the
  translation is empty).
- `parse_step` turns the `step` URL parameter into a 1-based step number, never raising.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from model.examples import COREFERENCE, STUDENT, THINKING
from model.pipeline import Analysis
from model.transformer import Config
from model.vocab import BOS, EOS

SENTENCES = (THINKING, STUDENT, COREFERENCE)
DEFAULT_SENTENCE = SENTENCES[0]
CONFIDENT = 0.6  # a cross-attention row is confident when its largest weight is at least this (see `Cross`)


@dataclass(frozen=True)
class Step:
    key: str  # stable id (tests, content module)
    title: str
    page: str  # the app page that explains it in depth, by name ("tokens": ui.page_list resolves the file)


STEPS: tuple[Step, ...] = (
    Step("why", "Why a Transformer: attention instead of reading word by word", "before"),
    Step("sentence", "A sentence goes in, a translation comes out", "overview"),
    Step("tokens", "Words become tokens, tokens become ids", "tokens"),
    Step("embedding", "Each id picks a row of the embedding table, × √d_model", "tokens"),
    Step("positional", "Positional encoding: adding where each word stands", "positional"),
    Step("qkv", "Queries, keys and values: Q = XW^Q, K = XW^K, V = XW^V", "self_attention"),
    Step("scores", "Scores: the query of one word against every key", "self_attention"),
    Step("scale", "Divide the scores by √d_k", "self_attention"),
    Step("softmax", "Softmax: scores become weights that add up to 1", "self_attention"),
    Step("z", "The weighted sum of the values: z", "self_attention"),
    Step("heads", "All heads at once", "multi_head"),
    Step("concat", "Concatenate the heads and multiply by W^O", "multi_head"),
    Step("add_norm", "Residual connection and LayerNorm", "encoder"),
    Step("ffn", "The feed-forward network", "encoder"),
    Step("stack", "The encoder stack: the same layer again", "encoder"),
    Step("decoder_input", "The decoder's input: the translation so far, shifted right", "decoder"),
    Step("masked", "Masked self-attention: no peeking at later words", "decoder"),
    Step("cross", "Encoder-decoder attention: where the decoder looks in the source", "cross_attention"),
    Step("coref", "il or elle: tracing where the adjective's evidence goes", "tracing"),
    Step("output", "Final linear layer and softmax: a probability for every French word", "output"),
    Step("chosen", "The chosen word", "output"),
    Step("next", "The next step of decoding", "output"),
    Step("finished", "The finished translation", "output"),
    Step("loss", "Training: the right answer, the loss, label smoothing", "output"),
    Step("training", "Training: teacher forcing, the mask, warm-up, the paper's recipe", "training"),
)
N_STEPS = len(STEPS)


def step_index(key: str) -> int:
    """1-based number of the step called `key`."""
    return [s.key for s in STEPS].index(key) + 1


def parse_step(raw: object, n: int = N_STEPS) -> tuple[int, str | None]:
    """The `step` URL parameter -> (1-based step within 1..n, notice or None). Never raises.

    Only plain ASCII digits count (a Unicode digit such as "٣" is not a step number here); 0 and
    numbers beyond the last step are clamped; anything else falls back to step 1. The notice says
    what happened, for the page to show.
    """
    if raw is None:
        return 1, None
    text = str(raw).strip()
    shown = text if len(text) <= 20 else text[:20] + "…"
    if not text or not (text.isascii() and text.isdigit()):
        return 1, f"“{shown}” is not a step number (1 to {n}): showing step 1."
    value = int(text[:12]) if len(text) <= 12 else 10**12  # no giant int parsing
    if value < 1:
        return 1, f"There is no step {shown}: steps run from 1 to {n}. Showing step 1."
    if value > n:
        return n, f"There is no step {shown}: this lesson has {n} steps. Showing the last one."
    return value, None


# --- What the lesson follows ----------------------------------------------------------------------


@dataclass(frozen=True)
class Focus:
    word: int  # source position followed through the encoder
    layer: int  # encoder layer of the step-by-step attention (0)
    head: int  # head of that layer that looks hardest at another real word (see `focus`)
    row: int  # decoder position followed: its input is the first translated word


def focus_word(tokens: tuple[str, ...] | list[str]) -> int:
    """The source word to follow: "it" when the sentence has it (the coreference example), else the first."""
    return list(tokens).index("it") if "it" in tokens else 0


def focus(a: Analysis, layer: int = 0) -> Focus:
    """What the lesson follows. The head: among the heads whose biggest weight for the word lands on another
    word (not on the word itself, not on <eos>, where many heads park their attention), the one with the
    biggest such weight; when no head does, the heads that look at themselves, then the most peaked head."""
    word = focus_word(a.prepared.tokens)
    w = a.trace[f"enc.{layer}.self_attn.weights"][0, :, word]  # [H, Ts]
    best, top = w.max(dim=-1)  # [H], [H]
    on_eos = top == w.shape[-1] - 1  # the last source position is <eos>
    rank = best - 2.0 * (top == word).float() - 4.0 * on_eos.float()  # weights are <= 1: another word wins
    head = int(rank.argmax())
    return Focus(word, layer, head, 1 if a.out_tokens else 0)


def sizes(cfg: Config) -> dict[str, float | int]:
    """The model's sizes and the steps' numbers (``step_<key>``), for the prose of every step."""
    steps = {f"step_{s.key}": i for i, s in enumerate(STEPS, start=1)}
    return {
        **steps,
        "d_model": cfg.d_model,
        "d_k": cfg.d_k,
        "n_heads": cfg.n_heads,
        "d_ff": cfg.d_ff,
        "n_enc": cfg.n_enc_layers,
        "n_dec": cfg.n_dec_layers,
        "src_vocab": cfg.src_vocab,
        "tgt_vocab": cfg.tgt_vocab,
        "tgt_others": cfg.tgt_vocab - 1,
        "sqrt_d_model": math.sqrt(cfg.d_model),
        "sqrt_d_k": math.sqrt(cfg.d_k),
    }


# --- Numbers per step -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Tokens:
    tokens: tuple[str, ...]  # source tokens + <eos>
    ids: tuple[int, ...]
    unknown: tuple[str, ...]
    truncated: int


def tokens(a: Analysis) -> Tokens:
    p = a.prepared
    return Tokens((*p.tokens, EOS), tuple(int(i) for i in a.trace["src.tokens"][0]), p.unknown, p.truncated)


@dataclass(frozen=True)
class Embedding:
    word: str
    token_id: int
    raw_norm: float  # length of the table's row
    scaled_norm: float  # after × √d_model
    factor: float  # √d_model


def embedding(a: Analysis, word: int) -> Embedding:
    e = a.trace["src.embed"][0, word]  # [D]
    factor = math.sqrt(e.numel())
    return Embedding(
        a.src_labels[word], int(a.trace["src.tokens"][0, word]), float(e.norm()) / factor, float(e.norm()), factor
    )


def pe_position(f: Focus, n_positions: int) -> int:
    """The position the positional-encoding step looks at: the focus word's, but not 0 (sin 0 = 0 and
    cos 0 = 1 show nothing) when there is a position 1 (<eos> follows the last word)."""
    return min(f.word or 1, n_positions - 1)


@dataclass(frozen=True)
class Positional:
    on: bool  # positional encoding switched on (else the other fields are 0)
    position: int
    first: tuple[float, float]  # PE[position, 0], PE[position, 1]: sin(pos), cos(pos)
    pe_norm: float
    embed_norm: float
    input_norm: float


def positional(a: Analysis, word: int) -> Positional:
    t = a.trace
    e, x = t["src.embed"][0, word], t["src.input"][0, word]
    if "src.pos" not in t.tensors:
        return Positional(False, word, (0.0, 0.0), 0.0, float(e.norm()), float(x.norm()))
    pe = t["src.pos"][0, word]
    return Positional(True, word, (float(pe[0]), float(pe[1])), float(pe.norm()), float(e.norm()), float(x.norm()))


@dataclass(frozen=True)
class Projections:
    n_tokens: int
    d_model: int
    d_k: int
    n_heads: int
    word: str
    q: tuple[float, ...]  # this word's query in the focus head (d_k numbers)
    q_norm: float
    k_norm: float
    v_norm: float


def projections(a: Analysis, f: Focus) -> Projections:
    m = f"enc.{f.layer}.self_attn"
    q, k, v = (a.trace[f"{m}.{n}"][0, f.head, f.word] for n in "qkv")
    x = a.trace["src.input"][0]
    return Projections(
        x.shape[0],
        x.shape[1],
        q.numel(),
        a.trace[f"{m}.q"].shape[1],
        a.src_labels[f.word],
        tuple(float(v) for v in q),
        float(q.norm()),
        float(k.norm()),
        float(v.norm()),
    )


@dataclass(frozen=True)
class Row:
    """One query's attention in one head: the numbers of the scores, scale, softmax and z steps."""

    module: str
    head: int
    query: int
    query_label: str
    key_labels: tuple[str, ...]
    scores: tuple[float, ...]  # q · k_j
    scaled: tuple[float, ...]  # / √d_k (= scores when scaling is off)
    weights: tuple[float, ...]  # softmax
    d_k: int
    scale_on: bool
    z_norm: float
    z_error: float  # max |z - Σ_j a_j v_j|: 0 up to rounding

    @property
    def top(self) -> int:
        return max(range(len(self.weights)), key=self.weights.__getitem__)

    @property
    def top_score(self) -> int:
        return max(range(len(self.scores)), key=self.scores.__getitem__)


def attention_row(a: Analysis, module: str, head: int, query: int, key_labels: list[str], query_label: str) -> Row:
    t = a.trace
    w = t[f"{module}.weights"][0, head, query]  # [Tk]
    v = t[f"{module}.v"][0, head]  # [Tk, d_k]
    z = t[f"{module}.z"][0, head, query]  # [d_k] (0 when the head is switched off)
    off = (module, head) in a.interventions.heads_off
    err = 0.0 if off else float((z - w @ v).abs().max())
    return Row(
        module,
        head,
        query,
        query_label,
        tuple(key_labels),
        tuple(float(s) for s in t[f"{module}.scores"][0, head, query]),
        tuple(float(s) for s in t[f"{module}.scaled"][0, head, query]),
        tuple(float(s) for s in w),
        v.shape[-1],
        a.interventions.scale,
        float(z.norm()),
        err,
    )


def encoder_row(a: Analysis, f: Focus) -> Row:
    return attention_row(a, f"enc.{f.layer}.self_attn", f.head, f.word, a.src_labels, a.src_labels[f.word])


@dataclass(frozen=True)
class HeadChoice:
    head: int
    top: int  # key position with the biggest weight
    top_label: str
    weight: float
    off: bool  # switched off in the sidebar


def heads(a: Analysis, f: Focus) -> list[HeadChoice]:
    m = f"enc.{f.layer}.self_attn"
    w = a.trace[f"{m}.weights"][0, :, f.word]  # [H, Ts]
    return [
        HeadChoice(
            h,
            int(w[h].argmax()),
            a.src_labels[int(w[h].argmax())],
            float(w[h].max()),
            (m, h) in a.interventions.heads_off,
        )
        for h in range(w.shape[0])
    ]


@dataclass(frozen=True)
class Concat:
    z_norms: tuple[float, ...]  # per head, for the focus word
    concat_shape: tuple[int, int]
    out_norm: float
    w_o_shape: tuple[int, int]


def concat(a: Analysis, f: Focus) -> Concat:
    m = f"enc.{f.layer}.self_attn"
    z = a.trace[f"{m}.z"][0, :, f.word]  # [H, d_k]
    c = a.trace[f"{m}.concat"][0]  # [T, D]
    d = c.shape[-1]
    return Concat(
        tuple(float(n) for n in z.norm(dim=-1)), (c.shape[0], d), float(a.trace[f"{m}.out"][0, f.word].norm()), (d, d)
    )


@dataclass(frozen=True)
class AddNormStep:
    word: str
    resid_mean: float
    resid_std: float
    normed_mean: float
    normed_std: float
    out_norm: float


def add_norm(a: Analysis, f: Focus, name: str | None = None) -> AddNormStep:
    n = name or f"enc.{f.layer}.add_norm1"
    r = a.trace[f"{n}.resid"][0, f.word]
    z = a.trace[f"{n}.normed"][0, f.word]
    return AddNormStep(
        a.src_labels[f.word],
        float(r.mean()),
        float(r.std(unbiased=False)),
        float(z.mean()),
        float(z.std(unbiased=False)),
        float(a.trace[f"{n}.out"][0, f.word].norm()),
    )


@dataclass(frozen=True)
class FFNStep:
    word: str
    d_ff: int
    zeros: int  # hidden units exactly 0 after ReLU, for the focus word
    largest: int  # the most active hidden unit
    largest_value: float


def ffn(a: Analysis, f: Focus) -> FFNStep:
    h = a.trace[f"enc.{f.layer}.ffn.hidden"][0, f.word]  # [d_ff]
    return FFNStep(a.src_labels[f.word], h.numel(), int((h == 0).sum()), int(h.argmax()), float(h.max()))


def n_layers(a: Analysis, stack: str) -> int:
    return len({k.split(".")[1] for k in a.trace.tensors if k.startswith(f"{stack}.") and k.split(".")[1].isdigit()})


def pre_ln(a: Analysis) -> bool:
    """A pre-LN model (an uploaded one may be) records the final LayerNorm of its encoder stack."""
    return "enc.norm.out" in a.trace.tensors


def layer_outputs(a: Analysis, stack: str = "enc") -> list[torch.Tensor]:
    """The stack's input and each layer's output, [T, D] each (post-LN: the last add & norm's output;
    pre-LN: the last residual sum)."""
    t = a.trace
    last = "add_norm2" if stack == "enc" else "add_norm3"
    first = t["src.input" if stack == "enc" else "tgt.input"][0]
    what = "resid" if pre_ln(a) else "out"
    return [first] + [t[f"{stack}.{i}.{last}.{what}"][0] for i in range(n_layers(a, stack))]


@dataclass(frozen=True)
class Stack:
    word: str
    n_layers: int
    similarity: tuple[float, ...]  # cosine(input of the word, its vector after layer i), i = 0..N-1
    out_shape: tuple[int, int]


def stack_similarity(a: Analysis) -> torch.Tensor:
    """Cosine similarity of every source word's vector with its own encoder input: [Ts, N + 1] (column 0
    is the input itself, 1.0; column i + 1 after encoder layer i)."""
    outs = layer_outputs(a, "enc")
    return torch.stack([torch.nn.functional.cosine_similarity(outs[0], o, dim=-1) for o in outs], dim=1)


def stack(a: Analysis, f: Focus) -> Stack:
    outs = layer_outputs(a, "enc")
    x = outs[0][f.word]
    sims = tuple(float(torch.nn.functional.cosine_similarity(x, o[f.word], dim=0)) for o in outs[1:])
    enc = a.trace["enc.out"][0]
    return Stack(a.src_labels[f.word], len(outs) - 1, sims, (enc.shape[0], enc.shape[1]))


@dataclass(frozen=True)
class DecoderInput:
    inputs: tuple[str, ...]  # <bos>, first word, ...
    targets: tuple[str, ...]  # first word, ..., <eos>: position t predicts targets[t]


def decoder_input(a: Analysis) -> DecoderInput:
    return DecoderInput((BOS, *a.out_tokens), (*a.out_tokens, EOS))


@dataclass(frozen=True)
class Masked:
    mask_on: bool
    above: float  # the largest weight above the diagonal, over every layer and head (0 with the mask)
    row: int
    row_label: str
    weights: tuple[float, ...]  # head-average weights of `row` in the last layer (its keys: positions 0..)
    top: int
    top_label: str


def masked(a: Analysis, f: Focus) -> Masked:
    t = a.trace
    n = n_layers(a, "dec")
    above = 0.0
    for i in range(n):
        w = t[f"dec.{i}.self_attn.weights"][0]  # [H, Tt, Tt]
        above = max(above, float(torch.triu(w, diagonal=1).max()) if w.shape[-1] > 1 else 0.0)
    row = t[f"dec.{n - 1}.self_attn.weights"][0, :, f.row].mean(0)  # [Tt]
    top = int(row.argmax())
    labels = a.tgt_labels
    return Masked(
        a.interventions.look_ahead_mask, above, f.row, labels[f.row], tuple(float(v) for v in row), top, labels[top]
    )


@dataclass(frozen=True)
class Cross:
    """One decoder layer's encoder-decoder attention (head average): the followed row, and every row's reading.

    Rule for the word "reorders": only confident rows count, rows whose largest weight is at least CONFIDENT
    (0.6) and falls on a source word (not <eos>). The translation is said to reorder the English only when a
    later confident row reads an earlier English word than an earlier confident row does (`inversions`);
    the other rows are named as diffuse, never used as evidence."""

    layer: int
    row: int
    row_label: str  # decoder input at the row
    predicts: str  # the word that row predicts
    weights: tuple[float, ...]  # head-average cross-attention weights of the row over the source
    top: int
    top_label: str
    tops: tuple[int, ...] = ()  # every row's most-read source position, top to bottom
    peaks: tuple[float, ...] = ()  # every row's largest weight
    eos: int = -1  # the source's <eos> position

    @property
    def confident(self) -> list[int]:
        """Rows whose largest weight (>= CONFIDENT) is on a source word."""
        pairs = enumerate(zip(self.tops, self.peaks, strict=True))
        return [r for r, (t, w) in pairs if w >= CONFIDENT and t != self.eos]

    @property
    def diffuse(self) -> list[int]:
        """Rows (other than the last, which writes <eos>) whose largest weight is under CONFIDENT."""
        return [r for r, w in enumerate(self.peaks[:-1]) if w < CONFIDENT]

    @property
    def inversions(self) -> list[tuple[int, int]]:
        """(earlier row, later row) pairs of confident rows where the later one reads an earlier English word."""
        c = self.confident
        return [(i, j) for k, i in enumerate(c) for j in c[k + 1 :] if self.tops[j] < self.tops[i]]

    @property
    def reordered(self) -> bool:
        return bool(self.inversions)


def cross(a: Analysis, f: Focus, layer: int | None = None) -> Cross:
    layer = n_layers(a, "dec") - 1 if layer is None else layer
    m = cross_matrix(a, layer)  # [Tt, Ts]
    row = m[f.row]
    top = int(row.argmax())
    peak = m.max(-1)
    return Cross(
        layer,
        f.row,
        a.tgt_labels[f.row],
        a.next_labels[f.row],
        tuple(float(v) for v in row),
        top,
        a.src_labels[top],
        tuple(int(i) for i in peak.indices),
        tuple(float(v) for v in peak.values),
        len(a.src_labels) - 1,
    )


def cross_matrix(a: Analysis, layer: int | None = None) -> torch.Tensor:
    """Head-average cross-attention of a decoder layer (the last by default): [Tt, Ts]."""
    layer = n_layers(a, "dec") - 1 if layer is None else layer
    return a.trace[f"dec.{layer}.cross_attn.weights"][0].mean(0)


@dataclass(frozen=True)
class Prediction:
    position: int
    input: str  # the decoder input at that position
    words: tuple[str, ...]  # the top candidates, best first
    probs: tuple[float, ...]
    logit: float  # the top candidate's logit (nan when read from the decoding record)
    vocab: int  # number of French tokens scored
    chosen: str  # what greedy decoding emitted at this position (the translation's word or <eos>)


def prediction(a: Analysis, itos: list[str], position: int, k: int = 5) -> Prediction:
    """The final linear layer and softmax at `position` of the traced (teacher-forced) pass."""
    probs = a.trace["probs"][0, position]  # [V]
    logits = a.trace["logits"][0, position]
    p, ids = probs.topk(min(k, probs.numel()))
    inputs = [BOS, *a.out_tokens]
    return Prediction(
        position,
        inputs[position],
        tuple(itos[int(i)] for i in ids),
        tuple(float(v) for v in p),
        float(logits[ids[0]]),
        probs.numel(),
        [*a.out_tokens, EOS][position],
    )


def decoding_step(a: Analysis, itos: list[str], position: int) -> Prediction | None:
    """What greedy decoding itself saw at step `position` (its record: the top candidates), or None past the end.

    Same numbers as `prediction` while the look-ahead mask is on; with the mask off the traced pass lets a
    position see later words, which decoding never had."""
    if position >= len(a.greedy.steps):
        return None
    st = a.greedy.steps[position]
    inputs = [BOS, *a.out_tokens]
    return Prediction(
        position,
        inputs[position],
        tuple(itos[c.token] for c in st.candidates),
        tuple(c.prob for c in st.candidates),
        math.nan,
        len(itos),
        itos[st.chosen],
    )


@dataclass(frozen=True)
class Finished:
    words: tuple[str, ...]  # emitted words then <eos> (when the model finished)
    probs: tuple[float, ...]  # the probability of each when decoding chose it
    finished: bool
    translation: str
    least: int  # index of the least sure choice


def finished(a: Analysis, itos: list[str]) -> Finished:
    steps = a.greedy.steps
    words = tuple(itos[st.chosen] for st in steps)
    probs = tuple(st.candidates[0].prob for st in steps)
    least = min(range(len(probs)), key=probs.__getitem__) if probs else 0
    return Finished(words, probs, a.greedy.finished, a.translation, least)
