"""The fused static pass of :mod:`benchloupe.engine.backend` on a torch device (CUDA when present, or the CPU).

Same sums, same formulas as the numpy pass; the integer cell matrix is copied to the device once per array (kept
while the caller holds it) and converted to the pass dtype one row block at a time.  Imported only when a torch
backend is chosen: importing torch costs seconds.
"""

from __future__ import annotations

import weakref

import numpy as np
import torch

from benchloupe.engine.backend_sums import PassResult, relu_sums

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
    relu = a * relu_sums(theta, b) if N is None else acc[8]
    loss = acc[0] + relu - a * (acc[2] - b * acc[1])
    g = None if g_th is None else g_th.cpu().numpy()
    h = None if h_th is None else h_th.cpu().numpy()
    if not cols:
        return PassResult(g, h, loss, *([None] * 5))
    return PassResult(g, h, loss, acc[3] - acc[1], acc[4] - acc[2], acc[5], acc[6], acc[7])


# ----------------------------------------------------------------------------- near-tie audit and coverage draws
# (engine/dense.py chooses these; float64 on the device, results moved back as numpy arrays)


def _tensor(arr: np.ndarray, device: str, dtype=None, resident: bool = False) -> torch.Tensor:
    """A device tensor of ``arr``; ``resident``: kept on the device while ``arr`` lives (:func:`_on_device`), for
    arrays that several passes read and nobody changes in place meanwhile."""
    if not arr.flags.writeable:  # torch.from_numpy warns on read-only arrays (np.load, broadcast views)
        arr = arr.copy()
    t = _on_device(arr, device) if resident else torch.from_numpy(np.ascontiguousarray(arr)).to(device)
    return t if dtype is None else t.to(dtype)


def matmul(a: np.ndarray, b: np.ndarray, device: str) -> np.ndarray:
    """``a @ b`` on the device in numpy's result dtype (integer-valued float64 operands give exact sums)."""
    dt = np.result_type(a, b)
    if dt.kind != "f":  # integer products keep numpy's integer semantics
        return a @ b
    tdt = torch.float32 if dt == np.float32 else torch.float64
    with torch.no_grad():
        return (_tensor(a, device, tdt) @ _tensor(b, device, tdt)).cpu().numpy()


def randomized_range(a: np.ndarray, q: np.ndarray, n_iter: int, float32: bool, device: str):
    """The randomized SVD's range finder and projection (dif.randomized_svd) on the device: ``n_iter``
    QR-normalised power iterations (float32 when ``float32``), the QR of ``a q`` and ``b = q^T a``, in float64.
    Returns ``(q, b)`` as numpy arrays; the small SVD of ``b`` stays on the CPU."""
    with torch.no_grad():
        A = _tensor(a, device, torch.float64)
        Ai = A.to(torch.float32) if float32 else A
        Q = torch.from_numpy(q).to(device=device, dtype=Ai.dtype)
        for _ in range(n_iter):
            Q = torch.linalg.qr(Ai @ Q, mode="reduced").Q
            Q = torch.linalg.qr(Ai.T @ Q, mode="reduced").Q
        del Ai
        Q, _r = torch.linalg.qr(A @ Q.to(torch.float64), mode="reduced")
        B = Q.T @ A
        return Q.cpu().numpy(), B.cpu().numpy()


_DIF_BLOCK_CELLS = {"cuda": 1 << 25, "cpu": 1 << 18}


def dif_newton_sums(off_s, obs_s, intercept, effects, bounds, rows, by_family: bool, device: str):
    """dif._newton_sums on the device: sums over models of p and p(1 - p) (per family block when
    ``by_family``) for the ``rows`` items, p = sigmoid(o + b + delta_f) at observed cells, in float64."""
    dev = torch.device(device)
    n_fam = len(bounds) - 1
    n_rows, n_cols = rows.size, off_s.shape[1]
    whole = n_rows == off_s.shape[0]
    with torch.no_grad():
        off = _tensor(off_s, device, torch.float64, resident=True)  # fixed during one DIF fit
        obs = None if obs_s is None else _tensor(obs_s, device, torch.float64, resident=True)
        col_family = torch.from_numpy(np.repeat(np.arange(n_fam), np.diff(bounds))).to(dev)
        sel_rows = None if whole else torch.from_numpy(rows).to(dev)
        icpt = torch.from_numpy(np.ascontiguousarray(intercept[rows])).to(dev)
        eff = torch.from_numpy(np.ascontiguousarray(effects[rows])).to(dev)
        shape = (n_rows, n_fam) if by_family else (n_rows,)
        total = torch.empty(shape, dtype=torch.float64, device=dev)
        var = torch.empty(shape, dtype=torch.float64, device=dev)
        step = max(1, _DIF_BLOCK_CELLS[dev.type] // max(1, n_cols))
        for r0 in range(0, n_rows, step):
            sl = slice(r0, min(n_rows, r0 + step))
            z = off[sl] if whole else off[sel_rows[sl]]
            z = z + icpt[sl, None]
            z += eff[sl][:, col_family]
            prob = torch.reciprocal(torch.exp(-z) + 1.0)  # the numpy pass's formula (0 or 1 where exp overflows)
            if obs is not None:
                prob *= obs[sl] if whole else obs[sel_rows[sl]]
            q = (1 - prob) * prob
            if by_family:
                for f in range(n_fam):
                    lo, hi = int(bounds[f]), int(bounds[f + 1])
                    total[sl, f] = prob[:, lo:hi].sum(dim=1)
                    var[sl, f] = q[:, lo:hi].sum(dim=1)
            else:
                total[sl] = prob.sum(dim=1)
                var[sl] = q.sum(dim=1)
        return total.cpu().numpy(), var.cpu().numpy()


def draw_metrics(b_draws: np.ndarray, target_pts: np.ndarray, k: int, locations: np.ndarray | None, device: str):
    """The C.6 per-draw metrics of coverage.uncertainty on the device: per draw (row) of difficulties, sort,
    min-max normalise, DDM against ``target_pts``, the largest gap and the top-``k`` gap sum, and (``locations``)
    the width of the empty interval containing each location.  Returns numpy arrays (ddm, max_gap, topk_sum,
    location widths or None)."""
    dev = torch.device(device)
    with torch.no_grad():
        bs = torch.sort(torch.from_numpy(np.ascontiguousarray(b_draws)).to(dev), dim=1).values
        lo = bs[:, :1]
        span = bs[:, -1:] - lo
        zs = (bs - lo) / span
        del bs
        widths = zs[:, 1:] - zs[:, :-1]
        kk = min(k, widths.shape[1])
        top = torch.topk(widths, kk, dim=1).values
        ddm = torch.mean(torch.abs(zs - torch.from_numpy(target_pts).to(dev)[None, :]), dim=1)
        loc_w = None
        if locations is not None:
            loc = (torch.from_numpy(np.asarray(locations, float)).to(dev)[None, :] - lo) / span
            last = zs.shape[1] - 1
            pos = torch.clamp(torch.searchsorted(zs, loc.contiguous(), right=True), 1, last)
            w = torch.gather(zs, 1, pos) - torch.gather(zs, 1, pos - 1)
            loc_w = torch.where((loc >= 0) & (loc <= 1), w, torch.zeros_like(w)).cpu().numpy()
        return ddm.cpu().numpy(), top.max(dim=1).values.cpu().numpy(), top.sum(dim=1).cpu().numpy(), loc_w
