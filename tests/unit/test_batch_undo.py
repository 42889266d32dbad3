"""Undo of a batch (issue 37 #2), generated over batch sizes up to 50,000 flags: one undo takes back the whole
batch (a 6,000-flag batch was undone in part, its last 1,000 flags left dismissed, and a second undo found
nothing), a second undo takes back the decision before it, a third finds nothing; the audit rows are linear in
the batch (each undo row repeated every id of the batch: 98 MB for 4,000 flags), measured in bytes of the
audit log; the audit log replayed from empty still ends at every flag's stored state."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from benchloupe.store import curation, runs
from benchloupe.store.db import StoreError, connect
from benchloupe.store.importers.base import ParsedImport
from benchloupe.store.writer import write_import


def _workspace(path, n_flags: int) -> list[int]:
    """A benchmark with one anomaly run of *n_flags* flags, each on its own (model, item) cell."""
    models = 50
    items = -(-n_flags // models)
    conn = connect(path)
    try:
        write_import(conn, ParsedImport("b", items=pd.DataFrame({"key": [f"q{j}" for j in range(items)]}),
                                        models=pd.DataFrame({"name": [f"m{i}" for i in range(models)]}),
                                        correct=np.zeros((models, items), np.int8)), fmt="test")
        bid = int(conn.execute("SELECT id FROM benchmarks WHERE name = 'b'").fetchone()[0])
        item_ids = [int(r[0]) for r in conn.execute("SELECT id FROM items ORDER BY pos")]
        model_ids = [int(r[0]) for r in conn.execute(
            "SELECT model_id FROM benchmark_models WHERE benchmark_id = ? ORDER BY pos", (bid,))]
        rid = runs.create_run(conn, "anomalies", bid, config={}, seed=0, code_version="t", input_fingerprint="f")
        k = np.arange(n_flags)
        runs.save_outputs(conn, rid, runs.RunOutputs(flags=pd.DataFrame({
            "kind": "anomaly", "item_id": [item_ids[j] for j in k // models],
            "model_id": [model_ids[j] for j in k % models], "model_b_id": None,
            "score": (k % 97) / 10.0, "payload": [{"residual": 1.0}] * n_flags})))
        return [int(r[0]) for r in conn.execute("SELECT id FROM flags ORDER BY id")]
    finally:
        conn.close()


def _audit_bytes(conn, action_like: str) -> tuple[int, int]:
    """(rows, bytes of their detail and note) of the audit rows whose action is like *action_like*."""
    n, size = conn.execute("SELECT count(*), coalesce(sum(length(detail) + length(note)), 0) FROM audit_log"
                           " WHERE entity = 'flag' AND action LIKE ?", (action_like,)).fetchone()
    return int(n), int(size)


@pytest.mark.parametrize("n", [2, 999, 6000, pytest.param(50_000, marks=pytest.mark.slow)])
def test_a_batch_of_any_size_undoes_whole_then_the_decision_before_it(tmp_path, n):
    db = tmp_path / "b.db"
    ids = _workspace(db, n)
    conn = connect(db)
    try:
        first = ids[-1]
        curation.set_flag_state(conn, first, "unsure", "looked at it first")  # the decision before the batch
        curation.set_flag_states(conn, [(f, "dismissed", None) for f in ids])
        assert conn.execute("SELECT count(*) FROM flags WHERE state = 'dismissed'").fetchone()[0] == n
        _, decided_bytes = _audit_bytes(conn, "flag:dismissed")

        out = curation.undo_latest(conn)  # the whole batch, as one
        assert len(out["undone"]) == n and set(out["flags"]) == set(ids)
        states = dict(conn.execute("SELECT state, count(*) FROM flags GROUP BY state").fetchall())
        assert states == ({"open": n - 1, "unsure": 1} if n > 1 else {"unsure": 1})
        assert conn.execute("SELECT note FROM flags WHERE id = ?", (first,)).fetchone()[0] == "looked at it first"
        undo_rows, undo_bytes = _audit_bytes(conn, "flag:undo")
        assert undo_rows == n
        # linear: an undo row is about as large as the decision row it takes back, never the batch's size
        assert undo_bytes <= 1.5 * decided_bytes
        assert conn.execute("SELECT max(length(detail)) FROM audit_log").fetchone()[0] < 600

        out = curation.undo_latest(conn)  # then the decision before the batch
        assert out["flags"] == {first: "open"}
        assert conn.execute("SELECT count(*) FROM flags WHERE state != 'open' OR note != ''").fetchone()[0] == 0
        with pytest.raises(StoreError, match="no decision to undo"):
            curation.undo_latest(conn)
        replay = curation.replay_flags(conn)
        assert replay["gaps"] == [] and replay["mismatches"] == []
    finally:
        conn.close()


def test_undo_of_a_batch_through_the_cli_and_bytes_written(tmp_path):
    """``flags --undo`` on a 6,000-flag batch: every flag back, the database file grows linearly."""
    from tests.hostile import run_cli

    db = tmp_path / "b.db"
    ids = _workspace(db, 6000)
    conn = connect(db)
    try:
        curation.set_flag_states(conn, [(f, "dismissed", None) for f in ids])
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    size_before = db.stat().st_size
    rc, out, err = run_cli(["--db", db, "flags", "--undo"])
    assert rc == 0, err
    assert len(out.splitlines()) == 6000 and all("back to open" in line for line in out.splitlines())
    conn = connect(db)
    try:
        assert conn.execute("SELECT count(*) FROM flags WHERE state != 'open'").fetchone()[0] == 0
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    grown = db.stat().st_size - size_before
    assert grown < 6000 * 1000  # under a kilobyte per flag (before: every undo row held all 6,000 ids)
    rc, out, err = run_cli(["--db", db, "flags", "--undo"])
    assert rc == 1 and "no decision to undo" in err
