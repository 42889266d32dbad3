"""The CLI against misuse (issue 10): global options, terminal escapes, one-line errors, foreign databases."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import resource
import signal
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

from benchloupe.cli.main import main
from benchloupe.store import db as store_db
from tests.warnings_shown import warnings_on_stderr

ESC_NAME = "evil\x1b]0;pwned\x07\x1b[2J\x9b31m\b"
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
ROOT = Path(__file__).resolve().parents[2]



def run(argv, stdin: str | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    saved_in = sys.stdin
    if stdin is not None:
        sys.stdin = io.StringIO(stdin)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), warnings_on_stderr():
            try:
                rc = main([str(a) for a in argv])
            except SystemExit as exc:
                rc = exc.code
    finally:
        sys.stdin = saved_in
    return rc, out.getvalue(), err.getvalue()


def one_line_error(rc, err, *words):
    assert rc == 1, err
    assert err.count("\n") == 1 and err.startswith("benchloupe: error: "), err
    assert "Traceback" not in err
    for w in words:
        assert w.lower() in err.lower(), (w, err)


def digest(path: Path) -> str:
    return "|".join(hashlib.sha256(p.read_bytes()).hexdigest() if p.exists() else "-"
                    for p in (path, path.with_name(path.name + "-wal")))


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def sim_long(tmp_path: Path, n_models=8, n_items=30, names=None, seed=0) -> Path:
    rng = np.random.default_rng(seed)
    names = names or [f"model-{m}" for m in range(n_models)]
    theta = np.linspace(-1.5, 1.5, len(names))
    b = rng.normal(size=n_items)
    rows = ["model,item,correct,text"]
    for m, name in enumerate(names):
        for j in range(n_items):
            p = 1 / (1 + np.exp(-(theta[m] - b[j])))
            rows.append(f'"{name}",q{j},{int(rng.random() < p)},"Question {j}?"')
    return write(tmp_path / "sim.csv", "\n".join(rows) + "\n")


# ----------------------------------------------------------------------------------------- 1. global options

def test_global_options_mean_the_same_before_and_after_the_command(tmp_path, monkeypatch):
    default = tmp_path / "default.db"
    monkeypatch.setenv("BENCHLOUPE_DB", str(default))
    data = write(tmp_path / "t.csv", "model,q1,q2\nm1,1,0\nm2,0,1\n")
    x = tmp_path / "x.db"
    rc, _, err = run(["--db", x, "import", "wide", data, "-b", "t"])
    assert rc == 0, err
    assert x.exists() and not default.exists()
    rc, out, _ = run(["--json", "--db", x, "list"])
    assert rc == 0 and json.loads(out)[0]["name"] == "t"
    rc, out, _ = run(["--db", x, "list", "--json"])
    assert rc == 0 and json.loads(out)[0]["name"] == "t"
    rc, out, _ = run(["--json", "show", "t", "--db", x])
    assert rc == 0 and json.loads(out)["name"] == "t"
    rc, out, _ = run(["--db", x, "list"])  # no --json anywhere: a table
    assert rc == 0 and out.startswith("name")


# ------------------------------------------------------------------------------------ 2. terminal escapes

def test_control_characters_in_names_never_reach_the_terminal(tmp_path):
    db = tmp_path / "e.db"
    src = write(tmp_path / "e.csv", f'model,item,correct,text,family\n"{ESC_NAME}",q1,1,"t\x1b[2Jx",fa\n'
                                    f'm2,q1,0,"t\x1b[2Jx",fb\n"{ESC_NAME}",q2,0,"u",fa\nm2,q2,1,"u",fb\n')
    bench = "b\x1b]0;t\x07"
    rc, out, err = run(["--db", db, "import", "long", src, "-b", bench])  # refused as a new name (issue 37 #11)
    assert rc == 1 and err.count("\n") == 1 and "control characters" in err and "\x1b" not in err, err
    rc, out, err = run(["--db", db, "import", "long", src, "-b", "b"])
    assert rc == 0, err
    conn = sqlite3.connect(db)  # a name an older version stored: still shown escaped
    conn.execute("UPDATE benchmarks SET name = ? WHERE name = 'b'", (bench,))
    conn.commit()
    conn.close()
    for argv in (["list"], ["show", bench], ["flags"]):
        rc, out, err = run(["--db", db, *argv])
        assert rc == 0, (argv, err)
        assert not RAW_CONTROL.search(out + err), (argv, repr(out))
    rc, out, _ = run(["--db", db, "show", bench])
    assert "\\x1b]0;t\\x07" in out  # shown visibly escaped
    # an export shown on a terminal (a real pty) is escaped too
    import pty

    master, slave = pty.openpty()
    r = subprocess.run([sys.executable, "-m", "benchloupe", "--db", str(db), "export", "models", bench],
                       stdout=slave, stderr=subprocess.PIPE, cwd=ROOT)
    os.close(slave)
    shown = b""
    with contextlib.suppress(OSError):
        while chunk := os.read(master, 65536):
            shown += chunk
    os.close(master)
    assert r.returncode == 0 and b"evil" in shown and b"\x1b" not in shown.replace(b"\r\n", b"\n"), shown
    rc, _, err = run(["--db", db, "show", "nope\x1b[2J"])
    one_line_error(rc, err, "\\x1b[2J")
    assert not RAW_CONTROL.search(err)


def test_json_output_is_exact_and_terminal_safe(tmp_path):
    db = tmp_path / "e.db"
    src = write(tmp_path / "e.csv", f'model,q1,q2\n"{ESC_NAME}\x7f\u202e",1,0\nm2,0,1\n')
    assert run(["--db", db, "import", "wide", src, "-b", "b"])[0] == 0
    rc, out, _ = run(["--db", db, "--json", "export", "models", "b"])
    assert rc == 0 and not RAW_CONTROL.search(out) and "\u202e" not in out
    assert json.loads(out)[0]["name"] == f"{ESC_NAME}\x7f\u202e"
    rc, out, _ = run(["--db", db, "--json", "show", "b"])
    assert rc == 0 and not RAW_CONTROL.search(out)
    # a CSV export to a file or a pipe is data: byte-exact
    dst = tmp_path / "m.csv"
    assert run(["--db", db, "export", "models", "b", "-o", dst])[0] == 0
    assert ESC_NAME in dst.read_text(encoding="utf-8")
    r = subprocess.run([sys.executable, "-m", "benchloupe", "--db", str(db), "export", "models", "b"],
                       capture_output=True, cwd=ROOT)
    assert ESC_NAME.encode() in r.stdout


def test_fit_ranking_escapes_model_names(tmp_path):
    db = tmp_path / "f.db"
    src = sim_long(tmp_path, names=[ESC_NAME] + [f"model-{m}" for m in range(7)])
    assert run(["--db", db, "import", "long", src, "-b", "s"])[0] == 0
    rc, out, err = run(["--db", db, "fit", "static", "s", "--no-heldout"])
    assert rc == 0, err
    assert "Top models" in out and "evil\\x1b]0;pwned" in out
    assert not RAW_CONTROL.search(out + err)


# --------------------------------------------------------------------------------------- 4. count ranges

def test_binomial_counts_that_overflow_int32_are_refused(tmp_path):
    db = tmp_path / "c.db"
    src = write(tmp_path / "c.csv", "model,item,successes,trials\nm1,q1,3000000000,4294967297\n")
    rc, _, err = run(["--db", db, "import", "long", src])
    one_line_error(rc, err, "line 2", "2,147,483,647")
    assert not db.exists()


# ---------------------------------------------------------------------------- 6. tracebacks -> one line

def _sub(args, **kw):
    return subprocess.run([sys.executable, "-m", "benchloupe", *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT, **kw)


def test_disk_full_during_import_names_the_real_cause(tmp_path):
    db = tmp_path / "full.db"
    assert run(["--db", db, "import", "wide", write(tmp_path / "s.csv", "model,q1\nm1,1\n"), "-b", "s"])[0] == 0
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    before = digest(db)
    big = tmp_path / "big.csv"
    rows = ["model," + ",".join(f"item{j}" for j in range(300))]
    rows += [f"model{m}," + ",".join("1" if (m * j) % 3 else "0" for j in range(300)) for m in range(400)]
    write(big, "\n".join(rows) + "\n")
    limit = db.stat().st_size + 64 * 1024

    def small_disk():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    r = _sub(["--db", db, "import", "wide", big, "-b", "big"], preexec_fn=small_disk)
    assert r.returncode == 1, r.stderr
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
    assert "cannot rollback" not in r.stderr and ("full" in r.stderr or "too large" in r.stderr), r.stderr
    assert digest(db) == before


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (a device that is always full)")
@pytest.mark.parametrize("buffered", [True, False])
def test_output_on_a_full_disk_says_the_import_was_saved(tmp_path, buffered):
    """Buffered (as CI runs it), what stdout still held failed again at the interpreter's exit: "Exception
    ignored in <stdout>" and exit 120 after the one line; with PYTHONUNBUFFERED the write failed at once."""
    db = tmp_path / "o.db"
    src = write(tmp_path / "s.csv", "model,q1\nm1,1\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    if not buffered:
        env["PYTHONUNBUFFERED"] = "1"
    with open("/dev/full", "w") as full:
        r = subprocess.run([sys.executable, "-m", "benchloupe", "--db", str(db), "import", "wide", str(src)],
                           stdout=full, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env)
    assert r.returncode == 1
    assert r.stderr.count("\n") == 1 and "saved" in r.stderr and "No space" in r.stderr, r.stderr


@contextlib.contextmanager
def as_nobody():
    """Run in-process as user nobody (effective ids only, so root can come back): real permission errors."""
    os.setegid(65534)
    os.seteuid(65534)
    try:
        yield
    finally:
        os.seteuid(0)
        os.setegid(0)


@pytest.mark.skipif(os.geteuid() != 0, reason="drops to user nobody to meet real permission errors")
def test_permission_errors_are_one_line():
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        os.chmod(d, 0o755)
        src = write(d / "secret.csv", "model,q1\nm1,1\n")
        os.chmod(src, 0o600)
        ok = write(d / "ok.csv", "model,q1\nm1,1\n")
        db = d / "ro.db"
        assert run(["--db", db, "import", "wide", ok])[0] == 0
        conn = sqlite3.connect(db)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.close()
        before = digest(db)
        with as_nobody():
            unreadable = run(["--db", d / "w.db", "import", "wide", src])
            read_only = run(["--db", db, "import", "wide", ok, "-b", "again"])
            no_folder = run(["--db", d / "new" / "x.db", "import", "wide", ok])
            listed = run(["--db", db, "list"])
        one_line_error(unreadable[0], unreadable[2], "cannot read", "Permission denied")
        one_line_error(read_only[0], read_only[2])
        assert "read-only" in read_only[2] or "cannot open" in read_only[2], read_only[2]
        one_line_error(no_folder[0], no_folder[2], "cannot create its folder")
        assert listed[0] in (0, 1) and "Traceback" not in listed[2]
        assert digest(db) == before


def test_a_writer_holding_the_lock_is_one_line(tmp_path, monkeypatch):
    db = tmp_path / "l.db"
    src = write(tmp_path / "s.csv", "model,q1\nm1,1\n")
    assert run(["--db", db, "import", "wide", src, "-b", "s"])[0] == 0
    monkeypatch.setattr(store_db, "BUSY_TIMEOUT_S", 0.2)
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        rc, _, err = run(["--db", db, "import", "wide", src, "-b", "t"])
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    one_line_error(rc, err, "locked")


def _damage(db: Path) -> None:
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("PRAGMA journal_mode = DELETE")
    conn.close()
    raw = bytearray(db.read_bytes())
    page = 4096
    for p in range(2, len(raw) // page):  # scribble over every page but the first (the header and schema)
        raw[p * page + 8: p * page + 200] = b"\xa5" * 192
    db.write_bytes(bytes(raw))


def test_damaged_database_db_check_show_fit_are_one_line(tmp_path):
    db = tmp_path / "d.db"
    assert run(["--db", db, "import", "long", sim_long(tmp_path), "-b", "s"])[0] == 0
    _damage(db)
    rc, out, err = run(["--db", db, "db", "check"])
    assert rc == 1 and "Traceback" not in err
    assert "damaged" in (out + err).lower() or "malformed" in (out + err).lower(), (out, err)
    assert err.count("\n") <= 1
    for argv in (["show", "s"], ["list"], ["fit", "static", "s"], ["export", "results", "s"]):
        rc, _, err = run(["--db", db, *argv])
        one_line_error(rc, err)


def test_export_to_a_missing_folder_is_one_line(tmp_path):
    db = tmp_path / "x.db"
    assert run(["--db", db, "import", "wide", write(tmp_path / "s.csv", "model,q1\nm1,1\n"), "-b", "s"])[0] == 0
    rc, _, err = run(["--db", db, "export", "items", "s", "-o", tmp_path / "no" / "such" / "x.csv"])
    one_line_error(rc, err, "cannot write", "no such file or directory")


def test_unexpected_error_is_one_line_with_the_trace_in_a_file(tmp_path, monkeypatch):
    import pandas as pd

    db = tmp_path / "x.db"
    src = write(tmp_path / "s.csv", "model,q1\nm1,1\n")
    assert run(["--db", db, "import", "wide", src, "-b", "s"])[0] == 0

    def broken(*a, **k):  # a third-party failure we cannot foresee
        raise RuntimeError("pandas broke")

    monkeypatch.setattr(pd.DataFrame, "to_csv", broken)
    rc, _, err = run(["--db", db, "export", "items", "s"])
    one_line_error(rc, err, "unexpected RuntimeError", "export", "pandas broke", "--debug")
    trace = Path(re.search(r"full traceback in (\S+) ", err).group(1))
    assert "Traceback" in trace.read_text()
    trace.unlink()
    rc, _, err = run(["--db", db, "--debug", "export", "items", "s"])
    assert rc == 1 and "Traceback" in err and "pandas broke" in err


# ------------------------------------------------------------------------------------ 7. foreign databases

def test_foreign_sqlite_file_is_refused_untouched(tmp_path):
    other = tmp_path / "other.db"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
    conn.execute("INSERT INTO notes (body) VALUES ('mine')")
    conn.commit()
    conn.close()
    before = other.read_bytes()
    src = write(tmp_path / "s.csv", "model,q1\nm1,1\n")
    for argv in (["list"], ["show", "x"], ["import", "wide", src], ["db", "check"], ["open"]):
        rc, _, err = run(["--db", other, *argv])
        one_line_error(rc, err, "not a benchloupe database")
        assert other.read_bytes() == before, argv
        assert not other.with_name("other.db-wal").exists()


def test_empty_file_is_refused_untouched(tmp_path):
    """Issue 24 (foreign SQLite kinds): a 0-byte file is not benchloupe's (new databases are created whole under
    a temporary name, so benchloupe never leaves one): refused, left as it was."""
    empty = tmp_path / "empty.db"
    empty.touch()
    rc, _, err = run(["--db", empty, "import", "wide", write(tmp_path / "s.csv", "model,q1\nm1,1\n")])
    one_line_error(rc, err, "empty file")
    assert empty.stat().st_size == 0 and not empty.with_name("empty.db-wal").exists()


# -------------------------------------------------------------------------------- 9. retiring every item

def test_compress_refuses_to_retire_every_item(tmp_path):
    db = tmp_path / "r.db"
    assert run(["--db", db, "import", "long", sim_long(tmp_path, n_items=12), "-b", "s"])[0] == 0
    rc, _, err = run(["--db", db, "compress", "s", "--retire-lowest", "99999", "--recovery", "no"])
    one_line_error(rc, err, "10")  # 12 items; at most 10 may go so that two remain
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT count(*) FROM items WHERE status = 'retired'").fetchone()[0] == 0
    conn.close()


# ------------------------------------------------------------------------------------------------- minor

def sim_arena(tmp_path: Path, names, n_prompts=20, seed=1) -> Path:
    rng = np.random.default_rng(seed)
    theta = np.linspace(-1.5, 1.5, len(names))
    rows = ["model,prompt,reward"]
    for m, name in enumerate(names):
        for j in range(n_prompts):
            rows.append(f"{name},p{j},{theta[m] + rng.normal(scale=0.5):.4f}")
    return write(tmp_path / "arena.csv", "\n".join(rows) + "\n")


def test_alias_after_a_joint_fit_keeps_the_runs_rows(tmp_path):
    db = tmp_path / "a.db"
    names = [f"model-{m}" for m in range(8)]
    assert run(["--db", db, "import", "long", sim_long(tmp_path, names=names), "-b", "s"])[0] == 0
    arena_names = names[:-1] + ["model-7-arena"]
    assert run(["--db", db, "import", "arena", sim_arena(tmp_path, arena_names), "-b", "a"])[0] == 0
    rc, _, err = run(["--db", db, "fit", "joint", "s", "--arena", "a", "--no-heldout"])
    assert rc == 0, err
    rc, out, err = run(["--db", db, "alias", "model-7", "model-7-arena"])
    assert rc == 0, err
    assert "merged" in out
    conn = sqlite3.connect(db)
    run_id = conn.execute("SELECT id FROM runs WHERE kind = 'joint'").fetchone()[0]
    kept = json.loads(conn.execute("SELECT data FROM run_artifacts WHERE run_id = ? AND name = 'merged_models'",
                                   (run_id,)).fetchone()[0])
    assert kept[0]["name"] == "model-7-arena" and kept[0]["theta"] is not None
    conn.close()


def test_alias_of_several_names_is_all_or_nothing(tmp_path):
    db = tmp_path / "a.db"
    assert run(["--db", db, "import", "wide", write(tmp_path / "s.csv", "model,q1\nm1,1\nm2,0\n"), "-b", "s"])[0] == 0
    assert run(["--db", db, "import", "wide", write(tmp_path / "t.csv", "model,q1\nx1,1\n"), "-b", "t"])[0] == 0
    before = digest(db)
    rc, _, err = run(["--db", db, "alias", "m1", "x1", "m2"])  # m2 shares benchmark s with m1: refused
    one_line_error(rc, err, "'m2'")
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT count(*) FROM models WHERE name = 'x1'").fetchone()[0] == 1  # x1 not merged
    assert conn.execute("SELECT count(*) FROM model_aliases").fetchone()[0] == 0
    conn.close()
    del before


def test_usage_checks_and_messages(tmp_path):
    db = tmp_path / "u.db"
    assert run(["--db", db, "import", "long", sim_long(tmp_path, n_items=12), "-b", "s"])[0] == 0
    rc, _, err = run(["--db", db, "import", "lm-eval", tmp_path / "sim.csv", "--threshold", "abc"])
    assert rc == 2 and "--threshold" in err and "could not convert" not in err
    rc, _, err = run(["--db", db, "export", "run-models", "s", "--run", "99999"])
    one_line_error(rc, err, "no run #99999")
    rc, _, err = run(["--db", db, "export", "run-models", "s"])
    one_line_error(rc, err, "--run", "benchloupe show s")
    assert "benchloupe runs" not in err
    rc, _, err = run(["--db", db, "export", "items"])
    one_line_error(rc, err, "needs a BENCHMARK")
    assert "None" not in err
    rc, _, err = run(["--db", db, "calibrate", "s", "--k", "0"])
    one_line_error(rc, err, "--k 0")
    for flag, value in (("--timeout", "-1"), ("--timeout", "0"), ("--max-retries", "-1")):
        rc, _, err = run(["--db", db, "endpoints", "set", "judge", "--base-url", "http://127.0.0.1:9/v1", flag, value])
        one_line_error(rc, err, flag)
    rc, out, _ = run(["--help"])
    assert "{'option_strings'" not in out and "95% and rank" in out
    rc, out, _ = run(["compress", "--help"])
    assert "%%" not in out and "2.5%-100%" in out


def test_run_artifact_of_another_benchmark_is_refused(tmp_path):
    db = tmp_path / "r.db"
    assert run(["--db", db, "import", "long", sim_long(tmp_path, n_items=12), "-b", "s"])[0] == 0
    assert run(["--db", db, "import", "wide", write(tmp_path / "o.csv", "model,q1\nm1,1\n"), "-b", "other"])[0] == 0
    assert run(["--db", db, "fit", "static", "s", "--no-heldout"])[0] == 0
    rc, _, err = run(["--db", db, "export", "run-models", "other", "--run", "1"])
    one_line_error(rc, err, "run #1 is a run of 's'")
    rc, out, err = run(["--db", db, "export", "run-models", "s", "--run", "1"])
    assert rc == 0 and len(out.splitlines()) == 9


def test_list_and_show_count_results_as_cells_and_omit_nan(tmp_path):
    db = tmp_path / "v.db"
    assert run(["--db", db, "import", "long", sim_long(tmp_path, n_models=8, n_items=12), "-b", "s"])[0] == 0
    rc, out, _ = run(["--db", db, "--json", "list"])
    row = json.loads(out)[0]
    assert row["results"] == 96 and "static_rows" not in row
    rc, out, _ = run(["--db", db, "show", "s"])
    assert re.search(r"^results\s+96$", out, re.M) and "static_rows" not in out
    rc, out, err = run(["--db", db, "fit", "static", "s", "--no-heldout"])
    assert rc == 0, err
    assert not re.search(r"\bnan\b", out) and not re.search(r"^gamma\b", out, re.M), out


def test_import_items_reports_updated_items(tmp_path):
    db = tmp_path / "i.db"
    assert run(["--db", db, "import", "wide", write(tmp_path / "s.csv", "model,q1,q2\nm1,1,0\n"), "-b", "s"])[0] == 0
    meta = write(tmp_path / "meta.csv", "key,text\nq1,What is one?\nq2,What is two?\n")
    rc, out, _ = run(["--db", db, "import", "items", meta, "-b", "s"])
    assert rc == 0 and "2 updated" in out, out
    rc, out, _ = run(["--db", db, "import", "items", meta, "-b", "s"])
    assert rc == 0 and "updated" not in out, out  # the same text again changes nothing


def test_flags_set_prints_the_one_change(tmp_path):
    db = tmp_path / "f.db"
    assert run(["--db", db, "demo", "--bare"])[0] == 0
    conn = sqlite3.connect(db)
    bid = conn.execute("SELECT id FROM benchmarks WHERE name = 'demo-math'").fetchone()[0]
    conn.close()
    del bid
    rc, _, err = run(["--db", db, "anomalies", "demo-math"])
    assert rc == 0, err
    rc, out, _ = run(["--db", db, "flags", "--set", "1", "confirmed"])
    assert rc == 0 and out.count("\n") == 1 and "flag 1" in out and "confirmed" in out, out


def test_exclude_models_prints_no_warning(tmp_path):
    db = tmp_path / "x.db"
    src = write(tmp_path / "l.csv", "model,item,correct\nhuman_1,q1,1\nm1,q1,0\nm1,q2,1\n")
    rc, _, err = run(["--db", db, "import", "long", src, "--exclude-models", "^(human)_"])
    assert rc == 0 and err == "", err


def test_a_file_growing_during_import_is_hashed_as_read(tmp_path):
    import threading

    from benchloupe.jobs import import_file

    db = tmp_path / "g.db"
    src = tmp_path / "s.csv"
    src.write_bytes(b"model,q1\n" + b"".join(b"m%d,1\n" % m for m in range(5000)))
    stop = threading.Event()

    def append():  # another process still writing the file while it is imported
        n = 5000
        with open(src, "ab", buffering=0) as fh:
            while not stop.is_set():
                fh.write(b"m%d,0\n" % n)
                n += 1

    writer = threading.Thread(target=append)
    writer.start()
    try:
        summary = import_file(db, src, "wide")
    finally:
        stop.set()
        writer.join()
    lines = src.read_bytes().split(b"\n")
    imported = b"\n".join(lines[: 1 + summary.models_new]) + b"\n"
    conn = sqlite3.connect(db)
    sha = conn.execute("SELECT sha256 FROM imports").fetchone()[0]
    conn.close()
    assert summary.models_new >= 5000
    assert sha == hashlib.sha256(imported).hexdigest()


def test_review_shows_proposal_text_escaped(tmp_path):
    from benchloupe.store import fill as fillstore
    from benchloupe.store import read
    from benchloupe.store.db import connect

    db = tmp_path / "rv.db"
    src = write(tmp_path / "i.csv", 'model,item,correct,text\nm1,q1,1,"parent \x1b]0;t\x07 text"\nm2,q1,0,"x"\n')
    assert run(["--db", db, "import", "long", src, "-b", "s"])[0] == 0
    conn = connect(db)
    bid = read.benchmark_id(conn, "s")
    item = int(read.items(conn, "s")["id"].iloc[0])
    sid = fillstore.create_session(conn, bid, 0.2, 0.4, 0.3, {})
    fillstore.upsert_candidate(conn, sid, "c1", round_=1, parent_item_id=item, text=f"child {ESC_NAME}\nline 2",
                               answer="\x1b[2J42", payload={}, valid=True, verdict="valid", difficulty_raw=0.1,
                               difficulty_norm=0.31, distance=0.01)
    conn.close()
    rc, out, err = run(["--db", db, "review"], stdin="s\n")
    assert rc == 0, err
    assert "child evil\\x1b]0;pwned" in out and "line 2" in out  # newlines keep their layout
    assert not RAW_CONTROL.search(out + err), repr(out)


def test_wide_cell_of_only_spaces_names_its_line(tmp_path):
    src = write(tmp_path / "sp.csv", "model,q1,q2\nm1, 1 ,0\nm2,  ,1\n")
    rc, _, err = run(["--db", tmp_path / "w.db", "import", "wide", src])
    one_line_error(rc, err, "line 3", "column 2", "spaces")
