"""A study's report, computed from its frozen instrument, its participants and its event log (plain dicts, as the
study store hands them out: study/store.py `records`). No database, no drawing: viz/study.py draws it.

Scores: a participant's score in a test is the share of that form's items they answered right (an item left
unanswered counts as wrong), for those who completed the test. The gain compares the participants who completed
both the pre- and the post-test (matched). Items are reported per slot (the same objective in forms A and B, which
are isomorphic) and per test. Every cell of fewer than `stats.MIN_CELL` participants is suppressed (None).

Time per lesson step: from each "viewed lesson/step/N" event to the participant's next page or step (at most
`IDLE_CAP` seconds: a participant who left the tab open is not reading). Engagement per step follows the
engagement taxonomy of Naps et al. (2002): viewing < responding (answering, predicting, voting) < changing
(switching a part off, clicking a cell) < constructing (training a model) < presenting (sending a snapshot); a
participant's level on a step is the highest they reached there.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from statistics import median
from typing import Any, TypedDict

from explain import stats
from explain.instrument import OBJECTIVES, slot_of
from explain.items import MISCONCEPTIONS
from explain.lesson import STEPS, step_index
from explain.questionnaires import FEEL, SUS, TLX

IDLE_CAP = 600.0
LEVELS = ("viewing", "responding", "changing", "constructing", "presenting")
LEVEL_OF = {
    "viewed": 0,
    "revealed": 0,
    "answered": 1,
    "predicted": 1,
    "checked": 1,
    "voted": 1,
    "revoted": 1,
    "changed": 2,
    "clicked": 2,
    "trained": 3,
    "shared": 4,
}


Record = dict[str, Any]  # a participant, an event, an answer: JSON objects as the study store hands them out


class ItemRow(TypedDict):
    slot: int
    objective: str
    template: str
    phase: str
    n: int | str  # `stats.count_cell`
    difficulty: float | None
    discrimination: float | None


class DistractorRow(TypedDict):
    slot: int
    phase: str
    answer: str
    misconception: str
    count: int | str
    share: float | None


class MisconceptionRow(TypedDict):
    misconception: str
    key: str
    chosen: int | str
    items: int


class StepRow(TypedDict):
    step: int
    title: str
    n: int | str
    median_seconds: float | None
    level: str | None
    objectives: str
    post_correct: float | None


@dataclass(frozen=True)
class Report:
    n_consented: int
    n_matched: int
    conditions: dict[str, int]  # condition -> participants
    gain: stats.Interval | None  # Hake's ⟨g⟩ of the matched participants
    gain_by_condition: dict[str, stats.Interval | None]
    hedges: stats.Interval | None  # between the two conditions' raw gains (second minus first)
    pre_mean: float | None
    post_mean: float | None
    delayed_mean: float | None
    items: list[ItemRow]
    distractors: list[DistractorRow]
    misconceptions: list[MisconceptionRow]
    steps: list[StepRow]
    weakest_step: StepRow | None
    sus: stats.Interval | None
    tlx: dict[str, float | None]
    tlx_raw: stats.Interval | None
    feel: list[tuple[int, float]]  # (feeling 1-7, own raw gain) per matched participant, when n >= MIN_CELL
    feel_gain_rho: float | None
    notes: list[str] = field(default_factory=list)


def _ok(n: int) -> bool:
    return n >= stats.MIN_CELL


def build(instrument: Mapping[str, Any], participants: list[Record], events: list[Record], first: str = "") -> Report:
    forms: dict[str, dict[str, Record]] = {
        f: {it["id"]: it for it in items} for f, items in instrument["forms"].items()
    }
    by_actor: defaultdict[str, list[Record]] = defaultdict(list)
    for e in events:
        by_actor[e["actor"]].append(e)
    people = {p["actor"]: p for p in participants}
    answers: dict[tuple[str, str], dict[str, Record]] = defaultdict(dict)  # (actor, phase) -> item -> result
    done: dict[str, set[str]] = defaultdict(set)
    ratings: dict[str, dict[str, int]] = defaultdict(dict)
    for e in events:
        ctx = e["context"]
        if e["verb"] == "answered":
            answers[(e["actor"], ctx["phase"])][e["object"].split("/", 1)[1]] = {**e["result"], "form": ctx["form"]}
        elif e["verb"] == "completed" and e["object"].startswith("phase/"):
            done[e["actor"]].add(e["object"].split("/", 1)[1])
        elif e["verb"] == "rated":
            ratings[e["actor"]][e["object"].split("/", 1)[1]] = int(e["result"]["value"])

    def score(actor: str, phase: str) -> float | None:
        p = people.get(actor)
        if p is None or phase not in done[actor]:
            return None
        form = p["first_form"] if phase in ("pre", "delayed") else ("B" if p["first_form"] == "A" else "A")
        got = answers.get((actor, phase), {})
        return sum(bool(got.get(i, {}).get("correct")) for i in forms[form]) / max(1, len(forms[form]))

    def known(actor: str, phase: str) -> float:
        """`score` of a participant who completed `phase` (a matched participant, for "pre" and "post")."""
        s = score(actor, phase)
        assert s is not None
        return s

    matched = [a for a in people if score(a, "pre") is not None and score(a, "post") is not None]
    pre = [known(a, "pre") for a in matched]
    post = [known(a, "post") for a in matched]
    conds: defaultdict[str, list[str]] = defaultdict(list)
    for a in matched:
        conds[people[a]["condition"]].append(a)
    gain = stats.hake_gain(pre, post) if _ok(len(matched)) else None
    by_cond = {
        c: (stats.hake_gain([known(a, "pre") for a in xs], [known(a, "post") for a in xs]) if _ok(len(xs)) else None)
        for c, xs in sorted(conds.items())
    }
    hedges: stats.Interval | None = None
    names = sorted(conds) if not first else [first, *sorted(c for c in conds if c != first)]
    if len(names) == 2 and all(_ok(len(conds[c])) for c in names):
        raw = [[known(a, "post") - known(a, "pre") for a in conds[c]] for c in names]
        hedges = stats.hedges_g(raw[0], raw[1])
    delayed = [s for a in people if (s := score(a, "delayed")) is not None]

    items, distractors, miscount = _items(forms, people, answers, done)
    steps, weakest = _steps(by_actor, items)
    sus_scores = [stats.sus_score([r[k] for k, _ in SUS]) for r in ratings.values() if all(k in r for k, _ in SUS)]
    tlx_rows = [[r[k] for k, _ in TLX] for r in ratings.values() if all(k in r for k, _ in TLX)]
    tlx = {
        k: (sum(row[i] for row in tlx_rows) / len(tlx_rows) if _ok(len(tlx_rows)) else None)
        for i, (k, _) in enumerate(TLX)
    }
    feel_key = FEEL[0][0]
    feel = [(ratings[a][feel_key], known(a, "post") - known(a, "pre")) for a in matched if feel_key in ratings[a]]
    return Report(
        n_consented=len(people),
        n_matched=len(matched),
        conditions={
            c: sum(1 for p in people.values() if p["condition"] == c)
            for c in sorted({p["condition"] for p in people.values()})
        },
        gain=gain,
        gain_by_condition=by_cond,
        hedges=hedges,
        pre_mean=sum(pre) / len(pre) if _ok(len(pre)) else None,
        post_mean=sum(post) / len(post) if _ok(len(post)) else None,
        delayed_mean=sum(delayed) / len(delayed) if _ok(len(delayed)) else None,
        items=items,
        distractors=distractors,
        misconceptions=[
            {"misconception": MISCONCEPTIONS.get(k, k), "key": k, "chosen": stats.count_cell(n), "items": len(slots)}
            for k, (n, slots) in sorted(miscount.items(), key=lambda kv: -kv[1][0])
        ],
        steps=steps,
        weakest_step=weakest,
        sus=stats.mean_interval(sus_scores) if _ok(len(sus_scores)) else None,
        tlx=tlx,
        tlx_raw=stats.mean_interval([stats.tlx_raw(r) for r in tlx_rows]) if _ok(len(tlx_rows)) else None,
        feel=feel if _ok(len(feel)) else [],
        feel_gain_rho=stats.spearman([f for f, _ in feel], [g for _, g in feel]) if _ok(len(feel)) else None,
        notes=[]
        if _ok(len(matched))
        else [
            f"{stats.count_cell(len(matched))} participants have taken both tests: "
            f"figures appear from {stats.MIN_CELL} on."
        ],
    )


def _items(
    forms: Mapping[str, Mapping[str, Record]],
    people: Mapping[str, Record],
    answers: Mapping[tuple[str, str], Mapping[str, Record]],
    done: Mapping[str, set[str]],
) -> tuple[list[ItemRow], list[DistractorRow], dict[str, tuple[int, set[int]]]]:
    """Per slot and test: difficulty and corrected point-biserial over the participants who completed the test
    (forms pooled: they are isomorphic); the distractors' counts; each misconception's count."""
    slots = sorted({slot_of(i) for f in forms.values() for i in f})
    rows: list[ItemRow] = []
    distractors: list[DistractorRow] = []
    miscount: dict[str, list[Any]] = defaultdict(lambda: [0, set()])  # tag -> [times chosen, slots]
    for phase in ("pre", "post", "delayed"):
        takers = [a for a, p in people.items() if phase in done[a]]
        matrix = []
        for a in takers:
            form = (
                people[a]["first_form"]
                if phase in ("pre", "delayed")
                else ("B" if people[a]["first_form"] == "A" else "A")
            )
            got = answers.get((a, phase), {})
            matrix.append([int(bool(got.get(f"{form}{s:02d}", {}).get("correct"))) for s in slots])
        if not takers:
            continue
        table = stats.item_table(matrix) if _ok(len(takers)) else [(None, None)] * len(slots)
        for s, (p, r) in zip(slots, table, strict=True):
            a_item = forms["A"][f"A{s:02d}"]
            rows.append(
                {
                    "slot": s,
                    "objective": a_item["objective"],
                    "template": a_item["template"],
                    "phase": phase,
                    "n": stats.count_cell(len(takers)),
                    "difficulty": p,
                    "discrimination": r,
                }
            )
        for s in slots:
            counts: defaultdict[str, int] = defaultdict(int)
            total = 0
            for a in takers:
                form = (
                    people[a]["first_form"]
                    if phase in ("pre", "delayed")
                    else ("B" if people[a]["first_form"] == "A" else "A")
                )
                item = forms[form][f"{form}{s:02d}"]
                res = answers.get((a, phase), {}).get(item["id"])
                if res is None:
                    continue
                total += 1
                tags = item.get("tags") or []
                tag = tags[res["choice"]] if res["choice"] < len(tags) else None
                correct = bool(res.get("correct"))
                key = "right" if correct else (tag or "other")
                counts[key] += 1
                if tag and not correct:
                    miscount[tag][0] += 1
                    miscount[tag][1].add(s)
            for key, n in sorted(counts.items(), key=lambda kv: -kv[1]):
                distractors.append(
                    {
                        "slot": s,
                        "phase": phase,
                        "answer": "right answer" if key == "right" else MISCONCEPTIONS.get(key, "another wrong option"),
                        "misconception": key if key not in ("right", "other") else "",
                        "count": stats.count_cell(n),
                        "share": n / total if _ok(total) and not stats.suppress(n) else None,
                    }
                )
    return rows, distractors, {k: (v[0], v[1]) for k, v in miscount.items()}


def _steps(by_actor: Mapping[str, list[Record]], items: list[ItemRow]) -> tuple[list[StepRow], StepRow | None]:
    seconds: dict[int, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    level: dict[int, dict[str, int]] = defaultdict(dict)
    for actor, evs in by_actor.items():
        evs = sorted(evs, key=lambda e: e["timestamp"])
        for i, e in enumerate(evs):
            step = e["context"].get("step")
            if e["verb"] == "viewed" and e["object"].startswith("lesson/step/"):
                step = int(e["object"].rsplit("/", 1)[1])
                nxt = next((x["timestamp"] for x in evs[i + 1 :] if x["verb"] in ("viewed", "started")), None)
                if nxt is not None:
                    seconds[step][actor] += min(IDLE_CAP, (nxt - e["timestamp"]) / 1000)
            if step is not None and e["verb"] in LEVEL_OF and e["context"].get("phase") == "path":
                level[step][actor] = max(level[step].get(actor, 0), LEVEL_OF[e["verb"]])
    post: defaultdict[str, list[float]] = defaultdict(list)  # objective -> its slots' post-test difficulties
    for r in items:
        if r["phase"] == "post" and r["difficulty"] is not None:
            post[r["objective"]].append(r["difficulty"])
    objectives_at: defaultdict[int, list[str]] = defaultdict(list)
    for key, (_, where) in OBJECTIVES.items():
        for s in where:
            objectives_at[step_index(s)].append(key)
    rows: list[StepRow] = []
    for k, step in enumerate(STEPS, start=1):
        who = set(seconds[k]) | set(level[k])
        n = len(who)
        diffs = [d for o in objectives_at[k] for d in post[o]]
        levels = sorted(level[k].values())
        rows.append(
            {
                "step": k,
                "title": step.title,
                "n": stats.count_cell(n),
                "median_seconds": median(seconds[k].values()) if _ok(len(seconds[k])) else None,
                "level": LEVELS[levels[len(levels) // 2]] if _ok(len(levels)) else None,
                "objectives": ", ".join(objectives_at[k]),
                "post_correct": sum(diffs) / len(diffs) if diffs else None,
            }
        )
    graded = [(correct, r) for r in rows if (correct := r["post_correct"]) is not None]
    weakest = min(graded, key=lambda g: g[0])[1] if graded else None
    return rows, weakest
