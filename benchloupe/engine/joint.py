"""DualEval joint model-item calibration (paper 000, section 3; defaults of Appendix B).

Every model gets an ability ``theta_i``; every static item and every arena prompt gets a difficulty ``b_q`` and a
log-sharpness ``k_q`` (``a_q = exp(k_q)``).  Static labels follow a 2PL, ``p_iq = sigmoid(a_q (theta_i - b_q))``.
Arena rewards are standardised globally (ddof 0), turned into soft pairwise targets ``sigmoid(z_i - z_j)`` and
predicted by ``sigmoid(gamma (p_i - p_j))`` with ``gamma = 4 * gamma~``.  Pairs whose |z gap| lies below the
configured percentile of all pairwise gaps are ties (dropped); pairs whose max z lies below the configured percentile
of all pairwise maxima are both-bad (pooled over all prompts, strict ``<``).  Decisive pairs (neither) go to the
preference BCE, both-bad non-tie pairs to the both-bad loss ``-log(1-p_i) - log(1-p_j)``.

Objective (section 3, "Joint Objective")::

    L = lam_s * mean_S BCE + lam_pref * mean_dec BCE(mu, p*) + lam_bb * mean_bb[-log(1-p_i) - log(1-p_j)]
        + lam_reg * (|theta|^2 + |b|^2 + |k|^2 + (log gamma~)^2)

Optimiser.  The paper runs 2,000 full-batch Adam epochs (lr 0.02, zeros init) and after every step centres theta and
absorbs the shift into every b.  We minimise the same objective by damped Newton (exact Hessian; items never interact,
so it is a small global block plus one 2x2 block per item, solved by a Schur complement; see ``_run_newton``); where
that system is too large, block-coordinate Newton for static-only fits (``_run_block_newton``) and L-BFGS (scipy) on
the analytic gradient otherwise; all restricted to the subspace ``mean(theta) = 0``: a KKT row in the Newton system,
a KKT multiplier in the block theta step, the projected gradient for L-BFGS, and a centred start, so every iterate
stays centred.  The data terms depend on theta and b only through ``theta_i - b_q`` and so are
invariant under the paper's shift-and-absorb step; what the centring fixes is the translation, which is exactly the
constraint we optimise under.  The Adam iterates also lie on ``mean(theta) = 0``, hence our constrained minimum is
no higher than what the Adam schedule reaches (checked in tests/unit/test_joint.py).  ``optimizer="adam"`` runs the
paper's schedule verbatim (Adam, centring after every step) for comparison.

Paper vs reference code (REFERENCE-IMPLEMENTATIONS.md A.3, A.7), selected by ``JointConfig.variant``:

* ``"paper"``: lambda_reg 0.01, squared-L2 *sums* over theta, b, k, tie and both-bad thresholds at the 15th
  percentile, exact ``log(1-p)`` in the both-bad loss.
* ``"reference"``: lambda_reg 1e-3, *means* of theta^2, b^2, k^2 (b and k pooled over static items and arena prompts)
  plus ``lambda_reg * (log gamma~)^2``, ``log(1 - p + 1e-6)`` in the both-bad loss, tie percentile 10 (the value of
  the reference's baseline_comparison; its other scripts and the shipped AlpacaEval run use 15, pass ``tie_pct``).
* Both: the gamma prior only exists when arena data are fitted; items with no data (a static item nobody answered,
  a prompt with fewer than two responders) get no parameters (NaN), like the reference vocabulary; a model with no
  data in the fitted sources gets theta NaN and a warning (e.g. an arena-only model in a static-only fit).
* Pairs are ordered by model index (the reference orders by model name); the losses are symmetric, so only the
  orientation of stored pairs differs.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field, replace

import numpy as np
from scipy.optimize import minimize
from scipy.sparse import csr_matrix
from scipy.special import expit

from benchloupe.engine.common import EngineError, Progress, check_cancel, no_progress
from benchloupe.engine.stats import spearman

MODES = ("joint", "static", "arena")
VARIANTS = ("paper", "reference")
_VARIANT_DEFAULTS = {"paper": {"lambda_reg": 0.01, "tie_pct": 15.0}, "reference": {"lambda_reg": 1e-3, "tie_pct": 10.0}}
_REF_EPS = 1e-6
_MAX_HALVINGS = 3  # Armijo backtracking steps before the direction is damped instead (Levenberg-Marquardt)
_MU_MIN, _MU_UP, _MU_DOWN = 1e-6, 4.0, 0.3  # damping: first value, growth on failure, decay after a full step
# The first steps are damped: at theta = b = 0 every logit is 0, the k-Hessian is only the tiny prior, and an undamped
# step throws the sharpness of near-separable items far out into a worse local minimum (checked on ChemBench with the
# reference settings).  1e-3 decays to 0 after a few full steps.
_MU_START = 1e-3
_NEWTON_MAX_BLOCK = 3000  # larger Schur systems: block-coordinate Newton (static only) or L-BFGS instead
_NEWTON_MAX_FLOPS = 2e9  # static-only: Schur cost above which block-coordinate Newton is faster
_BLOCK_FTOL = 1e-10  # block-coordinate sweeps: relative objective decrease per sweep at which they stop


# --------------------------------------------------------------------------------------------------------- inputs
@dataclass
class StaticData:
    """Binary correctness, models x items; ``mask`` True where observed.  ``item_source`` (optional, one label per
    item) stratifies the cluster bootstrap (Appendix D)."""

    correct: np.ndarray
    mask: np.ndarray
    item_source: np.ndarray | None = None

    def __post_init__(self) -> None:
        self.mask = np.asarray(self.mask, dtype=bool)
        y = np.asarray(self.correct, dtype=float)
        if y.ndim != 2 or y.shape != self.mask.shape:
            raise EngineError(f"static correct {y.shape} and mask {self.mask.shape} must be the same 2-D shape")
        obs = y[self.mask]
        if not np.all(np.isfinite(obs)) or np.any((obs != 0) & (obs != 1)):
            raise EngineError("static correctness must be 0/1 on observed cells; mark missing cells in the mask")
        self.correct = np.where(self.mask, np.nan_to_num(y), 0.0)

    @property
    def shape(self) -> tuple[int, int]:
        return self.mask.shape


@dataclass
class ArenaData:
    """Scalar rewards, models x prompts; NaN = missing.  Models are aligned with the static models by the caller."""

    rewards: np.ndarray

    def __post_init__(self) -> None:
        r = np.asarray(self.rewards, dtype=float)
        if r.ndim != 2:
            raise EngineError(f"arena rewards must be a 2-D models x prompts array, got shape {r.shape}")
        if np.any(np.isinf(r)):
            raise EngineError("arena rewards contain +/-inf; replace them with finite values or NaN (missing)")
        self.rewards = r

    @property
    def shape(self) -> tuple[int, int]:
        return self.rewards.shape


@dataclass(frozen=True)
class JointConfig:
    """DualEval settings; defaults are Appendix B of the paper (``variant="paper"``).

    ``lambda_reg`` and ``tie_pct`` left as None take the variant's value (paper 0.01 / 15; reference 1e-3 / 10).
    ``optimizer``: "newton" (default: damped Newton, Schur complement over the 2x2 item blocks; when both the model
    count and twice the item count exceed 3,000, block-coordinate Newton for static-only fits and L-BFGS
    otherwise), "block" (block-coordinate Newton, static only), "lbfgs", or "adam" (the paper's 2,000 epochs at lr
    0.02).  Newton stops when the projected gradient is below ``gtol`` or the undamped Newton decrement (predicted
    decrease) is below ``ftol * max(1, |objective|)``.  ``reg_reduction``: "mean" (the reference code, and the
    only reading under which the paper's own a_q values are reachable) or "sum" (section 3's squared norms taken
    literally).
    """

    mode: str = "joint"
    lambda_static: float = 1.0
    lambda_pref: float = 1.0
    lambda_bb: float = 0.2
    lambda_reg: float | None = None
    reg_reduction: str = "mean"
    tie_pct: float | None = None
    bb_pct: float = 15.0
    gamma0: float = 4.0
    variant: str = "paper"
    optimizer: str = "newton"
    epochs: int = 2000
    lr: float = 0.02
    max_iter: int = 500
    gtol: float = 1e-11
    ftol: float = 1e-12

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise EngineError(f"mode must be one of {MODES}, got {self.mode!r}")
        if self.variant not in VARIANTS:
            raise EngineError(f"variant must be one of {VARIANTS}, got {self.variant!r}")
        if self.optimizer not in ("newton", "block", "lbfgs", "adam"):
            raise EngineError(f"optimizer must be 'newton', 'block', 'lbfgs' or 'adam', got {self.optimizer!r}")
        if self.optimizer == "block" and self.mode != "static":
            raise EngineError("optimizer 'block' (block-coordinate Newton) is for static-only fits; use 'newton'")
        if self.reg_reduction not in ("mean", "sum"):
            raise EngineError(f"reg_reduction must be 'mean' or 'sum', got {self.reg_reduction!r}")
        for name, value in _VARIANT_DEFAULTS[self.variant].items():
            if getattr(self, name) is None:
                object.__setattr__(self, name, value)
        if not (0 <= self.tie_pct < 100 and 0 <= self.bb_pct < 100):
            raise EngineError("tie_pct and bb_pct are percentiles in [0, 100)")
        if self.lambda_reg < 0 or min(self.lambda_static, self.lambda_pref, self.lambda_bb) < 0:
            raise EngineError("loss weights and lambda_reg must be non-negative")

    @classmethod
    def reference(cls, **overrides) -> JointConfig:
        """The reference code's settings (A.3): reg 1e-3 as means, tie 10th percentile unless overridden."""
        return cls(variant="reference", **overrides)

    @property
    def uses_static(self) -> bool:
        return self.mode in ("joint", "static")

    @property
    def uses_arena(self) -> bool:
        return self.mode in ("joint", "arena")


# ---------------------------------------------------------------------------------------------------------- pairs
@dataclass
class PairSet:
    """Every unordered responder pair (i < j) of every arena prompt, with the section-3 flags."""

    i: np.ndarray
    j: np.ndarray
    prompt: np.ndarray
    z_gap: np.ndarray  # z_i - z_j
    target: np.ndarray  # sigmoid(z_i - z_j)
    tie: np.ndarray
    both_bad: np.ndarray
    tie_delta: float
    bb_threshold: float
    z: np.ndarray  # standardised rewards (models x prompts, NaN missing)

    @property
    def decisive(self) -> np.ndarray:
        return ~self.tie & ~self.both_bad

    @property
    def bb_loss(self) -> np.ndarray:
        return self.both_bad & ~self.tie

    def __len__(self) -> int:
        return len(self.i)


def standardise_rewards(rewards: np.ndarray) -> np.ndarray:
    """Global z-scores over all observed rewards (ddof 0), section 3; constant rewards are an input error."""
    obs = rewards[np.isfinite(rewards)]
    if obs.size == 0:
        raise EngineError("arena data have no observed rewards; import rewards or fit in static mode")
    sd = float(obs.std())
    if not np.isfinite(sd) or sd < 1e-8:
        raise EngineError("arena rewards are constant, so no pair carries a preference; check the reward column")
    return (rewards - obs.mean()) / sd


def build_pairs(arena: ArenaData, config: JointConfig, *, z: np.ndarray | None = None) -> PairSet:
    """All responder pairs per prompt and their tie / both-bad flags (thresholds pooled over all pairs, A.2).

    ``z`` overrides the standardisation (the arena contamination protocol adds to z without re-standardising)."""
    if z is None:
        z = standardise_rewards(arena.rewards)
    n_models, n_prompts = z.shape
    obs = np.isfinite(z)
    if (obs.sum(axis=0) >= 2).sum() == 0:
        raise EngineError("no arena prompt has two or more responding models, so there are no pairs to fit")
    iu, ju = np.triu_indices(n_models, 1)
    block = max(1, 4_000_000 // max(1, len(iu)))
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    for start in range(0, n_prompts, block):
        q = np.arange(start, min(n_prompts, start + block))
        ok = obs[iu][:, q] & obs[ju][:, q]  # pairs x prompts
        pi, qq = np.nonzero(ok.T)  # prompt-major order
        parts.append((iu[qq], ju[qq], q[pi]))
    i = np.concatenate([p[0] for p in parts])
    j = np.concatenate([p[1] for p in parts])
    prompt = np.concatenate([p[2] for p in parts])
    zi, zj = z[i, prompt], z[j, prompt]
    gap = zi - zj
    absgap = np.abs(gap)
    mx = np.maximum(zi, zj)
    tie_delta = float(np.percentile(absgap, config.tie_pct)) if config.tie_pct > 0 else 0.0
    bb_thr = float(np.percentile(mx, config.bb_pct))
    return PairSet(i=i, j=j, prompt=prompt, z_gap=gap, target=expit(gap), tie=absgap < tie_delta,
                   both_bad=mx < bb_thr, tie_delta=tie_delta, bb_threshold=bb_thr, z=z)


# --------------------------------------------------------------------------------------------------------- result
@dataclass
class JointResult:
    """A fitted DualEval model.  Item arrays are per static item (``*_static``) and per arena prompt (``*_arena``);
    NaN where an item has no data or its source is not fitted.  ``pairs`` is None without arena data."""

    config: JointConfig
    theta: np.ndarray
    b_static: np.ndarray
    k_static: np.ndarray
    b_arena: np.ndarray
    k_arena: np.ndarray
    gamma: float
    objective: float
    iterations: int
    converged: bool
    pairs: PairSet | None
    metrics: dict = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    @property
    def a_static(self) -> np.ndarray:
        return np.exp(self.k_static)

    @property
    def a_arena(self) -> np.ndarray:
        return np.exp(self.k_arena)

    @property
    def b(self) -> np.ndarray:
        return np.concatenate([self.b_static, self.b_arena])

    @property
    def k(self) -> np.ndarray:
        return np.concatenate([self.k_static, self.k_arena])

    @property
    def a(self) -> np.ndarray:
        return np.exp(self.k)

    def ranking(self) -> np.ndarray:
        """Model indices by descending ability (unfitted models last)."""
        return np.argsort(-np.nan_to_num(self.theta, nan=-np.inf), kind="stable")

    def p_static(self) -> np.ndarray:
        return expit(self.a_static[None, :] * (self.theta[:, None] - self.b_static[None, :]))

    def p_arena(self) -> np.ndarray:
        return expit(self.a_arena[None, :] * (self.theta[:, None] - self.b_arena[None, :]))


@dataclass
class BaselineResult:
    """One score per model (NaN where the model has no data) from a single-source baseline."""

    method: str
    scores: np.ndarray
    objective: float = float("nan")
    iterations: int = 0
    converged: bool = True


# ------------------------------------------------------------------------------------------------ the objective
class _Problem:
    """The compact problem (fitted models and items only) with the objective and its analytic gradient."""

    def __init__(self, static: StaticData | None, pairs: PairSet | None, n_models: int, config: JointConfig,
                 pair_keep: np.ndarray | None = None, static_mask: np.ndarray | None = None,
                 min_models: int = 2) -> None:
        self.cfg = config
        self.ref = config.variant == "reference"
        self.reg_mean = config.reg_reduction == "mean"
        has_model = np.zeros(n_models, dtype=bool)
        self.has_static = static is not None and config.uses_static
        self.has_arena = pairs is not None and config.uses_arena
        if self.has_static:
            mask = static.mask if static_mask is None else static_mask
            self.s_items = np.flatnonzero(mask.any(axis=0))
            has_model |= mask.any(axis=1)
        if self.has_arena:
            keep = np.ones(len(pairs), dtype=bool) if pair_keep is None else pair_keep
            dec = pairs.decisive & keep
            bbl = pairs.bb_loss & keep
            used = keep & (dec | bbl)
            if not dec.any():
                raise EngineError("no decisive arena pairs remain after tie/both-bad filtering; lower tie_pct/bb_pct")
            self.a_items = np.unique(pairs.prompt[keep])
            has_model[pairs.i[used]] = True
            has_model[pairs.j[used]] = True
        if not (self.has_static or self.has_arena):
            raise EngineError(f"mode {config.mode!r} needs {'static' if config.uses_static else 'arena'} data")
        self.models = np.flatnonzero(has_model)
        if len(self.models) < min_models:
            raise EngineError("fewer than two models have data in the fitted sources; add models or change mode")
        mpos = np.full(n_models, -1)
        mpos[self.models] = np.arange(len(self.models))
        self.M = len(self.models)
        if self.has_static:
            sub = np.ix_(self.models, self.s_items)
            W = mask[sub]
            self.Y = np.where(W, static.correct[sub], 0.0)
            self.n_static = float(W.sum())
            self.W = None if W.all() else W.astype(float)
            self.Ysign = 1.0 - 2.0 * self.Y
            self.Ns = len(self.s_items)
        else:
            self.Ns = 0
        if self.has_arena:
            qpos = np.full(pairs.z.shape[1], -1)
            qpos[self.a_items] = np.arange(len(self.a_items))
            self.Na = len(self.a_items)
            self.dec_i = mpos[pairs.i[dec]] * self.Na + qpos[pairs.prompt[dec]]
            self.dec_j = mpos[pairs.j[dec]] * self.Na + qpos[pairs.prompt[dec]]
            self.dec_t = pairs.target[dec]
            self.dec_q = qpos[pairs.prompt[dec]]
            size = self.M * self.Na
            # per-pair -> per-cell sums as sparse products (several times faster than np.bincount with weights):
            # S_minus v = sum over pairs of v at cell i minus at cell j, S_plus v the same with a plus, S_mm v per
            # (model i, model j)
            n_dec = len(self.dec_i)
            cols = np.r_[np.arange(n_dec), np.arange(n_dec)]
            rows = np.r_[self.dec_i, self.dec_j]
            ones = np.ones(n_dec)
            self.S_minus = csr_matrix((np.r_[ones, -ones], (rows, cols)), shape=(size, n_dec))
            self.S_plus = csr_matrix((np.r_[ones, ones], (rows, cols)), shape=(size, n_dec))
            mm = mpos[pairs.i[dec]] * self.M + mpos[pairs.j[dec]]
            self.S_mm = csr_matrix((ones, (mm, np.arange(n_dec))), shape=(self.M * self.M, n_dec))
            bb_i = mpos[pairs.i[bbl]] * self.Na + qpos[pairs.prompt[bbl]]
            bb_j = mpos[pairs.j[bbl]] * self.Na + qpos[pairs.prompt[bbl]]
            self.bb_cnt = None
            if len(bb_i) and config.lambda_bb > 0:  # the both-bad loss is a sum over cells weighted by pair counts
                cnt = np.bincount(bb_i, minlength=size) + np.bincount(bb_j, minlength=size)
                self.bb_cnt = (cnt * (config.lambda_bb / len(bb_i))).reshape(self.M, self.Na)
        else:
            self.Na = 0
        self.n_items = self.Ns + self.Na
        self.n_params = self.M + 2 * self.n_items + (1 if self.has_arena else 0)

    # parameter vector: theta (M) | b_static (Ns) | k_static (Ns) | b_arena (Na) | k_arena (Na) | log gamma~
    def split(self, x: np.ndarray):
        M, Ns, Na = self.M, self.Ns, self.Na
        th = x[:M]
        bs, ks = x[M:M + Ns], x[M + Ns:M + 2 * Ns]
        o = M + 2 * Ns
        ba, ka = x[o:o + Na], x[o + Na:o + 2 * Na]
        g = x[o + 2 * Na] if self.has_arena else 0.0
        return th, bs, ks, ba, ka, g

    # ---- objective, gradient and Newton system in one pass over the cells and pairs.  ``order`` 0: value only (the
    # line search), 1: value and gradient (L-BFGS, Adam), 2: also the Hessian pieces for the Newton solver (global
    # block theta [+ log gamma~], one 2x2 (b_q, k_q) block per item, their couplings); all exact (checked against
    # finite differences in tests/unit/test_joint.py).
    def value_grad(self, x: np.ndarray) -> tuple[float, np.ndarray]:
        f, grad, _ = self.evaluate(x, order=1)
        return f, grad

    def value(self, x: np.ndarray) -> float:
        return self.evaluate(x, order=0)[0]

    def newton_system(self, x: np.ndarray):
        return self.evaluate(x, order=2)[2]

    def evaluate(self, x: np.ndarray, order: int = 2):
        th, bs, ks, ba, ka, g = self.split(x)
        M, Ns, Na = self.M, self.Ns, self.Na
        f = 0.0
        grad = np.zeros_like(x) if order >= 1 else None
        G = M + (1 if self.has_arena else 0)
        if order >= 2:  # a static-only global block is diagonal: keep it as a vector (5,000 models: no M x M)
            A = np.zeros((G, G)) if self.has_arena else np.zeros(M)
            if self.has_arena:
                Bb, Bk = np.zeros((G, self.n_items)), np.zeros((G, self.n_items))
            Cbb, Cbk, Ckk = np.zeros(self.n_items), np.zeros(self.n_items), np.zeros(self.n_items)
        if self.has_static:
            fs, gs, hs = self._static_terms(th, bs, ks, order)
            f += fs
            if order >= 1:
                grad[:M] += gs[0]
                grad[M:M + Ns], grad[M + Ns:M + 2 * Ns] = gs[1], gs[2]
            if order >= 2:
                if self.has_arena:
                    A[np.arange(M), np.arange(M)] += hs[0]
                else:
                    A += hs[0]
                if self.has_arena:
                    Bb[:M, :Ns], Bk[:M, :Ns] = hs[1], hs[2]
                else:
                    Bb, Bk = hs[1], hs[2]
                Cbb[:Ns], Cbk[:Ns], Ckk[:Ns] = hs[3], hs[4], hs[5]
        if self.has_arena:
            fa, ga, ha = self._arena_terms(th, ba, ka, g, order)
            f += fa
            o = M + 2 * Ns
            if order >= 1:
                grad[:M] += ga[0]
                grad[o:o + Na], grad[o + Na:o + 2 * Na], grad[-1] = ga[1], ga[2], ga[3]
            if order >= 2:
                A += ha[0]
                Bb[:, Ns:], Bk[:, Ns:] = ha[1], ha[2]
                Cbb[Ns:], Cbk[Ns:], Ckk[Ns:] = ha[3], ha[4], ha[5]
        # regularisation
        lam = self.cfg.lambda_reg
        lt, li = (lam / M, lam / self.n_items) if self.reg_mean else (lam, lam)
        items = x[M:M + 2 * self.n_items]
        f += lt * float(th @ th) + li * float(items @ items)
        if self.has_arena:
            f += lam * g * g
        if order >= 1:
            grad[:M] += 2 * lt * th
            grad[M:M + 2 * self.n_items] += 2 * li * items
            if self.has_arena:
                grad[-1] += 2 * lam * g
        if order < 2:
            return f, grad, None
        if self.has_arena:
            A[np.arange(M), np.arange(M)] += 2 * lt
            A[M, M] += 2 * lam
        else:
            A += 2 * lt
        Cbb += 2 * li
        Ckk += 2 * li
        return f, grad, (A, Bb, Bk, Cbb, Cbk, Ckk)

    @staticmethod
    def _logits(th, b, k):
        """X = a (theta - b), softplus(X) and sigmoid(X) from one exp."""
        a = np.exp(k)
        X = a * (th[:, None] - b[None, :])
        E = np.exp(-np.abs(X))
        return a, X, E

    @staticmethod
    def _softplus(X, E):
        sp = np.log1p(E)
        sp += np.maximum(X, 0.0)
        return sp

    @staticmethod
    def _sigmoid(X, E):
        P = 1.0 / (1.0 + E)
        return np.where(X >= 0, P, E * P)

    @staticmethod
    def _cell_grads(th, b, a, R):
        """Gradients (theta, b, k) of a sum of cell losses whose derivative wrt the logits a(theta - b) is R."""
        col = R.sum(axis=0)
        rt = R.T @ th - b * col  # sum_i R_iq (theta_i - b_q)
        return R @ a, -a * col, a * rt

    @staticmethod
    def _cell_hess(a, X, V, R):
        """Hessian pieces of sum_cells f(X) with f'(X) = R, f''(X) = V, X = a (theta - b): theta diagonal,
        theta-b, theta-k, and the item 2x2 blocks."""
        a2 = a * a
        U = V * X
        U += R
        return V @ a2, -V * a2, U * a, a2 * V.sum(axis=0), -a * U.sum(axis=0), (U * X).sum(axis=0)

    def _static_terms(self, th, bs, ks, order):
        w = self.cfg.lambda_static / self.n_static
        a, X, E = self._logits(th, bs, ks)
        loss = np.log1p(E)  # BCE per cell: softplus(X) - y X = log(1 + exp(-|X|)) + max((1 - 2y) X, 0)
        loss += np.maximum(self.Ysign * X, 0.0)
        if self.W is not None:
            loss *= self.W
        f = w * float(loss.sum())
        if order == 0:
            return f, None, None
        P = self._sigmoid(X, E)
        R = P - self.Y
        if self.W is not None:
            R *= self.W
        R *= w
        grads = self._cell_grads(th, bs, a, R)
        if order == 1:
            return f, grads, None
        V = P * (1.0 - P)
        V *= w if self.W is None else self.W * w
        return f, grads, self._cell_hess(a, X, V, R)

    def static_sweep_terms(self, th, bs, ks, part: str, rows: int = 256):
        """Block-coordinate pieces of the static data term (regulariser not included), computed in row blocks of
        ``rows`` models so that no models x items temporary is larger: ``part="theta"``: per-model gradient and
        curvature (theta given the items); ``"items"``: per-item data losses, gradients and 2x2 Hessians (items
        given theta); ``"loss"``: per-item data losses only."""
        w = self.cfg.lambda_static / self.n_static
        n = self.Ns
        a = np.exp(ks)
        a2 = a * a
        Lq = np.zeros(n)
        g_th, h_th = np.empty(self.M), np.empty(self.M)
        gb, gk, c11, c12, c22 = (np.zeros(n) for _ in range(5))
        for r0 in range(0, self.M, rows):
            sl = slice(r0, r0 + rows)
            W = None if self.W is None else self.W[sl]
            _, X, E = self._logits(th[sl], bs, ks)
            if part != "theta":
                loss = np.log1p(E)
                loss += np.maximum(self.Ysign[sl] * X, 0.0)
                Lq += (loss if W is None else loss * W).sum(axis=0)
                if part == "loss":
                    continue
            P = self._sigmoid(X, E)
            R = P - self.Y[sl]
            V = P * (1.0 - P)
            if W is not None:
                R *= W
                V *= W
            if part == "theta":
                g_th[sl], h_th[sl] = R @ a, V @ a2
                continue
            U = V * X
            U += R
            gb -= a * R.sum(axis=0)
            gk += (R * X).sum(axis=0)
            c11 += a2 * V.sum(axis=0)
            c12 -= a * U.sum(axis=0)
            c22 += (U * X).sum(axis=0)
        if part == "theta":
            return w * g_th, w * h_th
        if part == "loss":
            return w * Lq
        return w * Lq, (w * gb, w * gk, w * c11, w * c12, w * c22)

    def _arena_terms(self, th, ba, ka, g, order):
        cfg = self.cfg
        M, Na = self.M, self.Na
        gamma = cfg.gamma0 * math.exp(min(g, 50.0))
        a, X, E = self._logits(th, ba, ka)
        P = self._sigmoid(X, E)
        Pf = P.ravel()
        ci, cj, t = self.dec_i, self.dec_j, self.dec_t
        wp = cfg.lambda_pref / len(t)
        u = Pf[ci]
        u -= Pf[cj]
        u *= gamma
        au = np.abs(u)
        eu = np.exp(-au)  # softplus(u) = log1p(exp(-|u|)) + (u + |u|) / 2; sigmoid(u) from the same exp
        f = wp * (float(np.log1p(eu).sum()) + 0.5 * float(au.sum() + u.sum()) - float(np.dot(t, u)))
        cnt = self.bb_cnt
        if cnt is not None:  # both-bad loss per cell, weighted by the cell's number of both-bad pairs
            if self.ref:
                q1 = 1.0 - P + _REF_EPS
                f -= float(np.sum(cnt * np.log(q1)))
            else:
                f += float(np.sum(cnt * self._softplus(X, E)))
        if order == 0:
            return f, None, None
        su = 1.0 / (1.0 + eu)  # sigmoid(|u|); |u| <= gamma, so 1 - sigmoid(|u|) keeps full relative precision
        su -= 0.5
        np.copysign(su, u, out=su)
        su += 0.5
        r1 = (su - t) * wp
        dP = (self.S_minus @ r1).reshape(M, Na)
        dP *= gamma
        dp = P * (1.0 - P)
        Rc = dP * dp
        if cnt is not None:
            Rc += cnt * dp / q1 if self.ref else cnt * P
        grads = (*self._cell_grads(th, ba, a, Rc), float(np.dot(r1, u)))
        if order == 1:
            return f, grads, None
        # exact Hessian: per-cell terms (the pair gradient through P'' and the both-bad cells), the pairs'
        # Gauss-Newton term split into its cell-diagonal part and the cross-cell part of the two models of a pair
        s2 = su * (1.0 - su) * wp
        gam2 = gamma * gamma
        Vc = dP * dp * (1.0 - 2.0 * P)
        Vc += (gam2 * (self.S_plus @ s2)).reshape(M, Na) * dp * dp
        if cnt is not None:
            if self.ref:
                f1 = cnt / q1
                Vc += f1 / q1 * dp * dp + f1 * dp * (1.0 - 2.0 * P)
            else:
                Vc += cnt * dp
        ad, b_b, b_k, c_bb, c_bk, c_kk = self._cell_hess(a, X, Vc, Rc)
        dpf, Xf = dp.ravel(), X.ravel()
        wpair = dpf[ci]
        wpair *= dpf[cj]
        wpair *= s2
        wpair *= gam2
        off = (self.S_mm @ (wpair * (a * a)[self.dec_q])).reshape(M, M)
        Wc = (self.S_plus @ wpair).reshape(M, Na)
        xs = Xf[ci]
        xs += Xf[cj]
        xs *= wpair  # S_plus (w (X_i + X_j)) = X_c W_c + K_c, K_c = sum of w X_other over the pairs of cell c
        Kc = (self.S_plus @ xs).reshape(M, Na) - X * Wc
        su_u = s2 * u
        Gc = (self.S_minus @ su_u).reshape(M, Na)
        dgX = (dP + gamma * Gc) * dp  # d/d(log gamma~) of the pairs' gradient wrt X
        A = np.zeros((M + 1, M + 1))
        A[:M, :M] = -(off + off.T)
        A[np.arange(M), np.arange(M)] += ad
        A[M, :M] = A[:M, M] = dgX @ a
        A[M, M] = float(np.dot(su_u, u) + np.dot(r1, u))
        Bb = np.vstack([b_b + Wc * (a * a), -a * dgX.sum(axis=0)])
        Bk = np.vstack([b_k - Kc * a, (dgX * X).sum(axis=0)])
        c_bb -= a * a * Wc.sum(axis=0)
        c_bk += a * (Wc * X).sum(axis=0)
        c_kk -= (Kc * X).sum(axis=0)
        return f, grads, (A, Bb, Bk, c_bb, c_bk, c_kk)


def _run_lbfgs(fun, x0, config: JointConfig, progress: Progress, cancel, label: str):
    """scipy L-BFGS with progress and cancellation checks at every iteration."""
    state = {"it": 0}

    def callback(_xk):
        state["it"] += 1
        if state["it"] % 25 == 0:
            check_cancel(cancel)
            progress(state["it"], config.max_iter, f"{label}: iteration {state['it']}")

    res = minimize(fun, x0, jac=True, method="L-BFGS-B", callback=callback,
                   options={"maxiter": config.max_iter, "maxcor": 30, "ftol": 1e-15, "gtol": config.gtol,
                            "maxfun": 4 * config.max_iter})
    converged = bool(res.success) or float(np.max(np.abs(res.jac))) < 1e-5
    return res.x, float(res.fun), int(res.nit), converged


def _centre_gradient(problem: _Problem):
    def fun(x):
        f, gr = problem.value_grad(x)
        gr[:problem.M] -= gr[:problem.M].mean()
        return f, gr
    return fun


def _solve_newton(problem: _Problem, system, grad: np.ndarray, mu: float) -> np.ndarray:
    """Newton direction on {mean(theta) = 0} (a KKT row), eliminating the 2x2 item blocks (Schur complement on the
    small global block) or, for a static fit with many more models than item parameters, eliminating theta."""
    A, Bb, Bk, Cbb, Cbk, Ckk = system
    M = problem.M
    G = M + (1 if problem.has_arena else 0)
    c11, c12, c22 = Cbb + mu, Cbk, Ckk + mu
    lam_min = 0.5 * (c11 + c22) - np.sqrt(0.25 * (c11 - c22) ** 2 + c12 ** 2)
    shift = np.maximum(0.0, 1e-10 - lam_min)  # make every item block positive definite
    c11, c22 = c11 + shift, c22 + shift
    det = c11 * c22 - c12 * c12
    i11, i12, i22 = c22 / det, -c12 / det, c11 / det
    gA = np.r_[grad[:M], grad[-1:] if problem.has_arena else []]
    Ns, Na = problem.Ns, problem.Na
    o = M + 2 * Ns
    gb = np.r_[grad[M:M + Ns], grad[o:o + Na]]
    gk = np.r_[grad[M + Ns:M + 2 * Ns], grad[o + Na:o + 2 * Na]]
    n = problem.n_items
    if problem.has_arena or M + 1 <= 2 * n:
        S = (np.diag(A) if A.ndim == 1 else A) + mu * np.eye(G)
        S -= (Bb * i11) @ Bb.T + (Bb * i12) @ Bk.T + (Bk * i12) @ Bb.T + (Bk * i22) @ Bk.T
        cb, ck = i11 * gb + i12 * gk, i12 * gb + i22 * gk
        K = np.zeros((G + 1, G + 1))
        K[:G, :G] = S
        K[:M, G] = K[G, :M] = 1.0
        rhs = np.r_[-gA + Bb @ cb + Bk @ ck, 0.0]
        dA = np.linalg.solve(K, rhs)[:G]
        tb, tk = Bb.T @ dA, Bk.T @ dA
        db = -cb - (i11 * tb + i12 * tk)
        dk = -ck - (i12 * tb + i22 * tk)
    else:  # static only, A diagonal: eliminate theta
        ad = A + mu  # static only: the theta block is diagonal
        sq = np.sqrt(ad)
        Z = np.empty((M, 2 * n))  # [Bb Bk] / sqrt(ad), built in place
        np.divide(Bb, sq[:, None], out=Z[:, :n])
        np.divide(Bk, sq[:, None], out=Z[:, n:])
        S = -(Z.T @ Z)  # numpy hands Z.T @ Z to BLAS syrk (half the flops of a general product)
        idx = np.arange(n)
        S[idx, idx] += c11
        S[idx + n, idx + n] += c22
        S[idx, idx + n] += c12
        S[idx + n, idx] += c12
        K = np.zeros((2 * n + 1, 2 * n + 1))
        K[:2 * n, :2 * n] = S
        K[:2 * n, -1] = K[-1, :2 * n] = -(Z.T @ (1.0 / sq))
        K[-1, -1] = -np.sum(1.0 / ad)
        gth = gA[:M]
        rhs = np.r_[-np.r_[gb, gk] + Z.T @ (gth / sq), np.sum(gth / ad)]
        sol = np.linalg.solve(K, rhs)
        dC, nu = sol[:2 * n], sol[-1]
        dA = (-gth - sq * (Z @ dC) - nu) / ad
        db, dk = dC[:n], dC[n:]
    d = np.zeros_like(grad)
    d[:M] = dA[:M]
    d[M:M + Ns], d[M + Ns:M + 2 * Ns] = db[:Ns], dk[:Ns]
    d[o:o + Na], d[o + Na:o + 2 * Na] = db[Ns:], dk[Ns:]
    if problem.has_arena:
        d[-1] = dA[M]
    return d


def _run_newton(problem: _Problem, x0, config: JointConfig, progress: Progress, cancel):
    """Damped Newton on {mean(theta) = 0}: the full step when it satisfies Armijo on the true objective, halving
    otherwise (objective values only), Levenberg-Marquardt damping when no step along the direction pays; one fused
    value/gradient/Hessian pass per accepted step.  Converged when the projected gradient is below ``gtol`` or the
    Newton decrement (the quadratic model's predicted decrease, undamped) is below ``ftol * max(1, |f|)``: items that
    everyone solves (or fails) then sit far out on an exponential tail whose remaining decrease is below ``ftol``."""
    x = x0.copy()
    f, grad, system = problem.evaluate(x)
    mu, it, converged = _MU_START, 0, False
    while it < config.max_iter:
        check_cancel(cancel)
        pg = grad.copy()
        pg[:problem.M] -= pg[:problem.M].mean()
        if float(np.max(np.abs(pg))) < config.gtol:
            converged = True
            break
        accepted = False
        for _ in range(20):  # damping up to 1e-6 * 4^19 ~ 3e5
            try:
                d = _solve_newton(problem, system, grad, mu)
            except np.linalg.LinAlgError:
                d = None
            gd = float(grad @ d) if d is not None and np.all(np.isfinite(d)) else 0.0
            if gd < 0:
                if mu == 0.0 and -0.5 * gd <= config.ftol * max(1.0, abs(f)):
                    converged = True
                    break
                t = 1.0
                for _ in range(_MAX_HALVINGS):
                    with np.errstate(over="ignore", invalid="ignore"):
                        fn = problem.value(x + t * d)
                    if fn <= f + 1e-4 * t * gd:
                        accepted = True
                        break
                    t *= 0.5
                if accepted:
                    break
            mu = max(_MU_UP * mu, _MU_MIN)
        if converged:
            break
        it += 1
        if not accepted:
            converged = float(np.max(np.abs(pg))) < 1e-6
            break
        x = x + t * d
        x[:problem.M] -= x[:problem.M].mean()
        f, grad, system = problem.evaluate(x)
        mu = mu * (_MU_DOWN if t == 1.0 else 1.0) if mu > _MU_MIN else 0.0
        if it % 5 == 0:
            progress(it, config.max_iter, f"Newton iteration {it}: objective {f:.8f}")
    return x, float(f), it, converged


def _rescale(th, bs, ks, lt: float, li: float) -> None:
    """The exact minimum along the scale direction, in place: theta -> c theta, b -> c b, k -> k - log c leaves
    every logit a (theta - b) unchanged, so only the prior moves; 1-D Newton on log c (convex)."""
    sq = lt * float(th @ th) + li * float(bs @ bs)
    ksum, n = float(ks.sum()), len(ks)
    s = 0.0
    for _ in range(50):
        e = math.exp(2 * s)
        step = (2 * e * sq - 2 * li * (ksum - n * s)) / (4 * e * sq + 2 * li * n)
        s -= step
        if abs(step) < 1e-15:
            break
    th *= math.exp(s)
    bs *= math.exp(s)
    ks -= s


def _run_block_newton(problem: _Problem, x0, config: JointConfig, progress: Progress, cancel):
    """Static-only fits too large for the Newton system (e.g. 5,000 models x 14,000 items): block-coordinate Newton.

    A sweep takes one Newton step for all theta given the items (diagonal and convex; exact curvature; on the
    subspace mean(theta) = 0 through a KKT multiplier, so theta stays centred; scaled down to move no theta by more
    than 1), then one damped Newton step for every item's (b_q, k_q) given theta (exact 2x2 block, per-item
    Levenberg-Marquardt damping) that each item keeps only if its own objective term decreases (items are
    independent given theta, so this is an exact per-item line search).  Every model and item is vectorised; one sweep is three passes over the cells in row
    blocks.  The objective never increases; stops when a sweep lowers it by less than ``_BLOCK_FTOL * max(1, |f|)``
    or after ``max_iter`` sweeps.  Same objective as the Newton solver.  The
    direction that only the prior pins (theta and b scaled by c, a by 1/c: every logit unchanged) is nearly flat and
    crawls under coordinate steps, so every sweep ends with its exact 1-D minimum (``_rescale``)."""
    M, n = problem.M, problem.Ns
    lam = config.lambda_reg
    lt, li = (lam / M, lam / n) if problem.reg_mean else (lam, lam)
    x = x0.copy()
    th, bs, ks = x[:M], x[M:M + n], x[M + n:M + 2 * n]  # views: updated in place
    mu = np.ones(n)
    f_prev, converged, it = np.inf, False, 0
    while it < config.max_iter:
        check_cancel(cancel)
        it += 1
        g, h = problem.static_sweep_terms(th, bs, ks, "theta")
        g, h = g + 2 * lt * th, h + 2 * lt
        step = (g - np.sum(g / h) / np.sum(1.0 / h)) / h  # Newton step on {mean(theta) = 0} (a KKT multiplier)
        th -= step / max(1.0, float(np.max(np.abs(step))))
        Lq, (gb, gk, c11, c12, c22) = problem.static_sweep_terms(th, bs, ks, "items")
        f = float(Lq.sum()) + lt * float(th @ th) + li * float(bs @ bs + ks @ ks)
        gb, gk = gb + 2 * li * bs, gk + 2 * li * ks
        c11, c22 = (c11 + 2 * li) * (1 + mu), (c22 + 2 * li) * (1 + mu)
        lam_min = 0.5 * (c11 + c22) - np.sqrt(0.25 * (c11 - c22) ** 2 + c12 ** 2)
        sh = np.maximum(0.0, 1e-3 * np.abs(c11) - lam_min)  # positive definite
        c11, c22 = c11 + sh, c22 + sh
        det = c11 * c22 - c12 * c12
        nb = bs - np.clip((c22 * gb - c12 * gk) / det, -1.0, 1.0)
        nk = ks - np.clip((c11 * gk - c12 * gb) / det, -1.0, 1.0)
        ok = (problem.static_sweep_terms(th, nb, nk, "loss") + li * (nb * nb + nk * nk)
              <= Lq + li * (bs * bs + ks * ks))
        bs[ok], ks[ok] = nb[ok], nk[ok]
        mu = np.where(ok, mu * _MU_DOWN, mu * _MU_UP)
        _rescale(th, bs, ks, lt, li)
        progress(it, config.max_iter, f"block Newton sweep {it}: objective {f:.10f}")
        if f_prev - f <= _BLOCK_FTOL * max(1.0, abs(f)):
            converged = True
            break
        f_prev = f
    return x, problem.value(x), it, converged


def _run_adam(problem: _Problem, x0, config: JointConfig, progress: Progress, cancel):
    """The paper's schedule: full-batch Adam (torch defaults), centring theta after every step (shift into all b)."""
    x = x0.copy()
    m = np.zeros_like(x)
    v = np.zeros_like(x)
    b1, b2, eps = 0.9, 0.999, 1e-8
    M, Ns, Na = problem.M, problem.Ns, problem.Na
    b_idx = np.r_[M:M + Ns, M + 2 * Ns:M + 2 * Ns + Na]
    for t in range(1, config.epochs + 1):
        _, gr = problem.value_grad(x)
        m = b1 * m + (1 - b1) * gr
        v = b2 * v + (1 - b2) * gr * gr
        x -= config.lr * (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps)
        s = x[:M].mean()
        x[:M] -= s
        x[b_idx] -= s
        if t % 100 == 0:
            check_cancel(cancel)
            progress(t, config.epochs, f"adam epoch {t}")
    return x, problem.value(x), config.epochs, True


def _initial_vector(problem: _Problem, init: JointResult | dict | None) -> np.ndarray:
    x = np.zeros(problem.n_params)
    if init is None:
        return x
    get = (lambda n: getattr(init, n)) if isinstance(init, JointResult) else (lambda n: init.get(n))
    M, Ns, Na = problem.M, problem.Ns, problem.Na

    def put(sl, values, idx):
        if values is not None:
            x[sl] = np.nan_to_num(np.asarray(values, dtype=float)[idx])

    put(slice(0, M), get("theta"), problem.models)
    if problem.has_static:
        put(slice(M, M + Ns), get("b_static"), problem.s_items)
        put(slice(M + Ns, M + 2 * Ns), get("k_static"), problem.s_items)
    if problem.has_arena:
        o = M + 2 * Ns
        put(slice(o, o + Na), get("b_arena"), problem.a_items)
        put(slice(o + Na, o + 2 * Na), get("k_arena"), problem.a_items)
        gamma = get("gamma")
        if gamma is not None and np.isfinite(gamma) and gamma > 0:
            x[-1] = math.log(gamma / problem.cfg.gamma0)
    x[:M] -= x[:M].mean()
    return x


def _item_warnings(static: StaticData | None, config: JointConfig) -> list[str]:
    if static is None or not config.uses_static:
        return []
    n = static.mask.sum(axis=0)
    s = static.correct.sum(axis=0)
    solved = int(np.sum((n > 0) & (s == n)))
    failed = int(np.sum((n > 0) & (s == 0)))
    out = []
    if solved or failed:
        out.append(f"{solved} static items solved by every model and {failed} failed by every model: their b is "
                   "held finite only by the L2 prior and they carry no ranking information")
    return out


def fit_joint(static: StaticData | None, arena: ArenaData | None, config: JointConfig = JointConfig(), *,
              progress: Progress = no_progress, cancel: threading.Event | None = None,
              init: JointResult | dict | None = None, pairs: PairSet | None = None,
              pair_keep: np.ndarray | None = None, static_mask: np.ndarray | None = None) -> JointResult:
    """Fit DualEval (section 3) in ``config.mode``.  ``pairs`` reuses a prebuilt :class:`PairSet`; ``pair_keep`` and
    ``static_mask`` restrict the training data (held-out calibration, Appendix E)."""
    n_models = _n_models(static, arena)
    if config.uses_arena and arena is not None and pairs is None:
        pairs = build_pairs(arena, config)
    if not config.uses_arena:
        pairs_used = None
    else:
        pairs_used = pairs
    problem = _Problem(static, pairs_used, n_models, config, pair_keep=pair_keep, static_mask=static_mask)
    x0 = _initial_vector(problem, init)
    progress(0, 1, f"DualEval {config.mode} fit: {problem.M} models, {problem.n_items} items")
    if config.optimizer == "adam":
        x, fval, nit, conv = _run_adam(problem, x0, config, progress, cancel)
    elif config.optimizer == "newton" and _newton_fits(problem):
        x, fval, nit, conv = _run_newton(problem, x0, config, progress, cancel)
    elif config.optimizer == "block" or (config.optimizer == "newton" and not problem.has_arena):
        x, fval, nit, conv = _run_block_newton(problem, x0, config, progress, cancel)
    else:
        x, fval, nit, conv = _run_lbfgs(_centre_gradient(problem), x0, config, progress, cancel, "L-BFGS")
    th, bs, ks, ba, ka, g = problem.split(x)
    shift = th.mean()  # ~0 up to rounding; absorbing it leaves the data terms unchanged
    th, bs, ba = th - shift, bs - shift, ba - shift
    warnings = _item_warnings(static, config)
    missing = n_models - problem.M
    if missing:
        warnings.append(f"{missing} models have no data in the fitted sources; their theta is NaN")
    res = JointResult(
        config=config, theta=_expand(n_models, problem.models, th),
        b_static=_expand(static.shape[1] if static is not None else 0, problem.s_items if problem.has_static else [], bs),
        k_static=_expand(static.shape[1] if static is not None else 0, problem.s_items if problem.has_static else [], ks),
        b_arena=_expand(arena.shape[1] if arena is not None else 0, problem.a_items if problem.has_arena else [], ba),
        k_arena=_expand(arena.shape[1] if arena is not None else 0, problem.a_items if problem.has_arena else [], ka),
        gamma=float(config.gamma0 * math.exp(g)) if problem.has_arena else float("nan"),
        objective=fval, iterations=nit, converged=conv, pairs=pairs_used, warnings=warnings)
    res.metrics = in_sample_metrics(res, static if problem.has_static else None, pair_keep)
    progress(1, 1, f"DualEval {config.mode} fit done: objective {fval:.6f}")
    return res


def _newton_fits(problem: _Problem) -> bool:
    """Whether the full Newton system is affordable: its Schur block (the smaller side, at most 3,000) costs
    small^2 x large flops per solve; a static-only fit above ``_NEWTON_MAX_FLOPS`` takes block-coordinate Newton
    (2,000 x 2,000: 1.6e10; 8 Newton iterations took 45 s here under load, a block sweep about 0.2 s)."""
    small, large = sorted((problem.M, 2 * problem.n_items))
    if small > _NEWTON_MAX_BLOCK:
        return False
    return problem.has_arena or small * small * large <= _NEWTON_MAX_FLOPS


def _n_models(static, arena) -> int:
    if static is None and arena is None:
        raise EngineError("no data: give static labels, arena rewards or both")
    if static is not None and arena is not None and static.shape[0] != arena.shape[0]:
        raise EngineError(f"static has {static.shape[0]} models but arena has {arena.shape[0]}: align both to one "
                          "model list (NaN / mask=False for a model missing from one source)")
    return (static if static is not None else arena).shape[0]


def _expand(n: int, idx, values) -> np.ndarray:
    out = np.full(n, np.nan)
    if len(idx):
        out[np.asarray(idx)] = values
    return out


def objective(result: JointResult, static: StaticData | None, arena: ArenaData | None,
              config: JointConfig | None = None) -> float:
    """The section-3 objective of given parameters (e.g. the reference's published theta/b/k/gamma) on our data."""
    config = config or result.config
    pairs = result.pairs if result.pairs is not None or not config.uses_arena else None
    if config.uses_arena and arena is not None and pairs is None:
        pairs = build_pairs(arena, config)
    problem = _Problem(static, pairs if config.uses_arena else None, _n_models(static, arena), config)
    x = _initial_vector(problem, result)
    return problem.value(x)


# ------------------------------------------------------------------------------------------------ frozen items
def fit_abilities(static: StaticData | None, arena: ArenaData | None, item_params: JointResult,
                  config: JointConfig | None = None, *, static_items: np.ndarray | None = None,
                  arena_items: np.ndarray | None = None, pairs: PairSet | None = None) -> np.ndarray:
    """Refit only theta with b, k and gamma frozen at ``item_params`` (section 4.2 subset refit; screening).

    ``static_items`` / ``arena_items`` are boolean masks restricting the items used.  theta is not centred: the
    frozen difficulties anchor the scale (the reference centres without absorbing into b, which changes the fit)."""
    config = config or item_params.config
    n_models = _n_models(static, arena)
    smask = None
    if static is not None and config.uses_static:
        smask = static.mask & (True if static_items is None else np.asarray(static_items, bool)[None, :])
        smask = smask & np.isfinite(item_params.b_static)[None, :]
    keep = None
    if config.uses_arena and arena is not None:
        pairs = pairs if pairs is not None else (item_params.pairs or build_pairs(arena, config))
        keep = np.isfinite(item_params.b_arena)[pairs.prompt]
        if arena_items is not None:
            keep &= np.asarray(arena_items, bool)[pairs.prompt]
    has_static = smask is not None and smask.any()
    has_arena = keep is not None and (keep & pairs.decisive).any()
    if not (has_static or has_arena):
        raise EngineError("the selected items carry no data for an ability refit; select more items")
    cfg = replace(config, mode="joint" if has_static and has_arena else ("static" if has_static else "arena"))
    problem = _Problem(static if has_static else None, pairs if has_arena else None, n_models, cfg,
                       pair_keep=keep, static_mask=smask, min_models=1)
    x0 = _initial_vector(problem, item_params)
    x0[:problem.M] = 0.0
    M = problem.M

    def fun(t):
        x = x0.copy()
        x[:M] = t
        f, gr = problem.value_grad(x)
        return f, gr[:M]

    res = minimize(fun, np.zeros(M), jac=True, method="L-BFGS-B",
                   options={"maxiter": 2000, "ftol": 1e-15, "gtol": 1e-8})
    return _expand(n_models, problem.models, res.x)


# ------------------------------------------------------------------------------------------------------ baselines
def fit_bradley_terry(arena: ArenaData, config: JointConfig = JointConfig(mode="arena"), *,
                      pairs: PairSet | None = None) -> BaselineResult:
    """Arena Bradley-Terry on reward-derived soft pairs (A.3 fit_bt): BCE(s_i - s_j, sigmoid(z_i - z_j)) over all
    non-tie pairs (both-bad included) plus the L2 prior of the variant; centred scores."""
    pairs = pairs if pairs is not None else build_pairs(arena, config)
    use = ~pairs.tie
    if not use.any():
        raise EngineError("every arena pair is a tie; lower tie_pct")
    i, j, t = pairs.i[use], pairs.j[use], pairs.target[use]
    n = arena.shape[0]
    has = np.zeros(n, bool)
    has[i] = True
    has[j] = True
    models = np.flatnonzero(has)
    if len(models) < 2:
        raise EngineError("Bradley-Terry needs at least two arena models with pairs")
    pos = np.full(n, -1)
    pos[models] = np.arange(len(models))
    ii, jj = pos[i], pos[j]
    m = len(models)
    lam = config.lambda_reg / (m if config.reg_reduction == "mean" else 1.0)

    def fun(s):
        u = s[ii] - s[jj]
        f = float(np.mean(np.logaddexp(0.0, u) - t * u)) + lam * float(s @ s)
        r = (expit(u) - t) / len(u)
        gr = np.bincount(ii, r, m) - np.bincount(jj, r, m) + 2 * lam * s
        return f, gr - gr.mean()

    res = minimize(fun, np.zeros(m), jac=True, method="L-BFGS-B",
                   options={"maxiter": 2000, "ftol": 1e-15, "gtol": 1e-9})
    s = res.x - res.x.mean()
    return BaselineResult("arena_bt", _expand(n, models, s), float(res.fun), int(res.nit), bool(res.success))


def average_reward(arena: ArenaData) -> BaselineResult:
    """Arena average-reward baseline: each model's mean standardised reward over the prompts it answered."""
    z = standardise_rewards(arena.rewards)
    cnt = np.isfinite(z).sum(axis=1)
    with np.errstate(invalid="ignore"):
        scores = np.where(cnt > 0, np.nansum(z, axis=1) / np.maximum(cnt, 1), np.nan)
    return BaselineResult("arena_avg_reward", scores)


# -------------------------------------------------------------------------------------------------------- metrics
def in_sample_metrics(result: JointResult, static: StaticData | None, pair_keep: np.ndarray | None = None) -> dict:
    """Section 4.1 fit metrics: static accuracy (logit >= 0), decisive-pair agreement (mu >= .5 vs target >= .5),
    soft log-loss over all pairs, pair counts (A.3 run_summary)."""
    out: dict = {"objective": result.objective, "iterations": result.iterations, "converged": result.converged}
    if static is not None and np.isfinite(result.b_static).any():
        ok = static.mask & np.isfinite(result.b_static)[None, :] & np.isfinite(result.theta)[:, None]
        with np.errstate(invalid="ignore"):
            logit = result.a_static[None, :] * (result.theta[:, None] - result.b_static[None, :])
        out["static_accuracy"] = float(np.mean((logit[ok] >= 0) == (static.correct[ok] == 1)))
        out["n_static_cells"] = int(ok.sum())
    pairs = result.pairs
    if pairs is not None:
        mu = pair_probabilities(result)
        keep = np.ones(len(pairs), bool) if pair_keep is None else pair_keep
        dec = pairs.decisive & keep
        out["arena_decisive_agreement"] = float(np.mean((mu[dec] >= 0.5) == (pairs.target[dec] >= 0.5)))
        t = pairs.target[keep]
        m = np.clip(mu[keep], 1e-12, 1 - 1e-12)
        out["arena_soft_logloss"] = float(-np.mean(t * np.log(m) + (1 - t) * np.log(1 - m)))
        out["arena_decisive_pairs"] = int(dec.sum())
        out["arena_both_bad_pairs"] = int((pairs.bb_loss & keep).sum())
        out["arena_tie_pairs"] = int((pairs.tie & keep).sum())
        out["gamma"] = result.gamma
    return out


def pair_probabilities(result: JointResult, pairs: PairSet | None = None) -> np.ndarray:
    """mu_ijq = sigmoid(gamma (p_iq - p_jq)) for every pair."""
    pairs = pairs if pairs is not None else result.pairs
    P = result.p_arena()
    return expit(result.gamma * (P[pairs.i, pairs.prompt] - P[pairs.j, pairs.prompt]))


def ece(pred: np.ndarray, obs: np.ndarray, bins: int = 10) -> float:
    """Expected calibration error with equal-width bins: sum_b (n_b/N) |mean pred - mean obs| (A.6)."""
    pred = np.asarray(pred, float)
    obs = np.asarray(obs, float)
    if pred.size == 0:
        return float("nan")
    idx = np.minimum((pred * bins).astype(int), bins - 1)
    n = np.bincount(idx, minlength=bins)
    sp = np.bincount(idx, pred, bins)
    so = np.bincount(idx, obs, bins)
    nz = n > 0
    return float(np.sum(np.abs(sp[nz] - so[nz])) / pred.size)


def heldout_calibration(static: StaticData | None, arena: ArenaData | None, config: JointConfig = JointConfig(),
                        *, seeds=(0, 1, 2), holdout: float = 0.2, bins: int = 10,
                        progress: Progress = no_progress, cancel: threading.Event | None = None) -> dict:
    """Appendix E: a cell-level 80/20 holdout per seed (static cells; arena pairs, flags from all data), refit,
    ECE of p on held-out static cells and of mu against the soft (and binarised) targets on held-out decisive pairs;
    averaged over seeds.  As the reference's calibration.py, one seed draws both the static and the pair split."""
    pairs = build_pairs(arena, config) if (arena is not None and config.uses_arena) else None
    rows: list[dict] = []
    for k, seed in enumerate(seeds):
        check_cancel(cancel)
        progress(k, len(seeds), f"held-out calibration seed {seed}")
        row: dict = {}
        smask = None
        if static is not None and config.uses_static:
            obs = np.flatnonzero(static.mask.ravel())
            held = np.zeros(static.mask.size, bool)
            held[obs[np.random.default_rng(seed).random(obs.size) < holdout]] = True
            held = held.reshape(static.mask.shape)
            smask = static.mask & ~held
        keep = None
        if pairs is not None:
            keep = np.random.default_rng(seed).random(len(pairs)) >= holdout
        res = fit_joint(static, arena, config, pairs=pairs, pair_keep=keep, static_mask=smask, cancel=cancel)
        if smask is not None:
            ok = held & np.isfinite(res.b_static)[None, :] & np.isfinite(res.theta)[:, None]
            row["static_ece"] = ece(res.p_static()[ok], static.correct[ok], bins)
        if pairs is not None:
            mu = pair_probabilities(res)
            test = ~keep & pairs.decisive & np.isfinite(mu)
            row["arena_ece_soft"] = ece(mu[test], pairs.target[test], bins)
            row["arena_ece_binary"] = ece(mu[test], (pairs.target[test] >= 0.5).astype(float), bins)
        rows.append(row)
    progress(len(seeds), len(seeds), "held-out calibration done")
    return {key: float(np.mean([r[key] for r in rows])) for key in rows[0]}


def ranking_agreement(result: JointResult, static: StaticData | None, arena: ArenaData | None,
                      external: np.ndarray | None = None) -> dict:
    """Spearman of the joint abilities with the static-only and arena-only fits (same config otherwise) and with a
    user-supplied external score per model (NaN where unknown), over models present in both (section 4.1)."""
    out: dict = {}
    if static is not None and result.config.mode != "static":
        st = fit_joint(static, None, replace(result.config, mode="static"))
        out["spearman_vs_static_only"] = spearman(result.theta, st.theta)
    if arena is not None and result.config.mode != "arena":
        ar = fit_joint(None, arena, replace(result.config, mode="arena"))
        out["spearman_vs_arena_only"] = spearman(result.theta, ar.theta)
    if external is not None:
        out["spearman_vs_external"] = spearman(result.theta, np.asarray(external, float))
    return out


def metrics(result: JointResult, static: StaticData | None, arena: ArenaData | None, *,
            external: np.ndarray | None = None, heldout: bool = True, seeds=(0, 1, 2),
            progress: Progress = no_progress, cancel: threading.Event | None = None) -> dict:
    """All run metrics: in-sample fit metrics, held-out ECE (Appendix E) and ranking agreements."""
    out = dict(result.metrics)
    out.update(ranking_agreement(result, static, arena, external))
    if heldout:
        out.update(heldout_calibration(static if result.config.uses_static else None,
                                       arena if result.config.uses_arena else None, result.config,
                                       seeds=seeds, progress=progress, cancel=cancel))
    return out
