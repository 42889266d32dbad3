"""Key-to-paint latency while a job runs (issue 11, the blocker), printed as JSON.

The real app runs headless (Textual's Pilot, 80x24; ``pilot.press`` waits for the whole process's CPU to go
idle before returning, so under a CPU-bound job the figures include up to ~1 s per key of harness wait: an upper
bound on what a terminal user sees) over the fake-LLM world of tests/fill_world.py. For each
scenario, switching screens (``2``/``3``) and moving the cursor (``j``) are timed from the key press to the first
frame the app writes after the key's effect is visible (``App._display`` is timed):

- idle: no job;
- benchfill: a BenchFill session against the local fake OpenAI-compatible server with no delay (tests/fake_llm.py),
  the worst case for progress events;
- fit: a static fit with Adam and a huge epoch budget (cancelled at the end).

Also: the job line's lag behind the job (the oldest progress report not yet shown, sampled after every key, and
from the worker returning to the job line saying so), the number of progress reports and job-line paints, and the
process's resident memory at the start and end of each scenario.

Usage: ``python bench/bench_tui_load.py [--keys 20] [--rounds 3]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def p95(xs: list[float]) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(0.95 * (len(s) - 1))))] if s else float("nan")


class Reports:
    """Every progress report a job made, timestamped, to measure how far the job line lags behind."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self.stages: list[str] = []
        self.returned: float | None = None
        self.lock = threading.Lock()

    def wrap(self, fn):
        def run(progress, cancel):
            def report(done, total, stage):
                with self.lock:
                    self.times.append(time.perf_counter())
                    self.stages.append(stage)
                progress(done, total, stage)
            try:
                return fn(report, cancel)
            finally:
                self.returned = time.perf_counter()
        return run

    def lag(self, shown_stage: str) -> float:
        """Seconds since the first report newer than the one on the job line (0 when it shows the latest)."""
        now = time.perf_counter()
        with self.lock:
            if not self.stages:
                return 0.0
            try:
                k = len(self.stages) - 1 - self.stages[::-1].index(shown_stage)
            except ValueError:
                return now - self.times[0]
            return 0.0 if k == len(self.stages) - 1 else now - self.times[k + 1]


async def measure(app, pilot, n: int, frames: list[float], reports: Reports | None) -> dict:
    async def until(pred, limit=120.0):
        t = time.perf_counter()
        while not pred():
            if time.perf_counter() - t > limit:
                raise TimeoutError("the app stopped answering")
            await asyncio.sleep(0.001)

    async def key_to_paint(key: str, effect) -> float:
        t = time.perf_counter()
        await pilot.press(key)  # NB: pilot.press also waits (up to ~1 s) for the process's CPU to go idle
        await until(effect)
        seen = time.perf_counter()
        try:  # the frame that shows the effect: the next one, or (if it was painted before we looked) the last
            await until(lambda: frames and frames[-1] >= seen, limit=0.25)
            return next(f for f in frames if f >= seen) - t
        except TimeoutError:
            return (max((f for f in frames if t <= f <= seen), default=seen)) - t

    switch, cursor, lags = [], [], []
    for _ in range(n):
        for key, mode in (("3", "models"), ("2", "items")):
            switch.append(await key_to_paint(key, lambda m=mode: getattr(app.screen, "MODE", "") == m))
        await until(lambda: app.screen.shown_token == app.screen.current_token())
        table = app.screen.query_one("#items-table")
        before = table.cursor
        cursor.append(await key_to_paint("j", lambda b=before, t=table: t.cursor != b))
        if reports is not None and app.job.running:
            lags.append(reports.lag(app.job.stage))
    return {"switch_p50_ms": 1000 * sorted(switch)[len(switch) // 2], "switch_p95_ms": 1000 * p95(switch),
            "cursor_p50_ms": 1000 * sorted(cursor)[len(cursor) // 2], "cursor_p95_ms": 1000 * p95(cursor),
            "job_line_lag_max_s": max(lags) if lags else None, "lag_samples": len(lags)}


async def main(keys: int, rounds: int) -> dict:
    from benchloupe.engine.benchfill import BenchFillConfig
    from benchloupe.jobs import ANALYSES
    from benchloupe.jobs import fill as jobs_fill
    from benchloupe.tui.app import BenchloupeApp
    from benchloupe.tui.jobs_ui import analysis_job
    from benchloupe.tui.screens.runs import default_config
    from tests.fake_llm import KEY, FakeLLM
    from tests.fill_world import store_world

    fake = FakeLLM().start()
    tmp = Path(tempfile.mkdtemp())
    db = tmp / "load.db"
    bench = store_world(fake, db)
    os.environ["FAKE_LLM_KEY"] = KEY
    common = {"base_url": fake.base_url, "api_key_env": "FAKE_LLM_KEY", "timeout": 5.0, "max_retries": 3}
    jobs_fill.set_endpoint(db, "rewriter", model="rewriter", **common)
    jobs_fill.set_endpoint(db, "judge", model="judge", **common)
    for j in range(12):
        jobs_fill.set_endpoint(db, "annotator", name=f"annot-{j}", model=f"annot-{j}", trials=2, **common)

    out: dict = {"load_average_start": os.getloadavg()}
    app = BenchloupeApp(db, benchmark=bench)
    frames: list[float] = []
    display = app._display
    app._display = lambda screen, renderable: (frames.append(time.perf_counter()), display(screen, renderable))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("2")
        while not (getattr(app.screen, "MODE", "") == "items" and app.screen.shown_token == app.screen.current_token()
                   and "benchloupe.jobs" in sys.modules):
            await pilot.pause(0.01)

        rss0 = rss_mb()
        out["idle"] = await measure(app, pilot, keys, frames, None)
        out["idle"]["rss_mb"] = [round(rss0), round(rss_mb())]

        # BenchFill against the local endpoint, no delay
        reports = Reports()
        cfg = BenchFillConfig(max_rounds=rounds)

        def fill_job(progress, cancel):
            return jobs_fill.start_fill(db, bench, jobs_fill.FillOptions(1, "auto", False), config=cfg,
                                        progress=progress, cancel=cancel)

        rss0, paints0 = rss_mb(), app.job_paints
        t0 = time.perf_counter()
        app.start_job("BenchFill bench", reports.wrap(fill_job))
        res = {"rounds": rounds}
        samples = []
        while app.job.running:
            samples.append(await measure(app, pilot, 2, frames, reports))
        end_seen = time.perf_counter()
        res["session_s"] = (reports.returned or end_seen) - t0
        res["end_lag_s"] = end_seen - (reports.returned or end_seen)
        res["outcome"] = app.job.outcome
        res["progress_reports"] = len(reports.times)
        res["job_line_paints"] = app.job_paints - paints0
        res["rss_mb"] = [round(rss0), round(rss_mb())]
        for k in ("switch_p95_ms", "cursor_p95_ms"):
            res[k] = max(s[k] for s in samples) if samples else None
        res["switch_p50_ms"] = sorted(s["switch_p50_ms"] for s in samples)[len(samples) // 2] if samples else None
        res["job_line_lag_max_s"] = max((s["job_line_lag_max_s"] or 0) for s in samples) if samples else None
        res["key_samples"] = 3 * 2 * len(samples)
        out["benchfill"] = res

        # a long fit
        reports = Reports()
        conf = default_config(ANALYSES["static"])
        import dataclasses
        names = {f.name for f in dataclasses.fields(conf)}
        if "optimizer" in names:
            conf = dataclasses.replace(conf, optimizer="adam", epochs=10**8)
        rss0, paints0 = rss_mb(), app.job_paints
        app.start_job("fit bench", reports.wrap(analysis_job(db, "static", bench, conf)))
        while not reports.times:
            await pilot.pause(0.05)
        res = await measure(app, pilot, keys, frames, reports)
        res["progress_reports"] = len(reports.times)
        res["job_line_paints"] = app.job_paints - paints0
        res["rss_mb"] = [round(rss0), round(rss_mb())]
        app.action_cancel_job()
        while app.job.running:
            await pilot.pause(0.05)
        res["outcome"] = app.job.outcome
        out["fit"] = res
    fake.stop()
    out["load_average_end"] = os.getloadavg()
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--keys", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    print(json.dumps(asyncio.run(main(a.keys, a.rounds)), indent=1, default=str))
