"""The participant's side of a study: consent, the tests (one item at a time: an answer, how sure, an optional
one-line reason; a transfer item on the classroom's click grid), the path between them, the questionnaires, the
end (the answers beside the right ones, the delayed test). The deletion code is the store's to derive
(`StudyStore.deletion_code`): this session shows it on every step, a reload included, and to nobody else. The store
decides every step (study/store.py); this draws and calls it.
"""

from __future__ import annotations

import datetime as dt
import functools
import time

import streamlit as st

from explain.questionnaires import CONFIDENCE, FEEL, FEEL_SCALE, SUS, SUS_SCALE, TLX, TLX_SCALE, scale_of, unanswered
from study import StudyError, schema
from ui.page_list import by_name
from ui.study.session import (
    ACTOR,
    CODE,
    CONDITION,
    PHASE,
    SHOWN,
    notify,
    since_shown,
    source,
    ss,
    store,
)
from ui.widgets import md
from viz.peer import click_grid

NEXT_PHASE = {"pre": "path", "post": "survey", "delayed": "finished"}
TITLES = {"pre": "First test", "post": "Second test", "delayed": "Delayed test"}


def date(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%d %B %Y")


def consent_text(study) -> str:
    s = study.settings
    delayed = f", and {s['delay_days']} days later a last short test (optional)" if s["delay_days"] else ""
    text = "; this study keeps the sentences you type as text" if s["keep_text"] else ""
    return schema.CONSENT[schema.CONSENT_VERSION].format(
        delayed=delayed, text=text, expires=date(study.expires), days=s["retention_days"]
    )


def agree(code: str) -> None:
    """Callback of "I agree": the only place a participant comes to exist."""
    try:
        actor = store().pseudonym(code, source(str(ss().get("study_participant_code", ""))))
        p, _ = store().consent(code, actor)  # (its deletion code: `flow` asks the store for it on every run)
    except StudyError as e:
        notify(str(e))
        return
    ss()[ACTOR], ss()[PHASE], ss()[CONDITION] = actor, p.phase, p.condition


def consent(study) -> None:
    st.subheader(md(study.settings["title"]) or "A study of learning with this app")
    st.caption(f"Consent text {schema.CONSENT_VERSION} · instrument {study.instrument.get('version')}")
    st.markdown(consent_text(study))
    st.text_input(
        "Participant code (only if your teacher or researcher gave you one)",
        key="study_participant_code",
        max_chars=64,
        help="It lets you continue on another device. Leave it empty otherwise.",
    )
    st.button(
        "I agree and take part",
        type="primary",
        on_click=agree,
        args=(study.code,),
        key="study_agree",
        icon=":material/check:",
    )
    st.caption("If you do not agree, simply close this page: nothing has been recorded.")


# -- a test ---------------------------------------------------------------------------------------------------
def submit(code: str, item_id: str, n_choices: int) -> None:
    """Callback of an item's Submit: the answer, its confidence, its reason and its latency, to the store."""
    choice, conf = ss().get(f"study_choice_{item_id}"), ss().get(f"study_conf_{item_id}")
    reason = str(ss().get(f"study_reason_{item_id}") or "")
    if not isinstance(choice, int) or not 0 <= choice < n_choices:
        notify("Choose an answer first." if choice is None else "Click a cell of the shaded row.")
        return
    if conf is None:
        notify("Say how sure you are (1 to 4) first.")
        return
    try:
        store().answer(code, ss()[ACTOR], item_id, choice, int(conf), reason, since_shown(item_id))
    except StudyError as e:
        notify(str(e))


def finish(code: str, phase: str) -> None:
    try:
        p = store().advance(code, ss()[ACTOR], NEXT_PHASE[phase])
        ss()[PHASE] = p.phase
    except StudyError as e:
        notify(str(e))


def clicked(item_id: str, key: str, row_label: str, cols: tuple[str, ...]) -> None:
    """The grid's selection: a cell of the shaded row is the answer to submit."""
    points = ((ss().get(key) or {}).get("selection") or {}).get("points") or []
    for p in points:
        if p.get("x") in cols:
            if p.get("y") == row_label:
                ss()[f"study_choice_{item_id}"] = cols.index(p["x"])
            else:
                notify("Click a cell of the shaded row: it is the row of the word the question asks about.")
            return


def test(study, participant, done: set[str]) -> None:
    phase = participant.phase
    form = participant.form(phase)
    frozen = study.instrument["forms"][form]
    left = [it for it in frozen if f"{phase}:{it['id']}" not in done]
    n, k = len(frozen), len(frozen) - len(left) + 1
    st.subheader(TITLES[phase])
    st.progress((k - 1) / n, text=f"{k - 1} of {n} answered")
    if not left:
        st.success("You answered every question of this test.", icon=":material/task_alt:")
        st.button("Go on", type="primary", on_click=finish, args=(study.code, phase), key=f"study_finish_{phase}")
        return
    item = left[0]
    if ss().get(SHOWN, (None,))[0] != item["id"]:
        ss()[SHOWN] = (item["id"], time.monotonic())
    st.markdown(f"**Question {k} of {n}.** {md(item['text'])}")
    choice_key = f"study_choice_{item['id']}"
    if item.get("grid"):
        g = item["grid"]
        rows, cols, row = tuple(g["rows"]), tuple(g["cols"]), int(g["row"])
        mine = ss().get(choice_key)
        grid_key = f"study_grid_{item['id']}"
        st.plotly_chart(
            click_grid(rows, cols, row, row * len(cols) + mine if isinstance(mine, int) and mine >= 0 else None),
            key=grid_key,
            selection_mode="points",
            on_select=functools.partial(clicked, item["id"], grid_key, rows[row], cols),
            config={"displayModeBar": False},
            width="stretch",
        )
        st.selectbox(
            "Or choose the column here",
            range(len(cols)),
            format_func=cols.__getitem__,
            index=None,
            key=choice_key,
            placeholder="a column of the shaded row",
        )
        n_choices = len(cols)
    else:
        st.radio(
            "Your answer",
            range(len(item["options"])),
            format_func=lambda i: item["options"][i],
            index=None,
            key=choice_key,
        )
        n_choices = len(item["options"])
    st.radio(
        "How sure are you?",
        list(CONFIDENCE),
        format_func=CONFIDENCE.get,
        index=None,
        horizontal=True,
        key=f"study_conf_{item['id']}",
    )
    st.text_input(
        "Why? (optional, one line)",
        key=f"study_reason_{item['id']}",
        max_chars=schema.MAX_REASON,
        placeholder="e.g. because the weights of a row add up to 1",
    )
    st.button(
        "Submit this answer",
        type="primary",
        on_click=submit,
        args=(study.code, item["id"], n_choices),
        key=f"study_submit_{item['id']}",
        icon=":material/send:",
    )
    st.caption(
        "There is no going back to a question once answered: the first answer counts. You see the answers at "
        "the end of the study."
    )


# -- between the tests ----------------------------------------------------------------------------------------
def path(study) -> None:
    st.subheader("Now the lesson")
    kind = study.settings["path"]
    if kind == "class":
        st.markdown(
            "Follow your teacher's class now: join it on the Classroom page with the code your teacher gives. "
            "When the class is over, come back here."
        )
        st.page_link(by_name("classroom").file, label="Classroom", icon=":material/groups:")
    else:
        what = "the guided lesson" if kind == "lesson" else "the lesson plan your teacher gave you"
        st.markdown(
            f"Work through {what} at your own pace: take the time you need. Everything you do there is "
            "recorded for this study (pages and steps, switches, answers). When you have finished, come "
            "back here for the second test."
        )
        st.page_link(by_name("lesson").file, label="Open the guided lesson", icon=":material/school:")
    st.divider()
    st.button(
        "I have finished the lesson: start the second test",
        on_click=finish_path,
        args=(study.code,),
        key="study_path_done",
        icon=":material/quiz:",
    )


def finish_path(code: str) -> None:
    try:
        ss()[PHASE] = store().advance(code, ss()[ACTOR], "post").phase
    except StudyError as e:
        notify(str(e))


# -- the questionnaires ---------------------------------------------------------------------------------------
TLX_STOPS = (None, *range(TLX_SCALE[0], TLX_SCALE[1] + 1, scale_of("tlx_mental")[2]))  # a slider starts unanswered


def tlx_label(value: int | None) -> str:
    return "not answered" if value is None else str(value)


def send_survey(code: str) -> None:
    """Callback of the questionnaires' Send: every answer or none (a workload slider still on "not answered" is
    unanswered, never a 0 or a 50)."""
    values = {k: ss().get(f"study_q_{k}") for k, _ in (*SUS, *TLX, *FEEL)}
    missing = [k for k, v in values.items() if v is None]
    if missing:
        notify(f"Still unanswered: {unanswered(missing)}.")
        return
    done = store().done(code, ss()[ACTOR])
    try:
        for k, v in values.items():
            if f"survey:{k}" not in done:
                store().rate(code, ss()[ACTOR], k, int(v), scale_of(k))
        ss()[PHASE] = store().advance(code, ss()[ACTOR], "done").phase
    except StudyError as e:
        notify(str(e))


def survey(study) -> None:
    st.subheader("A few questions about the app")
    with st.form("study_survey"):
        st.markdown(f"**Using the app** (1 = {SUS_SCALE[2].lower()}, 5 = {SUS_SCALE[3].lower()})")
        for k, text in SUS:
            st.radio(text, range(SUS_SCALE[0], SUS_SCALE[1] + 1), index=None, horizontal=True, key=f"study_q_{k}")
        st.markdown("**The lesson's workload** (0 = very low, 100 = very high; move each slider to your answer)")
        for k, text in TLX:
            st.select_slider(text, TLX_STOPS, format_func=tlx_label, key=f"study_q_{k}")
        st.markdown("**Learning**")
        for k, text in FEEL:
            st.radio(
                f"{text} (1 = {FEEL_SCALE[2].lower()}, 7 = {FEEL_SCALE[3].lower()})",
                range(FEEL_SCALE[0], FEEL_SCALE[1] + 1),
                index=None,
                horizontal=True,
                key=f"study_q_{k}",
            )
        st.form_submit_button("Send", type="primary", on_click=send_survey, args=(study.code,))


# -- the end ----------------------------------------------------------------------------------------------------
def leave(code: str) -> None:
    """ "Delete my data" from the participant's own session."""
    try:
        store().delete_participant(code, ss()[ACTOR])
    except StudyError as e:
        notify(str(e))
        return
    for key in (ACTOR, PHASE, CONDITION, CODE):
        ss().pop(key, None)
    notify("Everything recorded about you in this study has been deleted.")


def end(study, participant, delete_code: str | None) -> None:
    if participant.phase == "finished":
        st.success(
            "Thank you: you finished every part of this study, the delayed test included.",
            icon=":material/celebration:",
        )
    else:
        st.success("Thank you: you finished the study.", icon=":material/celebration:")
        days = study.settings["delay_days"]
        if days:
            opens = participant.phase_at + days * 86_400_000
            if store().now() >= opens:
                st.button(
                    "Start the delayed test",
                    type="primary",
                    on_click=start_delayed,
                    args=(study.code,),
                    key="study_delayed",
                )
            else:
                st.info(
                    f"Optional: open this same link again from **{date(opens)}** for a last short test.",
                    icon=":material/event:",
                )
    review(study, participant)
    if delete_code:
        st.markdown(
            f"Your deletion code: **`{delete_code}`**. Keep it: with it and the study's code "
            f"(**{study.code}**) you can delete your data on the Study page until {date(study.expires)}."
        )
    else:  # (agreed before deletion codes could be shown again)
        st.caption("Your deletion code was shown once, when you agreed. This button deletes your data as well.")
    st.button("Delete my data now", on_click=leave, args=(study.code,), key="study_leave", icon=":material/delete:")


def review(study, participant) -> None:
    """The participant's answers beside the right ones, test by test (drawn on the end page only: after the
    questionnaires). While the delayed test is still ahead, the first test's stay hidden: it asks the same
    questions."""
    mine = store().answers_of(study.code, participant.actor)
    delayed_ahead = participant.phase == "done" and bool(study.settings["delay_days"]) and not study.closed
    phases = [ph for ph in schema.TEST_PHASES if any(k[0] == ph for k in mine) and not (delayed_ahead and ph == "pre")]
    if not phases:
        return
    st.subheader("Your answers")
    if delayed_ahead:
        st.caption("The first test's answers come after the delayed test: it asks the same questions.")
    for phase in phases:
        items = study.instrument["forms"][participant.form(phase)]
        right = sum(mine.get((phase, it["id"])) == it["answer"] for it in items)
        with st.expander(f"{TITLES[phase]}: {right} of {len(items)} right", icon=":material/fact_check:"):
            for n, it in enumerate(items, start=1):
                choice, options = mine.get((phase, it["id"])), it["options"]
                yours = md(options[choice]) if choice is not None and 0 <= choice < len(options) else "no answer"
                verdict = ":green[right]" if choice == it["answer"] else ":red[wrong]"
                st.markdown(
                    f"**{n}.** {md(it['text'])}  \nYour answer: {yours} ({verdict})  \n"
                    f"Right answer: **{md(options[it['answer']])}**"
                )
                if it.get("explain"):
                    st.caption(md(it["explain"]))


def start_delayed(code: str) -> None:
    try:
        ss()[PHASE] = store().advance(code, ss()[ACTOR], "delayed").phase
    except StudyError as e:
        notify(str(e))


def flow(study) -> None:
    """Where this participant is, drawn: consent, a test, the path, the questionnaires or the end."""
    p = store().participant(study.code, ss()[ACTOR]) if ss().get(ACTOR) else None
    if p is None:
        ss().pop(ACTOR, None)
        consent(study)
        return
    ss()[PHASE], ss()[CONDITION] = p.phase, p.condition
    delete_code = store().deletion_code(study.code, p.actor)  # (this session's participant's own: nobody else's)
    keep = f"Your deletion code: **`{delete_code}`** (keep it: with it you can delete your data at any time)."
    if delete_code and p.phase == "pre":
        st.info(keep, icon=":material/key:")
    if p.phase in schema.TEST_PHASES:
        test(study, p, store().done(study.code, p.actor))
    elif p.phase == "path":
        path(study)
    elif p.phase == "survey":
        survey(study)
    else:
        end(study, p, delete_code)  # (it says the code itself)
        return
    if delete_code and p.phase != "pre":
        st.caption(keep)
