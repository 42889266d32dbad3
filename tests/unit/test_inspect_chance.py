"""Inspect: chance only from a multiple-choice solver or scorer (issue 23, must-fix 2), on real inspect_ai logs
(tests/fixtures/real/inspect, written offline with ``mockllm/alpha``; see make_inspect_logs.py).

Before the fix the generation log below imported with ``chance == 0.25`` on both items (and the letter target
"B" turned into the choice "Jupiter")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchloupe.store.importers.inspect_log import multiple_choice_plan, parse_inspect

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real" / "inspect"
GEN_LOGS = sorted((REAL / "logs_gen").glob("*.eval")) + sorted((REAL / "json_gen").glob("*.json"))


@pytest.mark.parametrize("path", GEN_LOGS, ids=lambda p: p.suffix)
def test_generation_task_with_a_choices_field_gets_no_chance(path):
    p = parse_inspect(path)
    assert p.items["key"].tolist() == ["gc-1", "gc-2"]
    assert p.items["chance"].isna().all(), p.items["chance"].tolist()
    # the choices are kept as metadata, the target is the literal text the scorer compared with
    assert p.items["metadata"][1]["choices"] == ["Mars", "Jupiter", "Venus", "Mercury"]
    assert p.items["answer"].tolist() == ["48", "B"] and "answer_label" not in p.items["metadata"][1]
    assert p.correct.tolist() == [[1, 0]]


def test_multiple_choice_solver_still_sets_chance():
    mcq = next((REAL / "logs").glob("*_mcq_*.eval"))
    p = parse_inspect(mcq)
    assert p.items["chance"].tolist() == [0.25, 0.25] and p.items["answer"].tolist() == ["48", "Jupiter"]


def test_the_rule_reads_plan_steps_and_scorers():
    gen = json.loads(next((REAL / "json_gen").glob("*.json")).read_text())
    assert multiple_choice_plan(gen, "match") == (False, False)
    assert multiple_choice_plan(gen, None) == (False, False)
    mcq = json.loads(next((REAL / "json").glob("*_mcq_*.json")).read_text())
    assert multiple_choice_plan(mcq, "choice") == (True, False)
    several = {"plan": {"steps": [{"solver": "inspect_ai/multiple_choice", "params": {"multiple_correct": True}}]}}
    assert multiple_choice_plan(several, "choice") == (True, True)
    scorer_only = {"plan": {"steps": [{"solver": "my_solver"}]}, "eval": {"scorers": [{"name": "inspect_ai/choice"}]}}
    assert multiple_choice_plan(scorer_only, None) == (True, False)
    assert multiple_choice_plan({"plan": "x", "eval": []}, None) == (False, False)  # hostile shapes: no guess


def test_multiple_correct_chance_is_one_nonempty_subset(tmp_path):
    log = json.loads(next((REAL / "json").glob("*_mcq_*.json")).read_text())
    log["plan"]["steps"][0]["params"]["multiple_correct"] = True
    path = tmp_path / "several.json"
    path.write_text(json.dumps(log))
    assert parse_inspect(path).items["chance"].tolist() == [1 / 15, 1 / 15]
