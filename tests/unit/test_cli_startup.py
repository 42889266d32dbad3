"""Start-up (issue 16): `--help` and `list` load neither the engine nor pandas/numpy; the text tables escape
control characters from data (a benchmark named with an OSC sequence must not retitle the terminal)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import benchloupe
from benchloupe.cli.output import table_rows
from benchloupe.store.db import connect


def _modules_after(argv: list[str], tmp_path, *, fails: bool = False) -> set[str]:
    code = (f"import sys, runpy; sys.argv = ['benchloupe'] + {argv!r}\n"
            "try:\n    runpy.run_module('benchloupe', run_name='__main__')\n"
            "except SystemExit:\n    pass\n"
            "sys.stderr.write('\\nMODULES ' + __import__('json').dumps(sorted(sys.modules)))")
    env = {**os.environ, "PYTHONPATH": str(Path(benchloupe.__file__).resolve().parents[1])}  # this checkout
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=120,
                         env=env)
    assert fails or "error" not in out.stderr.split("MODULES ")[0], out.stderr[:500]
    return set(json.loads(out.stderr.rsplit("MODULES ", 1)[1]))


def test_help_and_list_import_no_heavy_modules(tmp_path):
    db = str(tmp_path / "w.db")
    connect(db).close()  # a current-schema database
    for argv in (["--help"], ["list", "--db", db], ["list", "--db", db, "--json"]):
        mods = _modules_after(argv, tmp_path)
        heavy = {m for m in mods if m.split(".")[0] in ("pandas", "numpy", "scipy", "torch", "openai", "textual")
                 or m.startswith("benchloupe.engine")}
        assert not heavy, (argv, sorted(heavy)[:10])


def test_text_tables_escape_control_characters():
    out = table_rows(["name", "n"], [("b\x1b]0;t\x07", 2), ("ok", 3.5)])
    assert "\x1b" not in out and "\x07" not in out
    assert "\\x1b" in out and "3.5" in out


def test_every_analysis_is_found_by_its_own_module():
    """``jobs.analysis(name)`` loads only the area module that registers ``name``; the map must name every
    analysis the full registry holds, and the module that really registers it."""
    import benchloupe.jobs as jobs

    full = jobs._load_analyses()
    assert set(jobs._AREA_MODULE) == set(full)
    for name, module in jobs._AREA_MODULE.items():
        assert full[name].run.__module__ == f"benchloupe.jobs.{module}", name
        assert jobs.analysis(name) is full[name]


def test_an_analysis_command_loads_only_its_own_job_module(tmp_path):
    """`audit neartie` (and the other analyses but fill) never import the openai client or the fill job."""
    db = str(tmp_path / "w.db")
    connect(db).close()
    for argv in (["audit", "neartie", "nosuch"], ["fit", "static", "nosuch"], ["coverage", "nosuch"],
                 ["anomalies", "nosuch"]):
        mods = _modules_after([*argv, "--db", db], tmp_path, fails=True)  # no such benchmark: after the load
        assert not {m for m in mods if m.split(".")[0] == "openai" or m == "benchloupe.jobs.fill"}, argv
