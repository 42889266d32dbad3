"""Bradley-Terry on a benchmark's imported pairwise preferences (battles, AlpacaEval pairs): ``fit bt`` on a
benchmark that holds preferences but no arena rewards (issue 12; reached through the ``bt`` analysis, so the
Runs screen's list is unchanged; the run's kind is ``bt-pref``). Engine: ``benchloupe.engine.pairwise``."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import numpy as np
import pandas as pd

from benchloupe.engine.common import EngineError, Progress, check_cancel, no_progress
from benchloupe.engine.pairwise import PairwiseData, fit_bt
from benchloupe.store import read, runs
from benchloupe.store.db import connect

from .base import RunContext, fingerprint
from .data import rank_desc


@dataclass(frozen=True)
class PairwiseConfig:
    """Bradley-Terry on preferences: ties count half a win; ``alpha`` pseudo-comparisons against a reference
    keep all-win/all-loss models finite; ``bootstrap`` replicates over battles give percentile intervals."""

    alpha: float = 0.5
    bootstrap: int = 200
    level: float = 0.95
    judge: str = ""  # only this judge's preferences ("" = all)

    def __post_init__(self) -> None:
        if isinstance(self.bootstrap, bool) or int(self.bootstrap) != self.bootstrap \
                or not (self.bootstrap == 0 or 2 <= self.bootstrap <= MAX_BOOTSTRAP):
            raise EngineError(f"bootstrap must be 0 (no intervals) or 2 to {MAX_BOOTSTRAP:,} replicates, "
                              f"got {self.bootstrap}")
        if not (np.isfinite(self.alpha) and self.alpha >= 0):
            raise EngineError(f"prior alpha must be a finite number >= 0 (pseudo-comparisons per model; 0 = the "
                              f"plain MLE), got {self.alpha}")
        if not 0 < self.level < 1:
            raise EngineError(f"level must be in (0, 1), got {self.level}")


MAX_BOOTSTRAP = 100_000  # replicates; beyond this the intervals' Monte Carlo error no longer shrinks usefully


def run_preference_bt(db_path, benchmark: str, config: PairwiseConfig = PairwiseConfig(), *, seed: int = 0,
                      progress: Progress = no_progress, cancel: threading.Event | None = None,
                      external=None, **_) -> int:
    """Fit Bradley-Terry on the benchmark's preferences and save the run (kind ``bt-pref``); ``external`` is the
    ``fit --external`` ranking read on the benchmark's models (``jobs.calibration.read_external``, an
    ``ExternalRanking``): Spearman of the BT scores with it and how many models it matched (issue 23: it was
    ignored here)."""
    from benchloupe.engine.stats import spearman

    conn = connect(db_path)
    try:
        t0 = time.perf_counter()
        prefs = read.load_preferences(conn, benchmark)
        if config.judge:
            prefs = prefs[prefs["judge"] == config.judge]
        if prefs.empty:
            raise EngineError(f"benchmark {benchmark!r} has no pairwise preferences"
                              + (f" by judge {config.judge!r}" if config.judge else "")
                              + "; import battles or AlpacaEval annotations first")
        models = read.models(conn, benchmark)
        ext = external
        index = {n: i for i, n in enumerate(models["name"])}
        a = prefs["model_a"].map(index).to_numpy(np.int64)
        b = prefs["model_b"].map(index).to_numpy(np.int64)
        p = prefs["prob_a"].to_numpy(np.float64)
        ctx = RunContext(db_path, "bt-pref", benchmark, config, seed, [(benchmark, "preferences")])
        ctx.start(conn, fingerprint(a, b, p))
        with ctx.guard(conn):
            res = fit_bt(PairwiseData(a, b, p, len(models)), alpha=config.alpha, bootstrap=config.bootstrap,
                         seed=seed, level=config.level, progress=lambda k, n, m: (progress(k, n, m),
                                                                                  check_cancel(cancel)))
            seen = np.zeros(len(models), bool)
            seen[a] = seen[b] = True
            theta = np.where(seen, res.theta, np.nan)
            frame = pd.DataFrame({"model_id": models["id"].to_numpy(), "theta": theta, "rank": rank_desc(theta),
                                  "elo": np.where(seen, res.elo, np.nan)})
            if res.se is not None:
                frame["se"], frame["lo"], frame["hi"] = res.se, res.lo, res.hi
            ties = float(np.mean(p == 0.5))
            metrics = {"comparisons": int(len(p)), "models": int(seen.sum()), "tie_share": round(ties, 4),
                       "iterations": res.iterations, "converged": res.converged, "alpha": config.alpha,
                       "bootstrap": config.bootstrap, "warnings": ext.warnings if ext is not None else []}
            if ext is not None:
                metrics["spearman_vs_external"] = spearman(theta, ext.scores)
                metrics.update(ext.metrics())
            runs.save_outputs(conn, ctx.run_id, runs.RunOutputs(
                metrics=metrics, timings={"total_s": round(time.perf_counter() - t0, 4)}, models=frame))
            return ctx.run_id
    finally:
        conn.close()
