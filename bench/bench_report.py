"""`benchloupe report` at leaderboard scale (issue 35): the whole report process on a 5,000 x 14,000 workspace
with every analysis stored, beside `fit static` in the same run, printed as JSON. Target: < 10 s whole process,
and the HTML file < 5 MB.

The workspace is bench/bench_scale.py's (seeded ``simulate``: a 2PL matrix with family DIF, models with family,
owner and (for ``--cutoffs`` of them) a training cutoff, items with groups and dates), imported once into
``--workdir``; the analyses a full report reads are run once after the import (fit static, bootstrap, item audit,
subset recovery, anomalies, coverage, the near-tie audit, contamination) and reused by later runs. Then, each as a
whole ``python -m benchloupe`` process measured with ``os.wait4`` (wall, CPU, peak RSS, load before and after):
``fit static`` (the reference), ``report`` as HTML and ``report --format md``; the sizes of what they wrote.

Usage::

    python bench/bench_report.py [--size 5000x14000] [--workdir DIR] [--cutoffs 40] [--bootstrap-B 20] [--repeats 1]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_scale import TMP, build_files, cli, load  # noqa: E402

ANALYSES = [
    ["fit", "static", "sim"], ["bootstrap", "sim", "--B", "{B}"], ["audit", "items", "sim"], ["compress", "sim"],
    ["anomalies", "sim"], ["coverage", "sim"], ["audit", "neartie", "sim"], ["contamination", "sim"],
]


def _clean(row: dict) -> dict:
    return {k: v for k, v in row.items() if not k.startswith("_")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", default="5000x14000")
    ap.add_argument("--workdir", default=str(TMP / "bench_report"))
    ap.add_argument("--cutoffs", type=int, default=40, help="models with a training cutoff (contamination refits)")
    ap.add_argument("--bootstrap-B", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=1)
    args = ap.parse_args()
    m, n = (int(x) for x in args.size.split("x"))
    folder = Path(args.workdir) / args.size
    files = build_files(folder, m, n, args.cutoffs)
    db = folder / "report.db"
    out: dict = {"size": args.size, "files": files, "load_start": load(), "setup": {}}
    if not (folder / "analysed.json").exists():
        db.unlink(missing_ok=True)
        for argv in (["import", "wide", str(folder / "wide.csv"), "-b", "sim", "--models-file",
                      str(folder / "models.csv")], ["import", "items", str(folder / "items.csv"), "-b", "sim"]):
            out["setup"][" ".join(argv[:2])] = _clean(cli(db, *argv))
        for argv in ANALYSES:
            argv = [a.format(B=args.bootstrap_B) for a in argv]
            row = _clean(cli(db, *argv))
            out["setup"][" ".join(argv[:2])] = {k: row.get(k) for k in ("rc", "wall_s", "stderr") if k in row}
            print(json.dumps({"setup": argv, **out["setup"][" ".join(argv[:2])]}), file=sys.stderr, flush=True)
        (folder / "analysed.json").write_text(json.dumps(out["setup"], default=str))
    out["db_mb"] = round(db.stat().st_size / 1e6, 1)
    runs = []
    for _ in range(args.repeats):
        fit = _clean(cli(db, "fit", "static", "sim"))
        html = folder / "report.html"
        rep = _clean(cli(db, "report", "sim", "-o", str(html)))
        md_dir = folder / "report-md"
        md = _clean(cli(db, "report", "sim", "-o", str(md_dir), "--format", "md"))
        runs.append({
            "fit_static": {k: fit.get(k) for k in ("rc", "wall_s", "cpu_s", "peak_rss_mb", "load", "stderr")
                           if k in fit} | {"fit_s": (fit.get("timings") or {}).get("fit_s")},
            "report_html": rep | {"mb": round(html.stat().st_size / 1e6, 3) if html.exists() else None},
            "report_md": md | {"mb": round(sum(p.stat().st_size for p in md_dir.iterdir()) / 1e6, 3)
                               if md_dir.exists() else None},
        })
        print(json.dumps(runs[-1], default=str), file=sys.stderr, flush=True)
    best = min(runs, key=lambda r: r["report_html"]["wall_s"])
    out["runs"] = runs
    out["result"] = {
        "report_html_wall_s": best["report_html"]["wall_s"], "report_md_wall_s": best["report_md"]["wall_s"],
        "fit_static_wall_s": best["fit_static"]["wall_s"], "html_mb": best["report_html"]["mb"],
        "target_wall_s": 10.0, "target_html_mb": 5.0,
        "met": bool(best["report_html"]["wall_s"] < 10 and (best["report_html"]["mb"] or 99) < 5)}
    out["load_end"] = load()
    print(json.dumps(out, indent=1, default=str))


if __name__ == "__main__":
    main()
