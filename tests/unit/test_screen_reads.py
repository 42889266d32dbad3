"""The reads behind the workbench's list screens at leaderboard size (issue 26), checked against what they
replaced: the Items screen's pass rates without the dense matrix, the Benchmarks screen's counts without
pandas, the table's lines formatted when drawn."""

from __future__ import annotations

import numpy as np
import pandas as pd

from benchloupe.store.importers.base import ParsedImport


def _old_pass_rate(conn, benchmark: str) -> np.ndarray:
    """views.item_table's pass rate as it was: column sums of load_static's matrix (retired items too)."""
    from benchloupe.store import read

    its = read.items(conn, benchmark, with_text=False)
    sm = read.load_static(conn, benchmark, include_retired=True)
    pass_rate = pd.Series(np.nan, index=its["id"])
    if sm.correct.size:
        seen = np.count_nonzero(sm.mask, axis=0)
        with np.errstate(invalid="ignore"):
            rate = np.count_nonzero(sm.correct > 0, axis=0) / np.maximum(seen, 1)
        rate[seen == 0] = np.nan
        pass_rate.loc[sm.items["id"].to_numpy()] = rate
    return pass_rate.to_numpy()


def _workspace(tmp_path):
    from benchloupe.store import curation, read
    from benchloupe.store.db import connect
    from benchloupe.store.writer import write_import

    rng = np.random.default_rng(26)
    conn = connect(tmp_path / "w.db")
    n_models, n_items = 37, 41
    y = rng.integers(0, 2, (n_models, n_items)).astype(np.int8)
    y[rng.random(y.shape) < 0.3] = -1
    y[:, 5] = -1  # an item nobody answered
    y[:, 6] = 1  # one everybody got right
    items = pd.DataFrame({"key": [f"q{j}" for j in range(n_items)]})
    models = pd.DataFrame({"name": [f"m{i}" for i in range(n_models)]})
    write_import(conn, ParsedImport("b01", items=items, models=models, correct=y), fmt="test")
    # a second import adds items and models: the packed rows have different lengths
    more = rng.integers(0, 2, (5, 9)).astype(np.int8)
    write_import(conn, ParsedImport("b01", items=pd.DataFrame({"key": [f"z{j}" for j in range(9)]}),
                                    models=pd.DataFrame({"name": [f"late{i}" for i in range(5)]}), correct=more),
                 fmt="test")
    t = rng.integers(0, 4, (11, 13)).astype(np.int32)
    s = np.minimum(rng.integers(0, 4, (11, 13)), t).astype(np.int32)
    write_import(conn, ParsedImport("b02", items=pd.DataFrame({"key": [f"p{j}" for j in range(13)]}),
                                    models=pd.DataFrame({"name": [f"n{i}" for i in range(11)]}),
                                    successes=s, trials=t), fmt="test")
    # a benchmark of static and arena items: its static cells are counted at the static items' positions
    keys = [f"s{j}" for j in range(6)] + [f"a{j}" for j in range(3)]
    mixed_y = rng.integers(0, 2, (7, 9)).astype(np.int8)
    mixed_y[:, 6:] = -1
    mixed_y[rng.random(mixed_y.shape) < 0.2] = -1
    write_import(conn, ParsedImport("b03", kind="mixed", items=pd.DataFrame({"key": keys, "kind": ["static"] * 6 + ["arena"] * 3}),
                                    models=pd.DataFrame({"name": [f"x{i}" for i in range(7)]}), correct=mixed_y,
                                    rewards=pd.DataFrame({"model": ["x0", "x1", "x2"], "item": ["a0", "a1", "a2"],
                                                          "reward": [0.1, 0.2, 0.3], "reward_model": ""})), fmt="test")
    # retired items keep their pass rate
    for item_id in read.items(conn, "b01")["id"].head(4):
        curation.set_item_status(conn, int(item_id), "retired", "test")
    return conn


def test_pass_rates_are_the_matrix_column_sums(tmp_path):
    from benchloupe.store import read, views

    conn = _workspace(tmp_path)
    try:
        for name in ("b01", "b02"):
            got = views.item_table(conn, name)["pass_rate"].to_numpy()
            want = _old_pass_rate(conn, name)
            assert np.array_equal(got, want, equal_nan=True), name  # bit for bit
            assert np.isnan(got).sum() >= (1 if name == "b01" else 0)
        for chunk in (1, 3, 1000):  # the blocks of packed rows change nothing
            seen, right = read.static_item_counts(conn, read.benchmark_id(conn, "b01"), chunk=chunk)
            sm = read.load_static(conn, "b01", include_retired=True)
            assert seen.tolist() == np.count_nonzero(sm.mask, axis=0).tolist()
            assert right.tolist() == np.count_nonzero(sm.correct > 0, axis=0).tolist()
        with_text = views.item_table(conn, "b01", with_text=True)
        assert with_text.drop(columns=["text"]).equals(views.item_table(conn, "b01"))
        assert with_text["text"].tolist() == read.items(conn, "b01")["text"].tolist()
    finally:
        conn.close()


def test_benchmark_rows_count_every_result_as_before(tmp_path):
    from benchloupe.store import read, summary

    conn = _workspace(tmp_path)
    try:
        cols, rows = summary.summary_rows(conn)
        got = {r[cols.index("name")]: r[cols.index("results")] for r in rows}
        want = {name: read.static_cell_count(conn, name) for name in read.benchmark_summaries(conn)["name"]}
        assert got == want and want["b03"] > 0
        from benchloupe.store.summary import static_cell_counts

        assert read.benchmark_id(conn, "b03") in static_cell_counts(conn)[1]  # counted as a mixed benchmark
        recent = summary.recent_runs(conn, "b01", 4)
        assert recent == []
    finally:
        conn.close()


def test_lines_formatted_when_drawn_are_the_eager_ones():
    from benchloupe.columns import Columns
    from benchloupe.tui.widgets.table import Column, LazyLines, fmt_int, fmt_num, format_lines

    rng = np.random.default_rng(3)
    n = 200
    frame = pd.DataFrame({"key": [f"item-{i}-" + "x" * int(rng.integers(0, 40)) for i in range(n)],
                          "v": np.where(rng.random(n) < 0.2, np.nan, rng.normal(size=n)),
                          "k": rng.integers(0, 3, n), "s": rng.choice(["a", "b\x1b[31m", "🧪 wide", None], n)})
    cols = [Column("key", "key", 12, identity=True), Column("v", "v", 6, fmt_num(2, signed=True), right=True),
            Column("k", "k", 3, fmt_int, right=True), Column("s", "s", 5), Column("missing", "m", 3)]
    want = format_lines(frame, cols).tolist()
    lazy = LazyLines(frame, cols)
    order = rng.permutation(n)
    assert [lazy[r] for r in order] == [want[r] for r in order]
    assert len(lazy) == n
    lazy[4] = "changed"
    assert lazy[4] == "changed"
    as_columns = Columns({k: frame[k].to_numpy() for k in frame.columns})
    assert format_lines(as_columns, cols).tolist() == want


def test_the_queue_read_from_the_latest_run_is_the_whole_queue_filtered(tmp_path):
    """queue_flags without superseded flags reads the latest run's flags and only the decided earlier ones; the
    frame is the one the whole read gave, less its superseded rows (decisions carried over the same way)."""
    from benchloupe.store import curation, read, runs
    from benchloupe.store.db import connect
    from benchloupe.store.writer import write_import

    rng = np.random.default_rng(261)
    conn = connect(tmp_path / "q.db")
    try:
        write_import(conn, ParsedImport("b", items=pd.DataFrame({"key": [f"q{j}" for j in range(12)]}),
                                        models=pd.DataFrame({"name": [f"m{i}" for i in range(9)]}),
                                        correct=rng.integers(0, 2, (9, 12)).astype(np.int8)), fmt="test")
        bid = read.benchmark_id(conn, "b")
        item_ids, model_ids = read.items(conn, "b")["id"].to_numpy(), read.models(conn, "b")["id"].to_numpy()
        for run in range(4):
            kind = "anomalies" if run != 2 else "neartie"
            rid = runs.create_run(conn, kind, bid, config={}, seed=0, code_version="t", input_fingerprint="f")
            n = 40
            flags = pd.DataFrame({"kind": "anomaly" if kind == "anomalies" else "reversal",
                                  "item_id": item_ids[rng.integers(0, 12, n)] if kind == "anomalies" else None,
                                  "model_id": model_ids[rng.integers(0, 9, n)],
                                  "model_b_id": None if kind == "anomalies" else model_ids[rng.integers(0, 9, n)],
                                  "score": rng.normal(size=n), "payload": [{"residual": float(k)} for k in range(n)]})
            runs.save_outputs(conn, rid, runs.RunOutputs(flags=flags))
            ids = [int(r[0]) for r in conn.execute("SELECT id FROM flags WHERE run_id = ?", (rid,))]
            pick = rng.choice(ids, 15, replace=False)
            curation.set_flag_states(conn, [(int(f), str(rng.choice(["confirmed", "dismissed", "open", "unsure"])),
                                             str(rng.choice(["", "why"]))) for f in pick])
            for kind_ in ("anomaly", "reversal"):
                whole = curation.queue_flags(conn, bid, kind_, include_superseded=True)
                want = whole[~whole["superseded"]].reset_index(drop=True)
                got = curation.queue_flags(conn, bid, kind_)
                assert list(got.columns) == list(want.columns)
                for col in got.columns:
                    assert got[col].tolist() == want[col].tolist() or (
                        got[col].isna().tolist() == want[col].isna().tolist()
                        and got[col].dropna().tolist() == want[col].dropna().tolist()), (run, kind_, col)
                if kind_ == "anomaly" and run >= 1:
                    assert got["carried_from"].notna().any()
                text = curation.queue_flags(conn, bid, kind_, parse_payload=False)  # the anomaly queue's read
                assert text.drop(columns=["payload"]).equals(got.drop(columns=["payload"]))
                assert [curation.payload_of(p) for p in text["payload"]] == got["payload"].tolist()
                assert all(isinstance(p, str) for p in text["payload"])
    finally:
        conn.close()


def _joined_flags(conn, **where) -> pd.DataFrame:
    """curation.flags as it read before: one LEFT JOIN per flag for the item's key/text/answer and the names."""
    sql = ("SELECT f.*, i.key AS item_key, i.text AS item_text, i.answer AS item_answer, ma.name AS model,"
           " mb.name AS model_b FROM flags f LEFT JOIN items i ON i.id = f.item_id"
           " LEFT JOIN models ma ON ma.id = f.model_id LEFT JOIN models mb ON mb.id = f.model_b_id WHERE 1")
    args = []
    for col, val in where.items():
        sql += f" AND f.{col} = ?"
        args.append(val)
    return pd.read_sql_query(sql + " ORDER BY abs(coalesce(f.score, 0)) DESC, f.id", conn, params=args)


def test_flags_name_their_items_and_models_as_the_join_did(tmp_path):
    from benchloupe.store import curation, read, runs
    from benchloupe.store.db import connect
    from benchloupe.store.writer import write_import

    rng = np.random.default_rng(262)
    conn = connect(tmp_path / "f.db")
    try:
        items = pd.DataFrame({"key": [f"q{j}" for j in range(8)],
                              "text": [None, "", "t[b]x", None, "🧪", "a\x1b[31m", "x" * 900, "y"]})
        write_import(conn, ParsedImport("b", items=items, models=pd.DataFrame({"name": [f"m{i}" for i in range(6)]}),
                                        correct=rng.integers(0, 2, (6, 8)).astype(np.int8)), fmt="test")
        bid = read.benchmark_id(conn, "b")
        item_ids, model_ids = read.items(conn, "b")["id"].to_numpy(), read.models(conn, "b")["id"].to_numpy()
        rid = runs.create_run(conn, "anomalies", bid, config={}, seed=0, code_version="t", input_fingerprint="f")
        runs.save_outputs(conn, rid, runs.RunOutputs(flags=pd.DataFrame({
            "kind": "anomaly", "item_id": item_ids[rng.integers(0, 8, 30)], "model_id": model_ids[rng.integers(0, 6, 30)],
            "score": np.r_[rng.normal(size=27), [0.0, 0.0, np.inf]], "payload": [{}] * 30})))
        rid = runs.create_run(conn, "neartie", bid, config={}, seed=0, code_version="t", input_fingerprint="f")
        runs.save_outputs(conn, rid, runs.RunOutputs(flags=pd.DataFrame({
            "kind": "reversal", "item_id": None, "model_id": model_ids[:5], "model_b_id": model_ids[1:6],
            "score": [0.1, -0.1, None, 0.3, 0.3], "payload": [{}] * 5})))
        conn.execute("INSERT INTO flags (kind, benchmark_id, payload) VALUES ('gap', ?, '{}')", (bid,))
        conn.commit()
        for where in ({}, {"kind": "anomaly"}, {"kind": "reversal"}, {"kind": "gap"}, {"run_id": rid},
                      {"kind": "candidate"}):
            want = _joined_flags(conn, **where)
            got = curation.flags(conn, parse_payload=False, **where)
            assert list(got.columns) == list(want.columns), where
            assert got.dtypes.tolist() == want.dtypes.tolist(), where
            assert got.equals(want), where
    finally:
        conn.close()
