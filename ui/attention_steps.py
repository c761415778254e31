"""One query's attention in the order the model computes it: q, k, v -> scores, ÷√d_k, softmax -> z.

Renders a `viz.attention.WordSteps` (from a trace, `word_steps`, or the textbook example,
`textbook_steps`), so any page can walk through one word of any attention module.
"""

from __future__ import annotations

import streamlit as st

from ui.widgets import matrix, md
from viz.attention import WordSteps, dims, step_table, textbook_table, z_table


def show_steps(s: WordSteps, key_labels: list[str], query_label: str, key: str, textbook: bool = False,
               off: bool = False) -> None:
    """The computation for one query word; `key` prefixes the widget keys, `off`: the head is switched off."""
    st.subheader("1 · The query, the keys and the values")
    st.markdown(f"Each word's vector is multiplied by three learned matrices: its **query** q (what this word looks "
                f"for), its **key** k (what it offers to be found by) and its **value** v (what it passes on). In "
                f"one head each has d_k = {s.d_k} numbers.")
    matrix(s.q[None], dims(s.d_k), [query_label], "activations", title=f"q of {md(query_label)}",
           shape=f"[1, {s.d_k}]", key=f"{key}q", x_title="dimension", y_title="query")
    c1, c2 = st.columns(2)
    with c1:
        matrix(s.k, dims(s.d_k), key_labels, "activations", title="k of every word", shape=f"[{len(key_labels)}, "
               f"{s.d_k}]", key=f"{key}k", x_title="dimension", y_title="key")
    with c2:
        matrix(s.v, dims(s.d_k), key_labels, "activations", title="v of every word", shape=f"[{len(key_labels)}, "
               f"{s.d_k}]", key=f"{key}v", x_title="dimension", y_title="value")

    st.subheader(f"2 · Score, divide by √d_k = {s.sqrt_dk:.4g}, softmax")
    st.latex(rf"\text{{score}}_j = q \cdot k_j, \qquad \frac{{q\cdot k_j}}{{\sqrt{{d_k}}}}, \quad "
             rf"\sqrt{{d_k}} = \sqrt{{{s.d_k}}} = {s.sqrt_dk:.4g}, \qquad "
             rf"a_j = \frac{{\exp(q\cdot k_j/\sqrt{{d_k}})}}{{\sum_{{j'}} \exp(q\cdot k_{{j'}}/\sqrt{{d_k}})}}")
    if not s.scale:
        st.warning("Scaling is switched off in the sidebar: the model does not divide by √d_k, so the ÷√d_k "
                   "column below equals the raw score q·k.")
    if textbook:
        st.dataframe(textbook_table(s, key_labels))
        st.markdown(f"**Textbook numbers:** q1·k1 = {float(s.scores[0]):g}, q1·k2 = {float(s.scores[1]):g} → "
                    f"÷ √{s.d_k} = {s.sqrt_dk:g} → {float(s.scaled[0]):g}, {float(s.scaled[1]):g} → softmax → "
                    f"{float(s.weights[0]):.2f}, {float(s.weights[1]):.2f}")
    st.dataframe(step_table(s, key_labels), hide_index=True)
    st.caption("The weights are all ≥ 0 and add up to 1: a weighted average, not a sum that can grow.")

    st.subheader("3 · Weight each value, add them up: z")
    matrix(s.weighted, dims(s.d_k), key_labels, "activations", title="weight × v, one row per word",
           shape=f"[{len(key_labels)}, {s.d_k}]", key=f"{key}wv", x_title="dimension", y_title="word")
    st.latex(r"z = \sum_j a_j\, v_j")
    st.dataframe(z_table(s))
    if off:
        st.info("This head is switched off in the sidebar: the model sets its z to 0 before concatenating the "
                "heads (the weights above are still what it would have used).")
