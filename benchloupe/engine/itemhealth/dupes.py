"""Near-duplicate item texts: MinHash over character shingles of the normalised text, banded LSH for candidate
pairs, the exact Jaccard similarity of the shingle sets to confirm (Broder 1997; Leskovec et al., Mining of
Massive Datasets, ch. 3). Normalising: Unicode NFKC, case-folded, punctuation dropped, whitespace collapsed.
"""

from __future__ import annotations

import re
import unicodedata
import zlib

import numpy as np

_PUNCT = re.compile(r"[^\w\s]", re.UNICODE)
_SPACE = re.compile(r"\s+")
_PRIME = (1 << 61) - 1


def normalise(text: str) -> str:
    t = unicodedata.normalize("NFKC", text or "").casefold()
    return _SPACE.sub(" ", _PUNCT.sub(" ", t)).strip()


def shingles(text: str, k: int = 5) -> np.ndarray:
    """The distinct hashed character k-shingles of a normalised text (the whole text when shorter)."""
    t = text.encode("utf-8")
    if len(t) <= k:
        return np.array([zlib.crc32(t)], np.uint64) if t else np.zeros(0, np.uint64)
    return np.unique(np.array([zlib.crc32(t[i:i + k]) for i in range(len(t) - k + 1)], np.uint64))


def near_duplicates(texts: list[str], *, threshold: float = 0.8, n_ref: int = 0, k: int = 5, bands: int = 16,
                    rows: int = 4, seed: int = 0) -> list[tuple[int, int, float]]:
    """Pairs (i, j, Jaccard) with i < j and Jaccard >= *threshold*. The first *n_ref* texts are a reference
    set (items of other benchmarks): pairs among them are not reported. Empty texts are never duplicates."""
    norm = [normalise(t) for t in texts]
    sh = [shingles(t, k) for t in norm]
    rng = np.random.default_rng(seed)
    h = bands * rows
    a = rng.integers(1, _PRIME, h, dtype=np.uint64)
    b = rng.integers(0, _PRIME, h, dtype=np.uint64)
    sig = np.full((len(texts), h), np.iinfo(np.uint64).max, np.uint64)
    for i, s in enumerate(sh):
        if len(s):
            with np.errstate(over="ignore"):
                sig[i] = ((s[:, None] * a + b) % np.uint64(_PRIME)).min(0)
    cand: set[tuple[int, int]] = set()
    for band in range(bands):
        buckets: dict[bytes, list[int]] = {}
        block = sig[:, band * rows:(band + 1) * rows]
        for i in range(len(texts)):
            if len(sh[i]):
                buckets.setdefault(block[i].tobytes(), []).append(i)
        for members in buckets.values():
            if 1 < len(members) <= 200:  # a huge bucket is boilerplate, not duplicates
                for x in range(len(members)):
                    for y in range(x + 1, len(members)):
                        if members[y] >= n_ref:
                            cand.add((members[x], members[y]))
    out = []
    for i, j in sorted(cand):
        inter = len(np.intersect1d(sh[i], sh[j], assume_unique=True))
        jac = inter / (len(sh[i]) + len(sh[j]) - inter)
        if jac >= threshold:
            out.append((i, j, float(jac)))
    return out
