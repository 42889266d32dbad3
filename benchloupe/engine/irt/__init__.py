"""Item response theory estimators shared by the coverage, calibration and joint-fit code.

Two families live here.

1. **1PL by MAP** (paper 3, "Your Benchmark Is an Empirical Measure Over Difficulty", section 3.1 and
   Appendix C.3 "IRT fitting"): ``P(Y_ji = 1) = g_i + (1 - g_i) * sigmoid(theta_j - b_i)`` with independent
   ``N(0, 1)`` priors on every ability ``theta_j`` and difficulty ``b_i``; ``g_i`` is the item's chance level
   (0 for free-response items, e.g. 1/4 for four options) and is *fixed*, not estimated, as in the paper.
   With repeated rollouts the likelihood is binomial in ``successes / trials`` (C.3).
   The paper samples this posterior with NUTS (4 chains x 1,000 draws, PyMC). We compute its mode (MAP) by a
   full Newton iteration on all parameters at once, with a backtracking line search: the Hessian has two
   diagonal blocks (abilities, difficulties) coupled by a dense models x items block, so each Newton step
   only needs a Schur complement on the smaller side (``min(models, items)`` squared). For ``g = 0`` the
   observed and expected (Fisher) information coincide; with guessing we use the observed information and
   fall back to the Fisher weights wherever the former is not positive definite. Posterior uncertainty (C.6)
   uses the Laplace approximation around the mode (:class:`LaplacePosterior`), whose exact Gaussian draws
   are made block-wise without ever forming the items x items covariance. This is the documented divergence from the paper: MAP + Laplace instead of
   NUTS draws; ``benchloupe.engine.coverage.metric_uncertainty`` also offers a parametric bootstrap.

2. **Marginal maximum likelihood** (Bock & Aitkin 1981) for Rasch (``a = 1``, latent variance free), 2PL and
   3PL in mirt's slope-intercept parameterisation ``logit P = a * theta + d`` (``b = -d / a``), with
   ``theta ~ N(0, sigma^2)`` (``sigma^2 = 1`` except for Rasch). As in mirt the latent density is discretised on
   61 equally spaced points on [-6, 6]. The fit runs EM cycles (E-step: posterior over the grid; M-step:
   expected complete-data log-likelihood per item, variance in closed form) and then polishes the *same*
   marginal log-likelihood with BFGS on its exact score (Fisher identity), so the result is the MLE rather
   than wherever an EM tolerance happened to stop. Standard errors come from the observed information:
   central differences of the exact score (mirt's default ``SE.type = "Oakes"`` is the same quantity;
   SEM, used in some of mirt's tests, estimates it too). Pattern-frequency weights and missing cells (mask)
   are supported; binomial successes/trials are supported as well.

Layout convention: every matrix is **rows = respondents (models), columns = items**.
"""

from .inputs import _as_counts, _chance_vector, _log_p_terms  # noqa: F401  (shared with engine/coverage)
from .mml import *  # noqa: F403
from .mml import __all__ as _mml_all
from .onepl import *  # noqa: F403
from .onepl import __all__ as _onepl_all

__all__ = [*_onepl_all, *_mml_all]
