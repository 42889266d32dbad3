"""The key the data suggest: option choices by ability quartile.

With the chosen option of each response known (an int per cell: the index into the item's choices, -1 where
unknown), each item gets the share of each option among the models of each ability quartile. When another
option beats the key among the top quartile, that option is the suggested key ("suggested key: 3 (61 % of the
top quartile; key 5: 9 %)"). The test that makes it a finding is the association of choosing the best
distractor with the rest score (association.py; a correct item's distractors are chosen by weaker models):
the distractor with the highest point-biserial is tested one-sided, its p-value multiplied by the number of
distractors (Bonferroni, conservative for the selection).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class OptionTable:
    """``shares`` items x quartiles x options (NaN where a quartile has no known choice), ``counts`` the same
    as numbers of models, ``suggested`` the suggested option index per item (-1: none), ``top_share`` the
    suggested option's share of the top quartile, ``key_share`` the key's."""

    shares: np.ndarray
    counts: np.ndarray
    suggested: np.ndarray
    top_share: np.ndarray
    key_share: np.ndarray


def quartiles(ability: np.ndarray, n: int = 4) -> np.ndarray:
    """Quartile index 0 (weakest) .. n-1 (strongest) of each model; ties broken by order."""
    order = np.argsort(ability, kind="stable")
    q = np.empty(len(ability), int)
    q[order] = np.arange(len(ability)) * n // max(len(ability), 1)
    return q


def option_table(options: np.ndarray, key: np.ndarray, n_choices: np.ndarray, ability: np.ndarray,
                 *, n_groups: int = 4) -> OptionTable:
    """Option shares by ability group for every item at once (one matrix product per option slot)."""
    m, n = options.shape
    k = int(max(int(np.max(n_choices, initial=0)), 1))
    q = quartiles(ability, n_groups)
    onehot = np.zeros((n_groups, m))
    onehot[q, np.arange(m)] = 1.0
    counts = np.zeros((n, n_groups, k))
    for o in range(k):
        counts[:, :, o] = (onehot @ (options == o)).T
    tot = counts.sum(2, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        shares = counts / tot
    top = shares[:, -1, :]
    best = np.where(np.isnan(top).all(1), -1, np.argmax(np.nan_to_num(top, nan=-1), axis=1))
    idx = np.arange(n)
    best_share = np.where(best >= 0, top[idx, np.maximum(best, 0)], np.nan)
    has_key = (key >= 0) & (key < k)
    key_share = np.where(has_key, top[idx, np.clip(key, 0, k - 1)], np.nan)
    beats = (best >= 0) & (best != key) & (np.nan_to_num(best_share) > np.nan_to_num(key_share, nan=-1))
    return OptionTable(shares, counts, np.where(beats, best, -1), np.where(beats, best_share, np.nan), key_share)


def best_distractor(options: np.ndarray, key: np.ndarray, n_choices: np.ndarray, rest: np.ndarray,
                    corr) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(indicator matrix of choosing each item's best distractor, NaN where the option is unknown; that
    distractor's index, -1 where none; the number of distractors). *corr* is the point-biserial function."""
    m, n = options.shape
    k = int(max(int(np.max(n_choices, initial=0)), 1))
    known = options >= 0
    r = np.full((k, n), -np.inf)
    for o in range(k):
        x = np.where(known, (options == o).astype(float), np.nan)
        ro = corr(x, rest)
        valid = (o != key) & (o < n_choices) & np.isfinite(ro)
        r[o] = np.where(valid, ro, -np.inf)
    best = np.argmax(r, axis=0)
    has = np.isfinite(r[best, np.arange(n)])
    ind = np.where(known, (options == best[None, :]).astype(float), np.nan)
    ind[:, ~has] = np.nan
    n_distr = np.maximum(n_choices - (key >= 0), 1)
    return ind, np.where(has, best, -1), n_distr
