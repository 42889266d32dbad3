"""Reliability: Cronbach's alpha with the standard error of measurement of the summed score (models that
answered every item), and the marginal reliability of the EAP abilities (var(EAP) / (var(EAP) + mean
posterior variance), mirt's empirical reliability) with its SEM on the ability scale."""

from __future__ import annotations

import numpy as np


def cronbach(y: np.ndarray) -> dict:
    """``alpha``, ``sem`` (summed-score units), ``n_models`` (complete rows), ``n_items``; NaN when fewer than
    two items or three complete rows."""
    yc = y[~np.isnan(y).any(1)]
    k = y.shape[1]
    if k < 2 or len(yc) < 3:
        return {"alpha": float("nan"), "sem": float("nan"), "n_models": int(len(yc)), "n_items": int(k)}
    tot_var = yc.sum(1).var(ddof=1)
    alpha = k / (k - 1) * (1 - yc.var(0, ddof=1).sum() / tot_var) if tot_var > 0 else float("nan")
    sem = float(np.sqrt(tot_var * max(1 - alpha, 0))) if np.isfinite(alpha) else float("nan")
    return {"alpha": float(alpha), "sem": sem, "n_models": int(len(yc)), "n_items": int(k)}


def marginal(theta: np.ndarray, theta_sd: np.ndarray) -> dict:
    """``marginal`` reliability and ``sem_theta`` (root mean posterior variance) of EAP abilities."""
    err = float(np.mean(theta_sd**2)) if len(theta_sd) else float("nan")
    var = float(np.var(theta)) if len(theta) else float("nan")
    rel = var / (var + err) if var + err > 0 else float("nan")
    return {"marginal": rel, "sem_theta": float(np.sqrt(err))}
