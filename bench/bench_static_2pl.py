"""Static 2PL speed and recovery: ours (DualEval static mode) beside the pip-installable IRT peers (issue 3).

Issue 3, "Figures this must reach": a static 2PL on 5,000 x 14,000 in at most 60 s with abilities recovered at
Spearman >= 0.99, and at least as fast as the fastest peer (theta-irt, mirt, py-irt, girth, deepirtools) on the same
matrices.  This script simulates 2PL data with known parameters (models x items, theta ~ N(0,1), b ~ N(0,1),
log a ~ N(0, 0.3), seeded), saves each matrix to a temporary .npy, fits ours in-process
(``fit_joint(StaticData(...), None, JointConfig(mode="static"))``) and each peer in a subprocess of the peers
virtualenv (``bench/peers/run_<peer>.py``; wall time includes its imports and JIT compile, as the issue's figures
do).  It reports, per (method, data set): wall seconds (best of ``--repeats`` runs; a run over 60 s is not
repeated), Spearman of abilities and of difficulties with the truth, and on metabench GSM8K (no truth) Spearman of
each method's abilities with ours.  A run past ``--timeout`` is recorded as "timeout" (a peer is killed; ours is
cancelled through its cancel event, which the engine checks only between iterations); a peer whose
resident memory passes ``--mem-limit-gb`` is killed and recorded as "memory" (the machine is shared).  A peer is
skipped at a larger size when it timed out at a smaller one or when its smaller-size time, scaled by the cell
count, exceeds twice the timeout.  girth runs only up to ``--girth-max-cells`` (1k x 1k) and on GSM8K, as the issue
says.  Without the peers virtualenv only ours runs, and the JSON says so (``bash bench/peers/setup.sh`` builds it).
``--peers ours-process`` also runs ours under the peers' protocol (``peers/run_ours.py`` with this interpreter), so
whole process compares with whole process and ``fit_s`` (each runner's own fit time) with fit; every row carries
the 1-minute load average before and after its runs.

Usage: python bench/bench_static_2pl.py [--sizes 1000x1000,2000x2000] [--peers ours-process,theta-irt] [--no-gsm8k]
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr

from benchloupe.engine import joint
from benchloupe.engine.common import Cancelled
from benchloupe.engine.joint import JointConfig, StaticData, fit_joint

HERE = Path(__file__).resolve().parent
PEERS = {
    "ours-process": "run_ours.py",  # ours under the peers' protocol, with this interpreter: whole process vs whole process
    "theta-irt": "run_theta_irt.py",
    "mirt": "run_mirt.py",
    "py-irt": "run_py_irt.py",
    "girth": "run_girth.py",
    "deepirtools": "run_deepirtools.py",
}
GSM8K = HERE.parents[1] / "shared" / "data" / "metabench" / "gsm8k-2PL-EAPsum-0.001-seed=1.responses.csv.gz"
REPEAT_UNDER_S = 60.0


def simulate(n_models: int, n_items: int, seed: int) -> dict:
    """2PL responses with known parameters: P(y=1) = sigmoid(a (theta - b))."""
    rng = np.random.default_rng(seed)
    theta = rng.normal(size=n_models)
    b = rng.normal(size=n_items)
    a = np.exp(rng.normal(0.0, 0.3, size=n_items))
    y = np.empty((n_models, n_items), dtype=np.uint8)
    for start in range(0, n_models, 500):  # row blocks keep the float temporaries small at 5k x 14k
        block = slice(start, start + 500)
        p = 1.0 / (1.0 + np.exp(-a * (theta[block, None] - b)))
        y[block] = rng.random(p.shape) < p
    return {"y": y, "theta": theta, "b": b}


def load_gsm8k(path: Path) -> dict:
    import pandas as pd

    frame = pd.read_csv(path)
    return {"y": frame.iloc[:, 1:].to_numpy(dtype=np.uint8), "theta": None, "b": None}


def spearman(x, y) -> float | None:
    x, y = np.asarray(x, float), np.asarray(y, float)
    ok = np.isfinite(x) & np.isfinite(y)
    if ok.sum() < 3 or x.shape != y.shape:
        return None
    return round(float(spearmanr(x[ok], y[ok])[0]), 4)


def run_ours(y: np.ndarray, timeout: float) -> dict:
    """Our static 2PL in-process, cancelled (recorded "timeout", with the last progress message) after ``timeout``."""
    cancel = threading.Event()
    last = {"progress": None}

    def progress(done, total, message):
        last["progress"] = message

    timer = threading.Timer(timeout, cancel.set)
    timer.start()
    started = time.perf_counter()
    try:
        result = fit_joint(StaticData(y, np.ones(y.shape, dtype=bool)), None, JointConfig(mode="static"),
                           progress=progress, cancel=cancel)
    except Cancelled:
        return {"status": "timeout", "wall_s": round(time.perf_counter() - started, 2),
                "meta": {"last_progress": last["progress"]}}
    finally:
        timer.cancel()
    wall = time.perf_counter() - started
    info = {"iterations": result.iterations, "converged": bool(result.converged),
            "objective": float(result.objective), "config_optimizer": result.config.optimizer,
            "provenance": result.provenance}  # backend, dtype, passes, passes-equivalent (issue 16)
    return {"status": "ok", "wall_s": round(wall, 2), "theta": result.theta, "b": result.b_static, "meta": info}


def _rss_gb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 2**20
    except (FileNotFoundError, ProcessLookupError):
        pass
    return 0.0


def run_peer(python: str, peer: str, matrix: Path, out: Path, timeout: float, mem_limit_gb: float) -> dict:
    """One peer fit in a subprocess; returns status, wall seconds, and its outputs when it finished."""
    out.mkdir(parents=True, exist_ok=True)
    log = (out / "log.txt").open("w")
    started = time.perf_counter()
    proc = subprocess.Popen([python, str(HERE / "peers" / PEERS[peer]), str(matrix), str(out)],
                            stdout=log, stderr=subprocess.STDOUT, cwd=HERE / "peers", start_new_session=True)
    status, peak = None, 0.0
    while proc.poll() is None:
        peak = max(peak, _rss_gb(proc.pid))
        if time.perf_counter() - started > timeout:
            status = "timeout"
        elif peak > mem_limit_gb:
            status = "memory"
        if status:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            break
        time.sleep(0.2)
    wall = time.perf_counter() - started
    log.close()
    record = {"wall_s": round(wall, 2), "peak_rss_gb": round(peak, 2)}
    if status is None and proc.returncode != 0:
        status = "error"
        record["error"] = (out / "log.txt").read_text()[-600:]
    if status is None:
        status = "ok"
        record["theta"] = np.load(out / "theta.npy")
        record["b"] = np.load(out / "b.npy")
        record["meta"] = json.loads((out / "meta.json").read_text())
    record["status"] = status
    return record


def peer_versions(python: str, peers: list[str]) -> dict:
    code = ("import importlib.metadata as m, json, sys\n"
            "def v(d):\n"
            "    try:\n        return m.version(d)\n"
            "    except m.PackageNotFoundError:\n        return None\n"
            "print(json.dumps({d: v(d) for d in sys.argv[1:]}))")
    names = peers + ["torch", "jax", "numpy", "scipy"]
    try:
        done = subprocess.run([python, "-c", code, *names], capture_output=True, text=True, timeout=60)
        return json.loads(done.stdout)
    except (subprocess.SubprocessError, json.JSONDecodeError):
        return {}


def parse_size(text: str) -> tuple[int, int]:
    m, n = text.lower().split("x")
    return int(m), int(n)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000x1000,2000x2000,5000x14000", help="models x items, comma-separated")
    ap.add_argument("--peers", default=",".join(PEERS), help=f"comma-separated subset of {','.join(PEERS)}; '' for none")
    ap.add_argument("--no-ours", action="store_true", help="run the peers only")
    ap.add_argument("--no-gsm8k", action="store_true", help="skip metabench GSM8K")
    ap.add_argument("--repeats", type=int, default=3, help="runs per (method, data set); best is reported")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per run (ours is cancelled, a peer killed)")
    ap.add_argument("--mem-limit-gb", type=float, default=12.0, help="kill a peer whose RSS passes this")
    ap.add_argument("--girth-max-cells", type=int, default=1_000_000, help="largest simulated matrix for girth")
    ap.add_argument("--peers-python", default="/work/peers-venv/bin/python")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, help="also write the JSON here")
    args = ap.parse_args()

    peers = [p for p in args.peers.split(",") if p]
    if args.no_ours:
        peers = [p for p in peers if p != "ours-process"]
    unknown = set(peers) - set(PEERS)
    if unknown:
        ap.error(f"unknown peers {sorted(unknown)}; choose from {list(PEERS)}")
    notes = []
    if set(peers) - {"ours-process"} and not Path(args.peers_python).exists():
        notes.append(f"{args.peers_python} absent: ours only (bash bench/peers/setup.sh creates /work/peers-venv)")
        peers = [p for p in peers if p == "ours-process"]
    report = {
        "benchmark": "static 2PL, ours vs peers (issue 3)",
        "date_utc": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "joint_py_sha256": hashlib.sha256(b"".join(p.read_bytes() for p in sorted(Path(joint.__file__).parent.glob("*.py")))).hexdigest()[:12],
        "machine": {"cpus": os.cpu_count(), "load_avg_at_start": os.getloadavg(), "python": platform.python_version()},
        "settings": {"repeats": args.repeats, "repeat_only_under_s": REPEAT_UNDER_S, "timeout_s": args.timeout,
                     "mem_limit_gb": args.mem_limit_gb, "seed": args.seed},
        "peer_versions": peer_versions(args.peers_python, [p for p in peers if p != "ours-process"]) if peers else {},
        "notes": notes,
        "results": [],
    }
    datasets = [(f"sim {s}", parse_size(s)) for s in args.sizes.split(",") if s]
    if not args.no_gsm8k:
        if GSM8K.exists():
            datasets.append(("metabench GSM8K", None))
        else:
            notes.append(f"GSM8K skipped: {GSM8K} absent")
    history: dict[str, tuple[int, float, str]] = {}  # peer -> (cells, wall, status) at its largest simulated run
    with tempfile.TemporaryDirectory(prefix="bench_s2pl_") as tmp:
        for index, (name, shape) in enumerate(datasets):
            data = simulate(*shape, seed=args.seed + index) if shape else load_gsm8k(GSM8K)
            y = data["y"]
            matrix = Path(tmp) / f"data{index}.npy"
            np.save(matrix, y)
            cells = y.size
            ours_theta = None
            methods = ([] if args.no_ours else ["ours"]) + peers
            for method in methods:
                row = {"method": method, "data": name, "shape": list(y.shape)}
                skip = None
                if method == "girth" and shape and cells > args.girth_max_cells:
                    skip = f"girth runs only up to {args.girth_max_cells} cells (issue: too slow above 1k x 1k)"
                elif method in history and shape:
                    prev_cells, prev_wall, prev_status = history[method]
                    if prev_status != "ok":
                        skip = f"{prev_status} at a smaller size"
                    elif prev_wall * cells / prev_cells > 2 * args.timeout:
                        skip = (f"extrapolated {prev_wall * cells / prev_cells:.0f} s from {prev_wall:.0f} s at "
                                f"{prev_cells} cells > 2 x timeout")
                if skip:
                    row.update(status="skipped", reason=skip)
                    report["results"].append(row)
                    print(json.dumps(row), file=sys.stderr, flush=True)
                    continue
                walls, rec, fits, load_before = [], None, [], os.getloadavg()[0]
                for rep in range(args.repeats):
                    if method == "ours":
                        rec = run_ours(y, args.timeout)
                    else:
                        rec = run_peer(sys.executable if method == "ours-process" else args.peers_python, method, matrix, Path(tmp) / f"{method}-{index}-{rep}",
                                       args.timeout, args.mem_limit_gb)
                    walls.append(rec["wall_s"])
                    if "meta" in rec and "fit_seconds" in rec["meta"]:
                        fits.append(round(rec["meta"]["fit_seconds"], 3))
                    if rec["status"] != "ok" or rec["wall_s"] > REPEAT_UNDER_S:
                        break
                row.update(status=rec["status"], wall_s=min(walls), wall_runs=walls,
                           load=[round(load_before, 2), round(os.getloadavg()[0], 2)],
                           **({"fit_s": min(fits), "fit_runs": fits} if fits else {}),
                           **{k: rec[k] for k in ("peak_rss_gb", "error", "meta") if k in rec})
                if rec["status"] == "ok":
                    if data["theta"] is not None:
                        row["spearman_theta_truth"] = spearman(rec["theta"], data["theta"])
                        row["spearman_b_truth"] = spearman(rec["b"], data["b"])
                    if method == "ours":
                        ours_theta, ours_b = rec["theta"], rec["b"]
                    elif ours_theta is not None:
                        row["spearman_theta_vs_ours"] = spearman(rec["theta"], ours_theta)
                        row["spearman_b_vs_ours"] = spearman(rec["b"], ours_b)
                if shape and method != "ours":
                    history[method] = (cells, min(walls), rec["status"])
                report["results"].append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
