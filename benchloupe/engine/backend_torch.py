"""The fused static pass of :mod:`benchloupe.engine.backend` on a torch device (CUDA when present, or the CPU).

Same sums, same formulas as the numpy pass; the integer cell matrix is copied to the device once per array (kept
while the caller holds it) and converted to the pass dtype one row block at a time.  Imported only when a torch
backend is chosen: importing torch costs seconds.
"""

from __future__ import annotations

import weakref

import numpy as np
import torch

from benchloupe.engine.backend import PassResult, _relu_sums

_BLOCK_CELLS_CUDA = 1 << 26  # 64 M cells per block on a GPU
_BLOCK_CELLS_CPU = 1 << 20
_resident: dict[int, tuple[weakref.ref, torch.Tensor]] = {}


def _on_device(arr: np.ndarray, device: str) -> torch.Tensor:
    """The device copy of an integer matrix, cached while ``arr`` lives (one transfer per fit, not per pass)."""
    key = id(arr)
    hit = _resident.get(key)
    if hit is not None and hit[0]() is arr and hit[1].device.type == device:
        return hit[1]
    t = torch.from_numpy(np.ascontiguousarray(arr)).to(device)
    try:
        ref = weakref.ref(arr, lambda _r, k=key, cache=_resident: cache.pop(k, None))
    except TypeError:  # a view without weakref support: no caching
        return t
    _resident[key] = (ref, t)
    return t


def fused_pass(Y, N, theta, b, a, *, rows: bool, cols: bool, loss_only: bool, device: str, dtype: str,
               weights=None) -> PassResult:
    dt = torch.float32 if dtype == "float32" else torch.float64
    dev = torch.device(device)
    Yd = _on_device(Y, device)
    Nd = None if N is None else _on_device(N, device)
    M, n = Y.shape
    th = torch.as_tensor(theta, dtype=dt, device=dev)
    bb = torch.as_tensor(b, dtype=dt, device=dev)
    aa = torch.as_tensor(a, dtype=dt, device=dev)
    aw = aa if weights is None else torch.as_tensor(a * weights, dtype=dt, device=dev)  # per-model sums' factors
    a2 = aw * aa
    rows = rows and not loss_only
    cols = cols and not loss_only
    cells = _BLOCK_CELLS_CUDA if dev.type == "cuda" else _BLOCK_CELLS_CPU
    step = max(8, cells // max(1, n))
    acc = torch.zeros((9, n), dtype=torch.float64, device=dev)
    g_th = torch.empty(M, dtype=torch.float64, device=dev) if rows else None
    h_th = torch.empty(M, dtype=torch.float64, device=dev) if rows else None
    with torch.no_grad():
        for r0 in range(0, M, step):
            t = th[r0:r0 + step]
            Z = (bb[None, :] - t[:, None]) * aa  # -X
            Yb = Yd[r0:r0 + step].to(dt)
            Nb = None if Nd is None else Nd[r0:r0 + step].to(dt)
            if Nb is not None:
                acc[8] -= (torch.clamp(Z, max=0.0) * Nb).sum(0, dtype=torch.float64)
            P = torch.sigmoid(-Z)
            C = 1.0 - P
            V = P * C
            L = torch.log(torch.maximum(P, C))
            W = torch.stack([torch.ones_like(t), t, t * t])
            if Nb is not None:
                L *= Nb
                P *= Nb
                V *= Nb
            acc[0] -= L.sum(0, dtype=torch.float64)
            acc[1:3] += (W[:2] @ Yb).to(torch.float64)
            if rows:
                g_th[r0:r0 + step] = (P @ aw).to(torch.float64) - (Yb @ aw).to(torch.float64)
                h_th[r0:r0 + step] = (V @ a2).to(torch.float64)
            if cols:
                acc[3:5] += (W[:2] @ P).to(torch.float64)
                acc[5:8] += (W @ V).to(torch.float64)
    acc = acc.cpu().numpy()
    relu = a * _relu_sums(theta, b) if N is None else acc[8]
    loss = acc[0] + relu - a * (acc[2] - b * acc[1])
    g = None if g_th is None else g_th.cpu().numpy()
    h = None if h_th is None else h_th.cpu().numpy()
    if not cols:
        return PassResult(g, h, loss, *([None] * 5))
    return PassResult(g, h, loss, acc[3] - acc[1], acc[4] - acc[2], acc[5], acc[6], acc[7])
