"""Which model a page uses, loaded once per server, and the cached analysis of a sentence.

The shipped checkpoints are loaded with `st.cache_resource`: one copy per server process, shared
read-only by every session (the model is in eval mode with gradients off, and a forward pass never
stores anything on it). A session's own model lives in its `st.session_state` only.

Heavy work is cached by `session_cache` (ui/session_cache.py; every cached result of the pages lives in ui/), keyed
on (model key, sentence, interventions, ...): the model key names the weights (the shipped file's hash, or a
per-session random id), so two sessions only ever share a cache entry when they use the very same
shipped weights.
"""

from __future__ import annotations

import functools
import uuid
from dataclasses import dataclass

import pandas as pd
import streamlit as st

from explain import experiments, lesson, mask_experiments, recompute
from explain.span import SpanCheck, span_check
from model import checkpoint, data, pipeline
from model.checkpoint import Bundle
from model.data import DATASET_PATH, data_hash, load_dataset
from model.trace import Interventions
from ui.session_cache import fresh_copy, session_cache
from ui.state import DEFAULT_SENTENCE, init_state, interventions
from viz import layers
from viz.overview import data_summary


@st.cache_resource(show_spinner="Loading the model…")
def _load_shipped(name: str) -> Bundle:
    return checkpoint.load(checkpoint.SHIPPED_MODELS[name])


_loaded: dict[str, Bundle] = {}  # (a cached function's call hashes its argument: every run asks two or three times)


def load_shipped(name: str) -> Bundle:
    """A shipped checkpoint, loaded once per process and shared read-only by every session."""
    bundle = _loaded.get(name)
    if bundle is None:
        bundle = _loaded[name] = _load_shipped(name)
    return bundle


@functools.cache
def available_shipped() -> tuple[str, ...]:
    """The shipped checkpoints present on disk ("base" first), looked for once per process (every run of every
    session asks, and each look is a file system call that lets go of the interpreter's lock)."""
    return tuple(name for name, stem in checkpoint.SHIPPED_MODELS.items() if stem.with_suffix(".safetensors").is_file())


@dataclass(frozen=True)
class Current:
    bundle: Bundle
    key: str  # cache key naming these weights
    label: str


def current_model() -> Current:
    """The model chosen in the sidebar (the shipped one when the choice is unavailable)."""
    init_state()
    ss = st.session_state
    if ss["model"] == "mine" and ss.get("my_model") is not None:
        return Current(ss["my_model"], ss["my_model_key"], "my model")
    name = ss["model"] if ss["model"] in available_shipped() else "base"
    bundle = load_shipped(name)
    return Current(bundle, shipped_key(name, bundle), name)


def shipped_key(name: str, bundle: Bundle) -> str:
    return f"{name}:{bundle.meta.get('weights_sha256', '')[:16]}"


@session_cache(max_entries=512)
def _analyse(model_key: str, text: str, iv: Interventions, _bundle: Bundle) -> pipeline.Analysis:
    return pipeline.analyse(_bundle, pipeline.prepare(_bundle, text), iv)


def warm_up() -> None:
    """What a new visitor's first page needs, made before anyone asks: the shipped model loaded and the app's default
    sentence analysed, into the server-wide caches (no session: each visitor still gets its own copy). Called by
    the web server's warm-up thread as it starts (app.py); a visitor who comes first waits on the cache's lock."""
    bundle = load_shipped("base")
    _analyse.server_wide(shipped_key("base", bundle), used_text(DEFAULT_SENTENCE), Interventions(), bundle)


def used_text(text: str) -> str:
    """The part of `text` an analysis uses: `pipeline.prepare` reads only the first `pipeline.MAX_CHARS`
    characters; one more keeps "it was cut" true. The cache key, and everything the cache keeps, holds
    this, never a whole pasted text (a 20M-character sentence would otherwise stay in the server's
    cache after its session ended)."""
    text = text if isinstance(text, str) else str(text)
    return text[: pipeline.MAX_CHARS + 1]


def analysis(iv: Interventions | None = None, text: str | None = None) -> pipeline.Analysis:
    """The current sentence through the current model under the current (or given) interventions."""
    cur = current_model()
    text = st.session_state["sentence"] if text is None else text
    return _analyse(cur.key, used_text(text), interventions() if iv is None else iv, cur.bundle)


def state_key() -> tuple[str, str, str]:
    """What `analysis()` would be of, without making it (the weights' key, the sentence, the interventions): a key
    for `ui.widgets.once` around a whole page drawn from the current analysis (the overview)."""
    return current_model().key, used_text(st.session_state["sentence"]), repr(interventions())


def content_key(a: pipeline.Analysis) -> tuple[str, str, str]:
    """What an analysis of the current model is of (its weights' key, the sentence, the interventions): a key for
    `ui.widgets.once`, the elements drawn from it are the same for every session with the same key."""
    return current_model().key, a.prepared.text, repr(a.interventions)


@session_cache()
def _teacher_forced(
    model_key: str, text: str, target: str, iv: Interventions, _bundle: Bundle
) -> pipeline.TeacherForced:
    return pipeline.teacher_forced(_bundle, pipeline.prepare(_bundle, text), target, iv)


def teacher_forced(target: str, iv: Interventions | None = None) -> pipeline.TeacherForced:
    cur = current_model()
    return _teacher_forced(
        cur.key,
        used_text(st.session_state["sentence"]),
        used_text(target),
        interventions() if iv is None else iv,
        cur.bundle,
    )


# --- The encoder-side pages (overview, positional, self-attention, encoder) ----------------------


@session_cache(max_entries=4)
def _toy_summary(mtime: float) -> tuple[pd.DataFrame, str]:  # keyed on the file's modification time
    return data_summary(load_dataset()), data_hash(DATASET_PATH)


def toy_summary() -> tuple[pd.DataFrame, str]:
    """The shipped toy data set: pairs per family and split (a table), and the file's hash. A regenerated
    file is read again."""
    return _toy_summary(DATASET_PATH.stat().st_mtime)


@session_cache(max_entries=64)
def _permutation(model_key: str, ids: tuple[int, ...], order: tuple[int, ...], pe: bool, _bundle: Bundle):
    return experiments.permutation_check(_bundle, ids, list(order), pe)


def permutation_checks(ids, order) -> tuple[experiments.PermutationCheck, experiments.PermutationCheck]:
    """The word-order experiment on source `ids` (words then EOS) with the current model: PE off, PE on."""
    cur = current_model()
    ids, order = tuple(int(i) for i in ids), tuple(order)
    return (_permutation(cur.key, ids, order, False, cur.bundle), _permutation(cur.key, ids, order, True, cur.bundle))


@session_cache()
def _variance(d_ks: tuple[int, ...]) -> list[experiments.VarianceRow]:
    return experiments.variance_by_dk(list(d_ks), n=4000, seed=0)


def variance_rows(d_ks) -> list[experiments.VarianceRow]:
    """Measured Var(q·k) for every d_k (4000 random pairs, seed 0)."""
    return _variance(tuple(d_ks))


@session_cache()
def _saturation(d_ks: tuple[int, ...]) -> list[experiments.SaturationRow]:
    return experiments.saturation_by_dk(list(d_ks), n_keys=8, trials=200, seed=0)


def saturation_rows(d_ks) -> list[experiments.SaturationRow]:
    """Softmax saturation for every d_k (200 random queries against 8 keys, seed 0)."""
    return _saturation(tuple(d_ks))


def encoder_layer(a: pipeline.Analysis, layer: int, sub: int) -> tuple[layers.Norm, layers.FFN]:
    """LayerNorm `sub` and the FFN of encoder layer `layer` on the analysed sentence, with the current
    model's γ, β and its FFN's hidden layer recomputed from W_1, b_1."""
    model = current_model().bundle.model
    norm = layers.layer_norm(a.trace, layer, sub, *experiments.layer_norm_params(model, layer, sub))
    hidden = experiments.ffn_hidden(model, layer, layers.ffn_input(a.trace, layer))
    return norm, layers.ffn(a.trace, layer, hidden)


@session_cache(max_entries=64)
def _span(model_key: str, text: str, iv: Interventions, layer: int, _bundle: Bundle, _trace) -> SpanCheck:
    return span_check(_bundle.model, _trace, layer)


def span(a: pipeline.Analysis, layer: int) -> SpanCheck:
    """`explain.span.span_check` of encoder layer `layer` on the analysed sentence: least squares over the sentence's
    vectors (2 ms), computed once per content in this process rather than by every follower of a class."""
    cur = current_model()
    return _span(cur.key, a.prepared.text, a.interventions, layer, cur.bundle, a.trace)


@session_cache(max_entries=64)
def _lesson_focus(model_key: str, text: str, iv: Interventions, _a: pipeline.Analysis) -> lesson.Focus:
    return lesson.focus(_a)


def lesson_focus(a: pipeline.Analysis) -> lesson.Focus:
    """`explain.lesson.focus` of the analysed sentence (what the guided lesson follows), once per content in this
    process: a class's followers all follow the same, and each computed it on every redraw (0.8 ms of one)."""
    return _lesson_focus(current_model().key, a.prepared.text, a.interventions, a)


@session_cache()
def _beam(model_key: str, text: str, k: int, alpha: float, iv: Interventions, _bundle: Bundle):
    return pipeline.beam(_bundle, pipeline.prepare(_bundle, text), k, alpha, iv)


def beam(k: int, alpha: float = 0.6, iv: Interventions | None = None):
    cur = current_model()
    return _beam(
        cur.key, used_text(st.session_state["sentence"]), k, alpha, interventions() if iv is None else iv, cur.bundle
    )


# --- The decoder page: the padding demo and the model trained without the look-ahead mask ---------


@session_cache(max_entries=64)
def _padding(model_key: str, text: str, partner: str, _bundle: Bundle) -> mask_experiments.PaddingDemo:
    return mask_experiments.padding_demo(_bundle, text, partner)


def padding_demo(prepared: pipeline.Prepared) -> mask_experiments.PaddingDemo:
    """The (prepared) current sentence batched with a partner of another length, padding mask on and off."""
    cur = current_model()
    partner = mask_experiments.padding_partner(len(prepared.tokens), cur.bundle)
    return _padding(cur.key, prepared.text, partner, cur.bundle)


@session_cache(max_entries=64)
def _base_translation(model_key: str, text: str, _bundle: Bundle) -> str:
    return pipeline.analyse(_bundle, pipeline.prepare(_bundle, text)).translation


def no_mask_reference(text: str, base: Bundle) -> str:
    """The reference fed to the no-mask story: the toy data set's translation of `text`, or else the base
    model's own translation."""
    text = used_text(text)
    ref = data.dataset_reference(text, base.direction)
    return ref if ref is not None else _base_translation(base.meta.get("weights_sha256", "base"), text, base)


@session_cache(max_entries=64)
def _cheating(keys: str, text: str, reference: str, _base: Bundle, _cheat: Bundle) -> mask_experiments.Cheating:
    return mask_experiments.cheating_story(_base, _cheat, text, reference)


def cheating(text: str, reference: str, base: Bundle, cheat: Bundle) -> mask_experiments.Cheating:
    """The no-mask model and the base model on `text`: teacher-forced with `reference`, and generating."""
    keys = f"{base.meta.get('weights_sha256', '')}:{cheat.meta.get('weights_sha256', '')}"
    return _cheating(keys, used_text(text), used_text(reference), base, cheat)


# --- The encoder-side pages, part 2: the projection step and the coreference focus ----------------


@session_cache(max_entries=128)
def _one_word(model_key: str, text: str, iv: Interventions, layer: int, head: int, word: int, _a, _model):

    module = f"enc.{layer}.self_attn"
    x = layers.attention_input(_a.trace, layer)[word]  # [D]
    proj = recompute.projection(_a.trace, module, head, word, x, *experiments.head_projection(_model, layer, head))
    # (its own tensors: the steps are views of this session's trace, which the server-wide entry must not share)
    return fresh_copy((recompute.word_steps(_a.trace, module, head, word), proj))


def one_word(a: pipeline.Analysis, layer: int, head: int, word: int):
    """One word's query against every key in one head of encoder layer `layer` (a `explain.recompute.WordSteps`), and
    its projection q = x·W^Q + b^Q (and k, v: an `explain.recompute.Projection`), from the current model's weights and
    the analysed sentence's trace: once per content in this process (a class's followers each read seven of the
    trace's tensors and multiplied the weights on every redraw)."""
    cur = current_model()
    return _one_word(cur.key, a.prepared.text, a.interventions, layer, head, word, a, cur.bundle.model)


def coref_defaults(a: pipeline.Analysis, keys: tuple[str, str, str], n_layers: int):
    """On the coreference sentence, point the (layer, head, word) pickers stored under `keys` at the head where
    "it" gives the deciding noun the largest weight (chosen by the data), once per sentence: a first visit or
    a new sentence moves them there, the reader's own choices stay until the sentence changes. Returns the
    `viz.coref.CorefFocus`, or None for any other sentence."""
    from viz import coref as vc

    c = vc.coref_parts(a.prepared.tokens)
    if c is None:
        return None
    focus = vc.coref_focus(a.trace, n_layers, c)
    ss = st.session_state
    marker = f"{keys[0]}_focus_for"
    if ss.get(marker) != a.prepared.text:
        first = marker not in ss
        ss[marker] = a.prepared.text
        for k, v in zip(keys, (focus.layer, focus.head, c.it), strict=True):
            if not first or k not in ss:  # a first visit keeps choices preset by a link or a test
                ss[k] = v
    return focus


@session_cache(max_entries=32)
def _decision(model_key: str, text: str, iv: Interventions, _bundle: Bundle):
    from explain.coref import decision

    return decision(_bundle, text, iv)


def coref_decision(text: str, iv: Interventions | None = None):
    """Where the current model decides il / elle in the coreference sentence `text` (a `explain.coref.Decision`, or
    None for another sentence): the pronoun row's cross-attention and each decoder layer switched off."""
    cur = current_model()
    return _decision(cur.key, used_text(text), interventions() if iv is None else iv, cur.bundle)


# -- "My model": a model handed to this session (a finished run's, an upload, the teacher's shared one) -------------
ADOPTED_KEY = "training_adopted"  # id of the training job whose model became "my model"
SWITCHED_KEY = "training_switched"  # whether the sidebar's choice could be set to "mine" at that moment


def use_model(state, bundle: Bundle, key: str | None = None, select: bool = True) -> None:
    """Make `bundle` this session's "my model" (`state` is st.session_state or any mutable mapping). `key` names its
    weights in every cache key (default: a new random one, for weights of this session's own); a model several
    sessions share read-only (a class's, ui/classroom/board.py) passes the same key for all of them.

    Also selects it in the sidebar (state["model"] = "mine") when Streamlit allows that at this
    moment: in a callback, a fragment run, or before the sidebar is drawn; not after the sidebar's
    radio was drawn in the same run (then state[SWITCHED_KEY] is False and the page offers a button).
    """
    state["my_model"] = bundle
    state["my_model_key"] = key or uuid.uuid4().hex  # names these weights in every cache key
    if not select:  # offered in the sidebar, not chosen (`attach`: a class would follow the teacher's choice)
        state[SWITCHED_KEY] = False
        return
    try:
        state["model"] = "mine"
        state[SWITCHED_KEY] = True
    except Exception:  # noqa: BLE001 - Streamlit refuses to change a widget drawn in this run
        state[SWITCHED_KEY] = False
