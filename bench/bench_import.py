"""Parse speed of the importers (issue 2 figures), printed as JSON.

1. A generated 5,000-model x 14,000-item 0/1 wide CSV (the largest matrix size in the near-tie paper,
   002_1465fa67fc751bc0.txt), written to /tmp, parsed with ``parse_wide`` (target: well under 40 s on
   2 cores for the parse; the issue's 60 s covers parse + database write).
2. Every ../shared/data set with its documented options (target: under 10 s each).

Best of 3 runs each (the machine is shared, timings are noisy). Parsing only: the database write is the
store's benchmark. Usage: ``python bench/bench_import.py [--models 5000 --items 14000 --repeats 3]``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import tempfile
import time
from pathlib import Path

import numpy as np

from benchloupe.store.importers.arena import parse_arena
from benchloupe.store.importers.itemmeta import parse_item_metadata
from benchloupe.store.importers.long import parse_long
from benchloupe.store.importers.wide import parse_classic_irt, parse_metabench, parse_wide

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def write_wide(path: Path, n_models: int, n_items: int, missing: float = 0.0, seed: int = 0) -> None:
    """A 0/1 wide CSV with a model column from a seeded generator; a ``missing`` share of cells is empty."""
    rng = np.random.default_rng(seed)
    with open(path, "wb") as fh:
        fh.write(("model," + ",".join(f"item_{j:05d}" for j in range(n_items)) + "\n").encode())
        line = np.full(2 * n_items, ord(","), dtype=np.uint8)
        line[-1] = ord("\n")
        keep = np.ones(2 * n_items, dtype=bool)
        for i in range(n_models):
            line[0::2] = rng.integers(0, 2, n_items, dtype=np.uint8) + ord("0")
            keep[0::2] = rng.random(n_items) >= missing
            fh.write(f"org/model-{i:05d},".encode() + line[keep].tobytes())


def best_of(repeats: int, fn) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return min(times), result


def shared_jobs() -> dict[str, tuple]:
    d = DATA
    chem_long = dict(model_col="respondent", item_col="question_name", correct_col="all_correct")
    jobs = {
        "chembench matrix": (parse_wide, d / "chembench/matrix_models_all_correct.csv.gz", {}),
        "chembench responses_long": (parse_long, d / "chembench/responses_long.csv.gz", chem_long),
        "chembench questions": (
            parse_item_metadata,
            d / "chembench/questions.csv.gz",
            dict(text_col="input", answer_col="target", group_col="topic_dir"),
        ),
        "alpacaeval AE2 rewards": (
            parse_arena,
            d / "alpacaeval/annotations_ae2_long.csv.gz",
            dict(
                model_col="generator_2",
                prompt_col="instruction_id",
                reward_col="preference",
                reward_model_col="annotator",
                group_col="dataset",
            ),
        ),
        "alpacaeval instructions": (
            parse_item_metadata,
            d / "alpacaeval/instructions.csv.gz",
            dict(key_col="instruction_id", text_col="instruction", group_col="dataset"),
        ),
    }
    for resp in sorted((d / "metabench").glob("*.responses.csv.gz")):
        b = resp.name.split("-")[0]
        jobs[f"metabench {b}"] = (
            parse_metabench,
            resp,
            dict(models_file=d / "metabench/open-llm-leaderboard.csv.gz"),
        )
        jobs[f"metabench {b} items"] = (
            parse_item_metadata,
            Path(str(resp).replace(".responses.", ".items.")),
            dict(key_col="item", text_col="prompt"),
        )
    for name in ("LSAT6_patterns", "LSAT7_patterns", "LSAT6_expanded", "LSAT7_expanded", "SAT12_scored"):
        jobs[f"classic {name}"] = (parse_classic_irt, d / f"classic_irt/{name}.csv", {})
    jobs["classic ASVAB_group_patterns"] = (
        parse_classic_irt,
        d / "classic_irt/ASVAB_group_patterns.csv",
        dict(freq_col="White_Male,White_Female,Black_Male,Black_Female"),
    )
    return {k: v for k, v in jobs.items() if v[1].exists()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=int, default=5000)
    ap.add_argument("--items", type=int, default=14000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    out: dict = {"cpus": os.cpu_count(), "repeats": args.repeats, "statistic": "best of repeats, seconds"}
    out["wide"] = {}
    with tempfile.TemporaryDirectory(prefix="bench_import_") as tmp:
        # complete 0/1 matrix: numpy fast path; 2 % empty cells: pandas C-tokenizer path
        for label, missing in (("complete", 0.0), ("2pct_missing", 0.02)):
            path = Path(tmp) / f"wide_{label}.csv"
            t0 = time.perf_counter()
            write_wide(path, args.models, args.items, missing=missing)
            generate_s = time.perf_counter() - t0
            seconds, parsed = best_of(args.repeats, lambda path=path: parse_wide(path))
            out["wide"][label] = {
                "models": args.models,
                "items": args.items,
                "csv_mb": round(path.stat().st_size / 1e6, 1),
                "generate_s": round(generate_s, 2),
                "parse_s": round(seconds, 2),
                "observed_cells": int((parsed.correct >= 0).sum()),
            }
            path.unlink()
    out["shared"] = {}
    for name, (fn, path, opts) in shared_jobs().items():
        seconds, parsed = best_of(args.repeats, lambda fn=fn, path=path, opts=opts: fn(path, **opts))
        out["shared"][name] = {"parse_s": round(seconds, 3), **parsed.counts()}
    out["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
