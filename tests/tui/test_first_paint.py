"""The first paint of ``benchloupe open`` on a leaderboard-sized workspace (issue 26): importing the app and
showing the Benchmarks screen's rows load neither pandas nor any screen module but the first one's, and the
Benchmarks screen counts results without building the dense response matrix. No clock: what is imported and
what is read."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import benchloupe
from benchloupe.store.db import connect

HEAVY = ("pandas", "pyarrow", "scipy", "torch", "openai", "sklearn")


def _run(code: str, tmp_path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(Path(benchloupe.__file__).resolve().parents[1])}  # this checkout
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                         cwd=tmp_path, timeout=180, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_importing_the_app_loads_no_pandas_and_no_list_screen(tmp_path):
    got = _run("""
        import json, sys
        import benchloupe.tui.app
        print(json.dumps(sorted(sys.modules)))
    """, tmp_path)
    heavy = [m for m in got if m.split(".")[0] in HEAVY or m.startswith(("benchloupe.engine", "benchloupe.jobs"))]
    assert not heavy, heavy[:10]
    screens = [m for m in got if m.startswith("benchloupe.tui.screens.") and m != "benchloupe.tui.screens.base"]
    assert screens == [], screens


def test_the_benchmarks_screen_paints_its_rows_without_pandas(showcase_db, tmp_path):
    """Up to the frame with the Benchmarks screen's rows (before the background warm-up), nothing imports pandas,
    and the counts shown are the store's (observed static cells + rewards + preferences)."""
    got = _run(f"""
        import asyncio, json, sys
        from benchloupe.tui.app import BenchloupeApp
        import benchloupe.tui.app as appmod
        appmod.WARM_UP_DELAY = 60.0  # the warm-up (which imports pandas on purpose) stays out of the way

        async def main():
            app = BenchloupeApp({str(showcase_db)!r})
            async with app.run_test(size=(160, 48)) as pilot:
                for _ in range(3000):
                    s = app.screen
                    if getattr(s, "MODE", None) == "benchmarks" and s.shown_token == s.current_token():
                        break
                    await pilot.pause(0.01)
                await pilot.pause(0.05)
                table = app.screen.query_one("#bench-table")
                rows = {{str(n): int(r) for n, r in zip(table.frame["name"], table.frame["results"])}}
                mods = sorted(sys.modules)
            return {{"rows": rows, "modules": mods}}

        print(json.dumps(asyncio.run(main())))
    """, tmp_path)
    heavy = [m for m in got["modules"] if m.split(".")[0] in HEAVY]
    assert not heavy, heavy[:10]
    from benchloupe.store import read

    conn = connect(showcase_db)
    try:
        want = {}
        for r in read.benchmark_summaries(conn).itertuples():
            want[r.name] = read.static_cell_count(conn, r.name) + r.rewards + r.preferences
    finally:
        conn.close()
    assert got["rows"] == want and want


@pytest.mark.anyio
async def test_items_says_loading_not_0_of_0_while_its_first_load_runs(demo_db):
    """A cursor message during the first load (the table mounting) redrew the status as "0 of 0 items", which
    reads as an empty benchmark for the seconds a 14,000-item load takes (seen in tmux, issue 26)."""
    from benchloupe.tui.app import BenchloupeApp
    from benchloupe.tui.widgets.safe import SafeStatic
    from tests.tui.conftest import loaded, wait_until

    app = BenchloupeApp(demo_db, benchmark="demo-math")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("2")
        await wait_until(pilot, loaded(app, "items"), what="items")
        screen = app.screen
        screen._loading, screen.shown_token = True, None  # as while the first load runs
        screen._status()
        text = str(screen.query_one("#items-status", SafeStatic).render())
        assert "loading demo-math" in text and "0 of 0" not in text
