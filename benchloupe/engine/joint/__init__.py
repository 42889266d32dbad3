"""DualEval joint model-item calibration (paper 000, section 3; defaults of Appendix B).

Every model gets an ability ``theta_i``; every static item and every arena prompt gets a difficulty ``b_q`` and a
log-sharpness ``k_q`` (``a_q = exp(k_q)``).  Static labels follow a 2PL, ``p_iq = sigmoid(a_q (theta_i - b_q))``.
Arena rewards are standardised globally (ddof 0), turned into soft pairwise targets ``sigmoid(z_i - z_j)`` and
predicted by ``sigmoid(gamma (p_i - p_j))`` with ``gamma = 4 * gamma~``.  Pairs of equal rewards and pairs whose |z gap|
lies below the configured percentile of all pairwise gaps are ties (dropped); pairs whose max z lies below the configured percentile
of all pairwise maxima are both-bad (pooled over all prompts, strict ``<``).  Decisive pairs (neither) go to the
preference BCE, both-bad non-tie pairs to the both-bad loss ``-log(1-p_i) - log(1-p_j)``.

Objective (section 3, "Joint Objective")::

    L = lam_s * mean_S BCE + lam_pref * mean_dec BCE(mu, p*) + lam_bb * mean_bb[-log(1-p_i) - log(1-p_j)]
        + lam_reg * (|theta|^2 + |b|^2 + |k|^2 + (log gamma~)^2)

Optimiser.  The paper runs 2,000 full-batch Adam epochs (lr 0.02, zeros init) and after every step centres theta and
absorbs the shift into every b.  We minimise the same objective by damped Newton (exact Hessian; items never interact,
so it is a small global block plus one 2x2 block per item, solved by a Schur complement; see ``optimise._run_newton``); where
that system is too large, block-coordinate Newton for static-only fits (``optimise._run_block_newton``) and L-BFGS (scipy) on
the analytic gradient otherwise; all restricted to the subspace ``mean(theta) = 0``: a KKT row in the Newton system,
a KKT multiplier in the block theta step, the projected gradient for L-BFGS, and a centred start, so every iterate
stays centred.  The data terms depend on theta and b only through ``theta_i - b_q`` and so are
invariant under the paper's shift-and-absorb step; what the centring fixes is the translation, which is exactly the
constraint we optimise under.  The Adam iterates also lie on ``mean(theta) = 0``, hence our constrained minimum is
no higher than what the Adam schedule reaches (checked in tests/unit/test_joint.py).  ``optimizer="adam"`` runs the
paper's schedule verbatim (Adam, centring after every step) for comparison.

Paper vs reference code (REFERENCE-IMPLEMENTATIONS.md A.3, A.7), selected by ``JointConfig.variant``:

* ``"paper"``: lambda_reg 0.01, tie and both-bad thresholds at the 15th percentile, exact ``log(1-p)`` in the
  both-bad loss.  The L2 term is reduced by *means* over each parameter vector by default (``reg_reduction="mean"``,
  the reference code's reduction): the literal squared-L2 *sums* of section 3 against a mean log-loss crush every
  item at lambda 0.01 and make the paper's own reported values unreachable (docs/DUALEVAL.md).  The literal reading
  is ``reg_reduction="sum"``.
* ``"reference"``: lambda_reg 1e-3, *means* of theta^2, b^2, k^2 (b and k pooled over static items and arena prompts)
  plus ``lambda_reg * (log gamma~)^2``, ``log(1 - p + 1e-6)`` in the both-bad loss, tie percentile 10 (the value of
  the reference's baseline_comparison; its other scripts and the shipped AlpacaEval run use 15, pass ``tie_pct``).
* Both: the gamma prior only exists when arena data are fitted; items with no data (a static item nobody answered,
  a prompt with fewer than two responders) get no parameters (NaN), like the reference vocabulary; a model with no
  data in the fitted sources gets theta NaN and a warning (e.g. an arena-only model in a static-only fit).
* Pairs are ordered by model index (the reference orders by model name); the losses are symmetric, so only the
  orientation of stored pairs differs.

Layout of this package: ``inputs`` (data, configuration, pairs, result types), ``objective`` (the loss with its
gradient and Hessian blocks), ``optimise`` (Newton, block Newton, L-BFGS, Adam; ``fit_joint``, ``fit_abilities``),
``baselines`` (arena Bradley-Terry, average reward), ``fitmetrics`` (in-sample metrics, ECE) and ``evaluation``
(held-out calibration and ranking agreement, which refit).
"""

from benchloupe.engine.joint.fitmetrics import ece, in_sample_metrics, pair_probabilities
from benchloupe.engine.joint.inputs import (
    MODES,
    VARIANTS,
    ArenaData,
    BaselineResult,
    JointConfig,
    JointResult,
    PairSet,
    StaticData,
    build_pairs,
    standardise_rewards,
)
from benchloupe.engine.joint.optimise import fit_abilities, fit_joint, objective

# loaded on first use (PEP 562): the baselines and the held-out evaluation pull in scipy.optimize, scipy.stats and
# pandas (~0.5 s of a fit's whole process), which a plain fit does not need
_LAZY = {
    "average_reward": "baselines", "fit_bradley_terry": "baselines",
    **{name: "evaluation" for name in ("cross_reward_agreement", "heldout_calibration", "heldout_comparison", "metrics",
                                       "pair_treatment_ablation", "preference_agreement", "ranking_agreement")},
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(f"benchloupe.engine.joint.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "MODES", "VARIANTS", "ArenaData", "BaselineResult", "JointConfig", "JointResult", "PairSet", "StaticData",
    "average_reward", "build_pairs", "cross_reward_agreement", "ece", "fit_abilities", "fit_bradley_terry", "fit_joint", "heldout_calibration",
    "heldout_comparison", "in_sample_metrics", "metrics", "objective", "pair_probabilities",
    "pair_treatment_ablation", "preference_agreement", "ranking_agreement", "standardise_rewards",
]
