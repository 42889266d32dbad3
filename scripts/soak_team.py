"""Soak of several curators on one database (issue 25): processes making random decisions and undos on the same
flags at once, then the audit log replayed from empty must give exactly the final states, with no decision
missing. Prints one JSON object; exit 1 when the replay disagrees.

- ``--tui`` processes each run the real workbench (headless, Textual's Pilot, 80x24) on the Anomalies queue and
  send random keys as the terminal driver does: c d u o (decide), j k (move), z (undo), e + a note + enter,
  space space then a decision (a batch of two);
- ``--cli`` processes each run the ``benchloupe`` command line (``cli.main.main``, the code of the command, in
  that process; every 50th as a separate ``python -m benchloupe`` process): ``flags --set ID STATE`` with or
  without ``--note`` and ``--expect`` (the state it read just before), and ``flags --undo``.

Every process has its own curator name (``--as``). Each counts the flag writes it made that were saved (audit
rows it must find under its name) and the ones refused (another curator changed the flag first: expected).

Usage: ``python scripts/soak_team.py [--n 1000] [--tui 2] [--cli 2] [--flags 40] [--seed 0]``
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
STATES = ("open", "confirmed", "dismissed", "unsure")


def setup(db: Path, n_flags: int) -> None:
    from benchloupe.jobs import build_demo
    from benchloupe.store import curation
    from benchloupe.store.db import connect
    from tests.tui.conftest import add_flags

    build_demo(db, analyses=False)
    add_flags(db, n_anomalies=n_flags)
    conn = connect(db)
    try:
        curation.put_setting(conn, "tui.last_benchmark", "demo-math")
    finally:
        conn.close()


def _count_saved() -> dict:
    """Count, in this process, the flag rows every successful store write saved (wraps the store function the
    faces call; the soak's own bookkeeping, not a change to what is written)."""
    from benchloupe.store import curation

    counts = {"rows": 0, "refused": 0}
    real = curation.set_flag_states

    def counted(conn, changes, **kw):
        try:
            out = real(conn, changes, **kw)
        except curation.Conflict:
            counts["refused"] += 1
            raise
        counts["rows"] += len(changes)
        return out

    curation.set_flag_states = counted
    return counts


def cli_worker(db: str, name: str, n: int, seed: int) -> dict:
    import contextlib
    import io

    import numpy as np

    from benchloupe.cli.main import main
    from benchloupe.store.db import connect

    rng = np.random.default_rng(seed)
    counts = _count_saved()
    conn = connect(db)
    ids = [int(r[0]) for r in conn.execute("SELECT id FROM flags WHERE kind = 'anomaly'")]
    conn.close()
    ok = refused = subprocesses = 0
    sub_rows = 0
    for k in range(n):
        fid = int(rng.choice(ids))
        if rng.random() < 0.2:
            argv = ["flags", "--undo"]
        else:
            argv = ["flags", "--set", str(fid), str(rng.choice(STATES))]
            if rng.random() < 0.3:
                argv += ["--note", f"{name} note {k}"]
            if rng.random() < 0.5:
                conn = connect(db)
                now = conn.execute("SELECT state FROM flags WHERE id = ?", (fid,)).fetchone()[0]
                conn.close()
                argv += ["--expect", now]
        argv = ["--db", db, "--as", name, *argv]
        if k % 50 == 49:  # the command as its own process, as a script would run it
            out = subprocess.run([sys.executable, "-m", "benchloupe", *argv], capture_output=True, text=True)
            code, subprocesses = out.returncode, subprocesses + 1
            sub_rows += code == 0
        else:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                code = main(argv)
        ok += code == 0
        refused += code != 0
    return {"name": name, "kind": "cli", "ops": n, "ok": ok, "refused_or_nothing": refused,
            "saved_rows": counts["rows"] + sub_rows, "subprocesses": subprocesses}


def tui_worker(db: str, name: str, n: int, seed: int) -> dict:
    import numpy as np
    from textual import events

    from benchloupe.store import actor
    from benchloupe.tui.app import BenchloupeApp

    actor.set_actor(name)
    counts = _count_saved()
    rng = np.random.default_rng(seed)
    keys = ["c", "d", "u", "o", "j", "k", "z", "e", "space"]
    weights = np.array([13, 13, 12, 7, 15, 10, 12, 10, 8], float)

    async def run() -> dict:
        app = BenchloupeApp(Path(db), benchmark="demo-math")
        sent = 0
        async with app.run_test(size=(80, 24)) as pilot:
            def send(key: str) -> None:
                event = events.Key(key, key if len(key) == 1 else None)
                event.set_sender(app)
                app._driver.send_message(event)

            await pilot.press("5")
            t0 = time.monotonic()
            while not (getattr(app.screen, "MODE", "") == "anomalies" and len(app.screen.flags)):
                await asyncio.sleep(0.05)
                if time.monotonic() - t0 > 120:
                    raise RuntimeError("the anomaly queue did not load")
            screen = app.screen
            for k in range(n):
                key = str(rng.choice(keys, p=weights / weights.sum()))
                if key == "e":
                    send("e")
                    t1 = time.monotonic()  # type only into the dialog (a digit on the queue switches screens)
                    while type(app.screen).__name__ != "PromptDialog" and time.monotonic() - t1 < 2:
                        await asyncio.sleep(0.01)
                    if type(app.screen).__name__ == "PromptDialog":
                        for ch in f"note{k}":
                            send(ch)
                        send("enter")
                elif key == "space":
                    send("space")
                    send("space")
                    send(str(rng.choice(["c", "d", "u"])))
                else:
                    send(key)
                sent += 1
                await asyncio.sleep(0.01 if rng.random() < 0.8 else 0.2)
                if k % 100 == 99:  # let the queue drain now and then, as a curator pauses
                    while screen.saving:
                        await asyncio.sleep(0.05)
            t0 = time.monotonic()
            while (screen.saving or any(w.is_running or w.state.name == "PENDING" for w in app.workers)
                   or app.screen is not screen):
                if app.screen is not screen:
                    send("escape")
                await asyncio.sleep(0.1)
                if time.monotonic() - t0 > 300:
                    raise RuntimeError("writes did not finish")
        return {"name": name, "kind": "tui", "ops": sent, "saved_rows": counts["rows"],
                "refused": counts["refused"]}

    return asyncio.run(run())


def verify(db: Path, results: list[dict]) -> dict:
    from benchloupe.store import curation
    from benchloupe.store.db import connect

    conn = connect(db)
    try:
        replay = curation.replay_flags(conn)
        by_actor = dict(conn.execute("SELECT actor, count(*) FROM audit_log WHERE entity = 'flag' GROUP BY actor"))
        total = conn.execute("SELECT count(*) FROM audit_log WHERE entity = 'flag'").fetchone()[0]
        undos = conn.execute("SELECT count(*) FROM audit_log WHERE action = 'flag:undo'").fetchone()[0]
    finally:
        conn.close()
    missing = {r["name"]: {"saved": r["saved_rows"], "in_log": by_actor.get(r["name"], 0)} for r in results
               if r["saved_rows"] != by_actor.get(r["name"], 0)}
    return {"audit_rows": total, "undo_rows": undos, "replay_gaps": replay["gaps"][:5],
            "replay_mismatches": replay["mismatches"][:5], "n_gaps": len(replay["gaps"]),
            "n_mismatches": len(replay["mismatches"]), "missing_decisions": missing,
            "ok": not replay["gaps"] and not replay["mismatches"] and not missing}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=1000, help="operations per process")
    p.add_argument("--tui", type=int, default=2)
    p.add_argument("--cli", type=int, default=2)
    p.add_argument("--flags", type=int, default=40)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--worker", choices=["tui", "cli"])
    p.add_argument("--db")
    p.add_argument("--name")
    args = p.parse_args()
    if args.worker:
        fn = tui_worker if args.worker == "tui" else cli_worker
        print(json.dumps(fn(args.db, args.name, args.n, args.seed)), flush=True)
        return 0
    work = Path(tempfile.mkdtemp(prefix="benchloupe-soak-"))
    db = work / "team.db"
    setup(db, args.flags)
    env = {**os.environ, "XDG_DATA_HOME": str(work / "xdg"), "XDG_CONFIG_HOME": str(work / "xdg-config"),
           "BENCHLOUPE_USER": ""}
    t0 = time.monotonic()
    procs = []
    for kind, count in (("tui", args.tui), ("cli", args.cli)):
        for i in range(count):
            name = f"{kind}{i + 1}"
            procs.append(subprocess.Popen(
                [sys.executable, __file__, "--worker", kind, "--db", str(db), "--name", name, "--n", str(args.n),
                 "--seed", str(args.seed * 100 + len(procs))], stdout=subprocess.PIPE, text=True, env=env))
    results = []
    for proc in procs:
        out, _ = proc.communicate()
        if proc.returncode != 0 or not out.strip():
            results.append({"name": "?", "kind": "?", "error": f"exit {proc.returncode}", "saved_rows": -1})
            continue
        results.append(json.loads(out.strip().splitlines()[-1]))
    report = {"processes": results, "wall_s": round(time.monotonic() - t0, 1), **verify(db, results),
              "load": os.getloadavg(), "db": str(db)}
    print(json.dumps(report, indent=1))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
