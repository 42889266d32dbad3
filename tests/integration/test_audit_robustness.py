"""`benchloupe audit robustness B1 B2 ...`: paper 002 D.2's pass rule (Table 9, eqs. 59-61) across benchmarks, read
from each benchmark's latest `--protocol full` near-tie run in a real SQLite workspace (the demo's two simulated
static benchmarks)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from benchloupe.cli.main import main
from benchloupe.engine.common import EngineError
from benchloupe.engine.neartie.perturb import cross_benchmark_table
from benchloupe.jobs.audit import robustness_across
from benchloupe.store import runs
from benchloupe.store.db import connect

FAST = ["--protocol", "full", "--controls", "99", "--bootstrap", "20", "--k-grid", "1,2,4", "--split-seeds", "0"]


def _table(values: dict[str, tuple[float | None, float | None]]) -> pd.DataFrame:
    return pd.DataFrame([{"variant": v, "excess_pp": np.nan if e is None else e, "p": np.nan if p is None else p}
                         for v, (e, p) in values.items()])


def test_pass_rule_counts_benchmarks_per_specification():
    """Eq. 61 with the paper's 5 benchmarks: >= 3 positive and >= 3 significant; a variant that did not run is
    neither positive nor significant there."""
    tables = {
        "b1": _table({"Baseline cap 5": (5.0, 0.01), "Omit Phi": (2.0, 0.20), "Owner cap 1": (None, None)}),
        "b2": _table({"Baseline cap 5": (3.0, 0.04), "Omit Phi": (1.0, 0.01), "Owner cap 1": (4.0, 0.01)}),
        "b3": _table({"Baseline cap 5": (1.0, 0.05), "Omit Phi": (3.0, 0.01), "Owner cap 1": (4.0, 0.01)}),
        "b4": _table({"Baseline cap 5": (-1.0, 0.90), "Omit Phi": (-2.0, 0.01), "Owner cap 1": (4.0, 0.30)}),
        "b5": _table({"Baseline cap 5": (-2.0, 0.95), "Omit Phi": (-1.0, 0.80), "Owner cap 1": (None, None)}),
    }
    t = cross_benchmark_table(tables).set_index("variant")
    assert t.loc["Baseline cap 5", ["G_dir", "G_sig", "passes"]].tolist() == [3, 3, True]
    assert t.loc["Baseline cap 5", "b1"] == "+5.0*" and t.loc["Baseline cap 5", "b4"] == "-1.0"
    # significant in 3 (b2, b3, b4) but positive in 3 as well (b1, b2, b3): passes
    assert t.loc["Omit Phi", ["G_dir", "G_sig", "passes"]].tolist() == [3, 3, True]
    # runs on 3 benchmarks only, significant on 2: fails
    assert t.loc["Owner cap 1", ["G_dir", "G_sig", "passes"]].tolist() == [3, 2, False]
    assert t.loc["Owner cap 1", "b1"] == "n/a"
    assert not cross_benchmark_table(tables, need=4)["passes"].any()
    with pytest.raises(EngineError):
        cross_benchmark_table({})


@pytest.fixture
def audited(demo_db):
    """The demo workspace with a `--protocol full` run on both static benchmarks and a later primary run on one."""
    db = str(demo_db)
    assert main(["audit", "neartie", "demo-chem", "--db", db, "--json", *FAST]) == 0
    assert main(["audit", "neartie", "demo-math", "--db", db, "--json", "--min-family-models", "7", *FAST]) == 0
    assert main(["audit", "neartie", "demo-chem", "--db", db, "--json"]) == 0  # primary only: must be skipped
    return demo_db


def test_cli_prints_table9_across_benchmarks_from_the_store(audited, capsys, tmp_path):
    capsys.readouterr()
    report = tmp_path / "robustness.md"
    assert main(["audit", "robustness", "demo-chem", "demo-math", "--db", str(audited), "--json",
                 "--report", str(report)]) == 0
    out = json.loads(capsys.readouterr().out)
    conn = connect(audited)
    full_runs = [r for r, c in conn.execute("SELECT id, config FROM runs WHERE kind = 'neartie' ORDER BY id")
                 if json.loads(c)["protocol"] == "full"]
    assert sorted(out["runs"].values()) == full_runs  # the full runs, not the later primary run
    stored = {b: runs.load_artifact(conn, rid, "protocol_table9_population_robustness")
              for b, rid in out["runs"].items()}
    specs = {s["variant"]: s for s in out["specifications"]}
    assert list(specs) == list(stored["demo-chem"]["variant"])  # baseline + nine perturbations
    for bench, t in stored.items():
        for row in t.itertuples(index=False):
            cell = specs[row.variant][bench]
            if pd.isna(row.excess_pp):
                assert cell == "n/a"
            else:
                assert cell.rstrip("*") == f"{row.excess_pp:+.1f}" and cell.endswith("*") == (row.p <= 0.05)
    for s in specs.values():
        g_dir = sum(s[b] not in ("n/a",) and float(s[b].rstrip("*")) > 0 for b in stored)
        assert s["G_dir"] == g_dir and s["passes"] is False  # two benchmarks cannot reach 3 of 5
    text = report.read_text()
    assert text.startswith("# Population robustness across benchmarks") and "| Variant | demo-chem | demo-math |" in text
    assert "here 2 benchmarks with >= 3 required, so no specification can pass" in text
    # --need 1 lets one positive and significant benchmark pass; the text form prints the same table
    assert main(["audit", "robustness", "demo-chem", "demo-math", "--db", str(audited), "--need", "1"]) == 0
    shown = capsys.readouterr().out
    assert "Baseline cap 5" in shown and "G_dir" in shown and "need 1" in shown


def test_robustness_refuses_benchmarks_without_a_full_run_and_bad_lists(demo_db, capsys):
    db = str(demo_db)
    assert main(["audit", "neartie", "demo-chem", "--db", db, "--json"]) == 0
    capsys.readouterr()
    assert main(["audit", "robustness", "demo-chem", "--db", db]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no finished full-protocol near-tie run" in err[0] and "--protocol full" in err[0]
    assert main(["audit", "robustness", "nosuch", "--db", db]) == 1
    assert "no benchmark named 'nosuch'" in capsys.readouterr().err
    with pytest.raises(EngineError, match="named twice"):
        robustness_across(demo_db, ["demo-chem", "demo-chem"])
    assert main(["audit", "neartie", "demo-chem", "demo-math", "--db", db]) == 1
    assert "takes one benchmark" in capsys.readouterr().err


@pytest.mark.parametrize("argv, flag", [
    (["robustness", "demo-chem", "--controls", "200"], "--controls"),
    (["robustness", "demo-chem", "--device", "cpu"], "--device"),
    (["robustness", "demo-chem", "--protocol", "full"], "--protocol"),
    (["robustness", "demo-chem", "--family-from", "arch"], "--family-from"),
    (["neartie", "demo-chem", "--need", "2"], "--need"),
])
def test_an_option_of_the_other_audit_is_refused_not_ignored(demo_db, capsys, argv, flag):
    """`audit robustness` reads stored runs, so a near-tie option given to it (or `--need` to `audit neartie`)
    would change nothing: one line saying so, exit 1, nothing run or stored."""
    before = demo_db.read_bytes()
    assert main(["audit", *argv, "--db", str(demo_db)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{flag} applies to `audit " in err[0], err
    assert demo_db.read_bytes() == before
