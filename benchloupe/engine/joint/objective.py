"""The DualEval joint objective with its analytic gradient and exact Hessian blocks (paper 000, section 3)."""

from __future__ import annotations

import math

import numpy as np
from scipy.sparse import csc_matrix

from benchloupe.engine.backend import Backend, PassResult, fused_pass
from benchloupe.engine.common import EngineError, thread_pool, usable_cores
from benchloupe.engine.joint.inputs import _REF_EPS, JointConfig, PairSet, StaticData

_PAIR_THREAD_MIN = 200_000  # decisive pairs from which the pair sums are split over threads


# ------------------------------------------------------------------------------------------------ the objective
class _Problem:
    """The compact problem (fitted models and items only) with the objective and its analytic gradient."""

    def __init__(self, static: StaticData | None, pairs: PairSet | None, n_models: int, config: JointConfig,
                 pair_keep: np.ndarray | None = None, static_mask: np.ndarray | None = None,
                 min_models: int = 2, static_weight: np.ndarray | None = None) -> None:
        """``static_weight`` (per static column, positive integers): a column of weight w stands for w identical
        columns (a bootstrap replicate's repeated draws).  Only the block-coordinate optimiser honours it (static
        only: ``optimise._run_block_newton``); :meth:`evaluate` ignores it."""
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
            # the prompts with a kept pair, ascending (a count per prompt: np.unique's sort is 10x slower here)
            self.a_items = np.flatnonzero(np.bincount(pairs.prompt[keep], minlength=pairs.z.shape[1]))
            has_model[np.bincount(pairs.i[used], minlength=n_models) > 0] = True
            has_model[np.bincount(pairs.j[used], minlength=n_models) > 0] = True
        if not (self.has_static or self.has_arena):
            raise EngineError(f"mode {config.mode!r} needs {'static' if config.uses_static else 'arena'} data")
        self.models = np.flatnonzero(has_model)
        if len(self.models) < min_models:
            raise EngineError("fewer than two models have data in the fitted sources; add models or change mode")
        mpos = np.full(n_models, -1)
        mpos[self.models] = np.arange(len(self.models))
        self.M = len(self.models)
        if self.has_static:
            whole = (static_mask is None and len(self.models) == n_models and len(self.s_items) == static.shape[1])
            if whole:  # no copies of the (int8) matrices
                W, Y, N = mask, static.correct, (None if static.trials is None else static.trials)
            elif len(self.models) == n_models and len(self.s_items) == static.shape[1]:
                # a training mask over every model and item (held-out calibration): no fancy-indexed copies, only
                # the successes zeroed where the mask drops a cell
                W = mask
                if static.correct.dtype == np.int8 and W.dtype == bool:  # np.where's values, one int8 ufunc
                    Y = np.multiply(static.correct, W.view(np.int8))
                else:
                    Y = np.where(W, static.correct, 0).astype(static.correct.dtype, copy=False)
                N = None if static.trials is None else np.where(W, static.trials, 0).astype(static.trials.dtype,
                                                                                           copy=False)
            else:
                sub = np.ix_(self.models, self.s_items)
                W = mask[sub]
                Y = np.where(W, static.correct[sub], 0).astype(static.correct.dtype)
                N = None if static.trials is None else np.where(W, static.trials[sub], 0).astype(static.trials.dtype)
            self.Y = Y  # successes (0 where unobserved), integer dtype
            # trials per cell, 0 where unobserved; None: every cell one trial (all observed, 0/1)
            self.N = None if (N is None and W.all()) else ((W.view(np.int8) if W.dtype == bool else W.astype(np.int8))
                                                           if N is None else N)
            # N (when not None) is only the observed mask of one-trial cells: a float32 pass may take the tanh route
            self.trials_01 = static.trials is None
            self.s_weight = None if static_weight is None else np.asarray(static_weight, float)[self.s_items]
            if self.s_weight is None:
                self.n_static = float(W.size if self.N is None else self.N.sum(dtype=np.int64))
            else:
                cells = np.full(self.M, 1.0) @ (W if self.N is None else self.N)
                self.n_static = float(cells @ self.s_weight)
            self.c = None if static.chance is None else static.chance[self.s_items]
            if self.c is not None and not self.c.any():
                self.c = None
            self.Ns = len(self.s_items)
        else:
            self.Ns, self.s_weight = 0, None
        if self.has_arena:
            qpos = np.full(pairs.z.shape[1], -1)
            qpos[self.a_items] = np.arange(len(self.a_items))
            self.Na = len(self.a_items)
            # decisive pairs' two cells, in prompt-major cell order (q M + model, the order of the pairs): gathers
            # and the per-cell sums then touch memory almost sequentially
            mi, mj, qd = mpos[pairs.i[dec]], mpos[pairs.j[dec]], qpos[pairs.prompt[dec]]
            self.dec_i, self.dec_j = qd * self.M + mi, qd * self.M + mj
            self.dec_t = pairs.target[dec]
            self.dec_q = qd
            size = self.M * self.Na
            # what :attr:`chunks` builds on first use: the (model i, model j) rows, the cells and the chunk count
            n_dec = len(self.dec_i)
            self._chunk_rows = (mi * self.M + mj, size, usable_cores(4) if n_dec >= _PAIR_THREAD_MIN else 1)
            self._chunks = None
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

    @property
    def chunks(self) -> list:
        """The decisive pairs in chunks, one per thread on large arenas (numpy and scipy's sparse products release
        the GIL): (slice, S_i, S_j, S_mm) over each chunk's pairs, the per-cell sums of a chunk being partial sums.
        S_i v is the sum of v over the pairs whose first cell is c, S_j v the same for the second cell, S_mm v per
        (model i, model j): per-pair -> per-cell sums as sparse products (several times faster than np.bincount
        with weights).  One nonzero per column: built as CSC (no sort) and converted to CSR (the faster product),
        0.02 s instead of 0.3 s through COO on 1.1 M pairs.  Built on first use: a joint block fit
        (:mod:`.block_joint`) evaluates its arena terms on the arena-only problem, and here S_mm alone has one row
        per pair of the joint problem's models (5,000 models: 25 M rows, ~0.37 GB and 1.4 s with the others)."""
        if self._chunks is None:
            mm, size, k = self._chunk_rows
            n_dec = len(self.dec_i)

            def scatter(rows, n_rows):
                n_c = len(rows)
                return csc_matrix((np.ones(n_c), rows, np.arange(n_c + 1)), shape=(n_rows, n_c)).tocsr()

            edges = np.linspace(0, n_dec, k + 1).astype(int)
            self._chunks = [(slice(lo, hi), scatter(self.dec_i[lo:hi], size), scatter(self.dec_j[lo:hi], size),
                             scatter(mm[lo:hi], self.M * self.M)) for lo, hi in zip(edges[:-1], edges[1:])]
        return self._chunks

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

    def evaluate(self, x: np.ndarray, order: int = 2, accept=None):
        """The objective at ``x`` and, by ``order``, its gradient and Newton system.  ``accept`` (a predicate on the
        objective value, e.g. a line search's Armijo test): the arena pair terms are evaluated value first, and
        when ``accept(f)`` is false the derivatives are not computed (``(f, None, None)``); a trial step then costs
        a value-only evaluation, and an accepted one no more than a full evaluation."""
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
            fa, stage = self._arena_value(th, ba, ka, g, order)
            f += fa
        # regularisation
        lam = self.cfg.lambda_reg
        lt, li = (lam / M, lam / self.n_items) if self.reg_mean else (lam, lam)
        items = x[M:M + 2 * self.n_items]
        f += lt * float(th @ th) + li * float(items @ items)
        if self.has_arena:
            f += lam * g * g
        if order == 0 or (accept is not None and not accept(f)):
            return f, None, None
        if self.has_arena:
            ga, ha = self._arena_derivatives(stage, th, ba, order)
            o = M + 2 * Ns
            if order >= 1:
                grad[:M] += ga[0]
                grad[o:o + Na], grad[o + Na:o + 2 * Na], grad[-1] = ga[1], ga[2], ga[3]
            if order >= 2:
                A += ha[0]
                Bb[:, Ns:], Bk[:, Ns:] = ha[1], ha[2]
                Cbb[Ns:], Cbk[Ns:], Ckk[Ns:] = ha[3], ha[4], ha[5]
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

    def _cell_terms(self, X, E, Y, N, c, order: int):
        """Per-cell negative log-likelihood of the static data, its derivative R and curvature V in the logit X.

        Binomial cells (``N`` trials, ``Y`` successes; ``N`` None: one trial each) with success probability
        ``p = c + (1 - c) sigmoid(X)``.  The binomial coefficient is a constant and left out.  Without a chance level
        the loss is ``N softplus(X) - Y X`` (convex); with one it is ``-Y log p - (N - Y) log(1 - p)`` and its exact
        curvature ``s (1 - s) (N - Y c / p^2)`` can be negative, so V is its positive part (a Newton step then stays
        a descent step; where the loss is convex V is exact)."""
        sp = self._softplus(X, E)
        if order >= 1 or c is not None:
            P = self._sigmoid(X, E)
        if c is None:
            loss = sp if N is None else sp * N
            loss -= Y * X
            if order == 0:
                return loss, None, None
            R = P - Y if N is None else P * N - Y
            V = P * (1.0 - P)
            if N is not None:
                V *= N
            return loss, R, V
        n = 1 if N is None else N
        pc = c + (1.0 - c) * P
        np.maximum(pc, 1e-300, out=pc)
        loss = (n - Y) * (sp - np.log1p(-c))
        loss -= Y * np.log(pc)
        if order == 0:
            return loss, None, None
        R = P * n - Y * (1.0 - (1.0 - P) * c / pc)
        V = P * (1.0 - P) * np.maximum(n - Y * c / (pc * pc), 0.0)
        return loss, R, V

    def _static_terms(self, th, bs, ks, order):
        w = self.cfg.lambda_static / self.n_static
        a, X, E = self._logits(th, bs, ks)
        loss, R, V = self._cell_terms(X, E, self.Y, self.N, self.c, order)
        f = w * float(loss.sum())
        if order == 0:
            return f, None, None
        R *= w
        grads = self._cell_grads(th, bs, a, R)
        if order == 1:
            return f, grads, None
        V *= w
        return f, grads, self._cell_hess(a, X, V, R)

    def static_pass(self, th, bs, ks, *, rows: bool = True, cols: bool = True, loss_only: bool = False,
                    backend: Backend | None = None, columns: np.ndarray | None = None,
                    loss: bool = True) -> PassResult:
        """One fused pass over the static cells (regulariser and the 1/|S| weight not included): per-model theta
        gradient and curvature, per-item losses and the moments of the item 2x2 blocks (``backend.PassResult``).

        2PL cells go through the compute backend (numpy or torch, float32 or float64); cells with a chance level
        through the float64 cell terms of :meth:`_cell_terms` in row blocks (no models x items temporary)."""
        a = np.exp(ks)
        if self.c is None:
            return fused_pass(self.Y, self.N, th, bs, a, rows=rows, cols=cols, loss_only=loss_only,
                              backend=backend, columns=columns, weights=self.s_weight, loss=loss,
                              trials_01=self.trials_01)
        Y, N, c, sw = self.Y, self.N, self.c, self.s_weight
        if columns is not None:
            Y, N, c = Y[:, columns], (None if N is None else N[:, columns]), c[columns]
            bs, ks, a = bs[columns], ks[columns], a[columns]
            sw = None if sw is None else sw[columns]
        n = len(bs)
        aw = a if sw is None else a * sw  # the per-model sums' item factors
        a2 = a * aw
        loss, mom = np.zeros(n), np.zeros((5, n))
        g_th, h_th = np.empty(self.M), np.empty(self.M)
        step = max(8, (1 << 17) // max(1, n))
        order = 0 if loss_only else 1
        for r0 in range(0, self.M, step):
            sl = slice(r0, r0 + step)
            t = th[sl]
            _, X, E = self._logits(t, bs, ks)
            L, R, V = self._cell_terms(X, E, Y[sl], None if N is None else N[sl], c, order)
            loss += L.sum(axis=0)
            if loss_only:
                continue
            g_th[sl], h_th[sl] = R @ aw, V @ a2
            W = np.vstack([np.ones_like(t), t, t * t])
            mom[:2] += W[:2] @ R
            mom[2:] += W @ V
        if loss_only:
            return PassResult(None, None, loss, *([None] * 5))
        return PassResult(g_th if rows else None, h_th if rows else None, loss, *mom)

    def _pair_value(self, chunk, gPf) -> tuple[float, tuple[np.ndarray, np.ndarray]]:
        """The preference loss of one chunk of decisive pairs (unweighted) and what its derivatives reuse:
        u = gamma (p_i - p_j) and exp(-|u|) per pair.  ``gPf``: gamma p per prompt-major cell."""
        sl = chunk[0]
        ci, cj, t = self.dec_i[sl], self.dec_j[sl], self.dec_t[sl]
        u = np.take(gPf, ci)
        u -= np.take(gPf, cj)  # gamma (p_i - p_j)
        au = np.abs(u)
        eu = np.negative(au)
        np.exp(eu, out=eu)  # softplus(u) = log1p(exp(-|u|)) + (u + |u|) / 2; sigmoid(u) from the same exp
        return float(np.log1p(eu).sum()) + 0.5 * float(au.sum() + u.sum()) - float(np.dot(t, u)), (u, eu)

    def _pair_chunk(self, chunk, state, gdp, Xf, a2, order: int) -> dict:
        """The per-cell sums (flat, prompt-major cells) of one chunk's gradient (``order`` 1) and Hessian terms
        (``order`` 2) from its :meth:`_pair_value` state.  ``gdp``, ``Xf``: gamma p' and X per prompt-major cell."""
        sl, S_i, S_j, S_mm = chunk
        ci, cj, t = self.dec_i[sl], self.dec_j[sl], self.dec_t[sl]
        u, eu = state
        out = {}
        wp = self.cfg.lambda_pref / len(self.dec_t)
        su = 1.0 / (1.0 + eu)  # sigmoid(|u|); |u| <= gamma, so 1 - sigmoid(|u|) keeps full relative precision
        su -= 0.5
        np.copysign(su, u, out=su)
        su += 0.5
        r1 = su - t
        r1 *= wp

        def minus(v):
            o = S_i @ v
            o -= S_j @ v
            return o

        def plus(v):
            o = S_i @ v
            o += S_j @ v
            return o

        out["r1"], out["r1u"] = minus(r1), float(np.dot(r1, u))
        if order == 1:
            return out
        s2 = 1.0 - su
        s2 *= su
        s2 *= wp
        out["s2"] = plus(s2)
        wpair = np.take(gdp, ci)
        wpair *= np.take(gdp, cj)
        wpair *= s2  # gamma^2 p'_i p'_j s2
        out["off"] = S_mm @ (wpair * np.take(a2, self.dec_q[sl]))
        out["W"] = plus(wpair)
        xs = np.take(Xf, ci)
        xs += np.take(Xf, cj)
        xs *= wpair  # S_plus (w (X_i + X_j)) = X_c W_c + K_c, K_c = sum of w X_other over the pairs of cell c
        out["xs"] = plus(xs)
        su_u = s2 * u
        out["G"], out["suu"] = minus(su_u), float(np.dot(su_u, u))
        return out

    def _pair_values(self, gPf) -> tuple[float, list]:
        """:meth:`_pair_value` over every chunk (in threads when there are several): the summed loss and the
        chunks' states."""
        if len(self.chunks) == 1:
            f, state = self._pair_value(self.chunks[0], gPf)
            return f, [state]
        parts = list(thread_pool("pairs", 4).map(lambda c: self._pair_value(c, gPf), self.chunks))
        return sum(p[0] for p in parts), [p[1] for p in parts]

    def _pair_sums(self, states, gdp, Xf, a2, order: int) -> dict:
        """:meth:`_pair_chunk` over every chunk (in threads when there are several), summed."""
        if len(self.chunks) == 1:
            return self._pair_chunk(self.chunks[0], states[0], gdp, Xf, a2, order)
        parts = list(thread_pool("pairs", 4).map(lambda cs: self._pair_chunk(cs[0], cs[1], gdp, Xf, a2, order),
                                      zip(self.chunks, states, strict=True)))
        return {k: sum(p[k] for p in parts) for k in parts[0]}

    def _cells(self, v: np.ndarray) -> np.ndarray:
        """A flat prompt-major per-cell vector as the M x Na cell matrix."""
        return v.reshape(self.Na, self.M).T

    def _arena_value(self, th, ba, ka, g, order):
        """The arena terms' value (pairs and both-bad cells) and the state :meth:`_arena_derivatives` continues
        from (the same point; ``order`` says which per-cell arrays to keep)."""
        cfg = self.cfg
        gamma = cfg.gamma0 * math.exp(min(g, 50.0))
        a, X, E = self._logits(th, ba, ka)
        P = self._sigmoid(X, E)
        wp = cfg.lambda_pref / len(self.dec_t)
        gPf = (gamma * P).T.ravel()  # prompt-major cells
        fp, states = self._pair_values(gPf)
        f = wp * fp
        cnt = self.bb_cnt
        q1 = None
        if cnt is not None:  # both-bad loss per cell, weighted by the cell's number of both-bad pairs
            if self.ref:
                q1 = 1.0 - P + _REF_EPS
                f -= float(np.sum(cnt * np.log(q1)))
            else:
                f += float(np.sum(cnt * self._softplus(X, E)))
        return f, (gamma, a, X, P, q1, states)

    def _arena_derivatives(self, stage, th, ba, order):
        cnt = self.bb_cnt
        M = self.M
        gamma, a, X, P, q1, states = stage
        dp = P * (1.0 - P)
        gdp, Xf = ((gamma * dp).T.ravel(), X.T.ravel()) if order >= 2 else (None, None)
        ps = self._pair_sums(states, gdp, Xf, a * a, order)
        dP = self._cells(ps["r1"]) * gamma
        Rc = dP * dp
        if cnt is not None:
            Rc += cnt * dp / q1 if self.ref else cnt * P
        grads = (*self._cell_grads(th, ba, a, Rc), ps["r1u"])
        if order == 1:
            return grads, None
        # exact Hessian: per-cell terms (the pair gradient through P'' and the both-bad cells), the pairs'
        # Gauss-Newton term split into its cell-diagonal part and the cross-cell part of the two models of a pair
        gam2 = gamma * gamma
        Vc = dP * dp * (1.0 - 2.0 * P)
        Vc += gam2 * self._cells(ps["s2"]) * dp * dp
        if cnt is not None:
            if self.ref:
                f1 = cnt / q1
                Vc += f1 / q1 * dp * dp + f1 * dp * (1.0 - 2.0 * P)
            else:
                Vc += cnt * dp
        ad, b_b, b_k, c_bb, c_bk, c_kk = self._cell_hess(a, X, Vc, Rc)
        off = ps["off"].reshape(M, M)
        Wc = self._cells(ps["W"])
        Kc = self._cells(ps["xs"]) - X * Wc
        Gc = self._cells(ps["G"])
        dgX = (dP + gamma * Gc) * dp  # d/d(log gamma~) of the pairs' gradient wrt X
        A = np.zeros((M + 1, M + 1))
        A[:M, :M] = -(off + off.T)
        A[np.arange(M), np.arange(M)] += ad
        A[M, :M] = A[:M, M] = dgX @ a
        A[M, M] = ps["suu"] + ps["r1u"]
        Bb = np.vstack([b_b + Wc * (a * a), -a * dgX.sum(axis=0)])
        Bk = np.vstack([b_k - Kc * a, (dgX * X).sum(axis=0)])
        c_bb -= a * a * Wc.sum(axis=0)
        c_bk += a * (Wc * X).sum(axis=0)
        c_kk -= (Kc * X).sum(axis=0)
        return grads, (A, Bb, Bk, c_bb, c_bk, c_kk)
