"""Near-duplicate item texts: MinHash over character shingles of the normalised text, banded LSH for candidate
pairs, the exact Jaccard similarity of the shingle sets to confirm (Broder 1997; Leskovec et al., Mining of
Massive Datasets, ch. 3). Normalising: Unicode NFKC, case-folded, punctuation dropped, whitespace collapsed.

:func:`near_duplicates` finds the pairs of one set of texts (the item audit); :class:`TextIndex` keeps texts and
answers "which kept text does this new one nearly duplicate" one text at a time (BenchFill's proposals, checked
against the workspace's items and the session's earlier proposals as they arrive).
"""

from __future__ import annotations

import re
import unicodedata
import zlib

import numpy as np

_PUNCT = re.compile(r"[^\w\s]", re.UNICODE)
_SPACE = re.compile(r"\s+")
_PRIME = (1 << 61) - 1
THRESHOLD = 0.8  # Jaccard of the shingle sets at or above which two texts are near-duplicates
BOILERPLATE = 200  # a band bucket holding more texts than this is boilerplate, not duplicates


def normalise(text: str) -> str:
    t = unicodedata.normalize("NFKC", text or "").casefold()
    return _SPACE.sub(" ", _PUNCT.sub(" ", t)).strip()


def shingles(text: str, k: int = 5) -> np.ndarray:
    """The distinct hashed character k-shingles of a normalised text (the whole text when shorter)."""
    t = text.encode("utf-8")
    if len(t) <= k:
        return np.array([zlib.crc32(t)], np.uint64) if t else np.zeros(0, np.uint64)
    return np.unique(np.array([zlib.crc32(t[i:i + k]) for i in range(len(t) - k + 1)], np.uint64))


def _hashes(seed: int, bands: int, rows: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    h = bands * rows
    return rng.integers(1, _PRIME, h, dtype=np.uint64), rng.integers(0, _PRIME, h, dtype=np.uint64)


def _signature(s: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The MinHash signature of one shingle set (all ones bits for an empty set, never bucketed)."""
    if not len(s):
        return np.full(len(a), np.iinfo(np.uint64).max, np.uint64)
    with np.errstate(over="ignore"):
        return ((s[:, None] * a + b) % np.uint64(_PRIME)).min(0)


def jaccard(x: np.ndarray, y: np.ndarray) -> float:
    inter = len(np.intersect1d(x, y, assume_unique=True))
    return inter / (len(x) + len(y) - inter)


def near_duplicates(texts: list[str], *, threshold: float = THRESHOLD, n_ref: int = 0, k: int = 5, bands: int = 16,
                    rows: int = 4, seed: int = 0) -> list[tuple[int, int, float]]:
    """Pairs (i, j, Jaccard) with i < j and Jaccard >= *threshold*. The first *n_ref* texts are a reference
    set (items of other benchmarks): pairs among them are not reported. Empty texts are never duplicates."""
    sh = [shingles(normalise(t), k) for t in texts]
    a, b = _hashes(seed, bands, rows)
    sig = np.stack([_signature(s, a, b) for s in sh]) if sh else np.zeros((0, bands * rows), np.uint64)
    cand: set[tuple[int, int]] = set()
    for band in range(bands):
        buckets: dict[bytes, list[int]] = {}
        block = sig[:, band * rows:(band + 1) * rows]
        for i in range(len(texts)):
            if len(sh[i]):
                buckets.setdefault(block[i].tobytes(), []).append(i)
        for members in buckets.values():
            if 1 < len(members) <= BOILERPLATE:
                for x in range(len(members)):
                    for y in range(x + 1, len(members)):
                        if members[y] >= n_ref:
                            cand.add((members[x], members[y]))
    out = []
    for i, j in sorted(cand):
        jac = jaccard(sh[i], sh[j])
        if jac >= threshold:
            out.append((i, j, float(jac)))
    return out


class TextIndex:
    """Texts kept under a key, queried one new text at a time: :meth:`nearest` is the kept text it nearly
    duplicates (the highest Jaccard at or above *threshold*), by the same MinHash bands as
    :func:`near_duplicates`."""

    def __init__(self, *, threshold: float = THRESHOLD, k: int = 5, bands: int = 16, rows: int = 4,
                 seed: int = 0) -> None:
        self.threshold, self.k, self.bands, self.rows = threshold, k, bands, rows
        self._a, self._b = _hashes(seed, bands, rows)
        self._keys: list = []
        self._sh: list[np.ndarray] = []
        self._buckets: list[dict[bytes, list[int]]] = [{} for _ in range(bands)]

    def __len__(self) -> int:
        return len(self._keys)

    def _bands(self, sh: np.ndarray) -> list[bytes]:
        sig = _signature(sh, self._a, self._b)
        return [sig[band * self.rows:(band + 1) * self.rows].tobytes() for band in range(self.bands)]

    def add(self, key, text: str) -> None:
        sh = shingles(normalise(text), self.k)
        i = len(self._keys)
        self._keys.append(key)
        self._sh.append(sh)
        if len(sh):
            for band, code in enumerate(self._bands(sh)):
                self._buckets[band].setdefault(code, []).append(i)

    def nearest(self, text: str, *, exclude=None) -> tuple[object, float] | None:
        """(key, Jaccard) of the kept text *text* most nearly duplicates, None when none reaches the threshold;
        a kept text under the key *exclude* (the text itself, kept earlier) is passed over."""
        sh = shingles(normalise(text), self.k)
        if not len(sh):
            return None
        cand: set[int] = set()
        for band, code in enumerate(self._bands(sh)):
            members = self._buckets[band].get(code, ())
            if len(members) <= BOILERPLATE:
                cand.update(members)
        best = None
        for i in sorted(cand):
            if exclude is not None and self._keys[i] == exclude:
                continue
            jac = jaccard(sh, self._sh[i])
            if jac >= self.threshold and (best is None or jac > best[1]):
                best = (self._keys[i], float(jac))
        return best
