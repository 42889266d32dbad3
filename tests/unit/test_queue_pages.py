"""store/queue.py (issue 26) against the whole-queue read it replaces on the queue screens: for generated
workspaces with several runs, decisions carried over from earlier runs, superseded flags, reversal pairs and
hostile payloads, every window, position, count and filter agrees row for row with ``curation.queue_flags``
filtered the way the screens filtered it in pandas before."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from benchloupe.store.importers.base import ParsedImport
from benchloupe.store.queue import Filter, FlagQueue, payload_truthy, prepare

REVERSED = [True, False, None, 0, 1, 0.0, 2.5, "", "no", [], [0], {}, {"a": 1}, "missing", float("nan")]


def _workspace(conn, rng):
    from benchloupe.store import curation, read, runs
    from benchloupe.store.writer import write_import

    write_import(conn, ParsedImport("b", items=pd.DataFrame({"key": [f"q{j}" for j in range(10)]}),
                                    models=pd.DataFrame({"name": [f"m{i}" for i in range(8)]}),
                                    correct=rng.integers(0, 2, (8, 10)).astype(np.int8)), fmt="test")
    bid = read.benchmark_id(conn, "b")
    item_ids, model_ids = read.items(conn, "b")["id"].to_numpy(), read.models(conn, "b")["id"].to_numpy()
    for _run in range(3):
        for kind in ("anomalies", "neartie"):
            rid = runs.create_run(conn, kind, bid, config={}, seed=0, code_version="t", input_fingerprint="f")
            n = 60
            rev = [REVERSED[k % len(REVERSED)] for k in range(n)]
            payload = [{"residual": float(k)} | ({} if r == "missing" else {"reversed": r}) for k, r in enumerate(rev)]
            flags = pd.DataFrame({
                "kind": "anomaly" if kind == "anomalies" else "reversal",
                "item_id": item_ids[rng.integers(0, 10, n)] if kind == "anomalies" else None,
                "model_id": model_ids[rng.integers(0, 8, n)],
                "model_b_id": None if kind == "anomalies" else model_ids[rng.integers(0, 8, n)],
                # ties and missing scores: the order's second key and coalesce(score, 0) count
                "score": np.where(rng.random(n) < 0.2, np.nan, rng.integers(-4, 5, n) / 2.0),
                "payload": payload})
            runs.save_outputs(conn, rid, runs.RunOutputs(flags=flags))
            ids = [int(r[0]) for r in conn.execute("SELECT id FROM flags WHERE run_id = ?", (rid,))]
            pick = rng.choice(ids, 25, replace=False)
            for who in ("ann", "bea"):
                from benchloupe.store import actor

                actor.set_actor(who)
                half = pick[: len(pick) // 2] if who == "ann" else pick[len(pick) // 2:]
                curation.set_flag_states(conn, [(int(f), str(rng.choice(["confirmed", "dismissed", "open",
                                                                          "unsure"])), str(rng.choice(["", "why"])))
                                                for f in half])
            actor.set_actor(None)
    # a payload only Python's JSON reads (NaN): the reversed filter must still answer as Python does
    conn.execute("UPDATE flags SET payload = '{\"reversed\": NaN, \"x\": 1}' WHERE id = (SELECT max(id) FROM flags"
                 " WHERE kind = 'reversal')")
    return bid


def _old_mask(df: pd.DataFrame, state_filter: str, actor: str, focus, overlay) -> np.ndarray:
    """FlagQueueScreen.filter_mask (and Reversals') as they were, on the whole frame with the overlay applied."""
    keep = np.ones(len(df), bool)
    if state_filter in ("open", "confirmed", "dismissed", "unsure"):
        keep &= (df["state"] == state_filter).to_numpy()
    elif state_filter in ("mine", "others'"):
        by = df["updated_by"].fillna("").to_numpy()
        decided = ((df["version"] > 0) & ((df["state"] != "open") | (df["note"] != ""))).to_numpy()
        keep &= decided & ((by == actor) if state_filter == "mine" else (by != actor))
    elif state_filter == "reversed":
        keep &= np.array([bool(p.get("reversed")) for p in df["payload"]], bool)
    if focus is not None:
        keep &= (df[focus[0]] == focus[1]).to_numpy()
    return keep


def _where(state_filter: str, focus) -> tuple[str, dict]:
    where, params = [], {}
    if state_filter in ("open", "confirmed", "dismissed", "unsure"):
        where.append("q.state = :state")
        params["state"] = state_filter
    elif state_filter in ("mine", "others'"):
        where.append("q.version > 0 AND (q.state != 'open' OR q.note != '') AND coalesce(q.updated_by, '')"
                     f" {'=' if state_filter == 'mine' else '!='} :actor")
        params["actor"] = "ann"
    elif state_filter == "reversed":
        where.append(payload_truthy("reversed"))
    if focus is not None:
        where.append(f"q.{focus[0]} = :focus")
        params["focus"] = int(focus[1])
    return " AND ".join(where), params


def _same(got: pd.DataFrame, want: pd.DataFrame) -> None:
    assert list(got.columns) == list(want.columns)
    for col in got.columns:
        a, b = got[col].tolist(), want[col].tolist()
        same = [(x is None or x is pd.NA or (isinstance(x, float) and x != x)) ==
                (y is None or y is pd.NA or (isinstance(y, float) and y != y)) and
                (x is None or x is pd.NA or (isinstance(x, float) and x != x) or x == y) for x, y in zip(a, b)]
        assert len(a) == len(b) and all(same), (col, a, b)


@pytest.mark.parametrize("seed", [2601, 2602, 2603])
def test_windows_agree_with_the_whole_queue(tmp_path, seed):
    from benchloupe.store import curation
    from benchloupe.store.db import connect

    rng = np.random.default_rng(seed)
    conn = prepare(connect(tmp_path / "q.db"))
    try:
        bid = _workspace(conn, rng)
        for kind in ("anomaly", "reversal"):
            for superseded in (False, True):
                whole = curation.queue_flags(conn, bid, kind, include_superseded=superseded)
                q = FlagQueue(conn, bid, kind, include_superseded=superseded)
                if not superseded:
                    assert q.carries  # decisions of earlier runs to carry over
                ids = whole["id"].tolist()
                overlay = {int(i): ("dismissed", "mine") for i in rng.choice(ids, 4, replace=False)} | {
                    int(i): ("open", "") for i in rng.choice(ids, 3, replace=False)}
                shown = whole.copy()
                for fid, (s, n) in overlay.items():
                    shown.loc[shown["id"] == fid, ["state", "note"]] = [s, n]
                focus_model = ("model_id", int(whole["model_id"].iloc[0]))
                filters = ["all", "open", "confirmed", "dismissed", "unsure", "mine", "others'"] + (
                    ["reversed"] if kind == "reversal" else [])
                for state_filter in filters:
                    for focus in (None, focus_model):
                        for ov in ({}, overlay):
                            base = shown if ov else whole
                            want = base[_old_mask(base, state_filter, "ann", focus, ov)].reset_index(drop=True)
                            filt = Filter(*_where(state_filter, focus))
                            w = q.window(conn, filt, overlay=ov, page=10_000)
                            assert (w.view, w.total) == (len(want), len(base))
                            assert w.triaged == int((base["state"] != "open").sum())
                            _same(w.rows, want)
                            for at in (0, 7, len(want) - 1, len(want) + 5):  # windows of 9 around a position
                                w = q.window(conn, filt, overlay=ov, at=at, lead=3, page=9)
                                if not len(want):
                                    assert len(w.rows) == 0
                                    continue
                                assert w.anchor == max(0, min(at, len(want) - 1))
                                _same(w.rows, want.iloc[w.start:w.start + 9].reset_index(drop=True))
                            for k in rng.choice(len(base), min(5, len(base)), replace=False):  # around a flag
                                fid = int(base["id"].iloc[k])
                                keep = Filter(filt.where, filt.params, fid)
                                kept = base[_old_mask(base, state_filter, "ann", focus, ov)
                                            | (base["id"] == fid).to_numpy()].reset_index(drop=True)
                                w = q.window(conn, keep, overlay=ov, anchor=q.key_of(conn, fid), lead=3, page=9)
                                pos = kept.index[kept["id"] == fid][0]
                                assert w.anchor == pos and w.view == len(kept)
                                _same(w.rows, kept.iloc[w.start:w.start + 9].reset_index(drop=True))
                                assert w.start == max(0, min(pos - 3, len(kept) - 9))
                                after = q.window(conn, keep, overlay=ov, anchor=q.key_of(conn, fid), after=True,
                                                 lead=2, page=6)
                                assert after.anchor == pos + 1
                                _same(after.rows, kept.iloc[after.start:after.start + 6].reset_index(drop=True))
                    assert set(q.in_view(conn, Filter(*_where(state_filter, None)), ids)) == set(
                        whole.loc[_old_mask(whole, state_filter, "ann", None, {}), "id"])
                col = "model_id"
                assert q.counts(conn, col) == {int(k): int(v) for k, v in whole[col].value_counts().items()}
                _same(q.by_id(conn, ids[::-1][:7] + [10**9]), whole[whole["id"].isin(ids[:][-7:])]
                      .reset_index(drop=True))
    finally:
        conn.close()


def test_payload_truthy_is_pythons_bool():
    import sqlite3

    conn = prepare(sqlite3.connect(":memory:"))
    for value in REVERSED + ["missing-key", "not json"]:
        if value == "not json":
            text, want = "{not json", False
        elif value == "missing-key":
            text, want = json.dumps({"x": 1}), False
        else:
            text, want = json.dumps({"reversed": value}), bool(value)
        got = conn.execute(f"SELECT {payload_truthy('reversed', '?')}".replace("?", ":p"), {"p": text}).fetchone()[0]
        assert bool(got) == want, (value, text, got)
    with pytest.raises(ValueError):
        payload_truthy("a'); DROP TABLE flags; --")
