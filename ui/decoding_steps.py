"""The Output page's sections on what the decoder outputs: the final linear layer and softmax at one position,
greedy decoding one step at a time, and beam search beside it.

All are of the analysed sentence (`here`, its `content_key`), drawn once per content and replayed
(`ui.widgets.once`): a class follows the same step of the same sentence.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from types import ModuleType

import pandas as pd
import streamlit as st

from model.checkpoint import Bundle
from model.pipeline import Analysis, label_word
from ui.models import beam
from ui.widgets import chart, fold, md, metrics_row, notice, once, pick, section, small_table
from viz import decoding as vo
from viz.heatmap import shape_text

CHART = {"displayModeBar": False}


def top_chart(what: str, content: tuple, frame: Callable[[], pd.DataFrame], title: str, best: str, key: str) -> None:
    """The bar chart of a few candidate words (`frame()`, computed only when drawn), `best` highlighted, drawn once
    per `content`."""
    once(what, content, lambda: chart(vo.top_bar(frame(), title, highlight=best), key=key, config=CHART))


def linear_section(a: Analysis, bundle: Bundle, here: tuple, text: ModuleType) -> None:
    """h_t -> logits -> softmax at one decoder position: its sizes, the top 10 words and every logit; drawn once
    per content (`here`) and position, and replayed to a class on the same position (ui.widgets.once)."""
    itos, tr = bundle.tgt_vocab.itos, a.trace
    V = len(itos)
    section("1. The final linear layer and softmax", text.LINEAR)
    st.latex(text.LINEAR_LATEX)
    pos = pick(
        "Decoder position",
        range(len(a.tgt_labels)),
        "output_pos",
        0,
        format_func=lambda t: f"{a.tgt_labels[t]}  →  predicts {label_word(a.next_labels[t])}",
    )
    out = vo.position_output(tr, pos)
    best = out.best

    @functools.cache
    def top():
        return vo.top_candidates(out.probs, out.logits, itos, 10)

    def position_numbers() -> None:
        with metrics_row():
            st.metric("numbers in h_t", f"{out.h.numel()}", help=f"dec.out is {shape_text(tr['dec.out'], 'B, t, D')}")
            st.metric(
                "numbers in the logits",
                f"{out.logits.numel()}",
                help=f"= target vocabulary size; logits is {shape_text(tr['logits'], 'B, t, V')}",
            )
            st.metric("argmax index", best)
            st.metric("which word is that index?", itos[best])
        st.caption(text.lookup(shape_text(vo.output_weight(bundle.model), "D, V"), best, itos[best]))

    def choice() -> None:
        notice(vo.choice_notice(out, itos, a.tgt_labels[pos]))
        st.metric("probability of these 10 together", f"{float(top()['probability'].sum()):.4f}")

    def logits() -> None:
        st.markdown(f"**All {V} logits at this position** (hover for the word):")
        chart(vo.logits_figure(out.logits, itos), key="output_logits", config=CHART)
        notice(vo.logits_notice(out.logits, itos))

    once("output.position", (*here, pos), position_numbers)
    c1, c2 = st.columns([3, 2])
    with c1:
        title = f"Top 10 of p_{pos} (softmax over all {V} words)"
        top_chart("output.top", (*here, pos), top, title, itos[best], "output_top")
    with c2:
        once("output.choice", (*here, pos), choice)
    with c2, fold("The 10 as a table", "output_fold_top") as shown:
        if shown:
            small_table(top(), hide_index=True)
    once("output.logits", (*here, pos), logits)


def greedy_section(a: Analysis, itos: list[str], here: tuple) -> None:
    """The greedy decoding's table, then one step of it under a slider (a fragment: only it reruns)."""
    g = a.greedy
    once("output.greedy_table", here, lambda: small_table(vo.greedy_table(g, itos), hide_index=True))
    greedy_step(g, itos, here)
    if not g.finished:
        st.info("The model did not say <eos> before the length limit.")


@st.fragment
def greedy_step(g, itos: list[str], content: tuple) -> None:
    """One step of the greedy decoding (of the analysis `content` names): its slider reruns only this part."""
    gs = pick("Greedy step", range(1, len(g.steps) + 1), "output_greedy_step", style="slider")
    step = g.steps[gs - 1]
    st.markdown(f"**Step {gs}**: the decoder has read {md(vo.prefix_words(step.prefix, itos))}.")
    cand = vo.step_candidates(step, itos)
    k1, k2 = st.columns([3, 2])
    with k1:
        title = f"Top {len(cand)} candidates at step {gs}"
        top_chart("output.greedy", (*content, gs), lambda: cand, title, itos[step.chosen], "output_greedy_chart")
    with k2:
        notice(vo.greedy_notice(step, gs, itos))
        with fold("The candidates as a table", "output_fold_candidates") as shown:
            if shown:
                small_table(cand, hide_index=True)


def beam_section(a: Analysis, bundle, here: tuple, text: ModuleType) -> None:
    """Beam width and length normalisation, the search tree (folded), the finished hypotheses, beam vs greedy and
    the lecture notes' "run the model twice" (`text`: the page's prose, pages/content/output.py)."""
    lang = bundle.langs[1]
    itos = bundle.tgt_vocab.itos
    b1, b2 = st.columns(2)
    k = b1.slider("Beam width k", 1, 5, 3, key="output_beam_k")
    alpha = b2.slider(
        "Length normalisation α",
        0.0,
        1.5,
        0.6,
        0.1,
        key="output_beam_alpha",
        help="0: plain total log-probability. 0.6 is the paper's value (section 6.1), taken from GNMT.",
    )
    with fold("Show the search tree", "output_fold_tree") as shown:
        if shown:
            res = beam(k, alpha)
            chart(vo.beam_tree(res, itos), key="output_beam_tree", config=CHART)
            notice(vo.beam_notice(res, a.greedy, itos, lang))
            st.caption(text.BEAM_TREE)
            with st.expander("Every expansion of one step, as a table"):
                bs = pick("Beam step", range(1, len(res.steps) + 1), "output_beam_step", style="slider")
                small_table(vo.beam_step_table(res, bs, itos, lang), hide_index=True)

    def results() -> None:
        res = beam(k, alpha)
        st.markdown("**Finished hypotheses**, best normalised score first:")
        small_table(vo.finished_table(res, itos, lang), hide_index=True)
        st.subheader("Beam search vs greedy")
        comp = vo.comparison_table(a.greedy, res, alpha, k, itos, lang)
        small_table(comp, hide_index=True)
        greedy_out, beam_out = comp["output"]
        if beam_out == greedy_out:
            st.success("Beam search and greedy decoding agree here." + (text.K1_NOTE if k == 1 else ""))
        else:
            st.warning(f"They differ: greedy says **{md(greedy_out)}**, beam search says **{md(beam_out)}**.")
        section(
            "The lecture notes' “another method”: keep the top two words and run the model twice",
            text.RUN_TWICE,
            level=3,
        )
        small_table(vo.run_twice(beam(2, alpha), itos), hide_index=True)

    once("output.beam", (*here, k, alpha), results)
