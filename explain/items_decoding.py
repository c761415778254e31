"""Concept-test items of objectives 7-10 (explain/items.py says how an item is made): greedy decoding and beam
search, the residual connection and LayerNorm, label smoothing, teacher forcing."""

from __future__ import annotations

from explain.items_base import Item, Models, Wrong, _analysis, _item, _n, _q, _words
from explain.questions import plain, quote
from model.pipeline import beam, decode_text, prepare, teacher_forced
from model.vocab import EOS


# -- 7. greedy decoding and beam search ------------------------------------------------------------------------
def greedy_pick(m: Models, sentence: str, position: int) -> Item:
    a = _analysis(m.base, sentence)
    itos = m.base.tgt_vocab.itos
    p = a.trace["probs"][0, position]  # [V]
    top = p.topk(3)
    w = [plain(itos[int(i)]) for i in top.indices]
    so_far = quote(a.out_tokens[:position]) if position else "nothing yet"
    ps = [float(v) for v in top.values]
    if ps[1] < 0.005:
        raise ValueError("the runner-up is too unlikely to ask")
    return _item(
        "decoding",
        "greedy_pick",
        f"Translating {quote(a.prepared.tokens)}, the decoder has written {so_far}. Its next-word "
        f"probabilities: {w[0]} {_n(ps[0])}, {w[1]} {_n(ps[1], 3)}, {w[2]} {_n(ps[2], 3)}, ... What does "
        "greedy decoding write next?",
        f"{_q(w[0])}, every time: it takes the most probable word",
        [
            (
                f"{_q(w[0])} about {ps[0]:.0%} of the time, {_q(w[1])} otherwise: it draws by probability",
                "greedy_sampling",
            ),
            (f"{_q(w[1])}: greedy keeps the runner-up in reserve and writes it", None),
            ("It cannot be told before the sentence is finished", "beam_always_better"),
        ],
        f"probs[0, {position}]: " + ", ".join(f"{x} {_n(v, 3)}" for x, v in zip(w, ps, strict=True)) + ".",
        f"greedy_pick|{sentence}",
    )


def greedy_beam(m: Models, sentence: str, k: int = 4) -> Item:
    a = _analysis(m.base, sentence)
    b = beam(m.base, a.prepared, k)
    best = decode_text(m.base, b.best.output)
    greedy = a.translation
    wrong: Wrong
    if best == greedy:
        right = f"{_q(greedy)}, the same as greedy decoding: its most probable words already make the best sentence"
        wrong = [
            ("Another translation: beam search always improves on greedy decoding", "beam_always_better"),
            ("A different one on every run: beam search samples its hypotheses", "greedy_sampling"),
        ]
    else:
        right = f"{_q(best)}, not greedy's {_q(greedy)}: a less likely word first led to a more likely sentence"
        wrong = [
            (f"{_q(greedy)}, the same: beam search only checks greedy's choice", None),
            ("A different one on every run: beam search samples its hypotheses", "greedy_sampling"),
        ]
    wrong.append(("Nothing until all the hypotheses are the same length", None))
    return _item(
        "decoding",
        "greedy_beam",
        f"Greedy decoding translates {quote(a.prepared.tokens)} as {_q(greedy)}. What does beam search "
        f"with {k} hypotheses give?",
        right,
        wrong,
        f"Beam search ({k} hypotheses): {_q(best)}, probability {_n(b.best.prob, 3)}.",
        f"greedy_beam|{sentence}",
    )


# -- 8. residual connection and LayerNorm ---------------------------------------------------------------------
def layer_norm(m: Models, sentence: str, word: int) -> Item:
    a = _analysis(m.base, sentence)
    r = a.trace["enc.0.add_norm1.resid"][0, word]  # [D]: x + Sublayer(x)
    z = a.trace["enc.0.add_norm1.normed"][0, word]  # [D]: before LayerNorm's scale and shift
    mean, sd = float(r.mean()), float(r.std(unbiased=False))
    zm, zs = float(z.mean()), float(z.std(unbiased=False))
    words = _words(a)
    return _item(
        "add_norm",
        "layer_norm",
        f"In encoder layer 0, the residual x + Attention(x) of {_q(words[word])} in "
        f"{quote(a.prepared.tokens)} has {r.numel()} numbers with mean {_n(mean)} and standard deviation "
        f"{_n(sd)}. What does LayerNorm's first step (before its learned scale and shift) turn them into?",
        f"Mean {_n(zm)}, standard deviation {_n(zs)} (from {_n(mean)} and {_n(sd)}): the {r.numel()} numbers "
        "of this one word are centred and scaled",
        [
            (
                f"A vector of length 1 (from {_n(float(r.norm()))}): each vector is divided by its length",
                "layernorm_unit",
            ),
            (
                f"Mean {_n(mean)}, standard deviation {_n(sd)}: the residual only adds, nothing is rescaled",
                "layernorm_keeps",
            ),
            (f"Each of the {r.numel()} columns centred over the sentence's {len(words)} words", None),
        ],
        f"After the first step: mean {_n(zm, 4)}, standard deviation {_n(zs, 4)}.",
        f"layer_norm|{sentence}",
    )


# -- 9. label smoothing ---------------------------------------------------------------------------------------
def smoothed_target(m: Models, sentence: str, reference: str, position: int, word: str) -> Item:
    eps = float(m.base.meta.get("training", {}).get("label_smoothing", 0.1))
    v = m.base.config.tgt_vocab
    tf = teacher_forced(m.base, prepare(m.base, sentence), reference)
    gold = [*tf.target_tokens, EOS]
    if not 0 <= position < len(gold) or word not in m.base.tgt_vocab.stoi:
        raise ValueError("no such position or word")
    right_word = gold[position]
    target = (1 - eps) + eps / v if word == right_word else eps / v
    other = eps / v if word == right_word else (1 - eps) + eps / v
    is_right = word == right_word
    return _item(
        "label_smoothing",
        "smoothed_target",
        f"Training on {quote(sentence.split())} → {quote(tf.target_tokens)} with label smoothing "
        f"ε = {eps} over the {v} French tokens: the position that must predict {_q(right_word)} is "
        f"trained towards a target distribution. What probability does that target give {_q(word)}?",
        f"{target:.4f}" + (" = 1 − ε + ε/V" if is_right else " = ε/V"),
        [
            ("1" if is_right else "0", "onehot_target"),
            (f"{other:.4f}", None),
            (f"{1 / v:.4f} = 1/V", None) if is_right else (f"{eps:.4f} = ε", None),
        ],
        f"Smoothed target: 1 − ε + ε/V = {(1 - eps) + eps / v:.4f} on the right word, ε/V = {eps / v:.6f} on "
        f"each of the others (ε = {eps}, V = {v}).",
        f"smoothed_target|{sentence}|{word}",
    )


# -- 10. teacher forcing --------------------------------------------------------------------------------------
def decoder_input(m: Models, sentence: str, reference: str, position: int) -> Item:
    tf = teacher_forced(m.base, prepare(m.base, sentence), reference)
    itos = m.base.tgt_vocab.itos
    fed = [itos[int(i)] for i in tf.trace["tgt.tokens"][0]]  # what the decoder read: BOS + reference
    gold = [*tf.target_tokens, EOS]
    if not 1 <= position < len(tf.target_tokens):
        raise ValueError("no such position")
    src = sentence.split()
    wrong: Wrong = [(f"{_q(gold[position])}, the word it must predict", "no_shift")]
    own = itos[tf.predicted[position - 1]]
    if own != fed[position]:
        wrong.append((f"{_q(own)}, what the model itself predicted at the position before", "free_running"))
    else:
        wrong.append(("Whatever the model itself predicted at the position before", "free_running"))
    wrong.append((f"{_q(src[min(position, len(src) - 1)])}, the English word at that position", None))
    return _item(
        "teacher_forcing",
        "decoder_input",
        f"Training on {quote(src)} → {quote(tf.target_tokens)}: what does the decoder read as its input "
        f"at the position that must predict {_q(gold[position])}?",
        f"{_q(fed[position])}, the reference's word before it",
        wrong,
        f"Decoder input (BOS + the reference, shifted right): {quote(fed)}.",
        f"decoder_input|{sentence}",
    )
