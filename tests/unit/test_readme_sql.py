"""The README's "Reading the database from other tools" queries run as printed on the demo workspace (issue 35):
with Python's sqlite3 on a read-only connection, and with the sqlite3 shell in read-only mode where it is
installed (that part skips otherwise); both give the same rows, and neither writes to the file."""

from __future__ import annotations

import csv
import io
import re
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"
SECTION = "## Reading the database from other tools"


def readme_queries() -> list[str]:
    text = README.read_text(encoding="utf-8")
    start = text.index(SECTION)
    end = text.index("\n## ", start + len(SECTION))
    return re.findall(r"```sql\n(.*?)```", text[start:end], flags=re.S)


@pytest.fixture(scope="module")
def audited(demo_db_template, tmp_path_factory) -> Path:
    """The demo workspace with a near-tie audit of demo-chem (its reversal flags), the WAL folded into the file."""
    from benchloupe import jobs
    from benchloupe.store.db import connect

    path = tmp_path_factory.mktemp("readme") / "demo.db"
    shutil.copy(demo_db_template, path)
    jobs.analysis("neartie").run(path, "demo-chem")
    conn = connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return path


def _read_only(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True)


def _rows(path: Path, sql: str) -> tuple[list[str], list[tuple]]:
    conn = _read_only(path)
    try:
        cur = conn.execute(sql)
        return [d[0] for d in cur.description], cur.fetchall()
    finally:
        conn.close()


def test_the_readme_shows_queries():
    assert len(readme_queries()) == 3


def test_readme_queries_run_on_the_demo_with_python_sqlite3(audited):
    before = audited.read_bytes()
    (bench_cols, benches), (run_cols, audits), (pair_cols, pairs) = (_rows(audited, q) for q in readme_queries())
    assert bench_cols == ["benchmark", "kind", "items", "models"]
    assert {b[0] for b in benches} == {"demo-arena", "demo-chem", "demo-math"} and all(b[2] > 0 for b in benches)
    assert run_cols[:4] == ["run", "benchmark", "finished_at", "status"] and audits
    assert audits[0][3] in ("excess_sensitivity_detected", "no_significant_excess_detected")
    assert pair_cols[:3] == ["id", "model_a", "model_b"] and pairs
    robustness = [p[-1] for p in pairs]
    assert robustness == sorted(robustness, reverse=True) and all(0 <= r <= 1 for r in robustness)
    assert audited.read_bytes() == before


def test_readme_queries_run_in_the_sqlite3_shell(audited):
    shell = shutil.which("sqlite3")
    if shell is None:
        pytest.skip("the sqlite3 command-line shell is not installed (Debian: apt-get install sqlite3)")
    before = audited.read_bytes()
    for sql in readme_queries():
        out = subprocess.run([shell, "-readonly", "-csv", "-header", str(audited)], input=sql, capture_output=True,
                             text=True, timeout=60, check=True).stdout
        head, *rows = list(csv.reader(io.StringIO(out)))
        cols, expected = _rows(audited, sql)
        assert head == cols and len(rows) == len(expected) > 0
        assert [r[0] for r in rows] == [str(e[0]) for e in expected]
    assert audited.read_bytes() == before
