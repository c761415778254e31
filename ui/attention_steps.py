"""One query's attention in the order the model computes it: x·W -> q, k, v -> scores, ÷√d_k, softmax -> z.

Renders a `explain.recompute.WordSteps` (from a trace, `word_steps`, or the textbook example,
`textbook_steps`), so any page can walk through one word of any attention module. Also the pieces the
encoder-side pages share: a figure with its computed notice line and its exact numbers folded away.
"""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from explain.experiments import dot_product_samples, one_head_left, saturation, scaled, summarize
from explain.recompute import Projection, WordSteps
from explain.textbook import from_book
from model import pipeline
from ui.classroom.plans import mystery_in, mystery_wait
from ui.models import analysis, coref_decision, current_model, saturation_rows, used_text, variance_rows
from ui.session_cache import session_cache
from ui.state import interventions
from ui.tracing import show_story
from ui.widgets import chart, figure, fold, md, metrics_row, notice, once, page_link, section, small_table
from viz import attention as va
from viz import coref as vc
from viz import heads as vh
from viz import scaling as vs
from viz.attention import dims, step_table, z_table


def word_row(vector, label: str, title: str, key: str, y_title: str, content: tuple | None = None) -> None:
    """One word's vector (`label`) as a [1, d] heatmap."""
    d = len(vector)
    figure(
        vector[None],
        dims(d),
        [label],
        "activations",
        title=title,
        key=key,
        x_title="dimension",
        y_title=y_title,
        content=content,
    )


def show_projection(p: Projection, query_label: str, key: str, content: tuple | None = None) -> None:
    """q = x·W^Q + b^Q for one word, with the real x, W^Q, b^Q and q; then k and v the same way. `content`: what
    `p` is of (a key for `once`), as in `show_steps`."""
    D, d_k = p.x.numel(), p.W["q"].shape[1]

    def formula() -> None:
        st.latex(
            rf"\underbrace{{q}}_{{[1,\,{d_k}]}} = \underbrace{{x}}_{{[1,\,{D}]}} \cdot "
            rf"\underbrace{{W^Q}}_{{[{D},\,{d_k}]}} + \underbrace{{b^Q}}_{{[1,\,{d_k}]}}, \qquad "
            r"k = xW^K + b^K, \qquad v = xW^V + b^V"
        )
        st.caption(
            "The model's projections (torch's nn.Linear) have a bias b as well as the matrix W; the paper "
            "writes only W. W^Q here is this head's slice of the layer's W^Q: the columns that make this "
            "head's q."
        )
        notice(va.projection_notice(p))

    once(f"attention_steps.{key}projection", content, formula)
    with fold("Show x, W^Q and q with the real numbers", f"{key}fold_projection") as shown:
        if not shown:
            return
        c1, c2 = st.columns([1, 2])
        with c1:
            figure(
                p.W["q"],
                dims(d_k),
                dims(D),
                "activations",
                title="W^Q of this head",
                key=f"{key}Wq",
                x_title="q dimension",
                y_title="x dimension",
            )
        with c2:
            word_row(p.x, query_label, f"x of {md(query_label)}", f"{key}x", "word")
            word_row(p.computed("q"), query_label, "q = x·W^Q + b^Q", f"{key}q", "query")


def show_steps(
    s: WordSteps,
    key_labels: list[str],
    query_label: str,
    key: str,
    textbook: bool = False,
    off: bool = False,
    proj: Projection | None = None,
    query: int = 0,
    content: tuple | None = None,
) -> None:
    """The computation for one query word; `key` prefixes the widget keys, `off`: the head is switched off;
    `proj`: the word's projection (q = x·W^Q + b^Q), shown first; `query`: the textbook query's index. `content`:
    what `s` and `proj` are of (model, sentence, interventions, layer, head, word): a class following its teacher
    then draws the figures, tables and notices once per content, each student's page replays them."""
    section(
        "1 · The query, the keys and the values",
        (
            "In the example each word comes with made-up vectors (a model gets them by multiplying the word's "
            "vector by three learned matrices): "
            if textbook
            else "Each word's vector is multiplied by three learned matrices: "
        )
        + f"its **query** q (what this word looks for), its **key** k (what it offers to be found by) and its "
        f"**value** v (what it passes on). In one head each has d_k = {s.d_k} numbers.",
        level=3,
    )
    if proj is not None:
        show_projection(proj, query_label, key, content)
    else:
        word_row(s.q, query_label, f"q of {md(query_label)}", f"{key}q", "query", content)

    def per_word(matrix, title: str, name: str, y_title: str, note: Callable[[], str | None]) -> None:
        """A [words, d_k] matrix, one row per key word; `name` ends its widget key."""
        figure(
            matrix,
            dims(s.d_k),
            key_labels,
            "activations",
            title=title,
            key=f"{key}{name}",
            x_title="dimension",
            y_title=y_title,
            note=note,
            content=content,
        )

    c1, c2 = st.columns(2)
    with c1:
        per_word(s.k, "k of every word", "k", "key", lambda: va.keys_notice(s, key_labels, query_label))
    with c2:
        per_word(s.v, "v of every word", "v", "value", lambda: va.values_notice(s, key_labels))

    def scores() -> None:
        st.subheader(f"2 · Score, divide by √d_k = {s.sqrt_dk:.4g}, softmax")
        st.latex(
            rf"\text{{score}}_j = q \cdot k_j, \qquad \frac{{q\cdot k_j}}{{\sqrt{{d_k}}}}, \quad "
            rf"\sqrt{{d_k}} = \sqrt{{{s.d_k}}} = {s.sqrt_dk:.4g}, \qquad "
            rf"a_j = \frac{{\exp(q\cdot k_j/\sqrt{{d_k}})}}{{\sum_{{j'}} \exp(q\cdot k_{{j'}}/\sqrt{{d_k}})}}"
        )
        if not s.scale:
            st.warning(
                "Scaling is switched off (“Divide by √d_k”): the model does not divide by √d_k, so the ÷√d_k "
                "column below equals the raw score q·k."
            )
        if textbook:
            small_table(va.textbook_table(s, key_labels, query))
            st.markdown(f"**{va.worked_line(s, query, from_book(query))}**")  # no user text: written as is
        small_table(step_table(s, key_labels), hide_index=True)
        notice(va.row_notice(s.weights, key_labels, query_label))
        st.caption("The weights are all ≥ 0 and add up to 1: a weighted average, not a sum that can grow.")
        st.subheader("3 · Weight each value, add them up: z")

    once(f"attention_steps.{key}scores", content, scores)
    per_word(s.weighted, "weight × v, one row per word", "wv", "word", lambda: va.weighted_notice(s, key_labels))
    once(
        f"attention_steps.{key}z",
        content,
        lambda: (st.latex(r"z = \sum_j a_j\, v_j"), notice(va.z_notice(s, textbook))),
    )
    with fold("Exact numbers · z", f"{key}z_numbers") as shown:
        if shown:
            small_table(z_table(s))
    if off:
        st.info(
            "This head is switched off (“Heads switched off”): the model sets its z to 0 before concatenating "
            "the heads (the weights above are still what it would have used)."
        )


# --- The self-attention page's demos ----------------------------------------------------------------

D_KS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
N_KEYS, N_QUERIES = 8, 200  # the saturation demo: one query against N_KEYS keys, averaged over N_QUERIES
NO_BAR = {"displayModeBar": False}


def show_why_scale(model_dk: int, key: str, prose) -> None:
    """Var(q·k) = d_k with random vectors, and the softmax saturating without the division by √d_k. `prose`: the
    page's content module (WHY_SCALE, SATURATION, saturation_caption)."""
    st.markdown(prose.WHY_SCALE)
    dk = st.select_slider("d_k", options=D_KS, value=model_dk if model_dk in D_KS else 64, key=f"{key}dk")
    samples = dot_product_samples(dk, n=4000, seed=0)
    chosen = summarize(samples, dk)
    var_rows = variance_rows(D_KS)
    with metrics_row():
        st.metric(f"measured Var(q·k), d_k = {dk}", f"{chosen.variance:.1f}", help="theory: d_k")
        st.metric("measured Var(q·k / √d_k)", f"{chosen.variance_scaled:.3f}", help="theory: 1")
    divided = scaled(samples, dk)
    chart(vs.histogram_figure(samples, divided, dk), key=f"{key}hist", config=NO_BAR)
    notice(vs.histogram_notice(samples, divided, dk))
    c1, c2 = st.columns(2)
    with c1:
        chart(vs.variance_figure(var_rows), key=f"{key}var", config=NO_BAR)
    with c2:
        small_table(vs.variance_table(var_rows), hide_index=True)
    notice(vs.range_notice(var_rows))
    st.markdown(prose.SATURATION)
    sat = saturation(dk, n_keys=N_KEYS, seed=0)
    with metrics_row():
        st.metric("max weight, no scaling", f"{sat.max_raw:.3f}")
        st.metric("max weight, ÷√d_k", f"{sat.max_scaled:.3f}")
        st.metric("‖Jacobian‖, no scaling", f"{sat.jacobian_raw:.4f}")
        st.metric("‖Jacobian‖, ÷√d_k", f"{sat.jacobian_scaled:.4f}")
    chart(
        vs.saturation_figure(sat.weights_raw, sat.weights_scaled, [f"key {j}" for j in range(N_KEYS)]),
        key=f"{key}sat",
        config=NO_BAR,
    )
    notice(vs.saturation_notice(sat.max_raw, sat.max_scaled, dk))
    with fold(f"Every d_k. {prose.saturation_caption(N_QUERIES, N_KEYS)}", f"{key}sat_numbers") as shown:
        if shown:
            small_table(vs.saturation_table(saturation_rows(D_KS)), hide_index=True)


def show_coref(ca, name: str, n_layers: int, n_heads: int, key: str, no_it: str) -> None:
    """Where "it" looks in every head of every encoder layer, for one coreference sentence (an Analysis);
    `no_it`: what to say when the model's vocabulary splits the sentence differently."""
    c = vc.coref_parts(ca.prepared.tokens)
    st.markdown(f"**“… too {name}”** → {md(ca.translation)}")
    if c is None:
        st.info(no_it)
        return
    if mystery_in("enc."):  # every encoder head of the sentence: the class's mystery head among them
        mystery_wait("Where “it” looks in every encoder head")
        return
    rows = vh.word_across_layers(ca.trace, "enc", "self_attn", n_layers, c.it)
    hl = vh.head_labels(n_layers, n_heads)
    focus = vc.coref_focus(ca.trace, n_layers, c)
    figure(
        rows,
        ca.src_labels,
        hl,
        "weights",
        title="where “it” looks, every head (outlined: the head that best links it to the deciding noun)",
        key=key,
        note=vc.coref_notice(rows, hl, ca.src_labels, c, focus),
        mark_row=focus.layer * n_heads + focus.head,
        numbers=False,
        x_title="key word",
        y_title="layer · head",
    )
    with fold("Per head: the candidate words", f"{key}_candidates") as shown:
        if shown:
            small_table(vc.coref_table(rows, hl, ca.src_labels, ca.prepared.tokens, c.it))


def show_decision(texts: tuple[str, ...], key: str) -> None:
    """Where il / elle is decided, for coreference sentences `texts`: the pronoun row's reading of the adjective
    and the model with each decoder layer's encoder-decoder attention switched off (explain/coref.py)."""

    def draw() -> None:
        decisions = [d for d in (coref_decision(t) for t in texts) if d is not None]
        if not decisions:
            st.info("The model writes neither il nor elle here, so there is no pronoun to follow.")
            return
        chart(vc.decision_figure(decisions), key=f"{key}decision", config=NO_BAR)
        if hidden:  # its notice gives each decoder head's weight on the adjective, the mystery head's too
            mystery_wait("The experiment's numbers per head")
            return
        for d in decisions:
            notice(vc.decision_notice(d))

    # a decision is of the current model under the current interventions (ui.models.coref_decision)
    hidden = mystery_in("dec.")
    once("decision", (current_model().key, texts, repr(interventions()), key, hidden), draw)


def _set_sentence(sentence: str) -> None:
    st.session_state["sentence"] = sentence


def focus_line(text, focus: vc.CorefFocus, tokens: tuple[str, ...], labels: list[str]) -> None:
    """Why the layer and head pickers opened on `focus` (on the coreference sentence), in the page's words
    (`text.focus`), naming the referent, the other noun and the adjective by their `labels`."""
    c = vc.coref_parts(tokens)
    st.markdown(
        text.focus(
            focus.layer,
            focus.head,
            *(md(pipeline.label_word(labels[j])) for j in (c.referent, c.other, c.adjective)),
            focus.weight,
            focus.other,
        )
    )


def coref_section(pair: tuple[str, str], cfg, key: str, prose) -> None:
    """The self-attention page's coreference section for the pair (tired, wide): where "it" looks in the encoder's
    heads (weights), where the adjective reaches the pronoun (traced: ui.tracing.show_story, for the page's
    sentence when it is one of the pair, else the first), and the blunt switch-off experiment in a fold."""
    section("What does “it” refer to?", prose.COREF)
    st.caption(prose.COREF_CAPTION)
    names = [s.split()[-1] for s in pair]
    for col, sentence, name in zip(st.columns(2), pair, names, strict=True):
        col.button(
            f"Use “… too {name}” on this page", on_click=_set_sentence, args=(sentence,), key=f"{key}load_{name}"
        )
    with fold("Show where “it” looks in every head, for both sentences", f"{key}fold_coref") as shown:
        if shown:
            for col, sentence, name in zip(st.columns(2), pair, names, strict=True):
                with col:
                    show_coref(
                        analysis(text=sentence), name, cfg.n_enc_layers, cfg.n_heads, f"{key}coref_{name}", prose.NO_IT
                    )
    traced = next((s for s in pair if s == st.session_state["sentence"]), pair[0])
    section(f"Where “{traced.split()[-1]}” reaches the pronoun", prose.DECISION)
    show_story(traced, f"{key}trace_")
    page_link("pages/tracing.py", "Trace it yourself: every layer and position, any pair (Causal tracing)")
    with fold(prose.BLUNT_TITLE, f"{key}fold_decision") as shown:
        if shown:
            st.markdown(prose.BLUNT)
            show_decision(pair, f"{key}decision_")
    page_link("pages/cross_attention.py", "In depth: Encoder-decoder attention, every row of the alignment")


# --- The multi-head page: one head left in each layer ----------------------------------------------


@session_cache(max_entries=64)
def _one_head_left(model_key: str, text: str, _bundle):
    return one_head_left(_bundle, pipeline.prepare(_bundle, text))


def show_one_head_left(text: str, module: str, key: str) -> None:
    """Every attention layer of the current model with all heads but one switched off, one head at a time, on
    `text`: a grid over layers and heads, its notice, and the table of the page's layer `module`."""
    cur = current_model()
    r = _one_head_left(cur.key, used_text(text), cur.bundle)
    st.markdown(f"**Unmodified model:** {md(r.translation) or '*(empty)*'}")
    chart(vh.one_head_figure(r), key=f"{key}grid", config=NO_BAR)
    notice(vh.one_head_notice(r))
    st.markdown(f"**{vh.module_title(module).capitalize()}**, head by head:")
    small_table(vh.one_head_table(r, module), hide_index=True)
