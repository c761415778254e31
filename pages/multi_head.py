"""Multi-head attention: every head of a layer, one head in detail, concat + W_O, and heads switched off."""

from __future__ import annotations

import streamlit as st

from pages.content import multi_head as text
from ui import shell
from ui.attention_steps import focus_line, show_one_head_left
from ui.classroom.plans import hidden_head, mystery_box
from ui.heads_steps import P, concat_section, heads_grid, switch_off_section, word_heads_section
from ui.models import content_key, coref_decision, coref_defaults, current_model
from ui.widgets import (
    figure,
    fold,
    keep_valid,
    md,
    next_link,
    once,
    opening,
    pick,
    projector_fold,
    section,
    small_table,
)
from viz import attention as va
from viz import heads as vh
from viz.attention import MODULES, axis_labels, module_name

shell.enter(__file__)  # first: re-enter through app.py if Streamlit ran this page bare

KEYS = (f"{P}layer", f"{P}head", f"{P}word")


def _set_sentence(sentence: str) -> None:
    st.session_state["sentence"] = sentence


a = opening("Multi-head attention", text.INTRO)
content = content_key(a)  # what the grid, the notice and the one-head figure are drawn from: the same for a class
cfg = current_model().bundle.config
iv = a.interventions
H, D, d_k = cfg.n_heads, cfg.d_model, cfg.d_k

with projector_fold("The formulas and the shapes", ":material/functions:"):
    for formula in text.FORMULAS:
        st.latex(formula)
    st.markdown(text.matrices(H, D, d_k))
    c1, c2 = st.columns([3, 2])
    with c1:
        once(
            "multi_head.shapes",
            (D, H, len(a.src_labels)),
            lambda: small_table(vh.shapes_table(D, H, len(a.src_labels))),
        )
    with c2:
        st.caption(text.SHAPES_CAPTION)

st.header("All heads of a layer")
c1, c2 = st.columns(2)
with c1:
    keep_valid(f"{P}kind", list(MODULES), next(iter(MODULES)))  # (a class's shared choice: one of these)
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
    st.caption(
        f"Outlined on every head: the row of {md(y_labels[mark])}, where the decoder writes “{md(pronoun.pronoun)}”."
    )
heads_grid(a, module, weights, (x_labels, y_labels), mark, content)

st.header("One head in detail")
if focus is not None and hidden is None:  # (it names the head that links the words, maybe the mystery one)
    focus_line(text, focus, a.prepared.tokens, a.src_labels)
head = pick("Head", range(H), KEYS[1], format_func=lambda h: f"head {h}" + (" (off)" if h in off else ""))
if mystery == (module, head):
    mystery_box(head)
else:
    figure(
        weights[head],
        x_labels,
        y_labels,
        "weights",
        title=f"{module}, head {head}: attention weights",
        key=f"{P}detail",
        x_title="key",
        y_title="query",
        note=lambda: va.matrix_notice(weights[head], y_labels, x_labels),
        content=(*content, module, head),
    )

section("One word, one head or several", text.ONE_WORD)
it = vh.find_word(a.prepared.tokens, "it") if stack == "enc" else None
# the decoder's self-attention opens on a word that sees several: the mask leaves <bos> itself only, in every head
first = min(2, len(y_labels) - 1) if module.startswith("dec.") and module.endswith("self_attn") else 0
word = pick("Word (query)", range(len(y_labels)), KEYS[2], default=it or first, format_func=lambda i: y_labels[i])
word_heads_section(weights, word, (x_labels, y_labels), off, hidden is not None)

concat_section(a, cfg, module, y_labels, off, text)
switch_off_section(a, module, stack, text)

section("Keep one head: is one way to interact enough?", text.ONE_HEAD)
st.button(
    "Use “thinking machines” on this page", on_click=_set_sentence, args=("thinking machines",), key=f"{P}load_tm"
)
with fold("Run it: every layer with all its heads but one switched off, one head at a time", f"{P}fold_one") as shown:
    if shown:
        show_one_head_left(st.session_state["sentence"], module, f"{P}one_")
        st.caption(text.ONE_HEAD_CAPTION)

next_link(__file__)
