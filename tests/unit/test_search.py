"""Item search (issue 16 #5): the FTS5 index the migration builds and the triggers keep in step, the store's
``search_items`` under hostile queries, and ``benchloupe search`` as a real process (escaped output, light imports)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import benchloupe
from benchloupe.store import curation, fill
from benchloupe.store.db import StoreError, _split, connect
from benchloupe.store.importers.base import ParsedImport
from benchloupe.store.schema import MIGRATIONS, SCHEMA_VERSION
from benchloupe.store.search import plain_query, search_items
from benchloupe.store.writer import write_import

ROOT = Path(benchloupe.__file__).resolve().parents[1]


def _import(conn, name, texts, *, keys=None, groups=None, metadata=None, answers=None):
    n = len(texts)
    items = pd.DataFrame({"key": keys or [f"q{j}" for j in range(n)], "text": texts,
                          "group": groups or ["g"] * n})
    if metadata is not None:
        items["metadata"] = metadata
    if answers is not None:
        items["answer"] = answers
    y = np.ones((2, n), dtype=np.int8)
    write_import(conn, ParsedImport(name, "static", items, pd.DataFrame({"name": ["m0", "m1"]}), correct=y,
                                    source="test"), fmt="test")


def _keys(conn, query, **kw):
    return [(h["benchmark"], h["key"]) for h in search_items(conn, query, **kw)]


@pytest.fixture
def conn(tmp_path):
    c = connect(tmp_path / "s.db")
    yield c
    c.close()


# ------------------------------------------------------------------------------------------------ migration

# the migration that made the search index (later ones follow it: the test builds a database from just before it)
FTS = next(i for i, script in enumerate(MIGRATIONS) if "CREATE VIRTUAL TABLE items_fts" in script)


def test_migration_indexes_items_of_a_database_made_before_it(tmp_path):
    path = tmp_path / "old.db"
    raw = sqlite3.connect(path, isolation_level=None)
    for script in MIGRATIONS[:FTS]:
        for statement in _split(script):
            raw.execute(statement)
    raw.execute(f"PRAGMA user_version = {FTS}")
    raw.execute("INSERT INTO benchmarks (id, name) VALUES (1, 'legacy-bench')")
    raw.executemany("INSERT INTO items (benchmark_id, pos, key, text, answer, grp, metadata) VALUES (1, ?, ?, ?, ?, ?, ?)",
                    [(0, "k0", "What is the boiling point of water?", "100 C", "physics", '{"source": "textbook"}'),
                     (1, "k1", "Name a noble gas.", "argon", "chemistry", "not json {"),
                     (2, "k2", "", "", "", "{}")])
    assert raw.execute("SELECT count(*) FROM sqlite_master WHERE name = 'items_fts'").fetchone()[0] == 0
    raw.close()

    conn = connect(path)
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert conn.execute("SELECT count(*) FROM items_fts").fetchone()[0] == 3
        assert _keys(conn, "boiling water") == [("legacy-bench", "k0")]
        assert _keys(conn, "argon") == [("legacy-bench", "k1")]          # the answer
        assert _keys(conn, "textbook") == [("legacy-bench", "k0")]       # a metadata value
        assert _keys(conn, "json") == [("legacy-bench", "k1")]           # invalid metadata indexed as text
        assert len(_keys(conn, "legacy")) == 3                           # the benchmark name
        # and the triggers work from then on
        conn.execute("INSERT INTO items (benchmark_id, pos, key, text) VALUES (1, 3, 'k3', 'xenon lamp')")
        assert _keys(conn, "xenon") == [("legacy-bench", "k3")]
    finally:
        conn.close()


def test_the_migration_keeps_the_earlier_constraint_edit_literal():
    assert "'failed', 'cancelled', 'interrupted')" not in MIGRATIONS[FTS]
    assert "''failed'', ''cancelled'', ''interrupted'')" in MIGRATIONS[1]


# ------------------------------------------------------------------------------------------------ in step

def test_import_reimport_edit_delete_and_rename_stay_in_step(conn):
    _import(conn, "alpha", ["the quick brown fox", "a lazy dog sleeps"], groups=["animals", "pets"],
            metadata=[{"source": "fables", "year": 1867}, {}], answers=["jumps", "snores"])
    _import(conn, "beta", ["another fox story"])
    assert sorted(_keys(conn, "fox")) == [("alpha", "q0"), ("beta", "q0")]
    assert _keys(conn, "fables") == [("alpha", "q0")]
    assert _keys(conn, "1867") == [("alpha", "q0")]
    assert _keys(conn, "snores") == [("alpha", "q1")]
    assert _keys(conn, "pets") == [("alpha", "q1")]
    assert _keys(conn, "fox", benchmark="beta") == [("beta", "q0")]

    _import(conn, "alpha", ["the quick red fox", "a lazy dog sleeps"])            # an importer's update
    assert _keys(conn, "brown") == [] and _keys(conn, "red") == [("alpha", "q0")]

    conn.execute("UPDATE items SET text = 'an edited question about owls' WHERE key = 'q1' AND benchmark_id ="
                 " (SELECT id FROM benchmarks WHERE name = 'alpha')")                  # an edit
    assert _keys(conn, "dog") == [] and _keys(conn, "owls") == [("alpha", "q1")]

    conn.execute("UPDATE benchmarks SET name = 'gamma' WHERE name = 'beta'")          # a rename
    assert _keys(conn, "story") == [("gamma", "q0")] and _keys(conn, "beta") == []

    conn.execute("DELETE FROM items WHERE key = 'q0' AND benchmark_id = (SELECT id FROM benchmarks WHERE name ="
                 " 'alpha')")                                                          # one item deleted
    assert _keys(conn, "red") == []
    conn.execute("DELETE FROM benchmarks WHERE name = 'gamma'")                       # a cascade
    assert _keys(conn, "story") == []
    n_items = conn.execute("SELECT count(*) FROM items").fetchone()[0]
    assert conn.execute("SELECT count(*) FROM items_fts").fetchone()[0] == n_items == 1


def test_retire_shows_in_the_hits_and_derive_indexes_the_copies(conn):
    from benchloupe.store.writer import derive_benchmark

    _import(conn, "alpha", ["photosynthesis in leaves", "mitochondria energy"])
    item = conn.execute("SELECT id FROM items WHERE key = 'q0'").fetchone()[0]
    curation.set_item_status(conn, item, "retired")
    hits = search_items(conn, "photosynthesis")
    assert [(h["key"], h["status"]) for h in hits] == [("q0", "retired")]
    curation.set_item_status(conn, item, "active")
    assert search_items(conn, "photosynthesis")[0]["status"] == "active"

    derive_benchmark(conn, "alpha", "alpha-small", [item], reason="test")
    assert sorted(_keys(conn, "photosynthesis")) == [("alpha", "q0"), ("alpha-small", "q0")]


def test_benchfill_accept_makes_the_new_item_searchable(conn):
    _import(conn, "alpha", ["integrate x squared"])
    bid = conn.execute("SELECT id FROM benchmarks WHERE name = 'alpha'").fetchone()[0]
    parent = conn.execute("SELECT id FROM items").fetchone()[0]
    sid = fill.create_session(conn, bid, 0.0, 1.0, 0.5, {})
    fill.upsert_candidate(conn, sid, "c1", round_=1, parent_item_id=parent, text="differentiate sine of theta",
                          answer="cosine", payload={})
    cid = conn.execute("SELECT id FROM fill_candidates").fetchone()[0]
    assert _keys(conn, "differentiate") == []                   # a proposal is not an item
    item_id = fill.decide(conn, cid, "accept", edited_text="differentiate cosine of theta twice")
    hits = search_items(conn, "differentiate twice")
    assert [(h["item_id"], h["origin"]) for h in hits] == [(item_id, "benchfill")]
    assert _keys(conn, "differentiate sine") == [("alpha", f"benchfill-{sid}-{cid}")]  # proposed_text metadata


# ------------------------------------------------------------------------------------------------ queries

HOSTILE = ['"', '""', "'", 'a"b', "AND", "OR", "NOT", "NEAR", "NEAR(a b)", "*", "fox*", "-fox", "- -", "^fox",
           "text:fox", "key:", "(fox", "fox)", "{fox}", "\x00", "fox\x00dog", "\x1b[31mfox", "\u202efox", "\t\n",
           "", "   ", "+", "fox AND", "fox OR dog", "a" * 5000, "%", "_", "\\", "fox; DROP TABLE items; --",
           "\ufffd", "🦊", "\udcff"]


@pytest.mark.parametrize("query", HOSTILE)
def test_hostile_plain_queries_are_words_never_errors(conn, query):
    _import(conn, "alpha", ["the quick brown fox", "AND OR NOT near"])
    hits = search_items(conn, query)
    assert isinstance(hits, list)
    assert conn.execute("SELECT count(*) FROM items").fetchone()[0] == 2


def test_plain_words_are_not_syntax(conn):
    _import(conn, "alpha", ["the quick brown fox", "dogs AND cats", "fox-trot dance"])
    assert _keys(conn, "AND") == [("alpha", "q1")]              # a word, not an operator
    assert sorted(_keys(conn, "fox*")) == [("alpha", "q0"), ("alpha", "q2")]  # "*" is no word: just "fox"
    assert _keys(conn, "fox-trot") == [("alpha", "q2")]         # a phrase of the two words
    assert _keys(conn, "quick fox") == [("alpha", "q0")]        # every word required
    assert _keys(conn, "text:fox") == []                        # no column filter: "text fox" is not in q0
    assert plain_query('a"b AND\x00c') == '"a""b" "AND" "c"'


def test_raw_queries_take_fts5_syntax_and_bad_syntax_is_one_line(conn):
    _import(conn, "alpha", ["the quick brown fox", "a lazy dog", "foxglove flower"])
    assert sorted(_keys(conn, "fox OR dog", raw=True)) == [("alpha", "q0"), ("alpha", "q1")]
    assert sorted(_keys(conn, "fox*", raw=True)) == [("alpha", "q0"), ("alpha", "q2")]
    assert _keys(conn, "text:lazy", raw=True) == [("alpha", "q1")]
    for bad in ['a"b', "AND", "(fox", "nosuchcolumn:fox", "-", "fox OR", "NEAR(", "^"]:
        with pytest.raises(StoreError) as err:
            search_items(conn, bad, raw=True)
        assert "\n" not in str(err.value) and "FTS5" in str(err.value)


def test_limits_and_unknown_benchmark_are_one_line_errors(conn):
    _import(conn, "alpha", [f"fox number {j}" for j in range(20)])
    assert len(search_items(conn, "fox", limit=7)) == 7
    for bad in (0, -1, 10**9, True, 2.5):
        with pytest.raises(StoreError, match="limit"):
            search_items(conn, "fox", limit=bad)
    with pytest.raises(StoreError, match="no benchmark named"):
        search_items(conn, "fox", benchmark="nope")


def test_bm25_puts_the_key_and_dense_matches_first(conn):
    _import(conn, "alpha", ["a long text that mentions zebra once among many other words of no interest at all",
                            "zebra zebra zebra", "nothing here"], keys=["long", "dense", "zebra-key"])
    assert [k for _, k in _keys(conn, "zebra")] == ["zebra-key", "dense", "long"]
    scores = [h["score"] for h in search_items(conn, "zebra")]
    assert scores == sorted(scores)


def test_unicode_and_markup_in_item_text(conn):
    _import(conn, "alpha", ["Qu'est-ce qu'un café crème ?", "[bold red]markup[/] <b>html</b> $x^2$",
                            "Straße und Grüße", "日本語の問題", "emoji 🦊 fox"])
    assert _keys(conn, "cafe creme") == [("alpha", "q0")]        # diacritics folded both ways
    assert _keys(conn, "café") == [("alpha", "q0")]
    assert _keys(conn, "[bold red]markup[/]") == [("alpha", "q1")]
    hit = search_items(conn, "markup")[0]
    assert "[bold red]" in hit["snippet"] and "<b>html</b>" in hit["snippet"]   # markup is data, kept literally
    assert _keys(conn, "grüße") == [("alpha", "q2")]
    assert _keys(conn, "日本語の問題") == [("alpha", "q3")]
    assert _keys(conn, "fox") == [("alpha", "q4")]
    marked = search_items(conn, "fox", marks=("\ue000", "\ue001"))[0]["snippet"]
    assert "\ue000fox\ue001" in marked


# ------------------------------------------------------------------------------------------------ the CLI

def _cli(*argv, timeout=120):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "benchloupe", *argv], capture_output=True, text=True, env=env,
                          timeout=timeout)


def test_cli_search_escapes_control_characters_and_speaks_json(tmp_path):
    db = tmp_path / "c.db"
    conn = connect(db)
    _import(conn, "evil", ["beware \x1b[2J\x1b]0;pwned\x07 the needle \x9b here"],
            keys=["k\x1b[31m"], groups=["g\x07"])
    # imports refuse such a benchmark name now (benchloupe/names.py, issue 37), but a database written before the
    # rule may hold one: search still shows it escaped
    conn.execute("UPDATE benchmarks SET name = ? WHERE name = 'evil'", ("evil\x1b]0;title\x07",))
    conn.commit()
    conn.close()
    out = _cli("search", "needle", "--db", str(db))
    assert out.returncode == 0, out.stderr
    assert not any(c in out.stdout for c in "\x1b\x07\x9b"), out.stdout
    assert "\\x1b" in out.stdout and "[needle]" in out.stdout and "benchmark" in out.stdout
    js = _cli("search", "needle", "--db", str(db), "--json")
    assert js.returncode == 0 and "\x1b" not in js.stdout and "\x9b" not in js.stdout
    hits = json.loads(js.stdout)
    assert hits[0]["benchmark"] == "evil\x1b]0;title\x07" and hits[0]["key"] == "k\x1b[31m"


def test_cli_search_errors_are_one_line_and_exit_1(tmp_path):
    db = tmp_path / "c.db"
    conn = connect(db)
    _import(conn, "alpha", ["a fox"])
    conn.close()
    for argv in (["--raw", 'a"b'], ["--raw", "AND"], ["--benchmark", "nope", "fox"]):
        out = _cli("search", "--db", str(db), *argv)
        assert out.returncode == 1, (argv, out.stderr)
        assert out.stderr.count("\n") == 1 and out.stderr.startswith("benchloupe: error: search:"), out.stderr
    out = _cli("search", "--db", str(db), "--limit", "0", "fox")  # the option's stated range (issue 24)
    assert out.returncode == 1 and out.stderr.count("\n") == 1 and "--limit 0: must be a whole number from 1" in out.stderr
    for argv in (['a"b', "AND", "*"], ["--", "-fox"], ["NEAR(", "^"]):
        out = _cli("search", "--db", str(db), *argv)
        assert out.returncode == 0 and out.stderr == "", (argv, out.stderr)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for argv in ([b"\xff\xfe fox"], [b"--benchmark", b"\xff", b"fox"]):   # not UTF-8: surrogates in sys.argv
        out = subprocess.run([sys.executable, "-m", "benchloupe", "search", "--db", str(db), *argv],
                             capture_output=True, env=env, timeout=120)
        assert b"Traceback" not in out.stderr and out.stderr.count(b"\n") <= 1, out.stderr
    out = _cli("search", "--db", str(tmp_path / "missing.db"), "fox")
    assert out.returncode == 1 and "no such database" in out.stderr


def test_cli_search_loads_no_heavy_modules(tmp_path):
    db = tmp_path / "c.db"
    connect(db).close()
    code = ("import sys, runpy; sys.argv = ['benchloupe', 'search', 'fox', '--db', sys.argv[1]]\n"
            "try:\n    runpy.run_module('benchloupe', run_name='__main__')\n"
            "except SystemExit:\n    pass\n"
            "sys.stderr.write('\\nMODULES ' + __import__('json').dumps(sorted(sys.modules)))")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code, str(db)], capture_output=True, text=True, env=env,
                         timeout=120)
    mods = set(json.loads(out.stderr.rsplit("MODULES ", 1)[1]))
    heavy = {m for m in mods if m.split(".")[0] in ("pandas", "numpy", "scipy", "torch", "openai", "textual")
             or m.startswith("benchloupe.engine")}
    assert not heavy, sorted(heavy)[:10]
    assert "benchloupe.store.search" in mods


def test_a_replace_that_skips_the_delete_trigger_leaves_no_stale_hit_or_blocked_id(conn):
    # INSERT OR REPLACE deletes the conflicting row without its DELETE trigger (recursive_triggers is off): the
    # index must neither show the old row nor refuse a later item that gets the old id back.
    conn.execute("INSERT INTO benchmarks (id, name) VALUES (1, 'b')")
    conn.execute("INSERT INTO items (id, benchmark_id, pos, key, text) VALUES (7, 1, 0, 'k', 'old words')")
    conn.execute("INSERT OR REPLACE INTO items (id, benchmark_id, pos, key, text) VALUES (8, 1, 0, 'k', 'new words')")
    assert _keys(conn, "old") == [] and _keys(conn, "new") == [("b", "k")]
    conn.execute("DELETE FROM items WHERE id = 8")
    conn.execute("INSERT INTO items (id, benchmark_id, pos, key, text) VALUES (7, 1, 0, 'k2', 'reused id')")
    assert _keys(conn, "reused") == [("b", "k2")] and _keys(conn, "old") == []
