"""What a report reads from the store: the benchmark, the latest finished run of each kind, and how to name a
run (number, kind, when, settings) or the command that makes a missing one."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field

from benchloupe.store import read, runs

# The kinds of run each section reads (latest finished first), and the command that makes one.
FIT_KINDS = ("joint", "static")
MAKES = {
    "fit": "benchloupe fit static {b}",
    "bootstrap": "benchloupe bootstrap {b}",
    "items": "benchloupe audit items {b}",
    "compress": "benchloupe compress {b}",
    "validate": "benchloupe compress {b} --validate 10,25,50,100",
    "anomalies": "benchloupe anomalies {b}",
    "contamination": "benchloupe contamination {b}",
    "neartie": "benchloupe audit neartie {b}",
    "coverage": "benchloupe coverage {b}",
}


@dataclass
class Context:
    """One report's reading session: the connection, the benchmark and the runs used so far (for provenance)."""

    conn: sqlite3.Connection
    db_path: str
    benchmark: str
    benchmark_id: int
    used: dict[int, dict] = field(default_factory=dict)
    cache: dict = field(default_factory=dict)  # what two sections read alike (a fit's parameters)
    _static: object = None

    @classmethod
    def open(cls, conn: sqlite3.Connection, db_path: str, benchmark: str) -> Context:
        return cls(conn, db_path, benchmark, read.benchmark_id(conn, benchmark))

    def latest(self, *kinds: str, where=None) -> dict | None:
        """The latest finished run of one of *kinds* on this benchmark (optionally the latest whose config passes
        *where*), recorded as used."""
        q = ",".join("?" * len(kinds))
        for (rid,) in self.conn.execute(
                f"SELECT id FROM runs WHERE benchmark_id = ? AND kind IN ({q}) AND status = 'done' ORDER BY id DESC",
                (self.benchmark_id, *kinds)):
            run = runs.get_run(self.conn, int(rid))
            if where is None or where(run):
                self.used[run["id"]] = run
                return run
        return None

    def missing(self, what: str) -> str:
        return f"No finished run yet: `{MAKES[what].format(b=shell_word(self.benchmark))}` makes one."

    def read(self, section, what: str, label: str, kinds: tuple[str, ...] = (), where=None) -> dict | None:
        """The latest finished run a part of *section* (a :class:`~.doc.Section`) draws: of *kinds* (else of kind
        *what*), the latest passing *where* if given. Named in the section's runs, or, when there is none, the
        section says under *label* which command makes one (``MAKES[what]``)."""
        run = self.latest(*(kinds or (what,)), where=where)
        if run is None:
            section.missing.append(f"{label}: {self.missing(what)}")
        else:
            section.runs.append(describe(run))
        return run

    def static(self):
        """The benchmark's static matrix (active items), read once."""
        if self._static is None:
            self._static = read.load_static_columns(self.conn, self.benchmark)
        return self._static


def shell_word(s: str) -> str:
    """A benchmark name as one shell word in a suggested command."""
    import shlex

    return shlex.quote(s)


def describe(run: dict) -> str:
    """``run #7 (neartie), finished 2026-12-07T12:03:16Z, seed 20260821; settings: a=1, b=2``."""
    when = run.get("finished_at") or run.get("created_at") or "?"
    seed = "" if run.get("seed") is None else f", seed {run['seed']}"
    return f"run #{run['id']} ({run['kind']}), finished {when}{seed}; settings: {settings(run.get('config') or {})}"


def settings(config: dict, limit: int = 12) -> str:
    """The run's settings as ``name=value`` pairs (the first *limit*; provenance lists them all)."""
    items = [f"{k}={_short(v)}" for k, v in sorted(config.items())]
    more = f", … ({len(items) - limit} more in Provenance)" if len(items) > limit else ""
    return ", ".join(items[:limit]) + more if items else "defaults"


def all_settings(config: dict) -> str:
    return json.dumps(config, sort_keys=True, default=str)


def _short(v) -> str:
    s = json.dumps(v, default=str) if not isinstance(v, str) else v
    return s if len(s) <= 40 else s[:39] + "…"
