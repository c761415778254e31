"""The guided lesson's session state, its link (``?lesson=<sentence>&step=N``) and its buttons' callbacks.

Session-state keys (the canonical values are plain keys, not widget keys: Streamlit forgets a
widget's value when another page is shown, the lesson should not):

==================  ==========================================================  =============
key                 meaning                                                     URL parameter
==================  ==========================================================  =============
lesson_sentence     the sentence the lesson follows (its own, not the sidebar's)  lesson
lesson_step         the step shown, 1-based                                      step
lesson_notice       what was wrong with the link's step, shown until a move      -
lesson_choice       widget: one of the offered sentences, or OWN                 -
lesson_own          widget: the student's own sentence                           -
lesson_jump         widget: the step picker                                      -
==================  ==========================================================  =============

The link is read once per session, on the lesson's first run; after that the page writes the
current sentence and step back into the URL, so the address bar always shares this step.
`ui.state.sync_query_params` (the sidebar's URL sync) leaves these two parameters alone.
"""

from __future__ import annotations

import streamlit as st

from model.lesson import DEFAULT_SENTENCE, N_STEPS, SENTENCES, parse_step
from ui.state import MAX_URL_SENTENCE

SENTENCE, STEP, NOTICE = "lesson_sentence", "lesson_step", "lesson_notice"
CHOICE, OWN_TEXT, JUMP = "lesson_choice", "lesson_own", "lesson_jump"
READY = "_lesson_ready"
OWN = "Type your own…"
MAX_CHARS = 10_000  # as the sidebar's sentence (the model cuts to its own limit anyway)


def init_lesson() -> None:
    """Give every key a value: from the link on the lesson's first run in this session, else as they were."""
    ss = st.session_state
    if not ss.get(READY):
        qp = st.query_params
        ss[SENTENCE] = qp.get("lesson", DEFAULT_SENTENCE)[:MAX_CHARS]
        ss[STEP], ss[NOTICE] = parse_step(qp.get("step"))
        ss[READY] = True
    ss.setdefault(SENTENCE, DEFAULT_SENTENCE)
    if not isinstance(ss.get(STEP), int) or not 1 <= ss[STEP] <= N_STEPS:
        ss[STEP] = 1
    ss.setdefault(NOTICE, None)
    # The widgets follow the canonical values whenever they were forgotten (another page was shown).
    if CHOICE not in ss or (ss[CHOICE] != OWN and ss[CHOICE] != ss[SENTENCE]):
        ss[CHOICE] = ss[SENTENCE] if ss[SENTENCE] in SENTENCES else OWN
    if OWN_TEXT not in ss:
        ss[OWN_TEXT] = "" if ss[SENTENCE] in SENTENCES else ss[SENTENCE]
    ss[JUMP] = ss[STEP]  # before the picker is drawn: it shows the current step


def sentence() -> str:
    return st.session_state[SENTENCE]


def step() -> int:
    return st.session_state[STEP]


def go(n: int) -> None:
    """Show step `n` (clamped to 1..N_STEPS); callback of Back, Next and the step picker."""
    st.session_state[STEP] = max(1, min(N_STEPS, int(n)))
    st.session_state[NOTICE] = None


def back() -> None:
    go(step() - 1)


def forward() -> None:
    go(step() + 1)


def jumped() -> None:
    go(st.session_state[JUMP])


def chose() -> None:
    """The sentence radio changed: an offered sentence, or the student's own text."""
    ss = st.session_state
    ss[SENTENCE] = ss[OWN_TEXT] if ss[CHOICE] == OWN else ss[CHOICE]
    ss[NOTICE] = None


def typed() -> None:
    ss = st.session_state
    ss[SENTENCE] = str(ss[OWN_TEXT])[:MAX_CHARS]
    ss[CHOICE] = OWN


def link_params() -> dict[str, str]:
    """The URL parameters of the current sentence and step (a very long sentence stays out of the link)."""
    out = {"step": str(step())}
    if len(sentence()) <= MAX_URL_SENTENCE:
        out = {"lesson": sentence(), **out}
    return out


def write_url() -> None:
    """Mirror the sentence and step in the address bar (the other parameters stay as the sidebar wrote them)."""
    want = link_params()
    qp = st.query_params
    if "lesson" not in want and "lesson" in qp:
        del qp["lesson"]
    for key, value in want.items():
        if qp.get(key) != value:
            qp[key] = value
