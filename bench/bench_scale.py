"""Leaderboard scale, whole process (issue 26): every command on a simulated 2,000 x 14,000 and 5,000 x 14,000
workspace as a whole CLI process, beside the fit at its core measured in the same run, printed as JSON.

The workspace (seeded, ``simulate``): a 2PL static benchmark (theta ~ N(0, 1), b ~ N(0, 1), log a ~ N(0, 0.3), as
bench/bench_static_2pl.py) with a residual family DIF on 30 % of the items (delta ~ N(0, 0.4) per family, as
bench/bench_neartie.py) so the near-tie audit has something to find; models named ``ownerO/family-C`` in five
families, listed in a models file with family, owner and a training cutoff date for ``--cutoffs`` of them; items in
57 groups with a release date (an item-metadata file); and an arena benchmark of AlpacaEval 2's size (805 prompts,
58 of the models, rewards following the same abilities). Files are written once per size into ``--workdir``:
``wide.csv`` (the 0/1 matrix as a curator's export: ``model,item_00000,...``), ``models.csv``, ``items.csv``,
``arena.csv`` and ``y.npy`` (the matrix for the peers).

Every step is one ``python -m benchloupe ...`` process (``--json`` where the command has it), started with
``subprocess.Popen`` and reaped with ``os.wait4``: wall seconds, user + system CPU seconds and peak RSS of that
process alone, the 1-minute load average before and after, and the in-process phase timings the command's JSON
reports (``timings``). Each step names the fit it is measured against (``reference``): the static 2PL fit of
``fit static`` in the same run (its in-process ``fit_s``), or for ``coverage`` its own 1PL fit, and says which
refits it does (``refits``) so the many-fit commands can be held to (refits x one warm-started fit).

Peers in the same run: pandas' C parser reading the same wide CSV (the import's yardstick, own process), and
theta-irt 0.1.1 (``bench/peers/run_theta_irt.py`` in ``--peers-venv``) beside ours under the same protocol
(``bench/peers/run_ours.py``) on ``y.npy``.

Usage::

    python bench/bench_scale.py [--sizes 2000x14000,5000x14000] [--workdir DIR (default: bench_scale in the temporary folder)]
                                [--only import,fit_static,...] [--skip theta_irt] [--bootstrap-B 20]

``--only``/``--skip`` take step names (see STEPS). The workspace database is rebuilt by the import step; a later
``--only`` run reuses it. OPENBLAS_NUM_THREADS=1 as the CLI sets it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
TMP = Path(tempfile.gettempdir())
PEERS = ROOT / "bench" / "peers"
FAMILIES = ["gemma", "llama", "mistral", "phi", "qwen"]
N_GROUPS = 57
ARENA_MODELS, ARENA_PROMPTS = 58, 805  # AlpacaEval 2: 58 models x 805 instructions, 1.33 M pairs


# ------------------------------------------------------------------------------------------------ the workspace

def simulate(n_models: int, n_items: int, seed: int = 0) -> dict:
    """Truth and the 0/1 matrix (uint8) of the scale workspace; row blocks keep the float temporaries small."""
    rng = np.random.default_rng(seed)
    names, fams, owners = [], [], []
    o = 0
    while len(names) < n_models:
        for f in rng.choice(FAMILIES, size=rng.integers(1, 3), replace=False):
            for c in range(rng.integers(1, 7)):
                names.append(f"owner{o}/{f}-{c}")
                fams.append(str(f))
                owners.append(f"owner{o}")
        o += 1
    names, fams, owners = names[:n_models], fams[:n_models], owners[:n_models]
    code = np.searchsorted(FAMILIES, fams)
    theta = rng.normal(size=n_models)
    b = rng.normal(size=n_items)
    a = np.exp(rng.normal(0.0, 0.3, size=n_items))
    delta = rng.normal(0, 0.4, (n_items, len(FAMILIES))) * (rng.random(n_items) < 0.3)[:, None]
    y = np.empty((n_models, n_items), dtype=np.uint8)
    for start in range(0, n_models, 500):
        sl = slice(start, start + 500)
        logits = a * (theta[sl, None] - b) + delta[:, code[sl]].T
        y[sl] = rng.random(logits.shape) < 1.0 / (1.0 + np.exp(-logits))
    return {"y": y, "theta": theta, "b": b, "a": a, "names": names, "families": fams, "owners": owners}


def write_wide(path: Path, names: list[str], y: np.ndarray) -> None:
    """``model,item_00000,...`` then one ``name,0,1,...`` line per model (what a spreadsheet export writes)."""
    n_items = y.shape[1]
    with open(path, "wb") as fh:
        fh.write(("model," + ",".join(f"item_{j:05d}" for j in range(n_items)) + "\n").encode())
        line = np.full(2 * n_items, ord(","), dtype=np.uint8)
        line[-1] = ord("\n")
        for name, row in zip(names, y, strict=True):
            line[0::2] = row + ord("0")
            fh.write(name.encode() + b"," + line.tobytes())


def build_files(folder: Path, n_models: int, n_items: int, cutoffs: int, seed: int = 0) -> dict:
    """Write the workspace's files into *folder* (skipped when they exist for this size and seed)."""
    folder.mkdir(parents=True, exist_ok=True)
    stamp = folder / "files.json"
    want = {"models": n_models, "items": n_items, "cutoffs": cutoffs, "seed": seed, "version": 1}
    if stamp.exists() and json.loads(stamp.read_text()) == want:
        return want
    t = time.perf_counter()
    sim = simulate(n_models, n_items, seed)
    rng = np.random.default_rng(seed + 1)
    write_wide(folder / "wide.csv", sim["names"], sim["y"])
    np.save(folder / "y.npy", sim["y"])
    np.savez(folder / "truth.npz", theta=sim["theta"], b=sim["b"], a=sim["a"])
    # item dates: 2021-01 .. 2024-12; model cutoffs for the first ``cutoffs`` models, in the same range
    start = np.datetime64("2021-01-01")
    item_days = rng.integers(0, 4 * 365, n_items)
    with open(folder / "items.csv", "w") as fh:
        fh.write("key,group,date\n")
        for j in range(n_items):
            fh.write(f"item_{j:05d},subject_{j % N_GROUPS},{start + item_days[j]}\n")
    cut_days = rng.integers(365, 3 * 365, n_models)
    with open(folder / "models.csv", "w") as fh:
        fh.write("name,family,owner,cutoff\n")
        for i, (nm, f, o) in enumerate(zip(sim["names"], sim["families"], sim["owners"], strict=True)):
            fh.write(f"{nm},{f},{o},{start + cut_days[i] if i < cutoffs else ''}\n")
    # arena: AlpacaEval 2's size, rewards in [1, 2] like its weighted preference, following the true abilities
    rows = np.sort(rng.choice(n_models, ARENA_MODELS, replace=False))
    hard = rng.normal(0, 1, ARENA_PROMPTS)
    with open(folder / "arena.csv", "w") as fh:
        fh.write("model,prompt,reward\n")
        for i in rows:
            r = 1.0 + 1.0 / (1.0 + np.exp(-(1.5 * (sim["theta"][i] - hard) + rng.normal(0, 0.8, ARENA_PROMPTS))))
            nm = sim["names"][i]
            fh.write("".join(f"{nm},p{q:04d},{v:.5f}\n" for q, v in enumerate(r)))
    stamp.write_text(json.dumps(want))
    want["build_s"] = round(time.perf_counter() - t, 2)
    return want


# ------------------------------------------------------------------------------------------------ one process

def load() -> float:
    return round(os.getloadavg()[0], 2)


def process(argv: list[str], *, cwd: Path = ROOT, env: dict | None = None, timeout: float = 1800) -> dict:
    """Run one process; wall, CPU (user + system) and peak RSS of that child alone (``os.wait4``), its stdout."""
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "PYTHONPATH": str(ROOT), **(env or {})}
    before = load()
    t = time.perf_counter()
    out_path, err_path = TMP / f"bench_scale.{os.getpid()}.out", TMP / f"bench_scale.{os.getpid()}.err"
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=out, stderr=err)
        deadline = t + timeout
        while True:
            pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                proc.kill()
                pid, status, ru = os.wait4(proc.pid, 0)
                break
            time.sleep(0.02)
    wall = time.perf_counter() - t
    proc.returncode = os.waitstatus_to_exitcode(status)
    stdout, stderr = out_path.read_text(errors="replace"), err_path.read_text(errors="replace")
    out_path.unlink(missing_ok=True)
    err_path.unlink(missing_ok=True)
    row = {"rc": proc.returncode, "wall_s": round(wall, 3), "cpu_s": round(ru.ru_utime + ru.ru_stime, 3),
           "peak_rss_mb": round(ru.ru_maxrss / 1024, 1), "load": [before, load()]}
    if wall >= timeout:
        row["timed_out"] = True
    if proc.returncode != 0:
        row["stderr"] = stderr[-1500:]
    row["_stdout"] = stdout
    return row


def cli(db: Path, *args: str, json_out: bool = True, timeout: float = 1800) -> dict:
    argv = [sys.executable, "-m", "benchloupe", *args, "--db", str(db)] + (["--json"] if json_out else [])
    row = process(argv, timeout=timeout)
    text = row.pop("_stdout")
    if json_out and row["rc"] == 0:
        try:
            payload = json.loads(text)
        except json.JSONDecodeError:
            payload = {}
        row["timings"] = payload.get("timings")
        row["_payload"] = payload
    return row


PANDAS_READ = """
import sys, time
import pandas as pd
t = time.perf_counter()
frame = pd.read_csv(sys.argv[1], engine="c")
print(time.perf_counter() - t, frame.shape)
"""


# ------------------------------------------------------------------------------------------------ the steps

def _metric(row: dict, *keys):
    m = (row.get("_payload") or {}).get("metrics") or {}
    return {k: m.get(k) for k in keys if k in m}


def run_size(m: int, n: int, args) -> dict:
    folder = Path(args.workdir) / f"{m}x{n}"
    files = build_files(folder, m, n, args.cutoffs)
    db = folder / "scale.db"
    only = set(filter(None, args.only.split(","))) or set(STEPS)
    only -= set(filter(None, args.skip.split(",")))
    out: dict = {"size": f"{m}x{n}", "cells": m * n, "files": files, "steps": {}}
    steps = out["steps"]

    def record(name: str, row: dict, **extra) -> dict:
        row = {k: v for k, v in row.items() if not k.startswith("_")} | extra
        steps[name] = row
        print(json.dumps({"size": out["size"], "step": name, **row}, default=str), file=sys.stderr, flush=True)
        return row

    wide = folder / "wide.csv"
    if "pandas_read" in only:
        r = process([sys.executable, "-c", PANDAS_READ, str(wide)])
        r["read_s"] = float(r.pop("_stdout").split()[0]) if r["rc"] == 0 else None
        record("pandas_read", r, what="pandas.read_csv(wide.csv, engine='c'), own process (the import's yardstick)")
    if "import" in only:
        if db.exists():
            db.unlink()
        for suffix in ("-wal", "-shm"):
            Path(str(db) + suffix).unlink(missing_ok=True)
        r = cli(db, "import", "wide", str(wide), "-b", "sim", "--models-file", str(folder / "models.csv"))
        record("import", r, file_mb=round(wide.stat().st_size / 1e6, 1))
        r = cli(db, "import", "items", str(folder / "items.csv"), "-b", "sim")
        record("import_items", r)
        r = cli(db, "import", "arena", str(folder / "arena.csv"), "-b", "sim-arena", "--reward-model", "sim-judge")
        record("import_arena", r)
        out["db_mb"] = round(db.stat().st_size / 1e6, 1)
    ref = None
    if "fit_static" in only:
        r = cli(db, "fit", "static", "sim")
        record("fit_static", r, refits="1 fit + 1 held-out-cell refit (Appendix E ECE; --heldout-splits 3 for the "
               "paper's three), warm-started from the fit, float32 sweeps to a 1e-5 relative decrease",
               **_metric(r, "iterations", "objective", "compute", "static_ece", "heldout_splits"))
    if "warm_fit" in only:
        r = process([sys.executable, "-c", WARM_FIT, str(db)])
        text = r.pop("_stdout")
        record("warm_fit", {**r, **(json.loads(text.strip().splitlines()[-1]) if r["rc"] == 0 else {})},
               what="in process: the static fit, one bootstrap replicate warm-started from it (the unit of "
                    "'refits x one warm-started fit'), one held-out refit as fit static makes it")
    fs = steps.get("fit_static") or _previous(folder, "fit_static")
    if fs and fs.get("timings"):
        ref = fs["timings"].get("fit_s")
        out["reference_fit_s"] = ref
    plan = [
        ("fit_joint", ["fit", "joint", "sim", "--arena", "sim-arena"],
         "1 joint fit (joint block Newton at this size) + the static-only 2PL, arena-only DualEval and "
         "Bradley-Terry comparison fits + 3 held-out joint refits warm-started from the full fit (metrics.refits)"),
        ("coverage", ["coverage", "sim"], "1 1PL MAP fit (block sweeps, then full Newton steps); Laplace draws, no "
         "refits; its core fit is the 1PL, timed in its timings as fit_1pl_s"),
        ("calibrate", ["calibrate", "sim"], "none (Algorithm 1 on the coverage run's difficulties)"),
        ("compress", ["compress", "sim"], "1 fit + the subset-recovery curve: one frozen-item ability refit per "
         "(strategy, fraction[, seed]) and one from-scratch 2PL per random_2pl_bt subset (metrics.recovery_refits)"),
        ("anomalies", ["anomalies", "sim"], "1 fit"),
        ("bootstrap", ["bootstrap", "sim", "--B", str(args.bootstrap_B)],
         f"1 fit + {args.bootstrap_B} replicate fits warm-started from it (distinct columns, weighted)"),
        ("audit_neartie", ["audit", "neartie", "sim"], "no 2PL fit: family-DIF Newton, randomized SVD, controls"),
        ("contamination", ["contamination", "sim"],
         f"1 fit + one leave-one-model-out refit per tested model (<= {args.cutoffs}), warm-started"),
        ("evaluate", ["evaluate", "sim", "--arena", "sim-arena"],
         "the full-data static 2PL and BT + 3 splits x (static-only 2PL warm-started from the full-data 2PL, "
         "DualEval joint fit warm-started from that split's static 2PL, arena BT; average reward: no fit) "
         "(metrics.refits)"),
    ]
    for name, argv, refits in plan:
        if name not in only:
            continue
        r = cli(db, *argv)
        extra = {"refits": refits}
        if ref:
            extra["ratio_to_fit"] = round(r["wall_s"] / ref, 2)
        m = (r.get("_payload") or {}).get("metrics") or {}
        count = {"bootstrap": m.get("B"), "contamination": m.get("leave_one_out_refits")}.get(name)
        if count is not None:
            extra["refit_count"] = count
        if name == "evaluate" and m.get("refits"):
            extra["refit_count"] = m["refits"]
        if name == "compress" and m.get("recovery_refits"):
            extra["refit_count"] = m["recovery_refits"]
        if name == "coverage":
            extra.update(_metric(r, "fit_iterations", "fit_objective", "ddm", "max_gap"))
        if name == "fit_joint":
            extra.update(_metric(r, "iterations", "objective", "compute", "static_ece", "arena_ece_soft",
                                 "arena_ece_binary", "refits"))
            tm = r.get("timings") or {}
            if tm.get("fit_s"):
                extra["wall_over_joint_fit"] = round(r["wall_s"] / tm["fit_s"], 2)
        record(name, r, **extra)
    if "tui" in only:
        r = process([sys.executable, str(ROOT / "bench" / "bench_scale_tui.py"), "--db", str(db)], timeout=900)
        text = r.pop("_stdout")
        record("tui", {**r, **(json.loads(text) if r["rc"] == 0 else {})})
    if "theta_irt" in only or "ours_peer" in only:
        out["peers"] = peers(folder, args)
    out["targets"] = targets(steps, ref)
    (folder / "last.json").write_text(json.dumps(out, default=str, indent=1))
    return out


WARM_FIT = """
import json, sys, time
import numpy as np
from benchloupe.store.db import connect
from benchloupe.jobs.data import load_joint
from benchloupe.engine.joint import JointConfig, fit_joint
from benchloupe.engine.joint.optimise import fit_static_weighted
from benchloupe.engine.joint.subsets import static_columns
from benchloupe.engine.joint.fitmetrics import heldout_cells
conn = connect(sys.argv[1])
S = load_joint(conn, "sim", need_static=True).static
cfg = JointConfig(mode="static")
t = time.perf_counter(); full = fit_joint(S, None, cfg); fit_s = time.perf_counter() - t
cols, counts = np.unique(np.random.default_rng(0).choice(S.shape[1], S.shape[1], replace=True), return_counts=True)
t = time.perf_counter()
fit_static_weighted(static_columns(S, cols), counts, cfg, init={"theta": full.theta, "b_static": full.b_static[cols],
                    "k_static": full.k_static[cols]})
warm_s = time.perf_counter() - t
held = heldout_cells(S.mask, 0.2, 0)
from dataclasses import replace
from benchloupe.engine.joint.evaluation import HELDOUT_FAST_CELLS, HELDOUT_FTOL
rcfg = replace(cfg, ftol=HELDOUT_FTOL) if S.mask.sum() >= HELDOUT_FAST_CELLS else cfg
t = time.perf_counter(); fit_joint(S, None, rcfg, static_mask=S.mask & ~held, init=full, polish=False)
print(json.dumps({"fit_s": round(fit_s, 3), "passes": full.provenance["passes"],
                  "warm_replicate_s": round(warm_s, 3), "warm_heldout_refit_s": round(time.perf_counter() - t, 3)}))
"""


def targets(steps: dict, ref: float | None) -> dict:
    """Each issue-26 target with the figure measured in this run and whether it is met."""
    out: dict = {}
    if not ref:
        return out
    warm = (steps.get("warm_fit") or {}).get("warm_replicate_s")
    for name in ("fit_joint", "coverage", "calibrate", "anomalies", "audit_neartie", "evaluate"):
        if name in steps and steps[name].get("rc") == 0:
            out[name] = {"wall_over_fit": round(steps[name]["wall_s"] / ref, 2), "target": 3.0,
                         "met": steps[name]["wall_s"] <= 3.0 * ref}
    cov = (steps.get("coverage") or {}).get("timings") or {}
    if cov.get("fit_1pl_s"):  # against its own core fit, the 1PL, too
        out["coverage"]["wall_over_its_1pl_fit"] = round(steps["coverage"]["wall_s"] / cov["fit_1pl_s"], 2)
    if "compress" in steps and steps["compress"].get("rc") == 0:
        out["compress"] = {"wall_over_fit": round(steps["compress"]["wall_s"] / ref, 2), "target": 30.0,
                           "met": steps["compress"]["wall_s"] <= 30.0 * ref}
    fs = steps.get("fit_static") or {}
    tm = fs.get("timings") or {}
    if tm.get("fit_s"):
        out["fit_static_metrics"] = {"metrics_over_fit": round(tm.get("metrics_s", 0) / tm["fit_s"], 2),
                                     "target": 0.5, "met": tm.get("metrics_s", 0) <= 0.5 * tm["fit_s"]}
        out["fit_static"] = {"wall_over_fit": round(fs["wall_s"] / ref, 2)}
    ev = steps.get("evaluate") or {}
    et, er = ev.get("timings") or {}, ev.get("refit_count") or {}
    held = (steps.get("warm_fit") or {}).get("warm_heldout_refit_s")
    if et.get("static_2pl_s") and isinstance(er, dict) and er.get("splits"):
        # many fits: its static refits against the same run's warm held-out refit; the joint fits (no cheaper
        # start than the split's static 2PL exists) are reported per fit, and the share of the wall that is fits
        n, joints = er["splits"], er.get("joint_fits") or 0
        fits_s = sum(et.get(k, 0) for k in ("reference_fits_s", "static_2pl_s", "dualeval_s", "arena_bt_s"))
        out.setdefault("evaluate", {}).update({
            "static_refits_over_refits_x_warm_fit": round(et["static_2pl_s"] / (n * held), 2) if held else None,
            "joint_fit_s_each": round(et.get("dualeval_s", 0) / joints, 2) if joints else None,
            "fits_share_of_wall": round(fits_s / ev["wall_s"], 3),
            "wall_over_its_fits": round(ev["wall_s"] / fits_s, 2) if fits_s else None, "refits": er.get("fits")})
    for name, key in (("bootstrap", "replicates_s"), ("contamination", "leave_one_out_s")):
        st = steps.get(name) or {}
        tm = st.get("timings") or {}
        n = (st.get("refit_count") or 0)
        if warm and tm.get(key) and n:
            out[name] = {"phase_over_refits_x_warm_fit": round(tm[key] / (n * warm), 2), "target": 1.5,
                         "met": tm[key] <= 1.5 * n * warm, "refits": n,
                         "wall_over_refits_x_warm_fit": round(st["wall_s"] / (n * warm), 2)}
    if "pandas_read" in steps and "import" in steps:
        out["import"] = {"wall_over_pandas": round(steps["import"]["wall_s"] / steps["pandas_read"]["wall_s"], 2),
                         "target": 3.0, "met": steps["import"]["wall_s"] <= 3.0 * steps["pandas_read"]["wall_s"],
                         "peak_rss_mb": steps["import"]["peak_rss_mb"], "memory_target_mb": 1536}
    out["peak_rss_mb_max"] = max((st.get("peak_rss_mb") or 0) for k, st in steps.items() if k != "pandas_read")
    out["peak_memory_met"] = out["peak_rss_mb_max"] <= 1536
    return out


def _previous(folder: Path, step: str) -> dict | None:
    try:
        return json.loads((folder / "last.json").read_text())["steps"].get(step)
    except (OSError, ValueError, KeyError):
        return None


def peers(folder: Path, args) -> dict:
    """Ours and theta-irt under the peers' protocol on the same y.npy (whole process each)."""
    res = {}
    truth = np.load(folder / "truth.npz")
    for who, python, script in (("ours", sys.executable, PEERS / "run_ours.py"),
                                ("theta-irt", str(Path(args.peers_venv) / "bin" / "python"),
                                 PEERS / "run_theta_irt.py")):
        if who == "theta-irt" and "theta_irt" not in args.only_set:
            continue
        if who == "ours" and "ours_peer" not in args.only_set:
            continue
        if not Path(python).exists():
            res[who] = {"status": "no peers virtualenv", "path": python}
            continue
        dest = folder / f"peer-{who}"
        shutil.rmtree(dest, ignore_errors=True)
        r = process([python, str(script), str(folder / "y.npy"), str(dest)], cwd=PEERS,
                    timeout=args.peer_timeout)
        r.pop("_stdout")
        if r["rc"] == 0:
            meta = json.loads((dest / "meta.json").read_text())
            r["fit_s"] = round(meta["fit_seconds"], 3)
            th = np.load(dest / "theta.npy")
            r["spearman_theta_truth"] = round(_spearman(th, truth["theta"]), 5)
            r["spearman_b_truth"] = round(_spearman(np.load(dest / "b.npy"), truth["b"]), 5)
        res[who] = r
        print(json.dumps({"peer": who, **r}, default=str), file=sys.stderr, flush=True)
    if "ours" in res and "theta-irt" in res and res["theta-irt"].get("rc") == 0 and res["ours"].get("rc") == 0:
        res["theta_irt_over_ours_wall"] = round(res["theta-irt"]["wall_s"] / res["ours"]["wall_s"], 1)
        res["theta_irt_over_ours_fit"] = round(res["theta-irt"]["fit_s"] / res["ours"]["fit_s"], 1)
    return res


def _spearman(x, y) -> float:
    from scipy.stats import spearmanr

    return float(spearmanr(x, y).statistic)


STEPS = ["pandas_read", "import", "fit_static", "warm_fit", "fit_joint", "coverage", "calibrate", "compress",
         "anomalies", "bootstrap", "audit_neartie", "contamination", "evaluate", "tui", "ours_peer", "theta_irt"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="2000x14000,5000x14000")
    ap.add_argument("--workdir", default=str(TMP / "bench_scale"))
    ap.add_argument("--only", default="", help="comma list of steps: " + ",".join(STEPS))
    ap.add_argument("--skip", default="")
    ap.add_argument("--bootstrap-B", type=int, default=20)
    ap.add_argument("--cutoffs", type=int, default=20, help="models with a training cutoff (contamination)")
    ap.add_argument("--peers-venv", default="/work/peers-venv")
    ap.add_argument("--peer-timeout", type=float, default=1200)
    args = ap.parse_args()
    args.only_set = (set(filter(None, args.only.split(","))) or set(STEPS)) - set(filter(None, args.skip.split(",")))
    report = {"script": "bench/bench_scale.py", "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "cpus": os.cpu_count(), "uptime_start": _uptime(), "commit": _commit(), "sizes": []}
    for size in args.sizes.split(","):
        m, n = (int(x) for x in size.lower().split("x"))
        report["sizes"].append(run_size(m, n, args))
    report["uptime_end"] = _uptime()
    print(json.dumps(report, indent=1, default=str))


def _uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def _commit() -> str | None:
    try:
        return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


if __name__ == "__main__":
    main()
