"""HELM multiple-choice runs keep each instance's chosen reference (issue 33): a joint run's most likely
completion mapped back through its ``output_mapping``, a separate run's ``predicted_index`` stat; HELM's own score
stays. Run folders are written in the shape crfm-helm writes them (``run_spec.json``, ``per_instance_stats.json``,
``scenario_state.json`` with request states), their values simulated."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from benchloupe.store.importers.detect import parse_file
from tests.hostile import run_cli

LETTERS = "ABCD"


def _stat(name: str, value: float) -> dict:
    return {"name": {"name": name, "split": "test"}, "count": 1, "sum": value, "sum_squared": value * value,
            "min": value, "max": value, "mean": value, "variance": 0.0, "stddev": 0.0}


def _instance(j: int, key: int) -> dict:
    return {"input": {"text": f"Question {j}: which option?"}, "split": "test", "id": f"id{j}",
            "references": [{"output": {"text": f"opt{j}-{k}"}, "tags": ["correct"] if k == key else []}
                           for k in range(4)]}


def _run(root: Path, model: str, picks: list[int], keys: list[int], method: str) -> Path:
    """One HELM run folder: *picks* the reference each instance chose (-1: a letter outside the mapping)."""
    safe = model.replace("/", "_")
    name = f"mmlu:subject=anatomy,method={method},model={safe}"
    d = root / "benchmark_output" / "runs" / "v1" / name
    d.mkdir(parents=True)
    (d / "run_spec.json").write_text(json.dumps({
        "name": name, "scenario_spec": {"class_name": "helm.benchmark.scenarios.mmlu_scenario.MMLUScenario",
                                        "args": {"subject": "anatomy"}},
        "adapter_spec": {"method": method, "model": model, "model_deployment": model}}))
    per_instance, states = [], []
    for j, (pick, key) in enumerate(zip(picks, keys)):
        inst = _instance(j, key)
        stats = [_stat("exact_match", float(pick == key)), _stat("num_references", 4.0)]
        if method == "multiple_choice_joint":
            letter = LETTERS[pick] if pick >= 0 else "M"
            states.append({"instance": inst, "train_trial_index": 0, "reference_index": None, "request_mode": None,
                           "output_mapping": {LETTERS[k]: f"opt{j}-{k}" for k in range(4)},
                           "request": {"model": model, "prompt": "...", "max_tokens": 1, "temperature": 0.0},
                           "result": {"success": True, "cached": True, "request_time": 0.1, "completions": [
                               {"text": f" {letter}", "logprob": -0.2, "tokens": [{"text": f" {letter}",
                                                                                  "logprob": -0.2}]},
                               {"text": " Z", "logprob": -3.0, "tokens": []}]},
                           "num_train_instances": 5, "prompt_truncated": False})
        else:
            stats.append(_stat("predicted_index", float(pick)))
            for k in range(4):
                states.append({"instance": inst, "train_trial_index": 0, "reference_index": k,
                               "request_mode": "original", "output_mapping": None,
                               "request": {"model": model, "prompt": "...", "max_tokens": 0, "echo_prompt": True},
                               "result": {"success": True, "completions": [{"text": "...", "logprob": -4.0,
                                                                            "tokens": []}]},
                               "num_train_instances": 5, "prompt_truncated": False})
        per_instance.append({"instance_id": f"id{j}", "train_trial_index": 0, "stats": stats})
        # a perturbed copy answered otherwise: neither its score nor its choice counts
        per_instance.append({"instance_id": f"id{j}", "train_trial_index": 0,
                             "perturbation": {"name": "typo", "prob": 0.1},
                             "stats": [_stat("exact_match", 0.0), _stat("predicted_index", 3.0)]})
        states.append({**states[-1], "instance": {**inst, "perturbation": {"name": "typo"}},
                       "output_mapping": None if method != "multiple_choice_joint" else
                       {LETTERS[k]: f"opt{j}-{k}" for k in range(4)}})
    (d / "per_instance_stats.json").write_text(json.dumps(per_instance, indent=2))
    (d / "scenario_state.json").write_text(json.dumps({"adapter_spec": {"method": method, "model": model},
                                                       "request_states": states}))
    (d / "stats.json").write_text("[]")
    return d


def test_joint_and_separate_runs_keep_the_chosen_reference(tmp_path):
    keys = [2, 0, 1, 3]
    picks = [2, 3, -1, 3]  # right, wrong, a letter outside the mapping, right
    for method in ("multiple_choice_joint", "multiple_choice_separate_original"):
        d = _run(tmp_path / method, "openai/gpt2", picks if method.endswith("joint") else [2, 3, 0, 3], keys,
                 method)
        p = parse_file(d / "per_instance_stats.json")
        want = picks if method.endswith("joint") else [2, 3, 0, 3]
        assert p.options.tolist() == [want], method
        assert p.correct.tolist() == [[int(a == b) for a, b in zip(want, keys)]]  # HELM's exact_match
        assert p.option_labels == [[f"opt{j}-{k}" for k in range(4)] for j in range(4)]
        assert p.items["answer"].tolist() == [f"opt{j}-{k}" for j, k in enumerate(keys)]
        assert not p.score_from_options


def test_a_generation_run_keeps_no_options(tmp_path):
    d = _run(tmp_path, "openai/gpt2", [0, 1], [0, 0], "multiple_choice_separate_original")
    spec = json.loads((d / "run_spec.json").read_text())
    spec["adapter_spec"]["method"] = "generation"
    spec["name"] = spec["name"].replace("method=multiple_choice_separate_original", "method=generation")
    (d / "run_spec.json").write_text(json.dumps(spec))
    assert parse_file(d / "per_instance_stats.json").options is None


def test_helm_runs_with_a_contradicted_key_get_it_flagged_with_the_true_answer(tmp_path):
    """200 simulated models' joint runs: on instance 0 HELM's correct reference is opt0-0, the models answer
    consistently with opt0-2 being right; the options are stored and the audit suggests opt0-2."""
    rng = np.random.default_rng(11)
    n_items, n_models = 24, 200
    theta = rng.normal(size=n_models)
    b = rng.normal(size=n_items)
    true = rng.integers(0, 4, n_items)
    true[0], b[0] = 2, -0.5
    stated = true.copy()
    stated[0] = 0
    for m in range(n_models):
        picks = []
        for j in range(n_items):
            p = 0.25 + 0.75 / (1 + math.exp(-1.7 * (theta[m] - b[j])))
            picks.append(int(true[j]) if rng.random() < p else int((true[j] + rng.integers(1, 4)) % 4))
        _run(tmp_path, f"org/model{m:03d}", picks, [int(k) for k in stated], "multiple_choice_joint")
    db = tmp_path / "w.db"
    rc, _o, err = run_cli(["import", "helm", tmp_path / "benchmark_output", "--db", db])
    assert rc == 0, err
    rc, out, err = run_cli(["audit", "items", "mmlu", "--db", db, "--json", "--permutations", "499"])
    assert rc == 0, err
    flags = json.loads(out)["flags"]
    assert [f["item_key"] for f in flags][:1] == ["subject=anatomy,method=multiple_choice_joint/id0"], flags
    assert "suggested key: opt0-2" in flags[0]["headline"]
