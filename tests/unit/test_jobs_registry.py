"""The analyses are listed in one order whatever order their modules were first imported in (the Runs screen and
its snapshot list them; the registry loads area modules lazily, as commands ask for them)."""

import functools
import subprocess
import sys

import pytest


@functools.cache  # the reference order ("calibration" first) is one process per worker, not one per case
def _order(first: str) -> tuple[str, ...]:
    code = (f"import benchloupe.jobs.{first}; from benchloupe import jobs; "
            "print(' '.join(jobs.ANALYSES))")
    return tuple(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                check=True).stdout.split())


@pytest.mark.parametrize("first", ["coverage", "audit", "diagnostics"])
def test_analysis_order_does_not_depend_on_import_order(first):
    order = _order(first)
    assert order == _order("calibration")
    assert order[:3] == ("joint", "static", "arena") and "neartie" in order and "coverage" in order
