"""k-means for the estimation subsets (issue 34: ``anchor_points`` and ``curve_points`` of
:mod:`benchloupe.engine.estimate`): k-means++ seeding, then Lloyd's iterations, with Lloyd's labels bit for bit
but most distances never computed.

``compress --validate`` clusters 14,000 item curves at k = 10, 25, 50 and 100 in every fold, mostly up to the
50-iteration cap, and nearly all of that time was the distances of every item to every centre.  After the first
iterations few items change cluster, and the triangle inequality shows which cannot (Hamerly 2010, "Making k-means
even faster", SIAM SDM): per item an upper bound ``u`` on its distance to its own centre and a lower bound ``l`` on
its distance to every other one; when the centres move by ``delta``, ``u += delta[own]`` and ``l -=`` the largest
move among the others.  An item with ``u < max(l, s_own / 2)`` (``s`` a centre's distance to its nearest other
centre) keeps its centre; only the others get their distances computed, exactly as Lloyd's step computes them
(:func:`squared_distances`, the same ``argmin`` and its first-index ties).  The test keeps a margin of ``1e-9`` of
the data's diameter, orders of magnitude above the rounding of the bounds, so a skipped item is one whose computed
``argmin`` could not have moved (ties are never skipped); the centres are then the same means of the same members
in the same order (recomputed only for the clusters an item left or joined), and the labels equal plain Lloyd's
(``tests/unit/test_estimate_same_numbers.py``).
"""

from __future__ import annotations

import numpy as np

MARGIN = 1e-9  # of the data's diameter: the bound test's allowance for rounding


def squared_distances(X: np.ndarray, C: np.ndarray) -> np.ndarray:
    """``((X[:, None, :] - C[None, :, :]) ** 2).sum(axis=2)``, bit for bit, one coordinate at a time: numpy sums a
    short last axis in order below 8 terms and as ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7)), then the rest
    in order, from 8 to 15 (its pairwise sum), which this repeats on n x k planes instead of reducing an n x k x d
    block (4x faster for the curves' 9 coordinates); other widths take numpy's own sum."""
    d = X.shape[1]
    if not 1 <= d < 16:
        return ((X[:, None, :] - C[None, :, :]) ** 2).sum(axis=2)
    t = [(X[:, j, None] - C[None, :, j]) ** 2 for j in range(d)]
    if d < 8:
        out = t[0]
        for x in t[1:]:
            out += x
        return out
    out = ((t[0] + t[1]) + (t[2] + t[3])) + ((t[4] + t[5]) + (t[6] + t[7]))
    for x in t[8:]:
        out += x
    return out


def _seed_centres(X: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """k-means++: the first centre uniform, each next one drawn with probability proportional to the squared
    distance to the nearest centre so far."""
    n = len(X)
    centres = [X[rng.integers(n)]]
    d2 = ((X - centres[0]) ** 2).sum(axis=1)
    for _ in range(1, k):
        pr = d2 / d2.sum() if d2.sum() > 0 else np.full(n, 1 / n)
        centres.append(X[rng.choice(n, p=pr)])
        d2 = np.minimum(d2, ((X - centres[-1]) ** 2).sum(axis=1))
    return np.array(centres)


def _assign(X: np.ndarray, C: np.ndarray, rows: np.ndarray, labels, upper, lower, block: int) -> None:
    """Lloyd's step for ``rows``: the nearest centre (first on ties), and the bounds from the exact distances."""
    for r in range(0, len(rows), block):
        at = rows[r:r + block]
        d2 = squared_distances(X[at], C)
        j = d2.argmin(axis=1)
        labels[at] = j
        upper[at] = np.sqrt(d2[np.arange(len(at)), j])
        lower[at] = np.sqrt(np.partition(d2, 1, axis=1)[:, 1]) if C.shape[0] > 1 else np.inf


def lloyd(X: np.ndarray, k: int, seed: int, iterations: int = 50) -> np.ndarray:
    """Labels of a k-means++ seeded Lloyd clustering of the rows of X (deterministic for a seed): those of plain
    Lloyd's iterations (stopping when no label changes, or at ``iterations``), computed with Hamerly's bounds."""
    rng = np.random.default_rng(seed)
    n = len(X)
    C = _seed_centres(X, k, rng)
    block = max(1, (1 << 20) // max(1, k * X.shape[1]))  # rows of X whose distances to every centre fit 8 MB
    diameter = 2 * float(np.sqrt(((X - X.mean(axis=0)) ** 2).sum(axis=1).max(initial=0.0)))
    margin = MARGIN * diameter
    labels = np.zeros(n, np.intp)
    upper, lower = np.zeros(n), np.zeros(n)
    todo = np.arange(n)
    for it in range(iterations):
        new = labels.copy()
        _assign(X, C, todo, new, upper, lower, block)
        if it and np.array_equal(new, labels):
            break
        changed = new != labels
        touched = np.zeros(k, bool)
        touched[new[changed]] = touched[labels[changed]] = True
        labels = new
        before = C.copy()
        # each cluster's members in their order in X (a stable sort), as X[labels == j] gives them: the same means;
        # a cluster whose members did not change keeps its mean (the same rows in the same order)
        order = np.argsort(labels, kind="stable")
        bounds = np.searchsorted(labels[order], np.arange(k + 1))
        for j in range(k):
            if it and not touched[j] and bounds[j + 1] > bounds[j]:
                continue
            members = X[order[bounds[j]:bounds[j + 1]]]
            C[j] = members.mean(axis=0) if len(members) else X[rng.integers(n)]
        moved = np.sqrt(((C - before) ** 2).sum(axis=1))
        upper += moved[labels]
        if k > 1:
            top = int(moved.argmax())
            second = np.max(np.delete(moved, top))
            lower -= np.where(labels == top, second, moved[top])
            between = squared_distances(C, C)
            np.fill_diagonal(between, np.inf)
            half = 0.5 * np.sqrt(between.min(axis=1))
        else:
            half = np.full(1, np.inf)
        bound = np.maximum(lower, half[labels])
        todo = np.flatnonzero(upper + margin >= bound)
        if len(todo):  # tighten the upper bound to the distance itself, then test again
            own = np.sqrt(((X[todo] - C[labels[todo]]) ** 2).sum(axis=1))
            upper[todo] = own
            todo = todo[own + margin >= bound[todo]]
    return labels
