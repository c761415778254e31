"""Guided lesson: one sentence from its words to its translation, one step at a time (Back / Next)."""

from __future__ import annotations

import urllib.parse

import streamlit as st

import explain.lesson
import viz.lesson
from pages.content.lesson import BRIDGES, INTRO, INTRO_LED, INTRO_OWN, SWITCHED, SWITCHED_CLASS, TEXT
from ui import lesson as state
from ui import shell
from ui.classroom import plans
from ui.classroom.session import is_teacher
from ui.models import analysis, content_key, current_model, lesson_focus
from ui.page_list import by_name
from ui.study import check
from ui.style import presenter
from ui.tracing import story
from ui.widgets import chart, md, notice, once, page_link

shell.enter(__file__)  # first: re-enter through app.py if Streamlit ran this page bare

MORE = {"why": ("before", "why_attention"), "loss": ("training",)}  # linked besides the step's "In depth" page

state.init_lesson()
k, n = state.step(), explain.lesson.N_STEPS
# Presenter mode puts the projector first: the step and its figure on the first screen, the prose after them, no
# title, no sentence picker (the sidebar has the sentence). In a class's plan the plan's Next moves the class. A student
# whose teacher leads gets no sentence picker and no Back / Next: the teacher moves them (`plans.led_lesson_bar`).
present, plan_leads, led = presenter(), plans.leads_the_lesson(), plans.led()
if not present:
    st.title("Guided lesson")
    if k == 1:
        st.markdown(INTRO + (INTRO_LED if led else INTRO_OWN))
a = analysis()  # the app's sentence (the sidebar's, which the lesson follows), model and interventions
if not present and not led:
    with st.expander(
        f"Sentence: **{md(state.read(a.prepared)) or '(none)'}**: choose another, or type your own", expanded=k == 1
    ):
        c1, c2 = st.columns([3, 2])
        c1.radio(
            "Sentence", [*explain.lesson.SENTENCES, state.OWN], key=state.CHOICE, on_change=state.chose, horizontal=True
        )
        c2.text_input(
            "Your own sentence",
            key=state.OWN_TEXT,
            on_change=state.typed,
            placeholder="e.g. the cat is big",
            help="English words from the toy set. Press Enter to follow it through the lesson.",
        )
if st.session_state.pop(state.SWITCHED, False):
    said = SWITCHED.format(sentence=md(state.sentence())) + (SWITCHED_CLASS if is_teacher() else "")
    st.toast(said, icon=":material/swap_horiz:")
if st.session_state[state.NOTICE]:
    st.warning(md(st.session_state[state.NOTICE]), icon=":material/link_off:")

if a.prepared.empty:
    st.info("Choose a sentence above, or type one, to follow it through the model.")
    state.write_url()
    st.stop()

bundle = current_model().bundle
step = explain.lesson.STEPS[k - 1]


sizes = explain.lesson.sizes(bundle.config)
ctx = viz.lesson.context(
    a,
    bundle.tgt_vocab.itos,
    len(bundle.src_vocab),
    model=bundle.model,
    meta=bundle.meta,
    decide=story,
    hidden=plans.hidden_head(),
    f=lesson_focus(a),
)


def prose() -> None:
    st.markdown(TEXT[step.key].format(**sizes))
    if step.key in BRIDGES:
        st.info(
            "**If you know the Illustrated Transformer:** " + BRIDGES[step.key].format(**sizes),
            icon=":material/compare_arrows:",
        )


def step_view() -> None:
    """The step's figure, what to notice in it, and its numbers: drawn once per content (a class of thirty follows
    the same step on the same sentence), a function of the step, the model (its key names its weights and its
    record) and the analysis."""
    view = viz.lesson.view(step.key, ctx)
    if view.warning:
        st.warning(md(view.warning), icon=":material/warning:")
    chart(view.figure, key=f"lesson_fig_{step.key}", config=viz.lesson.CONFIG)
    notice(view.notice)
    if view.textbook:
        st.caption(":material/menu_book: " + md(view.textbook))
    with st.expander("The exact numbers"):
        st.dataframe(view.table)


words = len(a.prepared.tokens)


def figure_once() -> None:
    """The step's figure, unless a study's predict-before-reveal holds it back until the prediction."""
    if check.predicted_first(step.key, k, a.prepared.text, words):
        once("lesson.step", (step.key, *content_key(a), ctx.hidden), step_view)


if present:  # the step and its figure first
    st.markdown(f"### {k}. {step.title} :small[· step {k} of {n}]")
    figure_once()
    prose()
else:
    st.progress(k / n, text=f"Step {k} of {n}")
    if not led:
        state.navigation("top", k, plan_leads)
    st.header(f"{k}. {step.title}")
    prose()
    figure_once()
check.panel(step.key, k, a.prepared.text, words)  # "Check yourself" at the end of each part of the lesson

if led:
    plans.led_lesson_bar()
else:
    state.navigation("bottom", k, plan_leads)
depth = by_name(step.page)
f = ctx.f
state.seed_depth(
    state.depth_state(
        depth.name, f.layer, f.head, f.word, f.row, explain.lesson.n_layers(a, "dec") - 1, a.prepared.text
    )
)  # the page opens on what this step shows
for linked in (name for name in MORE.get(step.key, ()) if name != depth.name):  # In depth links it already
    page_link(
        by_name(linked).file,
        f"{by_name(linked).title}: {by_name(linked).summary[0].lower()}{by_name(linked).summary[1:]}",
        icon=":material/arrow_outward:",
    )
page_link(depth.file, f"In depth: {depth.title}")
st.caption("Link to this step: `/" + "lesson?" + urllib.parse.urlencode(state.link_params()) + "`")
state.write_url()
