"""The report's statistics, checked honestly: a simulated cohort answering from a two-parameter IRT model with a
known gain and known item parameters (the report must recover the gain within its interval and rank the items'
discrimination as generated), the formulas against hand-computed values, and the suppression of small cells."""

from __future__ import annotations

import math

import numpy as np
import pytest

from explain import report, stats
from explain.instrument import OBJECTIVES
from explain.questionnaires import FEEL, SUS, TLX

N_ITEMS = 16
OBJ = [o for o in OBJECTIVES for _ in range(2)][:N_ITEMS]


def instrument() -> dict:
    """An instrument of the shape the app builds: 16 slots, 4 options, the right one first, two misconceptions."""
    forms = {}
    for f in "AB":
        forms[f] = [
            {
                "id": f"{f}{s:02d}",
                "objective": OBJ[s - 1],
                "template": "row_rest",
                "text": "?",
                "options": ["right", "b", "c", "d"],
                "answer": 0,
                "explain": "",
                "tags": [None, "uniform", "softmax_range", None],
            }
            for s in range(1, N_ITEMS + 1)
        ]
    return {"version": "sim", "forms": forms}


def p_correct(theta, a, b):
    return 1 / (1 + np.exp(-a * (theta - b)))


def cohort(n: int, gain: float, a, b, seed: int, conditions=("all",), extra: dict | None = None):
    """Participants and the events the study store would hold for them: pre- and post-test answers drawn from
    the 2PL model (ability θ ~ N(0, 1) before, θ + gain (+ extra[condition]) after; a wrong answer picks b, c or d)."""
    rng = np.random.default_rng(seed)
    people, events = [], []
    for i in range(n):
        actor, cond = f"p-{i:04d}", conditions[i % len(conditions)]
        first = "AB"[i // len(conditions) % 2]
        people.append(
            {"actor": actor, "condition": cond, "first_form": first, "phase": "done", "joined": 0, "phase_at": 0}
        )
        theta = rng.normal()
        for phase, t in (("pre", theta), ("post", theta + gain + (extra or {}).get(cond, 0.0))):
            form = first if phase == "pre" else ("B" if first == "A" else "A")
            right = rng.random(N_ITEMS) < p_correct(t, a, b)
            for s in range(N_ITEMS):
                choice = 0 if right[s] else int(rng.integers(1, 4))
                events.append(
                    {
                        "actor": actor,
                        "verb": "answered",
                        "object": f"item/{form}{s + 1:02d}",
                        "result": {"choice": choice, "correct": bool(right[s]), "confidence": 3, "latency_ms": 1000},
                        "context": {"phase": phase, "form": form, "condition": cond},
                        "timestamp": i,
                    }
                )
            events.append(
                {
                    "actor": actor,
                    "verb": "completed",
                    "object": f"phase/{phase}",
                    "result": {},
                    "context": {"phase": phase, "form": form, "condition": cond},
                    "timestamp": i,
                }
            )
    return people, events


def true_gain(gain: float, a, b) -> float:
    """The population's ⟨g⟩ under the model: E over θ ~ N(0, 1) by Gauss-Hermite quadrature."""
    x, w = np.polynomial.hermite_e.hermegauss(80)
    w = w / w.sum()
    pre = float(sum(wi * p_correct(xi, a, b).mean() for xi, wi in zip(x, w, strict=True)))
    post = float(sum(wi * p_correct(xi + gain, a, b).mean() for xi, wi in zip(x, w, strict=True)))
    return (post - pre) / (1 - pre)


A = np.array([0.35, 2.6, 0.9, 1.8, 0.5, 2.2, 1.2, 0.7, 3.0, 1.5, 0.45, 2.0, 1.0, 0.6, 2.4, 1.35])
B = np.linspace(-0.8, 0.8, N_ITEMS)[np.random.default_rng(7).permutation(N_ITEMS)]


def test_gain_recovered_by_a_simulated_cohort_of_200():
    people, events = cohort(200, 1.0, A, B, seed=3)
    rep = report.build(instrument(), people, events)
    truth = true_gain(1.0, A, B)
    assert rep.n_matched == 200 and rep.gain.n == 200
    assert rep.gain.contains(truth), (rep.gain, truth)
    assert 0.05 < rep.gain.high - rep.gain.low < 0.2  # an interval that says something


def test_gain_interval_covers_the_truth_about_95_percent_of_the_time():
    truth = true_gain(0.8, A, B)
    hits = 0
    for seed in range(40):
        rng = np.random.default_rng(1000 + seed)
        theta = rng.normal(size=200)
        pre = (rng.random((200, N_ITEMS)) < p_correct(theta[:, None], A, B)).mean(1)
        post = (rng.random((200, N_ITEMS)) < p_correct(theta[:, None] + 0.8, A, B)).mean(1)
        hits += stats.hake_gain(pre, post, seed=seed, resamples=1000).contains(truth)
    assert hits >= 34, f"covered the true gain in {hits} of 40 cohorts"


def test_item_discrimination_ranked_as_generated():
    people, events = cohort(200, 1.0, A, B, seed=5)
    rep = report.build(instrument(), people, events)
    pre = [r for r in rep.items if r["phase"] == "pre"]
    measured = [r["discrimination"] for r in sorted(pre, key=lambda r: r["slot"])]
    rho = stats.spearman(A, measured)
    assert rho > 0.8, rho
    assert np.argmax(measured) in np.argsort(A)[-3:] and np.argmin(measured) in np.argsort(A)[:3]


def test_gain_hedges_g_between_conditions_sees_the_better_condition():
    people, events = cohort(
        200, 0.5, A, B, seed=11, conditions=("predict-off", "predict-on"), extra={"predict-on": 0.8}
    )
    rep = report.build(instrument(), people, events, first="predict-off")
    assert rep.hedges.low > 0 and rep.hedges.n == 200
    assert rep.gain_by_condition["predict-on"].value > rep.gain_by_condition["predict-off"].value


def test_gain_formulas_against_hand_computed_values():
    g = stats.hake_gain([0.25, 0.5], [0.75, 0.75])  # ⟨pre⟩ 0.375, ⟨post⟩ 0.75: (0.75 - 0.375) / 0.625
    assert g.value == pytest.approx(0.6)
    x, y = [1.0, 2.0, 3.0, 4.0], [3.0, 4.0, 5.0, 6.0]  # means 2.5 and 4.5, both sd 1.29099
    h = stats.hedges_g(x, y)
    d = 2 / math.sqrt(5 / 3)
    assert h.value == pytest.approx(d * (1 - 3 / (4 * 8 - 9)))
    assert stats.point_biserial([1, 0, 1, 0], [3, 1, 2, 2]) == pytest.approx(1 / math.sqrt(2))  # 0.25 / (0.5 · √0.5)
    assert stats.point_biserial([1, 1, 1], [1, 2, 3]) is None  # nobody wrong: no discrimination to speak of
    assert stats.sus_score([5, 1] * 5) == 100 and stats.sus_score([3] * 10) == 50
    assert stats.tlx_raw([10, 20, 30, 40, 50, 60]) == 35


def test_item_report_suppresses_cells_under_five_participants():
    people, events = cohort(4, 1.0, A, B, seed=1)
    rep = report.build(instrument(), people, events)
    assert rep.gain is None and rep.pre_mean is None and rep.n_matched == 4
    assert all(r["difficulty"] is None and r["n"] == "<5" for r in rep.items)
    assert all(d["count"] in ("<5", 0) or d["count"] >= 5 for d in rep.distractors)
    assert all(d["share"] is None for d in rep.distractors)
    assert rep.notes


def test_study_report_sets_feeling_of_learning_beside_gain():
    people, events = cohort(30, 1.0, A, B, seed=2)
    for i, p in enumerate(people):
        ratings = [(k, 3) for k, _ in SUS] + [(k, 50) for k, _ in TLX] + [(FEEL[0][0], 1 + i % 7)]
        for k, value in ratings:
            events.append(
                {
                    "actor": p["actor"],
                    "verb": "rated",
                    "object": f"survey/{k}",
                    "result": {"value": value},
                    "context": {"phase": "survey"},
                    "timestamp": 9,
                }
            )
    rep = report.build(instrument(), people, events)
    assert rep.sus.value == 50 and rep.tlx_raw.value == 50 and len(rep.feel) == 30
    assert rep.feel_gain_rho is not None and -1 <= rep.feel_gain_rho <= 1


def test_study_report_time_and_engagement_per_lesson_step():
    people, events = cohort(6, 1.0, A, B, seed=4)
    for p in people:
        base = 10_000
        for k, (verb, obj) in enumerate(
            [
                ("viewed", "lesson/step/8"),
                ("changed", "control/iv_scale"),
                ("viewed", "lesson/step/9"),
                ("viewed", "page/decoder"),
            ]
        ):
            events.append(
                {
                    "actor": p["actor"],
                    "verb": verb,
                    "object": obj,
                    "result": {},
                    "context": {"phase": "path", "step": 8 if k < 2 else 9},
                    "timestamp": base + k * 30_000,
                }
            )
    rep = report.build(instrument(), people, events)
    step8, step9 = rep.steps[7], rep.steps[8]
    assert step8["median_seconds"] == 60 and step8["level"] == "changing"
    assert step9["median_seconds"] == 30 and step9["level"] == "viewing" and step9["n"] == 6
    assert rep.steps[0]["n"] == 0 and rep.steps[0]["median_seconds"] is None


def test_study_report_notices_state_the_reports_numbers():
    from viz import study

    people, events = cohort(60, 1.0, A, B, seed=8, conditions=("predict-off", "predict-on"))
    rep = report.build(instrument(), people, events, first="predict-off")
    line = study.gain_notice(rep)
    assert f"⟨g⟩ = {rep.gain.value:.2f} (95% interval {rep.gain.low:.2f} to {rep.gain.high:.2f})" in line
    assert f"from {rep.pre_mean:.0%} to {rep.post_mean:.0%}" in line and f"Hedges' g = {rep.hedges.value:.2f}" in line
    hard = min((r for r in rep.items if r["phase"] == "post"), key=lambda r: r["difficulty"])
    items = study.items_notice(rep)
    assert f"item {hard['slot']} " in items and f"{hard['difficulty']:.0%} right" in items
    assert "appears from 5" in study.gain_notice(report.build(instrument(), *cohort(3, 1.0, A, B, seed=1)))
