"""benchloupe's static 2PL under the peers' protocol (``python run_ours.py MATRIX.npy OUT_DIR``), run with the
project's interpreter: whole process (imports, loading the matrix, the fit, writing the outputs) against a peer's
whole process, and ``fit_seconds`` against the peer's own fit time (issue 16: compare like with like)."""

import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # the benchloupe command's defaults (benchloupe/cli/main.py)
os.environ.setdefault("NUMPY_MADVISE_HUGEPAGE", "0")
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # this checkout, before any installed benchloupe

import numpy as np  # noqa: E402
import peer_io  # noqa: E402

from benchloupe.engine.joint import JointConfig, StaticData, fit_joint  # noqa: E402

Y, out = peer_io.load()
started = time.perf_counter()
result = fit_joint(StaticData(Y, np.ones(Y.shape, dtype=bool)), None, JointConfig(mode="static"))
peer_io.save(out, result.theta, result.b_static, started, method="DualEval static 2PL, block-coordinate Newton",
             provenance=result.provenance, objective=float(result.objective))
