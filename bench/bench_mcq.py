"""Multiple-choice data as a curator meets it (issue 23): every shared multiple-choice set imported through the
CLI with chance = 1/choices, then, as whole CLI processes,

* ``compress B --seeds 10 --json`` with the stated chance and with ``--chance none`` (the 2PL): the targeted
  default, targeted_log and the paper's top Fisher against the random mean at every fraction (margins, and the
  fractions where each loses);
* ``anomalies B --protocol yes --chance stated|estimate --json``: the whole protocol table beside the oracle
  ceiling, with the stated chance and with one lower asymptote estimated from the data.

Sets: metabench ARC and TruthfulQA (c = .25: the Open LLM Leaderboard scored both as four-way multiple choice),
SAT12 (c = .2, five options), ChemBench (c = 1 / len(target_scores) on its multiple-choice questions, 0 on the
others).  Prints one JSON line per (set, command) with the wall time and the load average.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/bench_mcq.py [--shared ../shared] [--sets arc,sat12] [--skip-protocol]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]

IMPORTS = {
    "arc": ("metabench-arc", [["metabench", "metabench/arc-2PL-MAP-0.005-seed=1.responses.csv.gz"]]),
    "truthfulqa": ("metabench-truthfulqa", [["metabench", "metabench/truthfulqa-2PL-EAPsum-0.01-seed=1.responses.csv.gz"]]),
    "sat12": ("sat12", [["classic-irt", "classic_irt/SAT12_scored.csv", "--benchmark", "sat12"]]),
    "chembench": ("chembench", [["wide", "chembench/matrix_models_all_correct.csv.gz", "--benchmark", "chembench"]]),
}


def chance_file(name: str, data: Path, out: Path) -> Path:
    """An item-metadata CSV (key, chance) with 1/choices for the set's multiple-choice items."""
    if name in ("arc", "truthfulqa"):
        cols = pd.read_csv(next((data / "metabench").glob(f"{name}-*.responses.csv.gz")), index_col=0, nrows=1).columns
        frame = pd.DataFrame({"key": cols, "chance": 0.25})
    elif name == "sat12":
        cols = [c for c in pd.read_csv(data / "classic_irt" / "SAT12_scored.csv", nrows=1).columns if c != "person"]
        frame = pd.DataFrame({"key": cols, "chance": 0.2})
    else:
        cols = pd.read_csv(data / "chembench" / "matrix_models_all_correct.csv.gz", index_col=0, nrows=1).columns
        q = pd.read_csv(data / "chembench" / "questions.csv.gz")
        ts = dict(zip(q["key"], q["target_scores"]))
        frame = pd.DataFrame({"key": cols, "chance": [1 / len(json.loads(ts[k])) if isinstance(ts.get(k), str)
                                                      and ts[k].strip().startswith("{") else 0.0 for k in cols]})
    path = out / f"{name}_chance.csv"
    frame.to_csv(path, index=False)
    return path


def cli(db: Path, *args: str, cwd: Path | None = None) -> tuple[float, dict | None, str]:
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "benchloupe", *args, "--db", str(db)], cwd=cwd or ROOT,
                       capture_output=True, text=True)
    dt = time.perf_counter() - t
    if r.returncode != 0:
        raise SystemExit(f"failed: {' '.join(args)}: {r.stderr.strip()[-500:]}")
    try:
        return dt, json.loads(r.stdout), r.stderr
    except json.JSONDecodeError:
        return dt, None, r.stderr


def recovery(out: dict) -> dict:
    rows = pd.DataFrame(out["recovery"])
    return {"curves": rows.to_dict("records"), "versus_random": out["metrics"].get("versus_random"),
            "warnings": out["metrics"].get("warnings", [])}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=str(ROOT.parent / "shared"))
    ap.add_argument("--sets", default="arc,truthfulqa,sat12,chembench")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--skip-protocol", action="store_true")
    ap.add_argument("--skip-compress", action="store_true")
    ap.add_argument("--protocol-chance", default="stated,estimate",
                    help="the --chance of the anomalies runs (stated: 1/choices; estimate: a shared lower asymptote)")
    args = ap.parse_args()
    data = Path(args.shared) / "data"
    env_note = {"OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS")}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for name in args.sets.split(","):
            bench, imports = IMPORTS[name]
            db = tmp / f"{name}.db"
            for imp in imports:
                cli(db, "import", *imp, cwd=data)
            cli(db, "import", "items", str(chance_file(name, data, tmp)), "--benchmark", bench)
            runs = []
            if not args.skip_compress:
                for chance in ("stated", "none"):
                    runs.append((f"compress --chance {chance}", ["compress", bench, "--seeds", str(args.seeds),
                                                                 "--chance", chance, "--json"]))
            if not args.skip_protocol:
                for chance in args.protocol_chance.split(","):
                    runs.append((f"anomalies --protocol yes --chance {chance}",
                                 ["anomalies", bench, "--protocol", "yes", "--chance", chance, "--json"]))
            for label, argv in runs:
                load0 = os.getloadavg()[0]
                wall, out, _ = cli(db, *argv)
                rec = {"set": name, "command": label, "wall_s": round(wall, 1),
                       "load": [round(load0, 2), round(os.getloadavg()[0], 2)], **env_note,
                       "chance": {k: v for k, v in out["metrics"].items() if k.startswith("chance")}}
                if label.startswith("compress"):
                    rec.update(recovery(out))
                else:
                    rec["protocol"] = out["protocol"]
                    rec["metrics"] = {k: v for k, v in out["metrics"].items() if k.startswith("protocol")}
                print(json.dumps(rec, default=str), flush=True)


if __name__ == "__main__":
    main()
