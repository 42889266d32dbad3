"""The real terminal app in tmux at 80x24: scripts/tmux_smoke.sh presses keys and checks capture-pane text."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_tmux_smoke():
    out = subprocess.run(["bash", str(ROOT / "scripts" / "tmux_smoke.sh"), sys.executable], capture_output=True,
                         text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "tmux smoke test passed" in out.stdout
