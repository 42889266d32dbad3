"""Each import format on small files written here: values land in the right (model, item) cell, missing
cells stay missing, options rename columns, and detect_format recognises the file."""

from __future__ import annotations

import gzip
import json
import zipfile

import numpy as np
import pandas as pd
import pytest

from benchloupe.store.importers.base import ImportFormatError
from benchloupe.store.importers.detect import FORMATS, detect_format, parse_file


def _write(path, text: str):
    if str(path).endswith(".gz"):
        path.write_bytes(gzip.compress(text.encode("utf-8")))
    else:
        path.write_text(text, encoding="utf-8")
    return path


def _cell(parsed, model, item, array="correct"):
    m = parsed.models["name"].tolist().index(model)
    i = parsed.items["key"].tolist().index(item)
    return int(getattr(parsed, array)[m, i])


def test_registry_has_every_issue_format():
    assert {
        "long",
        "wide",
        "items",
        "arena",
        "preferences",
        "dualeval",
        "neartie-npz",
        "lm-eval",
        "inspect",
    } <= set(FORMATS)


@pytest.mark.parametrize("name", ["res.csv", "res.csv.gz"])
def test_long_csv_with_item_columns(tmp_path, name):
    path = _write(
        tmp_path / name,
        "model,item,correct,text,group\nm1,q1,1,What is 2+2?,math\nm1,q2,0,Capital?,geo\nm2,q2,true,,\n",
    )
    assert detect_format(path) == "long"
    p = parse_file(path)
    assert p.benchmark == "res"
    assert p.models["name"].tolist() == ["m1", "m2"] and p.items["key"].tolist() == ["q1", "q2"]
    assert p.correct.tolist() == [[1, 0], [-1, 1]]
    assert p.items["text"].tolist() == ["What is 2+2?", "Capital?"]
    assert p.items["group"].tolist() == ["math", "geo"]
    assert p.counts()["static_cells"] == 3


def test_long_jsonl_renamed_columns_and_exclusion(tmp_path):
    rows = [
        {"respondent": "llama3-8b", "question_name": "a", "all_correct": 1},
        {"respondent": "human_x", "question_name": "a", "all_correct": 0},
        {"respondent": "llama3-8b", "question_name": "b", "all_correct": 0},
    ]
    path = _write(tmp_path / "r.jsonl", "\n".join(json.dumps(r) for r in rows) + "\n")
    p = parse_file(
        path,
        "long",
        model_col="respondent",
        item_col="question_name",
        correct_col="all_correct",
        exclude_models="^human_",
    )
    assert p.models["name"].tolist() == ["llama3-8b"] and p.correct.tolist() == [[1, 0]]


def test_exclusion_keeps_error_lines_right(tmp_path):
    path = _write(tmp_path / "r.csv", "model,item,correct\nhuman_a,q,1\nm,q,1\nm,r,7\n")
    with pytest.raises(ImportFormatError, match="line 4, column 3"):
        parse_file(path, "long", exclude_models="^human_")


def test_long_binomial(tmp_path):
    path = _write(tmp_path / "b.csv", "model,item,successes,trials\nm1,q1,3,5\nm2,q1,0,2\n")
    p = parse_file(path)
    assert p.correct is None
    assert p.successes.tolist() == [[3], [0]] and p.trials.tolist() == [[5], [2]]
    bad = _write(tmp_path / "c.csv", "model,item,successes,trials\nm1,q1,6,5\n")
    with pytest.raises(ImportFormatError, match="successes exceed trials"):
        parse_file(bad)


def test_wide_with_missing_and_models_file(tmp_path):
    path = _write(tmp_path / "m.responses.csv.gz", "model,660,1067\norg/a,1,\norg/b,0,1\n")
    side = _write(tmp_path / "lb.csv", "name,arch,size\norg/a,LlamaForCausalLM,7\n")
    assert detect_format(path) == "metabench"
    p = parse_file(path, models_file=side, arch_to_family=lambda a: a.removesuffix("ForCausalLM").lower())
    assert p.benchmark == "metabench-m"
    assert p.correct.tolist() == [[1, -1], [0, 1]] and p.items["key"].tolist() == ["660", "1067"]
    assert p.models["family"].tolist() == ["llama", None]  # org/b is not in the models file
    assert p.models["metadata"].iloc[0] == {"size": "7", "arch": "LlamaForCausalLM"}


def test_wide_extra_na_values(tmp_path):
    path = _write(tmp_path / "w.csv", "model,a,b\nm1,NA,1\n")
    assert parse_file(path, "wide", na_values=("", "NA")).correct.tolist() == [[-1, 1]]


def test_classic_patterns_expand_by_frequency(tmp_path):
    path = _write(tmp_path / "X_patterns.csv", "Item1,Item2,freq\n0,0,2\n1,0,0\n1,1,3\n")
    assert detect_format(path) == "classic-irt"
    p = parse_file(path)
    assert p.benchmark == "X"
    assert p.models["name"].tolist() == [f"X/person_{i:04d}" for i in range(1, 6)]
    assert p.correct.tolist() == [[0, 0]] * 2 + [[1, 1]] * 3


def test_classic_group_counts(tmp_path):
    path = _write(tmp_path / "g.csv", "I1,I2,G1,G2\n0,1,1,2\n1,1,0,1\n")
    p = parse_file(path, "classic-irt", freq_col="G1,G2")
    assert p.models["name"].tolist() == ["g/G1_0001", "g/G2_0001", "g/G2_0002", "g/G2_0003"]
    assert p.correct.tolist() == [[0, 1], [0, 1], [0, 1], [1, 1]]
    assert [m["group"] for m in p.models["metadata"]] == ["G1", "G2", "G2", "G2"]


def test_item_metadata(tmp_path):
    path = _write(
        tmp_path / "q.csv",
        "key,text,answer,group,kind,chance,difficulty\n"
        "q1,2+2?,4,math,static,0.25,easy\nq2,Best poem?,,writing,arena,,\n",
    )
    assert detect_format(path) == "items"
    p = parse_file(path)
    assert p.item_metadata_only and p.correct is None
    assert p.items["kind"].tolist() == ["static", "arena"]
    assert p.items["chance"].iloc[0] == 0.25 and np.isnan(p.items["chance"].iloc[1])
    assert p.items["metadata"].iloc[0] == {"difficulty": "easy"}
    bad = _write(tmp_path / "b.csv", "key,chance\nq1,1.5\n")
    with pytest.raises(ImportFormatError, match="outside"):
        parse_file(bad, "items")


def test_arena_rewards(tmp_path):
    path = _write(
        tmp_path / "a.csv", "model,prompt,reward,reward_model\nm1,p1,0.5,rm\nm2,p1,-1,rm\nm1,p1,2,rm2\n"
    )
    assert detect_format(path) == "arena"
    p = parse_file(path)
    assert p.kind == "arena" and p.items["kind"].tolist() == ["arena"]
    assert p.rewards.to_dict("records")[1] == {
        "model": "m2",
        "item": "p1",
        "reward": -1.0,
        "reward_model": "rm",
    }
    dup = _write(tmp_path / "d.csv", "model,prompt,reward\nm1,p1,0.5\nm1,p1,0.7\n")
    with pytest.raises(ImportFormatError, match="line 3.*duplicate"):
        parse_file(dup)


def test_preferences(tmp_path):
    path = _write(tmp_path / "p.csv", "model_a,model_b,prompt,winner\nx,y,p1,a\nx,z,p1,z\ny,z,p2,tie\n")
    assert detect_format(path) == "preferences"
    p = parse_file(path)
    assert p.preferences["prob_a"].tolist() == [1.0, 0.0, 0.5]
    assert p.models["name"].tolist() == ["x", "y", "z"]
    prob = _write(tmp_path / "q.csv", "model_a,model_b,prompt,probability\nx,y,p1,0.8\n")
    assert parse_file(prob).preferences["prob_a"].tolist() == [0.8]
    bad = _write(tmp_path / "b.csv", "model_a,model_b,prompt,winner\nx,y,p1,w\n")
    with pytest.raises(ImportFormatError, match="line 2, column 4"):
        parse_file(bad)


def test_dualeval_static_reference_rules(tmp_path):
    folder = tmp_path / "mathset"
    folder.mkdir()
    rows = [
        {"model_label": "m1", "dataset": "gsm", "sample_index": 0, "correct": 1},
        {"model_label": "m1", "dataset": "gsm", "sample_index": 1, "correct": True, "status": "error"},
        {"dataset": "gsm", "sample_index": 2, "correct": 1},  # no model_label: skipped
        {"model_label": "m2", "dataset": "gsm", "sample_index": 0},  # no correct: skipped
        {"model_label": "m2", "dataset": "gsm", "sample_index": 1, "correct": 0},
        {"model_label": "m1", "dataset": "gsm", "sample_index": 0, "correct": 0},
    ]  # last one wins
    path = _write(folder / "static.jsonl", "\n".join(json.dumps(r) for r in rows) + "\n")
    assert detect_format(path) == "dualeval"
    p = parse_file(path)
    assert p.benchmark == "mathset" and p.items["key"].tolist() == ["gsm_0", "gsm_1"]
    assert p.correct.tolist() == [[0, 1], [-1, 0]]
    ref = parse_file(path, key_prefix="tag", require_status_ok=True)
    assert ref.items["key"].tolist() == ["mathset::gsm_0", "mathset::gsm_1"]
    assert ref.correct.tolist() == [[0, 0], [-1, 0]]


def test_dualeval_arena(tmp_path):
    rows = [
        {"model_label": "m1", "item_id": "p1", "reward": 0.2, "status": "ok"},
        {"model_label": "m1", "item_id": "p2", "reward": None, "status": "reward_error"},
        {"model_label": "m2", "item_id": "p1", "reward": 0.9, "status": "reward_error"},
        {"model_label": "m1", "item_id": "p1", "reward": 0.4, "status": "ok"},
    ]
    path = _write(tmp_path / "arena.jsonl", "\n".join(json.dumps(r) for r in rows) + "\n")
    p = parse_file(path)
    assert p.kind == "arena"
    assert p.rewards[["model", "item", "reward"]].values.tolist() == [["m1", "p1", 0.4], ["m2", "p1", 0.9]]
    assert parse_file(path, require_status_ok=True).rewards["model"].tolist() == ["m1"]


def test_neartie_npz(tmp_path):
    path = tmp_path / "audit.npz"
    resp = np.array([[1, 0, 1], [0, 0, 1]])  # items x models
    np.savez(
        path,
        responses=resp,
        model_id=np.array(["a", "b", "c"]),
        family=np.array(["F", "F", "G"]),
        owner=np.array(["o1", "o2", "o3"]),
        item_group=np.array(["t0", "t1"]),
    )
    assert detect_format(path) == "neartie-npz"
    p = parse_file(path)
    assert p.correct.tolist() == resp.T.tolist()
    assert p.models["family"].tolist() == ["F", "F", "G"] and p.items["group"].tolist() == ["t0", "t1"]


def _lmeval_row(doc_id, acc, filt=None, em=None):
    row = {
        "doc_id": doc_id,
        "doc": {"question": f"q{doc_id}"},
        "target": str(doc_id % 4),
        "arguments": {"gen_args_0": {"arg_0": f"Question {doc_id}?", "arg_1": " A"}},
        "resps": [[["-1.2", "False"]]],
        "filtered_resps": [["-1.2", "False"]],
        "doc_hash": "x",
        "prompt_hash": "y",
        "target_hash": "z",
    }
    if filt:
        row.update({"filter": filt, "metrics": ["exact_match"], "exact_match": em})
    else:
        row.update({"filter": "none", "metrics": ["acc", "acc_norm"], "acc": acc, "acc_norm": 1.0 - acc})
    return row


def test_lmeval_samples_and_results_json(tmp_path):
    folder = tmp_path / "EleutherAI__pythia-160m"
    folder.mkdir()
    stamp = "2024-05-13T15-42-01.123456"
    path = _write(
        folder / f"samples_arc_easy_{stamp}.jsonl",
        "\n".join(json.dumps(_lmeval_row(i, float(i % 2))) for i in range(4)) + "\n",
    )
    (folder / f"results_{stamp}.json").write_text(
        json.dumps(
            {
                "results": {},
                "config": {"model": "hf", "model_args": "pretrained=EleutherAI/pythia-160m,dtype=float"},
            }
        )
    )
    assert detect_format(path) == "lm-eval"
    p = parse_file(path)
    assert p.benchmark == "arc_easy" and p.models["name"].tolist() == ["EleutherAI/pythia-160m"]
    assert p.correct.tolist() == [[0, 1, 0, 1]]
    assert p.items["text"].iloc[1] == "Question 1?" and p.items["answer"].iloc[3] == "3"
    assert parse_file(path, metric="acc_norm").correct.tolist() == [[1, 0, 1, 0]]


def test_lmeval_filters_and_threshold(tmp_path):
    rows = [
        _lmeval_row(0, 0, "strict-match", 0.0),
        _lmeval_row(0, 0, "flexible-extract", 1.0),
        _lmeval_row(1, 0, "strict-match", 1.0),
        _lmeval_row(1, 0, "flexible-extract", 1.0),
    ]
    path = _write(
        tmp_path / "samples_gsm8k_2024-01-01T00-00-00.000000.jsonl",
        "\n".join(json.dumps(r) for r in rows) + "\n",
    )
    with pytest.raises(ImportFormatError, match="--model"):
        parse_file(path)
    assert parse_file(path, model="m").correct.tolist() == [[0, 1]]
    assert parse_file(path, model="m", filter_name="flexible-extract").correct.tolist() == [[1, 1]]
    rows[0]["exact_match"] = 0.7
    _write(path, "\n".join(json.dumps(r) for r in rows) + "\n")
    with pytest.raises(ImportFormatError, match="not 0/1"):
        parse_file(path, model="m")
    assert parse_file(path, model="m", threshold=0.5).correct.tolist() == [[1, 1]]


def _inspect_samples():
    def s(i, epoch, value):
        return {
            "id": i,
            "epoch": epoch,
            "input": [{"role": "user", "content": f"Q{i}"}],
            "target": ["A"],
            "scores": {"match": {"value": value, "answer": "A"}},
        }

    return [s(1, 1, "C"), s(2, 1, "I"), s(3, 1, "P"), s(4, 1, 1.0), {"id": 5, "epoch": 1, "error": "boom"}]


def test_inspect_json_log(tmp_path):
    log = {
        "version": 2,
        "status": "success",
        "eval": {"task": "gpqa", "model": "openai/gpt-4o"},
        "samples": _inspect_samples(),
    }
    path = tmp_path / "2024-05-29_gpqa.json"
    path.write_text(json.dumps(log))
    assert detect_format(path) == "inspect"
    p = parse_file(path)
    assert p.benchmark == "gpqa" and p.models["name"].tolist() == ["gpt-4o"]
    assert p.models["aliases"].tolist() == [["openai/gpt-4o"]]
    assert p.items["key"].tolist() == ["1", "2", "3", "4"]  # errored sample 5 left missing
    assert p.correct.tolist() == [[1, 0, 0, 1]] and p.items["text"].iloc[0] == "Q1"
    assert parse_file(path, partial="correct").correct.tolist() == [[1, 0, 1, 1]]
    with pytest.raises(ImportFormatError, match="partial"):
        parse_file(path, partial="error")


def test_inspect_eval_archive_with_epochs(tmp_path):
    path = tmp_path / "run.eval"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("header.json", json.dumps({"version": 2, "eval": {"task": "t", "model": "m"}}))
        for sid, epoch, val in [(1, 1, "C"), (1, 2, "I"), (2, 1, 0.2), (2, 2, 0.9)]:
            z.writestr(
                f"samples/{sid}_epoch_{epoch}.json",
                json.dumps(
                    {"id": sid, "epoch": epoch, "input": "x", "target": "y", "scores": {"s": {"value": val}}}
                ),
            )
    assert detect_format(path) == "inspect"
    p = parse_file(path, threshold=0.5)
    assert p.correct is None and p.successes.tolist() == [[1, 1]] and p.trials.tolist() == [[2, 2]]


def test_parsed_frames_are_plain_types(tmp_path):
    path = _write(tmp_path / "w.csv", "model,a\nm,1\n")
    p = parse_file(path)
    assert isinstance(p.items, pd.DataFrame) and p.correct.dtype == np.int8


def test_wide_fast_and_general_paths_agree(tmp_path):
    """The numpy fast path (dense single-digit cells) and the pandas path give the same matrix."""
    rng = np.random.default_rng(3)
    y = rng.integers(0, 2, size=(30, 50))
    header = "model," + ",".join(f"i{j}" for j in range(50))
    rows = [f"m{i}," + ",".join(map(str, r)) for i, r in enumerate(y)]
    dense = _write(tmp_path / "dense.csv", "\r\n".join([header, *rows]) + "\r\n")
    rows[7] = rows[7].replace(",1", ",1.0", 1)  # one "1.0" cell sends the file down the pandas path
    general = _write(tmp_path / "general.csv", "\n".join([header, *rows]) + "\n")
    a, b = parse_file(dense, "wide"), parse_file(general, "wide")
    np.testing.assert_array_equal(a.correct, y)
    np.testing.assert_array_equal(b.correct, y)
    assert a.models["name"].tolist() == b.models["name"].tolist() == [f"m{i}" for i in range(30)]


def test_parse_file_ignores_unset_cli_options_and_takes_text_values(tmp_path):
    path = _write(
        tmp_path / "samples_t_2024-01-01T00-00-00.jsonl", json.dumps(_lmeval_row(0, 0, "none", 0.7)) + "\n"
    )
    p = parse_file(path, "lmeval", model="m", metric=None, threshold="0.5", model_col=None)
    assert p.correct.tolist() == [[1]]
    with pytest.raises(ImportFormatError, match="unknown format 'nope'"):
        parse_file(path, "nope")
