"""DualEval inputs, configuration, pair construction and result types (paper 000, section 3; Appendix B)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.special import expit

from benchloupe.engine.common import EngineError

MODES = ("joint", "static", "arena")
VARIANTS = ("paper", "reference")
_VARIANT_DEFAULTS = {"paper": {"lambda_reg": 0.01, "tie_pct": 15.0}, "reference": {"lambda_reg": 1e-3, "tie_pct": 10.0}}
_REF_EPS = 1e-6


# --------------------------------------------------------------------------------------------------------- inputs
@dataclass
class StaticData:
    """Static results, models x items; ``mask`` True where observed.  ``item_source`` (optional, one label per
    item) stratifies the cluster bootstrap (Appendix D).

    ``trials`` (optional, models x items, non-negative integers) makes every observed cell binomial: ``correct``
    then holds successes in 0..trials (e.g. pass@1 over 10 samples: 0..10), the likelihood is binomial and the mean
    over S is weighted by trials (issue 14, fix 1: no majority collapse).  Without it every cell is one 0/1 trial.
    ``chance`` (optional, one value per item in [0, 1), or a scalar) is a known lower asymptote (guessing):
    ``p = c + (1 - c) sigmoid(a (theta - b))``; 0 (the default) is the 2PL.

    ``correct`` is kept in the smallest integer dtype that holds it (int8 for 0/1 cells) and ``trials`` likewise, so
    a 5,000 x 14,000 matrix costs 70 MB, not 560 MB of float64."""

    correct: np.ndarray
    mask: np.ndarray
    item_source: np.ndarray | None = None
    trials: np.ndarray | None = None
    chance: np.ndarray | None = None

    def __post_init__(self) -> None:
        self.mask = np.asarray(self.mask, dtype=bool)
        y = np.asarray(self.correct)
        if y.ndim != 2 or y.shape != self.mask.shape:
            raise EngineError(f"static correct {y.shape} and mask {self.mask.shape} must be the same 2-D shape")
        if self.trials is not None:
            n = np.asarray(self.trials)
            if n.shape != y.shape:
                raise EngineError(f"static trials {n.shape} must have the shape of correct {y.shape}")
            n_obs = n[self.mask].astype(float)
            if not np.all(np.isfinite(n_obs)) or np.any(n_obs < 1) or np.any(n_obs != np.round(n_obs)):
                raise EngineError("static trials must be whole numbers >= 1 on observed cells; mark cells without "
                                  "trials as missing in the mask")
            self.trials = _compact_int(np.where(self.mask, np.nan_to_num(n, nan=0.0), 0), "trials")
        full = bool(self.mask.all())  # the common dense case: no fancy-indexed copies
        obs = y if full else y[self.mask]
        if obs.dtype.kind not in "biuf":
            obs = obs.astype(float)
        if self.trials is None:
            if (obs.dtype.kind == "f" and not np.all(np.isfinite(obs))) or not _all_binary(obs):
                raise EngineError("static correctness must be 0/1 on observed cells; mark missing cells in the mask "
                                  "(or give trials for success counts)")
        else:
            top = self.trials if full else self.trials[self.mask]
            if (y.dtype.kind == "f" and not np.all(np.isfinite(obs))) or np.any(obs < 0) or np.any(obs > top) \
                    or np.any(obs != np.round(obs)):
                raise EngineError("static successes must be whole numbers in 0..trials on observed cells")
        if full:
            self.correct = _compact_int(y, "correct")
        else:
            self.correct = _compact_int(np.where(self.mask, np.nan_to_num(y) if y.dtype.kind == "f" else y, 0),
                                        "correct")
        if self.chance is not None:
            c = np.broadcast_to(np.asarray(self.chance, dtype=float), (y.shape[1],)).copy()
            if not np.all(np.isfinite(c)) or np.any(c < 0) or np.any(c >= 1):
                raise EngineError("static chance levels must lie in [0, 1) (e.g. 0.25 for four-way multiple choice)")
            self.chance = None if not c.any() else c

    @property
    def shape(self) -> tuple[int, int]:
        return self.mask.shape

    @property
    def n_trials(self) -> np.ndarray:
        """Trials per cell (0 where unobserved), as a models x items integer array."""
        return self.mask.astype(np.int8) if self.trials is None else self.trials

    @property
    def rate(self) -> np.ndarray:
        """Observed success rate per cell (successes / trials; 0 where unobserved)."""
        if self.trials is None:
            return self.correct.astype(float)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.mask, self.correct / np.maximum(self.trials, 1), 0.0)


def _all_binary(obs: np.ndarray) -> bool:
    """Whether every value is 0 or 1 (integer input: two comparisons on the raw bytes, no float copy)."""
    if obs.dtype.kind in "biu":
        return bool(obs.min(initial=0) >= 0 and obs.max(initial=0) <= 1)
    return not np.any((obs != 0) & (obs != 1))


def _compact_int(values: np.ndarray, what: str) -> np.ndarray:
    """The smallest signed integer dtype that holds ``values`` (whole numbers, checked by the caller)."""
    top = float(np.max(values)) if values.size else 0.0
    for dtype in (np.int8, np.int16, np.int32):
        if top <= np.iinfo(dtype).max:
            return values.astype(dtype)  # always a copy: the caller may reuse its array
    raise EngineError(f"static {what} above 2^31 are not supported")


@dataclass
class ArenaData:
    """Scalar rewards, models x prompts; NaN = missing.  Models are aligned with the static models by the caller.

    ``preference_pairs``: pairwise preferences used directly as the arena pairs where no rewards exist (our
    extension, docs/DUALEVAL.md; built by ``engine.pairwise.preference_pairs``); ``rewards`` is then all NaN and
    only gives the shape."""

    rewards: np.ndarray
    preference_pairs: PairSet | None = None

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
    ``optimizer``: "newton" (default: block-coordinate Newton for static-only fits, measured faster at every size;
    with arena data damped Newton, Schur complement over the 2x2 item blocks, and L-BFGS when both the model count
    and twice the item count exceed 3,000), "block" (block-coordinate Newton, static only), "lbfgs", or "adam" (the
    paper's 2,000 epochs at lr 0.02).  Newton stops when the projected gradient is below ``gtol`` or the undamped Newton decrement (predicted
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
    warnings: list[str] = field(default_factory=list)

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

    A pair is a tie when its |z gap| lies strictly below the ``tie_pct`` percentile of all gaps (section 3), and
    always when the two rewards are equal: a pair with target exactly 0.5 carries no preference.  On discrete
    rewards (a judge's 1/2, a 1-10 score) many pairs have gap 0, so the percentile itself is often 0 (more than
    ``tie_pct`` % of pairs are equal): the strict ``<`` would then mark no pair a tie, and decisive-pair agreement
    would count pairs whose target is 0.5.  With the equal-reward rule the ties are exactly the equal pairs; a
    warning in ``PairSet.warnings`` says so, because the percentile no longer controls how many pairs are ties.

    ``z`` overrides the standardisation (the arena contamination protocol adds to z without re-standardising)."""
    if arena.preference_pairs is not None and z is None:
        return arena.preference_pairs
    if z is None:
        z = standardise_rewards(arena.rewards)
    n_models, n_prompts = z.shape
    obs = np.isfinite(z)
    if (obs.sum(axis=0) >= 2).sum() == 0:
        raise EngineError("no arena prompt has two or more responding models, so there are no pairs to fit")
    # pairs among the models with a reward only (a joint fit's arena part covers 58 of 5,000 models: all 12.5 M
    # model pairs x 805 prompts was gigabytes per block); the models keep their order, so the pairs theirs
    seen = np.flatnonzero(obs.any(axis=1))
    iu, ju = (seen[k] for k in np.triu_indices(len(seen), 1))
    block = max(1, 4_000_000 // max(1, len(iu)))
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    for start in range(0, n_prompts, block):
        q = np.arange(start, min(n_prompts, start + block))
        ok = obs[iu[:, None], q] & obs[ju[:, None], q]  # pairs x prompts
        pi, qq = np.nonzero(ok.T)  # prompt-major order
        parts.append((iu[qq], ju[qq], q[pi]))
    i = np.concatenate([p[0] for p in parts])
    j = np.concatenate([p[1] for p in parts])
    prompt = np.concatenate([p[2] for p in parts])
    flat = z.ravel()  # flat gathers: the same values as z[i, prompt], several times faster on 1.3 M pairs
    zi, zj = np.take(flat, i * n_prompts + prompt), np.take(flat, j * n_prompts + prompt)
    gap = zi - zj
    absgap = np.abs(gap)
    mx = np.maximum(zi, zj)
    tie_delta = float(np.percentile(absgap, config.tie_pct)) if config.tie_pct > 0 else 0.0
    bb_thr = float(np.percentile(mx, config.bb_pct))
    equal = gap == 0
    warnings = []
    if config.tie_pct > 0 and tie_delta == 0:
        warnings.append(f"the tie threshold (the {config.tie_pct:g}th percentile of |z gap|) is 0 because "
                        f"{equal.mean():.0%} of pairs have equal rewards (discrete rewards): only those "
                        f"{int(equal.sum()):,} equal-reward pairs are ties")
    return PairSet(i=i, j=j, prompt=prompt, z_gap=gap, target=expit(gap), tie=(absgap < tie_delta) | equal,
                   both_bad=mx < bb_thr, tie_delta=tie_delta, bb_threshold=bb_thr, z=z, warnings=warnings)


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
    chance_static: np.ndarray | None = None  # the known lower asymptote per static item the fit used (None: 2PL)
    provenance: dict = field(default_factory=dict)  # compute device, pass dtype, timing (passes-equivalent)

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
        """Predicted success probability per static cell (with the fitted data's known chance level, if any)."""
        p = expit(self.a_static[None, :] * (self.theta[:, None] - self.b_static[None, :]))
        if self.chance_static is not None:
            p = self.chance_static + (1.0 - self.chance_static) * p
        return p

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


def _expand(n: int, idx, values) -> np.ndarray:
    out = np.full(n, np.nan)
    if len(idx):
        out[np.asarray(idx)] = values
    return out
