"""Per-session state shared by every page, and its mirror in the URL.

Session-state keys (the sidebar's widgets use these keys directly, so a choice made on one page
carries to the next):

=================  =========================================================  ================
key                meaning                                                    URL parameter
=================  =========================================================  ================
sentence           the sentence typed by the user                              s
model              "base" (shipped), "no_mask" (shipped, trained without the   m
                   look-ahead mask) or "mine" (this session's own model)
heads_off          list of "enc.0.self_attn:2"-style strings                   off (comma list)
iv_look_ahead      look-ahead mask on                                          la=0 when off
iv_padding         padding mask on                                             pad=0 when off
iv_scale           divide scores by sqrt(d_k)                                  scale=0 when off
iv_pos             add the positional encoding                                 pe=0 when off
presenter          presenter mode: larger text and charts (ui/style.py)        presenter=1 when on
my_model           this session's own Bundle (trained or uploaded), if any     -
my_model_key       a unique id for it (part of every cache key)                -
=================  =========================================================  ================

The guided lesson (pages/lesson.py, state in ui/lesson.py) follows this same sentence, and mirrors it and its
step in `PAGE_PARAMS` (``?lesson=<sentence>&step=N``): `sync_query_params` leaves those alone, and `read_link`
reads ``lesson`` as the sentence when a link has no ``s``. Streamlit clears the
query string when the user moves to another page, so they only live on the page that writes them.

Nothing here is shared between sessions: `st.session_state` is per browser tab. The shipped models
are loaded once per server (`ui.models`) and only read.
"""

from __future__ import annotations

from collections.abc import Mapping

import streamlit as st

from classroom.rules import SHAREABLE_MODELS, parse_head
from model.examples import COREFERENCE
from model.trace import Interventions
from ui.style import PRESENTER_KEY, read_flag

DEFAULT_SENTENCE = COREFERENCE  # the app's sentence until the user types another (model/examples.py)
MODELS = {"base": "Shipped model", "no_mask": "Shipped, trained without look-ahead mask", "mine": "My model"}
TOGGLES = {  # state key -> (Interventions field, URL parameter, label)
    "iv_look_ahead": ("look_ahead_mask", "la", "Look-ahead mask"),
    "iv_padding": ("padding_mask", "pad", "Padding mask"),
    "iv_scale": ("scale", "scale", "Divide by √d_k"),
    "iv_pos": ("positional_encoding", "pe", "Positional encoding"),
}
PAGE_PARAMS = ("lesson", "step")  # URL parameters a page owns (the guided lesson): kept, never wiped
CLASS_PARAMS = ("class", "follow", "k")  # a student's class and its link's token (ui/classroom/session.py): kept
STUDY_PARAMS = ("study", "sk")  # a participant's study and its link's token (ui/study/session.py): kept
MAX_URL_SENTENCE = 500  # a longer sentence is not put in the URL (it is cut to the model's limit anyway)
MAX_LINK_SENTENCE = 2_000  # a link's sentence is cut to this (the model reads at most max_len tokens)
MAX_LINK_HEADS = 64  # heads read from a link's "off" list


PENDING = "_pending_sentence"  # a sentence a page asked for, applied before the sidebar is drawn
WIDGET_KEYS = ("sentence", "model", "heads_off", *TOGGLES, PRESENTER_KEY)


def keep_widget_state() -> None:
    """Call once at the top of every run of app.py, before any widget is drawn.

    Streamlit drops the value of a widget that was not drawn in a completed run (for example a run
    cut short by the next click), and the widget then comes back with its own default (a toggle:
    off). Re-assigning each key to itself makes the value the session's own, so it survives.
    """
    ss = st.session_state
    for key in WIDGET_KEYS:
        if key in ss:
            ss[key] = ss[key]


def read_link(params: Mapping[str, str]) -> tuple[dict, list[str]]:
    """The state a shared link asks for, and a notice for every part of it that was dropped.

    Never raises: anything invalid (an unknown model, a malformed head, a toggle that is not 0 or 1, a
    sentence over MAX_LINK_SENTENCE characters: cut) is dropped or cut, and said so. Parameters it does
    not know (other pages' own) are left alone.
    """
    values: dict = {}
    notices: list[str] = []
    if "s" in params or "lesson" in params:  # a lesson link (?lesson=...&step=N) names the sentence too
        text = str(params["s"] if "s" in params else params["lesson"])
        if len(text) > MAX_LINK_SENTENCE:
            notices.append(f"The link's sentence was cut to its first {MAX_LINK_SENTENCE:,} characters.")
        values["sentence"] = text[:MAX_LINK_SENTENCE]
    if "m" in params:
        if params["m"] in SHAREABLE_MODELS:
            values["model"] = params["m"]
        elif params["m"] == "mine":
            notices.append(
                "The link asked for someone's own model, which lives only in their session: "
                "showing the shipped model instead."
            )
        else:
            notices.append("The link named a model this app does not have: showing the shipped model.")
    if "off" in params:
        asked = str(params["off"]).split(",")[:MAX_LINK_HEADS]
        heads = [head_key(*parse_head(h)) for h in asked if parse_head(h)]
        if len(heads) < len([h for h in asked if h]):
            notices.append("Some heads in the link were not understood and were left on.")
        values["heads_off"] = sorted(set(heads))
    for key, (_, param, label) in TOGGLES.items():
        if param in params:
            if params[param] in ("0", "1"):
                values[key] = params[param] == "1"
            else:
                notices.append(f"The link's setting for “{label}” was not 0 or 1 and was ignored.")
    if "presenter" in params and read_flag(params["presenter"]) is not None:  # read tolerantly: on, true, 1, ...
        values[PRESENTER_KEY] = read_flag(params["presenter"])
    return values, notices


def init_state() -> None:
    """Give every key a value: from the URL on a session's first run, else the defaults."""
    ss = st.session_state
    if PENDING in ss:  # asked for by a page after the sidebar's box was drawn (`request_sentence`)
        ss["sentence"] = ss.pop(PENDING)
    if not ss.get("_state_ready"):
        values, notices = read_link(st.query_params.to_dict())
        for key, value in values.items():
            ss.setdefault(key, value)
        if notices:
            ss["_notices"] = notices
        ss["_state_ready"] = True
    ss.setdefault("sentence", DEFAULT_SENTENCE)
    ss.setdefault("model", "base")
    ss.setdefault("heads_off", [])
    for key in TOGGLES:
        ss.setdefault(key, True)
    ss.setdefault(PRESENTER_KEY, False)


def request_sentence(text: str) -> None:
    """Make `text` the app's sentence from a page, after the sidebar's box was drawn: kept aside, then applied
    by `init_state` at the top of the next run (a rerun, now), before any widget is drawn."""
    st.session_state[PENDING] = text
    st.rerun()


def head_key(module: str, head: int) -> str:
    return f"{module}:{head}"


def interventions() -> Interventions:
    """The interventions the user chose, as the model's plain, hashable data."""
    init_state()
    ss = st.session_state
    heads = frozenset(p for p in map(parse_head, ss["heads_off"]) if p)
    return Interventions(heads_off=heads, **{field: bool(ss[key]) for key, (field, _, _) in TOGGLES.items()})


def reset_interventions() -> None:
    """Callback of the badge's reset button: everything back on."""
    st.session_state["heads_off"] = []
    for key in TOGGLES:
        st.session_state[key] = True


def set_head(module: str, head: int, on: bool) -> None:
    """Switch one head on or off (usable as a widget callback from any page)."""
    heads = [h for h in st.session_state.get("heads_off", []) if h != head_key(module, head)]
    if not on:
        heads.append(head_key(module, head))
    st.session_state["heads_off"] = sorted(heads)


CONTROLS_SHOWN = "_controls_in_sidebar"  # the last full run drew the sentence, model and switches in the sidebar


def controls_are_mine() -> bool:
    """The sidebar holds this session's sentence, model and switches (False: a student who follows a class's
    lead, whose are the teacher's, said above the page: ui/sidebar.py `render_sidebar(shared=False)`)."""
    return st.session_state.get(CONTROLS_SHOWN, True)


def sync_query_params() -> None:
    """Write the current state into the URL so the address bar is a shareable link."""
    ss = st.session_state
    want: dict[str, str] = {}
    if ss["sentence"] != DEFAULT_SENTENCE and len(ss["sentence"]) <= MAX_URL_SENTENCE:
        want["s"] = ss["sentence"]
    if ss["model"] != "base" and ss["model"] != "mine":
        want["m"] = ss["model"]
    if ss["heads_off"]:
        want["off"] = ",".join(sorted(ss["heads_off"]))
    for key, (_, param, _) in TOGGLES.items():
        if not ss[key]:
            want[param] = "0"
    if ss.get(PRESENTER_KEY):
        want["presenter"] = "1"
    for param in (*PAGE_PARAMS, *CLASS_PARAMS, *STUDY_PARAMS):  # their owners write them (module docstring)
        if param in st.query_params:
            want[param] = st.query_params[param]
    if dict(st.query_params) != want:
        st.query_params.from_dict(want)
