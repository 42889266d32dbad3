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
- ``reference``: the differential test of issue 22 against a rebuild of the public reference in a scratch
  virtualenv outside the repository (``$BENCHLOUPE_NEARTIE_REFERENCE``, default ``../scratch-neartie-ref`` beside
  the checkout: ``venv/bin/python`` with the reference's pinned versions and the rebuilt package under ``src/``;
  skipped when absent): halves and Table 1 on ``$NEARTIE_POPULATIONS`` (200) generated populations full of ties
  (4-6 families, mostly single-model owners, accuracies on a few levels, 199 controls) and on every shared input
  (the two reference ``.npz`` inputs, metabench TruthfulQA by name, all three by architecture; 1,000 controls),
  ours in both tie modes.  Reference results are cached under the scratch folder by input digest.
- ``splits``: ``--split-seeds 20`` on metabench GSM8K and ARC as whole CLI processes (verdict and time).
- ``cli`` also times the reference's whole process on the same inputs in the same run when the scratch copy is
  there (``speedup_same_run``).

Usage: ``python bench/bench_neartie.py [gsm8k|sim|real|cli|full|protocol|reference|splits ...]`` (default: gsm8k sim).  BLAS threads follow
the environment (``OMP_NUM_THREADS`` / ``OPENBLAS_NUM_THREADS``, 1 unless set, as in the CLI), recorded in the output.
"""

from __future__ import annotations

import gzip
import hashlib
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

from dataclasses import replace  # noqa: E402

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
REFERENCE_OUT = ROOT.parent / "shared" / "reference" / "outputs" / "neartie"


def reference_copy() -> Path | None:
    """The scratch rebuild of the public reference (outside the repository), or None when absent."""
    where = Path(os.environ.get("BENCHLOUPE_NEARTIE_REFERENCE", ROOT.parent / "scratch-neartie-ref"))
    return where if (where / "venv" / "bin" / "python").exists() and (where / "src").is_dir() else None


def write_npz(path: Path, y: np.ndarray, ids, families, owners, groups) -> Path:
    """The reference's input format (REFERENCE-IMPLEMENTATIONS.md B.8): responses items x models, labels as
    string arrays; only models with a family (the reference refuses a missing one; ours leaves them out)."""
    keep = [i for i, f in enumerate(families) if f]
    np.savez(path, responses=np.ascontiguousarray(y[keep].T.astype(np.int8)),
             model_id=np.array([ids[i] for i in keep]), family=np.array([families[i] for i in keep]),
             owner=np.array([owners[i] for i in keep]), item_group=np.array(groups))
    return path


def tie_population(seed: int):
    """A population built to hit the split's edges: 4-6 families, mostly single-model owners (some with more
    than the cap of 5, some in two families), every model's correct count on one of a few levels (adjacent
    pairs of counts on 100-160 items, so exact accuracy ties and one-item near ties are everywhere); which
    items a model gets right follows a 2-factor model with family DIF (Gumbel top-k)."""
    rng = np.random.default_rng(seed)
    fams = ["gemma", "llama", "mistral", "phi", "qwen", "yi"][:int(rng.integers(4, 7))]
    n_items = int(rng.integers(100, 161))
    centres = rng.choice(np.arange(n_items // 4, 3 * n_items // 4), size=int(rng.integers(2, 5)), replace=False)
    levels = np.unique(np.concatenate([centres, centres + 1]))
    ids, families, owners, counts = [], [], [], []
    owner = 0
    for f in fams:
        have = 0
        while have < int(rng.integers(22, 34)):
            span = [f] if rng.random() < 0.85 else [f, str(rng.choice(fams))]
            size = 1 if rng.random() < 0.7 else int(rng.integers(2, 8))
            for g in dict.fromkeys(span):
                for j in range(size):
                    ids.append(f"owner{owner:03d}/{g}-{j}")
                    families.append(g)
                    owners.append(f"owner{owner:03d}")
                    counts.append(int(rng.choice(levels)))
            have += size
            owner += 1
    code = np.array([fams.index(f) for f in families])
    easy = rng.normal(0, 1, n_items)
    load = rng.normal(0, 0.8, (n_items, 2))
    dif = rng.normal(0, 0.7, (n_items, len(fams))) * (rng.random(n_items) < 0.3)[:, None]
    theta = rng.normal(0, 1, (len(ids), 2))
    score = easy + theta @ load.T + dif[:, code].T + rng.gumbel(size=(len(ids), n_items))
    top = np.argsort(-score, axis=1)
    y = np.zeros((len(ids), n_items), dtype=np.int8)
    for i, k in enumerate(counts):
        y[i, top[i, :k]] = 1
    groups = [f"group{i % int(rng.integers(1, 4))}" for i in range(n_items)]
    return y, ids, families, owners, groups


TABLE1 = ("k_discovery", "k_validation", "eligible_pairs", "reversals", "rate", "random_median", "excess_pp", "p",
          "status")


def _ours(y, ids, families, owners, groups, config: AuditConfig) -> dict:
    from benchloupe.engine.common import EngineError
    from benchloupe.engine.neartie.population import population_with_split

    start = time.perf_counter()
    keep = [i for i, f in enumerate(families) if f]
    try:
        res = run_audit(y, ids, families, owners, groups, config)
    except EngineError as exc:
        out = {"error": str(exc).splitlines()[0], "seconds": time.perf_counter() - start}
        try:  # where the audit refuses after the split (e.g. no near-tie pairs), the halves still compare
            correct = y.sum(axis=1)
            pop, _ = population_with_split(correct / y.shape[1], ids, families, owners, config, correct=correct,
                                           observed=y.shape[1])
            out["half"] = [pop["half"][i] for i in keep]
        except EngineError:
            pass
        return out
    half = res.tables["population"]["half"]
    return {"half": [half[i] for i in keep], "table1": res.table1_row(), "seconds": time.perf_counter() - start,
            "split": {k: res.summary[k] for k in ("split_decisions", "split_ties", "split_knife_edges")}}


def _agree(ref: dict, ours: dict) -> dict:
    """Which of halves / K / pairs / the whole Table 1 agree (exactly; tau-b to 1e-12: scipy vs ours)."""
    if "error" in ours and ref.get("table1", {}).get("status") == "insufficient_eligible_pairs" \
            and ours["error"].startswith("no different-owner, different-family pairs"):
        # the reference reports the status, we refuse with one line (docs/NEARTIE.md): the same verdict
        same = ref["half"] == ours.get("half")
        return {"refused": False, "insufficient": True, "halves": same, "k": same, "pairs": same, "table1": same,
                "tau_b": same}
    if "error" in ref or "error" in ours:
        both = "error" in ref and "error" in ours
        return {"refused": both, "halves": both, "k": both, "pairs": both, "table1": both, "tau_b": both}
    a, b = ref["table1"], ours["table1"]
    return {"refused": False, "insufficient": False, "halves": ref["half"] == ours["half"],
            "k": (a["k_discovery"], a["k_validation"]) == (b["k_discovery"], b["k_validation"]),
            "pairs": a["eligible_pairs"] == b["eligible_pairs"],
            "table1": all(a[k] == b[k] for k in TABLE1),
            "tau_b": abs(a["tau_b"] - b["tau_b"]) <= 1e-12}


def _reference_runs(copy: Path, jobs: list[dict]) -> dict:
    """Reference results by job id, from the cache or one driver process for the rest."""
    cache_path = copy / "work" / "cache.json"
    cache = json.loads(cache_path.read_text()) if cache_path.exists() else {}
    todo = [j for j in jobs if j["key"] not in cache]
    if todo:
        env = {**os.environ, "PYTHONPATH": str(copy / "src"), "OPENBLAS_NUM_THREADS": "2"}
        proc = subprocess.Popen([str(copy / "venv" / "bin" / "python"), str(ROOT / "bench" / "neartie_reference_driver.py")],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        by_id = {j["id"]: j for j in todo}
        proc.stdin.write("".join(json.dumps({k: j[k] for k in ("id", "npz", "config")}) + "\n" for j in todo))
        proc.stdin.close()
        for line in proc.stdout:
            out = json.loads(line)
            cache[by_id[out["id"]]["key"]] = out
            cache_path.write_text(json.dumps(cache))
        proc.wait()
    return {j["id"]: cache[j["key"]] for j in jobs}


def _digest(path: Path, config: dict) -> str:
    return hashlib.sha256(path.read_bytes() + json.dumps(config, sort_keys=True).encode()).hexdigest()


def shared_inputs(work: Path) -> dict[str, tuple]:
    """Every shared input: the reference's two .npz files, and metabench's three sets by name and by arch."""
    out = {}
    for name in ("arc", "gsm8k"):
        d = np.load(REFERENCE_OUT / name / "input.npz")
        out[f"reference {name}"] = (d["responses"].T, [str(x) for x in d["model_id"]], [str(x) for x in d["family"]],
                                    [str(x) for x in d["owner"]], [str(x) for x in d["item_group"]])
    for name, source in (("truthfulqa", "name"), ("arc", "arch"), ("gsm8k", "arch"), ("truthfulqa", "arch")):
        out[f"metabench {name} ({source})"] = load_metabench(name, source)
    return out


def case_reference() -> dict:
    copy = reference_copy()
    if copy is None:
        return {"skipped": "no scratch copy of the reference (see the module docstring)"}
    work = copy / "work"
    work.mkdir(exist_ok=True)
    n = int(os.environ.get("NEARTIE_POPULATIONS", "200"))
    inputs, jobs = {}, []
    for seed in range(n):
        args = tie_population(seed)
        path = write_npz(work / f"tie-{seed}.npz", *args)
        config = {"min_family_models": 8, "resamples": 199}
        inputs[f"tie {seed}"] = (args, AuditConfig(min_family_models=8, controls=199, split_seeds=0), "random")
        jobs.append({"id": f"tie {seed}", "npz": str(path), "config": config, "key": _digest(path, config)})
    for label, args in (shared_inputs(work) if os.environ.get("NEARTIE_SHARED", "1") != "0" else {}).items():
        path = write_npz(work / (label.replace(" ", "-").replace("(", "").replace(")", "") + ".npz"), *args)
        keep = [i for i, f in enumerate(args[2]) if f]
        args = (args[0][keep], [args[1][i] for i in keep], [args[2][i] for i in keep], [args[3][i] for i in keep],
                args[4])
        inputs[label] = (args, AuditConfig(split_seeds=0), "shared")
        jobs.append({"id": label, "npz": str(path), "config": {}, "key": _digest(path, {})})
    start = time.perf_counter()
    ref = _reference_runs(copy, jobs)
    ref_s = time.perf_counter() - start
    rows, detail = {}, []
    for label, (args, config, kind) in inputs.items():
        r = ref[label]
        entry = {"input": label, "reference": {k: r.get(k) for k in ("table1", "error", "seconds", "capped_models")}}
        for mode in ("float", "exact"):
            ours = _ours(*args, replace(config, anchor_ties=mode))
            entry[mode] = {"agree": _agree(r, ours), **{k: ours.get(k) for k in ("table1", "error", "split")}}
        detail.append(entry)
        group = "random populations" if kind == "random" else label
        row = rows.setdefault(group, {"inputs": 0, "refused_both": 0, "insufficient_both": 0, "split_ties": 0,
                                      "split_knife_edges": 0,
                                      **{f"{m}_{k}": 0 for m in ("float", "exact")
                                         for k in ("halves", "k", "pairs", "table1", "tau_b")}})
        row["inputs"] += 1
        row["refused_both"] += int(entry["float"]["agree"]["refused"])
        row["insufficient_both"] += int(entry["float"]["agree"].get("insufficient", False))
        split = entry["float"].get("split") or {}
        row["split_ties"] += split.get("split_ties", 0)
        row["split_knife_edges"] += split.get("split_knife_edges", 0)
        for m in ("float", "exact"):
            for k in ("halves", "k", "pairs", "table1", "tau_b"):
                row[f"{m}_{k}"] += int(entry[m]["agree"][k])
    return {"reference": str(copy.name), "reference_seconds": ref_s, "populations": n, "agreement": rows,
            "float_disagreements": [d for d in detail if not _all_agree(d["float"]["agree"])],
            "exact_disagreements": [d["input"] for d in detail if not _all_agree(d["exact"]["agree"])],
            "detail": detail}


def _all_agree(a: dict) -> bool:
    return a["refused"] or all(a[k] for k in ("halves", "k", "pairs", "table1", "tau_b"))


def reference_process_seconds(copy: Path, npz: Path) -> tuple[float, float]:
    """Wall and CPU seconds of one whole reference process (interpreter, imports, load, audit) on one input."""
    env = {**os.environ, "PYTHONPATH": str(copy / "src"), "OPENBLAS_NUM_THREADS": "2"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([str(copy / "venv" / "bin" / "python"), str(ROOT / "bench" / "neartie_reference_driver.py")],
                   input=json.dumps({"id": "timing", "npz": str(npz), "config": {}}) + "\n", text=True, env=env,
                   check=True, capture_output=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.perf_counter() - start, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def case_splits() -> list[dict]:
    """``--split-seeds 20`` (the primary audit again under 20 other owner splits) on GSM8K and ARC, whole CLI."""
    import tempfile

    rows = []
    with tempfile.TemporaryDirectory() as d:
        for name in ("gsm8k", "arc"):
            db = _imported(Path(d), name)
            load = os.getloadavg()
            wall, out = _cli(db, name, "--split-seeds", "20")
            st = out["summary"]["split_stability"]
            rows.append({"benchmark": name, "seconds": wall, "cpu_s": out["cpu_s"], "load_average_before": load,
                         "verdict": out["split_verdict"], "primary_p": st["primary_p"], "p_min": st["p_min"],
                         "p_median": st["p_median"], "p_max": st["p_max"],
                         "share_significant": st["share_significant"], "table1": out["table1"],
                         "split": {k: out["summary"][k] for k in ("split_decisions", "split_ties",
                                                                  "split_knife_edges")}})
    return rows


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
            same_run = same_cpu = None
            copy = reference_copy()
            if copy is not None:  # the reference's whole process on the same input, in this run
                npz = REFERENCE_OUT / name / "input.npz"
                if not npz.exists():
                    (copy / "work").mkdir(exist_ok=True)
                    npz = write_npz(copy / "work" / f"timing-{name}.npz", *load_metabench(name))
                same_run, same_cpu = reference_process_seconds(copy, npz)
            rows.append({"benchmark": name, "reference_same_run_s": same_run, "reference_same_run_cpu_s": same_cpu,
                         "speedup_same_run": same_run / min(walls) if same_run else None,
                         "speedup_same_run_cpu": same_cpu / min(cpus) if same_cpu else None,
                         "load_average": os.getloadavg(), "cli_best_s": min(walls), "cli_times_s": walls, "cli_cpu_best_s": min(cpus),
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
                         "full": case_full, "protocol": case_protocol, "reference": case_reference,
                         "splits": case_splits}[case]()
    out["load_average_after"] = os.getloadavg()
    print(json.dumps(out, indent=1, default=float))


if __name__ == "__main__":
    main(sys.argv[1:])
