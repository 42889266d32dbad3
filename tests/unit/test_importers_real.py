"""Importers on files the real tools wrote (tests/fixtures/real, see its README) and on small files that
mirror the real layouts of tools that cannot run offline (AlpacaEval, Chatbot Arena, HELM, OpenCompass).
Issue 12; issue 10 #6 and #10."""

from __future__ import annotations

import importlib.util
import io
import json
import sqlite3
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from benchloupe.cli.main import main
from benchloupe.jobs.imports import import_paths
from benchloupe.store.importers.base import ImportFormatError
from benchloupe.store.importers.detect import detect_format, parse_file
from benchloupe.store.importers.inspect_log import parse_inspect
from benchloupe.store.importers.lmeval import parse_lmeval

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real"
EVAL_LOGS = sorted((REAL / "inspect" / "logs").glob("*.eval"))
JSON_LOGS = sorted((REAL / "inspect" / "json").glob("*.json"))
LMEVAL = REAL / "lmeval"


def _log(task: str, model: str, logs=EVAL_LOGS) -> Path:
    for p in logs:
        if f"_{task}_" in p.name and parse_inspect(p).models["aliases"][0] == [f"mockllm/{model}"]:
            return p
    raise AssertionError(f"no {task} log for {model}")


def _dump(db: Path) -> list[str]:
    conn = sqlite3.connect(db)
    try:
        return list(conn.iterdump())
    finally:
        conn.close()


def _one_line_error(fn, *args, **kw) -> str:
    with pytest.raises(ImportFormatError) as info:
        fn(*args, **kw)
    assert "\n" not in str(info.value)
    return str(info.value)


# --------------------------------------------------------------------------------------------- Inspect

def test_real_eval_logs_are_zstd_and_import():
    with zipfile.ZipFile(EVAL_LOGS[0]) as z:
        assert {i.compress_type for i in z.infolist()} == {93}  # what broke the old importer
    alpha = parse_inspect(_log("arith", "alpha"))
    assert alpha.models["name"].tolist() == ["alpha"] and alpha.models["aliases"][0] == ["mockllm/alpha"]
    assert alpha.items["key"].tolist() == ["add-1", "add-2", "mul-1"]
    assert alpha.successes.tolist() == [[2, 1, 2]] and alpha.trials.tolist() == [[2, 2, 2]]  # 2 epochs


def test_eval_and_converted_json_logs_agree():
    for model in ("alpha", "beta"):
        a, b = parse_inspect(_log("arith", model)), parse_inspect(_log("arith", model, JSON_LOGS))
        assert a.successes.tolist() == b.successes.tolist() and a.items["key"].tolist() == b.items["key"].tolist()


def test_several_scorers_and_a_dict_valued_one():
    path = _log("arith", "beta")
    match = parse_inspect(path)  # default: the first scorer (match)
    includes = parse_inspect(path, scorer="includes")
    assert match.successes.tolist() == [[1, 2, 1]]
    assert includes.successes.tolist() == [[1, 2, 1]]  # "It is 42" ends with 42 (match) and holds it (includes)
    assert "--score-key" in _one_line_error(parse_inspect, path, scorer="shape")
    exact = parse_inspect(path, scorer="shape", score_key="exact")
    assert exact.successes.tolist() == [[1, 2, 0]]


def test_multiple_choice_keeps_choices_answer_text_and_chance():
    p = parse_inspect(_log("mcq", "alpha"), group_col="topic")
    first = p.items.iloc[0]
    assert first["text"] == "What is 10 + 38?" and first["answer"] == "48" and first["chance"] == 0.25
    assert first["metadata"]["choices"] == ["46", "47", "36", "48"] and first["metadata"]["answer_label"] == "D"
    assert p.items["group"].tolist() == ["add", "astro"]
    assert "--group-col" in _one_line_error(parse_inspect, _log("mcq", "alpha"), group_col="nope")


@pytest.mark.parametrize("log, where", [
    ({"eval": "x", "samples": []}, "eval"),
    ({"eval": {"model": "m"}, "samples": {"a": 1}}, "samples"),
    ({"eval": {"model": "m"}, "samples": [3]}, "samples[0]"),
    ({"eval": {"model": "m"}, "samples": [{"id": 1, "scores": [1]}]}, "samples[0].scores"),
    ({"eval": {"model": "m"}, "samples": [{"id": 1, "scores": {"s": "C"}}]}, "samples[0].scores.s"),
    ({"eval": {"model": 5}, "samples": []}, "eval.model"),
])
def test_inspect_logs_of_the_wrong_shape_get_one_line(tmp_path, log, where):
    """Issue 10 #6: `eval`, samples or scores that are not objects used to raise AttributeError."""
    path = tmp_path / "log.json"
    path.write_text(json.dumps(log))
    assert f":{where}:" in _one_line_error(parse_inspect, path)


def test_zstd_member_with_a_bad_crc_is_refused(tmp_path):
    data = bytearray(EVAL_LOGS[0].read_bytes())
    with zipfile.ZipFile(EVAL_LOGS[0]) as z:
        info = z.getinfo("header.json") if "header.json" in z.namelist() else z.getinfo("_journal/start.json")
    off = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra) + info.compress_size // 2
    data[off] ^= 0xFF
    bad = tmp_path / "bad.eval"
    bad.write_bytes(bytes(data))
    assert "re-export the log" in _one_line_error(parse_inspect, bad)


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("inspect_ai") is None, reason="inspect_ai is not installed")
def test_fresh_logs_from_inspect_import_like_the_committed_ones(tmp_path):
    subprocess.run([sys.executable, str(REAL / "make_inspect_logs.py"), str(tmp_path)], check=True,
                   capture_output=True, cwd=tmp_path)
    fresh = sorted((tmp_path / "logs").glob("*.eval"))
    assert len(fresh) == 3
    for model in ("alpha", "beta"):
        assert parse_inspect(_log("arith", model, fresh)).successes.tolist() == \
            parse_inspect(_log("arith", model)).successes.tolist()


# --------------------------------------------------------------------------------------------- lm-eval

def test_lmeval_real_tree_keys_prefer_the_documents_id():
    p = parse_lmeval(next((LMEVAL / "alpha").glob("samples_*.jsonl")))
    assert p.models["name"].tolist() == ["alpha"] and p.correct.tolist() == [[1, 1, 1]]
    assert p.items["key"].tolist() == ["add-1", "add-2", "mul-1"]
    assert p.items["text"][0] == "Question: What is 2 + 2?\nAnswer:"
    by_doc_id = parse_lmeval(next((LMEVAL / "alpha").glob("samples_*.jsonl")), item_key="doc_id")
    assert by_doc_id.items["key"].tolist() == ["0", "1", "2"]


def test_lmeval_dummy_model_needs_a_name():
    path = next((LMEVAL / "i82qcls7").glob("samples_arith_mc_*.jsonl"))
    assert "--model" in _one_line_error(parse_lmeval, path)
    p = parse_lmeval(path, model="dummy-1")
    first = p.items.iloc[0]
    assert first["answer"] == "4" and first["chance"] == 0.25 and first["metadata"]["choices"] == ["3", "4", "5", "6"]


def test_lmeval_row_without_doc_id_is_refused_with_its_line(tmp_path):
    """Issue 10 #10: a row lacking doc_id used to become keys "0.0" and "nan"."""
    src = next((LMEVAL / "alpha").glob("samples_*.jsonl")).read_text().splitlines()
    row = json.loads(src[1])
    del row["doc_id"]
    path = tmp_path / "samples_arith_gen_2026-01-01T00-00-00.000000.jsonl"
    path.write_text("\n".join([src[0], json.dumps(row), src[2]]) + "\n")
    msg = _one_line_error(parse_lmeval, path, model="alpha")
    assert ":line 2, field 'doc_id':" in msg


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("lm_eval") is None, reason="lm_eval is not installed")
def test_fresh_logs_from_lm_eval_import_like_the_committed_ones(tmp_path):
    subprocess.run([sys.executable, str(REAL / "make_lmeval_logs.py"), str(tmp_path / "out")], check=True,
                   capture_output=True, cwd=tmp_path)
    summary = import_paths(tmp_path / "w.db", [str(tmp_path / "out" / "alpha"), str(tmp_path / "out" / "beta")],
                           "lm-eval")
    assert summary.benchmarks["arith_gen"]["models"] == {"alpha": 3, "beta": 3}
    with pytest.raises(ImportFormatError, match="dummy"):
        import_paths(tmp_path / "w.db", [str(tmp_path / "out")], "lm-eval")


def test_open_llm_leaderboard_parquet_details_import_with_auto(tmp_path):
    """Today `auto` gave a _csv.Error traceback on a .parquet file."""
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    rows = [json.loads(x) for x in next((LMEVAL / "alpha").glob("samples_*.jsonl")).read_text().splitlines()]
    for r in rows:
        r["arguments"] = json.dumps(r["arguments"])  # parquet details store nested args as a string or struct
        del r["metrics"], r["filter"]  # and some carry neither the metric list nor the filter
    path = tmp_path / "org__model" / "samples_arith_gen_2024-06-26T18-40-36.217287.parquet"
    path.parent.mkdir()
    pq.write_table(pa.Table.from_pylist(rows), path)
    assert detect_format(path) == "lm-eval"
    _, parsed = __import__("benchloupe.jobs", fromlist=["parse_file"]).parse_file(path, None, model="org/model")
    assert parsed.correct.tolist() == [[1, 1, 1]] and parsed.items["key"].tolist() == ["add-1", "add-2", "mul-1"]
    assert parsed.items["text"][0] == "Question: What is 2 + 2?\nAnswer:"


# --------------------------------------------------------------------------------- lining up, many files

def test_same_dataset_from_inspect_and_lmeval_lands_on_the_same_items(tmp_path):
    db = tmp_path / "w.db"
    import_paths(db, [str(REAL / "inspect" / "logs")], "inspect", benchmark="arith-both")
    import_paths(db, [str(LMEVAL / "alpha"), str(LMEVAL / "beta")], "lm-eval", benchmark="arith-both")
    conn = sqlite3.connect(db)
    keys = [r[0] for r in conn.execute("SELECT key FROM items i JOIN benchmarks b ON b.id = i.benchmark_id"
                                       " WHERE b.name = 'arith-both' ORDER BY pos")]
    models = [r[0] for r in conn.execute("SELECT name FROM models ORDER BY name")]
    conn.close()
    assert keys == ["add-1", "add-2", "mul-1", "mc-1", "mc-2"]
    assert models == ["alpha", "beta"]  # mockllm/alpha (Inspect) and alpha (lm-eval) are one model
    conn = sqlite3.connect(db)
    meta = json.loads(conn.execute("SELECT metadata FROM items WHERE key = 'add-1'").fetchone()[0])
    conn.close()
    assert meta["inspect_id"] == "add-1" and meta["doc"]["id"] == "add-1"  # both harnesses' metadata kept


def test_a_folder_imports_in_one_transaction_and_a_bad_file_changes_nothing(tmp_path, capsys):
    db = tmp_path / "w.db"
    assert main(["import", "auto", str(REAL / "inspect" / "logs"), str(LMEVAL / "alpha"), "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "in one transaction" in out and "arith (inspect): 2 files, 3 items" in out and "skipped 1" in out
    before = _dump(db)
    assert any("mockllm/alpha" in line for line in before)  # the import reached this database
    bad = tmp_path / "logs" / "broken.eval"
    bad.parent.mkdir()
    bad.write_bytes(b"PK\x03\x04 not really a zip")
    assert main(["import", "inspect", str(REAL / "inspect" / "json"), str(bad), "--db", str(db)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "broken.eval" in err
    assert _dump(db) == before


def test_glob_and_stdin(tmp_path, monkeypatch, capsys):
    db = tmp_path / "w.db"
    assert main(["import", "lm-eval", str(LMEVAL / "*" / "samples_arith_gen_*.jsonl"),
                 "--model", "x", "--db", str(db)]) == 1  # the overlap of three models named x is refused
    assert "also in" in capsys.readouterr().err
    data = next((LMEVAL / "beta").glob("samples_*.jsonl")).read_bytes()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    assert main(["import", "lm-eval", "-", "--model", "beta", "-b", "piped", "--db", str(db)]) == 0
    assert "imported <stdin> into 'piped'" in capsys.readouterr().out


def test_auto_refuses_lmeval_results_json_with_a_pointer():
    path = next((LMEVAL / "alpha").glob("results_*.json"))
    assert "samples_<task>_*.jsonl" in _one_line_error(detect_format, path)


def test_epochs_survive_export_results_and_models_keep_metadata(tmp_path, capsys):
    db = tmp_path / "w.db"
    assert main(["import", "inspect", *map(str, EVAL_LOGS), "--db", str(db)]) == 0
    capsys.readouterr()
    assert main(["export", "results", "arith", "--db", str(db)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "model,item,successes,trials" and "alpha,add-2,1,2" in out
    assert main(["export", "models", "arith", "--format", "json", "--db", str(db)]) == 0
    models = json.loads(capsys.readouterr().out)
    assert json.loads(models[0]["metadata"])["provider"] == "mockllm" and models[0]["aliases"] == "mockllm/alpha"


def test_provider_prefix_does_not_become_the_owner(tmp_path):
    from benchloupe.jobs import parse_file as job_parse

    log = {"eval": {"task": "t", "model": "vllm/meta-llama/Llama-3.1-8B-Instruct"},
           "samples": [{"id": 1, "scores": {"s": {"value": "C"}}}]}
    path = tmp_path / "log.json"
    path.write_text(json.dumps(log))
    _, p = job_parse(path)
    row = p.models.iloc[0]
    assert row["name"] == "meta-llama/Llama-3.1-8B-Instruct" and row["owner"] == "meta-llama"
    assert row["aliases"] == ["vllm/meta-llama/Llama-3.1-8B-Instruct"]


# ------------------------------------------------------------------- layouts of tools that need a network

def _annotations(model: str, prefs: list) -> list[dict]:
    inst = ["What are the names of some famous actors?", "How did US states get their names?", "Hi", "Bye"]
    return [{"dataset": "helpful_base", "instruction": inst[i], "output_1": "base answer",
             "generator_1": "gpt4_1106_preview", "output_2": f"{model} answer", "generator_2": model,
             "annotator": "weighted_alpaca_eval_gpt4_turbo", "preference": v, "time_per_example": 0.5,
             "price_per_example": 0.01, "raw_completion": {"logprobs": None}} for i, v in enumerate(prefs)]


def test_alpacaeval_results_tree(tmp_path, capsys):
    root = tmp_path / "results"
    for model, prefs in {"mistral-7b": [1.93, 0, None, 1.02], "NullModel": [1.5, 2.0, 1.0, 1.1]}.items():
        d = root / model / "weighted_alpaca_eval_gpt4_turbo"
        d.mkdir(parents=True)
        (d / "annotations.json").write_text(json.dumps(_annotations(model, prefs), indent=2))
    p = parse_file(root / "mistral-7b" / "weighted_alpaca_eval_gpt4_turbo" / "annotations.json")
    assert p.benchmark == "alpacaeval-weighted_alpaca_eval_gpt4_turbo"
    assert p.rewards["reward"].tolist() == [1.93, 1.5, 1.02]  # 0 is a draw; null skipped
    assert p.preferences["prob_a"].round(2).tolist() == [0.93, 0.5, 0.02]
    assert p.notes == ["1 annotations with a null preference skipped"]
    db = tmp_path / "w.db"
    assert main(["import", "alpacaeval", str(root), "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "2 files" in out and "7 rewards, 7 preferences" in out


def test_chatbot_arena_battles_array(tmp_path):
    battles = [
        {"model_a": "gpt-4", "model_b": "vicuna-13b", "winner": "model_a", "judge": "arena_user_1",
         "turn": 1, "anony": True, "language": "English", "tstamp": 1.7e9, "question_id": "q1"},
        {"model_a": "vicuna-13b", "model_b": "gpt-4", "winner": "tie (bothbad)", "judge": "arena_user_2",
         "turn": 1, "anony": True, "language": "English", "tstamp": 1.7e9, "question_id": "q2"},
        {"model_a": "gpt-4", "model_b": "vicuna-13b", "winner": "tie", "judge": "arena_user_1",
         "turn": 1, "anony": True, "language": "English", "tstamp": 1.7e9, "question_id": "q1"},
    ]
    path = tmp_path / "clean_battle_20240101.json"
    path.write_text(json.dumps(battles, indent=1))
    assert detect_format(path) == "battles"
    p = parse_file(path)
    assert p.preferences["prob_a"].tolist() == [1.0, 0.5, 0.5]
    assert p.preferences["item"].tolist() == ["q1", "q2", "q1#2"]  # a repeated battle is kept
    bad = tmp_path / "b.json"
    bad.write_text(json.dumps([{**battles[0], "winner": "model_c"}]))
    assert ":line 1, field 'winner':" in _one_line_error(parse_file, bad)


def test_helm_run_folder(tmp_path):
    def run(model: str, means: list[float]):
        d = tmp_path / "benchmark_output" / "runs" / "v1" / f"mmlu:subject=anatomy,model={model.replace('/', '_')}"
        d.mkdir(parents=True)
        (d / "run_spec.json").write_text(json.dumps({
            "name": f"mmlu:subject=anatomy,method=multiple_choice_joint,model={model.replace('/', '_')}",
            "scenario_spec": {"class_name": "helm.benchmark.scenarios.mmlu_scenario.MMLUScenario"},
            "adapter_spec": {"method": "multiple_choice_joint", "model": model}}))
        stats = []
        for i, m in enumerate(means):
            stat = {"name": {"name": "exact_match", "split": "test"}, "count": 1, "sum": m, "sum_squared": m,
                    "min": m, "max": m, "mean": m, "variance": 0.0, "stddev": 0.0}
            stats.append({"instance_id": f"id{i}", "train_trial_index": 0, "stats": [stat]})
            stats.append({"instance_id": f"id{i}", "train_trial_index": 0, "perturbation": {"name": "typo"},
                          "stats": [{**stat, "mean": 0.0}]})
        (d / "per_instance_stats.json").write_text(json.dumps(stats, indent=2))
        (d / "stats.json").write_text("[]")
        (d / "scenario_state.json").write_text(json.dumps({"adapter_spec": {"model": model}, "request_states": [
            {"instance": {"input": {"text": f"Question {i}?"}, "references": [
                {"output": {"text": "yes"}, "tags": ["correct"]}, {"output": {"text": "no"}, "tags": []}],
                "split": "test", "id": f"id{i}"}, "train_trial_index": 0} for i in range(len(means))]}))
        return d
    d = run("openai/gpt2", [1.0, 0.0, 1.0])
    run("meta/llama-7b", [0.0, 0.0, 1.0])
    p = parse_file(d / "per_instance_stats.json")
    assert p.benchmark == "mmlu" and p.models["name"].tolist() == ["openai/gpt2"]
    assert p.correct.tolist() == [[1, 0, 1]]  # the perturbed copies are not counted
    assert p.items["key"][0] == "subject=anatomy,method=multiple_choice_joint/id0"
    first = p.items.iloc[0]
    assert (first["text"], first["answer"], first["chance"]) == ("Question 0?", "yes", 0.5)
    summary = import_paths(tmp_path / "w.db", [str(tmp_path / "benchmark_output")], "helm")
    assert summary.benchmarks["mmlu"]["models"] == {"meta/llama-7b": 3, "openai/gpt2": 3}


def test_opencompass_results(tmp_path):
    d = tmp_path / "outputs" / "default" / "20240101_120000" / "results" / "internlm2-7b"
    d.mkdir(parents=True)
    (d / "gsm8k.json").write_text(json.dumps({"accuracy": 50.0, "details": {
        "0": {"prompt": [{"role": "HUMAN", "prompt": "Q: 2+2?"}], "origin_prediction": "4", "predictions": "4",
              "references": "4", "correct": True},
        "1": {"prompt": "Q: 3+3?", "origin_prediction": "7", "predictions": "7", "references": "6",
              "correct": [False]}}}))
    p = parse_file(d / "gsm8k.json")
    assert (p.benchmark, p.models["name"].tolist(), p.correct.tolist()) == ("gsm8k", ["internlm2-7b"], [[1, 0]])
    assert p.items["text"].tolist() == ["Q: 2+2?", "Q: 3+3?"] and p.items["answer"].tolist() == ["4", "6"]
    summary = import_paths(tmp_path / "w.db", [str(tmp_path / "outputs")], "opencompass")
    assert summary.benchmarks["gsm8k"]["static_cells"] == 2


def test_every_format_is_listed(capsys):
    assert main(["import", "formats"]) == 0
    out = capsys.readouterr().out
    for name in ("inspect", "lm-eval", "alpacaeval", "battles", "helm", "opencompass"):
        assert f"\n{name} " in "\n" + out
    assert np.isfinite(1.0)


def _hostile_sources(tmp_path) -> list[tuple[Path, dict]]:
    root = tmp_path / "src"
    root.mkdir()
    files = []
    for p, opts in [(p, {}) for p in EVAL_LOGS[:2] + JSON_LOGS[:1]] + \
            [(p, {"model": "x"}) for p in sorted(LMEVAL.rglob("samples_*.jsonl"))[:2]]:
        copy = root / p.name
        copy.write_bytes(p.read_bytes())
        files.append((copy, opts))
    (root / "ae").mkdir(parents=True)
    (root / "ae" / "annotations.json").write_text(json.dumps(_annotations("m", [1.2, 0, None, 1.9]), indent=1))
    battles = [{"model_a": "x", "model_b": "y", "winner": w, "judge": "j", "question_id": f"q{k}"}
               for k, w in enumerate(["model_a", "tie", "model_b"])]
    (root / "clean_battle.json").write_text(json.dumps(battles, indent=1))
    (root / "results" / "m1").mkdir(parents=True)
    (root / "results" / "m1" / "gsm8k.json").write_text(json.dumps(
        {"accuracy": 1, "details": {"0": {"prompt": "p", "references": "r", "correct": True}}}))
    (root / "run").mkdir()
    (root / "run" / "run_spec.json").write_text(json.dumps({"name": "mmlu:subject=a,model=x",
                                                           "adapter_spec": {"model": "o/x"}}))
    (root / "run" / "per_instance_stats.json").write_text(json.dumps([{"instance_id": "id1", "train_trial_index": 0,
        "stats": [{"name": {"name": "exact_match", "split": "test"}, "mean": 1.0}]}]))
    return files + [(root / "ae" / "annotations.json", {}), (root / "clean_battle.json", {}),
                    (root / "results" / "m1" / "gsm8k.json", {}), (root / "run" / "per_instance_stats.json", {})]


def test_mutated_harness_logs_fail_with_one_line_never_a_traceback(tmp_path):
    """Hostile input for the harness formats: random byte changes, truncations, inserted JSON values, NULs,
    lone CRs and a BOM; each either parses or raises ImportFormatError with one line."""
    import random

    from benchloupe.jobs import parse_file as job_parse

    rng = random.Random(0)
    cases = 0
    for path, opts in _hostile_sources(tmp_path):
        data = path.read_bytes()
        for k in range(24):
            b = bytearray(data)
            if k % 4 == 0:
                for _ in range(rng.randint(1, 5)):
                    b[rng.randrange(len(b))] = rng.randrange(256)
            elif k % 4 == 1:
                b = b[: rng.randrange(len(b))]
            elif k % 4 == 2:
                i = rng.randrange(len(b))
                b[i:i] = rng.choice([b"null", b"[]", b"{}", b"1e999", b'"x"', b"\x00", b"\r", b"9" * 400])
            else:
                b = b"\xef\xbb\xbf" + bytes(b).replace(b"\n", b"\r")
            out = path.parent / f"m{k}_{path.name}"
            out.write_bytes(bytes(b))
            try:
                job_parse(out, None, **opts)
            except ImportFormatError as exc:
                assert "\n" not in str(exc)
            finally:
                out.unlink()
            cases += 1
    assert cases == 24 * 9


def test_maker_provider_is_the_owner_and_lmeval_hf_ids_are_kept(tmp_path):
    from benchloupe.jobs import parse_file as job_parse

    log = {"eval": {"task": "t", "model": "openai/gpt-4o"}, "samples": [{"id": 1, "scores": {"s": {"value": "C"}}}]}
    path = tmp_path / "log.json"
    path.write_text(json.dumps(log))
    row = job_parse(path)[1].models.iloc[0]
    assert (row["name"], row["owner"], row["aliases"]) == ("gpt-4o", "openai", ["openai/gpt-4o"])
    src = next((LMEVAL / "alpha").glob("samples_*.jsonl"))
    row = job_parse(src, None, model="google/gemma-2-9b")[1].models.iloc[0]
    assert (row["name"], row["owner"]) == ("google/gemma-2-9b", "google")


def test_auto_does_not_call_every_json_an_inspect_log(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"name": "x", "settings": {"a": 1}}))
    assert "not a known log" in _one_line_error(detect_format, path)


def test_replace_clears_each_benchmark_once_per_batch(tmp_path):
    db = tmp_path / "w.db"
    first = import_paths(db, [str(REAL / "inspect" / "logs")], "inspect")
    again = import_paths(db, [str(REAL / "inspect" / "logs")], "inspect", replace=True)
    assert again.benchmarks["arith"]["models"] == first.benchmarks["arith"]["models"] == {"alpha": 3, "beta": 3}
    conn = sqlite3.connect(db)
    n = conn.execute("SELECT count(*) FROM static_results s JOIN benchmarks b ON b.id = s.benchmark_id"
                     " WHERE b.name = 'arith'").fetchone()[0]
    conn.close()
    assert n == 2  # both models survive: the second file of the batch did not clear the first


def test_stdin_with_auto_detects_by_content(tmp_path, monkeypatch, capsys):
    battles = [{"model_a": "x", "model_b": "y", "winner": "tie (bothbad)", "judge": "j", "question_id": "q1"}]
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(json.dumps(battles).encode())))
    assert main(["import", "auto", "-", "-b", "piped", "--db", str(tmp_path / "w.db")]) == 0
    assert "(battles): 1 new item," in capsys.readouterr().out


def test_repeated_preferences_are_all_stored(tmp_path):
    """Cousin of the battles case: the store keeps one preference per (item, pair, judge), so a repeated
    comparison in a preferences file used to overwrite the first while the summary counted both."""
    path = tmp_path / "prefs.csv"
    path.write_text("model_a,model_b,prompt,winner\nx,y,p1,a\nx,y,p1,a\nx,y,p1,b\n")
    db = tmp_path / "w.db"
    import_paths(db, [str(path)], "preferences", benchmark="p")
    conn = sqlite3.connect(db)
    n = conn.execute("SELECT count(*) FROM preferences").fetchone()[0]
    conn.close()
    assert n == 3
