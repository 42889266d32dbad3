"""Speed of the family-DIF near-tie audit (paper 002) -> JSON on stdout.

Cases:
- ``gsm8k``: full primary audit (K grid to 256, 3 purification rounds, 1,000 controls) on metabench GSM8K
  (5,041 x 249; families from model ids, owners from the id prefix), best of 3 (the machine is shared).
- ``sim``: the same on a simulated 5,000-model x 14,000-item matrix with 5 families and 57 item groups (targets: <= 30 s, < 4 GB),
  one run, peak RSS from ``resource.getrusage`` (run in its own process so the figure is its own).
- ``real``: metabench ARC, GSM8K, TruthfulQA with families from ids and from the leaderboard ``arch`` column
  (the Table 1 row of each), for docs/NEARTIE.md.
- ``cli``: each metabench set imported into a fresh database (not timed), then the primary audit as a whole
  ``python -m benchloupe audit neartie`` process (start-up, load, audit, every pair, flag and contribution
  stored) and, in process, ``jobs.run_neartie``; best of 3 each; beside the public reference's wall time on
  the same input (reference outputs README: ARC 8.3 s, GSM8K 14.3 s).
- ``full``: ``--protocol full`` on metabench GSM8K as a whole CLI process, one run.
- ``protocol``: ``--protocol full`` Markdown reports of ARC, GSM8K, TruthfulQA into bench/out/ (docs/NEARTIE.md).

Usage: ``python bench/bench_neartie.py [gsm8k|sim|real|cli|full|protocol ...]`` (default: gsm8k sim).  BLAS threads follow
the environment (``OMP_NUM_THREADS`` / ``OPENBLAS_NUM_THREADS``, 1 unless set, as in the CLI), recorded in the output.
"""

from __future__ import annotations

import gzip
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as the CLI sets it, so in-process and CLI figures compare
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's benchloupe, not whichever one the interpreter finds first

from benchloupe.engine.families import family_from_architecture, infer_family, infer_owner  # noqa: E402
from benchloupe.engine.neartie import AuditConfig, run_audit  # noqa: E402

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "metabench"
FILES = {"arc": "arc-2PL-MAP-0.005-seed=1", "gsm8k": "gsm8k-2PL-EAPsum-0.001-seed=1",
         "truthfulqa": "truthfulqa-2PL-EAPsum-0.01-seed=1"}


def load_metabench(name: str, family_source: str = "name"):
    table = pd.read_csv(DATA / f"{FILES[name]}.responses.csv.gz", index_col=0)
    ids = table.index.astype(str).tolist()
    if family_source == "name":
        families = [infer_family(m) for m in ids]
    else:
        with gzip.open(DATA / "open-llm-leaderboard.csv.gz") as fh:
            arch = pd.read_csv(fh, usecols=["name", "arch"]).drop_duplicates("name").set_index("name")["arch"]
        families = [family_from_architecture(arch.get(m)) for m in ids]
    owners = [infer_owner(m) for m in ids]
    return table.to_numpy(dtype=np.int8), ids, families, owners, [name] * table.shape[1]


def simulate(n_models=5000, n_items=14000, n_families=5, n_groups=57, k=8, seed=0):
    rng = np.random.default_rng(seed)
    names = ["gemma", "llama", "mistral", "phi", "qwen"][:n_families]
    ids, fams, owners = [], [], []
    o = 0
    while len(ids) < n_models:
        for f in rng.choice(names, size=rng.integers(1, 3), replace=False):
            for c in range(rng.integers(1, 7)):
                ids.append(f"owner{o}/{f}-{c}")
                fams.append(str(f))
                owners.append(f"owner{o}")
        o += 1
    ids, fams, owners = ids[:n_models], fams[:n_models], owners[:n_models]
    code = np.searchsorted(names, fams)
    b = rng.normal(0.3, 1.2, n_items)
    a = rng.normal(0, 0.6, (n_items, k))
    a[:, 0] = np.abs(rng.normal(1.0, 0.3, n_items))  # a general factor, so that total scores spread out
    theta = rng.normal(0, 1, (n_models, k))
    delta = rng.normal(0, 0.4, (n_items, n_families)) * (rng.random(n_items) < 0.3)[:, None]
    y = np.empty((n_models, n_items), dtype=np.int8)
    for start in range(0, n_models, 500):
        sl = slice(start, start + 500)
        logits = b + theta[sl] @ a.T + delta[:, code[sl]].T
        y[sl] = rng.random(logits.shape) < 1 / (1 + np.exp(-logits))
    groups = [f"subject_{i % n_groups}" for i in range(n_items)]
    return y, ids, fams, owners, groups


def timed(args, repeats: int) -> tuple[list[float], list[float], object]:
    """Wall and CPU (user + system, this process) seconds of each run."""
    times, cpu, res = [], [], None
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        res = run_audit(*args, AuditConfig())
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return times, cpu, res


def case_gsm8k() -> dict:
    args = load_metabench("gsm8k")
    times, cpu, res = timed(args, 3)
    return {"case": "metabench gsm8k 5041x249 primary audit", "best_s": min(times), "times_s": times,
            "cpu_s": cpu,
            "table1": res.table1_row(), "target_s": 3.0}


def case_sim() -> dict:
    args = simulate()
    load_before = os.getloadavg()
    times, cpu, res = timed(args, 1)
    peak_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2
    return {"case": "simulated 5000x14000, 5 families, 57 groups", "seconds": times[0], "cpu_s": cpu[0],
            "load_average_before": load_before,
            "peak_rss_gb": peak_gb,
            "table1": res.table1_row(), "target_s": 30, "target_gb": 4,
            "load_average_after": os.getloadavg()}


def case_real() -> list[dict]:
    rows = []
    for name in FILES:
        for source in ("name", "arch"):
            args = load_metabench(name, source)
            start = time.perf_counter()
            res = run_audit(*args, AuditConfig())
            rows.append({"benchmark": name, "families_from": source, "seconds": time.perf_counter() - start,
                         "models_in": int(sum(f is not None for f in args[2])),
                         "capped": res.summary["capped_models"], "owners": res.summary["owners"],
                         "representatives": res.summary["representatives"], **res.table1_row()})
    return rows


REFERENCE_S = {"arc": 8.3, "gsm8k": 14.3}  # reference outputs README, same .npz input, this machine type


def _imported(tmp: Path, name: str) -> Path:
    db = tmp / f"{name}.db"
    if not db.exists():
        subprocess.run([sys.executable, "-m", "benchloupe", "import", "metabench",
                        str(DATA / f"{FILES[name]}.responses.csv.gz"), "--db", str(db), "--benchmark", name],
                       check=True, capture_output=True, cwd=ROOT)
    return db


def _cli(db: Path, name: str, *extra: str) -> tuple[float, dict]:
    """Wall seconds of one CLI process and its JSON; ``cpu_s`` (user + system of the child) rides in the JSON,
    the figure that does not inflate when other jobs share the cores."""
    start = time.perf_counter()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run([sys.executable, "-m", "benchloupe", "audit", "neartie", name, "--db", str(db), "--json",
                           *extra], capture_output=True, text=True, check=True, cwd=ROOT)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = json.loads(proc.stdout)
    out["cpu_s"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return time.perf_counter() - start, out


def case_cli() -> list[dict]:
    import tempfile

    from benchloupe.jobs.audit import run_neartie

    rows = []
    with tempfile.TemporaryDirectory() as d:
        for name in FILES:
            db = _imported(Path(d), name)
            walls, cpus, last = [], [], None
            for _ in range(3):
                wall, last = _cli(db, name)
                walls.append(wall)
                cpus.append(last["cpu_s"])
            inproc = []
            for _ in range(3):
                start = time.perf_counter()
                run_neartie(db, name)
                inproc.append(time.perf_counter() - start)
            ref = REFERENCE_S.get(name)
            rows.append({"benchmark": name, "cli_best_s": min(walls), "cli_times_s": walls, "cli_cpu_best_s": min(cpus),
                         "speedup_cli_cpu": ref / min(cpus) if ref else None,
                         "in_process_best_s": min(inproc), "job_timings": last["timings"],
                         "pairs_stored": last["summary"]["eligible_pairs"], "reference_s": ref,
                         "speedup_cli": ref / min(walls) if ref else None,
                         "speedup_in_process": ref / min(inproc) if ref else None,
                         "table1": last["table1"], "target_s": 3.0})
    return rows


def case_full() -> dict:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        db = _imported(Path(d), "gsm8k")
        wall, out = _cli(db, "gsm8k", "--protocol", "full")
    return {"case": "--protocol full, metabench gsm8k 5041x249, whole CLI process", "seconds": wall,
            "cpu_s": out["cpu_s"],
            "timings": out["timings"], "target_s": 180}


def case_protocol() -> list[dict]:
    import tempfile

    rows = []
    target = Path(__file__).resolve().parent / "out"
    target.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as d:
        for name in FILES:
            db = _imported(Path(d), name)
            wall, out = _cli(db, name, "--protocol", "full", "--report", str(target / f"neartie-full-{name}.md"))
            rows.append({"benchmark": name, "seconds": wall, "table1": out["table1"], "report": out["report"]})
    return rows


def main(argv: list[str]) -> None:
    cases = argv or ["gsm8k", "sim"]
    out = {"threads": {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")},
           "cpus": os.cpu_count(), "load_average_before": os.getloadavg()}
    for case in cases:
        if case == "sim" and len(cases) > 1:  # own process: its own peak RSS
            proc = subprocess.run([sys.executable, __file__, "sim"], capture_output=True, text=True, check=True)
            out["sim"] = json.loads(proc.stdout)["sim"]
        else:
            out[case] = {"gsm8k": case_gsm8k, "sim": case_sim, "real": case_real, "cli": case_cli,
                         "full": case_full, "protocol": case_protocol}[case]()
    out["load_average_after"] = os.getloadavg()
    print(json.dumps(out, indent=1, default=float))


if __name__ == "__main__":
    main(sys.argv[1:])
