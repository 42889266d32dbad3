"""Key-to-paint latency while a job runs (issue 11, the blocker), printed as JSON.

The real app runs headless (Textual's Pilot, 80x24) over the fake-LLM world of tests/fill_world.py; the fake
OpenAI-compatible server runs in a *separate process* (``--serve``, started by this script), as a real endpoint
would, and builds the database there (its hidden world must know the items). Jobs run as the app runs them: in
a child process (benchloupe/jobs/process.py). For each scenario, switching screens (``3``/``2``) and moving the
cursor (``down``/``up`` in turn) are timed from the key press to the first frame the app writes after the key's effect is visible
(``App._display`` is timed). Keys are sent as the terminal driver sends them (``driver.send_message(Key)``),
not through ``pilot.press``: Pilot also waits for the app process's CPU to go idle (up to 1 s), which the job
line's own repaints and the progress relay keep from returning at once, so it measured the harness (the
earlier figures in docs/BENCHMARKS.md include it; a cursor move "took" 250 ms under a fit with it, 1/PROGRESS_HZ).

- idle: no job;
- benchfill: a BenchFill session against the fake server with no delay (the worst case for progress events),
  measured until it ends or for at most ``--fill-seconds`` (then cancelled);
- fit: a static fit with Adam and an epoch budget it cannot finish (CPU-bound all along), measured for
  ``--fit-seconds``, then cancelled.

Also: the job line's lag (how long the oldest progress report not yet on the job line has waited, sampled
after every key: ``ProgressSlot.lag``; and from the child's answer to the job line saying so), the number of
progress reports and job-line paints, the app process's resident memory at the start and end of each scenario
and the job process's at its end. Every wait is bounded; the whole run takes about a minute.

Why the earlier version printed nothing in 10 minutes: its BenchFill scenario measured ``while app.job.running``
with no time cap, the session's thread, the fake server's threads and the UI all shared one GIL, and each key
paid Pilot's CPU-idle wait (~1 s) while the process was busy; on a loaded machine the session (12 annotators x 2
trials x 3 rounds) did not end within the 10 minutes.

``--thread`` runs the jobs as the app did before (a thread worker of the app process) for a comparison.

Usage: ``python bench/bench_tui_load.py [--keys 15] [--rounds 3] [--fill-seconds 90] [--fit-seconds 20] [--thread]``
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def rss_mb(pid: int | str = "self") -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024)
    except OSError:
        return None
    return None


def p50(xs: list[float]) -> float | None:
    return round(1000 * sorted(xs)[len(xs) // 2]) if xs else None


def p95(xs: list[float]) -> float | None:
    s = sorted(xs)
    return round(1000 * s[min(len(s) - 1, int(round(0.95 * (len(s) - 1))))]) if s else None


def serve(db: str) -> None:
    """The fake endpoint's process: build the world and the database, print the URL, serve until stdin closes."""
    from tests.fake_llm import FakeLLM
    from tests.fill_world import store_world

    fake = FakeLLM().start()
    bench = store_world(fake, db)
    print(json.dumps({"base_url": fake.base_url, "benchmark": bench}), flush=True)
    sys.stdin.read()
    fake.stop()


class Keys:
    """Key-to-paint timings and job-line lags of one scenario."""

    def __init__(self, app, pilot, frames: list[float]) -> None:
        self.app, self.pilot, self.frames = app, pilot, frames
        self.switch: list[float] = []
        self.cursor: list[float] = []
        self.lags: list[float] = []
        self.timeouts: list[str] = []

    async def until(self, pred, limit: float = 30.0) -> bool:
        t = time.perf_counter()
        while not pred():
            if time.perf_counter() - t > limit:
                return False
            await asyncio.sleep(0.001)
        return True

    def send_key(self, key: str) -> None:
        """What the terminal driver does with a key it read: one Key event to the app (no Pilot wait)."""
        from textual import events

        event = events.Key(key, key if len(key) == 1 else None)
        event.set_sender(self.app)
        self.app._driver.send_message(event)

    async def key_to_paint(self, key: str, effect) -> float | None:
        t = time.perf_counter()
        self.send_key(key)
        if not await self.until(effect, limit=10.0):
            self.timeouts.append(f"{key} on {getattr(self.app.screen, 'MODE', type(self.app.screen).__name__)}")
            return None
        seen = time.perf_counter()
        frames = self.frames
        # the frame that shows the effect: the next one, or (if it was painted before we looked) the last
        if await self.until(lambda: frames and frames[-1] >= seen, limit=0.25):
            return next(f for f in frames if f >= seen) - t
        return max((f for f in frames if t <= f <= seen), default=seen) - t

    async def round(self) -> None:
        app = self.app
        for key, mode in (("3", "models"), ("2", "items")):
            dt = await self.key_to_paint(key, lambda m=mode: getattr(app.screen, "MODE", "") == m)
            if dt is not None:
                self.switch.append(dt)
        await self.until(lambda: app.screen.shown_token == app.screen.current_token())
        table = app.screen.query_one("#items-table")
        await self.until(lambda: app.focused is table, limit=10.0)
        before = table.cursor
        key = "down" if len(self.cursor) % 2 == 0 else "up"  # back and forth: never stuck at the last row
        dt = await self.key_to_paint(key, lambda: table.cursor != before)
        if dt is not None:
            self.cursor.append(dt)
        if app.job.running:
            self.lags.append(app._progress.lag())

    def summary(self) -> dict:
        return {"switch_p50_ms": p50(self.switch), "switch_p95_ms": p95(self.switch),
                "cursor_p50_ms": p50(self.cursor), "cursor_p95_ms": p95(self.cursor),
                "key_samples": len(self.switch) + len(self.cursor), "keys_timed_out": self.timeouts,
                "job_line_lag_max_s": round(max(self.lags), 3) if self.lags else None,
                "lag_samples": len(self.lags)}


async def run_job(app, pilot, frames, title: str, spec, rounds: int, seconds: float) -> dict:
    """Start *spec*, press keys for *rounds* rounds or *seconds* s (or until it ends), then cancel it."""
    rss0, paints0 = rss_mb(), app.job_paints
    t0 = time.perf_counter()
    app.start_job(title, spec)
    keys = Keys(app, pilot, frames)
    await keys.until(lambda: app.job.stage != "" or not app.job.running, limit=60)
    n = 0
    while app.job.running and n < rounds and time.perf_counter() - t0 < seconds:
        await keys.round()
        n += 1
    job_rss = rss_mb(app.job_process.pid) if app.job_process else None
    cancelled = app.job.running
    if cancelled:
        app.action_cancel_job()
        await keys.until(lambda: not app.job.running, limit=60)
    res = keys.summary()
    res.update({"wall_s": round(time.perf_counter() - t0, 1), "cancelled_by_bench": cancelled,
                "outcome": app.job.outcome, "progress_reports": app._progress.calls,
                "job_line_paints": app.job_paints - paints0,
                "end_lag_s": None if app.job_end_lag is None else round(app.job_end_lag, 3),
                "rss_mb": [rss0, rss_mb()], "job_rss_mb": job_rss})
    return res


def thread_app_class():
    """``--thread``: the app as it was before jobs moved to a child process (the job's function in a thread
    worker of the app, sharing its GIL), for a comparison under the same measurement."""
    import threading

    from textual import work

    from benchloupe.tui.app import BenchloupeApp, ProgressSlot
    from benchloupe.tui.widgets.jobbar import JobState

    class ThreadJobApp(BenchloupeApp):
        def start_job(self, title, spec, on_done=None) -> bool:
            self._cancel, self._on_done, self._progress = threading.Event(), on_done, ProgressSlot()
            self.job_process, self.job_end_lag = None, None
            self.job = JobState(title=title, running=True, started=time.monotonic())
            self._show_job(bindings=True)
            self._thread_job(spec, self._cancel, self._progress)
            return True

        @work(thread=True, exclusive=True, group="job", exit_on_error=False)
        def _thread_job(self, spec, cancel, slot):
            return spec.fn(slot.put, cancel, *spec.args, **spec.kwargs)

    return ThreadJobApp


async def main(keys: int, rounds: int, fill_seconds: float, fit_seconds: float, thread: bool = False) -> dict:
    from benchloupe.engine.benchfill import BenchFillConfig
    from benchloupe.jobs import ANALYSES
    from benchloupe.jobs import fill as jobs_fill
    from benchloupe.tui.app import BenchloupeApp
    from benchloupe.tui.jobs_ui import analysis_job, fill_job
    from benchloupe.tui.screens.runs import default_config
    from tests.fake_llm import KEY

    tmp = Path(tempfile.mkdtemp())
    db = tmp / "load.db"
    # a real endpoint is remote: its CPU is not the app's machine's; at nice 10 the fake one yields to the app
    server = subprocess.Popen([sys.executable, __file__, "--serve", str(db)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, cwd=ROOT, preexec_fn=lambda: os.nice(10))
    try:
        world = json.loads(server.stdout.readline())
        bench = world["benchmark"]
        os.environ["FAKE_LLM_KEY"] = KEY
        common = {"base_url": world["base_url"], "api_key_env": "FAKE_LLM_KEY", "timeout": 5.0, "max_retries": 3}
        jobs_fill.set_endpoint(db, "rewriter", model="rewriter", **common)
        jobs_fill.set_endpoint(db, "judge", model="judge", **common)
        for j in range(12):
            jobs_fill.set_endpoint(db, "annotator", name=f"annot-{j}", model=f"annot-{j}", trials=2, **common)

        out: dict = {"load_average_start": [round(x, 2) for x in os.getloadavg()], "cores": os.cpu_count(),
                     "jobs": "thread" if thread else "child process"}
        app = (thread_app_class() if thread else BenchloupeApp)(db, benchmark=bench)
        frames: list[float] = []
        display = app._display
        app._display = lambda screen, renderable: (frames.append(time.perf_counter()), display(screen, renderable))
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press("2")
            probe = Keys(app, pilot, frames)
            await probe.until(lambda: getattr(app.screen, "MODE", "") == "items"
                              and app.screen.shown_token == app.screen.current_token()
                              and "benchloupe.jobs" in sys.modules, limit=60)

            rss0 = rss_mb()
            idle = Keys(app, pilot, frames)
            for _ in range(keys):
                await idle.round()
            out["idle"] = {**idle.summary(), "rss_mb": [rss0, rss_mb()]}

            options = jobs_fill.FillOptions(1, "auto", False)
            out["benchfill"] = await run_job(app, pilot, frames, "BenchFill bench",
                                             fill_job(db, bench, options, BenchFillConfig(max_rounds=rounds)),
                                             10**6, fill_seconds)

            conf = default_config(ANALYSES["static"])
            conf = dataclasses.replace(conf, optimizer="adam", epochs=10**8)
            out["fit"] = await run_job(app, pilot, frames, "fit bench", analysis_job(db, "static", bench, conf),
                                       10**6, fit_seconds)
    finally:
        server.stdin.close()
        server.wait(timeout=10)
    out["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--keys", type=int, default=15, help="rounds of (3, 2, down/up) keys idle")
    ap.add_argument("--rounds", type=int, default=3, help="BenchFill rounds")
    ap.add_argument("--fill-seconds", type=float, default=90.0)
    ap.add_argument("--fit-seconds", type=float, default=20.0)
    ap.add_argument("--thread", action="store_true", help="run the jobs in a thread of the app, as before")
    ap.add_argument("--serve", metavar="DB", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.serve:
        serve(a.serve)
    else:
        print(json.dumps(asyncio.run(main(a.keys, a.rounds, a.fill_seconds, a.fit_seconds, a.thread)), indent=1,
                         default=str))
