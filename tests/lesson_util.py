"""Shared by tests/test_lesson.py and tests/test_lesson_page.py: the lesson's sentences, the shipped model, and a
sentence's analysis, pronoun story and lesson context on it (each computed once per test process)."""

from __future__ import annotations

from functools import cache

import viz.lesson
from explain.pronoun import story as pronoun_story
from model import checkpoint, pipeline
from model.trace import Interventions

THINKING = "thinking machines"
CORE = "the animal didn't cross the street because it was too tired"
NO_IV = Interventions()


@cache
def bundle():
    return checkpoint.load(checkpoint.SHIPPED)


@cache
def analyse(text: str, iv: Interventions = NO_IV) -> pipeline.Analysis:
    return pipeline.analyse(bundle(), pipeline.prepare(bundle(), text), iv)


@cache
def decide(text: str, iv: Interventions = NO_IV):
    return pronoun_story(bundle(), text, iv)


def ctx(text: str, iv: Interventions = NO_IV) -> viz.lesson.Context:
    b = bundle()
    return viz.lesson.context(
        analyse(text, iv),
        b.tgt_vocab.itos,
        len(b.src_vocab),
        model=b.model,
        meta=b.meta,
        decide=lambda t: decide(t, iv),
    )
