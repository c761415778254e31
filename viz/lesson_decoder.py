"""The guided lesson's decoder-side steps: the decoder's input, masked self-attention, encoder-decoder
attention, where il / elle gets the adjective's evidence (traced), the output and decoding, and training. Each
`notice_*` states numbers computed from the tensors its figure draws, and writes down the rule behind every judging
word it uses."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from explain import lesson, paper
from explain import lesson_training as LT
from explain.coref import EncoderLinks, coref_parts, encoder_links, partner
from explain.pronoun import Story
from model.examples import COREFERENCE
from model.pipeline import Analysis, label_word
from viz.heatmap import as_array, count, heatmap, table
from viz.lesson_base import GREEN, GREY, PARKING_WHY, Context, View, bars, layout, plain_table, q, q_at
from viz.pronoun import story_figure, story_notice, story_table

# --- 15. decoder input, 16. masked self-attention, 17. cross-attention ---------------------------------


def notice_decoder_input(d: lesson.DecoderInput) -> str:
    if len(d.inputs) < 2:
        return "The model wrote nothing: its only input, <bos> at position 0, predicted <eos> at once."
    return (
        f"Position 0 reads <bos> and predicts “{d.targets[0]}”; position 1 reads “{d.inputs[1]}” and predicts "
        f"“{d.targets[1]}”: {len(d.inputs)} positions, each one word behind the word it predicts."
    )


def _decoder_input(c: Context) -> View:
    d = lesson.decoder_input(c.a)
    fig = plain_table(
        {
            "position t": list(range(len(d.inputs))),
            "decoder input at t": list(d.inputs),
            "predicts (word t + 1)": list(d.targets),
        }
    )
    return View(fig, notice_decoder_input(d), pd.DataFrame({"input": d.inputs, "predicts": d.targets}))


def notice_masked(m: lesson.Masked, among: Sequence[str] = ()) -> str:
    head = (
        f"With the look-ahead mask, every weight above the diagonal is {m.above:.3f}: no position sees a later word."
        if m.mask_on
        else f"The look-ahead mask is switched off: the largest weight on a later word is {m.above:.3f}."
    )
    return (
        f"{head} Row {q(m.row_label)} (position {m.row}) looks most at {q(m.top_label, among)} "
        f"({m.weights[m.top]:.3f}, average of the heads in the last layer)."
    )


def _masked(c: Context) -> View:
    a = c.a
    n = lesson.n_layers(a, "dec")
    w = a.trace[f"dec.{n - 1}.self_attn.weights"][0].mean(0)
    fig = heatmap(w, a.tgt_labels, a.tgt_labels, "weights", x_title="key (earlier words)", y_title="query position")
    warn = (
        None
        if a.interventions.look_ahead_mask
        else ("The look-ahead mask is switched off in the sidebar: the upper triangle is no longer zero.")
    )
    return View(
        fig, notice_masked(lesson.masked(a, c.f), a.tgt_labels), table(w, a.tgt_labels, a.tgt_labels), warning=warn
    )


def notice_cross(x: lesson.Cross, src_labels: list[str] | None = None, next_labels: list[str] | None = None) -> str:
    """The followed row's largest weight, then what the whole matrix shows, by the rule of `explain.lesson.Cross`:
    "reorders" only from confident rows (largest weight >= CONFIDENT on a source word) whose reading goes back to
    an earlier English word; otherwise "follows the English order" when at least two rows are confident; rows
    under CONFIDENT are named as diffuse, never used as evidence. A weight says where a row reads, not why."""
    out = (
        f"Row {q(x.row_label)} (position {x.row}, predicting {q(x.predicts)}) puts {x.weights[x.top]:.3f} of "
        f"its attention on the source word {q(x.top_label, src_labels or ())} (layer {x.layer}, average of the heads)."
    )
    if not (src_labels and next_labels):
        return out
    writes = [q(n, next_labels) for n in next_labels]
    if x.inversions:
        i, j = x.inversions[0]
        out += (
            f" The French order differs from the English here: the row writing {writes[j]} reads "
            f"{q_at(src_labels, x.tops[j])} ({x.peaks[j]:.2f}), an English word before {q_at(src_labels, x.tops[i])}, "
            f"which the earlier row writing {writes[i]} reads ({x.peaks[i]:.2f})."
        )
        if len(x.inversions) > 1:
            out += f" {len(x.inversions)} such pairs among the confident rows."
    elif len(x.confident) >= 2:
        out += (
            f" The {len(x.confident)} confident rows (largest weight ≥ {lesson.CONFIDENT:g}) read the English "
            "words in their English order: no reordering to show here."
        )
    diffuse = [writes[r] for r in x.diffuse]
    if diffuse:
        shown = ", ".join(diffuse[:4]) + (f" and {len(diffuse) - 4} more" if len(diffuse) > 4 else "")
        out += f" Diffuse rows (largest weight under {lesson.CONFIDENT:g}), writing {shown}."
    parked = [writes[r] for r in range(len(x.tops) - 1) if x.tops[r] == x.eos]
    if parked:
        out += (
            f" The {'row' if len(parked) == 1 else 'rows'} writing {', '.join(parked[:3])} "
            f"read{'s' if len(parked) == 1 else ''} the source's <eos> most. {PARKING_WHY}"
        )
    return out


def _cross(c: Context) -> View:
    a = c.a
    w = lesson.cross_matrix(a)
    ylabels = [f"{lab} → {label_word(nxt)}" for lab, nxt in zip(a.tgt_labels, a.next_labels, strict=True)]
    fig = heatmap(
        w,
        a.src_labels,
        ylabels,
        "weights",
        x_title="English source (keys, values from the encoder)",
        y_title="position → predicts",
    )
    return View(fig, notice_cross(lesson.cross(a, c.f), a.src_labels, a.next_labels), table(w, a.src_labels, ylabels))


# --- il or elle: where the adjective's evidence goes ---------------------------------------------------------


def notice_coref(
    story: Story | None,
    links: EncoderLinks | None,
    own: bool,
    noun: str | None = None,
    before: str = "",
    hidden: tuple[str, int] | None = None,
) -> str:
    """The encoder heads' weights first (rule: "links" only at LINK and twice the other noun, `EncoderLinks.links`),
    then what tracing the pair measured (rules of `viz.pronoun.story_notice`: "carries", "needed", "decides",
    each from a patch or a hidden word, never from a weight). `before`: the same-gender sentence of the reader's
    own sentence, when the step follows the coreference example instead."""
    head = before + (
        "" if own else "Your sentence has no “it” to resolve, so this step follows the coreference example instead. "
    )
    if links is not None and noun:
        L_, H_ = links.referent_head
        head += (
            f"In the encoder, layer {L_} head {H_} links “it” to “{noun}” ({links.referent:.2f}). "
            if links.links
            else f"By the weights, no encoder head links “it” to “{noun}”: the most any head gives it is "
            f"{links.referent:.2f} (the other noun gets up to {links.other_max:.2f}). "
        )
    if story is None:
        return head + "The model writes neither il nor elle here, so there is no pronoun to follow."
    return head + story_notice(story, hidden)


def _coref(c: Context) -> View:
    a = c.a
    parts = coref_parts(a.prepared.tokens)
    own = parts is not None
    text = " ".join(a.prepared.tokens) if own else COREFERENCE
    story = c.decide(text) if c.decide else None
    before = ""
    if story is not None and story.same_pronoun:  # the adjective cannot change this pronoun: follow the example
        before = story_notice(story) + " This step follows the coreference example instead. "
        story, own = (c.decide(COREFERENCE) if c.decide else None), False
    links = encoder_links(a.trace, lesson.n_layers(a, "enc"), parts) if own else None
    noun = label_word(a.src_labels[parts.referent]) if own else None
    if story is not None and story.tracing is not None:
        fig, tab = story_figure(story, c.hidden), story_table(story, c.hidden)
    else:
        fig = plain_table({"sentence": [text, partner(text) or ""]})
        tab = pd.DataFrame({"sentence": [text]})
    return View(
        fig,
        notice_coref(story, links, own, noun, before, c.hidden),
        tab,
        textbook="The Illustrated Transformer shows one encoder head linking “it” to “animal”: a weight. "
        "The bars above are interventions: each is a run of the model with one part of the other "
        "sentence's run put back, or with the adjective hidden.",
    )


# --- 18. output, 19. chosen word, 20. next step, 21. finished -----------------------------------------------


def notice_output(p: lesson.Prediction, d_model: int) -> str:
    """No judging words: the top logit, its word and its probability at the followed position."""
    return (
        f"At position {p.position} (input “{p.input}”) the final linear layer turns {d_model} numbers into "
        f"{p.vocab} scores (logits), one per French token; the highest, {p.logit:.2f}, is “{p.words[0]}”, and "
        f"softmax makes it a probability of {p.probs[0]:.3f}."
    )


def _output(c: Context) -> View:
    a, row = c.a, c.f.row
    logits = a.trace["logits"][0, row]
    top = logits.topk(min(10, logits.numel()))
    words = [c.itos[int(i)] for i in top.indices]
    fig = bars(words, top.values, f"the 10 highest logits at position {row}", "logit", GREY, highlight=0, digits=2)
    p = lesson.prediction(a, c.itos, row)
    probs = a.trace["probs"][0, row][top.indices]
    tab = pd.DataFrame({"word": words, "logit": as_array(top.values), "probability": as_array(probs)}).round(4)
    tied = (
        f"This model has its own output matrix, [{a.trace['dec.out'].shape[-1]}, {logits.numel()}]; the paper "
        "(§3.4) shares one matrix between the two embedding tables and this pre-softmax layer (weight tying), "
        "which saves parameters and makes a word's input and output vectors the same."
    )
    return View(fig, notice_output(p, a.trace["dec.out"].shape[-1]), tab, textbook=tied, warning=_mask_off(a))


def _mask_off(a: Analysis) -> str | None:
    if a.interventions.look_ahead_mask:
        return None
    return (
        "The look-ahead mask is switched off in the sidebar: in this traced pass every position also sees the "
        "later words, which decoding never had. The next steps show what decoding itself saw."
    )


def notice_chosen(p: lesson.Prediction) -> str:
    gap = p.probs[0] - p.probs[1] if len(p.probs) > 1 else p.probs[0]
    second = f"; next best “{p.words[1]}” with {p.probs[1]:.3f}" if len(p.probs) > 1 else ""
    return (
        f"Greedy decoding takes the most probable token: “{p.words[0]}” with {p.probs[0]:.3f}{second} "
        f"(a margin of {gap:.3f}). "
        + (
            "Decoding stops: the translation is empty."
            if p.chosen == "<eos>"
            else f"“{p.chosen}” becomes the decoder's input at position {p.position + 1}."
        )
    )


def _prediction_bars(c: Context, position: int, title: str) -> tuple[go.Figure, lesson.Prediction]:
    p = lesson.decoding_step(c.a, c.itos, position)
    fig = bars(list(p.words), p.probs, title, "probability", GREEN, highlight=0)
    fig.update_yaxes(range=[0, 1.1])
    return fig, p


def _pred_table(p: lesson.Prediction) -> pd.DataFrame:
    return pd.DataFrame({"word": p.words, "probability": p.probs}).round(4)


def _chosen(c: Context) -> View:
    row = c.f.row if c.f.row < len(c.a.greedy.steps) else 0
    fig, p = _prediction_bars(
        c, row, f"the {len(c.a.greedy.steps[row].candidates)} most probable words at position {row}"
    )
    return View(fig, notice_chosen(p), _pred_table(p))


def notice_next(p: lesson.Prediction | None, prefix: tuple[str, ...], mask_on: bool = True) -> str:
    """One position further than the steps before (said so), what it predicts; the mask's consequence."""
    if p is None:
        return "There is no next step: the model chose <eos>, so the translation ends here."
    same = (
        " The earlier positions give the same numbers as before: the mask hides every later word from them."
        if mask_on
        else ""
    )
    return (
        f"One position further than the steps before: the decoder runs again with “{' '.join(prefix)}” as its "
        f"input, and position {p.position} now predicts “{p.words[0]}” with {p.probs[0]:.3f}.{same}"
    )


def _next(c: Context) -> View:
    a = c.a
    d = lesson.decoder_input(a)
    nxt = min(c.f.row, 0 if len(d.inputs) < 2 else len(d.inputs) - 1) + 1
    if nxt >= len(a.greedy.steps):
        fig, p = _prediction_bars(c, len(a.greedy.steps) - 1, "the last choice")
        return View(fig, notice_next(None, d.inputs[:1]), _pred_table(p))
    fig, p = _prediction_bars(c, nxt, f"position {nxt}, after “{' '.join(d.inputs[: nxt + 1])}”")
    return View(fig, notice_next(p, d.inputs[: nxt + 1], a.interventions.look_ahead_mask), _pred_table(p))


def notice_finished(x: lesson.Finished) -> str:
    if not x.words:
        return "The translation is empty."
    if x.finished and len(x.words) == 1:
        return f"The translation is empty: <eos> came first ({x.probs[0]:.3f})."
    end = f"then “<eos>” ({x.probs[-1]:.3f}) ends it" if x.finished else "it stopped at the length limit"
    n = len(x.words) - (1 if x.finished else 0)
    return (
        f"{count(n, 'word')}, {end}: “{x.translation}”. The least sure choice was “{x.words[x.least]}” "
        f"({x.probs[x.least]:.3f})."
    )


def _finished(c: Context) -> View:
    x = lesson.finished(c.a, c.itos)
    labels = [f"{i}: {w}" for i, w in enumerate(x.words)]
    fig = bars(labels, x.probs, "the probability of each chosen word", "probability", GREEN, highlight=x.least)
    fig.update_yaxes(range=[0, 1.1])
    return View(fig, notice_finished(x), pd.DataFrame({"word": x.words, "probability": x.probs}).round(4))


# --- training ------------------------------------------------------------------------------------------------


def notice_loss(x: LT.Loss) -> str:
    """The largest loss term, the mean, and the smoothed loss. "Largest" = the argmax of −log p; no other
    judging words."""
    t = x.worst
    return (
        f"Teacher-forced on its own translation, position {t} must write {q(x.words[t])} and gives it "
        f"p = {x.probs[t]:.3f}: −log p = {x.terms[t]:.3f}, the largest term; the mean over the {len(x.terms)} "
        f"positions is L = {x.mean:.3f}. Against the smoothed target (ε = {x.eps:g}: 1 − ε + ε/V = "
        f"{1 - x.eps + x.eps / x.vocab:.4f} on the right word, ε/V = {x.eps / x.vocab:.1e} on each of the other "
        f"{x.vocab - 1}) the mean is {sum(x.smoothed) / len(x.smoothed):.3f}."
    )


def _loss(c: Context) -> View:
    r = LT.recipe(c.meta or {}, int(c.a.trace["enc.out"].shape[-1]))
    x = LT.loss(c.a, r.label_smoothing)
    labels = [f"{t} → {label_word(w)}" for t, w in enumerate(x.words)]
    fig = go.Figure(
        [
            go.Bar(name="−log p (one-hot target)", x=labels, y=list(x.terms), marker_color=GREEN),
            go.Bar(name=f"smoothed target, ε = {x.eps:g}", x=labels, y=list(x.smoothed), marker_color=GREY),
        ]
    )
    layout(
        fig,
        title="the loss at every position (position → the word it must write)",
        yaxis_title="loss (nats)",
        legend=True,
        barmode="group",
        xaxis={"type": "category"},
    )
    tab = pd.DataFrame(
        {"position → word": labels, "p(right word)": x.probs, "−log p": x.terms, "smoothed loss": x.smoothed}
    ).round(4)
    return View(
        fig,
        notice_loss(x),
        tab,
        textbook="The paper trains with label smoothing ε_ls = 0.1 (§5.4), as "
        "this model did; it hurts perplexity but improves BLEU.",
    )


def notice_training(r: LT.Recipe) -> str:
    """This model's warm-up and peak learning rate beside the paper's base model's. No judging words."""
    peak = r.lr(r.warmup)
    return (
        f"This model: warm-up over the first {r.warmup:,} of {r.steps:,} steps, peak learning rate "
        f"{r.lr_scale:g} · {r.d_model}^−0.5 · {r.warmup}^−0.5 = {peak:.2e} at step {r.warmup:,}, then falling "
        f"like step^−0.5; batches of {r.batch} sentence pairs, dropout {r.dropout:g}, label smoothing "
        f"{r.label_smoothing:g}"
        + (f", {r.seconds:.0f} s on one CPU." if r.seconds else ".")
        + f" The paper's base model: warm-up {paper.WARMUP:,} of {paper.BASE.train_steps:,} steps, peak "
        f"{paper.BASE.d_model}^−0.5 · {paper.WARMUP}^−0.5 = {paper.PAPER_PEAK_LR:.2e}."
    )


def _training(c: Context) -> View:
    r = LT.recipe(c.meta or {}, int(c.a.trace["enc.out"].shape[-1]))
    mine_rows = {
        "batch": f"{r.batch} sentence pairs",
        "hardware": "one CPU thread",
        "training": f"{r.steps:,} steps" + (f", {r.seconds:.0f} s" if r.seconds else ""),
        "warm-up": f"{r.warmup:,} steps",
        "dropout": f"{r.dropout:g}",
        "label smoothing": f"{r.label_smoothing:g}",
        "checkpoints": "the last one, no averaging",
        "decoding": "greedy here; beam search on the Output page",
        "output length": "at most 2 × input + 10 tokens",
    }
    tab = pd.DataFrame(
        [
            {"": k, "paper, base model": b, "paper, big model": g, "this model": mine_rows.get(k, "the same")}
            for k, b, g in paper.RECIPE
        ]
    )
    fig = make_subplots(
        rows=2,
        cols=2,
        row_heights=[0.3, 0.7],
        vertical_spacing=0.1,
        specs=[[{}, {}], [{"type": "table", "colspan": 2}, None]],
        subplot_titles=("learning rate, this model", "learning rate, the paper's base model", ""),
    )
    mine = np.unique(np.linspace(1, max(r.steps, 2), 200).astype(int))
    base = np.unique(np.linspace(1, paper.BASE.train_steps, 200).astype(int))
    fig.add_trace(go.Scatter(x=mine, y=[r.lr(int(t)) for t in mine], mode="lines", line_color=GREEN), 1, 1)
    fig.add_trace(
        go.Scatter(
            x=base, y=[r.lr(int(t), paper.BASE.d_model, paper.WARMUP, 1.0) for t in base], mode="lines", line_color=GREY
        ),
        1,
        2,
    )
    fig.add_trace(
        go.Table(
            columnwidth=[1.1, 3, 2.2, 2.2],
            header={"values": list(tab.columns), "align": "left", "fill_color": "#e8eef7"},
            cells={"values": [tab[col] for col in tab.columns], "align": "left", "height": 30},
        ),
        2,
        1,
    )
    fig.update_xaxes(title_text="training step", row=1)
    fig.update_yaxes(tickformat=".1e", row=1)  # 7.0e-4, not Plotly's "700μ"
    layout(fig, height=900)  # the table's 10 rows, most of them on two lines: every one shown
    return View(
        fig,
        notice_training(r),
        tab,
        textbook="The paper's recipe (sections 5 and 6.1) is in the table, beside this model's.",
    )


VIEWS = {
    "decoder_input": _decoder_input,
    "masked": _masked,
    "cross": _cross,
    "coref": _coref,
    "output": _output,
    "chosen": _chosen,
    "next": _next,
    "finished": _finished,
    "loss": _loss,
    "training": _training,
}
