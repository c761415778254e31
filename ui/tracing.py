"""Causal tracing in the app: the cached computations (explain/tracing.py, explain/pronoun.py) and their drawing.

Each tracing is computed once per (model, pair, followed position, switches) in this process and every session
gets its own copy (`ui.session_cache`); the figures and notices are drawn once per content
(`ui.widgets.once`). A lesson plan's mystery head (`ui.classroom.plans.hidden_head`) is never drawn: its row of
the heads' grid is blank, its own tracing is a mystery box, and no notice names its number.
"""

from __future__ import annotations

import streamlit as st

from explain import pronoun, tracing
from model.checkpoint import Bundle
from model.trace import Interventions
from ui.classroom.plans import hidden_head, mystery_box
from ui.models import current_model, used_text
from ui.session_cache import session_cache
from ui.state import interventions
from ui.widgets import chart, fold, notice, once, pick, small_table
from viz import pronoun as vp
from viz import tracing as vt
from viz.heatmap import table


@session_cache(max_entries=64)
def _pair(model_key: str, clean: str, corrupt: str, iv: Interventions, _bundle: Bundle) -> tracing.Pair | str:
    try:
        return tracing.pair(_bundle, clean, corrupt, iv=iv)
    except tracing.NotAPair as e:
        return str(e)


@session_cache(max_entries=64)
def _at(
    model_key: str, clean: str, corrupt: str, iv: Interventions, position: int, _bundle: Bundle, _p: tracing.Pair
) -> tracing.Pair:
    return tracing.at_position(_bundle, _p, position)


@session_cache(max_entries=32)
def _tracing(
    model_key: str, clean: str, corrupt: str, iv: Interventions, position: int, _bundle: Bundle, _p: tracing.Pair
) -> tracing.Tracing:
    return tracing.trace_pair(_bundle, _p)


@session_cache(max_entries=64)
def _head(
    model_key: str,
    clean: str,
    corrupt: str,
    iv: Interventions,
    position: int,
    module: str,
    head: int,
    _bundle: Bundle,
    _p: tracing.Pair,
) -> tracing.HeadTracing:
    return tracing.trace_head(_bundle, _p, module, head)


@session_cache(max_entries=32)
def _story(model_key: str, text: str, iv: Interventions, _bundle: Bundle) -> pronoun.Story | None:
    return pronoun.story(_bundle, text, iv)


def pair(clean: str, corrupt: str, position: int | None = None) -> tracing.Pair | str:
    """The two sentences under the current model and switches, following the word at `position` of the first
    translation (None: the first word where the translations differ), or the reason they cannot be traced. The
    translations are computed once per pair; another position costs two traced passes."""
    cur = current_model()
    p = _pair(cur.key, used_text(clean), used_text(corrupt), interventions(), cur.bundle)
    if isinstance(p, str) or position is None or position == p.position:
        return p
    return _at(cur.key, p.clean.text, p.corrupt.text, p.interventions, position, cur.bundle, p)


def story(text: str) -> pronoun.Story | None:
    """The pronoun story of a coreference sentence (None for another sentence)."""
    cur = current_model()
    return _story(cur.key, used_text(text), interventions(), cur.bundle)


def _args(p: tracing.Pair) -> tuple:
    """What names a pair's computations in the caches (the pair itself rides along, unhashed)."""
    return p.clean.text, p.corrupt.text, p.interventions, p.position


def _key(p: tracing.Pair) -> tuple:
    return current_model().key, p.clean.text, p.corrupt.text, p.position, repr(p.interventions)


def show_tracing(p: tracing.Pair, prose) -> None:
    """The four grids of the pair, each with its notice and its exact numbers."""
    cur = current_model()
    t = _tracing(cur.key, *_args(p), cur.bundle, p)
    hidden = hidden_head()
    blank = vt.hidden_rows(t.heads, hidden)
    for key, g, text, note in (
        ("encoder", t.encoder, prose.ENCODER, lambda: vt.encoder_notice(t)),
        ("heads", t.heads, prose.HEADS, lambda: vt.heads_notice(t, blank)),
        ("decoder", t.decoder, prose.DECODER, lambda: vt.decoder_notice(t)),
        ("mask", t.mask, prose.MASK, lambda: vt.mask_notice(t)),
    ):
        st.subheader(g.title[0].upper() + g.title[1:])
        st.markdown(text)
        rows = blank if key == "heads" else set()

        def draw(g=g, note=note, rows=rows, key=key) -> None:
            chart(vt.grid_figure(g, p.word, rows), key=f"tracing_{key}")
            notice(note())

        once(f"tracing.{key}", (*_key(p), hidden), draw)
        with fold(f"Exact numbers: {g.title}", f"tracing_{key}_numbers") as shown:
            if shown:
                keep = [r for r in range(len(g.rows)) if r not in rows]
                st.dataframe(table([g.share[r] for r in keep], list(g.columns), [g.rows[r] for r in keep]))


def show_head(p: tracing.Pair, modules: list[str], n_heads: int) -> None:
    """One head, part by part, picked by the reader: the pickers open on the encoder-decoder head that brings the
    most back (`viz.tracing.best_head`), again whenever the pair or the followed word changes; a mystery box for a
    plan's mystery head."""
    cur = current_model()
    t = _tracing(cur.key, *_args(p), cur.bundle, p)
    ss, keys = st.session_state, ("tracing_module", "tracing_head")
    if ss.get("tracing_module_for") != _key(p):
        first = "tracing_module_for" not in ss
        ss["tracing_module_for"] = _key(p)
        if not (first and keys[0] in ss):  # a first visit keeps a choice preset by a link or a test
            ss[keys[0]], ss[keys[1]] = vt.best_head(t, hidden_head())
    c1, c2 = st.columns(2)
    with c1:
        module = pick("Attention", modules, keys[0], "dec.0.cross_attn")
    with c2:
        head = pick("Head", range(n_heads), keys[1], 0, format_func=lambda h: f"head {h}")
    if hidden_head() == (module, head):
        mystery_box(head, height=160)
        return
    h = _head(cur.key, *_args(p), module, head, cur.bundle, p)

    def draw() -> None:
        for g, key in ((h.query, "query"), (h.key, "key")):
            chart(vt.grid_figure(g, p.word, height=190 + 30 * len(g.rows), title=g.title), key=f"tracing_head_{key}")
        notice(vt.head_notice(h))

    once("tracing.head", (*_key(p), module, head), draw)


def show_story(text: str, key: str) -> None:
    """The coreference pair traced at the pronoun: bars and notice (lesson step 19's figure, on a page)."""
    s = story(text)
    if s is None:
        st.caption("Not a coreference sentence: nothing to trace here.")
        return
    hidden = hidden_head()

    def draw() -> None:
        if s.tracing is not None:
            chart(vp.story_figure(s, hidden), key=f"{key}story")
        notice(vp.story_notice(s, hidden))

    once("tracing.story", (current_model().key, s.text, repr(interventions()), hidden, key), draw)
    with fold("Exact numbers of the bars", f"{key}story_numbers") as shown:
        if shown:
            small_table(vp.story_table(s, hidden), hide_index=True)


def follow(p: tracing.Pair, label: str) -> int:
    """The output word to follow: a picker over the first translation's words, back on the first word where the
    translations differ whenever the pair changes."""
    ss, key = st.session_state, "tracing_position"
    if ss.get(f"{key}_for") != (p.clean.text, p.corrupt.text):
        ss[f"{key}_for"] = (p.clean.text, p.corrupt.text)
        ss[key] = p.position
    return pick(
        label,
        range(len(p.clean_words)),
        key,
        p.position,
        format_func=lambda i: f"{i}: {p.clean_words[i]}" + (" (the first difference)" if i == p.position else ""),
    )
