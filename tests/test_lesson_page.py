"""The guided lesson's page (pages/lesson.py) through AppTest: walking every step of the offered, typed and odd
sentences, Back, Next and the picker, deep links and bad step values, the sidebar's interventions, other model
shapes, and one sentence shared with the sidebar and the pages "In depth" opens.

Every step shown is checked against a notice computed from an independent analysis of the shipped model, and
against a figure that draws the very tensors the notice describes. The notices' numbers themselves are tested in
tests/test_lesson.py.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest

import explain.lesson
import viz.lesson
from model import pipeline
from model.trace import Interventions
from tests.apptest_util import ROOT, TIMEOUT, all_text, decode, figures, heatmap_z, no_exception
from tests.lesson_util import CORE, NO_IV, THINKING, analyse, bundle, ctx
from ui.widgets import md

# --- the page, through AppTest ------------------------------------------------------------------------------


def lesson_app(page_only: bool = True, **query) -> AppTest:
    """The lesson page on a fresh session opened with `query` as its link (on its own, or through app.py)."""
    at = AppTest.from_file(str(ROOT / ("pages/lesson.py" if page_only else "app.py")), default_timeout=TIMEOUT)
    at.query_params.update(query)
    at.run()
    if not page_only:
        at.switch_page("pages/lesson.py")
        at.run()
    no_exception(at)
    return at


def shown_step(at: AppTest) -> int:
    return int(at.header[0].value.split(".", 1)[0])


def shown_notice(at: AppTest) -> str:
    [box] = [s.value for s in at.info if str(s.value).startswith("**Notice:**")]
    return box


def check_step(at: AppTest, text: str, k: int, iv: Interventions = NO_IV) -> None:
    """Step k is shown, with its title, progress, the notice computed from an independent analysis, and
    a figure that draws the very tensors the notice describes."""
    no_exception(at)
    s = explain.lesson.STEPS[k - 1]
    assert at.header[0].value == f"{k}. {s.title}"
    assert at.get("progress")[0].value == pytest.approx(100 * k / explain.lesson.N_STEPS, abs=1)  # percent
    assert f"Step {k} of {explain.lesson.N_STEPS}" in str(at.get("progress")[0].proto.text)
    assert at.button(key="lesson_back").proto.disabled == (k == 1)
    assert at.button(key="lesson_next").proto.disabled == (k == explain.lesson.N_STEPS)
    assert at.button(key="lesson_next").proto.type == "primary"
    c = ctx(text, iv)
    v = viz.lesson.view(s.key, c)
    assert shown_notice(at) == "**Notice:** " + md(v.notice)
    assert dict(at.query_params)["step"] == str(k)
    [fig] = figures(at)
    t, f = c.a.trace, c.f
    if s.key == "softmax":
        want = t["enc.0.self_attn.weights"][0, f.head, f.word].numpy()
        np.testing.assert_allclose(decode(fig["data"][0]["y"]), want, rtol=1e-6)
    if s.key == "cross":
        last = bundle().config.n_dec_layers - 1
        np.testing.assert_allclose(heatmap_z(fig), t[f"dec.{last}.cross_attn.weights"][0].mean(0).numpy(), rtol=1e-5)
    if s.key == "embedding":
        np.testing.assert_allclose(heatmap_z(fig), t["src.embed"][0].numpy(), rtol=1e-6)


def walk(at: AppTest, text: str, iv: Interventions = NO_IV) -> None:
    """From step 1 to the last with Next, checking every step."""
    assert shown_step(at) == 1
    for k in range(1, explain.lesson.N_STEPS + 1):
        check_step(at, text, k, iv)
        if k < explain.lesson.N_STEPS:
            at.button(key="lesson_next").click().run()


@pytest.mark.parametrize("text", explain.lesson.SENTENCES)
def test_walk_every_step_of_the_offered_sentences(text):
    at = lesson_app(lesson=text)
    assert at.radio(key="lesson_choice").value == text
    walk(at, text)


def typed_sentence(seed: int = 0) -> str:
    """A random sentence a student might type: words of the vocabulary, and one it lacks."""
    rng = random.Random(seed)
    words = [w for w in bundle().src_vocab.itos[4:] if w.isalpha()]
    return " ".join(rng.choice(words) for _ in range(rng.randint(3, 9))) + " zorblax"


def test_walk_a_typed_sentence():
    text = typed_sentence()
    at = lesson_app()
    at.text_input(key="lesson_own").set_value(text).run()
    assert at.radio(key="lesson_choice").value == "Type your own…"
    assert dict(at.query_params)["lesson"] == text
    assert "zorblax" in all_text(at)  # the unknown word is pointed out
    walk(at, text)


@pytest.mark.parametrize("text", ["<b>bold</b> 🙂 $x$ **no**", "go", "the cat " * 40])
def test_odd_typed_sentences_walk_without_exception(text):
    at = lesson_app(lesson=text)
    assert at.radio(key="lesson_choice").value == "Type your own…"
    for _ in range(explain.lesson.N_STEPS - 1):
        at.button(key="lesson_next").click().run()
        no_exception(at)
        if "<b>" in text:
            assert not any("<b>" in str(m.value) for m in at.markdown), "user HTML unescaped"
    assert shown_step(at) == explain.lesson.N_STEPS


def test_a_cut_sentence_is_named_as_the_model_reads_it():
    """A paste longer than the model's limit: the lesson's header names the words the model reads and how many were
    cut off, not the whole paste (which no step shows)."""
    text = " ".join(["the cat is big"] * 60)
    at = lesson_app(lesson=text)
    p = analyse(text).prepared
    assert p.truncated > 0
    label = at.expander[0].label
    assert md(f"{' '.join(p.tokens)} … ({p.truncated} more cut off)") in label
    assert len(label) < len(text) / 2
    assert lesson_app(lesson=THINKING).expander[0].label.startswith(f"Sentence: **{THINKING}**")


def test_an_empty_sentence_asks_for_one():
    at = lesson_app(lesson="")
    assert not at.header and "Choose a sentence" in all_text(at)


def test_back_next_and_the_picker():
    at = lesson_app()
    for _ in range(4):
        at.button(key="lesson_next").click().run()
    assert shown_step(at) == 5
    at.button(key="lesson_back").click().run()
    assert shown_step(at) == 4 and dict(at.query_params)["step"] == "4"
    at.selectbox(key="lesson_jump_4").set_value(17).run()  # (the picker of step 4)
    check_step(at, explain.lesson.DEFAULT_SENTENCE, 17)
    at.radio(key="lesson_choice").set_value("i am a student").run()  # another sentence: same step
    check_step(at, "i am a student", 17)
    assert dict(at.query_params) == {"lesson": "i am a student", "step": "17"}


@pytest.mark.parametrize("k", [1, 9, explain.lesson.N_STEPS])
def test_deep_link_opens_the_step(k):
    at = lesson_app(page_only=False, lesson="i am a student", step=str(k))
    check_step(at, "i am a student", k)
    assert not at.toast  # (the link's sentence: nothing moved)
    assert not [w for w in at.warning if "step" in str(w.value)]


def test_deep_link_through_the_app_keeps_the_step_across_pages():
    at = lesson_app(page_only=False, lesson=CORE, step="9")
    check_step(at, CORE, 9)
    at.switch_page("pages/overview.py")
    at.run()
    no_exception(at)
    at.switch_page("pages/lesson.py")
    at.run()
    check_step(at, CORE, 9)
    assert at.radio(key="lesson_choice").value == CORE


@pytest.mark.parametrize(
    ("raw", "k"),
    [
        ("0", 1),
        ("999", explain.lesson.N_STEPS),
        ("abc", 1),
        ("٣", 1),
        ("", 1),
        ("-2", 1),
        ("2.5", 1),
        ("1" * 200, explain.lesson.N_STEPS),
    ],
)
def test_bad_step_values_give_a_notice(raw, k):
    at = lesson_app(page_only=False, lesson=THINKING, step=raw)
    check_step(at, THINKING, k)
    assert [w for w in at.warning if "step" in str(w.value)], [w.value for w in at.warning]
    at.button(key="lesson_next" if k == 1 else "lesson_back").click().run()
    assert not [w for w in at.warning if "step" in str(w.value)]  # gone once the student moves


def test_the_sidebar_interventions_reach_the_lesson():
    heads = [f"enc.0.self_attn:{h}" for h in range(bundle().config.n_heads)]
    iv = Interventions(
        heads_off=frozenset(("enc.0.self_attn", h) for h in range(bundle().config.n_heads)),
        scale=False,
        look_ahead_mask=False,
        positional_encoding=False,
    )
    for key in ("positional", "scale", "z", "masked", "output"):
        at = lesson_app(page_only=False, lesson=THINKING, step=str(explain.lesson.step_index(key)))
        at.session_state["heads_off"] = heads
        for toggle in ("iv_scale", "iv_look_ahead", "iv_pos"):
            at.session_state[toggle] = False
        at.run()
        check_step(at, THINKING, explain.lesson.step_index(key), iv)
        assert at.warning, key


@pytest.mark.parametrize("norm_first", [False, True])
def test_other_model_shapes_never_raise(norm_first):
    """A student's own model may be smaller, deeper or pre-LN: every step still builds."""
    from model.checkpoint import Bundle
    from model.transformer import Config, Transformer

    b = bundle()
    torch.manual_seed(0)
    cfg = Config(
        src_vocab=len(b.src_vocab),
        tgt_vocab=len(b.tgt_vocab),
        d_model=16,
        n_heads=2,
        n_enc_layers=1,
        n_dec_layers=3,
        d_ff=32,
        dropout=0.0,
        max_len=12,
        norm_first=norm_first,
    )
    mine = Bundle(Transformer(cfg).eval(), b.src_vocab, b.tgt_vocab)
    a = pipeline.analyse(mine, pipeline.prepare(mine, CORE))
    c = viz.lesson.context(a, mine.tgt_vocab.itos, len(mine.src_vocab))
    for s in explain.lesson.STEPS:
        assert viz.lesson.view(s.key, c).notice
    assert (viz.lesson.view("add_norm", c).warning is not None) == norm_first


# --- one sentence, one path ------------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["qkv", "heads", "add_norm", "cross", "output"])
def test_in_depth_opens_the_page_on_the_lessons_sentence_layer_head_and_word(key):
    """Following "In depth" from a step: the page shows the lesson's sentence (the sidebar's too) and its pickers
    sit on the lesson's layer, head and word (or decoder position)."""
    at = lesson_app(page_only=False, lesson=CORE, step=str(explain.lesson.step_index(key)))
    f = explain.lesson.focus(analyse(CORE))
    page = explain.lesson.STEPS[explain.lesson.step_index(key) - 1].page
    at.switch_page(f"pages/{page}.py")
    at.run()
    no_exception(at)
    assert at.session_state["sentence"] == CORE and at.text_input(key="sentence").value == CORE
    want = {
        "self_attention": {
            "self_attention_layer": f.layer,
            "self_attention_head": f.head,
            "self_attention_word": f.word,
        },
        "multi_head": {"multi_head_layer": f.layer, "multi_head_head": f.head, "multi_head_word": f.word},
        "encoder": {"encoder_layer": f.layer, "encoder_word": f.word},
        "cross_attention": {"cross_layer": bundle().config.n_dec_layers - 1, "cross_head": -1},
        "output": {"output_pos": f.row},
    }[page]
    for widget, value in want.items():
        assert at.session_state[widget] == value, widget
    assert f.head != 0 or f.word != 0  # on "it": not the pickers' defaults, so the test can fail


def test_the_lesson_says_once_that_it_moved_the_apps_sentence():
    """A first visit without a sentence of its own moves the app from its untouched default to the lesson's: a toast
    says so (the sidebar's box changed under the reader's eyes), once."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    at.query_params["step"] = "3"  # (`/?step=3` forwards to the lesson)
    at.run()
    no_exception(at)
    assert at.session_state["sentence"] == explain.lesson.DEFAULT_SENTENCE
    said = f"The lesson follows its own sentence, “{explain.lesson.DEFAULT_SENTENCE}”: every page shows it now."
    assert [t.value for t in at.toast] == [said]
    at.run()
    assert not at.toast


def test_the_lesson_and_the_sidebar_share_one_sentence():
    at = lesson_app(page_only=False, step="3")  # no sentence in the link: the lesson's own default
    assert at.session_state["sentence"] == explain.lesson.DEFAULT_SENTENCE == at.text_input(key="sentence").value
    at.radio(key="lesson_choice").set_value("i am a student").run()  # the lesson's picker moves the sidebar
    assert at.text_input(key="sentence").value == "i am a student"
    at.text_input(key="sentence").set_value(CORE).run()  # the sidebar moves the lesson
    no_exception(at)
    assert at.radio(key="lesson_choice").value == CORE and dict(at.query_params)["lesson"] == CORE
    check_step(at, CORE, 3)


def test_root_link_with_a_lesson_opens_the_lesson():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    at.query_params.update({"lesson": "i am a student", "step": "7"})
    at.run()
    at.run()  # "/" forwards to the lesson with the same link
    no_exception(at)
    check_step(at, "i am a student", 7)
