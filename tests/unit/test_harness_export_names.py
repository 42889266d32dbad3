"""Exports into the harnesses with hostile benchmark names (issue 37, point 10), read back by the real tools.

`export lm-eval-task` used to derive the task name by dropping every character outside [A-Za-z0-9_]: Han, emoji,
dots or spaces gave an empty task (`.jsonl`, `.yaml`) that lm-eval cannot select, `math-1` and `math_1` shared a
task and overwrote each other's files without a word, and the YAML's data path escaped a non-BMP character as a
JSON surrogate pair that YAML reads back as two broken characters. `export inspect-samples` wrote target `^` for
a 30th choice (Inspect's letters are A-Z, then 1, 2, ...).
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest

from benchloupe.store import export
from tests.hostile import check_outcome, run_cli

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real"
MCQ = next(p for p in sorted((REAL / "inspect" / "logs").glob("*_mcq_*.eval")))
# the name classes: Han, emoji (non-BMP), dots, spaces, case, punctuation that folds onto another name, a digit
# first, a long name, and the plain names they fold onto
NAMES = ["数学", "ベンチ", "😀", "🧪 chem", "a.b", "a b", "a_b", "math-1", "math_1", "Math 1", "1st", "x" * 120,
         "mcq", "mcq.v2", "Ünïcode"]
TASK_NAME = r"[a-z][a-z0-9_]*"


def _lm_eval_tasks(folder: Path, tasks: list[str]) -> dict[str, list[str]]:
    """Each task's document ids as lm-eval itself loads them from ``folder`` (offline)."""
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from lm_eval.tasks import TaskManager

    manager = TaskManager(include_path=str(folder), include_defaults=False)
    assert set(tasks) <= set(manager.all_tasks)
    loaded = manager.load(tasks)["tasks"]
    return {name: [d["id"] for d in task.test_docs()] for name, task in loaded.items()}


@pytest.fixture(scope="module")
def hostile_db(tmp_path_factory):
    db = tmp_path_factory.mktemp("names") / "w.db"
    for name in NAMES:
        rc, out, err = run_cli(["import", "inspect", MCQ, "-b", name, "--db", db])
        assert rc == 0, (name, err)
    return db


def test_task_names_are_valid_and_unique_for_every_name_class():
    import re

    tasks = [export.lmeval_task_name(n) for n in NAMES]
    assert all(re.fullmatch(TASK_NAME, t) and "__" not in t for t in tasks), tasks
    assert len(set(tasks)) == len(tasks)
    fill = [export.lmeval_task_name(n, benchfill=True) for n in NAMES]
    assert len(set(tasks + fill)) == 2 * len(NAMES)  # a BenchFill export never meets another benchmark's name
    assert export.lmeval_task_name("math_1") == "math_1" and export.lmeval_task_name("mcq") == "mcq"


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("lm_eval") is None, reason="lm_eval is not installed")
def test_every_name_exports_into_one_folder_and_lm_eval_reads_each_back(hostile_db, tmp_path):
    folder = tmp_path / "tasks 😀數據"  # a non-BMP character (and Han, a space) in the YAML's data path
    tasks = {}
    for name in NAMES:
        rc, out, err = run_cli(["export", "lm-eval-task", name, "--all-items", "-o", folder, "--db", hostile_db,
                                "--json"])
        check_outcome(name, rc, out, err, expect="ok")
        tasks[name] = json.loads(out)["task"]
    assert len(set(tasks.values())) == len(NAMES) and len(list(folder.glob("*.yaml"))) == len(NAMES)
    for name, task in tasks.items():
        assert export.lmeval_task_owner((folder / f"{task}.yaml").read_text(encoding="utf-8")) == name
    docs = _lm_eval_tasks(folder, [tasks["数学"], tasks["😀"], tasks["math-1"], tasks["math_1"], tasks["a.b"]])
    assert all(ids == ["mc-1", "mc-2"] for ids in docs.values()), docs


def test_an_export_never_overwrites_another_benchmarks_task(hostile_db, tmp_path):
    folder = tmp_path / "out"
    rc, out, err = run_cli(["export", "lm-eval-task", "math_1", "--all-items", "-o", folder, "--db", hostile_db,
                            "--json"])
    check_outcome("math_1", rc, out, err, expect="ok")
    task = export.lmeval_task_name("math-1")
    # a task of that name written by another benchmark (a hash clash) or by hand is left alone, in one line
    for owner_line, whose in (("  benchloupe_benchmark: \"other\"\n", "'other'"), ("", "did not write")):
        (folder / f"{task}.yaml").write_text(f"task: {task}\nmetadata:\n{owner_line}", encoding="utf-8")
        (folder / f"{task}.jsonl").write_text("{}\n", encoding="utf-8")
        before = {p.name: p.read_bytes() for p in folder.iterdir()}
        rc, out, err = run_cli(["export", "lm-eval-task", "math-1", "--all-items", "-o", folder, "--db", hostile_db])
        check_outcome("math-1", rc, out, err, expect="fail")
        assert whose in err and "--out" in err
        assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    for name in ("math_1", "math_1"):  # the same benchmark again replaces its own export
        rc, out, err = run_cli(["export", "lm-eval-task", name, "--all-items", "-o", folder, "--db", hostile_db,
                                "--json"])
        check_outcome(name, rc, out, err, expect="ok")
    assert export.lmeval_task_owner((folder / "math_1.yaml").read_text(encoding="utf-8")) == "math_1"


def _thirty_choices(tmp_path) -> Path:
    """A real-shaped lm-eval multiple-choice samples file whose items have 30 choices (answers at 0, 26, 29)."""
    rows = []
    for doc_id, answer in enumerate((0, 26, 29)):
        choices = [f"option {k}" for k in range(30)]
        rows.append({"doc_id": doc_id, "doc": {"id": f"q{doc_id}", "question": f"Pick {answer}"}, "target": answer,
                     "arguments": {f"gen_args_{k}": {"arg_0": f"Pick {answer}", "arg_1": f" {c}"}
                                   for k, c in enumerate(choices)},
                     "resps": [], "filtered_resps": [], "filter": "none", "metrics": ["acc"], "acc": 1.0})
    path = tmp_path / "samples_wide_mc_2026-12-07T08-00-00.000000.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.mark.skipif(importlib.util.find_spec("inspect_ai") is None, reason="inspect_ai is not installed")
def test_inspect_targets_past_26_choices_use_inspects_own_letters(tmp_path):
    from inspect_ai._util.answer import answer_character, answer_index
    from inspect_ai.dataset import json_dataset

    db = tmp_path / "w.db"
    rc, out, err = run_cli(["import", "lm-eval", _thirty_choices(tmp_path), "--model", "m", "--db", db])
    check_outcome("import", rc, out, err, expect="ok")
    path = tmp_path / "samples.jsonl"
    rc, out, err = run_cli(["export", "inspect-samples", "wide_mc", "--all-items", "-o", path, "--db", db, "--json"])
    check_outcome("export", rc, out, err, expect="ok")
    samples = list(json_dataset(str(path)))
    assert [s.target for s in samples] == [answer_character(i) for i in (0, 26, 29)] == ["A", "1", "4"]
    for sample, index in zip(samples, (0, 26, 29), strict=True):
        assert len(sample.choices) == 30 and answer_index(sample.target) == index
        assert sample.choices[answer_index(sample.target)] == f"option {index}"
