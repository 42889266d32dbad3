"""Issue 26 (leaderboard scale): every speed change keeps its results. Each test compares the fast path with the
slow one it replaced (kept here, or reached through a switch) on generated inputs chosen to hit the edges."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from benchloupe.jobs.imports import _check_overlaps
from benchloupe.store.importers.base import ImportFormatError, ParsedImport


# ------------------------------------------------------------------------------------ import: batch overlap check
def _overlaps_per_cell(batch):
    """The check as it was (one dictionary entry per observed cell): the oracle for the array version."""
    seen = {}
    for path, parsed in batch:
        grid = parsed.trials if parsed.trials is not None else parsed.correct
        if grid is None:
            continue
        observed = grid > 0 if parsed.trials is not None else grid >= 0
        keys = parsed.items["key"].astype(str).tolist()
        for m, name in enumerate(parsed.models["name"].astype(str)):
            for j in np.flatnonzero(observed[m]):
                other = seen.setdefault((parsed.benchmark, name, keys[j]), path)
                if other != path:
                    return path, f"model {name!r} item {keys[j]!r} of benchmark {parsed.benchmark!r} is also in {other}"
    return None


def _random_batch(rng):
    batch = []
    for f in range(int(rng.integers(1, 5))):
        models = sorted(set(rng.choice([f"m{i}" for i in range(6)], int(rng.integers(1, 5)))))
        if rng.random() < 0.2:  # a name repeated within one file (the long format can do this)
            models = models + [models[0]]
        items = sorted(set(rng.choice([f"q{i}" for i in range(8)], int(rng.integers(1, 6)))))
        shape = (len(models), len(items))
        bench = str(rng.choice(["a", "b"]))
        if rng.random() < 0.3:
            trials = rng.integers(0, 3, shape).astype(np.int32) * (rng.random(shape) < 0.4)
            parsed = ParsedImport(bench, items=pd.DataFrame({"key": items}), models=pd.DataFrame({"name": models}),
                                  successes=np.minimum(trials, 1).astype(np.int32), trials=trials.astype(np.int32))
        else:
            correct = np.where(rng.random(shape) < 0.35, rng.integers(0, 2, shape), -1).astype(np.int8)
            parsed = ParsedImport(bench, items=pd.DataFrame({"key": items}), models=pd.DataFrame({"name": models}),
                                  correct=correct)
        batch.append((f"file{f}.csv", parsed))
    return batch


def test_batch_overlap_check_matches_the_per_cell_check():
    rng = np.random.default_rng(26)
    clashes = 0
    for _ in range(600):
        batch = _random_batch(rng)
        want = _overlaps_per_cell(batch)
        if want is None:
            _check_overlaps(batch)
            continue
        clashes += 1
        with pytest.raises(ImportFormatError) as err:
            _check_overlaps(batch)
        assert (err.value.path, err.value.what) == want
    assert 30 < clashes < 570  # both outcomes were exercised
