"""Coverage speed and real-data figures (paper 3; issue 5).

    python bench/bench_coverage.py                # speed: 1PL fit + coverage + diagnostics, 200 x 14,000
    python bench/bench_coverage.py --real-data    # DDM / gaps / diagnostics / Algorithm 1 on ../shared/data

Prints JSON (one object) and, with --markdown, the Markdown table recorded in docs/COVERAGE.md.
Timings are the best of ``--repeats`` runs (the machine is shared; the best run is the least disturbed).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchloupe.engine.coverage import (  # noqa: E402
    coverage_report,
    diagnostics,
    metric_uncertainty,
    quantile_match,
)
from benchloupe.engine.irt import fit_1pl  # noqa: E402

DATA = ROOT.parent / "shared" / "data"


def _best(fn, repeats):
    best, out = float("inf"), None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def speed(models: int, items: int, repeats: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    theta = rng.normal(0, 1, models)
    b = rng.normal(0, 1.2, items)
    y = (rng.random((models, items)) < 1 / (1 + np.exp(-(theta[:, None] - b)))).astype(float)
    y[rng.random(y.shape) < 0.02] = np.nan  # 2% missing cells, as real matrices have
    t_fit, fit = _best(lambda: fit_1pl(y), repeats)
    t_cov, _ = _best(lambda: coverage_report(fit.b, seed=seed), repeats)
    t_diag, _ = _best(lambda: diagnostics(y), repeats)

    def total():
        f = fit_1pl(y)
        return coverage_report(f.b, seed=seed), diagnostics(y)

    t_total, (rep, diag) = _best(total, repeats)
    y_mc = (rng.random((models, items)) < 0.25 + 0.75 / (1 + np.exp(-(theta[:, None] - b)))).astype(float)
    t_guess, fit_g = _best(lambda: fit_1pl(y_mc, chance=0.25), repeats)
    return {
        "shape": [models, items],
        "repeats": repeats,
        "blas_threads_env": os.environ.get("OPENBLAS_NUM_THREADS", "default"),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "fit_1pl_s": round(t_fit, 3),
        "fit_iterations": fit.iterations,
        "coverage_report_s": round(t_cov, 3),
        "diagnostics_s": round(t_diag, 3),
        "total_fit_coverage_diagnostics_s": round(t_total, 3),
        "fit_1pl_guessing_s": round(t_guess, 3),
        "fit_guessing_iterations": fit_g.iterations,
        "spearman_b": float(pd.Series(fit.b).corr(pd.Series(b), method="spearman")),
        "ddm": rep.ddm,
        "diagnostics_passed": diag.passed,
    }


# ------------------------------------------------------------------------------------------- real data


def _chembench():
    m = pd.read_csv(DATA / "chembench" / "matrix_models_all_correct.csv.gz", index_col=0)
    m = m.drop(index="random_baseline")  # a random guesser, not a model: not used for difficulty
    q = pd.read_csv(DATA / "chembench" / "questions.csv.gz").set_index("key")
    topic = q["topic_dir"].reindex(m.columns).fillna("(no question file)")

    def chance(scores):
        if not isinstance(scores, str):
            return 0.0
        vals = list(json.loads(scores).values())
        return 1.0 / len(vals) if sum(v == 1 for v in vals) == 1 else 0.0

    g = q["target_scores"].reindex(m.columns).map(chance).fillna(0.0).to_numpy()
    return m.to_numpy(float), g, topic.to_numpy()


def _metabench(name):
    f = next((DATA / "metabench").glob(f"{name}-*.responses.csv.gz"))
    return pd.read_csv(f, index_col=0).to_numpy(float)


def _classic(name):
    return pd.read_csv(DATA / "classic_irt" / name).drop(columns=["person"], errors="ignore").to_numpy(float)


def real_data_sets():
    """(name, matrix, chance, groups) for every real set; groups is None or per-item labels."""
    y, g, topic = _chembench()
    yield "ChemBench (31 models)", y, g, topic
    yield "metabench ARC", _metabench("arc"), 0.25, None
    yield "metabench GSM8K", _metabench("gsm8k"), 0.0, None
    yield "metabench TruthfulQA", _metabench("truthfulqa"), 0.0, None
    yield "LSAT6", _classic("LSAT6_expanded.csv"), 0.0, None
    yield "LSAT7", _classic("LSAT7_expanded.csv"), 0.0, None
    yield "SAT12", _classic("SAT12_scored.csv"), 0.2, None


def _row(name, y, chance, seed):
    t0 = time.perf_counter()
    fit = fit_1pl(y, chance=chance)
    rep = coverage_report(fit.b, k=5, seed=seed)
    diag = diagnostics(y)
    plan = quantile_match(rep.normalised)
    unc = metric_uncertainty(fit)
    return {
        "benchmark": name,
        "models": y.shape[0],
        "items": y.shape[1],
        "ddm": rep.ddm,
        "ddm_sd": unc.ddm_sd,
        "max_gap": rep.max_gap,
        "max_gap_sd": unc.max_gap_sd,
        "max_gap_post_mean": unc.max_gap_mean,
        "uniform_max_gap": rep.uniform_baseline_max_gap,
        "top5_sum": rep.topk_sum,
        "model_info": diag.model_information,
        "item_info": diag.item_information,
        "model_inv": diag.model_inversion_rate,
        "item_inv": diag.item_inversion_rate,
        "passed": diag.passed,
        "alg1_k": plan.k,
        "w1_before": plan.w1_before,
        "w1_after": plan.w1_after,
        "seconds": round(time.perf_counter() - t0, 2),
    }


def real_data(seed: int, min_topic_items: int) -> list[dict]:
    rows = []
    for name, y, g, groups in real_data_sets():
        rows.append(_row(name, y, g, seed))
        if groups is None:
            continue
        labels = pd.Series(groups)
        counts = labels.value_counts()
        for topic in counts[counts >= min_topic_items].index:
            sel = (labels == topic).to_numpy()
            rows.append(_row(f"  topic {topic}", y[:, sel], np.asarray(g)[sel], seed))
        small = labels.isin(counts[counts < min_topic_items].index).to_numpy()
        rows.append(
            _row(f"  other topics (<{min_topic_items} items each)", y[:, small], np.asarray(g)[small], seed)
        )
    return rows


def markdown(rows: list[dict]) -> str:
    head = (
        "| benchmark | models x items | DDM (post. sd) | max gap [post. mean, sd] | uniform E[max gap] | top-5 sum | model info | "
        "item info | model inv | item inv | C.3 pass | Alg. 1 W1 (k = n/2) |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    body = "".join(
        f"| {r['benchmark']} | {r['models']} x {r['items']} | {r['ddm']:.3f} ({r['ddm_sd']:.3f}) | "
        f"{r['max_gap']:.3f} [{r['max_gap_post_mean']:.3f}, {r['max_gap_sd']:.3f}] | {r['uniform_max_gap']:.3f} | {r['top5_sum']:.3f} | "
        f"{r['model_info']:.3f} | {r['item_info']:.3f} | {r['model_inv']:.3f} | {r['item_inv']:.3f} | "
        f"{'yes' if r['passed'] else 'no'} | {r['w1_before']:.3f} -> {r['w1_after']:.3f} |\n"
        for r in rows
    )
    return head + body


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--real-data", action="store_true")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--models", type=int, default=200)
    ap.add_argument("--items", type=int, default=14000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--min-topic-items", type=int, default=20)
    args = ap.parse_args()
    if args.real_data:
        if not DATA.exists():
            sys.exit(f"{DATA} is absent: the real-data figures need ../shared/data")
        rows = real_data(args.seed, args.min_topic_items)
        print(json.dumps(rows, indent=1))
        if args.markdown:
            print(markdown(rows))
    else:
        print(json.dumps(speed(args.models, args.items, args.repeats, args.seed), indent=1))


if __name__ == "__main__":
    main()
