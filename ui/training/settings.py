"""The Train your own page's settings: the model's sizes, the recipe and what to watch, in three columns of
widgets whose keys (`training_*`) `ui.training.session` reads. `text` is the page's prose
(pages/content/training.py)."""

from __future__ import annotations

from types import ModuleType

import streamlit as st

from model.limits import BOUNDS as b
from model.probes import MAX_PROBES
from ui.training import session
from ui.training.panels import DIRECTIONS


def settings_columns(busy: bool, src_lang: str, text: ModuleType) -> None:
    """Model, Recipe and Watching side by side, disabled while this session's run is `busy`; the probes are
    sentences in `src_lang`."""
    c1, c2, c3 = st.columns(3)
    with c1:
        st.subheader("Model")
        st.selectbox("Direction", list(DIRECTIONS), key="training_direction", format_func=DIRECTIONS.get, disabled=busy)
        st.number_input(
            "Layers (encoder and decoder each)",
            *map(int, b["n_layers"]),
            step=1,
            key="training_n_layers",
            disabled=busy,
            help="The paper uses 6 + 6.",
        )
        st.number_input(
            "Heads",
            *map(int, b["n_heads"]),
            step=1,
            key="training_n_heads",
            disabled=busy,
            help="d_model must be divisible by the number of heads: d_k = d_model / heads.",
        )
        st.number_input(
            "d_model",
            *map(int, b["d_model"]),
            step=2,
            key="training_d_model",
            disabled=busy,
            help="Width of every token vector (the paper: 512).",
        )
        st.number_input(
            "d_ff",
            *map(int, b["d_ff"]),
            step=8,
            key="training_d_ff",
            disabled=busy,
            help="Hidden width of the feed-forward net (the paper: 2048).",
        )
        st.slider("Dropout", *b["dropout"], step=0.05, key="training_dropout", disabled=busy)
    with c2:
        st.subheader("Recipe")
        st.number_input(
            "Batch size (sentence pairs)", *map(int, b["batch_size"]), step=8, key="training_batch_size", disabled=busy
        )
        st.number_input("Steps", *map(int, b["steps"]), step=50, key="training_steps", disabled=busy)
        st.number_input(
            "Warm-up steps",
            *map(int, b["warmup"]),
            step=10,
            key="training_warmup",
            disabled=busy,
            help="The paper: 4000 of 100k steps.",
        )
        st.number_input(
            "Learning-rate scale",
            float(b["lr_scale"][0]),
            float(b["lr_scale"][1]),
            step=0.5,
            format="%g",
            key="training_lr_scale",
            disabled=busy,
            help="Factor in front of the paper's formula. 1 is the paper; try 1e6 to see training diverge.",
        )
        st.slider("Label smoothing", *b["label_smoothing"], step=0.05, key="training_label_smoothing", disabled=busy)
        st.number_input("Seed", *map(int, b["seed"]), step=1, key="training_seed", disabled=busy)
        st.caption(text.RECIPE)
    with c3:
        st.subheader("Watching")
        st.number_input(
            "Evaluate on held-out pairs every … steps (0: only at the end)",
            *map(int, b["eval_every"]),
            step=10,
            key="training_eval_every",
            disabled=busy,
        )
        st.number_input(
            "Record the probes' attention every … steps", 1, 5000, step=5, key="training_probe_every", disabled=busy
        )
        session.follow_default_probes(session.chosen_data()[0])
        st.text_area(
            f"Probe sentences ({src_lang}, one per line, at most {MAX_PROBES})",
            key="training_probes",
            height=100,
            disabled=busy,
        )
        st.toggle("Train without the look-ahead mask", key="training_no_mask", disabled=busy, help=text.NO_MASK_HELP)
