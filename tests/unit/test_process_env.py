"""The ``benchloupe`` command's process defaults, set before numpy is first imported (benchloupe/cli/main.py):
single-threaded OpenBLAS and no MADV_HUGEPAGE on numpy's large arrays (issue 26: first touches stalled in the
kernel's compaction), each overridable from the environment."""

from __future__ import annotations

import os
import subprocess
import sys

PROBE = ("import benchloupe.cli.main, os, numpy; "
         "print(os.environ['OPENBLAS_NUM_THREADS'], os.environ['NUMPY_MADVISE_HUGEPAGE'], "
         "numpy._core.multiarray._get_madvise_hugepage())")


def _probe(**env) -> list[str]:
    base = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "NUMPY_MADVISE_HUGEPAGE")}
    out = subprocess.run([sys.executable, "-c", PROBE], env={**base, **env}, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def test_the_command_turns_numpy_hugepage_advice_off_and_blas_to_one_thread():
    assert _probe() == ["1", "0", "False"]


def test_the_users_environment_wins():
    threads, hugepage, _ = _probe(OPENBLAS_NUM_THREADS="2", NUMPY_MADVISE_HUGEPAGE="1")
    assert (threads, hugepage) == ("2", "1")
