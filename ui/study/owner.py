"""The owner's side of a study: create it (code, link, key), open it again, close it, delete it, and its report
(figures, tables, downloads as CSV and JSON lines). Every operation goes through the store with the study's key,
which only this session holds (`_study_owner`)."""

from __future__ import annotations

import contextlib
from urllib.parse import urlsplit

import pandas as pd
import streamlit as st

import explain.report
import viz.study
from explain.instrument import OBJECTIVES, VERSIONS
from study import StudyError, export, schema
from ui.page_list import PAGES
from ui.study.session import OWNER, PARAM, TOKEN, client, instrument, notify, ss, store
from ui.widgets import chart, md, metrics_row, notice, small_table

RETENTION = "study_new_retention"


def create() -> None:
    """Callback of "Create the study"."""
    g = ss()
    settings = {
        "title": str(g.get("study_new_title") or ""),
        "path": g.get("study_new_path", "lesson"),
        "factor": None if g.get("study_new_factor", "none") == "none" else g["study_new_factor"],
        "retention_days": int(g.get(RETENTION) or schema.DEFAULT_RETENTION_DAYS),
        "delay_days": int(g.get("study_new_delay") or 0),
        "keep_text": bool(g.get("study_new_text")),
        "instrument": g.get("study_new_version") or next(iter(VERSIONS)),
    }
    try:
        built = instrument(settings["instrument"])
        code, secret = store().create(settings, built.as_dict(), client())
    except StudyError as e:
        notify(str(e))
        return
    g[OWNER] = (code, secret)
    g["_study_new_key"] = secret  # shown once, on the next run


def resume() -> None:
    code, key = str(ss().get("study_open_code") or ""), str(ss().get("study_open_key") or "")
    try:
        ok = store().is_owner(code, key)
    except StudyError as e:
        notify(str(e))
        return
    if not ok:
        notify("No study with this code and key.")
        return
    ss()[OWNER] = (store().study(code).code, key)


def create_form() -> None:
    st.subheader("Create a study")
    st.text_input(
        "Title (shown to participants)",
        key="study_new_title",
        max_chars=schema.MAX_TITLE,
        placeholder="e.g. Attention, week 3",
    )
    c1, c2 = st.columns(2)
    c1.radio("Between the two tests", list(schema.PATHS), format_func=schema.PATHS.get, key="study_new_path")
    c2.radio(
        "Conditions (participants are assigned at random, balanced)",
        ["none", *schema.FACTORS],
        format_func=lambda f: "One condition" if f == "none" else schema.FACTORS[f],
        key="study_new_factor",
    )
    c1, c2, c3 = st.columns(3)
    c1.number_input("Keep the data for (days)", 1, 3650, schema.DEFAULT_RETENTION_DAYS, key=RETENTION)
    c2.number_input("Delayed test after (days; 0: none)", 0, 365, schema.DEFAULT_DELAY_DAYS, key="study_new_delay")
    c3.selectbox(
        "Concept test version",
        list(VERSIONS),
        key="study_new_version",
        help=f"{len(VERSIONS[next(iter(VERSIONS))])} items in two forms (A, B) on different sentences, "
        "written and answered by the shipped model.",
    )
    st.checkbox(
        "Keep the sentences participants type as text (else only a keyed code and their length)", key="study_new_text"
    )
    st.button("Create the study", type="primary", on_click=create, key="study_create", icon=":material/add:")
    with st.expander("Open a study you created"):
        st.text_input("Study code", key="study_open_code", max_chars=16)
        st.text_input("The study's key", key="study_open_key", type="password", max_chars=64)
        st.button("Open", on_click=resume, key="study_open")


def link(code: str, token: str) -> str:
    query = f"{PARAM}={code}&{TOKEN}={token}"
    with contextlib.suppress(Exception):
        parts = urlsplit(st.context.url)
        path = parts.path.rstrip("/")
        last = path.rsplit("/", 1)[-1]
        if last in {p.name for p in PAGES} or last == "home":
            path = path[: -len(last) - 1]
        return f"{parts.scheme}://{parts.netloc}{path}/studies?{query}"
    return f"/studies?{query}"


def set_closed(closed: bool) -> None:
    code, key = ss()[OWNER]
    try:
        store().close(code, key, closed)
    except StudyError as e:
        notify(str(e))


def delete() -> None:
    code, key = ss()[OWNER]
    if not ss().get("study_delete_sure"):
        notify("Tick the box first: deleting cannot be undone.")
        return
    try:
        store().delete_study(code, key)
    except StudyError as e:
        notify(str(e))
        return
    ss().pop(OWNER, None)
    notify(f"Study {code} and everything it recorded are deleted.")


def dashboard() -> None:
    code, key = ss()[OWNER]
    try:
        study, people, events = store().records(code, key)
        token = store().link(code, key)
    except StudyError as e:
        ss().pop(OWNER, None)
        st.warning(md(str(e)))
        return
    st.subheader(f"Study {code}" + (f": {md(study.settings['title'])}" if study.settings["title"] else ""))
    new_key = ss().pop("_study_new_key", None)
    if new_key:
        st.warning(
            f"The study's key: **`{new_key}`**. Write it down now: with the code it opens this study's report "
            "again; it is shown only once and cannot be recovered.",
            icon=":material/key:",
        )
    st.markdown(f"Participants open this link: `{link(code, token)}`")
    s = study.settings
    st.caption(
        f"{schema.PATHS[s['path']]} · conditions: {', '.join(study.conditions)} · instrument "
        f"{study.instrument.get('version')} · delayed test: "
        f"{str(s['delay_days']) + ' days' if s['delay_days'] else 'none'} · everything is deleted on "
        f"{pd.Timestamp(study.expires, unit='ms'):%d %B %Y} · "
        f"{'closed' if study.closed else 'open'}"
    )
    phases = {ph: sum(1 for p in people if p["phase"] == ph) for ph in schema.PHASES}
    with metrics_row():
        st.metric("Agreed to take part", len(people), border=True)
        st.metric("Finished", phases["done"] + phases["delayed"] + phases["finished"], border=True)
        st.metric("Events recorded", len(events), border=True)
    c1, c2, c3 = st.columns([1, 1, 2], vertical_alignment="bottom")
    c1.button(
        "Reopen" if study.closed else "Close the study",
        on_click=set_closed,
        args=(not study.closed,),
        key="study_close",
        icon=":material/lock:",
    )
    c3.checkbox("I want to delete this study and all its data", key="study_delete_sure")
    c2.button("Delete this study", on_click=delete, key="study_delete", icon=":material/delete_forever:")
    report(study, people, events)


def report(study, people: list[dict], events: list[dict]) -> None:
    rep = explain.report.build(study.instrument, people, events, first=study.conditions[0])
    st.subheader("Report")
    for line in rep.notes:
        st.info(md(line), icon=":material/group:")
    chart(viz.study.gain_figure(rep), key="study_gain")
    notice(viz.study.gain_notice(rep))
    chart(viz.study.items_figure(rep), key="study_items")
    notice(viz.study.items_notice(rep))
    st.markdown("**Misconceptions chosen** (wrong answers whose option stands for a known misconception)")
    if any(isinstance(m["chosen"], int) for m in rep.misconceptions):
        chart(viz.study.misconceptions_figure(rep), key="study_misconceptions")
    else:
        st.caption("None chosen by 5 participants or more yet.")
    st.markdown("**Where the lesson failed**: time and engagement per step, and the share right after it")
    chart(viz.study.steps_figure(rep), key="study_steps")
    notice(viz.study.steps_notice(rep))
    c1, c2 = st.columns(2)
    with c1:
        st.markdown(
            "**Workload (raw NASA-TLX)** and usability (SUS): "
            + (
                f"SUS {rep.sus.value:.0f} of 100 ({rep.sus.low:.0f} to {rep.sus.high:.0f}, n {rep.sus.n})"
                if rep.sus
                else "SUS from 5 participants on"
            )
        )
        if any(v is not None for v in rep.tlx.values()):
            chart(viz.study.survey_figure(rep), key="study_tlx")
        else:
            st.caption("The workload appears once 5 participants have answered the questionnaires.")
    with c2:
        st.markdown("**Feeling of learning beside the measured gain**")
        if rep.feel:
            chart(viz.study.feel_figure(rep), key="study_feel")
        st.caption(md(viz.study.feel_notice(rep)))
    tables = tables_of(rep)
    with st.expander("The report's tables"):
        for name, rows in tables.items():
            st.markdown(f"**{name}**")
            small_table(pd.DataFrame(rows), hide_index=True, digits=3)
    downloads(study.code, tables, people, events)


def tables_of(rep) -> dict[str, list[dict]]:
    items = [
        {
            "item": x["slot"],
            "objective": OBJECTIVES[x["objective"]][0],
            "test": x["phase"],
            "n": x["n"],
            "share right": x["difficulty"],
            "discrimination": x["discrimination"],
        }
        for x in rep.items
    ]
    return {
        "Items": items,
        "Answers chosen": [
            {"item": d["slot"], "test": d["phase"], "answer": d["answer"], "count": d["count"], "share": d["share"]}
            for d in rep.distractors
        ],
        "Lesson steps": [
            {
                "step": s["step"],
                "title": s["title"],
                "n": s["n"],
                "median seconds": s["median_seconds"],
                "engagement": s["level"],
                "share right after": s["post_correct"],
            }
            for s in rep.steps
        ],
    }


def downloads(code: str, tables: dict[str, list[dict]], people: list[dict], events: list[dict]) -> None:
    rows = [{"table": name, **row} for name, rs in tables.items() for row in rs]
    log = [
        {
            "actor": e["actor"],
            "verb": e["verb"],
            "object": e["object"],
            "result": e["result"],
            "context": e["context"],
            "timestamp": e["timestamp"],
        }
        for e in events
    ]
    c1, c2, c3, c4 = st.columns(4)
    c1.download_button("Report (CSV)", export.to_csv(rows), f"study-{code}-report.csv", "text/csv", key="dl1")
    c2.download_button(
        "Report (JSON lines)", export.to_jsonl(rows), f"study-{code}-report.jsonl", "application/jsonl", key="dl2"
    )
    c3.download_button("Event log (CSV)", export.to_csv(log), f"study-{code}-events.csv", "text/csv", key="dl3")
    c4.download_button(
        "Event log (JSON lines)", export.to_jsonl(log), f"study-{code}-events.jsonl", "application/jsonl", key="dl4"
    )
    st.caption(
        "The event log holds pseudonyms only; every text a person typed that a spreadsheet would read as a "
        "formula starts with an apostrophe. Report cells of fewer than 5 participants are left empty."
    )
