"""The guided lesson's session state, its link (``?lesson=<sentence>&step=N``) and its buttons' callbacks.

One sentence everywhere: the lesson follows the app's sentence, ``sentence`` (ui/state.py, the sidebar's
box), so every page opened from a step shows the same sentence. The lesson's sentence picker writes it
in its callbacks (before the sidebar's box is drawn); a lesson link's ``lesson=`` parameter is read as
the sentence when the link has no ``s=`` (ui.state.read_link). On a session's first visit without a
link, the lesson moves the app from its untouched default sentence to its own, "thinking machines"
(`request_sentence`, applied before the sidebar is drawn).

`depth_state` writes the linked page's pickers (layer, head, word, position) from what the current step
shows, so "In depth" opens that page on the lesson's layer, head and word too.

Session-state keys (the canonical values are plain keys, not widget keys: Streamlit forgets a
widget's value when another page is shown, the lesson should not):

==================  ==========================================================  =============
key                 meaning                                                     URL parameter
==================  ==========================================================  =============
sentence            the app's sentence, which the lesson follows (ui/state.py)   lesson (or s)
lesson_step         the step shown, 1-based                                      step
lesson_notice       what was wrong with the link's step, shown until a move      -
_lesson_switched    the lesson has just moved the app to its own sentence        -
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

from explain.lesson import DEFAULT_SENTENCE, N_STEPS, SENTENCES, STEPS, parse_step
from model.pipeline import Prepared
from ui.state import DEFAULT_SENTENCE as APP_DEFAULT
from ui.state import MAX_URL_SENTENCE, init_state, request_sentence

SENTENCE, STEP, NOTICE = "sentence", "lesson_step", "lesson_notice"  # SENTENCE: the app's (ui/state.py)
CHOICE, OWN_TEXT, JUMP = "lesson_choice", "lesson_own", "lesson_jump"
READY = "_lesson_ready"
SWITCHED = "_lesson_switched"  # the lesson has just moved the app to its own sentence: the page says so, once
OWN = "Type your own…"
MAX_CHARS = 10_000  # as the sidebar's sentence (the model cuts to its own limit anyway)


def init_lesson() -> None:
    """Give every key a value: from the link on the lesson's first run in this session, else as they were."""
    init_state()  # the app's sentence (from a link's s= or lesson= on the session's first run)
    ss = st.session_state
    if not ss.get(READY):
        qp = st.query_params
        ss[STEP], ss[NOTICE] = parse_step(qp.get("step"))
        ss[READY] = True
        if "lesson" not in qp and "s" not in qp and ss[SENTENCE] == APP_DEFAULT:
            ss[SWITCHED] = True
            request_sentence(DEFAULT_SENTENCE)  # reruns: the sidebar's box must show it too
    if not isinstance(ss.get(STEP), int) or not 1 <= ss[STEP] <= N_STEPS:
        ss[STEP] = 1
    ss.setdefault(NOTICE, None)
    # The widgets follow the canonical values whenever they were forgotten or the sidebar changed the sentence.
    if (
        CHOICE not in ss
        or (ss[CHOICE] != OWN and ss[CHOICE] != ss[SENTENCE])
        or (ss[CHOICE] == OWN and ss[SENTENCE] in SENTENCES)
    ):
        ss[CHOICE] = ss[SENTENCE] if ss[SENTENCE] in SENTENCES else OWN
    if OWN_TEXT not in ss or (ss[CHOICE] == OWN and ss[OWN_TEXT] != ss[SENTENCE]):
        ss[OWN_TEXT] = "" if ss[SENTENCE] in SENTENCES else ss[SENTENCE]
    ss[jump_key(ss[STEP])] = ss[STEP]  # before the picker is drawn: it shows the current step


def sentence() -> str:
    return st.session_state[SENTENCE]


def read(p: Prepared) -> str:
    """The sentence as the lesson's header names it: as typed, or, when the model's limit cut it, the words the model
    reads and how many it dropped (a header of a 10,000-character paste would fill the screen and name words no step
    shows)."""
    if not p.truncated:
        return p.text.strip()
    return f"{' '.join(p.tokens)} … ({p.truncated} more cut off)"


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


def jump_key(shown: int) -> str:
    """The key of the step picker drawn while the lesson shows step `shown`: one picker per step. A request the browser
    sent before a move reached it (a second Next, a switch flipped at once, on a slow connection) carries the picker of
    the step it still shows, with that step: its callback (`jumped(shown)`) then sees a step the lesson has left, and
    does nothing. With one key for every step, that old value looked like a jump back, and took the lesson (and a
    teacher's class) back a step."""
    return f"{JUMP}_{shown}"


# A callback runs before the script, with the browser's value. When a class's teacher has just moved this session
# on (ui/classroom/session.py `apply` forgets the lesson's widgets when the sentence changes), the widget's key may
# be gone: then there is nothing of the student's to take, and the callback does nothing (never a KeyError).
def jumped(shown: int) -> None:
    """The picker drawn at step `shown` changed: go to its step (when the lesson still shows `shown`)."""
    key = jump_key(shown)
    if key in st.session_state and step() == shown:
        go(st.session_state[key])


def chose() -> None:
    """The sentence radio changed: an offered sentence, or the student's own text."""
    ss = st.session_state
    if CHOICE not in ss:
        return
    ss[SENTENCE] = ss.get(OWN_TEXT, "") if ss[CHOICE] == OWN else ss[CHOICE]
    ss[NOTICE] = None


def typed() -> None:
    ss = st.session_state
    if OWN_TEXT not in ss:
        return
    ss[SENTENCE] = str(ss[OWN_TEXT])[:MAX_CHARS]
    ss[CHOICE] = OWN


def navigation(where: str, k: int, plan_leads: bool) -> None:
    """Back, Next (the primary button: Enter or Space on it goes on) and a jump to any step. A teacher at a stop of
    the class's plan has one Next, the plan's: the lesson's would move the class off the plan's stops. `k`: the step
    shown."""
    if plan_leads:
        if where == "bottom":
            st.caption(
                ":material/flag: The plan's **Next stop** and **Back a stop** in the sidebar (or PageDown / "
                "PageUp) move you and the class."
            )
        return
    n = N_STEPS
    b1, b2, b3 = st.columns([1, 1, 4], vertical_alignment="center")
    suffix = "" if where == "top" else "_bottom"
    b1.button(
        "Back",
        icon=":material/arrow_back:",
        on_click=back,
        disabled=k == 1,
        key="lesson_back" + suffix,
        width="stretch",
    )
    b2.button(
        "Next",
        icon=":material/arrow_forward:",
        on_click=forward,
        disabled=k == n,
        type="primary",
        key="lesson_next" + suffix,
        width="stretch",
    )
    if where == "top":
        b3.selectbox(
            "Jump to step",
            list(range(1, n + 1)),
            key=jump_key(k),
            on_change=jumped,
            args=(k,),
            format_func=lambda i: f"Step {i}: {STEPS[i - 1].title}",
            label_visibility="collapsed",
        )
    else:
        b3.progress(k / n, text=f"Step {k} of {n}")


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


def depth_state(page: str, layer: int, head: int, word: int, row: int, dec_layer: int, text: str) -> dict:
    """The pickers of `page` (by name) that show what the lesson shows: encoder `layer`, `head` and source `word`;
    decoder position `row` in decoder layer `dec_layer`. `text` marks the coreference pickers as already placed
    for this sentence (ui.models.coref_defaults then leaves them alone)."""
    enc = {"layer": layer, "head": head, "word": word}
    return {
        "self_attention": {
            **{f"self_attention_{k}": v for k, v in enc.items()},
            "self_attention_layer_focus_for": text,
            "self_attention_mode": None,
        },
        "multi_head": {
            **{f"multi_head_{k}": v for k, v in enc.items()},
            "multi_head_layer_focus_for": text,
            "multi_head_kind": None,
        },
        "encoder": {"encoder_layer": layer, "encoder_word": word},
        "decoder": {"decoder_mask_layer": dec_layer, "decoder_renorm_row": row},
        "cross_attention": {"cross_layer": dec_layer, "cross_head": -1},
        "output": {"output_pos": row},
    }.get(page, {})


def seed_depth(values: dict) -> None:
    """Write `depth_state`'s values (None: forget the key, so the page's default shows)."""
    ss = st.session_state
    for key, value in values.items():
        if value is None:
            ss.pop(key, None)
        else:
            ss[key] = value
