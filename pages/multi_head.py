"""Multi-head attention: every head of a layer, one head in detail, concat + W_O, and heads switched off."""

from __future__ import annotations

import streamlit as st

from model.trace import Interventions
from pages.content import multi_head as text
from ui import shell
from ui.attention_steps import show_one_head_left
from ui.classroom.plans import hidden_head, mystery_box
from ui.models import analysis, content_key, coref_decision, coref_defaults, current_model, teacher_forced
from ui.state import set_head
from ui.style import presenter
from ui.widgets import (
    chart,
    exact_numbers,
    figure,
    fold,
    md,
    next_link,
    notice,
    once,
    pick,
    require_sentence,
    section,
    sentence_header,
    small_table,
)
from viz import attention as va
from viz import coref as vc
from viz import heads as vh
from viz.attention import MODULES, axis_labels, dims, module_name
from viz.heads import block_figure, head_figure
from viz.heatmap import table

shell.enter(__file__)  # first: re-enter through app.py if Streamlit ran this page bare

P = "multi_head_"  # widget key prefix
KEYS = (f"{P}layer", f"{P}head", f"{P}word")
NO_BAR = {"displayModeBar": False}


def _toggle(module: str, head: int, key: str) -> None:
    set_head(module, head, bool(st.session_state[key]))


def _set_sentence(sentence: str) -> None:
    st.session_state["sentence"] = sentence


def check_key(module: str, head: int) -> str:
    return f"{P}on_{module}_{head}"


st.title("Multi-head attention")
st.markdown(text.INTRO)

a = analysis()
require_sentence(a)
sentence_header(a)
content = content_key(a)  # what the grid, the notice and the one-head figure are drawn from: the same for a class
cfg = current_model().bundle.config
iv = a.interventions
H, D, d_k = cfg.n_heads, cfg.d_model, cfg.d_k

for formula in text.FORMULAS:
    st.latex(formula)
st.markdown(text.matrices(H, D, d_k))
c1, c2 = st.columns([3, 2])
with c1:
    once("multi_head.shapes", (D, H, len(a.src_labels)), lambda: small_table(vh.shapes_table(D, H, len(a.src_labels))))
with c2:
    st.caption(text.SHAPES_CAPTION)

st.header("All heads of a layer")
c1, c2 = st.columns(2)
with c1:
    kind_label = st.radio("Attention", list(MODULES), key=f"{P}kind")
stack, kind = MODULES[kind_label]
focus = coref_defaults(a, KEYS, cfg.n_enc_layers) if stack == "enc" else None
n_layers = cfg.n_enc_layers if stack == "enc" else cfg.n_dec_layers
with c2:
    layer = pick("Layer", range(n_layers), KEYS[0], format_func=lambda i: f"layer {i}")
module = module_name(stack, kind, layer)
x_labels, y_labels = axis_labels(a, module)
weights = a.trace[f"{module}.weights"][0]  # [H, Tq, Tk]
off = iv.heads_off_in(module)
mystery = hidden_head()  # a lesson plan's mystery head: its weights stay hidden until the teacher's reveal
hidden = mystery if mystery is not None and mystery[0] == module else None
if stack == "dec":
    st.caption(text.DECODER_ROWS)
# the decoder's pronoun row of a coreference sentence (where il / elle is written), outlined on every head
pronoun = coref_decision(a.prepared.text) if stack == "dec" else None
mark = pronoun.row if pronoun is not None else None
if mark is not None:
    st.caption(f"Outlined on every head: the row of {md(y_labels[mark])}, where the decoder writes "
               f"“{md(pronoun.pronoun)}”.")
per_row = min(H, 2 if presenter() else 4)  # on a projector two heads a row: each large enough to read
for start in range(0, H, per_row):
    row = list(range(start, min(start + per_row, H)))
    first = next((h for h in row if mystery != (module, h)), None)  # writes the row's query words
    cols = st.columns([1.5] + [1] * (per_row - 1) if per_row > 1 else 1)  # the first's words take room
    for h, col in zip(row, cols, strict=False):
        with col:
            if mystery == (module, h):
                mystery_box(h, height=300)
            else:
                once("multi_head.grid", (*content, module, h, h == first, mark), lambda h=h, first=first: chart(
                    head_figure(weights[h], x_labels, y_labels, h, h in off, height=300, row_labels=h == first,
                                mark_row=mark), key=f"{P}grid_{h}", config=NO_BAR))
            key = check_key(module, h)
            st.session_state[key] = h not in off  # follow the shared state (the sidebar may have changed it)
            st.checkbox(f"head {h} on", key=key, on_change=_toggle, args=(module, h, key),
                        help="Switch this head off: its z becomes 0 before the concatenation.")
if hidden is None:  # (the notice would tell the mystery head's pattern)
    once("multi_head.notice", (*content, module), lambda: notice(vh.heads_notice(weights, x_labels, off)))
with fold("Exact weights of every head", f"{P}grid_numbers") as shown:
    if shown:
        for h in (h for h in range(H) if mystery != (module, h)):
            st.markdown(f"**head {h}**" + (" (off)" if h in off else ""))
            st.dataframe(table(weights[h], x_labels, y_labels))

st.header("One head in detail")
if focus is not None and hidden is None:  # (it names the head that links the words, maybe the mystery one)
    c = vc.coref_parts(a.prepared.tokens)
    st.markdown(text.focus(focus.layer, focus.head, *(md(va.word_of(a.src_labels[j])) for j in (c.referent, c.other,
                c.adjective)), focus.weight, focus.other))
head = pick("Head", range(H), KEYS[1], format_func=lambda h: f"head {h}" + (" (off)" if h in off else ""))
if mystery == (module, head):
    mystery_box(head)
else:
    figure(weights[head], x_labels, y_labels, "weights", title=f"{module}, head {head}: attention weights",
           shape=f"[{len(y_labels)}, {len(x_labels)}]", key=f"{P}detail", x_title="key", y_title="query",
           note=lambda: va.matrix_notice(weights[head], y_labels, x_labels), content=(*content, module, head))

section("One word, one head or several", text.ONE_WORD)
it = vh.find_word(a.prepared.tokens, "it") if stack == "enc" else None
word = pick("Word (query)", range(len(y_labels)), KEYS[2], default=it or 0, format_func=lambda i: y_labels[i])
with fold("Show this word's weights in every head", f"{P}fold_word") as shown:
    if shown and hidden is not None:
        st.caption("Hidden while this layer has a mystery head: your teacher reveals it.")
    elif shown:
        rows = vh.word_heads(weights, word)  # [H, Tk]
        chart(vh.heads_bars_figure(rows, x_labels, (1, 2, 0) if H > 2 else (1, 0), off=off), key=f"{P}bars",
              config=NO_BAR)
        figure(rows, x_labels, [f"head {h}" for h in range(H)], "weights",
               title=f"where {md(y_labels[word])} looks, per head", shape=f"[{H}, {len(x_labels)}]",
               key=f"{P}word_heads", x_title="key", y_title="head",
               note=vh.word_heads_notice(rows, x_labels, y_labels[word]))

st.header("Concatenate the heads, multiply by W_O")
T = len(y_labels)
st.latex(text.concat_latex(H, T, d_k, D))
with fold("Show Concat(Z_1 … Z_H) and Concat · W_O", f"{P}fold_concat") as shown:
    if shown:
        concat, out = a.trace[f"{module}.concat"][0], a.trace[f"{module}.out"][0]
        st.markdown(f"**Concat(Z_1 … Z_{H})** · shape `[{T}, {D}]` — heads side by side, borders marked"
                    + (f"; heads {', '.join(map(str, off))} are off (all zeros)" if off else ""))
        chart(block_figure(concat, y_labels, H, off=off), key=f"{P}concat", config=NO_BAR)
        notice(vh.concat_notice(concat, H, off))
        st.markdown(f"**Concat · W_O** · shape `[{T}, {D}]` — every output dimension mixes all heads")
        chart(block_figure(out, y_labels, 1), key=f"{P}out", config=NO_BAR)
        notice(vh.out_notice(concat, out, y_labels))
        exact_numbers("Exact numbers: concat and output", f"{P}concat_numbers",
                      [(concat, dims(D), y_labels), (out, dims(D), y_labels)])

section("Switch heads off", text.SWITCH_OFF)
if not iv.heads_off:
    st.info(text.ALL_ON)
else:
    st.warning("Switched off: " + "; ".join(iv.describe()))
with fold("Show the translation and the probabilities before and after", f"{P}fold_off") as shown:
    if shown:
        a0 = analysis(iv=Interventions())
        c1, c2 = st.columns(2)
        with c1:
            section("Before: the unmodified model", f"**Translation:** {md(a0.translation) or '*(empty)*'}", level=3)
            small_table(vh.greedy_probs(a0), hide_index=True)
        with c2:
            section("After: with your interventions", f"**Translation:** {md(a.translation) or '*(empty)*'}", level=3)
            small_table(vh.greedy_probs(a), hide_index=True)
        st.caption(text.GREEDY_CAPTION)

        tf_before = teacher_forced(a0.translation, iv=Interventions())
        tf_after = teacher_forced(a0.translation)
        st.subheader("The same output tokens, scored by both")
        small_table(vh.compare_probs(tf_before.trace, tf_after.trace, tf_before.gold, tf_before.gold_labels),
                    hide_index=True)
        st.subheader(f"The attention output of {module}, before and after")
        out_labels = tf_before.in_labels if stack == "dec" else a.src_labels
        c1, c2 = st.columns(2)
        with c1:
            small_table(vh.output_change(tf_before.trace, tf_after.trace, module, out_labels), hide_index=True)
        with c2:
            st.markdown("‖z‖ of each head (after): a head that is off is 0 everywhere")
            small_table(vh.head_z_norms(tf_after.trace, module, out_labels))

section("Keep one head: is one way to interact enough?", text.ONE_HEAD)
st.button("Use “thinking machines” on this page", on_click=_set_sentence, args=("thinking machines",),
          key=f"{P}load_tm")
with fold("Run it: every layer with all its heads but one switched off, one head at a time", f"{P}fold_one") as shown:
    if shown:
        show_one_head_left(st.session_state["sentence"], module, f"{P}one_")
        st.caption(text.ONE_HEAD_CAPTION)

next_link(__file__)
