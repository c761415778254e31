"""Why attention: the paper's Table 1 with a calculator, path lengths, the n x n memory, Table 2, and Table 3
reproduced at toy scale."""

import streamlit as st

from explain.paper import CITATION, TABLE1, TABLE1_CAPTION, TABLE3_CAPTION
from pages.content import why_attention as text
from ui import shell
from ui.ablations import measured, measured_key
from ui.models import analysis, current_model
from ui.widgets import chart, intro, next_link, notice, once, pick, section, small_table
from viz import ablations as va
from viz.complexity import (
    attention_matrix_bytes,
    bleu_display,
    bleu_figure,
    bleu_frame,
    bleu_notice,
    cheaper_than_recurrence,
    costs_figure,
    costs_notice,
    human_bytes,
    layer_costs,
    stored_bytes,
)
from viz.heatmap import shape_text

shell.enter(__file__)  # first: re-enter through app.py if Streamlit ran this page bare

st.title("Why attention?")
intro(text.INTRO)

a = analysis()
cfg = current_model().bundle.config
if a.prepared.empty:
    st.info(text.NO_SENTENCE)

section("1. Three ways to mix information between positions", text.table1(TABLE1))
st.caption(f"Table 1 of the paper ({CITATION}). {TABLE1_CAPTION}")
st.markdown(text.TABLE1_NOTES)

st.header("2. Calculator")
c = st.columns(4)
n = int(c[0].number_input("n: sequence length", 1, 100_000, 50, key="why_n"))
d = int(c[1].number_input("d: representation size", 1, 100_000, 512, key="why_d"))
k = int(c[2].number_input("k: kernel size", 1, 1_000, 3, key="why_k"))
r = int(c[3].number_input("r: neighbourhood (restricted)", 1, 100_000, 8, key="why_r"))


def calculated() -> None:
    costs = layer_costs(n, d, k, r)
    small_table(costs, hide_index=True)
    chart(costs_figure(costs), key="why_costs", config={"displayModeBar": False})
    (st.success if cheaper_than_recurrence(n, d) else st.warning)(costs_notice(costs, d))  # a verdict: coloured
    if not cheaper_than_recurrence(n, d):
        st.caption(text.restricted(n, d))


once("why.costs", (n, d, k, r), calculated)
st.caption(text.COUNTS)

section("3. The price: an n × n matrix per head", text.MEMORY)
c = st.columns(3)
heads = int(c[0].number_input("heads", 1, 256, 8, key="why_heads"))
layers = int(c[1].number_input("attention layers", 1, 1_000, 6, key="why_layers"))
c[2].metric(f"attention weights for n = {n} (float32)", human_bytes(attention_matrix_bytes(n, heads, layers)))
st.caption(text.memory(n, heads, layers, attention_matrix_bytes(n, heads, layers)))
if not a.prepared.empty:
    w = a.trace["enc.0.self_attn.weights"]
    per_layer = stored_bytes(w)
    st.markdown(
        text.your_sentence(
            shape_text(w, "B, H, m, m"), per_layer, cfg.n_enc_layers, human_bytes(per_layer * cfg.n_enc_layers)
        )
    )

st.header("4. The results: better translations for less training")


def table2() -> None:  # the paper's Table 2: the same for everyone
    frame = bleu_frame()
    chart(bleu_figure(frame), key="why_bleu", config={"displayModeBar": False})
    notice(bleu_notice(frame))
    with st.expander("Table 2 as numbers"):
        small_table(bleu_display(frame), hide_index=True)


once("why.bleu", (), table2)
st.caption(text.table2(CITATION))

section("5. What each part is worth: the paper's Table 3 at toy scale", text.TABLE3_INTRO)
ablated = measured()
if ablated is None:
    st.info(text.NO_ABLATIONS)
else:
    st.caption(text.ablations_setup(ablated["meta"], len(ablated["rows"])))
    once("why.ablations", (measured_key(),), lambda: chart(va.steps_figure(ablated), key="why_ablations"))
    group = pick("Group", va.groups(ablated), "why_ablation_group", style="radio", format_func=va.GROUP_TITLES.get)

    def group_rows() -> None:
        st.markdown("**Here** (toy set, held-out split; median over the seeds, lowest–highest)")
        small_table(va.rows_frame(ablated, group), hide_index=True)
        notice(va.group_notice(ablated, group))
        st.markdown("**The paper** (Table 3, EN-DE development set)")
        small_table(va.paper_frame(group), hide_index=True)
        st.caption(text.table3(CITATION, TABLE3_CAPTION))

    once("why.group", (measured_key(), group), group_rows)

section("6. Summary", text.SUMMARY)

next_link(__file__)
