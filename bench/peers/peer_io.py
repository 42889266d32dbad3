"""Shared I/O for the peer runners of bench/bench_static_2pl.py.

Each runner is started as ``python run_<peer>.py MATRIX.npy OUT_DIR`` with the peers virtualenv's interpreter.
MATRIX.npy holds a models x items 0/1 matrix (uint8, no missing cells).  The runner fits a 2PL with the package's
ordinary API and writes ``theta.npy`` (one ability per model), ``b.npy`` (one difficulty per item, larger = harder)
and ``meta.json`` (the package's own fit time and settings).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np


def load() -> tuple[np.ndarray, Path]:
    """The response matrix (models x items) and the output folder from the command line."""
    matrix, out = sys.argv[1], Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    return np.load(matrix), out


def save(out: Path, theta, b, started: float, **meta) -> None:
    """Write abilities, difficulties and meta (fit seconds measured from ``started``)."""
    np.save(out / "theta.npy", np.asarray(theta, dtype=float).ravel())
    np.save(out / "b.npy", np.asarray(b, dtype=float).ravel())
    meta["fit_seconds"] = time.perf_counter() - started
    (out / "meta.json").write_text(json.dumps(meta))
