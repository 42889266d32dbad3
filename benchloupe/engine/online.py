"""Online calibration of one new item against fixed model abilities (paper 003, section 4.1).

BenchFill annotates a rewritten item by evaluating the benchmark's annotator models on it ``K_j`` times each
and fitting *only* the new item's difficulty, holding the abilities ``theta_j`` of the original 1PL fit fixed:

    b_hat = argmax_b  sum_j [ c_j log p_j(b) + (K_j - c_j) log(1 - p_j(b)) ],
    p_j(b) = g + (1 - g) * sigmoid(theta_j - b).

With ``g = 0`` this is the formula of section 4.1 / Algorithm 2 line 17.  Footnote 4 adds the chance-level
guessing parameter ``g`` of the original fit for multiple-choice benchmarks (Appendix C.3); we pass it in.
The estimate is then placed on the benchmark's normalised scale by the *same* min-max transformation as the
original benchmark (Algorithm 2 line 18): ``z = (b - raw_min) / (raw_max - raw_min)``, not clipped, so an item
easier or harder than every original item reads below 0 or above 1.

Choices where the paper is silent (no public code exists):
- The paper's estimator is maximum likelihood; when every trial succeeds (or fails) the maximum is at
  infinity.  We search a bounded interval ``theta range +/- config.bound`` and flag ``at_bound``.  The
  N(0, 1) prior of the original fit (Appendix C.3) is available as ``prior_sd=1.0`` (MAP), off by default.
- With guessing the log-likelihood need not be concave in ``b``, so we take the best point of a grid and
  refine it with bounded Brent; the result is the global maximiser to ``xtol``.
- The standard error is the inverse square root of the expected (Fisher) information at ``b_hat``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize_scalar
from scipy.special import expit

from benchloupe.engine.common import EngineError


@dataclass(frozen=True)
class OnlineCalibrationConfig:
    """Online calibration settings (paper 003, section 4.1; guessing from footnote 4 and Appendix C.3).

    prior_sd: None = the paper's maximum likelihood; a number = MAP with a N(0, prior_sd^2) prior on b.
    bound: the search interval is [min(theta) - bound, max(theta) + bound].
    grid: number of grid points before the Brent refinement.  xtol: Brent's tolerance on b.
    """

    prior_sd: float | None = None
    bound: float = 8.0
    grid: int = 401
    xtol: float = 1e-7


@dataclass(frozen=True)
class OnlineCalibration:
    """Difficulty of one new item on the original IRT scale, with diagnostics."""

    b: float
    se: float
    log_likelihood: float
    at_bound: bool
    n_models: int
    n_trials: int
    n_successes: int


@dataclass(frozen=True)
class DifficultyScale:
    """The original benchmark's min-max normalisation (Appendix C.4): raw difficulty b -> z in [0, 1]."""

    raw_min: float
    raw_max: float

    def __post_init__(self) -> None:
        if not (np.isfinite(self.raw_min) and np.isfinite(self.raw_max)) or self.raw_max <= self.raw_min:
            raise EngineError(
                f"difficulty scale needs finite raw_min < raw_max, got {self.raw_min!r}..{self.raw_max!r}: "
                "fit the benchmark's difficulties first"
            )

    @classmethod
    def from_difficulties(cls, b: np.ndarray) -> DifficultyScale:
        b = np.asarray(b, dtype=float)
        b = b[np.isfinite(b)]
        if b.size < 2:
            raise EngineError("difficulty scale needs at least two finite item difficulties")
        return cls(float(b.min()), float(b.max()))

    def to_unit(self, b: float) -> float:
        return (float(b) - self.raw_min) / (self.raw_max - self.raw_min)

    def from_unit(self, z: float) -> float:
        return self.raw_min + float(z) * (self.raw_max - self.raw_min)


def calibrate_item(
    theta: np.ndarray,
    successes: np.ndarray,
    trials: np.ndarray,
    *,
    guessing: float = 0.0,
    config: OnlineCalibrationConfig = OnlineCalibrationConfig(),
) -> OnlineCalibration:
    """Fit the new item's difficulty b with abilities fixed (section 4.1).  Models with 0 trials are masked."""
    theta = np.asarray(theta, dtype=float)
    c = np.asarray(successes, dtype=float)
    k = np.asarray(trials, dtype=float)
    if not (theta.shape == c.shape == k.shape) or theta.ndim != 1:
        raise EngineError("theta, successes and trials must be 1-D arrays of the same length (one per model)")
    if not 0.0 <= guessing < 1.0:
        raise EngineError(f"guessing (chance level) must be in [0, 1), got {guessing!r}")
    keep = k > 0
    if np.any(~np.isfinite(theta[keep])):
        raise EngineError("model abilities must be finite: refit the benchmark's IRT model")
    if np.any(k < 0) or np.any(c < 0) or np.any(c > k):
        raise EngineError("successes must lie between 0 and trials for every model")
    theta, c, k = theta[keep], c[keep], k[keep]
    if k.sum() == 0:
        raise EngineError("no annotation trials to calibrate the item from: evaluate at least one model")

    def loglik(b: float) -> float:
        p = guessing + (1.0 - guessing) * expit(theta - b)
        p = np.clip(p, 1e-300, 1.0 - 1e-16)
        value = float(np.sum(c * np.log(p) + (k - c) * np.log1p(-p)))
        if config.prior_sd is not None:
            value -= 0.5 * (b / config.prior_sd) ** 2
        return value

    lo, hi = float(theta.min()) - config.bound, float(theta.max()) + config.bound
    grid = np.linspace(lo, hi, config.grid)
    values = np.array([loglik(b) for b in grid])
    i = int(np.argmax(values))
    a, z = grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)]
    opt = minimize_scalar(lambda b: -loglik(b), bounds=(a, z), method="bounded",
                          options={"xatol": config.xtol})
    b_hat = float(opt.x) if -opt.fun >= values[i] else float(grid[i])
    step = (hi - lo) / (config.grid - 1)
    at_bound = b_hat <= lo + step or b_hat >= hi - step

    s = expit(theta - b_hat)
    p = guessing + (1.0 - guessing) * s
    dp = (1.0 - guessing) * s * (1.0 - s)
    info = float(np.sum(k * dp**2 / np.clip(p * (1.0 - p), 1e-300, None)))
    if config.prior_sd is not None:
        info += 1.0 / config.prior_sd**2
    se = 1.0 / np.sqrt(info) if info > 0 else float("inf")
    return OnlineCalibration(
        b=b_hat, se=float(se), log_likelihood=loglik(b_hat), at_bound=bool(at_bound),
        n_models=int(theta.size), n_trials=int(k.sum()), n_successes=int(c.sum()),
    )
