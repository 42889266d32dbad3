"""BenchFill building blocks (paper 003, Algorithm 2 lines 4, 7, 8; Table 2; grading of issue 5)."""

from __future__ import annotations

import numpy as np
import pytest

from benchloupe.engine.benchfill import (
    BenchFillConfig,
    extract_choice,
    gap_fill_metrics,
    grade_locally,
    nearest_items,
    normalise_answer,
    oracle_insertions,
    precheck_child,
    reference_list,
    top_k_gap_sum,
    top_k_gaps,
)
from benchloupe.engine.benchfill_types import ChildDraft, FillItem


def items(zs):
    return [FillItem(f"i{k}", f"q{k}", "1", z) for k, z in enumerate(zs)]


def test_defaults_are_the_papers():
    c = BenchFillConfig()
    assert (c.n_parents, c.n_children, c.reference_budget, c.max_rounds, c.tolerance, c.prompt_scale) == (
        4, 4, 16, 8, 0.01, 10.0)


def test_parents_are_the_r_nearest_and_references_split_half_below_half_above():
    pool = items([0.1, 0.2, 0.3, 0.4, 0.45, 0.52, 0.6, 0.7, 0.8, 0.9])
    assert [p.z for p in nearest_items(pool, 0.5, 4)] == [0.52, 0.45, 0.4, 0.6]
    ref = reference_list(pool, 0.5, 4)
    assert [r.z for r in ref] == [0.4, 0.45, 0.52, 0.6]  # two closest below, two closest above, by difficulty
    # the paper's example: z* = 0.55 with 0.48, 0.50 below and 0.60, 0.62 above
    assert [r.z for r in reference_list(items([0.1, 0.48, 0.5, 0.6, 0.62, 0.9]), 0.55, 4)] == [0.48, 0.5, 0.6, 0.62]
    # one side short: the other side fills the budget
    assert [r.z for r in reference_list(items([0.1, 0.2, 0.3, 0.9]), 0.8, 4)] == [0.1, 0.2, 0.3, 0.9]


def test_gaps_include_the_end_points_and_oracle_halves_the_largest():
    z = np.array([0.1, 0.2, 0.8])
    assert top_k_gaps(z, 2) == [(0.2, 0.8), (0.8, 1.0)]
    assert top_k_gap_sum(z, 3) == pytest.approx(0.6 + 0.2 + 0.1)
    assert oracle_insertions(np.array([0.1, 0.2, 0.7]), 2) == pytest.approx([0.45, 0.85])
    m = gap_fill_metrics(z, [0.5], [0.5], k=1)
    assert m.reduction_pct == pytest.approx(50.0) and m.target_dev == 0.0


def test_grading_short_answers_choice_letters_and_free_form():
    child = ChildDraft("What is 1000 + 234?", "1,234")
    assert grade_locally(child, "Let me add.\nAnswer: 1234", "short")
    assert grade_locally(child, "so \\boxed{1234.0}", "short")
    assert not grade_locally(child, "Answer: 1235", "short")
    assert normalise_answer("The Eiffel Tower.") == normalise_answer("eiffel tower")
    mc = ChildDraft("Pick", "B", ("red", "blue", "green"))
    assert grade_locally(mc, "I think (B) is right.", "choice")
    assert grade_locally(ChildDraft("Pick", "blue", ("red", "blue")), "Answer: b", "choice")
    assert not grade_locally(mc, "Answer: C", "choice")
    assert extract_choice("Answer: Z", 3) is None
    assert grade_locally(ChildDraft("Explain", "because"), "anything", "free") is None


def test_prechecks_catch_empty_and_identical_children():
    parent = FillItem("p", "What is  2+2?", "4", 0.5)
    assert "empty" in precheck_child(ChildDraft("", "4"), parent, "short")
    assert "identical" in precheck_child(ChildDraft("what is 2+2?", "4"), parent, "short")
    assert "options" in precheck_child(ChildDraft("Pick", "D", ("a", "b")), parent, "choice")
    assert precheck_child(ChildDraft("What is 3+5?", "8"), parent, "short") is None
