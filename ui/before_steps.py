"""The Before the Transformer page's last section, measured: sequential steps and encoding time by sentence length,
training to the same accuracy, accuracy by length and il/elle, and the gradient over distance (the shipped
measurements of `ui.rnn.comparison`: the same for everyone). `text` is the page's prose (pages/content/before.py).
"""

from __future__ import annotations

from types import ModuleType

import streamlit as st

from model.pipeline import label_word
from ui.rnn import comparison, comparison_key
from ui.widgets import chart as labelled_chart
from ui.widgets import fold, notice, once, pick, section, small_table
from viz import rnn as vr
from viz import rnn_measured as vm

P = "before_"  # widget key prefix (the page's)


def chart(fig, key: str) -> None:
    """A figure of the page, its key prefixed."""
    labelled_chart(fig, key=f"{P}{key}", config=vr.CONFIG)


def word_slider(label: str, words: list[str], key: str) -> int:
    """A slider over the output `words` ("1: word", "2: word", ...), remembered under `key`: the index chosen."""
    return pick(label, range(len(words)), key, style="slider", format_func=lambda i: f"{i + 1}: {label_word(words[i])}")


def measured_section(text: ModuleType) -> None:
    """Section 5: the recurrent model and the Transformer measured side by side, each figure folded."""
    st.header("5 · Measured: sequential steps, speed, accuracy, long-range gradients")
    data = comparison()
    if data is None:
        st.info(text.NO_COMPARISON)
    else:
        st.markdown(text.MEASURED)
        with fold("Show the sequential steps and the encoding time, by sentence length", f"{P}fold_speed") as shown:
            if shown:
                c1, c2 = st.columns(2)
                with c1:
                    chart(vm.steps_figure(data), "m_steps")
                    notice(vm.steps_notice(data))
                with c2:
                    chart(vm.encode_time_figure(data), "m_time")
                    notice(vm.encode_time_notice(data))
        st.markdown(text.PARALLEL_NOTE)
        st.subheader("Training to the same accuracy")
        once(
            "before.training",
            comparison_key(),
            lambda: (  # the shipped measurements: the same for everyone
                small_table(vm.training_table(data), hide_index=True),
                notice(vm.training_notice(data)),
            ),
        )
        with fold("Show every recipe of the sweep, both models", f"{P}fold_sweep") as shown:
            if shown:
                small_table(vm.sweep_table(data), hide_index=True)
        st.subheader("Accuracy by sentence length, and il/elle")
        with fold("Show the accuracy by sentence length and its numbers", f"{P}fold_length") as shown:
            if shown:
                chart(vm.length_figure(data), "m_len")
                notice(vm.length_notice(data))
                small_table(vm.length_table(data), hide_index=True)
        section("The long-term dependency problem", text.GRADIENT, level=3)
        with fold("Show the gradient norm by distance t − i, both models", f"{P}fold_gradient") as shown:
            if shown:
                chart(vm.gradient_figure(data), "m_grad")
                notice(vm.gradient_notice(data))
