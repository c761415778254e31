"""Table 3 at toy scale: the shipped measurements, the notices computed from them, and the page that shows them.

Every number of the page's section is read from assets/ablations.json (a changed file changes the page), and
the file's numbers come back when the script trains a row again (one row, one seed, within the file's spread).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math

import pytest

from bench.ablations import rows as ablation_rows
from bench.ablations import seed_record, settings_of
from bench.training_runs import Spec, measure
from explain import ablations
from explain.paper import TABLE3
from model import train_settings
from tests.apptest_util import all_text, figures, no_exception, read_table, run_page, tables
from ui.widgets import markdown_table, md
from viz import ablations as va


@pytest.fixture(scope="module")
def shipped() -> dict:
    return ablations.read()


def row(data: dict, label: str) -> dict:
    return next(r for r in data["rows"] if r["label"] == label)


# --- the shipped file ------------------------------------------------------------------------------------


def test_the_file_has_every_row_of_the_script_for_the_page_default(shipped):
    base = train_settings.DEFAULTS
    assert shipped["meta"]["base"] == dataclasses.asdict(base), "the page's default changed: run the script again"
    assert [(r["group"], r["label"], r["changes"]) for r in shipped["rows"]] == [
        (g, label, changes) for g, label, changes in ablation_rows(base)
    ]
    assert len(shipped["rows"]) >= 8 and set(va.groups(shipped)) == {"A", "B", "C", "D", "E"}
    for r in shipped["rows"]:
        assert r["settings"] == settings_of(base, r["changes"])
        assert len(r["seeds"]) == shipped["meta"]["seeds"] >= 3
        assert [s["seed"] for s in r["seeds"]] == list(range(shipped["meta"]["seeds"]))


# How far one seed trained again may land from the file's seeds. On the machine and torch that wrote the file
# a seed comes back identical; on another CPU (other vector instructions, another order of summation) the same
# seed follows another trajectory. Measured: the base row's seed 0 on an AMD EPYC ended at 0.915 exact match
# (the file's seeds: 0.981, 0.966, 0.964), its seeds 1 and 2 at 0.966 and 0.968; all three reached 95 % at
# step 350 (the file's: 400, 350, 300). A broken training script lands far outside either margin.
EXACT_MATCH_MARGIN = 0.07
STEPS_MARGIN = 100


def test_a_row_trained_again_lands_within_the_files_spread(shipped):
    """The script's measurement, repeated for the base row's first seed: the file's figures, within the spread of
    its seeds and the margins another machine needs (above)."""
    base = row(shipped, va.base_row(shipped)["label"])
    again = seed_record(measure(Spec(base["label"], base["settings"], seed=0)))
    ems = [s["exact_match"] for s in base["seeds"]]
    assert min(ems) - EXACT_MATCH_MARGIN <= again["exact_match"] <= min(1.0, max(ems) + EXACT_MATCH_MARGIN)
    steps = [s["steps_to_95"] for s in base["seeds"]]
    if None not in steps:
        assert again["steps_to_95"] is not None
        assert min(steps) - STEPS_MARGIN <= again["steps_to_95"] <= max(steps) + STEPS_MARGIN


def test_without_positions_the_toy_set_cannot_be_learned(shipped):
    """Word order carries the toy grammar (who sees whom): without positional encoding no seed comes near the base."""
    none = next(r for r in shipped["rows"] if r["changes"] == {"positions": "none"})
    base = va.base_row(shipped)
    assert max(s["exact_match"] for s in none["seeds"]) < min(s["exact_match"] for s in base["seeds"]) - 0.05
    assert va.verdict(none, shipped) == "worse"


# --- reading and checking ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "spoil, words",
    [
        (lambda d: d.pop("rows"), "'rows'"),
        (lambda d: d["rows"].append(copy.deepcopy(d["rows"][0])), "exactly one base row"),
        (lambda d: d["rows"][1].update(group="Z"), "needs a group"),
        (lambda d: d["rows"][1]["seeds"][0].update(exact_match=1.5), "out of range"),
        (lambda d: d["rows"][1]["seeds"][0].update(steps_to_95=10**6), "out of range"),
        (lambda d: d["rows"][1]["seeds"][0].update(bleu=float("nan")), "out of range"),
        (lambda d: d["rows"][1]["seeds"][0].pop("bleu"), "exactly seed"),
        (lambda d: d["rows"][1].update(seeds=[]), "no seeds"),
        (lambda d: d["meta"].pop("steps"), "meta must give"),
    ],
)
def test_a_malformed_file_is_refused(shipped, tmp_path, spoil, words):
    data = copy.deepcopy(shipped)
    spoil(data)
    path = tmp_path / "ablations.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ablations.AblationsError, match=words):
        ablations.read(path)


def test_unreadable_file(tmp_path):
    with pytest.raises(ablations.AblationsError, match="cannot read"):
        ablations.read(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ablations.AblationsError, match="cannot read"):
        ablations.read(tmp_path / "bad.json")


# --- what the notices compute -----------------------------------------------------------------------------------


def synthetic(
    base_steps: list,
    row_steps: list,
    base_em=(0.96, 0.97, 0.98),
    row_em=(0.96, 0.97, 0.98),
    changes: dict | None = None,
    group: str = "B",
) -> dict:
    def seeds(steps, ems):
        return [
            {"seed": i, "exact_match": e, "bleu": 100 * e, "coref_accuracy": 1.0, "steps_to_90": None, "steps_to_95": s}
            for i, (s, e) in enumerate(zip(steps, ems, strict=True))
        ]

    base = {"d_model": 64, "n_heads": 4, "dropout": 0.0, "label_smoothing": 0.1, "n_layers": 1, "d_ff": 128}
    return {
        "meta": {"steps": 600, "eval_every": 50, "seeds": 3, "base": base, "command": "c", "measured": "m"},
        "rows": [
            {
                "group": "base",
                "label": "base",
                "changes": {},
                "settings": base,
                "parameters": 10,
                "seeds": seeds(base_steps, base_em),
            },
            {
                "group": group,
                "label": "the row",
                "changes": changes or {"key_size": 4},
                "settings": base,
                "parameters": 9,
                "seeds": seeds(row_steps, row_em),
            },
        ],
    }


@pytest.mark.parametrize(
    "base_steps, row_steps, row_em, verdict",
    [
        ([400, 450, 500], [550, 600, None], (0.96, 0.97, 0.98), "worse"),  # every seed later than every base seed
        ([400, 450, 500], [450, 500, 550], (0.96, 0.97, 0.98), "same"),  # overlapping: within the spread
        ([400, 450, 500], [300, 350, 350], (0.96, 0.97, 0.98), "better"),
        ([400, 450, 500], [450, 500, 500], (0.90, 0.91, 0.92), "worse"),  # same speed, every final exact match lower
        ([400, 450, 500], [300, 300, 300], (0.90, 0.91, 0.92), "mixed"),
    ],
)
def test_a_row_matters_only_when_its_seeds_lie_apart_from_the_bases(base_steps, row_steps, row_em, verdict):
    data = synthetic(base_steps, row_steps, row_em=row_em)
    assert va.verdict(data["rows"][1], data) == verdict


def test_the_notice_says_what_lies_apart_at_the_budget_and_why_the_toy_may_disagree():
    data = synthetic([400, 450, 500], [450, 500, 550])  # a smaller d_k, within the spread: the paper found it worse
    text = va.group_notice(data, "B")
    assert text.startswith("At 600 steps, no row lies apart from the base in all 3 seeds.")
    assert (
        "Within the base's spread (the base reached 95% after 450 (400–500) steps, final exact match "
        "97.0 (96.0–98.0)%)" in text
    )
    assert "the row came out same (expected: worse): plausible, because " + va.WHY["key_size"][0] in text
    data = synthetic([400, 450, 500], [550, 600, None])
    text = va.group_notice(data, "B")
    assert text.startswith(
        "At 600 steps, apart from the base in all 3 seeds: the row (worse: 2 of 3 seeds reached 95% "
        "within 600 steps (after 575 (550–600))"
    )
    assert "by chance 0.10 of the time per metric (about 1 in 10)" in text
    assert "As the paper found: the row (worse)." in text and "Unlike the paper" not in text
    assert "attered" not in text  # audit 4, B5: three seeds apart is a hint, not "mattered"


def test_the_chance_of_lying_apart_is_counted_from_every_split_of_the_seeds():
    """Audit 4, B5: 2 / C(2n, n), checked by enumerating every way to split 2n exchangeable runs into two groups."""
    from itertools import combinations

    from explain.seeds import chance_apart

    for n in (1, 2, 3, 4):
        runs = range(2 * n)
        apart = sum(
            1 for a in combinations(runs, n) for b in [set(runs) - set(a)] if max(a) < min(b) or min(a) > max(b)
        )
        assert chance_apart(n) == pytest.approx(apart / math.comb(2 * n, n))
    assert chance_apart(3) == pytest.approx(0.1)


def test_a_group_that_does_not_move_one_way_is_flagged_not_explained(shipped):
    """Audit 4, B5: on the shipped file, d_k 8 comes out worse and d_k 4 within the spread: not monotone in d_k, so
    the notice calls it likely seed noise and explains neither (it used to explain d_k 4 with "a few dimensions are
    enough", which the d_k 8 row contradicts). Monotone groups are not flagged."""
    verdicts = {r["label"]: va.verdict(r, shipped) for r in va.group_rows(shipped, "B")}
    assert sorted(verdicts.values()) == ["same", "worse"]
    text = va.group_notice(shipped, "B")
    assert "seed noise is likely; neither is explained here" in text
    assert va.WHY["key_size"][0] not in text and va.WHY["key_size"][1] not in text
    for group in ("A", "C", "D", "E"):
        assert "seed noise" not in va.group_notice(shipped, group)
    assert va.group_notice(synthetic([400, 450, 500], [550, 600, None]), "B").count("seed noise") == 0


def test_every_verdict_names_its_budget_and_dropout_claims_no_unmeasured_over_fitting(shipped):
    """Audit 4, B6: "worse" at a fixed 500-step budget may mean slower, so every verdict says "At 500 steps"; the
    dropout row no longer claims a few hundred steps are "too short to over-fit" (500 steps × 96 pairs is 10.7 passes
    over the set, and no train vs held-out gap is measured)."""
    steps = shipped["meta"]["steps"]
    for group in va.groups(shipped):
        assert va.group_notice(shipped, group).startswith(f"At {steps} steps, ")
    d = va.group_notice(shipped, "D")
    assert "too short to over-fit" not in d and "no gap between training and held-out scores is measured" in d
    from pages.content.why_attention import ablations_setup

    setup = ablations_setup(shipped["meta"], len(shipped["rows"]))
    assert f"Every verdict is at {steps} steps" in setup and "0.10 of the time" in setup and "mattered" not in setup
    # measured on one computer: the same recipe and seed ended 91.5% on another one where the file says 98.1% for
    # seed 0 (float rounding differs between processors and training amplifies it), so the page says so
    meta = shipped["meta"]
    assert f"on one computer ({meta['cpus']} cores, torch {meta['torch']})" in setup
    assert f"{steps} updates amplify the difference" in setup and "the same recipe and seed can end" in setup


def test_the_papers_findings_say_what_its_table_says(shipped):
    """Audit 4, B7: group C's finding no longer says every bigger model helps (N = 8 is below the base on BLEU);
    group E's says section 3.2.1 only suspects why to scale; rows not in the paper are "as expected", not "as the
    paper found"."""
    from explain.paper import TABLE3_FINDINGS

    base = next(v for v in TABLE3 if v.group == "base")
    n8 = next(v for v in TABLE3 if dict(v.changes).get("n_layers") == 8)
    assert n8.bleu < base.bleu and f"N = 8 scores {n8.bleu} against the base's {base.bleu}" in TABLE3_FINDINGS["C"]
    assert "all help" not in TABLE3_FINDINGS["C"]
    assert "only suspects" in TABLE3_FINDINGS["E"] and "explains why" not in TABLE3_FINDINGS["E"]
    e = va.group_notice(shipped, "E")
    found = e.split("As the paper found: ")[1].split(".")[0]
    assert "(not in the paper)" not in found and "As expected: no positional encoding (not in the paper) (worse)" in e
    a = va.group_notice(shipped, "A")  # every row the paper agrees with says its verdict: h = 8 did not "hurt too"
    assert "h = 8, d_k = d_v = 8 (about the same)" in a and "h = 1, d_k = d_v = 64 (worse)" in a, a


def test_the_papers_rows_are_the_papers():
    frame = va.paper_frame("A")
    assert frame["row"].tolist()[:2] == ["base", "h = 1, d_k = 512, d_v = 512"]
    assert frame["BLEU (dev)"].tolist() == [f"{v.bleu:.1f}" for v in TABLE3 if v.group in ("base", "A")]
    assert va.paper_frame("E")["row"].tolist()[-1] == "learned positional embedding instead of sinusoids"


# --- the page ------------------------------------------------------------------------------------------------


def test_every_number_of_the_section_comes_from_the_file(shipped, tmp_path, monkeypatch):
    """A file with other numbers (every exact match lowered, every step later, new labels) gives a page with those
    numbers: nothing in the section is written by hand."""
    data = copy.deepcopy(shipped)
    for i, r in enumerate(data["rows"]):
        r["label"] = f"{r['label']} #{i}"
        for s in r["seeds"]:
            s["exact_match"] = round(s["exact_match"] * 0.9, 4)
            s["steps_to_95"] = None if s["steps_to_95"] is None else min(s["steps_to_95"] + 50, data["meta"]["steps"])
    path = tmp_path / "ablations.json"
    path.write_text(json.dumps(data, ensure_ascii=False))
    monkeypatch.setattr(ablations, "PATH", path)
    for group in ("A", "E"):
        at = run_page("why_attention", why_ablation_group=group)
        no_exception(at)
        shown = tables(at)  # small tables: compared as written (rounded), read back
        assert any(f.equals(read_table(markdown_table(va.rows_frame(data, group), index=False))) for f in shown)
        assert any(f.equals(read_table(markdown_table(va.paper_frame(group), index=False))) for f in shown)
        assert "**Notice:** " + md(va.group_notice(data, group)) in [i.value for i in at.info]
    fig = next(f for f in figures(at) if "Steps to 95%" in f["layout"].get("title", {}).get("text", ""))
    labels = [t["y"][0] for t in fig["data"]]
    assert labels[0] == "base" and labels[1] == f"(A) {data['rows'][1]['label']}"
    assert [t["x"] for t in fig["data"]][0] == [
        s["steps_to_95"] or data["meta"]["steps"] + data["meta"]["eval_every"] for s in data["rows"][0]["seeds"]
    ]


def test_without_the_file_the_page_says_how_to_make_it(tmp_path, monkeypatch):
    monkeypatch.setattr(ablations, "PATH", tmp_path / "none.json")
    at = run_page("why_attention")
    no_exception(at)
    assert "python -m bench.ablations --write" in all_text(at)


def test_the_steps_chart_shows_every_seed_even_where_two_share_a_step(shipped):
    """One dot per step a row's seeds reached 95% at, numbered with its seeds when more than one: every seed is
    counted once, at its step; a seed that never got there is an × past the run's end (its dotted line)."""
    fig = va.steps_figure(shipped)
    meta = shipped["meta"]
    late = meta["steps"] + meta["eval_every"]
    traces = [t for t in fig.data if t.type == "scatter"]
    assert len(traces) == len(shipped["rows"])
    shared = 0
    for r, t in zip(shipped["rows"], traces, strict=True):
        counts = [int(n.split()[0]) if n else 1 for n in t.text]
        assert sum(counts) == len(r["seeds"])
        want = sorted(s["steps_to_95"] if s["steps_to_95"] is not None else late for s in r["seeds"])
        assert sorted(x for x, n in zip(t.x, counts, strict=True) for _ in range(n)) == want
        assert [sym == "x" for sym in t.marker.symbol] == [x == late for x in t.x]
        shared += sum(n > 1 for n in counts)
    assert shared > 0  # the shipped runs have seeds at the same step: the case this chart had hidden
    assert any(s.x0 == meta["steps"] for s in fig.layout.shapes)
