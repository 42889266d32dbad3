"""Applying a :class:`ParsedImport` to the database in one transaction.

Merge rule: an import adds items and models it names and overwrites the cells it observes; cells it leaves
missing keep their stored value, so re-importing the same file changes nothing (idempotent). ``replace=True``
first deletes the benchmark's results (static, rewards, preferences) — items and models stay — so the
benchmark holds exactly what this file says.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from benchloupe import names
from benchloupe.hints import Alt, Opt, say

from .db import audit, transaction
from .importers.base import ParsedImport

MISSING = -1
_WRITE_CHUNK = 256  # models whose packed result rows are written per executemany


@dataclass
class ImportSummary:
    benchmark: str
    benchmark_id: int
    format: str
    items_new: int = 0
    items_updated: int = 0
    models_new: int = 0
    static_cells: int = 0
    cells_changed: int = 0
    rewards: int = 0
    preferences: int = 0
    replaced: bool = False
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items()}


def _text(v) -> str:
    if v is None or (isinstance(v, float) and np.isnan(v)):
        return ""
    return str(v)


MAX_BENCHMARK_CHARS = 200


def new_benchmark_name(conn: sqlite3.Connection, name: str,
                       where: str | Alt = Alt("-b/--benchmark (or the file's name)",
                                              "the benchmark name field (or the file's name)")) -> str:
    """The name a new benchmark is created under, checked by the one validator of names (issue 37 #11:
    benchloupe/names.py, the curator names' rules: no blank, invisible, bidi or control characters, no lookalike
    scripts, NFC), and refused when it is another spelling of an existing benchmark's name (the same identity:
    ``MMLU`` beside ``mmlu``), in one line saying which."""
    value = names.check(name, what="benchmark name", where=where, max_chars=MAX_BENCHMARK_CHARS)
    key = names.identity(value)
    for (other,) in conn.execute("SELECT name FROM benchmarks"):
        if other != value and names.identity(other) == key:
            raise ValueError(f"benchmark name {names.shown(value)} from {where} is another spelling of the existing "
                             f"benchmark {names.shown(other)}; use that name, or choose one that differs in more than "
                             "case or normalisation")
    return value


def get_or_create_benchmark(conn: sqlite3.Connection, name: str, kind: str | None) -> int:
    """The benchmark's id, creating it; a static benchmark that receives arena data becomes "mixed". A new name
    is checked first (:func:`new_benchmark_name`)."""
    row = conn.execute("SELECT id, kind FROM benchmarks WHERE name = ?", (name,)).fetchone()
    if row is None:
        name = new_benchmark_name(conn, name)
        row = conn.execute("SELECT id, kind FROM benchmarks WHERE name = ?", (name,)).fetchone()  # its NFC form
    if row is None:
        return conn.execute("INSERT INTO benchmarks (name, kind) VALUES (?, ?)", (name, kind or "static")).lastrowid
    if kind is not None and row["kind"] not in (kind, "mixed"):
        conn.execute("UPDATE benchmarks SET kind = 'mixed' WHERE id = ?", (row["id"],))
    return int(row["id"])


class _Batch:
    """What a batch of imports has read and not yet written, per benchmark, so that each file costs its own size
    (issue 24, defect 7: a folder of 5,000 one-row files re-read every stored item and rewrote every model's
    vector once per file, 213 s). Items and models are read once per benchmark and kept up to date as files add
    to them; static vectors are merged in memory and written once, by :meth:`flush`, at the end of the batch."""

    def __init__(self, conn) -> None:
        self.conn = conn
        self.items: dict[int, dict[str, dict]] = {}  # benchmark -> key -> stored row (as a dict)
        self.next_item: dict[int, int] = {}
        self.models_in: dict[int, set[int]] = {}  # benchmark -> model ids listed
        self.next_model: dict[int, int] = {}
        self.static: dict[int, dict[int, list]] = {}  # benchmark -> model -> [n, correct, successes, trials]
        self.dirty: dict[int, set[int]] = {}  # benchmark -> models whose vectors changed
        self.options: dict[int, dict[int, np.ndarray]] = {}  # benchmark -> model -> chosen options (issue 33)
        self.model_ids: dict[str, int] = {}  # name or alias -> model id, as resolved in this batch

    def stored_items(self, bid: int) -> dict[str, dict]:
        if bid not in self.items:
            rows = self.conn.execute("SELECT id, key, pos, text, answer, grp, kind, chance, metadata FROM items "
                                     "WHERE benchmark_id = ?", (bid,))
            self.items[bid] = {r["key"]: dict(r) for r in rows}
            self.next_item[bid] = max((r["pos"] for r in self.items[bid].values()), default=-1) + 1
        return self.items[bid]

    def listed(self, bid: int) -> set[int]:
        if bid not in self.models_in:
            rows = self.conn.execute("SELECT model_id, pos FROM benchmark_models WHERE benchmark_id = ?", (bid,)).fetchall()
            self.models_in[bid] = {r[0] for r in rows}
            self.next_model[bid] = max((r[1] for r in rows), default=-1) + 1
        return self.models_in[bid]

    def vectors(self, bid: int) -> dict[int, list]:
        if bid not in self.static:
            rows = self.conn.execute("SELECT model_id, n, correct, successes, trials, options FROM static_results "
                                     "WHERE benchmark_id = ?", (bid,)).fetchall()
            self.options[bid] = {r["model_id"]: np.frombuffer(r["options"], np.int8).copy() for r in rows
                                 if r["options"] is not None}
            self.static[bid] = {r["model_id"]: [r["n"],
                                                None if r["correct"] is None else np.frombuffer(r["correct"], np.int8),
                                                None if r["successes"] is None else np.frombuffer(r["successes"], np.int32),
                                                None if r["trials"] is None else np.frombuffer(r["trials"], np.int32)]
                                for r in rows}
        return self.static[bid]

    def cleared(self, bid: int) -> None:
        """``replace``: the benchmark's stored results are gone."""
        self.static[bid] = {}
        self.options[bid] = {}
        self.dirty.pop(bid, None)

    def flush(self) -> None:
        """Write every changed vector once (padded to its benchmark's item count), a chunk of models per
        executemany (issue 26: no list of every packed row at 2,000 x 14,000)."""
        sql = ("INSERT OR REPLACE INTO static_results (benchmark_id, model_id, n, correct, successes, trials, options)"
               " VALUES (?, ?, ?, ?, ?, ?, ?)")
        rows = []
        for bid, models in self.dirty.items():
            n = self.next_item.get(bid, 0)
            for mid in sorted(models):
                if len(rows) >= _WRITE_CHUNK:
                    self.conn.executemany(sql, rows)
                    rows = []
                old_n, correct, succ, tri = self.static[bid][mid]
                opt = self.options.get(bid, {}).get(mid)
                if opt is not None:
                    o_out = np.full(n, MISSING, np.int8)
                    o_out[:min(len(opt), n)] = opt[:n]
                    opt = o_out.tobytes()
                if tri is not None:
                    s_out, t_out = np.zeros(n, np.int32), np.zeros(n, np.int32)
                    s_out[:old_n], t_out[:old_n] = succ[:old_n], tri[:old_n]
                    rows.append((bid, mid, n, None, s_out.tobytes(), t_out.tobytes(), opt))
                else:
                    c_out = np.full(n, MISSING, np.int8)
                    c_out[:old_n] = correct[:old_n]
                    rows.append((bid, mid, n, c_out.tobytes(), None, None, opt))
        self.conn.executemany(sql, rows)
        self.dirty.clear()


def _upsert_items(conn, bid: int, items: pd.DataFrame, default_kind: str, summary: ImportSummary,
                  batch: _Batch) -> dict[str, int]:
    stored = batch.stored_items(bid)
    keys = items["key"].astype(str).tolist()
    columns = {c: items[c].tolist() if c in items.columns else None
               for c in ("text", "answer", "group", "kind", "chance", "metadata")}
    new_rows = []
    updates = []
    for i, key in enumerate(keys):
        fields = {name: _present(columns[col][i]) if columns[col] is not None else None
                  for name, col in (("text", "text"), ("answer", "answer"), ("grp", "group"), ("kind", "kind"),
                                    ("chance", "chance"), ("metadata", "metadata"))}
        row = stored.get(key)
        if row is not None:
            if row["id"] is not None:
                sets = {k: v for k, v in fields.items() if v is not None and v != "" and not _same(row[k], k, v)}
                if sets:
                    updates.append((row, sets))
            continue
        pos = batch.next_item[bid]
        batch.next_item[bid] = pos + 1
        new = {"id": None, "key": key, "pos": pos, "text": _text(fields["text"]), "answer": _text(fields["answer"]),
               "grp": _text(fields["grp"]), "kind": fields["kind"] or default_kind,
               "chance": None if fields["chance"] is None else float(fields["chance"]),
               "metadata": json.dumps(fields["metadata"] or {})}
        stored[key] = new
        new_rows.append(new)
    for new in new_rows:
        new["id"] = conn.execute(
            "INSERT INTO items (benchmark_id, pos, key, text, answer, grp, kind, chance, metadata)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (bid, new["pos"], new["key"], new["text"], new["answer"], new["grp"], new["kind"], new["chance"],
             new["metadata"])).lastrowid
    for row, sets in updates:
        if "metadata" in sets:  # merged: the same item seen by two harnesses keeps what each said
            old = row["metadata"]
            merged = json.loads(old or "{}") if (old or "").startswith("{") else {}
            merged.update(sets["metadata"] if isinstance(sets["metadata"], dict) else {})
            sets["metadata"] = json.dumps(merged)
        if "chance" in sets:
            sets["chance"] = float(sets["chance"])
        values = {k: (str(v) if k != "chance" else v) for k, v in sets.items()}
        cols = ", ".join(f"{k} = ?" for k in values)
        conn.execute(f"UPDATE items SET {cols} WHERE id = ?", (*values.values(), row["id"]))
        row.update(values)
    summary.items_new += len(new_rows)
    summary.items_updated += len(updates)
    return _Ids(stored)


class _Ids(Mapping):
    """key -> item id of every item of the benchmark, read from the batch's rows (no copy per file)."""

    def __init__(self, stored: dict[str, dict]) -> None:
        self.stored = stored

    def __getitem__(self, key: str) -> int:
        return self.stored[key]["id"]

    def __iter__(self):
        return iter(self.stored)

    def __len__(self) -> int:
        return len(self.stored)


def _present(v):
    return None if v is None or (isinstance(v, float) and np.isnan(v)) else v


def _same(stored, column: str, value) -> bool:
    """Whether an item field already holds *value* (so re-importing the same metadata updates nothing)."""
    if column == "metadata":
        try:
            return json.loads(stored or "{}") == value
        except ValueError:
            return False
    if column == "chance":
        return stored is not None and float(stored) == float(value)
    return stored == str(value)


def resolve_model(conn: sqlite3.Connection, name: str) -> int | None:
    row = conn.execute("SELECT id FROM models WHERE name = ?", (name,)).fetchone()
    if row is None:
        row = conn.execute("SELECT model_id AS id FROM model_aliases WHERE alias = ?", (name,)).fetchone()
    return None if row is None else int(row["id"])


def _upsert_models(conn, bid: int, models: pd.DataFrame, summary: ImportSummary, batch: _Batch) -> list[int]:
    ids: list[int] = []
    in_bench = batch.listed(bid)
    names = models["name"].astype(str).tolist()
    column = {c: models[c].tolist() if c in models.columns else None for c in ("family", "owner", "metadata", "aliases")}
    for i, name in enumerate(names):
        family, owner, meta, aliases = (_present(column[c][i]) if column[c] is not None else None
                                        for c in ("family", "owner", "metadata", "aliases"))
        mid = batch.model_ids.get(name) or resolve_model(conn, name)
        if mid is None:
            mid = conn.execute(
                "INSERT INTO models (name, family, owner, metadata) VALUES (?, ?, ?, ?)",
                (name, family, owner, json.dumps(meta or {})),
            ).lastrowid
            summary.models_new += 1
        else:
            if family is not None:
                conn.execute("UPDATE models SET family = ? WHERE id = ?", (family, mid))
            if owner is not None:
                conn.execute("UPDATE models SET owner = ? WHERE id = ?", (owner, mid))
        batch.model_ids[name] = mid
        for alias in aliases or []:
            if conn.execute("INSERT OR IGNORE INTO model_aliases (alias, model_id) VALUES (?, ?)",
                            (str(alias), mid)).rowcount:
                batch.model_ids.setdefault(str(alias), mid)
        if mid not in in_bench:
            conn.execute("INSERT INTO benchmark_models (benchmark_id, model_id, pos) VALUES (?, ?, ?)",
                         (bid, mid, batch.next_model[bid]))
            in_bench.add(mid)
            batch.next_model[bid] += 1
        ids.append(int(mid))
    return ids


def _write_static(conn, bid: int, parsed: ParsedImport, item_ids: dict[str, int], model_ids: list[int],
                  summary: ImportSummary, batch: _Batch) -> None:
    """Merge the file's cells into the benchmark's vectors (in memory; written by :meth:`_Batch.flush`)."""
    stored = batch.stored_items(bid)
    n = batch.next_item[bid]
    cols = np.array([stored[k]["pos"] for k in parsed.items["key"].astype(str)], dtype=np.int64)
    existing = batch.vectors(bid)
    if parsed.trials is None and any(v[3] is not None for v in existing.values()):
        # 0/1 results into a successes/trials benchmark: one trial each (lossless), e.g. lm-eval next to epochs.
        parsed.successes = np.maximum(parsed.correct, 0).astype(np.int32)
        parsed.trials = (parsed.correct >= 0).astype(np.int32)
    binomial = parsed.trials is not None
    run = parsed.run or {}
    accumulate = bool(run.get("accumulate"))  # later lm-eval runs add trials to the stored ones (issue 37)
    changed = 0
    dirty = batch.dirty.setdefault(bid, set())
    for m, mid in enumerate(model_ids):
        old = existing.get(mid)
        if binomial:
            succ = np.zeros(n, np.int32)
            tri = np.zeros(n, np.int32)
            if old is not None and old[3] is not None:
                succ[: old[0]] = old[2][: old[0]]
                tri[: old[0]] = old[3][: old[0]]
            elif old is not None and old[1] is not None:
                prev = old[1][: old[0]]
                seen = prev >= 0
                succ[: old[0]][seen] = prev[seen]
                tri[: old[0]][seen] = 1
            new_t = parsed.trials[m]
            obs = new_t > 0
            tgt = cols[obs]
            if accumulate:
                changed += int(obs.sum())
                tri[tgt] += new_t[obs]
                succ[tgt] += parsed.successes[m][obs]
                existing[mid] = [n, None, succ, tri]
                dirty.add(mid)
                summary.static_cells += int(obs.sum())
                continue
            held = int((tri[tgt] > 0).sum())
            if run.get("reruns") == "trials" and held:
                raise ValueError(say(
                    f"model {str(parsed.models['name'].iat[m])!r} already has results for {held} of these items of "
                    f"benchmark {parsed.benchmark!r} that no recorded run of task {run.get('task')!r} gave (another "
                    "file or format); trials cannot be added to them: replace them with ", Opt("reruns", "newest"),
                    ", or import into another benchmark (", Opt("benchmark"), ")"))
            changed += int(((tri[tgt] != new_t[obs]) | (succ[tgt] != parsed.successes[m][obs])).sum())
            tri[tgt] = new_t[obs]
            succ[tgt] = parsed.successes[m][obs]
            existing[mid] = [n, None, succ, tri]
            _merge_options(batch, bid, mid, n, tgt, None)
        else:
            if old is not None and old[3] is not None:
                raise ValueError(
                    say(f"benchmark {parsed.benchmark!r} holds successes/trials results; import 0/1 results with ",
                        Opt("replace"), " or into another benchmark")
                )
            vec = np.full(n, MISSING, np.int8)
            if old is not None:
                vec[: old[0]] = old[1][: old[0]]
            new = parsed.correct[m]
            obs = new >= 0
            tgt = cols[obs]
            changed += int((vec[tgt] != new[obs]).sum())
            vec[tgt] = new[obs]
            existing[mid] = [n, vec, None, None]
            _merge_options(batch, bid, mid, n, tgt, None if parsed.options is None else parsed.options[m][obs])
        dirty.add(mid)
        summary.static_cells += int(obs.sum())
    summary.cells_changed = changed


def _merge_options(batch: _Batch, bid: int, mid: int, n: int, tgt: np.ndarray, chosen: np.ndarray | None) -> None:
    """The model's stored chosen options follow its cells: the file's options where it has them, and -1 (unknown)
    where a file without options rewrote a cell, so a later re-score never uses a stale option."""
    stored = batch.options.setdefault(bid, {})
    old = stored.get(mid)
    if old is None and chosen is None:
        return
    vec = np.full(n, MISSING, np.int8)
    if old is not None:
        vec[:min(len(old), n)] = old[:n]
    vec[tgt] = MISSING if chosen is None else chosen
    stored[mid] = vec


def score_options(conn, bid: int, parsed: ParsedImport, batch: _Batch) -> None:
    """Map a file's chosen option labels onto each item's choices and score them with its answer (issue 33):
    ``parsed.correct`` becomes 1 where the chosen option is the answer, 0 where another, -1 where unknown, and
    ``parsed.options`` the index into the item's choices. An item with declared choices (``items.choices``) must
    hold every label and its answer; one without gets its labels and answer as choices. Refused, nothing written,
    when an item has no answer or a label is not among its choices."""
    stored = batch.stored_items(bid)
    declared = {r[0]: json.loads(r[1] or "[]") for r in conn.execute(
        "SELECT key, choices FROM items WHERE benchmark_id = ?", (bid,))}
    given = parsed.items["choices"].tolist() if "choices" in parsed.items.columns else None
    codes = parsed.options
    correct = np.full(codes.shape, MISSING, np.int8)
    mapped = np.full(codes.shape, MISSING, np.int8)
    for j, key in enumerate(parsed.items["key"].astype(str).tolist()):
        row = stored[key]
        answer = str(row.get("answer") or "").strip()
        labels = [str(x) for x in parsed.option_labels[j]]
        choices = [str(c) for c in (given[j] if given is not None and isinstance(given[j], list) and given[j]
                                    else declared.get(key) or [])]
        if not (codes[:, j] >= 0).any() and not choices:  # no option known for this item (a free-answer item)
            continue
        if not answer:
            raise ValueError(say(f"item {key!r} has no answer to score the chosen options with; import the items "
                                 "with their answers first (", Alt("`benchloupe import items FILE`", "an items file "
                                 "imported from 1 Benchmarks"), " with an answer column), then the options"))
        if choices:
            bad = [x for x in labels if x not in choices]
            if bad:
                raise ValueError(f"item {key!r}: option {bad[0]!r} is not among its choices ({', '.join(choices)}); "
                                 "fix the file, or the item's choices")
            if answer not in choices:
                raise ValueError(f"item {key!r}: its answer {answer!r} is not among its choices "
                                 f"({', '.join(choices)}); fix the answer with `import items`")
        else:
            choices = sorted(set(labels) | {answer})
        if len(choices) > 127:
            raise ValueError(f"item {key!r} has {len(choices)} choices; at most 127 can be kept")
        remap = np.array([choices.index(x) for x in labels] or [0], np.int8)
        col = codes[:, j]
        known = col >= 0
        mapped[known, j] = remap[col[known]]
        correct[known, j] = mapped[known, j] == choices.index(answer)
        if choices != declared.get(key):
            conn.execute("UPDATE items SET choices = ? WHERE benchmark_id = ? AND key = ?",
                         (json.dumps(choices), bid, key))
    if parsed.score_from_options:
        parsed.correct = correct
    parsed.options = mapped


def _model_lookup(conn, bid: int, names) -> dict[str, int]:
    out = {}
    for name in pd.unique(pd.Series(list(names), dtype=object)):
        mid = resolve_model(conn, str(name))
        if mid is None:
            raise ValueError(f"model {name!r} is not in the import's model list")
        out[str(name)] = mid
    return out


def write_import(conn: sqlite3.Connection, parsed: ParsedImport, *, fmt: str, sha256: str = "",
                 replace: bool = False) -> ImportSummary:
    """Apply *parsed* in one transaction and record it in ``imports`` and the audit log."""
    with transaction(conn):
        batch = _Batch(conn)
        out = apply_import(conn, parsed, fmt=fmt, sha256=sha256, replace=replace, batch=batch)
        batch.flush()
        return out


def write_imports(conn: sqlite3.Connection, batch: list[tuple[ParsedImport, str, str]], *,
                  replace: bool = False) -> list[ImportSummary]:
    """Apply several ``(parsed, format, sha256)`` in ONE transaction (a folder of logs: all or nothing).

    ``replace`` clears each benchmark's results once, before the first file of that benchmark.
    """
    out, cleared = [], set()
    with transaction(conn):
        state = _Batch(conn)
        for parsed, fmt, sha in batch:
            first = parsed.benchmark not in cleared
            cleared.add(parsed.benchmark)
            out.append(apply_import(conn, parsed, fmt=fmt, sha256=sha, replace=replace and first, batch=state))
        state.flush()
    return out


def apply_import(conn: sqlite3.Connection, parsed: ParsedImport, *, fmt: str, sha256: str = "",
                 replace: bool = False, batch: _Batch | None = None) -> ImportSummary:
    """Apply *parsed* inside the caller's transaction (see :func:`write_import`); static vectors wait in *batch*
    until its :meth:`_Batch.flush` (without one, they are written before this returns)."""
    if batch is None:
        batch = _Batch(conn)
        out = apply_import(conn, parsed, fmt=fmt, sha256=sha256, replace=replace, batch=batch)
        batch.flush()
        return out
    bid = get_or_create_benchmark(conn, parsed.benchmark, None if parsed.item_metadata_only else parsed.kind)
    parsed.benchmark = conn.execute("SELECT name FROM benchmarks WHERE id = ?", (bid,)).fetchone()[0]  # NFC
    summary = ImportSummary(parsed.benchmark, bid, fmt, replaced=replace, notes=list(parsed.notes))
    if replace:
        conn.execute("DELETE FROM static_results WHERE benchmark_id = ?", (bid,))
        conn.execute("DELETE FROM arena_rewards WHERE item_id IN (SELECT id FROM items WHERE benchmark_id = ?)",
                     (bid,))
        conn.execute("DELETE FROM preferences WHERE item_id IN (SELECT id FROM items WHERE benchmark_id = ?)",
                     (bid,))
        batch.cleared(bid)
    if parsed.run and "prior" in parsed.run and not replace:
        _same_stored_runs(conn, parsed)
    default_kind = "arena" if parsed.kind == "arena" else "static"
    item_ids = _upsert_items(conn, bid, parsed.items, default_kind, summary, batch)
    model_ids = _upsert_models(conn, bid, parsed.models, summary, batch) if len(parsed.models) else []
    if parsed.options is not None:
        score_options(conn, bid, parsed, batch)
    if parsed.correct is not None or parsed.trials is not None:
        _write_static(conn, bid, parsed, item_ids, model_ids, summary, batch)
    if parsed.rewards is not None and len(parsed.rewards):
        r = parsed.rewards
        models = _model_lookup(conn, bid, r["model"].astype(str))
        rm = r["reward_model"].astype(str) if "reward_model" in r.columns else pd.Series([""] * len(r))
        conn.executemany(
            "INSERT OR REPLACE INTO arena_rewards (item_id, model_id, reward_model, reward) VALUES (?, ?, ?, ?)",
            zip((item_ids[str(k)] for k in r["item"]), (models[str(m)] for m in r["model"]), rm,
                r["reward"].astype(float)),
        )
        summary.rewards = len(r)
    if parsed.preferences is not None and len(parsed.preferences):
        p = parsed.preferences
        models = _model_lookup(conn, bid, list(p["model_a"].astype(str)) + list(p["model_b"].astype(str)))
        judge = p["judge"].astype(str) if "judge" in p.columns else pd.Series([""] * len(p))
        conn.executemany(
            "INSERT OR REPLACE INTO preferences (item_id, model_a, model_b, judge, prob_a) VALUES (?, ?, ?, ?, ?)",
            zip((item_ids[str(k)] for k in p["item"]), (models[str(m)] for m in p["model_a"]),
                (models[str(m)] for m in p["model_b"]), judge, p["prob_a"].astype(float)),
        )
        summary.preferences = len(p)
    counts = parsed.counts()
    if parsed.run and "records" in parsed.run:
        counts["runs"] = parsed.run["records"]  # the harness runs these cells count (store/harness_runs.py)
    conn.execute(
        "INSERT INTO imports (benchmark_id, format, source, sha256, counts, replaced) VALUES (?, ?, ?, ?, ?, ?)",
        (bid, fmt, parsed.source, sha256, json.dumps(counts), int(replace)),
    )
    audit(conn, "import", "benchmark", bid, json.dumps({"format": fmt, "source": parsed.source, **counts,
                                                         "replace": replace}))
    return summary


def _same_stored_runs(conn: sqlite3.Connection, parsed: ParsedImport) -> None:
    """Refuse when the runs a trials import was resolved against (read before this transaction) are no longer the
    stored ones: another import wrote runs of the same task and model meanwhile (issue 37)."""
    from .harness_runs import current_runs

    run = parsed.run
    group = (str(parsed.models["name"].iloc[0]), str(run.get("task")), str(run.get("identity")))
    now = sorted(str(r.get("run_id")) for r in current_runs(conn, parsed.benchmark).get(group, []))
    if now != list(run["prior"]):
        raise ValueError(f"the stored runs of task {run.get('task')!r} for model {group[0]!r} changed while this "
                         "import was read (another import wrote them); run the import again")


def derive_benchmark(conn: sqlite3.Connection, source: str, name: str, item_ids: list[int], *, reason: str,
                     detail: dict | None = None) -> int:
    """A new benchmark holding a subset of *source*'s items with their results (compression, calibration).

    Items are copied with origin "derived" and ``parent_id`` pointing at the source item; the source is not
    changed. One transaction; audited.
    """
    with transaction(conn):
        src = conn.execute("SELECT id, kind FROM benchmarks WHERE name = ?", (source,)).fetchone()
        if src is None:
            raise ValueError(f"no benchmark named {source!r}")
        name = new_benchmark_name(conn, name, "the new benchmark's name")
        if conn.execute("SELECT 1 FROM benchmarks WHERE name = ?", (name,)).fetchone():
            raise ValueError(say(f"a benchmark named {name!r} already exists; choose another ", Opt("name")))
        if not item_ids:
            raise ValueError("the subset is empty; nothing to export")
        bid = conn.execute("INSERT INTO benchmarks (name, kind, description, metadata) VALUES (?, ?, ?, ?)",
                           (name, src["kind"], f"{reason} of {source}",
                            json.dumps({"derived_from": source, "reason": reason, **(detail or {})}))).lastrowid
        wanted = set(int(i) for i in item_ids)
        rows = [r for r in conn.execute("SELECT * FROM items WHERE benchmark_id = ? ORDER BY pos", (src["id"],))
                if r["id"] in wanted]
        old_pos = np.array([r["pos"] for r in rows], np.int64)
        new_ids = {}
        for new_pos, r in enumerate(rows):
            new_ids[r["id"]] = conn.execute(
                "INSERT INTO items (benchmark_id, pos, key, text, answer, grp, kind, chance, origin, parent_id, status,"
                " metadata) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'derived', ?, 'active', ?)",
                (bid, new_pos, r["key"], r["text"], r["answer"], r["grp"], r["kind"], r["chance"], r["id"],
                 r["metadata"])).lastrowid
        conn.execute("INSERT INTO benchmark_models (benchmark_id, model_id, pos) SELECT ?, model_id, pos"
                     " FROM benchmark_models WHERE benchmark_id = ?", (bid, src["id"]))
        out = []
        for r in conn.execute("SELECT * FROM static_results WHERE benchmark_id = ?", (src["id"],)):
            sel = old_pos[old_pos < r["n"]]
            def pick(blob, dtype, fill, sel=sel, n=r["n"]):
                v = np.full(len(old_pos), fill, dtype)
                if blob is not None:
                    v[old_pos < n] = np.frombuffer(blob, dtype)[sel]
                    return v.tobytes()
                return None
            out.append((bid, r["model_id"], len(old_pos), pick(r["correct"], np.int8, -1),
                        pick(r["successes"], np.int32, 0), pick(r["trials"], np.int32, 0)))
        conn.executemany("INSERT INTO static_results (benchmark_id, model_id, n, correct, successes, trials)"
                         " VALUES (?, ?, ?, ?, ?, ?)", out)
        for old, new in new_ids.items():
            conn.execute("INSERT INTO arena_rewards (item_id, model_id, reward_model, reward) SELECT ?, model_id,"
                         " reward_model, reward FROM arena_rewards WHERE item_id = ?", (new, old))
            conn.execute("INSERT INTO preferences (item_id, model_a, model_b, judge, prob_a) SELECT ?, model_a,"
                         " model_b, judge, prob_a FROM preferences WHERE item_id = ?", (new, old))
        audit(conn, "benchmark:derive", "benchmark", bid, json.dumps({"source": source, "items": len(rows),
                                                                       "reason": reason, **(detail or {})}))
    return int(bid)
