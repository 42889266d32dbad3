#!/usr/bin/env bash
# Issue 16: the large fits on CUDA when a device is present; prints one JSON object on stdout.
# Run from the repository root on a machine with an NVIDIA GPU and a CUDA build of torch:
#   bash bench/gpu_check.sh            (PYTHON=... to choose the interpreter)
# Without a GPU it prints {"cuda": false, ...} and exits 0, so it is safe anywhere.
# What it measures (best of 3 each, load average noted): one fused static pass (engine/backend.py) on numpy/CPU and
# torch/CUDA at several sizes (the crossover that sets backend.CUDA_MIN_CELLS), and the static 2PL 5,000 x 14,000
# fit on both, with objective agreement (relative difference <= 1e-6) and identical rankings; the near-tie primary
# audit on the simulated 5,000 x 14,000 matrix (bench_neartie.simulate) on numpy and on CUDA (control scoring, DIF
# Newton and spectral products on the device, engine/dense.py), with K / anchors / pair sets compared and the largest
# DIF difference; the C.6 coverage draws (1,000 Laplace draws on 12 x 41,871, bench_coverage_draws' data) on both.
# GPU_CHECK_PARTS=passes,fits,neartie,coverage (default: all) runs only those parts, to fit a short device lease.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
[ -x .venv/bin/python ] && [ -z "${PYTHON:-}" ] && PY=.venv/bin/python
export BENCHLOUPE_PROBE_CUDA=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
exec "$PY" - <<'PY'
import json, os, sys, time
sys.path.insert(0, "bench")
import numpy as np
out = {"script": "bench/gpu_check.sh", "load": round(os.getloadavg()[0], 2)}
try:
    import torch
except ImportError:
    print(json.dumps({**out, "cuda": False, "why": "torch is not installed (pip install -e '.[gpu]')"}))
    sys.exit(0)
out["torch"] = torch.__version__
if not torch.cuda.is_available():
    print(json.dumps({**out, "cuda": False, "why": "torch sees no CUDA device"}))
    sys.exit(0)
out["cuda"] = True
out["device_name"] = torch.cuda.get_device_name(0)
from benchloupe.engine.backend import Backend, fused_pass
from benchloupe.engine.joint import JointConfig, StaticData, fit_joint
from benchloupe.engine.stats import spearman
from bench_static_2pl import simulate

def best(fn, n=3):
    ts, r = [], None
    for _ in range(n):
        torch.cuda.synchronize(); t = time.perf_counter(); r = fn(); torch.cuda.synchronize()
        ts.append(time.perf_counter() - t)
    return round(min(ts), 4), r

parts = set(os.environ.get("GPU_CHECK_PARTS", "passes,fits,neartie,coverage").split(","))
out["parts"] = sorted(parts)
passes = []
rng = np.random.default_rng(0)
for m, n in [] if "passes" not in parts else [(500, 1000), (1000, 2000), (2000, 2000), (2000, 5000), (5000, 14000)]:
    th, b, a = rng.normal(size=m), rng.normal(size=n), np.exp(rng.normal(0, .3, n))
    y = (rng.random((m, n)) < 0.5).astype(np.int8)
    row = {"shape": [m, n]}
    for name, bk in [("numpy_f64", Backend("numpy", "cpu", "float64")), ("numpy_f32", Backend("numpy", "cpu", "float32")),
                     ("cuda_f32", Backend("torch", "cuda", "float32")), ("cuda_f64", Backend("torch", "cuda", "float64"))]:
        fused_pass(y, None, th, b, a, backend=bk)  # warm-up (device copy, kernels)
        row[name + "_s"] = best(lambda bk=bk: fused_pass(y, None, th, b, a, backend=bk))[0]
    passes.append(row)
out["fused_pass"] = passes
fits = []
for m, n in [] if "fits" not in parts else [(2000, 2000), (5000, 14000)]:
    d = simulate(m, n, 0)
    S = StaticData(d["y"], np.ones(d["y"].shape, bool))
    row = {"shape": [m, n]}
    res = {}
    for name, dev in [("cpu", "cpu"), ("cuda", "cuda")]:
        secs, r = best(lambda dev=dev: fit_joint(S, None, JointConfig(mode="static"), device=dev), n=3 if m * n < 1e7 else 2)
        res[name] = r
        row[name] = {"fit_s": secs, "objective": r.objective, "spearman_truth": spearman(r.theta, d["theta"]),
                     "provenance": r.provenance}
    row["objective_rel_diff"] = abs(res["cuda"].objective - res["cpu"].objective) / abs(res["cpu"].objective)
    row["same_ranking"] = bool(np.array_equal(res["cuda"].ranking(), res["cpu"].ranking()))
    fits.append(row)
out["static_fits"] = fits
if "neartie" in parts:
    import resource
    from bench_neartie import simulate as simulate_audit
    from benchloupe.engine.neartie import AuditConfig, run_audit
    args = simulate_audit()
    row = {"case": "near-tie primary audit, simulated 5000x14000, 5 families, 57 groups", "target_s": 30}
    res = {}
    for name, dev in [("cpu", "cpu"), ("cuda", "cuda")]:
        t0 = time.perf_counter()
        res[name] = run_audit(*args, AuditConfig(), device=dev)
        torch.cuda.synchronize()
        row[name + "_s"] = round(time.perf_counter() - t0, 3)
    row["cuda_peak_gb"] = round(torch.cuda.max_memory_allocated() / 1024**3, 2)
    row["peak_rss_gb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2, 2)
    a, b = res["cpu"], res["cuda"]
    row["same_k"] = [fa.selection.k == fb.selection.k for fa, fb in zip(a.fold_results, b.fold_results)]
    row["same_anchors"] = [bool(np.array_equal(fa.purification.selected, fb.purification.selected))
                           for fa, fb in zip(a.fold_results, b.fold_results)]
    row["max_abs_dif_diff"] = max(float(np.max(np.abs(fa.purification.final.dif_range - fb.purification.final.dif_range)))
                                  for fa, fb in zip(a.fold_results, b.fold_results))
    row["same_pairs"] = bool(a.pairs.equals(b.pairs))
    row["same_summary"] = a.summary == b.summary
    row["table1_cuda"] = b.table1_row()
    out["neartie_sim"] = row
if "coverage" in parts:
    from bench_coverage_trust import _sim
    from benchloupe.engine import coverage
    from benchloupe.engine.coverage import resolution
    from benchloupe.engine.irt import fit_1pl
    _, _, y = _sim(12, 41871, seed=1)
    yf = y.astype(float)
    fit = fit_1pl(yf)
    locs = resolution.gap_locations(coverage.coverage_report(fit.b), 20)
    cfg = coverage.UncertaintyConfig(n_draws=1000, max_values=1000 * y.shape[1])
    row = {"case": "C.6 coverage draws, 1000 Laplace draws on 12 x 41871", "target_s": 2}
    res = {}
    for name in ("cpu", "cuda"):
        secs, res[name] = best(lambda name=name: coverage.metric_uncertainty(fit, config=cfg, correct=yf, locations=locs,
                                                                            device=name))
        row[name + "_s"] = secs
    d_cpu, d_gpu = res["cpu"].draws, res["cuda"].draws
    row["max_rel_diff"] = max(float(np.max(np.abs(d_gpu[c] - d_cpu[c]) / np.abs(d_cpu[c]).clip(1e-300)))
                              for c in ("ddm", "max_gap", "topk_sum"))
    out["coverage_draws"] = row
print(json.dumps(out, indent=1, default=str))
PY
