"""A batch import (a folder, a glob) writes what importing its files one by one writes (issue 24, defect 7).

The batch writer now reads each benchmark's items, models and vectors once and writes each model's vector once
at the end (a folder of 5,000 one-row files took 213.6 s, quadratic in the count; bench/bench_import_many.py). This
checks that the shortcut changes nothing: the same items in the same positions, the same models, the same cells,
the same updates of item fields, the same 0/1-into-successes/trials conversion, and ``replace``.
"""

from __future__ import annotations

import numpy as np
import pytest

from benchloupe.jobs import import_file
from benchloupe.jobs.imports import import_paths
from benchloupe.store import read
from benchloupe.store.db import connect


def _state(db) -> dict:
    conn = connect(db)
    try:
        out = {}
        for (name,) in conn.execute("SELECT name FROM benchmarks ORDER BY name"):
            sm = read.load_static(conn, name, include_retired=True)
            items = conn.execute("SELECT i.key, i.pos, i.text, i.answer, i.grp, i.chance, i.metadata FROM items i JOIN benchmarks b "
                                 "ON b.id = i.benchmark_id WHERE b.name = ? ORDER BY i.pos", (name,)).fetchall()
            models = conn.execute("SELECT m.name, bm.pos, m.family FROM benchmark_models bm JOIN models m ON m.id = "
                                  "bm.model_id JOIN benchmarks b ON b.id = bm.benchmark_id WHERE b.name = ? ORDER BY "
                                  "bm.pos", (name,)).fetchall()
            cells = {"correct": sm.correct.tolist(), "mask": sm.mask.tolist()}
            if getattr(sm, "trials", None) is not None:
                cells["trials"] = np.asarray(sm.trials).tolist()
                cells["successes"] = np.asarray(sm.successes).tolist()
            out[name] = {"items": [tuple(r) for r in items], "models": [tuple(r) for r in models], "cells": cells}
        out["imports"] = conn.execute("SELECT count(*) FROM imports").fetchone()[0]
        return out
    finally:
        conn.close()


def _files(folder, seed: int, n: int = 40) -> list:
    rng = np.random.default_rng(seed)
    folder.mkdir()
    paths, used = [], set()
    for f in range(n):
        rows = []
        for _ in range(int(rng.integers(1, 4))):
            m, i = int(rng.integers(0, 6)), int(rng.integers(0, 25))
            if (m, i) in used:
                continue
            used.add((m, i))
            rows.append(f"m{m},q{i:02d},{int(rng.integers(0, 2))},text of q{i:02d} from file {f},g{i % 3}")
        if not rows:
            continue
        p = folder / f"f{f:03d}.csv"
        p.write_text("model,item,correct,text,group\n" + "\n".join(rows) + "\n")
        paths.append(p)
    return paths


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_folder_in_one_batch_equals_its_files_one_by_one(tmp_path, seed):
    paths = _files(tmp_path / "in", seed)
    import_paths(tmp_path / "batch.db", [str(tmp_path / "in")], "long", benchmark="b")
    for p in paths:
        import_file(tmp_path / "one.db", p, "long", benchmark="b")
    batch, one = _state(tmp_path / "batch.db"), _state(tmp_path / "one.db")
    assert batch == one
    assert batch["imports"] == len(paths)


def test_binomial_and_replace_in_a_batch(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.csv").write_text("model,item,successes,trials\nm1,q1,2,4\nm2,q2,1,1\n")
    (folder / "b.csv").write_text("model,item,correct\nm1,q3,1\nm3,q1,0\n")
    (folder / "c.csv").write_text("model,item,correct\nm2,q4,1\n")
    for replace in (False, True):
        import_paths(tmp_path / "batch.db", [str(folder)], "long", benchmark="x", replace=replace)
        for p in sorted(folder.iterdir()):
            import_file(tmp_path / "one.db", p, "long", benchmark="x", replace=replace and p.name == "a.csv")
        assert _state(tmp_path / "batch.db")["x"] == _state(tmp_path / "one.db")["x"], replace


def test_item_fields_updated_by_a_later_file_of_the_batch(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "1.csv").write_text("model,item,correct,text\nm1,q1,1,first\n")
    (folder / "2.csv").write_text("model,item,correct,text\nm2,q1,0,second\n")
    summary = import_paths(tmp_path / "w.db", [str(folder)], "long", benchmark="u")
    assert [f["items_updated"] for f in summary.files] == [0, 1]
    assert _state(tmp_path / "w.db")["u"]["items"][0][2] == "second"
