"""Compute backend for the dense passes over a models x items matrix of 2PL logits (issue 16).

One *fused pass* evaluates, at logits ``X_iq = a_q (theta_i - b_q)`` over binomial cells (``Y`` successes of ``N``
trials, ``N`` None: one trial per cell), everything a block-coordinate Newton sweep needs from the cells:

* per model: ``sum_q a_q R_iq`` and ``sum_q a_q^2 V_iq`` (gradient and curvature in theta),
* per item: the loss ``sum_i l_iq`` and the moments ``sum_i R``, ``sum_i theta R``, ``sum_i V``, ``sum_i theta V``,
  ``sum_i theta^2 V`` from which the exact (b_q, k_q) gradient and 2x2 Hessian follow,

with ``l = N softplus(X) - Y X``, ``R = dl/dX = N sigmoid(X) - Y`` and ``V = N sigmoid(X)(1 - sigmoid(X))``.  The
elementwise work is one ``exp`` and one ``log`` per cell on ``|X|`` (no overflow); every reduction is a matrix
product (BLAS), so the pass runs at the speed of the exponentials.  The 0/1 (or count) matrix stays in its integer
dtype and is converted one cache-sized row block at a time: no dense float64 copy of the data exists.

Backends: ``numpy`` (row blocks spread over threads; numpy releases the GIL inside ufuncs and BLAS) and ``torch``
(the same pass on a torch device; CUDA when present).  ``dtype`` float32 halves the memory traffic; reductions of
each block are accumulated in float64, and callers finish with a float64 pass (see ``joint.optimise``).  Measured
choices are in :func:`choose` and docs/BENCHMARKS.md.

Other engine modules can call :func:`fused_pass` directly (e.g. a DIF or audit Newton step over a 2PL matrix) or use
:func:`resolve` / :func:`describe` to honour a ``--device`` option and record provenance.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from benchloupe.engine.backend_sums import PassResult, relu_sums
from benchloupe.engine.common import EngineError, thread_pool, usable_cores
from benchloupe.hints import Opt, say

DEVICES = ("auto", "cpu", "cuda")
_BLOCK_CELLS = 1 << 17  # ~128 k cells per row block: the block's float32 temporaries stay in L2 cache
# Measured on the 2-core development machine (docs/BENCHMARKS.md, "Speed"; whole static fits, best of 3, load ~6):
# float32 sweeps + float64 polish vs float64 throughout: 300 x 300 0.045 / 0.057 s, 500 x 500 0.038 / 0.116 s,
# 1,000 x 1,000 0.13 / 0.20 s, objectives equal to 3e-13 relative.  Below ~250 k cells the two are within noise,
# and float64 throughout is the simpler result.
F32_MIN_CELLS = 250_000
# torch on CUDA pays a transfer and launch latency per pass; below this many cells numpy on the CPU is assumed
# faster.  Not measured here (no GPU): bench/gpu_check.sh prints the per-size pass times that set it.
# torch on the CPU is never chosen: eager torch measured 5x slower than the numpy pass (2,000 x 2,000: 0.16 s vs
# 0.03 s in float32), as the issue found.
CUDA_MIN_CELLS = 4_000_000


@dataclass(frozen=True)
class Backend:
    """Where and how the dense passes run: ``kind`` "numpy" or "torch", ``device`` "cpu" or "cuda"."""

    kind: str
    device: str
    dtype: str  # "float32" or "float64": the dtype of the elementwise passes before the float64 polish

    def as_dict(self) -> dict:
        return {"backend": self.kind, "device": self.device, "dtype": self.dtype}


@lru_cache(maxsize=1)
def cuda_available() -> bool:
    """Whether torch sees a CUDA device.  Importing torch costs seconds, so a machine without the NVIDIA driver's
    device files (no GPU) answers False without importing it."""
    if not (os.path.exists("/proc/driver/nvidia/version") or os.path.exists("/dev/nvidia0")
            or os.environ.get("BENCHLOUPE_PROBE_CUDA")):
        return False
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def resolve(device: str = "auto", n_cells: int = 0) -> Backend:
    """The backend for a fit over ``n_cells`` static cells: ``device`` "cpu", "cuda" or "auto" (CUDA when present
    and the problem is large enough to pay its latency, else numpy on the CPU)."""
    if device not in DEVICES:
        raise EngineError(f"device must be one of {DEVICES}, got {device!r}")
    dtype = "float32" if n_cells >= F32_MIN_CELLS else "float64"
    if device == "cuda":
        if not cuda_available():
            raise EngineError(say(Opt("device", "cuda"), ": no CUDA device is visible to torch; use ", Opt("device", "cpu"),
                                  " or auto"))
        return Backend("torch", "cuda", dtype)
    if device == "auto" and n_cells >= CUDA_MIN_CELLS and cuda_available():
        return Backend("torch", "cuda", dtype)
    return Backend("numpy", "cpu", dtype)


def fused_pass(Y: np.ndarray, N: np.ndarray | None, theta: np.ndarray, b: np.ndarray, a: np.ndarray, *,
               rows: bool = True, cols: bool = True, loss_only: bool = False, backend: Backend | None = None,
               columns: np.ndarray | None = None, weights: np.ndarray | None = None, loss: bool = True,
               trials_01: bool = False) -> PassResult:
    """One pass over the cells; ``rows``/``cols`` select the per-model / per-item sums, ``loss_only`` only the
    per-item losses; ``loss=False`` skips the losses (their log per cell) for a caller that needs only gradients and
    curvatures (the frozen-item ability Newton), returning ``loss`` None (the torch pass computes them anyway).
    ``trials_01``: the caller knows ``N`` holds only 0 and 1 (an observed mask of one-trial cells), which lets a
    float32 pass take the tanh route.  ``columns`` restricts the pass to those items (a correction pass over a few
    columns).  ``weights`` (per item) multiply each item's terms in the per-model sums: an item of weight w stands for w
    identical columns (a bootstrap replicate's repeated draws); the per-item sums stay those of one column."""
    backend = backend or Backend("numpy", "cpu", "float64")
    if columns is not None:
        Y = Y[:, columns]
        N = None if N is None else N[:, columns]
        b, a = b[columns], a[columns]
        weights = None if weights is None else weights[columns]
    if backend.kind == "torch":
        from benchloupe.engine import backend_torch

        return backend_torch.fused_pass(Y, N, theta, b, a, rows=rows, cols=cols, loss_only=loss_only,
                                        device=backend.device, dtype=backend.dtype, weights=weights)
    loss = loss or loss_only
    if backend.dtype == "float32" and (N is None or trials_01):
        return _numpy_pass_tanh(Y, theta, b, a, rows, cols, loss_only, weights, loss, mask=N)
    return _numpy_pass(Y, N, theta, b, a, rows, cols, loss_only, np.dtype(backend.dtype), weights, loss)


def _blocks(M: int, n: int) -> list[slice]:
    step = max(8, _BLOCK_CELLS // max(1, n))
    return [slice(r, min(M, r + step)) for r in range(0, M, step)]


def _run_blocks(work, blocks: list[slice], cells: int) -> list:
    """``work`` over the row blocks, split over the usable cores when the pass is large enough to pay for it."""
    k = min(usable_cores(), len(blocks))
    if k > 1 and cells >= 1 << 20:
        return list(thread_pool("pass").map(work, [blocks[i::k] for i in range(k)]))
    return [work(blocks)]


def _numpy_pass_tanh(Y, theta, b, a, rows, cols, loss_only, weights=None, want_loss: bool = True,
                     mask: np.ndarray | None = None) -> PassResult:
    """The float32 pass over 0/1 cells through ``H = tanh(X / 2)`` (issue 26): ``sigmoid(X) = (1 + H) / 2``,
    ``V = (1 - H^2) / 4`` and ``-log sigmoid(|X|) = log 2 - log1p(|H|)``, so a cell costs one tanh and one log1p
    where :func:`_numpy_pass` pays an exp, a division and a log (numpy's float32 tanh is vectorised and half the
    cost of its exp here), and the sums over P and V are taken from ``H`` and ``H^2`` by linearity (no P, V arrays).
    ``mask`` (0/1 per cell, the one-trial cells observed; None: all): the logits are zeroed where it is 0 before
    the tanh, so an unobserved cell's H is 0 and every sum over ``N P``, ``N V`` and the loss follows from the
    masked H and the mask's own sums (held-out refits, benchmarks with missing cells).
    Same sums as :func:`_numpy_pass` to float32's resolution (absolute error ~1e-7 per cell in P, V and the loss,
    as that pass's ``1 - P``; tests/unit/test_joint_backend.py): only the float32 sweeps use it, and every fit that
    needs a float64 optimum ends with float64 passes (``joint.optimise``).  No overflow: tanh saturates."""
    M, n = Y.shape
    dt = np.float32
    blocks = _blocks(M, n)
    th = theta.astype(dt)
    bb, half_a = b.astype(dt), (0.5 * a).astype(dt)
    aw = a if weights is None else a * weights
    aa = aw.astype(dt)  # the per-model sums' item factors
    a2 = aa * aa if weights is None else (aw * a).astype(dt)
    sum_aa, sum_a2 = float(aa.sum(dtype=np.float64)), float(a2.sum(dtype=np.float64))
    rows = rows and not loss_only
    cols = cols and not loss_only
    log2 = math.log(2.0)
    masked = mask is not None

    def work(chunk: list[slice]):
        # per item: [-sum log1p|H|, sum Y, sum theta Y, sum H, sum theta H, -sum H^2, -sum theta H^2,
        # -sum theta^2 H^2] and with a mask [sum N max(X, 0), sum N, sum theta N, sum theta^2 N]: the loss, P and V
        # moments follow from these and (without a mask) the abilities' own sums
        acc = np.zeros((12 if masked else 8, n))
        out_rows = []
        for sl in chunk:
            t = th[sl]
            H = np.subtract.outer(t, bb)
            H *= half_a  # X / 2
            W = np.empty((3, len(t)), dt)
            W[0], W[1] = 1.0, t
            W[2] = t * t
            if masked:
                Nb = mask[sl].astype(dt)
                H *= Nb  # 0 where unobserved: tanh(0) = 0 drops the cell from every sum below
                if want_loss:
                    acc[8] += 2.0 * np.maximum(H, 0.0).sum(axis=0)  # sum N max(X, 0)
                if want_loss or cols:
                    acc[9:12] += W @ Nb
            np.tanh(H, out=H)
            Yb = Y[sl].astype(dt)
            if want_loss:
                A = np.abs(H)
                np.log1p(A, out=A)
                acc[0] -= A.sum(axis=0)
            if want_loss or cols:
                acc[1:3] += W[:2] @ Yb
            if not (rows or cols):
                continue
            A = np.multiply(H, H, out=A) if want_loss else H * H  # H^2
            if rows:
                n_aa = sum_aa if not masked else (Nb @ aa).astype(np.float64)
                n_a2 = sum_a2 if not masked else (Nb @ a2).astype(np.float64)
                g = 0.5 * n_aa + 0.5 * (H @ aa).astype(np.float64) - (Yb @ aa)
                h = 0.25 * n_a2 - 0.25 * (A @ a2).astype(np.float64)
                out_rows.append((sl, g, h))
            if cols:
                acc[3:5] += W[:2] @ H
                acc[5:8] -= W @ A
        return acc, out_rows

    parts = _run_blocks(work, blocks, M * n)
    acc = sum(p[0] for p in parts)
    loss = None
    if want_loss:
        # loss = N softplus(X) - Y X, softplus(X) = -log Q + max(X, 0) with -log Q = log 2 - log1p|H|;
        # sum_i Y X = a (sum theta Y - b sum Y)
        n_cells, relu = (acc[9], acc[8]) if masked else (float(M), a * relu_sums(theta, b))
        loss = (n_cells * log2 + acc[0]) + relu - a * (acc[2] - b * acc[1])
    g_th = h_th = None
    if rows:
        g_th, h_th = np.empty(M), np.empty(M)
        for _, out_rows in parts:
            for sl, g, h in out_rows:
                g_th[sl], h_th[sl] = g, h
    if not cols:
        return PassResult(g_th, h_th, loss, *([None] * 5))
    if masked:
        m0, m1, m2 = acc[9], acc[10], acc[11]
    else:
        t64 = th.astype(np.float64)  # the abilities as the pass used them
        m0, m1, m2 = float(M), float(t64.sum()), float(t64 @ t64)
    # sum N P = (sum N + sum H) / 2 and sum N V = (sum N - sum H^2) / 4, with their theta moments; R = N P - Y
    s0P, s1P = 0.5 * (m0 + acc[3]), 0.5 * (m1 + acc[4])
    s0V, s1V, s2V = 0.25 * (m0 + acc[5]), 0.25 * (m1 + acc[6]), 0.25 * (m2 + acc[7])
    return PassResult(g_th, h_th, loss, s0P - acc[1], s1P - acc[2], s0V, s1V, s2V)


def _numpy_pass(Y, N, theta, b, a, rows, cols, loss_only, dt, weights=None, want_loss: bool = True) -> PassResult:
    M, n = Y.shape
    blocks = _blocks(M, n)
    th = theta.astype(dt)
    bb, neg_a = b.astype(dt), (-a).astype(dt)
    aw = a if weights is None else a * weights
    aa = aw.astype(dt)  # the per-model sums' item factors
    a2 = aa * aa if weights is None else (aw * a).astype(dt)
    rows = rows and not loss_only
    cols = cols and not loss_only

    def work(chunk: list[slice]):
        # per item: [sum -log Q (N-weighted), sum Y, sum theta Y, sum P, sum theta P, sum V, sum theta V,
        # sum theta^2 V] (+ sum N max(X, 0) with trials)
        acc = np.zeros((9, n))
        out_rows = []
        with np.errstate(over="ignore"):
            for sl in chunk:
                t = th[sl]
                Z = np.subtract.outer(t, bb)
                Z *= neg_a  # Z = -X
                if N is not None:
                    Nb = N[sl].astype(dt)
                    if want_loss:
                        relu = np.minimum(Z, 0.0)  # max(X, 0) = -min(Z, 0)
                        relu *= Nb
                        acc[8] -= relu.sum(axis=0)
                P = np.exp(Z)
                P += 1.0
                # P = sigmoid(X); exp overflow (X < -88 in float32) gives P = 0 exactly.  divide, not reciprocal:
                # the same correctly rounded 1/x, bit for bit, and numpy vectorises it (2.4x faster here)
                np.divide(1.0, P, out=P)
                C = 1.0 - P
                V = P * C
                if want_loss:
                    np.maximum(P, C, out=C)  # Q = sigmoid(|X|)
                    np.log(C, out=C)  # log(1 + exp(-|X|)) = -log Q
                Yb = Y[sl].astype(dt)
                W = np.empty((3, len(t)), dt)
                W[0], W[1] = 1.0, t
                W[2] = t * t
                if N is not None:
                    if want_loss:
                        C *= Nb
                    P *= Nb
                    V *= Nb
                if want_loss:
                    acc[0] -= C.sum(axis=0)
                if want_loss or cols:
                    acc[1:3] += W[:2] @ Yb
                if not (rows or cols):
                    continue
                if rows:
                    out_rows.append((sl, (P @ aa).astype(np.float64) - (Yb @ aa), (V @ a2).astype(np.float64)))
                if cols:
                    acc[3:5] += W[:2] @ P
                    acc[5:8] += W @ V
        return acc, out_rows

    parts = _run_blocks(work, blocks, M * n)
    acc = sum(p[0] for p in parts)
    # loss = N softplus(X) - Y X, softplus(X) = -log Q + max(X, 0); sum_i Y X = a (sum theta Y - b sum Y)
    loss = None
    if want_loss:
        relu = a * relu_sums(theta, b) if N is None else acc[8]  # sum_i N max(X, 0)
        loss = acc[0] + relu - a * (acc[2] - b * acc[1])
    g_th = h_th = None
    if rows:
        g_th, h_th = np.empty(M), np.empty(M)
        for _, out_rows in parts:
            for sl, g, h in out_rows:
                g_th[sl], h_th[sl] = g, h
    if not cols:
        return PassResult(g_th, h_th, loss, *([None] * 5))
    s0R, s1R = acc[3] - acc[1], acc[4] - acc[2]  # R = N P - Y
    return PassResult(g_th, h_th, loss, s0R, s1R, acc[5], acc[6], acc[7])


def describe(backend: Backend) -> dict:
    """Provenance of a backend: kind, device, dtype and (for CUDA) the device name."""
    out = backend.as_dict()
    if backend.device == "cuda":
        import torch

        out["device_name"] = torch.cuda.get_device_name(0)
    out["threads"] = usable_cores() if backend.kind == "numpy" else None
    return out


def passes_equivalent(seconds: float, seconds_per_pass: float) -> float:
    """A fit's time as a multiple of one fused pass over its data (issue 16, item 3)."""
    if not (seconds_per_pass > 0 and math.isfinite(seconds_per_pass)):
        return float("nan")
    return seconds / seconds_per_pass
