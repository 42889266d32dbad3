"""Hostile files, the classes test_hostile_inputs.py did not generate (issue 24): nesting depth in every JSON
format, symlink trees under folder walks and globs, devices and pipes named as files, truncated and random
archives, numbers of thousands of digits, and the words some tools write for "no value".

Each case asserts what every hostile case asserts (tests/hostile.py): exit 0, or exit 1 with one line naming the
problem, no traceback, no raw control character, the database unchanged on failure.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import sqlite3
import zipfile
from pathlib import Path

import pytest

from tests.hostile import check_outcome, dump, run_cli, run_forked

ROOT = Path(__file__).resolve().parents[2]
REAL = ROOT / "tests" / "fixtures" / "real"


@pytest.fixture(scope="module")
def template_db(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("hostile-files")
    seed = root / "seed.csv"
    seed.write_text("model,s1,s2\nm1,1,0\nm2,0,1\n")
    db = root / "template.db"
    rc, _, err = run_cli(["--db", db, "import", "wide", seed, "-b", "seed"])
    assert rc == 0, err
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return db


@pytest.fixture
def db(template_db, tmp_path) -> Path:
    path = tmp_path / "t.db"
    shutil.copy(template_db, path)
    return path


def _import(db: Path, fmt: str, path, *options) -> tuple[int, str, str, str, str]:
    before = dump(db)
    rc, out, err = run_cli(["--db", db, "import", fmt, path, "-b", "hostile", *options])
    return rc, out, err, before, dump(db)


# ------------------------------------------------------------------------------------------- nesting depth

def _lmeval(deep):
    rows = [{"doc_id": i, "doc": {"question": f"q{i}", "x": deep}, "target": "1", "arguments": {"a": "b"},
             "resps": [], "filtered_resps": [], "metrics": ["acc"], "acc": 1.0} for i in range(2)]
    return "lm-eval", "samples_arc_2024-01-01T00-00-00.jsonl", "\n".join(map(json.dumps, rows)) + "\n", ["--model", "m"]


def _lmeval_string(deep):  # the arguments as a JSON text inside a string (parquet details do this)
    rows = [{"doc_id": 0, "doc": {"question": "q"}, "target": "1", "arguments": json.dumps(deep), "resps": [],
             "filtered_resps": [], "metrics": ["acc"], "acc": 1.0}]
    return "lm-eval", "samples_arc_2024-01-01T00-00-00.jsonl", json.dumps(rows[0]) + "\n", ["--model", "m"]


def _inspect(deep):
    log = {"version": 2, "status": "success", "eval": {"task": "t", "model": "openai/m"},
           "samples": [{"id": 1, "epoch": 1, "input": "Q", "target": "A", "metadata": {"x": deep},
                        "scores": {"match": {"value": "C"}}}]}
    return "inspect", "2024-05-29_t.json", json.dumps(log), []


def _jsonl(fmt, name, row):
    def make(deep):
        return fmt, name, json.dumps({**row, "x": deep}) + "\n" + json.dumps({**row, "x": 1}).replace(
            '"m1"', '"m2"') + "\n", []
    return make


def _alpacaeval(deep):
    rows = [{"instruction": f"i{k}", "output_1": "a", "generator_1": "base", "output_2": "b", "generator_2": "m",
             "annotator": "ann", "preference": 1.5, "raw_completion": deep} for k in range(2)]
    return "alpacaeval", "annotations.json", json.dumps(rows), []


def _battles(deep):
    rows = [{"model_a": "x", "model_b": "y", "winner": "model_a", "judge": "j", "question_id": f"q{k}",
             "conversation_a": deep} for k in range(2)]
    return "battles", "clean_battle_2024.json", json.dumps(rows), []


def _helm(deep):
    stats = [{"instance_id": f"id{i}", "train_trial_index": 0, "x": deep, "stats": [
        {"name": {"name": "exact_match", "split": "test"}, "count": 1, "sum": 1.0, "mean": 1.0}]} for i in range(2)]
    return "helm", "per_instance_stats.json", json.dumps(stats), ["--model", "m"]


def _opencompass(deep):
    data = {"accuracy": 50.0, "details": {"0": {"prompt": "Q?", "predictions": "4", "references": "4",
                                                "correct": True, "x": deep}}}
    return "opencompass", "gsm8k.json", json.dumps(data), ["--model", "m"]


JSON_FORMATS = {
    "lm-eval": _lmeval, "lm-eval-arguments-string": _lmeval_string, "inspect": _inspect,
    "dualeval": _jsonl("dualeval", "d.jsonl", {"model_label": "m1", "dataset": "d", "sample_index": 0, "correct": 1}),
    "long-jsonl": _jsonl("long", "l.jsonl", {"model": "m1", "item": "q1", "correct": 1}),
    "arena-jsonl": _jsonl("arena", "a.jsonl", {"model": "m1", "prompt": "p1", "reward": 0.5}),
    "items-jsonl": _jsonl("items", "i.jsonl", {"key": "m1", "text": "t"}),
    "preferences-jsonl": _jsonl("preferences", "p.jsonl", {"model_a": "m1", "model_b": "mx", "prompt": "p",
                                                          "winner": "a"}),
    "alpacaeval": _alpacaeval, "battles": _battles, "helm": _helm, "opencompass": _opencompass,
}
DEPTHS = (3, 64, 65, 500, 990, 2_000, 100_000)


def _nested(depth: int, text: str):
    """A JSON text of *depth* arrays around ``1`` (built as text: Python could not even build it as objects)."""
    return "[" * depth + "1" + "]" * depth


def _place(fmt_builder, depth: int) -> tuple[str, str, bytes, list]:
    marker = "__DEEP__"
    fmt, name, text, opts = fmt_builder(marker)
    return fmt, name, text.replace(json.dumps(marker), _nested(depth, "")).encode(), opts


NESTING = [(f"{label}:depth={d}", label, d, where) for label in JSON_FORMATS for d in DEPTHS
           for where in ("field", "document")]


@pytest.mark.parametrize("case", NESTING, ids=[c[0] for c in NESTING])
def test_nesting_depth(case, db, tmp_path):
    case_id, label, depth, where = case
    if where == "field":
        fmt, name, content, opts = _place(JSON_FORMATS[label], depth)
    else:  # the whole document nested (the issue's '[' * 100000 + ']' * 100000)
        fmt, name, _, opts = JSON_FORMATS[label](1)
        content = _nested(depth, "").encode() + (b"\n" if name.endswith(".jsonl") else b"")
    path = tmp_path / name
    path.write_bytes(content)
    rc, out, err, before, after = _import(db, fmt, path, *opts)
    check_outcome(case_id, rc, out, err, before, after)
    if depth >= 2_000 and (where == "document" or "string" not in label):  # past what the parser follows
        assert rc == 1 and "levels deep" in err and str(path) in err, (case_id, err)
        said = int(re.search(r"nested ([\d,]+) levels deep", err).group(1).replace(",", ""))
        assert depth <= said <= depth + 6, (case_id, err)  # the file's own depth, its enclosing objects counted
    if depth > 64 and where == "field" and rc == 0:  # accepted only where the nested field is not kept
        assert "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[" not in dump(db), case_id


def test_the_issues_instance_is_one_line_in_every_format(db, tmp_path):
    """'[' * 100000 + ']' * 100000 was "unexpected RecursionError in `import` ... please report it"."""
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100000 + "]" * 100000)
    for fmt in ("lm-eval", "inspect", "dualeval", "long", "alpacaeval", "battles", "helm", "opencompass", "auto"):
        rc, _, err = run_cli(["--db", db, "import", fmt, deep, "-b", "x", *(["--model", "m"] if fmt in (
            "lm-eval", "helm", "opencompass") else [])])
        assert rc == 1 and "RecursionError" not in err and "nested 100,000 levels deep" in err, (fmt, err)


def test_deep_llm_replies_are_parsed_in_linear_time():
    """A rewriter reply of 100,000 nested brackets: no RecursionError, and one pass (was quadratic copies)."""
    from benchloupe.prompts.llm import parse_children, parse_json_loose

    for reply in ("[" * 100_000 + "]" * 100_000, '{"a":' * 100_000 + "1" + "}" * 100_000, "x" + "{" * 100_000,
                  '{"children": [{"question": "q", "answer": "a"}]}' + "[" * 50_000):
        parse_json_loose(reply)
        parse_children(reply)
    assert len(parse_children('{"children": [{"question": "q", "answer": "a"}]}')) == 1


# ---------------------------------------------------------------------------------------------- symlink trees

def _sample_file(path: Path, model_seed: int) -> None:
    rows = [{"doc_id": i + 10 * model_seed, "doc": {"question": f"q{i + 10 * model_seed}"}, "target": "1",
             "arguments": {}, "resps": [], "filtered_resps": [], "metrics": ["acc"], "acc": float(i % 2)}
            for i in range(3)]
    path.write_text("\n".join(map(json.dumps, rows)) + "\n")


def _tree(root: Path, kind: str) -> int:
    """A results tree with links of *kind*; returns how many distinct real sample files it holds."""
    (root / "a" / "b").mkdir(parents=True)
    (root / "c").mkdir()
    _sample_file(root / "a" / "samples_t1_2024-01-01T00-00-00.jsonl", 1)
    _sample_file(root / "a" / "b" / "samples_t2_2024-01-01T00-00-00.jsonl", 2)
    _sample_file(root / "c" / "samples_t3_2024-01-01T00-00-00.jsonl", 3)
    n = 3
    if kind == "loop":  # the issue's tree
        os.symlink(".", root / "a" / "self")
        os.symlink("..", root / "a" / "up")
    elif kind == "cross":
        os.symlink("../c", root / "a" / "to-c")
        os.symlink("../a", root / "c" / "to-a")
    elif kind == "deep-to-root":
        os.symlink("../../..", root / "a" / "b" / "root")
        os.symlink(str(root), root / "c" / "abs-root")
    elif kind == "dangling":
        os.symlink("../nowhere", root / "a" / "gone")
        os.symlink("missing.jsonl", root / "c" / "samples_t9_2024-01-01T00-00-00.jsonl")
    elif kind == "file-links":
        os.symlink("../a/samples_t1_2024-01-01T00-00-00.jsonl", root / "c" / "samples_t8_2024-01-01T00-00-00.jsonl")
    elif kind == "outside":  # a link to a folder outside the tree: followed once
        other = root.parent / f"{root.name}-outside"
        other.mkdir()
        _sample_file(other / "samples_t4_2024-01-01T00-00-00.jsonl", 4)
        os.symlink(str(other), root / "a" / "ext")
        os.symlink(str(other), root / "c" / "ext-again")
        n = 4
    elif kind == "many-loops":
        for i in range(8):
            os.symlink(".", root / "a" / f"self{i}")
            os.symlink("..", root / "a" / "b" / f"up{i}")
    return n


TREES = ["loop", "cross", "deep-to-root", "dangling", "file-links", "outside", "many-loops"]
ENTRIES = {"folder": "{root}", "glob-recursive": "{root}/**/*.jsonl", "glob-all": "{root}/**",
           "glob-one-level": "{root}/*/*.jsonl"}


@pytest.mark.parametrize("entry", sorted(ENTRIES))
@pytest.mark.parametrize("kind", TREES)
def test_symlink_tree(kind, entry, tmp_path):
    """The issue: ``import lm-eval 'DIR/**/*.jsonl'`` on a/self -> . and a/up -> .. printed nothing for 120 s.
    A process of its own with a time limit (forked from this one), so that a hang fails the case instead of the
    session."""
    root = tmp_path / "tree"
    n = _tree(root, kind)
    if entry == "glob-one-level":
        n = len({p.resolve() for p in root.glob("*/*.jsonl") if p.exists()})
    db = tmp_path / "t.db"
    rc, out, err = run_forked(["--db", db, "import", "lm-eval", ENTRIES[entry].format(root=root), "--model", "m",
                               "--json"], timeout=60)
    check_outcome((kind, entry), rc, out, err)
    assert rc == 0, err
    files = json.loads(out)["files"]
    assert len(files) == n, (kind, entry, [f["path"] for f in files])  # each real file once


# ------------------------------------------------------------------------------------ devices, pipes, sockets

FORMATS = ["auto", "long", "wide", "items", "arena", "preferences", "dualeval", "neartie-npz", "lm-eval", "inspect",
           "metabench", "classic-irt", "alpacaeval", "battles", "helm", "opencompass"]


@pytest.fixture(scope="module")
def specials(tmp_path_factory):
    root = tmp_path_factory.mktemp("specials")
    fifo = root / "results.csv"
    os.mkfifo(fifo)
    sock_path = root / "sock.jsonl"
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(sock_path))
    yield {"/dev/null": ("/dev/null", "character device"), "/dev/zero": ("/dev/zero", "character device"),
           "fifo": (str(fifo), "named pipe"), "socket": (str(sock_path), "socket")}
    sock.close()


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("special", ["/dev/null", "/dev/zero", "fifo", "socket"])
def test_special_file(special, fmt, specials, db):
    """``/dev/null``, ``/dev/zero`` and a FIFO were "no such file"; a FIFO must not block the import either."""
    path, words = specials[special]
    rc, out, err, before, after = _import(db, fmt, path, *(["--model", "m"] if fmt == "lm-eval" else []))
    check_outcome((special, fmt), rc, out, err, before, after)
    assert rc == 1 and words in err and "no such file" not in err, (special, fmt, err)


# ------------------------------------------------------------------------------- truncated and random archives

def _archives(tmp: Path) -> list[tuple[str, str, Path]]:
    out = []
    logs = sorted((REAL / "inspect" / "logs").glob("*.eval"))
    good = logs[0].read_bytes()
    for name, cut in (("0", 0), ("4", 4), ("22", 22), ("100", 100), ("1000", 1000), ("half", len(good) // 2),
                      ("end-100", len(good) - 100), ("end-1", len(good) - 1)):
        p = tmp / f"cut{cut}.eval"
        p.write_bytes(good[:cut])
        out.append((f"eval-truncated@{name}", "inspect", p))
    rnd = tmp / "random.eval"
    rnd.write_bytes(os.urandom(3000))
    out.append(("eval-random", "inspect", rnd))
    nohead = tmp / "nohead.eval"
    with zipfile.ZipFile(nohead, "w") as z:
        z.writestr("samples/1_epoch_1.json", "{}")
    out.append(("eval-no-header", "inspect", nohead))
    badmember = tmp / "badmember.eval"
    with zipfile.ZipFile(badmember, "w") as z:
        z.writestr("header.json", "[" * 5000)
    out.append(("eval-deep-header", "inspect", badmember))
    for label, data in (("npz-random", os.urandom(3000)), ("npz-text", b"responses,model_id\n1,m\n"),
                        ("npz-zip-of-text", None), ("npz-truncated", None)):
        p = tmp / f"{label}.npz"
        if label == "npz-zip-of-text":
            with zipfile.ZipFile(p, "w") as z:
                z.writestr("responses.npy", "not an array")
        elif label == "npz-truncated":
            import numpy as np

            np.savez(p, responses=np.ones((3, 2)), model_id=np.array(["a", "b"]))
            p.write_bytes(p.read_bytes()[:60])
        else:
            p.write_bytes(data)
        out.append((label, "neartie-npz", p))
    for label, data in (("parquet-random", b"PAR1" + os.urandom(200)), ("parquet-magic-only", b"PAR1PAR1")):
        p = tmp / f"details_{label}.parquet"
        p.write_bytes(data)
        out.append((label, "lm-eval", p))
    gz = tmp / "r.csv.gz"
    gz.write_bytes(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03" + os.urandom(50))
    out.append(("gzip-random", "long", gz))
    return out


def test_the_minor_archive_instances(db, tmp_path):
    """Random bytes named .npz were "contains pickled (object) data"; a truncated .eval "byte 0xe9 is not UTF-8"."""
    rnd = tmp_path / "r.npz"
    rnd.write_bytes(os.urandom(3000))
    rc, _, err = run_cli(["--db", db, "import", "neartie-npz", rnd])
    assert rc == 1 and "pickled" not in err and "not a .npz archive" in err, err
    good = sorted((REAL / "inspect" / "logs").glob("*.eval"))[0].read_bytes()
    cut = tmp_path / "cut.eval"
    cut.write_bytes(good[:1000])
    rc, _, err = run_cli(["--db", db, "import", "inspect", cut])
    assert rc == 1 and "UTF-8" not in err and "truncated or not a zip" in err, err


ARCHIVES = ["eval-truncated@0", "eval-truncated@4", "eval-truncated@22", "eval-truncated@100", "eval-truncated@1000",
            "eval-truncated@half", "eval-truncated@end-100", "eval-truncated@end-1", "eval-random", "eval-no-header",
            "eval-deep-header", "npz-random", "npz-text", "npz-zip-of-text", "npz-truncated", "parquet-random",
            "parquet-magic-only", "gzip-random"]


@pytest.mark.parametrize("label", ARCHIVES)
def test_archive(label, db, tmp_path):
    cases = {c[0]: c[1:] for c in _archives(tmp_path)}
    assert sorted(cases) == sorted(ARCHIVES)
    fmt, path = cases[label]
    for f in (fmt, "auto"):
        rc, out, err, before, after = _import(db, f, path, *(["--model", "m"] if f == "lm-eval" else []))
        check_outcome((label, f), rc, out, err, before, after)
        assert rc == 1, (label, f, err)
        assert "UTF-8" not in err and "contains pickled" not in err, (label, f, err)


# ------------------------------------------------------------------------------------ numbers of 5,000 digits

BIG = "9" * 5000
DIGITS = [
    ("dualeval", "d.jsonl", '{"model_label":"m1","dataset":"d","sample_index":%s,"correct":true}\n', []),
    ("dualeval", "d.jsonl", '{"model_label":"m1","dataset":"d","sample_index":0,"correct":%s}\n', []),
    ("dualeval", "a.jsonl", '{"model_label":"m1","item_id":"i0","reward":%s}\n', []),
    ("long", "l.jsonl", '{"model":"m1","item":"q1","correct":%s}\n', []),
    ("long", "l.jsonl", '{"model":%s,"item":"q1","correct":1}\n', []),
    ("arena", "a.jsonl", '{"model":"m1","prompt":"p","reward":%s}\n', []),
    ("items", "i.jsonl", '{"key":"k","text":"t","chance":%s}\n', []),
    ("lm-eval", "samples_t_2024-01-01T00-00-00.jsonl", '{"doc_id":%s,"doc":{},"target":"1","acc":1}\n', ["--model", "m"]),
    ("lm-eval", "samples_t_2024-01-01T00-00-00.jsonl", '{"doc_id":0,"doc":{},"target":"1","acc":%s}\n', ["--model", "m"]),
    ("inspect", "log.json", '{"eval":{"task":"t","model":"m"},"samples":[{"id":%s,"scores":{"s":{"value":"C"}}}]}', []),
    ("inspect", "log.json", '{"eval":{"task":"t","model":"m"},"samples":[{"id":1,"scores":{"s":{"value":%s}}}]}', []),
    ("battles", "b.json", '[{"model_a":"x","model_b":"y","winner":"model_a","judge":"j","question_id":%s}]', []),
    ("helm", "per_instance_stats.json", '[{"instance_id":"i","train_trial_index":%s,"stats":[]}]', ["--model", "m"]),
    ("opencompass", "g.json", '{"details":{"0":{"prompt":"p","references":"r","correct":%s}}}', ["--model", "m"]),
    ("long", "l.csv", "model,item,correct\nm1,q1,%s\n", []),
    ("long", "l.csv", "model,item,successes,trials\nm1,q1,1,%s\n", []),
    ("arena", "a.csv", "model,prompt,reward\nm1,p1,%s\n", []),
    ("items", "i.csv", "key,text,chance\nq1,t,%s\n", []),
]


@pytest.mark.parametrize("index", range(len(DIGITS)))
@pytest.mark.parametrize("sign", ["", "-"])
def test_thousands_of_digits(index, sign, db, tmp_path):
    """A dualeval ``sample_index`` of 5,000 digits was Python's "Exceeds the limit (4300 digits)" with no file or
    line."""
    fmt, name, template, opts = DIGITS[index]
    path = tmp_path / name
    path.write_text(template % (sign + BIG))
    rc, out, err, before, after = _import(db, fmt, path, *opts)
    check_outcome((fmt, template[:30]), rc, out, err, before, after)
    assert "Exceeds the limit" not in err and "set_int_max_str_digits" not in err, err
    if rc == 1 and name.endswith((".json", ".jsonl")):
        assert str(path) in err, err


# ------------------------------------------------------------------------------------ "no value" words: one rule

NAN_COLUMNS = [("long", "model,item,correct\nm1,q1,{v}\nm2,q1,1\n"), ("long", "model,item,successes,trials\nm1,q1,{v},2\n"),
               ("long", "model,item,successes,trials\nm1,q1,1,{v}\n"), ("arena", "model,prompt,reward\nm1,p1,{v}\n"),
               ("items", "key,text,chance\nq1,t,{v}\nq2,u,0.25\n"), ("preferences", "model_a,model_b,prompt,winner,"
                                                                     "probability\nm1,m2,p,a,{v}\n"),
               ("wide", "model,q1,q2\nm1,{v},1\nm2,0,1\n"), ("classic-irt", "i1,i2,freq\n1,0,{v}\n0,1,2\n")]
NAN_WORDS = ["NaN", "nan", "NA", "null", "None", "n/a"]


@pytest.mark.parametrize("word", NAN_WORDS)
@pytest.mark.parametrize("index", range(len(NAN_COLUMNS)))
def test_no_value_words_get_one_answer(index, word, db, tmp_path):
    """``chance=NaN`` was taken as missing while ``correct=NaN`` was an error: now a missing value is an empty
    cell everywhere and these words are refused everywhere, each with the cell's line and column."""
    fmt, template = NAN_COLUMNS[index]
    path = tmp_path / "f.csv"
    path.write_text(template.format(v=word))
    opts = ["--probability-col", "probability"] if fmt == "preferences" else []
    rc, out, err, before, after = _import(db, fmt, path, *opts)
    check_outcome((fmt, word), rc, out, err, before, after)
    assert rc == 1 and word in err and "line 2" in err or "line 3" in err, (fmt, word, err)


def test_an_empty_optional_cell_is_missing(db, tmp_path):
    path = tmp_path / "i.csv"
    path.write_text("key,text,chance\nq1,t,\nq2,u,0.25\n")
    rc, _, err, _, _ = _import(db, "items", path)
    assert rc == 0, err


def test_exclude_models_that_keeps_none_is_refused(db, tmp_path):
    path = tmp_path / "l.csv"
    path.write_text("model,item,correct\nm1,q1,1\nm2,q1,0\n")
    for pattern in (".*", "m", "^m[12]$"):
        rc, out, err, before, after = _import(db, "long", path, "--exclude-models", pattern)
        check_outcome(pattern, rc, out, err, before, after)
        assert rc == 1 and "leaves out every model (2 of 2)" in err, err
    rc, _, err, _, _ = _import(db, "long", path, "--exclude-models", "^m1$")
    assert rc == 0, err


def test_unknown_format_is_usage_and_unused_options_are_named(db, tmp_path):
    path = tmp_path / "w.csv"
    path.write_text("model,q1\nm1,1\n")
    rc, _, err = run_cli(["--db", db, "import", "nosuch", path])
    assert rc == 2 and err.count("\n") == 1 and "unknown import format 'nosuch'" in err, err
    rc, _, err = run_cli(["--db", db, "import", "nosuch", tmp_path / "missing.csv"])  # the format first
    assert rc == 2 and "unknown import format" in err, err
    rc, _, err = run_cli(["--db", db, "import", "wide", path, "--exclude-models", "m1"])
    assert rc == 1 and "--exclude-models does not apply to format wide" in err, err


def test_export_to_a_file_with_json_prints_json(db, tmp_path):
    out_file = tmp_path / "items.csv"
    rc, out, err = run_cli(["--db", db, "export", "items", "seed", "-o", out_file, "--json"])
    assert rc == 0 and err == "", err
    info = json.loads(out)
    assert info["path"] == str(out_file) and info["rows"] == 2
