"""Overview: the encoder-decoder stack, the sentence's translation, the sizes, and the model in use."""

import streamlit as st

from explain.paper import BASE, CITATION
from model.checkpoint import count_parameters
from pages.content import overview as text
from ui import shell
from ui.models import analysis, current_model, state_key, toy_summary
from ui.page_list import by_file
from ui.state import MODELS, controls_are_mine
from ui.widgets import intro, next_link, once, page_link, section, sentence_header, small_table
from viz.heatmap import shape_text
from viz.overview import (
    BLOCKS,
    architecture_dot,
    heads_latex,
    model_record,
    shape_rows,
    sizes_table,
)

shell.enter(__file__)  # first: re-enter through app.py if Streamlit ran this page bare


def link(page: str, lead: str, **kw: str) -> None:
    """A link to `page`: what it opens, then the page's title (one list of titles: ui/page_list.py)."""
    page_link(page, f"{lead} → **{by_file(page).title}**", **kw)


def top() -> None:
    """The page but its model-in-use line (whose last words depend on who holds the controls) and what follows it:
    drawn once per state in this process, replayed for every other session in it, the teacher's among them (a class
    of thirty following its teacher here costs one drawing: ui/replay.py)."""
    a = analysis()
    cur = current_model()
    bundle = cur.bundle
    cfg = bundle.config
    empty = a.prepared.empty

    st.title("The Transformer at a glance")
    intro(text.INTRO)
    link("pages/lesson.py", "Start here: follow one sentence step by step", icon=":material/school:")

    st.header("Your sentence, translated")
    if empty:
        st.info(text.EMPTY)
    else:
        sentence_header(a)

    st.header("The encoder-decoder stack")
    left, right = st.columns([1, 1])
    with left:
        st.graphviz_chart(
            architecture_dot(cfg), width="stretch", alt=text.stack_alt(cfg.n_enc_layers, cfg.n_dec_layers)
        )
        st.caption(text.STACK_CAPTION)
    with right:
        st.markdown("**Open each block:**")
        for block in BLOCKS:
            link(block.page, f"({block.number}) {block.label}")
        st.markdown("**And then:**")
        link("pages/before.py", "What came before: recurrence plus attention")
        link("pages/why_attention.py", "Attention instead of recurrence")
        link("pages/tracing.py", "Which parts carry a difference between two sentences")
        link("pages/training.py", "Training a model like this one")
        st.markdown(text.blocks(cfg.n_enc_layers, cfg.n_dec_layers))

    section("Why the name “Transformer”?", text.NAME)
    if not empty:
        t = a.trace
        with st.container(horizontal=True):
            st.metric("Encoder input (src.input)", shape_text(t["src.input"][0], "m, D"))
            st.metric("Encoder output (enc.out)", shape_text(t["enc.out"][0], "m, D"))
        st.caption(
            f"The same m = {t['enc.out'].shape[1]} vectors of D = {cfg.d_model} numbers before and after "
            f"{cfg.n_enc_layers} encoder blocks (the source words and <eos>)."
        )

    m = a.trace["enc.out"].shape[1] if not empty else "m"
    tlen = a.trace["dec.out"].shape[1] if not empty else "t"
    paper = heads_latex(BASE.d_model, BASE.n_heads, BASE.d_k, "m")
    ours = heads_latex(cfg.d_model, cfg.n_heads, cfg.d_k, m)
    section(
        "Shapes: the paper and this model",
        f"{text.COLUMNS}\n\n**Paper (base model)**\n\n$$\n{paper}\n$$"
        f"\n\n**This model, on your sentence**\n\n$$\n{ours}\n$$",
    )
    rows = shape_rows(cfg, m, tlen)
    st.table({"": [r[0] for r in rows], "paper (base)": [r[1] for r in rows], "this model": [r[2] for r in rows]})
    if not empty:
        st.caption(
            f"Measured in the trace: one head's output enc.0.self_attn.z is "
            f"{shape_text(a.trace['enc.0.self_attn.z'], 'B, H, m, d_k')}, the concatenation "
            f"enc.0.self_attn.concat is {shape_text(a.trace['enc.0.self_attn.concat'], 'B, m, D')}."
        )

    st.header("Sizes: this model beside the paper")
    n_params = count_parameters(bundle.config)
    small_table(sizes_table(cfg, n_params), height="content")
    training = bundle.meta.get("training") or {}
    st.caption(
        text.sizes_caption(
            CITATION, BASE.params_millions * 1e6 / n_params, training.get("train_seconds"), training.get("steps_done")
        )
    )


def bottom() -> None:
    """The model's record and its data: drawn once per state in this process, as `top`."""
    bundle = current_model().bundle
    record = model_record(bundle.meta)
    if record:
        st.table({"": [r[0] for r in record], "value": [r[1] for r in record]})
    else:
        st.caption("This checkpoint records no training metadata.")

    summary, toy_hash = toy_summary()
    trained_hash = bundle.meta.get("data_sha256")
    if current_model().label != "my model" or trained_hash in (None, toy_hash):
        section("What it was trained on", text.TOY_DATA, level=3)
        small_table(summary, hide_index=True, height="content")
        if trained_hash not in (None, toy_hash):
            st.caption(text.DATA_CHANGED)
    else:
        section("What it was trained on", text.UPLOADED, level=3)

    next_link(__file__)


key = (*state_key(), toy_summary()[1])
once("overview.top", key, top)
cur = current_model()
section(
    "The model in use",
    f"**{MODELS.get({'my model': 'mine'}.get(cur.label, cur.label), cur.label)}** "
    f"(`{cur.bundle.name}`), translating {cur.bundle.langs[0]} → {cur.bundle.langs[1]}. "
    + ("Change it in the sidebar." if controls_are_mine() else "Your teacher chose it."),
)
once("overview.bottom", key, bottom)
