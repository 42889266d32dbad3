"""The near-tie report a curator can act on (issue 35): the status in words, every reversed pair most robust first
with its fold named (or how many more and how to get them), and comments on degenerate protocol tables (Table 5
where the matched control has no choice, Table 7 gaps with no pair, Table 11's observed rate outside its own
bootstrap range).  Real audits on simulated responses; the numbers themselves are untouched (test_neartie*)."""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import pytest

from benchloupe.engine.neartie import AuditConfig, run_audit
from benchloupe.engine.neartie.matched import matched_controls
from benchloupe.jobs.audit import report_markdown
from tests.unit.test_neartie_protocol import _inputs, simulate

FAST = AuditConfig(dimensions=(1, 2, 4, 8), controls=99)
SOURCES = {"families": "the stored family labels", "groups": "stored item groups"}


@pytest.fixture(scope="module")
def sim():
    return simulate(seed=0, n_owners=60, n_items=120)


@pytest.fixture(scope="module")
def result(sim):
    """Primary audit plus a 0.0001 pp gap (no untied pair that close) and a composition bootstrap."""
    return run_audit(*sim, replace(FAST, gap_curve=(0.0001, 1.0), bootstrap=200))


def _report(result) -> str:
    keys = np.array([f"item-{i}" for i in range(result.summary["items"])])
    return report_markdown(result, "sim", 7, keys, 0, SOURCES)


def _pair_rows(text: str) -> list[list[str]]:
    section = text[text.index("## Reversed near-tie pairs"):]
    return [[c.strip() for c in line.strip("|").split(" | ")] for line in section.splitlines()
            if re.match(r"^\| \d+ \|", line)]


def test_status_is_explained_in_words(result):
    assert result.summary["status"] == "no_significant_excess_detected"
    text = _report(result)
    words = text[text.index("Status:"):text.index("## Table 1")]
    assert "not evidence of equivalence" in words
    assert f"{result.summary['eligible_pairs']} near-tie pairs" in words


@pytest.mark.parametrize("status, phrase", [
    ("excess_sensitivity_detected", "not about which model is better"),
    ("insufficient_eligible_pairs", "nothing to test"),
    ("undefined_random_controls", "withholds inference"),
])
def test_every_status_has_words(status, phrase):
    from benchloupe.engine.neartie.report import status_words

    summary = {"status": status, "eligible_pairs": 0 if status == "insufficient_eligible_pairs" else 12,
               "rate": 0.5, "random_median": 0.25, "excess_pp": 25.0, "p": 0.01}
    assert phrase in status_words(summary, FAST)


def test_every_reversed_pair_is_listed_most_robust_first_with_its_fold(result):
    pairs = result.tables["pairs"]
    reversed_ = int((np.asarray(pairs["reversed"]) & ~np.asarray(pairs["tied"])).sum())
    assert reversed_ == result.summary["reversals"] > 50  # the old report stopped at 50 without a word
    text = _report(result)
    rows = _pair_rows(text)
    assert len(rows) == reversed_ and f"All {reversed_} reversed pairs" in text
    robustness = [float(r[1].rstrip("%")) for r in rows]
    assert robustness == sorted(robustness, reverse=True)
    assert {r[2] for r in rows} == {"0: discovery -> validation", "1: validation -> discovery"}
    assert "--run 7 --name pairs" in text  # how to get them as data


def test_a_capped_list_says_how_many_more_and_how_to_get_them(result):
    from benchloupe.jobs.audit import reversed_pairs_lines

    keys = np.array([f"item-{i}" for i in range(result.summary["items"])])
    text = "\n".join(reversed_pairs_lines(result, "sim", 7, keys, listed=10))
    n = result.summary["reversals"]
    assert len(_pair_rows(text)) == 10 and f"The 10 most robust of {n}" in text
    assert f"{n - 10} more reversed pairs" in text
    assert "`benchloupe export run-artifact --run 7 --name pairs --format csv -o pairs.csv`" in text


def test_pair_rows_escape_pipes_in_names(sim):
    y, ids, fams, owners, groups = sim
    ids = [i.replace("/", "|") for i in ids]
    res = run_audit(y, ids, fams, owners, groups, FAST)
    rows = _pair_rows(_report(res))
    assert rows and all(len(r) == 8 for r in rows)


def test_table7_says_no_pairs_where_a_gap_has_none(result):
    curve = result.secondary["gap-threshold curve"]
    assert int(curve["pairs"].iloc[0]) == 0 and curve["bootstrap_rate_lo"].iloc[0] is not None  # a range there
    text = _report(result)
    table = text[text.index("## Table 7"):text.index("## Table 11")]
    for row in ("| sim |", "| p |", "| bootstrap 95% range |"):
        line = next(ln for ln in table.splitlines() if ln.startswith(row))
        assert line.split(" | ")[1] == "no pairs"
    assert "No near-tie pair at 0.0001 pp" in table


def test_table11_explains_an_observed_rate_outside_its_bootstrap_range(result):
    boot = result.secondary["composition bootstrap"].iloc[0]
    assert result.summary["rate"] > boot["rate_hi"]  # as the paper's BBH row
    text = _report(result)
    section = text[text.index("## Table 11"):text.index("## Inputs")]
    assert "not confidence intervals" in section and "lies above the range" in section
    assert "frozen" in section


def test_table5_says_when_the_matched_control_has_no_choice(sim):
    """Mostly one-item blueprint cells (as on a benchmark with many small subjects): each control must draw
    exactly the low-DIF items there, so every ratio is 1.000; the report says so, with the counts."""
    y, ids, fams, owners, _ = sim
    groups = [f"solo{i}" if i < 116 else "big" for i in range(120)]
    res = run_audit(y, ids, fams, owners, groups, FAST)
    table5, detail = matched_controls(res, _inputs(res, y, ids, fams, owners, groups), 99)
    folds = detail["folds"]
    assert (folds["single_item_cells"] >= 116).all() and (folds["fixed_cells"] == folds["cells"]).all()
    cells, single = int(folds["cells"].iloc[0]), int(folds["single_item_cells"].iloc[0])
    text = replace(res, protocol={"table5_matched_controls": table5, "table5_folds": folds}).to_markdown("sim")
    section = text[text.index("## Table 5"):]
    assert "| sim | 1.000 | 1.000 | 1.000 |" in section
    assert "Every ratio prints 1.000 because the matched control has no choice" in section
    assert f"{cells} of {cells} cells ({single} holding a single item)" in section
