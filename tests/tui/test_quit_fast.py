"""``q`` quits at once, always (issue 32 point 5): it waited for the engine's warm-up (6-8 s of blank terminal a
few seconds after opening) because Textual's thread workers ran in the event loop's default executor, which
``asyncio.run`` and the interpreter's exit join. The workbench's workers are daemon threads now
(tui/threads.py); only decisions still being written are waited for."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from benchloupe.tui.app import BenchloupeApp
from tests.tui.conftest import loaded, wait_until

# The whole workbench in its own process, headless, whose warm-up never ends (it waits on an event nobody
# sets: a stand-in for a warm-up still importing); the app exits once the warm-up has started. Before, the
# process never ended (the warm-up's thread was joined at exit).
SCRIPT = textwrap.dedent("""
    import sys, threading
    from benchloupe.tui.app import BenchloupeApp

    class App(BenchloupeApp):
        def _warm_up_worker(self):
            self.call_from_thread(self.exit)
            threading.Event().wait()

    app = App(sys.argv[1], benchmark="demo-math")
    app.run(headless=True, size=(80, 24))
    print("app returned", flush=True)
""")


def test_quit_does_not_wait_for_a_warm_up_thread(demo_db: Path, tmp_path: Path):
    env = {"PYTHONPATH": str(Path(__file__).resolve().parents[2]), "HOME": str(tmp_path),
           "XDG_CACHE_HOME": str(tmp_path / "cache"), "XDG_DATA_HOME": str(tmp_path / "data"),
           "XDG_CONFIG_HOME": str(tmp_path / "config"), "PATH": "/usr/bin:/bin"}
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, str(demo_db)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=120)  # not a timing: a process that waits for the thread never ends
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"the app's process waited for its warm-up thread at exit: {out!r} {err[-2000:]!r}")
    assert "app returned" in out and proc.returncode == 0, err[-2000:]


@pytest.mark.anyio
async def test_quit_still_writes_the_decision_just_made(flagged_db: Path):
    """q right after a decision: the decision is in the database (the workers being daemons does not lose it)."""
    from benchloupe.store.db import connect

    app = BenchloupeApp(flagged_db, benchmark="demo-math")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("5")
        await wait_until(pilot, loaded(app, "anomalies"), what="anomalies")
        fid = app.screen.current_id()
        await pilot.press("c", "q")
    conn = connect(flagged_db)
    try:
        assert conn.execute("SELECT state FROM flags WHERE id = ?", (fid,)).fetchone()[0] == "confirmed"
    finally:
        conn.close()
