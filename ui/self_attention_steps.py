"""The Self-attention page's later sections: all words at once (the matrix form, the four matrices of one head and
the column form C = Attn(X, X)) and attention without learned weights, softmax(XXᵀ). `text` is the page's prose
(pages/content/self_attention.py); widget keys start with the page's prefix `P`.
"""

from __future__ import annotations

import math
from types import ModuleType

import streamlit as st

from explain import recompute
from explain.experiments import plain_self_attention
from model.pipeline import Analysis
from ui.widgets import figure, fold, notice, once, section
from viz import attention as va
from viz.layers import layer_output

P = "self_attention_"  # widget key prefix (the page's)


def square(values, labels: list[str], kind: str, title: str, key: str, note: str) -> None:
    """A [T, T] matrix over the sentence's `labels`: one row per query, one column per key."""
    figure(
        values,
        labels,
        labels,
        kind,
        title=title,
        key=f"{P}{key}",
        note=note,
        x_title="key",
        y_title="query",
    )


def matrix_section(
    a: Analysis, d_k: int, layer: int, head: int, word: int, below_textbook: bool, mode: str, text: ModuleType
) -> None:
    """The matrix form's prose (drawn once per content), then, folded, QKᵀ, ÷√d_k, softmax and Z of encoder
    `layer`'s `head`, and the column form with `word` as the followed query. `below_textbook`: the walk above
    showed the textbook example, so a line says these numbers are the trained model's."""
    iv, labels, t = a.interventions, a.src_labels, a.trace
    module, T = f"enc.{layer}.self_attn", len(labels)

    def matrix_form() -> None:  # (prose and formulas: drawn once per content, as the figures)
        st.header("All words at once: the matrix form")
        if below_textbook:
            st.info(text.below_trained(layer, head), icon=":material/swap_horiz:")
        st.markdown(text.MATRIX_FORM)
        st.latex(text.MATRIX_LATEX_QKV)
        st.latex(text.MATRIX_LATEX)
        st.latex(text.shapes_latex(T, d_k))
        if not iv.scale:
            st.warning(text.UNSCALED)

    once("self_attention.matrix_form", (mode, layer, head, T, d_k, iv.scale), matrix_form)
    sc, w = t[f"{module}.scores"][0, head], t[f"{module}.weights"][0, head]
    with fold(
        "Show the four matrices of this head (QKᵀ, ÷√d_k, softmax, Z) and the column form C = Attn(X, X)",
        f"{P}fold_matrix",
    ) as shown:
        if not shown:
            return
        c1, c2 = st.columns(2)
        with c1:
            square(
                sc,
                labels,
                "scores",
                f"QKᵀ (scores), layer {layer}, head {head}",
                "m_scores",
                va.scores_notice(sc, labels),
            )
        with c2:
            scaled = t[f"{module}.scaled"][0, head]
            square(
                scaled,
                labels,
                "scores",
                "QKᵀ / √d_k (scaled)",
                "m_scaled",
                va.scores_notice(sc, labels, scaled, math.sqrt(d_k) if iv.scale else 1.0),
            )
        c1, c2 = st.columns(2)
        with c1:
            square(w, labels, "weights", "softmax: attention weights", "m_weights", va.matrix_notice(w, labels, labels))
        with c2:
            figure(
                t[f"{module}.z"][0, head],
                va.dims(d_k),
                labels,
                "activations",
                title="Z = weights · V",
                key=f"{P}m_z",
                x_title="dimension",
                y_title="word",
                note=va.z_matrix_notice(t[f"{module}.z"][0, head], w, t[f"{module}.v"][0, head], labels),
            )
        st.markdown(text.COLUMN_FORM)
        st.latex(text.COLUMN_LATEX)
        cf = recompute.column_form(t, module, head, iv.scale)
        c1, c2 = st.columns(2)
        with c1:
            figure(
                cf.alpha,
                labels,
                labels,
                "weights",
                title="α_:j, one column per query word j",
                key=f"{P}col_alpha",
                x_title="query word j",
                y_title="key word i",
                numbers=False,
            )
        with c2:
            figure(
                cf.C,
                labels,
                va.dims(d_k),
                "activations",
                title="C = [c_:1 … c_:T], c_:j = V·α_:j",
                key=f"{P}col_C",
                x_title="word j",
                y_title="dimension",
                numbers=False,
            )
        notice(va.column_notice(cf, labels, word, (module, head) in iv.heads_off))


def plain_section(a: Analysis, layer: int, head: int, text: ModuleType) -> None:
    """Attention without learned weights: softmax(XXᵀ) of the input of encoder `layer`, folded, beside the learned
    weights of its `head`."""
    once(
        "self_attention.plain",
        (),
        lambda: (
            section("Attention without learned weights", text.PLAIN),
            st.latex(text.PLAIN_LATEX),
            st.markdown(text.PLAIN_AFTER),
        ),
    )
    with fold("Show softmax(XXᵀ) beside the learned weights of this head", f"{P}fold_plain") as shown:
        if not shown:
            return
        labels, t = a.src_labels, a.trace
        w = t[f"enc.{layer}.self_attn.weights"][0, head]
        plain = plain_self_attention(layer_output(t, layer - 1))  # X entering this layer (layer 0: embedding + PE)
        c1, c2 = st.columns(2)
        with c1:
            square(
                plain.weights,
                labels,
                "weights",
                f"softmax(XXᵀ), X = input of layer {layer}",
                "plain",
                va.matrix_notice(plain.weights, labels, labels),
            )
        with c2:
            square(
                w,
                labels,
                "weights",
                f"learned: layer {layer}, head {head}",
                "learned",
                va.plain_notice(plain.weights, w, labels),
            )
