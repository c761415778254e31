"""Positional encoding: the formula with real numbers, the table, PE(pos+k) = M_k PE(pos), word order."""

import streamlit as st

from model.trace import Interventions
from pages.content import positional as text
from ui import shell
from ui.models import analysis, content_key, current_model
from ui.positional_steps import formula_section, layouts_section, shift, word_order
from ui.state import interventions
from ui.widgets import (
    chart,
    figure,
    fold,
    md,
    next_link,
    notice,
    once,
    opening,
    section,
)
from viz import positional as vp
from viz.heatmap import shape_text
from viz.positional import curves_figure

shell.enter(__file__)  # first: re-enter through app.py if Streamlit ran this page bare


a = opening("Positional encoding", text.INTRO, translation=False)
cur = current_model()
bundle, cfg = cur.bundle, cur.bundle.config
D, L = cfg.d_model, cfg.max_len
pe_table = bundle.model.src_embed.pe  # [max_len, D], the model's own buffer
ref = analysis(iv=Interventions())  # the unmodified model: src.pos is recorded even when PE is switched off
dims = [f"d{j}" for j in range(D)]

if not interventions().positional_encoding:
    st.warning(text.PE_OFF)

i = formula_section(ref, pe_table, text)
traced = ref.trace["src.pos"][0]

st.header("2. The encoding of your sentence")
figure(
    traced,
    dims,
    ref.src_labels,
    "encoding",
    title="src.pos: PE rows added to the embeddings",
    shape=shape_text(ref.trace["src.pos"], "1, T, D"),
    key="positional_sentence",
    x_title="dimension",
    y_title="position",
    note=vp.sentence_notice(traced),
)
st.caption(text.SENTENCE_CAPTION)
st.subheader(f"Every position the model accepts (0-{L - 1})")
with fold("Show the whole PE table", "positional_fold_all") as shown:
    if shown:
        figure(
            pe_table,
            dims,
            [str(q) for q in range(L)],
            "encoding",
            title="The model's PE table",
            shape=shape_text(pe_table, "max_len, D"),
            key="positional_all",
            x_title="dimension",
            y_title="position",
            note=vp.table_notice(pe_table),
        )

layouts_section(pe_table, dims, text)


# Sections 3-5 are fragments: their own widgets (dimensions, offset k, permutation) rerun only their section. A
# new sentence, model or intervention, and the pair index i of section 1 (used in section 4), rerun the page.
@st.fragment
def one_dimension(pe_table, D: int) -> None:
    st.header("3. One dimension across positions")
    chosen = st.multiselect("Dimensions", list(range(D)), default=vp.default_dims(D), key="positional_dims")
    if chosen:
        once(
            "positional.curves",
            (current_model().key, tuple(chosen)),
            lambda: (  # the model's PE, these dimensions
                chart(curves_figure(pe_table, chosen), key="positional_curves", config={"displayModeBar": False}),
                notice(vp.curves_notice(pe_table, chosen)),
            ),
        )
    else:
        st.info("Pick at least one dimension.")


one_dimension(pe_table, D)
shift(pe_table, D, L, i, dims, text)
word_order(a, ref, dims, text)


def switched() -> None:  # (the analysis without PE is made, or copied, only when this is drawn)
    pe_off = analysis(iv=Interventions(positional_encoding=False))
    c1, c2 = st.columns(2)
    c1.markdown(f"**With positional encoding:** {md(ref.translation) or '*(empty)*'}")
    c2.markdown(f"**Without (sidebar switch off):** {md(pe_off.translation) or '*(empty)*'}")
    st.caption(text.SWITCH_CAPTION)


st.subheader("The sidebar switch changes the whole model")
once("positional.switch", content_key(ref), switched)

section("6. Other choices", text.OTHER_CHOICES)

next_link(__file__)
