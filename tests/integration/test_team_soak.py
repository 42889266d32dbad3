"""Issue 25's soak, small: 2 workbenches (headless, in their own processes) and 2 command-line processes make
random decisions and undos on the same flags at once; the audit log replayed from empty gives exactly the final
states and every saved decision is in it under its curator's name (scripts/soak_team.py; the full 4 x 1,000 run
is recorded in docs/BENCHMARKS.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.timeout(900, method="thread")
def test_four_processes_then_the_replayed_log_gives_the_final_states():
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "soak_team.py"), "--n", "40", "--flags", "12",
                          "--seed", "3"], capture_output=True, text=True, timeout=850, cwd=ROOT)
    report = json.loads(out.stdout)
    assert out.returncode == 0 and report["ok"], out.stdout[-3000:] + out.stderr[-3000:]
    assert {p["kind"] for p in report["processes"]} == {"tui", "cli"}
    assert all("error" not in p for p in report["processes"]), report["processes"]
    assert report["audit_rows"] == sum(p["saved_rows"] for p in report["processes"])
    assert report["undo_rows"] > 0  # undos happened, and replayed
