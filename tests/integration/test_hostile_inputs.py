"""Hostile input, every importer format (issue 10): a generated corpus of bad files through the real CLI.

For each case the CLI runs in-process (``benchloupe.cli.main.main``) on a copy of a small database and must
either import the file (exit 0: some mutations leave a valid file) or refuse it with exactly one line on stderr
and exit 1; never a traceback, never a raw control character on the terminal, and a refused file leaves the
database dump exactly as it was. Corpus: per format a valid file, then BOM, CRLF, lone CR, NUL, a huge field,
huge/overflowing/non-finite numbers, unicode, markup and control characters in every text field, a directory
and a missing path given as FILE, and seeded random byte mutations of the valid file.

lm-eval samples and Inspect logs get their valid file, a BOM, structural variants (fields that are not objects,
a missing doc_id, huge or wrong-typed scores) and byte mutations.
"""

from __future__ import annotations

import json
import random
import re
import shutil
import sqlite3
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from tests.hostile import HOSTILE_TEXT, RAW_CONTROL, check_outcome, dump, run_cli  # noqa: F401

HUGE_NUMBERS = ["9" * 400, "1e308", "-1e308", "1e400", "inf", "-inf", "nan", "3000000000", "4294967297",
                "-2147483649", "1e-400", "0x10", "1_000"]


@dataclass(frozen=True)
class Format:
    fmt: str
    name: str
    header: list[str]
    rows: list[list[str]]
    text_cols: tuple[str, ...]  # free-text fields (names, keys, text) that may hold anything
    number_cols: tuple[str, ...]

    def csv(self, rows=None, sep="\n") -> bytes:
        lines = [",".join(self.header)] + [",".join(r) for r in (self.rows if rows is None else rows)]
        return (sep.join(lines) + sep).encode("utf-8")


FORMATS = [
    Format("long", "long.csv", ["model", "item", "correct", "text", "family"],
           [["m1", "q1", "1", "What?", "fa"], ["m1", "q2", "0", "Why?", "fa"], ["m2", "q1", "0", "What?", "fb"],
            ["m2", "q2", "1", "Why?", "fb"]], ("model", "item", "text", "family"), ("correct",)),
    Format("long", "binom.csv", ["model", "item", "successes", "trials"],
           [["m1", "q1", "3", "4"], ["m1", "q2", "0", "4"], ["m2", "q1", "2", "5"]], ("model", "item"),
           ("successes", "trials")),
    Format("wide", "wide.csv", ["model", "q1", "q2", "q3"], [["m1", "1", "0", "1"], ["m2", "0", "1", "1"]],
           ("model",), ("q2",)),
    Format("items", "items.csv", ["key", "text", "answer", "group", "kind", "chance"],
           [["q1", "What?", "A", "g1", "static", "0.25"], ["q2", "Why?", "B", "g2", "static", "0"]],
           ("key", "text", "answer", "group"), ("chance",)),
    Format("arena", "arena.csv", ["model", "prompt", "reward", "reward_model", "text"],
           [["m1", "p1", "0.5", "rm", "hi"], ["m2", "p1", "-0.5", "rm", "hi"], ["m1", "p2", "1.5", "rm", "yo"],
            ["m2", "p2", "0.1", "rm", "yo"]], ("model", "prompt", "reward_model", "text"), ("reward",)),
    Format("preferences", "prefs.csv", ["model_a", "model_b", "prompt", "winner"],
           [["m1", "m2", "p1", "a"], ["m2", "m1", "p2", "tie"], ["m1", "m2", "p3", "b"]],
           ("model_a", "model_b", "prompt"), ()),
    Format("classic-irt", "classic_patterns.csv", ["i1", "i2", "i3", "freq"], [["1", "0", "1", "3"], ["0", "0", "1", "2"]],
           (), ("freq",)),
]
JSONL = {
    "dualeval-static": ('{"model_label":"m1","dataset":"d","sample_index":0,"correct":true}\n'
                        '{"model_label":"m2","dataset":"d","sample_index":0,"correct":false}\n'
                        '{"model_label":"m2","dataset":"d","sample_index":1,"correct":1}\n'),
    "dualeval-arena": ('{"model_label":"m1","item_id":"i0","reward":0.3}\n'
                       '{"model_label":"m2","item_id":"i0","reward":0.1}\n'),
    "long-jsonl": ('{"model":"m1","item":"q1","correct":1}\n{"model":"m2","item":"q1","correct":0}\n'),
}
JSONL_FMT = {"dualeval-static": "dualeval", "dualeval-arena": "dualeval", "long-jsonl": "long"}


def _lmeval_row(doc_id: int, acc: float) -> dict:
    """One row of an lm-eval ``samples_*.jsonl`` (the fields lm-eval 0.4 writes)."""
    return {"doc_id": doc_id, "doc": {"question": f"q{doc_id}"}, "target": str(doc_id % 4),
            "arguments": {"gen_args_0": {"arg_0": f"Question {doc_id}?", "arg_1": " A"}},
            "resps": [[["-1.2", "False"]]], "filtered_resps": [["-1.2", "False"]], "doc_hash": "x",
            "prompt_hash": "y", "target_hash": "z", "filter": "none", "metrics": ["acc"], "acc": acc}


def _inspect_log() -> dict:
    """An Inspect ``.json`` eval log (version 2) with scored samples."""
    def sample(i, value):
        return {"id": i, "epoch": 1, "input": [{"role": "user", "content": f"Q{i}"}], "target": ["A"],
                "scores": {"match": {"value": value, "answer": "A"}}}

    return {"version": 2, "status": "success", "eval": {"task": "gpqa", "model": "openai/gpt-4o"},
            "samples": [sample(1, "C"), sample(2, "I"), sample(3, 1.0)]}


# Logs of other tools: (format, file name, valid bytes, extra options, structural variants).
LOGS = {
    "lm-eval": ("lm-eval", "samples_arc_2024-01-01T00-00-00.000000.jsonl",
                ("\n".join(json.dumps(_lmeval_row(i, float(i % 2))) for i in range(4)) + "\n").encode(),
                ["--model", "m"],
                {"doc_id-missing": json.dumps({k: v for k, v in _lmeval_row(9, 1.0).items() if k != "doc_id"}),
                 "acc-string": json.dumps({**_lmeval_row(9, 1.0), "acc": "high"}),
                 "acc-huge": json.dumps({**_lmeval_row(9, 1.0), "acc": 1e308}),
                 "doc-list": json.dumps({**_lmeval_row(9, 1.0), "doc": [1]}),
                 "arguments-null": json.dumps({**_lmeval_row(9, 1.0), "arguments": None}),
                 "line-string": json.dumps("a sample"),
                 "line-number": "7",
                 "line-array": json.dumps([_lmeval_row(9, 1.0)]),
                 "line-null": "null",
                 "doc-string": json.dumps({**_lmeval_row(9, 1.0), "doc": "q9"}),
                 "doc_id-list": json.dumps({**_lmeval_row(9, 1.0), "doc_id": [9]}),
                 "doc_id-huge": json.dumps({**_lmeval_row(9, 1.0), "doc_id": 10 ** 400}),
                 "acc-list": json.dumps({**_lmeval_row(9, 1.0), "acc": [1]}),
                 "acc-dict": json.dumps({**_lmeval_row(9, 1.0), "acc": {"v": 1}}),
                 "acc-bool-string": json.dumps({**_lmeval_row(9, 1.0), "acc": "true"}),
                 "resps-number": json.dumps({**_lmeval_row(9, 1.0), "resps": 3, "filtered_resps": 3}),
                 "target-dict": json.dumps({**_lmeval_row(9, 1.0), "target": {"a": 1}}),
                 "hostile-doc": json.dumps({**_lmeval_row(9, 1.0), "doc": {"question": HOSTILE_TEXT}})}),
    "inspect": ("inspect", "2024-05-29_gpqa.json", json.dumps(_inspect_log()).encode(), [],
                {"eval-list": json.dumps({**_inspect_log(), "eval": []}),
                 "samples-string": json.dumps({**_inspect_log(), "samples": "x"}),
                 "sample-number": json.dumps({**_inspect_log(), "samples": [7]}),
                 "scores-list": json.dumps({**_inspect_log(), "samples": [{"id": 1, "scores": [1]}]}),
                 "model-number": json.dumps({**_inspect_log(), "eval": {"task": "t", "model": 5}}),
                 "eval-string": json.dumps({**_inspect_log(), "eval": "gpqa"}),
                 "eval-missing": json.dumps({k: v for k, v in _inspect_log().items() if k != "eval"}),
                 "samples-number": json.dumps({**_inspect_log(), "samples": 7}),
                 "samples-object": json.dumps({**_inspect_log(), "samples": {"id": 1}}),
                 "sample-string": json.dumps({**_inspect_log(), "samples": ["s1"]}),
                 "sample-null": json.dumps({**_inspect_log(), "samples": [None]}),
                 "scores-string": json.dumps({**_inspect_log(), "samples": [{"id": 1, "scores": "C"}]}),
                 "scores-number": json.dumps({**_inspect_log(), "samples": [{"id": 1, "scores": 1}]}),
                 "score-list": json.dumps({**_inspect_log(), "samples": [{"id": 1, "scores": {"m": [1]}}]}),
                 "score-value-dict": json.dumps({**_inspect_log(), "samples": [
                     {"id": 1, "epoch": 1, "input": "Q", "target": "A", "scores": {"m": {"value": {"a": "C"}}}}]}),
                 "score-value-huge": json.dumps({**_inspect_log(), "samples": [
                     {"id": 1, "epoch": 1, "input": "Q", "target": "A", "scores": {"m": {"value": 1e308}}}]}),
                 "id-dict": json.dumps({**_inspect_log(), "samples": [
                     {"id": {"a": 1}, "epoch": 1, "input": "Q", "target": "A", "scores": {"m": {"value": "C"}}}]}),
                 "epoch-string": json.dumps({**_inspect_log(), "samples": [
                     {"id": 1, "epoch": "one", "input": "Q", "target": "A", "scores": {"m": {"value": "C"}}}]}),
                 "input-number": json.dumps({**_inspect_log(), "samples": [
                     {"id": 1, "epoch": 1, "input": 5, "target": "A", "scores": {"m": {"value": "C"}}}]}),
                 "target-number": json.dumps({**_inspect_log(), "samples": [
                     {"id": 1, "epoch": 1, "input": "Q", "target": 5, "scores": {"m": {"value": "C"}}}]}),
                 "top-list": json.dumps([_inspect_log()]),
                 "top-string": json.dumps("log"),
                 "hostile-model": json.dumps({**_inspect_log(), "eval": {"task": HOSTILE_TEXT,
                                                                        "model": "openai/" + HOSTILE_TEXT}})}),
}



@pytest.fixture(scope="module")
def template_db(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("hostile")
    seed = root / "seed.csv"
    seed.write_text("model,s1,s2\nm1,1,0\nm2,0,1\n")
    db = root / "template.db"
    rc, _, err = run_cli(["--db", str(db), "import", "wide", str(seed), "-b", "seed"])
    assert rc == 0, err
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return db


# ----------------------------------------------------------------------------------------------- the corpus

def _mutations(data: bytes, rng: random.Random, n: int) -> list[tuple[str, bytes]]:
    out = []
    for k in range(n):
        b = bytearray(data)
        op = k % 6
        pos = rng.randrange(len(b))
        if op == 0:
            b[pos] = rng.randrange(256)
            label = f"flip@{pos}"
        elif op == 1:
            b.insert(pos, rng.choice(b'\x00\r\n",;\x1b\xff\xc3{}[]'))
            label = f"insert@{pos}"
        elif op == 2:
            del b[pos]
            label = f"delete@{pos}"
        elif op == 3:
            b = b[:pos]
            label = f"truncate@{pos}"
        elif op == 4:
            lines = bytes(b).split(b"\n")
            i = rng.randrange(len(lines))
            lines.insert(i, lines[i])
            b = bytearray(b"\n".join(lines))
            label = f"dupline@{i}"
        else:
            chunk = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 16)))
            b[pos:pos] = chunk
            label = f"garbage@{pos}"
        out.append((label, bytes(b)))
    return out


def _cases() -> list[tuple[str, str, str, bytes, str]]:
    """(id, format, file name, content, expectation: 'ok' | 'either')."""
    rng = random.Random(20261201)
    cases = []
    for f in FORMATS:
        base = f.csv()
        tag = f"{f.fmt}:{f.name}"
        cases.append((f"{tag}:valid", f.fmt, f.name, base, "ok"))
        cases.append((f"{tag}:bom", f.fmt, f.name, b"\xef\xbb\xbf" + base, "ok"))
        cases.append((f"{tag}:crlf", f.fmt, f.name, f.csv(sep="\r\n"), "ok"))
        cases.append((f"{tag}:lone-cr", f.fmt, f.name, f.csv(sep="\r"), "ok"))
        cases.append((f"{tag}:no-final-newline", f.fmt, f.name, base.rstrip(b"\n"), "ok"))
        cases.append((f"{tag}:nul-in-header", f.fmt, f.name, base.replace(b",", b"\x00,", 1), "either"))
        cases.append((f"{tag}:gzip-truncated", f.fmt, f.name + ".gz", b"\x1f\x8b\x08\x00garbage", "either"))
        cases.append((f"{tag}:json-not-csv", f.fmt, f.name, b'{"a": [1, 2, {"b": null}]}\n', "either"))
        cases.append((f"{tag}:binary", f.fmt, f.name, bytes(range(256)) * 4, "either"))
        cases.append((f"{tag}:header-only", f.fmt, f.name, (",".join(f.header) + "\n").encode(), "either"))
        cases.append((f"{tag}:latin1", f.fmt, f.name, base.replace(b"1", "\xe9".encode("latin-1"), 1), "either"))
        for col in f.text_cols:
            j = f.header.index(col)
            for label, value in (("hostile", HOSTILE_TEXT), ("nul", "a\x00b"), ("huge", "x" * 300_000),
                                 ("quoted-newline", '"two\nlines"'), ("blank", ""), ("spaces", "  m1  ")):
                rows = [r[:j] + [value if label != "hostile" else f'"{HOSTILE_TEXT}{i}"'] + r[j + 1:]
                        for i, r in enumerate(f.rows)]
                expect = "ok" if label in ("hostile",) and f.fmt != "preferences" else "either"
                cases.append((f"{tag}:{col}={label}", f.fmt, f.name, f.csv(rows), expect))
        for col in f.number_cols:
            j = f.header.index(col)
            for value in HUGE_NUMBERS:
                rows = [r[:j] + [value] + r[j + 1:] for r in f.rows]
                cases.append((f"{tag}:{col}={value[:12]}", f.fmt, f.name, f.csv(rows), "either"))
        for label, content in _mutations(base, rng, 18):
            cases.append((f"{tag}:mutate:{label}", f.fmt, f.name, content, "either"))
    for name, text in JSONL.items():
        fmt = JSONL_FMT[name]
        base = text.encode()
        tag = f"{fmt}:{name}"
        cases.append((f"{tag}:valid", fmt, f"{name}.jsonl", base, "ok"))
        cases.append((f"{tag}:bom", fmt, f"{name}.jsonl", b"\xef\xbb\xbf" + base, "ok"))
        cases.append((f"{tag}:crlf", fmt, f"{name}.jsonl", base.replace(b"\n", b"\r\n"), "ok"))
        cases.append((f"{tag}:lone-cr", fmt, f"{name}.jsonl", base.replace(b"\n", b"\r"), "ok"))
        cases.append((f"{tag}:hostile-names", fmt, f"{name}.jsonl",
                      base.replace(b'"m1"', ('"' + HOSTILE_TEXT.encode("unicode_escape").decode()
                                             .replace('\\x', '\\u00') + '"').encode()), "either"))
        for label, value in (("array", b"[1, 2]"), ("string", b'"x"'), ("null", b"null"), ("number", b"7"),
                             ("bigint", b"9" * 400), ("nested", b'{"model_label": {"a": 1}, "correct": [1]}')):
            cases.append((f"{tag}:line={label}", fmt, f"{name}.jsonl", base + value + b"\n", "either"))
        for field in (b'"correct":true', b'"reward":0.3', b'"correct":1'):
            for value in (b"9" * 400, b"1e400", b'"yes"', b"null", b"[]", b"{}", b"-1", b"2"):
                key = field.split(b":")[0]
                if field in base:
                    cases.append((f"{tag}:{key.decode()}={value[:10].decode()}", fmt, f"{name}.jsonl",
                                  base.replace(field, key + b":" + value, 1), "either"))
        for label, content in _mutations(base, rng, 12):
            cases.append((f"{tag}:mutate:{label}", fmt, f"{name}.jsonl", content, "either"))
    for label, (fmt, name, base, _, variants) in LOGS.items():
        tag = f"{fmt}:{label}"
        cases.append((f"{tag}:valid", fmt, name, base, "ok"))
        cases.append((f"{tag}:bom", fmt, name, b"\xef\xbb\xbf" + base, "ok"))
        for vlabel, text in variants.items():
            content = (base + text.encode() + b"\n") if fmt == "lm-eval" else text.encode()
            cases.append((f"{tag}:{vlabel}", fmt, name, content, "either"))
        for mlabel, content in _mutations(base, rng, 16):
            cases.append((f"{tag}:mutate:{mlabel}", fmt, name, content, "either"))
    return cases


CASES = _cases()
EXTRA_OPTIONS = {fmt: opts for fmt, _, _, opts, _ in LOGS.values()}


_check_outcome = check_outcome


PY_WORDS = re.compile(r"\b(NoneType|dict|str|int|float|list|nan)\b")


@pytest.mark.parametrize("case", [c for c in CASES if c[0].startswith(("lm-eval:", "inspect:"))
                                  and ":mutate:" not in c[0] and not c[0].endswith((":valid", ":bom"))],
                         ids=lambda c: c[0])
def test_log_structure_messages_speak_json(case, template_db, tmp_path):
    """A log's wrong shape is named in the file's own vocabulary (null, an object, an array, a string, a
    number, missing), not Python's (NoneType, dict, list, str, int, nan)."""
    case_id, fmt, name, content, _ = case
    db = tmp_path / "t.db"
    shutil.copy(template_db, db)
    path = tmp_path / name
    path.write_bytes(content)
    rc, _, err = run_cli(["--db", str(db), "import", fmt, str(path), "-b", "hostile", *EXTRA_OPTIONS.get(fmt, [])])
    message = err.split(str(path), 1)[-1]
    assert rc in (0, 1) and not PY_WORDS.search(message), (case_id, err)


def test_corpus_is_large():
    assert len(CASES) >= 300, len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_hostile_file(case, template_db, tmp_path):
    case_id, fmt, name, content, expect = case
    db = tmp_path / "t.db"
    shutil.copy(template_db, db)
    path = tmp_path / name
    path.write_bytes(content)
    before = dump(db)
    rc, out, err = run_cli(["--db", str(db), "import", fmt, str(path), "-b", "hostile", *EXTRA_OPTIONS.get(fmt, [])])
    _check_outcome(case_id, rc, out, err, before, dump(db), expect)
    if rc == 0 and "=hostile" in case_id:
        assert HOSTILE_TEXT in dump(db), "stored exactly as given"


# ----------------------------------------------------------------------------------------- other file classes

def test_directory_and_missing_path_as_file(template_db, tmp_path):
    db = tmp_path / "t.db"
    shutil.copy(template_db, db)
    before = dump(db)
    rc, _, err = run_cli(["--db", str(db), "import", "wide", str(tmp_path)])
    assert rc == 1 and err.count("\n") == 1 and "directory" in err, err
    rc, _, err = run_cli(["--db", str(db), "import", "wide", str(tmp_path / "nope.csv")])
    assert rc == 1 and err.count("\n") == 1 and "no such file" in err, err
    assert dump(db) == before


def test_neartie_npz_hostile(template_db, tmp_path):
    db = tmp_path / "t.db"
    shutil.copy(template_db, db)
    before = dump(db)
    good = dict(responses=np.array([[1, 0], [0, 1], [1, 1]]), model_id=np.array(["m1", "m2"]),
                family=np.array(["fa", "fb"]), owner=np.array(["oa", "ob"]), item_group=np.array(["g", "g", "h"]))
    variants = {
        "valid": good,
        "float-responses": {**good, "responses": np.array([[0.5, 0], [0, 1], [1, 1]])},
        "nan-responses": {**good, "responses": np.array([[np.nan, 0], [0, 1], [1, 1]])},
        "3d": {**good, "responses": np.zeros((2, 2, 2))},
        "short-family": {**good, "family": np.array(["fa"])},
        "int-ids": {**good, "model_id": np.array([1, 2])},
        "hostile-ids": {**good, "model_id": np.array([HOSTILE_TEXT, "m2"])},
        "bytes-ids": {**good, "model_id": np.array([b"m1", b"m2"])},
        "object": {**good, "family": np.array(["fa", None], dtype=object)},
        "missing": {k: v for k, v in good.items() if k != "owner"},
    }
    for label, arrays in variants.items():
        path = tmp_path / f"{label}.npz"
        np.savez(path, **arrays)
        rc, out, err = run_cli(["--db", str(db), "import", "neartie-npz", str(path), "-b", f"n-{label}"])
        _check_outcome(label, rc, out, err, before, dump(db), "ok" if label in ("valid", "hostile-ids") else "either")
        assert "array(" not in err and "dtype" not in err, (label, err)  # no numpy reprs
        before = dump(db)
    path = tmp_path / "raw.npz"
    path.write_bytes(b"PK\x03\x04" + b"\x00" * 40)
    rc, out, err = run_cli(["--db", str(db), "import", "neartie-npz", str(path)])
    _check_outcome("raw", rc, out, err, before, dump(db), "either")


def test_classic_irt_huge_frequency_is_refused_quickly(template_db, tmp_path):
    db = tmp_path / "t.db"
    shutil.copy(template_db, db)
    before = dump(db)
    path = tmp_path / "p_patterns.csv"
    path.write_text("i1,i2,freq\n1,0,1e15\n0,1,2\n")
    rc, out, err = run_cli(["--db", str(db), "import", "classic-irt", str(path)])
    assert rc == 1 and err.count("\n") == 1 and "line 2" in err, err
    assert dump(db) == before


def test_binomial_counts_out_of_range_are_refused(template_db, tmp_path):
    db = tmp_path / "t.db"
    shutil.copy(template_db, db)
    before = dump(db)
    for succ, trials in (("3000000000", "4294967297"), ("1e308", "1e308"), ("5", "0"), ("-1", "3"), ("4", "3")):
        path = tmp_path / "b.csv"
        path.write_text(f"model,item,successes,trials\nm1,q1,1,2\nm2,q1,{succ},{trials}\n")
        rc, _, err = run_cli(["--db", str(db), "import", "long", str(path), "-b", "binom"])
        assert rc == 1 and err.count("\n") == 1 and "line 3" in err, (succ, trials, err)
        assert dump(db) == before
