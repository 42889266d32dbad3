"""The real workbench in its own process in a tmux pane: keys in with ``send-keys``, the screen out with
``capture-pane`` (issue 25: several curators, each in their own ``benchloupe open``)."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

HAVE_TMUX = shutil.which("tmux") is not None


class TmuxApp:
    """``benchloupe --db DB --as ACTOR open`` (or another *command*) in a detached tmux session of *size*."""

    def __init__(self, db: Path, actor: str, size: tuple[int, int] = (80, 24), home: Path | None = None,
                 command: tuple[str, ...] = ("open",)) -> None:
        self.db, self.actor, self.size, self.command = Path(db), actor, size, command
        self.session = f"bl-{actor}-{os.getpid()}-{int(time.time() * 1000) % 100000}"
        self.home = home or self.db.parent

    def start(self) -> TmuxApp:
        # every home folder explicit: the pane's environment is the tmux server's (perhaps the user's own
        # server, started outside the suite) plus these, never the test's
        env = {"HOME": str(self.home), "XDG_DATA_HOME": str(self.home / "xdg"),
               "XDG_CONFIG_HOME": str(self.home / "xdg-config"), "XDG_CACHE_HOME": str(self.home / "xdg-cache"),
               "XDG_STATE_HOME": str(self.home / "xdg-state"),
               "BENCHLOUPE_USER": "", "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        cmd = (f"{exports} exec {shlex.quote(sys.executable)} -m benchloupe --db {shlex.quote(str(self.db))} "
               f"--as {shlex.quote(self.actor)} {shlex.join(self.command)}")
        w, h = self.size
        subprocess.run(["tmux", "new-session", "-d", "-s", self.session, "-x", str(w), "-y", str(h), cmd],
                       check=True)
        return self

    @property
    def pid(self) -> int:
        out = subprocess.run(["tmux", "display-message", "-p", "-t", self.session, "#{pane_pid}"],
                             capture_output=True, text=True, check=True)
        return int(out.stdout.strip())

    def screen(self) -> str:
        out = subprocess.run(["tmux", "capture-pane", "-p", "-t", self.session], capture_output=True, text=True)
        return out.stdout

    def wait_for(self, text: str, timeout: float = 60.0, *, gone: bool = False) -> float:
        """Seconds until *text* is on the screen (or, *gone*, is not); AssertionError with the screen after
        *timeout*."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            if (text in self.screen()) != gone:
                return time.monotonic() - t0
            time.sleep(0.05)
        raise AssertionError(f"{self.actor}: {text!r} {'still' if gone else 'not'} on screen after {timeout}s:\n"
                             + self.screen())

    def keys(self, *keys: str, pause: float = 0.15) -> None:
        for k in keys:
            subprocess.run(["tmux", "send-keys", "-t", self.session, k], check=True)
            time.sleep(0.6 if k == "Escape" else pause)

    def type(self, text: str) -> None:
        subprocess.run(["tmux", "send-keys", "-t", self.session, "-l", text], check=True)
        time.sleep(0.2)

    def stop(self) -> None:
        subprocess.run(["tmux", "kill-session", "-t", self.session], capture_output=True)

    def __enter__(self) -> TmuxApp:
        return self.start()

    def __exit__(self, *exc) -> None:
        if exc[0] is not None:
            print(f"--- {self.actor}'s screen at the failure ---\n{self.screen()}")
        self.stop()
