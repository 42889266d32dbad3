"""Store figures of issue 2: import a 5,000-model x 14,000-item 0/1 wide CSV (<= 60 s), load it back as a
numpy matrix (<= 1 s), database size (<= 150 MB); and every ../shared/data set imported (< 10 s each).

Prints one JSON object. Usage: python bench/bench_store.py [--models 5000 --items 14000] [--skip-shared]
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

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
sys.path.insert(0, str(ROOT))

from benchloupe.store import read  # noqa: E402
from benchloupe.store.db import connect  # noqa: E402

# The documented commands (README / docs/IMPORT-FORMATS.md) for every ../shared/data set.
SHARED_IMPORTS = [
    ("chembench", ["wide", "chembench/matrix_models_all_correct.csv.gz", "--benchmark", "chembench",
                   "--models-file", "chembench/respondents.csv"]),
    ("chembench-items", ["items", "chembench/questions.csv.gz", "--benchmark", "chembench", "--text-col", "input",
                         "--answer-col", "target", "--group-col", "topic_dir"]),
    ("chembench-humans", ["long", "chembench/responses_long.csv.gz", "--benchmark", "chembench-humans",
                          "--model-col", "respondent", "--item-col", "question_name", "--correct-col", "all_correct",
                          "--models-file", "chembench/respondents.csv"]),
    *[(f"metabench-{b}", ["metabench", f"metabench/{b}-{cfg}.responses.csv.gz", "--models-file",
                          "metabench/open-llm-leaderboard.csv.gz"])
      for b, cfg in (("arc", "2PL-MAP-0.005-seed=1"), ("gsm8k", "2PL-EAPsum-0.001-seed=1"),
                     ("truthfulqa", "2PL-EAPsum-0.01-seed=1"))],
    *[(f"metabench-{b}-items", ["items", f"metabench/{b}-{cfg}.items.csv.gz", "--benchmark", f"metabench-{b}",
                                "--key-col", "item", "--text-col", "prompt"])
      for b, cfg in (("arc", "2PL-MAP-0.005-seed=1"), ("gsm8k", "2PL-EAPsum-0.001-seed=1"),
                     ("truthfulqa", "2PL-EAPsum-0.01-seed=1"))],
    ("alpacaeval2", ["arena", "alpacaeval/annotations_ae2_long.csv.gz", "--benchmark", "alpacaeval2",
                     "--model-col", "generator_2", "--item-col", "instruction_id", "--reward-col", "preference",
                     "--reward-model-col", "annotator", "--group-col", "dataset"]),
    ("alpacaeval2-items", ["items", "alpacaeval/instructions.csv.gz", "--benchmark", "alpacaeval2", "--key-col",
                           "instruction_id", "--text-col", "instruction", "--group-col", "dataset"]),
    ("lsat6", ["classic-irt", "classic_irt/LSAT6_patterns.csv", "--benchmark", "lsat6"]),
    ("lsat7", ["classic-irt", "classic_irt/LSAT7_patterns.csv", "--benchmark", "lsat7"]),
    ("sat12", ["classic-irt", "classic_irt/SAT12_scored.csv", "--benchmark", "sat12"]),
    ("asvab", ["classic-irt", "classic_irt/ASVAB_group_patterns.csv", "--benchmark", "asvab", "--freq-col",
               "White_Male,White_Female,Black_Male,Black_Female"]),
]


def cli(db: Path, *args: str) -> float:
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "benchloupe", "import", *args, "--db", str(db)], cwd=DATA,
                       capture_output=True, text=True)
    dt = time.perf_counter() - t
    if r.returncode != 0:
        raise SystemExit(f"import failed: {' '.join(args)}: {r.stderr.strip()}")
    return dt


def big_matrix(tmp: Path, n_models: int, n_items: int) -> dict:
    rng = np.random.default_rng(0)
    theta = rng.normal(size=(n_models, 1)).astype(np.float32)
    b = rng.normal(size=(1, n_items)).astype(np.float32)
    csv = tmp / "big.csv"
    with open(csv, "wb") as fh:
        fh.write(("model," + ",".join(f"i{j}" for j in range(n_items)) + "\n").encode())
        for start in range(0, n_models, 500):
            p = 1 / (1 + np.exp(-(theta[start:start + 500] - b)))
            y = (rng.random(p.shape, dtype=np.float32) < p).astype(np.uint8)
            for k, row in enumerate(y):
                line = np.empty(2 * n_items, np.uint8)
                line[0::2] = row + ord("0")
                line[1::2] = ord(",")
                line[-1] = ord("\n")
                fh.write(f"m{start + k},".encode() + line.tobytes())
    db = tmp / "big.db"
    t_import = cli(db, "wide", str(csv), "--benchmark", "big")
    conn = connect(db)
    loads = []
    for _ in range(3):
        t = time.perf_counter()
        sm = read.load_static(conn, "big")
        loads.append(time.perf_counter() - t)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return {"models": n_models, "items": n_items, "csv_mb": round(csv.stat().st_size / 1e6, 1),
            "import_s": round(t_import, 2), "load_s_best_of_3": round(min(loads), 3),
            "db_mb": round(db.stat().st_size / 1e6, 1), "shape_loaded": list(sm.shape),
            "limits": {"import_s": 60, "load_s": 1, "db_mb": 150}}


def shared_sets(tmp: Path) -> dict:
    if not DATA.exists():
        return {"skipped": f"{DATA} absent"}
    db = tmp / "shared.db"
    return {name: round(cli(db, *args), 2) for name, args in SHARED_IMPORTS}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", type=int, default=5000)
    ap.add_argument("--items", type=int, default=14000)
    ap.add_argument("--skip-shared", action="store_true")
    ap.add_argument("--skip-big", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        out = {"machine": f"{os.cpu_count()} cores", "note": "import times are whole CLI processes (start-up included)"}
        if not args.skip_big:
            out["wide_matrix"] = big_matrix(tmp, args.models, args.items)
        if not args.skip_shared:
            out["shared_import_s"] = shared_sets(tmp)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
