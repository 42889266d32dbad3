"""The terminal UI on a leaderboard-sized workspace (issue 26), printed as JSON: first paint, every screen, and held
``j`` on the Items and Models tables.

Run it on the database ``bench/bench_scale.py`` built (5,000 x 14,000 by default; its runs give the Runs,
Anomalies and Coverage screens content).  The app runs headless at 160 x 48 in a child process (its own peak
RSS); keys are sent as the terminal driver sends them (``driver.send_message(Key)``, as bench/bench_tui_load.py
does), and a key's time runs from the send to the first frame written after its effect (``App._display``).

- ``first_paint_s``: from spawning the interpreter to the first frame after the Benchmarks screen shows its rows
  (what ``benchloupe open DB`` costs before a curator sees anything);
- ``screens``: each of keys 2-8 pressed once from the previous screen (first visit: its data loads), then the
  round again (second visit), to the frame after the screen shows its current data;
- ``held_j``: ``j`` sent at ``--rate`` keys a second for ``--seconds`` (a held key's autorepeat) on the Items and
  the Models table: the largest backlog of keys sent but not yet applied during the hold and ``drain_s``, the time
  from the last key to the cursor reaching its last row (no queued keys after release: about one frame);
  ``anomalies``: the same on the Anomalies queue for ``1.5 x`` a page of flags (it crosses a page boundary, where
  the next page is read), with ``rows_read``, the flag rows the queue read from the store for its first visit and
  for the whole hold (issue 26: a page at a time, never the 210,060 flags).

Usage: ``python bench/bench_scale_tui.py [--db DB (default: bench_scale/5000x14000/scale.db in the temporary folder)] [--benchmark sim]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SIZE = (160, 48)
SCREEN_KEYS = [("2", "items"), ("3", "models"), ("4", "runs"), ("5", "anomalies"), ("6", "reversals"),
               ("7", "coverage"), ("8", "benchfill"), ("1", "benchmarks")]


async def child(db: str, benchmark: str, spawned: float, rate: float, seconds: float) -> dict:
    sys.path.insert(0, str(ROOT))
    from textual import events

    from benchloupe.tui.app import BenchloupeApp

    app = BenchloupeApp(db, benchmark=benchmark)
    frames: list[float] = []
    display = app._display
    app._display = lambda screen, renderable: (frames.append(time.time()), display(screen, renderable))
    out: dict = {"size": list(SIZE)}

    def send(key: str) -> None:
        event = events.Key(key, key if len(key) == 1 else None)
        event.set_sender(app)
        app._driver.send_message(event)

    async def until(pred, limit: float = 60.0) -> bool:
        t = time.time()
        while not pred():
            if time.time() - t > limit:
                return False
            await asyncio.sleep(0.001)
        return True

    def shown(mode: str) -> bool:
        s = app.screen
        return getattr(s, "MODE", None) == mode and getattr(s, "shown_token", 0) == s.current_token()

    async def painted_after(t: float) -> float:
        await until(lambda: frames and frames[-1] >= t, limit=2.0)
        return next((f for f in frames if f >= t), time.time())

    async with app.run_test(size=SIZE):
        await until(lambda: shown("benchmarks") and len(app.screen.query_one("#bench-table").view) > 0)
        out["first_paint_s"] = round(await painted_after(time.time()) - spawned, 3)
        await until(lambda: "benchloupe.jobs" in sys.modules and not any(w.is_running for w in app.workers))
        screens: dict = {}
        for visit in ("first", "second"):
            for key, mode in SCREEN_KEYS:
                t = time.time()
                send(key)
                ok = await until(lambda m=mode: shown(m))
                seen = time.time()
                paint = await painted_after(seen)
                screens.setdefault(mode, {})[visit] = round(paint - t, 3) if ok else None
                await until(lambda: not any(w.is_running for w in app.workers), limit=30)
        out["screens_s"] = screens
        held = {}
        for key, mode, table_id in (("2", "items", "#items-table"), ("3", "models", "#models-table")):
            send(key)
            await until(lambda m=mode: shown(m))
            table = app.screen.query_one(table_id)
            table.focus()
            await until(lambda tb=table: app.focused is tb, limit=10)
            await asyncio.sleep(0.3)
            start = table.cursor
            n = int(rate * seconds)
            backlog = 0
            t0 = time.time()
            for k in range(n):
                send("j")
                target = t0 + (k + 1) / rate
                while time.time() < target:
                    backlog = max(backlog, k + 1 - (table.cursor - start))
                    await asyncio.sleep(0.002)
            last = time.time()
            want = min(start + n, len(table.view) - 1)
            ok = await until(lambda tb=table, w=want: tb.cursor >= w, limit=30)
            held[mode] = {"keys": n, "rate_per_s": rate, "max_backlog_keys": int(backlog),
                          "drain_s": round(time.time() - last, 3) if ok else None, "rows": len(table.view),
                          "cursor_moved": int(table.cursor - start)}
        send("5")  # the anomaly queue: held j across a page boundary (the next page is read at the boundary)
        await until(lambda: shown("anomalies"))
        queue = app.screen
        first_rows = queue.rows_read
        n = int(1.5 * queue.flags.shape[0]) if len(queue.flags) else 0
        start, backlog, t0 = queue.pos, 0, time.time()
        for k in range(n):
            send("j")
            target = t0 + (k + 1) / rate
            while time.time() < target:
                backlog = max(backlog, k + 1 - (queue.pos - start))
                await asyncio.sleep(0.002)
        last = time.time()
        want = min(start + n, queue.view_len - 1)
        ok = await until(lambda: queue.pos >= want, limit=30)
        held["anomalies"] = {"keys": n, "rate_per_s": rate, "max_backlog_keys": int(backlog),
                             "drain_s": round(time.time() - last, 3) if ok else None, "rows": queue.view_len,
                             "cursor_moved": int(queue.pos - start), "rows_read_first_visit": first_rows,
                             "rows_read_after_hold": queue.rows_read}
        out["held_j"] = held
    out["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", default=str(Path(tempfile.gettempdir()) / "bench_scale" / "5000x14000" / "scale.db"))
    ap.add_argument("--benchmark", default="sim")
    ap.add_argument("--rate", type=float, default=30.0, help="keys a second while j is held (autorepeat)")
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--spawned", type=float, default=0.0, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print(json.dumps(asyncio.run(child(a.db, a.benchmark, a.spawned, a.rate, a.seconds))))
        return
    before = os.getloadavg()
    spawned = time.time()
    proc = subprocess.run([sys.executable, __file__, "--child", "--db", a.db, "--benchmark", a.benchmark,
                           "--spawned", repr(spawned), "--rate", str(a.rate), "--seconds", str(a.seconds)],
                          capture_output=True, text=True, cwd=ROOT, env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})
    if proc.returncode:
        print(proc.stderr[-3000:], file=sys.stderr)
        sys.exit(proc.returncode)
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out.update({"db": a.db, "load_before": [round(x, 2) for x in before],
                "load_after": [round(x, 2) for x in os.getloadavg()]})
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
