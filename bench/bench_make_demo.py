"""`make demo` on a fresh clone, to the first screen (issue 32 point 16: target 45 s "on a fresh clone here").

A ``git clone`` of this repository's HEAD into a temporary folder (no ``.venv``), then ``make demo`` in a detached
tmux pane (160x48, a home of its own); the pane is read every 0.1 s.  Reported: seconds from ``make demo``'s start to
the workbench's first screen (its benchmark table listing demo-math), to the showcase runs being on it (the job
line's "demo analyses: 7 showcase runs done"; only where the workbench runs them after the first screen), and until every
dependency is installed (the Makefile's ``.venv/.installed`` stamp), with the load average at each.  Prints one JSON
line; ``--keep`` leaves the clone.

    .venv/bin/python bench/bench_make_demo.py [--ref HEAD] [--timeout 600]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIRST_SCREEN = ("1 Bench", "demo-math")  # the tab line and a row of the Benchmarks table
ANALYSES_DONE = "showcase runs done"


def pane(session: str) -> str:
    return subprocess.run(["tmux", "capture-pane", "-p", "-t", session], capture_output=True, text=True).stdout


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ref", default="HEAD")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-make-demo-"))
    clone = tmp / "benchloupe"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    subprocess.run(["git", "-C", str(clone), "checkout", "-q", subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", args.ref], capture_output=True, text=True, check=True).stdout.strip()],
        check=True)
    home = tmp / "home"
    home.mkdir()
    env = {"HOME": str(home), "XDG_CACHE_HOME": str(home / ".cache"), "XDG_CONFIG_HOME": str(home / ".config"),
           "XDG_DATA_HOME": str(home / ".local/share"), "XDG_STATE_HOME": str(home / ".local/state"),
           "PIP_CONFIG_FILE": os.environ.get("PIP_CONFIG_FILE", ""), "TERM": "xterm-256color"}
    env = {k: v for k, v in env.items() if v}
    exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    session = f"bench-make-demo-{os.getpid()}"
    cmd = f"cd {shlex.quote(str(clone))} && {exports} make demo; sleep 600"
    load = {"start": os.getloadavg()[0]}
    t0 = time.monotonic()
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "160", "-y", "48", cmd], check=True)
    out: dict = {"ref": args.ref, "commit": subprocess.run(["git", "-C", str(clone), "rev-parse", "--short", "HEAD"],
                                                          capture_output=True, text=True).stdout.strip()}
    stamp = clone / ".venv" / ".installed"
    try:
        while time.monotonic() - t0 < args.timeout:
            screen = pane(session)
            now = round(time.monotonic() - t0, 1)
            if "first_screen_s" not in out and all(s in screen for s in FIRST_SCREEN):
                out["first_screen_s"], load["first_screen"] = now, os.getloadavg()[0]
            if "first_screen_s" in out and "analyses_done_s" not in out and ANALYSES_DONE in screen:
                out["analyses_done_s"], load["analyses_done"] = now, os.getloadavg()[0]
            if "installed_s" not in out and stamp.exists():
                out["installed_s"], load["installed"] = now, os.getloadavg()[0]
            if "first_screen_s" in out and "installed_s" in out and (
                    "analyses_done_s" in out or now - out["first_screen_s"] > 120):
                break
            time.sleep(0.1)
        out["screen_at_end"] = pane(session).splitlines()[:3]
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
        out["load"] = {k: round(v, 2) for k, v in load.items()}
        out["venv_mb"] = round(sum(f.stat().st_size for f in (clone / ".venv").rglob("*") if f.is_file()) / 2**20) \
            if (clone / ".venv").exists() else None
        if not args.keep:
            subprocess.run(["rm", "-rf", str(tmp)])
        else:
            out["clone"] = str(clone)
    print(json.dumps(out), flush=True)
    sys.exit(0 if "first_screen_s" in out else 1)


if __name__ == "__main__":
    main()
