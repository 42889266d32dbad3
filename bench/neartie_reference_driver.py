"""Run the public near-tie reference (``family-dif-audit``'s ``maintainer.run_audit``) on ``.npz`` inputs.

Not benchloupe code and not the reference's: a small driver for the differential test of issue 22.  It runs
under the reference's own interpreter (a scratch virtualenv outside this repository with the reference's pinned
numpy 1.26.4, pandas 2.3.3, scipy 1.13.1, scikit-learn 1.6.1) with the rebuilt reference on ``PYTHONPATH``;
``bench/bench_neartie.py reference`` starts it.  Reads one JSON job per stdin line (``{"id", "npz", "config"}``,
config: the reference's ``AuditConfig`` fields) and writes one JSON line per job: the half of every input
model (``None`` when not kept), the Table 1 quantities, or the reference's refusal (``error``).
"""

from __future__ import annotations

import json
import sys
import time


def main() -> None:
    from family_dif_benchmark_audit.maintainer import AuditConfig, load_benchmark, run_audit

    for line in sys.stdin:
        job = json.loads(line)
        start = time.perf_counter()
        config = {k: tuple(v) if isinstance(v, list) else v for k, v in job.get("config", {}).items()}
        try:
            data = load_benchmark(job["npz"])
            out = run_audit(data, AuditConfig(**config))
        except (ValueError, AssertionError) as exc:
            print(json.dumps({"id": job["id"], "error": str(exc).splitlines()[0],
                              "seconds": time.perf_counter() - start}), flush=True)
            continue
        half = [None] * data.responses.shape[1]
        pop = out["population"]
        for i, h in zip(pop["dataset_model_index"].tolist(), pop["model_half"].tolist()):
            half[int(i)] = h
        s = out["summary"]
        folds = s["folds"]
        table1 = {"k_discovery": folds[0]["selected_dimension"], "k_validation": folds[1]["selected_dimension"],
                  "tau_b": s["mean_fold_kendall_tau_b"], "eligible_pairs": s["eligible_pairs"],
                  "reversals": s["reversals"], "rate": s["low_dif_reversal_rate"],
                  "random_median": s["matched_random_median_rate"], "excess_pp": s["excess_pp"],
                  "p": s["one_sided_randomization_p"], "status": s["status"]}
        print(json.dumps({"id": job["id"], "half": half, "table1": table1, "capped_models": s["capped_models"],
                          "owners": s["owners"], "seconds": time.perf_counter() - start}), flush=True)


if __name__ == "__main__":
    main()
