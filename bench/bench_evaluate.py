"""Table 2 held-out comparison (issue 14): ``heldout_comparison`` (3 splits x 4 methods, 20 % of questions held out)
on AlpacaEval 2 (58 x 805 preferences as the arena reward, binarised at 1.5 as the stand-in static source, the
reference's own setup), with the official leaderboard's win rate as the external (Public rho) ranking.  Prints JSON
with the wall time, the load average around it and the table.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/bench_evaluate.py [--shared ../shared]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import bench_joint  # noqa: E402
import pandas as pd  # noqa: E402

from benchloupe.engine.joint import JointConfig, heldout_comparison  # noqa: E402
from benchloupe.jobs.calibration import read_external  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=str(ROOT.parent / "shared"))
    ap.add_argument("--variant", default="paper")
    args = ap.parse_args()
    bench_joint.DATA = Path(args.shared) / "data"
    S, A, names = bench_joint.alpacaeval()
    board = bench_joint.DATA / "alpacaeval" / "leaderboard_AE2_weighted_alpaca_eval_gpt4_turbo.csv"
    ext = read_external(f"{board}:win_rate", pd.DataFrame({"name": names, "aliases": ""}))
    external = ext.scores
    load0 = os.getloadavg()[0]
    t = time.perf_counter()
    raw, table = heldout_comparison(S, A, JointConfig(variant=args.variant), splits=3, holdout=0.2, seed=0,
                                    external=external)
    secs = time.perf_counter() - t
    print(json.dumps({"case": f"evaluate AlpacaEval 2 {A.shape} 3 splits x 4 methods ({args.variant})",
                      "wall_s": round(secs, 2), "load": [round(load0, 2), round(os.getloadavg()[0], 2)],
                      "heldout_pairs_per_split": raw["heldout_pairs"].iloc[0].item(),
                      "external": ext.metrics(),
                      "table": table.round(4).to_dict(orient="records")}, indent=1))


if __name__ == "__main__":
    main()
