"""Live views cost (issue 25): key-to-paint latency on an idle app and on one that receives a write a second
from another process, side by side, and how long another process's decision takes to reach the open card.
Prints JSON (and a Markdown table on stderr).

The real app runs headless (Textual's Pilot, 80x24) on the Anomalies queue of the demo workspace with 80
anomaly flags. Keys are sent as the terminal driver sends them (``driver.send_message``, no Pilot wait) and
timed from the key to the first frame the app writes after its effect is visible (``App._display`` is timed),
as in bench/bench_tui_load.py. ``j``/``k`` alternate, one key every ``--gap`` seconds:

- idle: nothing else writes;
- writes: a *separate process* decides a random flag (not the one on the card) once a second, through the
  store, as another curator would; the app notices each (``PRAGMA data_version``), compares its stamps and
  reloads the queue's flags;
- visible: that process decides the flag on the card; from its commit (the child prints ``time.time()`` right
  after it) to the first frame that shows "by writer" on the card.

Usage: ``python bench/bench_team.py [--keys 60] [--gap 0.25] [--visible 10]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

WRITER = """
import random, sys, time
sys.path.insert(0, sys.argv[3])
from benchloupe.store import actor, curation
from benchloupe.store.db import connect
actor.set_actor("writer")
db, mode = sys.argv[1], sys.argv[2]
rng = random.Random(0)
conn = connect(db)
ids = [int(r[0]) for r in conn.execute("SELECT id FROM flags WHERE kind = 'anomaly'")]
if mode == "once":
    fid = int(sys.argv[4])
    curation.set_flag_state(conn, fid, "unsure", "checked by the writer")
    print(time.time(), flush=True)
    sys.exit(0)
avoid = int(sys.argv[4])
while True:
    fid = rng.choice([i for i in ids if i != avoid])
    curation.set_flag_state(conn, fid, rng.choice(["confirmed", "dismissed", "unsure", "open"]))
    print(time.time(), flush=True)
    time.sleep(1.0)
"""


def p(xs: list[float], q: float) -> float | None:
    s = sorted(xs)
    return round(1000 * s[min(len(s) - 1, int(round(q * (len(s) - 1))))], 1) if s else None


def build(db: Path) -> None:
    from benchloupe.jobs import build_demo
    from tests.tui.conftest import add_flags

    build_demo(db, analyses=False)
    add_flags(db, n_anomalies=80)


async def run(keys: int, gap: float, visible: int) -> dict:
    from textual import events

    from benchloupe.tui.app import BenchloupeApp

    db = Path(tempfile.mkdtemp(prefix="benchloupe-team-bench-")) / "team.db"
    build(db)
    frames: list[float] = []
    app = BenchloupeApp(db, benchmark="demo-math")
    display = app._display
    app._display = lambda screen, renderable: (frames.append(time.perf_counter()), display(screen, renderable))
    out: dict = {"load_before": os.getloadavg()}

    async def until(pred, limit: float = 10.0) -> bool:
        t = time.perf_counter()
        while not pred():
            if time.perf_counter() - t > limit:
                return False
            await asyncio.sleep(0.001)
        return True

    def send(key: str) -> None:
        event = events.Key(key, key if len(key) == 1 else None)
        event.set_sender(app)
        app._driver.send_message(event)

    async def key_to_paint(key: str, effect) -> float | None:
        t = time.perf_counter()
        send(key)
        if not await until(effect):
            return None
        seen = time.perf_counter()
        if await until(lambda: frames and frames[-1] >= seen, 0.25):
            return next(f for f in frames if f >= seen) - t
        return max((f for f in frames if t <= f <= seen), default=seen) - t

    async def keys_for(n: int) -> list[float]:
        screen = app.screen
        got = []
        for k in range(n):
            before = screen.pos
            dt = await key_to_paint("j" if k % 2 == 0 else "k", lambda b=before: screen.pos != b)
            if dt is not None:
                got.append(dt)
            await asyncio.sleep(gap)
        return got

    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("5")
        await until(lambda: getattr(app.screen, "MODE", "") == "anomalies" and len(app.screen.view) > 0, 60)
        screen = app.screen
        await asyncio.sleep(1.0)
        await keys_for(6)  # warm
        idle = await keys_for(keys)
        reloads0 = screen.live_reloads
        card = screen.current_id()
        writer = subprocess.Popen([sys.executable, "-c", WRITER, str(db), "loop", str(ROOT), str(card)],
                                  stdout=subprocess.PIPE, text=True)
        try:
            await asyncio.sleep(1.5)
            busy = await keys_for(keys)
        finally:
            writer.terminate()
            writer.wait(timeout=30)
        writes = len(writer.stdout.read().split())
        live_reloads = screen.live_reloads - reloads0
        delays = []
        for _ in range(visible):
            await asyncio.sleep(0.5)
            fid = screen.current_id()
            proc = subprocess.run([sys.executable, "-c", WRITER, str(db), "once", str(ROOT), str(fid)],
                                  capture_output=True, text=True)
            committed = float(proc.stdout.split()[0])
            committed_perf = time.perf_counter() - (time.time() - committed)
            shown = lambda: "by writer" in str(screen.query_one("#queue-detail").render())  # noqa: E731
            if not await until(shown, 30):
                continue
            seen = time.perf_counter()
            await until(lambda s=seen: frames and frames[-1] >= s, 0.5)
            paint = next((f for f in frames if f >= seen), seen)
            delays.append(max(0.0, paint - committed_perf))
            send("j")
            await asyncio.sleep(0.3)
    out.update({
        "keys": keys, "gap_s": gap,
        "idle": {"p50_ms": p(idle, 0.5), "p95_ms": p(idle, 0.95), "mean_ms": round(1000 * sum(idle) / len(idle), 1),
                 "samples": len(idle)},
        "writes_1_per_s": {"p50_ms": p(busy, 0.5), "p95_ms": p(busy, 0.95),
                           "mean_ms": round(1000 * sum(busy) / len(busy), 1), "samples": len(busy),
                           "writes": writes, "live_reloads": live_reloads},
        "foreign_decision_to_card": {"p50_ms": p(delays, 0.5), "max_ms": p(delays, 1.0), "samples": len(delays)},
        "load_after": os.getloadavg()})
    out["ratio_p50"] = round(out["writes_1_per_s"]["p50_ms"] / out["idle"]["p50_ms"], 2)
    out["ratio_mean"] = round(out["writes_1_per_s"]["mean_ms"] / out["idle"]["mean_ms"], 2)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", type=int, default=60)
    ap.add_argument("--gap", type=float, default=0.25)
    ap.add_argument("--visible", type=int, default=10)
    args = ap.parse_args()
    out = asyncio.run(run(args.keys, args.gap, args.visible))
    print(json.dumps(out, indent=1))
    i, w, v = out["idle"], out["writes_1_per_s"], out["foreign_decision_to_card"]
    print("| scenario | key p50 | key p95 | key mean | notes |\n|---|---|---|---|---|\n"
          f"| idle | {i['p50_ms']} ms | {i['p95_ms']} ms | {i['mean_ms']} ms | {i['samples']} keys |\n"
          f"| a write a second from another process | {w['p50_ms']} ms | {w['p95_ms']} ms | {w['mean_ms']} ms | "
          f"{w['samples']} keys, {w['writes']} writes, {w['live_reloads']} live reloads |\n"
          f"| another process's decision to the open card | {v['p50_ms']} ms (p50) | {v['max_ms']} ms (max) | | "
          f"{v['samples']} decisions |", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
