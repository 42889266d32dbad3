"""One coverage analysis: the 1PL fit, the report, the C.3 diagnostics, the trust readout and the C.6 draws."""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

from benchloupe.engine.common import Progress, check_cancel, no_progress
from benchloupe.engine.irt import OnePLConfig, OnePLResult, fit_1pl
from benchloupe.engine.irt.onepl_large import cell_data

from .core import CoverageReport, coverage_report
from .diagnostics import Diagnostics, DiagnosticsConfig, diagnostics
from .uncertainty import MetricUncertainty, UncertaintyConfig, metric_uncertainty

__all__ = ["CoverageAnalysis", "analyse", "counts"]


@dataclass(frozen=True)
class CoverageAnalysis:
    """What ``benchloupe coverage`` shows: the 1PL fit, the coverage report, the C.3 diagnostics, the trust
    readout (:mod:`.resolution`: lattice, tails, gap intervals, detectability) and, when asked, the C.6
    uncertainty of the metrics."""

    fit: OnePLResult
    report: CoverageReport
    diagnostics: Diagnostics
    resolution: object = None
    uncertainty: MetricUncertainty | None = None


def counts(correct, mask=None, successes=None, trials=None) -> tuple[np.ndarray, np.ndarray]:
    """(successes, trials) as float models x items arrays, zeros where a cell is missing."""
    from benchloupe.engine.irt import _as_counts

    return _as_counts(correct, mask, successes, trials)


def analyse(
    correct: np.ndarray | None,
    mask: np.ndarray | None = None,
    *,
    chance: float | np.ndarray | None = None,
    successes: np.ndarray | None = None,
    trials: np.ndarray | None = None,
    target=None,
    k: int = 5,
    seed: int = 0,
    fit_config: OnePLConfig = OnePLConfig(),
    diagnostics_config: DiagnosticsConfig = DiagnosticsConfig(),
    uncertainty: UncertaintyConfig | None = None,
    interval_gaps: int = 20,
    delta: float = 0.05,
    lipschitz: float = 1.0,
    progress: Progress = no_progress,
    cancel: threading.Event | None = None,
    timings: dict | None = None,
) -> CoverageAnalysis:
    """Fit the 1PL (C.3), then the coverage metrics (C.4), the response-matrix diagnostics (C.3), the lattice
    and tail readout and, with ``uncertainty``, the C.6 posterior draws with an interval for each of the
    ``interval_gaps`` widest gaps.  ``timings`` (a dict) receives the seconds of each phase."""
    import time

    from . import resolution

    clock = [time.perf_counter()]

    def lap(name: str) -> None:
        now = time.perf_counter()
        if timings is not None:
            timings[name] = round(now - clock[0], 4)
        clock[0] = now

    fit = fit_1pl(
        correct,
        mask,
        chance=chance,
        successes=successes,
        trials=trials,
        config=fit_config,
        progress=progress,
        cancel=cancel,
    )
    lap("fit_1pl_s")
    check_cancel(cancel)
    report = coverage_report(fit.b, target=target, k=k, seed=seed)
    lap("report_s")
    diag = diagnostics(
        correct, mask, fit.theta, fit.b, successes=successes, trials=trials, config=diagnostics_config
    )
    lap("diagnostics_s")
    cells = cell_data(correct, mask, successes, trials)  # the cells in their integer dtype (no float64 copy)
    lat = None
    if fit.laplace is not None:
        lat = resolution.lattice(fit.theta, fit.b, cells.Y, cells.N, chance=fit.chance, h_b=fit.laplace.h_b,
                                 var_b=fit_config.prior_sd_b**2, mean_b=fit_config.prior_mean_b)
    lap("lattice_s")
    unc = None
    m = min(interval_gaps, len(report.gaps))
    if uncertainty is not None and fit.method == "map":
        unc = metric_uncertainty(fit, target=target, config=uncertainty, correct=correct, mask=mask,
                                 successes=successes, trials=trials,
                                 locations=resolution.gap_locations(report, m), progress=progress, cancel=cancel)
        lap("uncertainty_s")
    if cells.N is None:
        rollouts = 1.0
    else:
        n_obs = int(np.count_nonzero(cells.N))
        rollouts = float(cells.N.sum(dtype=float) / n_obs) if n_obs else 1.0
    res = resolution.readout(report, fit.theta, lattice_info=lat,
                             location_widths=None if unc is None else unc.location_widths, interval_gaps=m, k=k,
                             delta=delta, lipschitz=lipschitz, rollouts=rollouts,
                             max_gap_ci=None if unc is None else unc.max_gap_ci)
    return CoverageAnalysis(fit=fit, report=report, diagnostics=diag, resolution=res, uncertainty=unc)
