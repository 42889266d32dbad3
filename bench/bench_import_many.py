"""A folder of many small files in one ``benchloupe import`` (issue 24, defect 7): the whole CLI process against
the time it takes to read the same files, for several counts, so that the cost per file shows whether the import is
linear in the count. Each file is a one-row ``long`` CSV (``model,item,correct``; a different item per file,
10 models), the shape that was quadratic: 1,000 files 8.2 s, 2,000 29.8 s, 5,000 213.6 s before the fix.

Figures per count: ``read_s`` (open and read every file's bytes in one Python loop, as the importer must at the
least), ``parse_s`` (our parsers alone on every file, no database), ``import_s`` (the whole process:
``python -m benchloupe import long DIR -b many`` into a fresh database; and the same with ``auto``), and
``import_over_read`` and ``import_over_parse`` (the issue's target: within 10x of reading them at 5,000 files),
``import_cpu_ms_per_file`` (flat across counts = linear). Prints JSON with the load average; the process's CPU
time (``import_cpu_s``) is given beside its wall time, as the machines are shared.

Usage: ``python bench/bench_import_many.py [--counts 1000,2000,5000] [--root CHECKOUT]`` from the repository
root; ``--root`` measures another checkout (a before/after).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def make_folder(where: Path, n: int) -> Path:
    folder = where / f"many-{n}"
    folder.mkdir()
    for i in range(n):
        (folder / f"r{i:05d}.csv").write_text(f"model,item,correct\nm{i % 10},q{i},{i % 2}\n")
    return folder


def read_all(folder: Path) -> float:
    t = time.perf_counter()
    for name in sorted(os.listdir(folder)):
        with open(folder / name, "rb") as fh:
            fh.read()
    return time.perf_counter() - t


def parse_all(folder: Path, root: Path) -> float:
    code = ("import sys, time, os\n"
            "from benchloupe.store.importers.detect import parse_file\n"
            "files = sorted(os.listdir(sys.argv[1]))\n"
            "t = time.perf_counter()\n"
            "for f in files:\n"
            "    parse_file(os.path.join(sys.argv[1], f), 'long')\n"
            "print(time.perf_counter() - t)\n")
    out = subprocess.run([sys.executable, "-c", code, str(folder)], capture_output=True, text=True, cwd=root,
                         env={**os.environ, "PYTHONPATH": str(root)}, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def import_once(folder: Path, fmt: str, db: Path, root: Path) -> tuple[float, float]:
    """(wall s, CPU s) of the whole import process (CPU is the steadier figure on a shared machine)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "benchloupe", "--db", str(db), "import", fmt, str(folder), "-b", "many"],
                   check=True, capture_output=True, cwd=root, env={**os.environ, "PYTHONPATH": str(root)})
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--counts", default="1000,2000,5000")
    ap.add_argument("--root", default=str(ROOT), help="checkout to measure")
    ap.add_argument("--no-auto", action="store_true", help="skip the `import auto` figure")
    args = ap.parse_args()
    root = Path(args.root).resolve()
    tmp = Path(tempfile.mkdtemp(prefix="bench-many-"))
    rows = []
    try:
        for n in (int(c) for c in args.counts.split(",")):
            folder = make_folder(tmp, n)
            read_all(folder)  # warm the page cache: every figure reads from memory
            row = {"files": n, "load_avg_1m": round(os.getloadavg()[0], 2), "read_s": round(read_all(folder), 4),
                   "parse_s": round(parse_all(folder, root), 3)}
            wall, cpu = import_once(folder, "long", tmp / f"l{n}.db", root)
            row.update(import_s=round(wall, 3), import_cpu_s=round(cpu, 3))
            if not args.no_auto:
                wall, cpu = import_once(folder, "auto", tmp / f"a{n}.db", root)
                row.update(import_auto_s=round(wall, 3), import_auto_cpu_s=round(cpu, 3))
            row["import_over_read"] = round(row["import_s"] / row["read_s"], 1)
            row["import_over_parse"] = round(row["import_s"] / row["parse_s"], 2)
            row["import_cpu_ms_per_file"] = round(1000 * row["import_cpu_s"] / n, 3)
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps({"root": str(root), "rows": rows, "load_avg_end": [round(x, 2) for x in os.getloadavg()]},
                     indent=1))


if __name__ == "__main__":
    main()
