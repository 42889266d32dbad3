"""The item store: schema and migrations, the import writer's merge rules, typed reads, runs and triage."""

from __future__ import annotations

import sqlite3

import numpy as np
import pandas as pd
import pytest

from benchloupe.store import curation, read, runs
from benchloupe.store.db import StoreError, connect, schema_version
from benchloupe.store.importers.base import ParsedImport
from benchloupe.store.schema import SCHEMA_VERSION
from benchloupe.store.writer import write_import


def _parsed(name="b", n_models=4, n_items=6, seed=0, missing=0.2, keys=None, models=None):
    rng = np.random.default_rng(seed)
    y = (rng.random((n_models, n_items)) < 0.6).astype(np.int8)
    y[rng.random(y.shape) < missing] = -1
    keys = keys or [f"q{j}" for j in range(n_items)]
    models = models or [f"org{i % 2}/Llama-3-{i}B" for i in range(n_models)]
    return ParsedImport(name, "static", pd.DataFrame({"key": keys, "group": ["g1", "g2"] * (n_items // 2)}),
                        pd.DataFrame({"name": models}), correct=y, source="test")


def test_open_creates_schema_in_wal_with_foreign_keys(tmp_path):
    conn = connect(tmp_path / "x.db")
    assert schema_version(conn) == SCHEMA_VERSION
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1


def test_refuses_foreign_and_newer_databases(tmp_path):
    other = tmp_path / "other.db"
    c = sqlite3.connect(other)
    c.execute("CREATE TABLE t (x)")
    c.commit()
    c.close()
    with pytest.raises(StoreError, match="not a benchloupe database"):
        connect(other)
    newer = tmp_path / "newer.db"  # a benchloupe file (our application id) written by a newer version
    connect(newer).close()
    c = sqlite3.connect(newer)
    c.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    c.commit()
    c.close()
    with pytest.raises(StoreError, match="newer than this benchloupe"):
        connect(newer)
    versioned = tmp_path / "versioned.db"  # only a user_version, not our id: another application's (issue 24)
    c = sqlite3.connect(versioned)
    c.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    c.commit()
    c.close()
    with pytest.raises(StoreError, match="not a benchloupe database"):
        connect(versioned)
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not sqlite at all" * 100)
    with pytest.raises(StoreError, match="not a usable SQLite database"):
        connect(garbage)


def test_matrix_round_trip_is_aligned_with_items_and_models(tmp_path):
    conn = connect(tmp_path / "x.db")
    p = _parsed()
    write_import(conn, p, fmt="test")
    sm = read.load_static(conn, "b")
    assert sm.items["key"].tolist() == p.items["key"].tolist()
    assert sm.models["name"].tolist() == p.models["name"].tolist()
    np.testing.assert_array_equal(sm.correct, p.correct)
    np.testing.assert_array_equal(sm.mask, p.correct >= 0)


def test_reimport_is_idempotent_and_merge_keeps_unobserved_cells(tmp_path):
    conn = connect(tmp_path / "x.db")
    p = _parsed()
    write_import(conn, p, fmt="test")
    s2 = write_import(conn, _parsed(), fmt="test")
    assert (s2.items_new, s2.models_new, s2.cells_changed) == (0, 0, 0)
    np.testing.assert_array_equal(read.load_static(conn, "b").correct, p.correct)
    # a second file with one new model and two new items merges; old cells stay
    q = _parsed(n_models=1, n_items=2, seed=3, missing=0.0, keys=["q0", "new1"], models=["org9/phi-2"])
    s3 = write_import(conn, q, fmt="test")
    assert (s3.items_new, s3.models_new) == (1, 1)
    sm = read.load_static(conn, "b")
    assert sm.shape == (5, 7)
    np.testing.assert_array_equal(sm.correct[:4, :6], p.correct)
    assert (sm.correct[:4, 6] == -1).all()
    assert sm.correct[4, 0] == q.correct[0, 0] and sm.correct[4, 6] == q.correct[0, 1]


def test_replace_drops_previous_results(tmp_path):
    conn = connect(tmp_path / "x.db")
    write_import(conn, _parsed(), fmt="test")
    q = _parsed(n_models=1, n_items=2, seed=3, missing=0.0, keys=["q0", "q1"], models=["org9/phi-2"])
    write_import(conn, q, fmt="test", replace=True)
    sm = read.load_static(conn, "b")
    assert sm.models["name"].tolist() == ["org9/phi-2"]
    assert sm.mask[0, :2].all() and not sm.mask[0, 2:].any()


def test_failed_write_rolls_back_everything(tmp_path):
    conn = connect(tmp_path / "x.db")
    p = _parsed()
    p.rewards = pd.DataFrame({"model": ["nobody"], "item": ["q0"], "reward": [1.0]})
    with pytest.raises(ValueError, match="not in the import's model list"):
        write_import(conn, p, fmt="test")
    assert conn.execute("SELECT count(*) FROM benchmarks").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM items").fetchone()[0] == 0


def test_binomial_results_and_arena_rewards(tmp_path):
    conn = connect(tmp_path / "x.db")
    succ = np.array([[3, 0], [1, 2]], np.int32)
    tri = np.array([[4, 0], [4, 2]], np.int32)
    write_import(conn, ParsedImport("roll", "static", pd.DataFrame({"key": ["a", "b"]}),
                                    pd.DataFrame({"name": ["m1", "m2"]}), successes=succ, trials=tri), fmt="t")
    sm = read.load_static(conn, "roll")
    np.testing.assert_array_equal(sm.trials, tri)
    np.testing.assert_array_equal(sm.successes, succ)
    assert sm.correct.tolist() == [[1, -1], [0, 1]]
    rewards = pd.DataFrame({"model": ["m1", "m2", "m1"], "item": ["p1", "p1", "p2"], "reward": [0.5, -1.0, 2.0],
                            "reward_model": ["rm"] * 3})
    write_import(conn, ParsedImport("ar", "arena", pd.DataFrame({"key": ["p1", "p2"]}),
                                    pd.DataFrame({"name": ["m1", "m2"]}), rewards=rewards), fmt="t")
    am = read.load_arena(conn, "ar")
    assert am.reward_model == "rm"
    np.testing.assert_array_equal(np.isnan(am.rewards), [[False, False], [False, True]])
    assert am.rewards[0, 1] == 2.0


def test_runs_outputs_flags_and_triage_with_audit(tmp_path):
    conn = connect(tmp_path / "x.db")
    write_import(conn, _parsed(), fmt="test")
    bid = read.benchmark_id(conn, "b")
    sm = read.load_static(conn, "b")
    rid = runs.create_run(conn, "joint", bid, config={"lr": 0.02}, seed=1, code_version="t", input_fingerprint="f")
    out = runs.RunOutputs(
        metrics={"acc": 0.5},
        models=pd.DataFrame({"model_id": sm.models["id"], "theta": np.arange(4.0), "rank": [4, 3, 2, 1],
                             "family_note": ["x"] * 4}),
        items=pd.DataFrame({"item_id": sm.items["id"], "difficulty": np.linspace(-1, 1, 6)}),
        artifacts={"pairs": pd.DataFrame({"i": [0, 1], "j": [1, 2]}), "curve": {"k": [1, 2]},
                   "arrays": {"theta": np.arange(3.0)}},
        flags=pd.DataFrame({"kind": ["anomaly", "anomaly"], "item_id": sm.items["id"][:2].tolist(),
                            "model_id": sm.models["id"][:2].tolist(), "score": [4.0, -5.0],
                            "payload": [{"p": 0.1}, {"p": 0.9}]}),
    )
    runs.save_outputs(conn, rid, out)
    assert runs.get_run(conn, rid)["status"] == "done"
    assert runs.run_models(conn, rid)["family_note"].tolist() == ["x"] * 4
    assert runs.load_artifact(conn, rid, "pairs")["j"].tolist() == [1, 2]
    assert runs.load_artifact(conn, rid, "curve") == {"k": [1, 2]}
    np.testing.assert_array_equal(runs.load_artifact(conn, rid, "arrays")["theta"], np.arange(3.0))
    fl = curation.flags(conn, run_id=rid)
    assert fl["score"].tolist() == [-5.0, 4.0]  # largest |residual| first
    curation.set_flag_state(conn, int(fl["id"].iloc[0]), "confirmed", "leaked in a blog post")
    conn.close()
    conn = connect(tmp_path / "x.db")
    fl = curation.flags(conn, run_id=rid)
    assert fl["state"].tolist() == ["confirmed", "open"]
    log = curation.audit_log(conn)
    assert log.iloc[0]["action"] == "flag:confirmed" and log.iloc[0]["note"] == "leaked in a blog post"
    with pytest.raises(StoreError, match="unknown triage state"):
        curation.set_flag_state(conn, int(fl["id"].iloc[0]), "maybe")


_ROWS = "SELECT kind, benchmark_id, item_id, model_id, model_b_id, score, payload, state, note FROM flags" \
        " WHERE run_id = ? ORDER BY id"  # rows in id order: the order they were given


@pytest.mark.parametrize("per_insert", [4, 9, 50])
def test_flags_written_column_wise_are_the_rows_written_record_by_record(tmp_path, monkeypatch, per_insert):
    """The flags' rows and payload text as the record-by-record writer stored them (issue 26): ids as ints or NULL
    (NaN), scores NULL where not finite, payload dicts through ``_json``, and ``json_objects`` payload text equal to
    ``_json`` of each row's dict on hostile values (NaN, infinities, -0.0, huge and tiny floats, quotes, control
    characters, non-ASCII, a percent sign in a key); several rows to an INSERT (two full statements and one row
    left, one full statement, only single rows), the ids in the same order."""
    monkeypatch.setattr(runs, "ROWS_PER_INSERT", per_insert)
    conn = connect(tmp_path / "x.db")
    write_import(conn, _parsed(n_models=4, n_items=6), fmt="test")
    bid = read.benchmark_id(conn, "b")
    sm = read.load_static(conn, "b")
    n = 9
    rng = np.random.default_rng(3)
    floats = np.array([np.nan, np.inf, -np.inf, -0.0, 1e308, 5e-324, 0.1 + 0.2, -59.596587816486526, 1.0])
    texts = np.array(['sta"tic', "a\x00b\n", "ü\u2028", "static", "static", "arena", "%s", "", "x"], dtype=object)
    ids = sm.items["id"].to_numpy()[rng.integers(0, 6, n)]
    mids = sm.models["id"].to_numpy()[rng.integers(0, 4, n)]
    model_b = np.where(np.arange(n) % 3 == 0, np.nan, mids[::-1]).astype(float)  # NaN: no second model
    repeated = np.array([0.0, -0.0, 0.0, 1.0, 1.0, -0.0, np.nan, 1.0, 0.0])  # written once per distinct value
    cols = {"residual": floats, "observed": repeated, "source": texts, "ro%le": rng.normal(size=n).astype(np.float32),
            "mode": ["static"] * n, "nested": [{"z": 1, "a": [1.5, None]}] * n, "count": np.arange(n)}
    text = runs.json_objects(cols)
    dicts = [{k: (v.tolist() if isinstance(v, np.ndarray) else list(v))[i] for k, v in cols.items()} for i in range(n)]
    assert text == [runs._json(d) for d in dicts]
    base = {"kind": "anomaly", "item_id": ids, "model_id": mids, "model_b_id": model_b, "score": floats}
    rids = []
    for payload in ({"payload": dicts}, {runs.PAYLOAD_JSON: text}):
        rid = runs.create_run(conn, "anomalies", bid, config={}, seed=0, code_version="t", input_fingerprint="f")
        runs.save_outputs(conn, rid, runs.RunOutputs(flags=pd.DataFrame({**base, **payload})))
        rids.append(rid)
    # what the record-by-record writer stored (its code, as it was)
    recs = pd.DataFrame({**base, "payload": dicts}).to_dict("records")
    want = [("anomaly", bid, runs._int(r["item_id"]), runs._int(r["model_id"]), runs._int(r["model_b_id"]),
             runs._float(r["score"]), runs._json(r["payload"]), "open", "") for r in recs]
    for rid in rids:
        assert [tuple(r) for r in conn.execute(_ROWS, (rid,))] == want
    assert want[0][4] is None and want[0][5] is None and want[1][5] is None
    # other column types: float32 scores, ids as objects with None, integer scores
    with np.errstate(over="ignore"):
        f32 = floats.astype(np.float32)  # 1e308 -> inf
    for other in ({"score": f32, "model_b_id": [None if i % 2 else int(m) for i, m in enumerate(mids)]},
                  {"score": np.arange(n), "item_id": ids.astype(float)}):
        frame = pd.DataFrame({**base, **other, "payload": dicts})
        rid = runs.create_run(conn, "anomalies", bid, config={}, seed=0, code_version="t", input_fingerprint="f")
        runs.save_outputs(conn, rid, runs.RunOutputs(flags=frame))
        want = [("anomaly", bid, runs._int(r["item_id"]), runs._int(r["model_id"]), runs._int(r["model_b_id"]),
                 runs._float(r["score"]), runs._json(r["payload"]), "open", "") for r in frame.to_dict("records")]
        assert [tuple(r) for r in conn.execute(_ROWS, (rid,))] == want
    rid = runs.create_run(conn, "anomalies", bid, config={}, seed=0, code_version="t", input_fingerprint="f")
    runs.save_outputs(conn, rid, runs.RunOutputs(flags=pd.DataFrame({"kind": ["gap"], "score": [2.0]})))
    assert [tuple(r) for r in conn.execute(_ROWS, (rid,))] == [("gap", bid, None, None, None, 2.0, "{}", "open", "")]
    conn.close()


def _outputs(sm, n=40, seed=0):
    rng = np.random.default_rng(seed)
    mids, iids = sm.models["id"].to_numpy(), sm.items["id"].to_numpy()
    flags = pd.DataFrame({"kind": "anomaly", "item_id": iids[rng.integers(0, len(iids), n)],
                          "model_id": mids[rng.integers(0, len(mids), n)], "score": rng.normal(size=n),
                          "payload": [{"k": i} for i in range(n)]})
    return runs.RunOutputs(metrics={"m": 1}, models=pd.DataFrame({"model_id": mids, "theta": rng.normal(size=len(mids))}),
                           items=pd.DataFrame({"item_id": iids, "difficulty": rng.normal(size=len(iids))}),
                           artifacts={"t": {"a": 1}}, flags=flags)


@pytest.mark.parametrize("gone", ["model", "item", "benchmark", "run", "model_b", "nothing"])
def test_a_run_whose_references_vanished_writes_nothing(tmp_path, gone):
    """save_outputs checks each distinct referenced id once instead of SQLite's per-row foreign-key check (issue
    26): a model, item, benchmark or run another process deleted after the run started fails the write with the
    IntegrityError the per-row check raised, nothing of the outputs is written, and foreign keys are on again
    after it, as after a successful write (where ``PRAGMA foreign_key_check`` finds nothing)."""
    db = tmp_path / "x.db"
    conn = connect(db)
    write_import(conn, _parsed(n_models=4, n_items=6), fmt="test")
    write_import(conn, _parsed("other", n_models=2, n_items=2, models=["x/a", "x/b"], keys=["o1", "o2"]), fmt="test")
    bid = read.benchmark_id(conn, "b")
    sm = read.load_static(conn, "b")
    rid = runs.create_run(conn, "anomalies", bid, config={}, seed=0, code_version="t", input_fingerprint="f")
    out = _outputs(sm)
    other = sqlite3.connect(db, isolation_level=None)
    other.execute("PRAGMA foreign_keys = ON")
    if gone == "model":
        other.execute("DELETE FROM models WHERE id = ?", (int(out.flags["model_id"].iloc[7]),))
    elif gone == "item":
        other.execute("DELETE FROM items WHERE id = ?", (int(out.flags["item_id"].iloc[3]),))
    elif gone == "run":
        other.execute("DELETE FROM runs WHERE id = ?", (rid,))
    elif gone == "benchmark":
        out.flags["benchmark_id"] = bid + 1000
    elif gone == "model_b":
        out.flags["model_b_id"] = [None] * (len(out.flags) - 1) + [10**6]
    other.close()
    before = {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
              for t in ("flags", "run_models", "run_items", "run_artifacts")}
    if gone == "nothing":
        runs.save_outputs(conn, rid, out)
        assert conn.execute("SELECT count(*) FROM flags WHERE run_id = ?", (rid,)).fetchone()[0] == len(out.flags)
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        assert runs.get_run(conn, rid)["status"] == "done"
    else:
        with pytest.raises(sqlite3.IntegrityError, match="FOREIGN KEY constraint failed"):
            runs.save_outputs(conn, rid, out)
        after = {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in before}
        assert after == before or gone in ("model", "item", "run")  # the other process's cascade removed rows
        assert conn.execute("SELECT count(*) FROM flags WHERE run_id = ?", (rid,)).fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM run_models WHERE run_id = ?", (rid,)).fetchone()[0] == 0
        if gone != "run":
            assert runs.get_run(conn, rid)["status"] == "running"
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1 and not conn.in_transaction
    conn.close()


def test_retire_and_restore_items_are_audited(tmp_path):
    conn = connect(tmp_path / "x.db")
    write_import(conn, _parsed(), fmt="test")
    item_id = int(read.items(conn, "b")["id"].iloc[0])
    curation.set_item_status(conn, item_id, "retired", "ambiguous wording")
    assert read.load_static(conn, "b").shape == (4, 5)
    assert read.load_static(conn, "b", include_retired=True).shape == (4, 6)
    curation.set_item_status(conn, item_id, "active")
    assert read.load_static(conn, "b").shape == (4, 6)
    assert curation.audit_log(conn)["action"].tolist()[:2] == ["item:restore", "item:retire"]


def test_alias_merges_a_separately_imported_model(tmp_path):
    conn = connect(tmp_path / "x.db")
    write_import(conn, _parsed("static-b", models=["gpt-4", "claude2", "m3", "m4"]), fmt="test")
    rewards = pd.DataFrame({"model": ["gpt4_0613", "other"], "item": ["p1", "p1"], "reward": [1.0, 0.0]})
    write_import(conn, ParsedImport("arena-b", "arena", pd.DataFrame({"key": ["p1"]}),
                                    pd.DataFrame({"name": ["gpt4_0613", "other"]}), rewards=rewards), fmt="test")
    out = curation.alias_model(conn, "gpt-4", "gpt4_0613")
    assert out["merged"]
    am = read.load_arena(conn, "arena-b")
    assert "gpt-4" in set(am.models["name"]) and "gpt4_0613" not in set(am.models["name"])
    assert conn.execute("SELECT count(*) FROM models WHERE name = 'gpt4_0613'").fetchone()[0] == 0
    # a later import under the alias lands on the same model
    write_import(conn, ParsedImport("arena-b", "arena", pd.DataFrame({"key": ["p2"]}),
                                    pd.DataFrame({"name": ["gpt4_0613"]}),
                                    rewards=pd.DataFrame({"model": ["gpt4_0613"], "item": ["p2"], "reward": [0.5]})),
                 fmt="test")
    assert read.load_arena(conn, "arena-b").models["name"].tolist().count("gpt-4") == 1
    with pytest.raises(StoreError, match="both have results in benchmark 'static-b'"):
        curation.alias_model(conn, "gpt-4", "claude2")
