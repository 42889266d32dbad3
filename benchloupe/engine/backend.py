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
               columns: np.ndarray | None = None, weights: np.ndarray | None = None) -> PassResult:
    """One pass over the cells; ``rows``/``cols`` select the per-model / per-item sums, ``loss_only`` only the
    per-item losses.  ``columns`` restricts the pass to those items (a correction pass over a few columns).
    ``weights`` (per item) multiply each item's terms in the per-model sums: an item of weight w stands for w
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
    return _numpy_pass(Y, N, theta, b, a, rows, cols, loss_only, np.dtype(backend.dtype), weights)


def _numpy_pass(Y, N, theta, b, a, rows, cols, loss_only, dt, weights=None) -> PassResult:
    M, n = Y.shape
    step = max(8, _BLOCK_CELLS // max(1, n))
    blocks = [slice(r, min(M, r + step)) for r in range(0, M, step)]
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
                    relu = np.minimum(Z, 0.0)  # max(X, 0) = -min(Z, 0)
                    relu *= Nb
                    acc[8] -= relu.sum(axis=0)
                P = np.exp(Z)
                P += 1.0
                np.reciprocal(P, out=P)  # P = sigmoid(X); exp overflow (X < -88 in float32) gives P = 0 exactly
                C = 1.0 - P
                V = P * C
                np.maximum(P, C, out=C)  # Q = sigmoid(|X|)
                np.log(C, out=C)  # log(1 + exp(-|X|)) = -log Q
                Yb = Y[sl].astype(dt)
                W = np.empty((3, len(t)), dt)
                W[0], W[1] = 1.0, t
                W[2] = t * t
                if N is not None:
                    C *= Nb
                    P *= Nb
                    V *= Nb
                acc[0] -= C.sum(axis=0)
                acc[1:3] += W[:2] @ Yb
                if not (rows or cols):
                    continue
                if rows:
                    out_rows.append((sl, (P @ aa).astype(np.float64) - (Yb @ aa), (V @ a2).astype(np.float64)))
                if cols:
                    acc[3:5] += W[:2] @ P
                    acc[5:8] += W @ V
        return acc, out_rows

    k = min(usable_cores(), len(blocks))
    if k > 1 and M * n >= 1 << 20:
        parts = list(thread_pool("pass").map(work, [blocks[i::k] for i in range(k)]))
    else:
        parts = [work(blocks)]
    acc = sum(p[0] for p in parts)
    # loss = N softplus(X) - Y X, softplus(X) = -log Q + max(X, 0); sum_i Y X = a (sum theta Y - b sum Y)
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
