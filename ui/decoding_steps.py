"""The Output page's decoding sections: greedy decoding one step at a time, and beam search beside it.

Both are of the analysed sentence (`here`, its `content_key`), drawn once per content and replayed
(`ui.widgets.once`): a class follows the same step of the same sentence.
"""

from __future__ import annotations

from types import ModuleType

import streamlit as st

from model.pipeline import Analysis
from ui.models import beam
from ui.widgets import chart, fold, md, notice, once, pick, section, small_table
from viz import decoding as vo

CHART = {"displayModeBar": False}


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
        once("output.greedy", (*content, gs), lambda: chart(
            vo.top_bar(cand, f"Top {len(cand)} candidates at step {gs}", highlight=itos[step.chosen]),
            key="output_greedy_chart", config=CHART))
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
    alpha = b2.slider("Length normalisation α", 0.0, 1.5, 0.6, 0.1, key="output_beam_alpha",
                      help="0: plain total log-probability. 0.6 is the paper's value (section 6.1), taken from GNMT.")
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
        section("The lecture notes' “another method”: keep the top two words and run the model twice",
                text.RUN_TWICE, level=3)
        small_table(vo.run_twice(beam(2, alpha), itos), hide_index=True)

    once("output.beam", (*here, k, alpha), results)
