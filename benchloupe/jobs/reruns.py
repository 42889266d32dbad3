"""Harness re-runs (issues 23 and 37): several runs of one task for one model in one import, or a run of a task
already stored, resolved to the cells that are written (newest run, or trials added up) before any write; shared by
the single-file import (:func:`benchloupe.jobs.import_file`) and the batch (:func:`benchloupe.jobs.imports.import_paths`),
so neither imports the other."""

from __future__ import annotations

import hashlib
import json

import numpy as np

from benchloupe.hints import Opt, say
from benchloupe.store.importers.base import ImportFormatError, ParsedImport
from benchloupe.words import count


def _shown(value, width: int = 60) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= width else text[:width - 3] + "..."


def _record(label: str, parsed: ParsedImport, sha: str) -> dict:
    """What the store keeps of one harness run (store/harness_runs.py): file, bytes, settings, documents."""
    run = parsed.run or {}
    return {"sha256": sha, "run_id": f"{run.get('stamp')}:{sha}", "path": label, "stamp": run.get("stamp"), "task": run.get("task"),
            "model": str(parsed.models["name"].iloc[0]), "identity": run.get("identity"),
            "settings": run.get("settings") or {}, "docs_digest": _docs_digest(run.get("docs") or {}),
            # the per-item digests only where a later import compares item by item: trials (a 14,000-item task
            # run by 100 models would otherwise store 100 copies of them)
            **({"docs": run.get("docs") or {}} if run.get("reruns") == "trials" else {})}


def _docs_digest(docs: dict) -> str:
    """One digest of a run's documents: every item key with its document's digest."""
    text = "\n".join(f"{k}\t{docs[k]}" for k in sorted(docs))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def resolve_reruns(parsed_all: list[tuple[str, str, ParsedImport, str]],
                   stored: dict[str, dict] | None = None) -> list[tuple[str, str, ParsedImport, str]]:
    """Several runs of one harness task for one model (lm-eval re-runs, issues 23 and 37; ``ParsedImport.run``;
    one model = one name *and* one recorded identity, :func:`benchloupe.store.importers.lmeval.recorded_model`).

    ``stored`` maps a benchmark to the runs its stored cells already count
    (:func:`benchloupe.store.harness_runs.current_runs`). A run already counted (the same timestamp and bytes: a
    copied folder, a second import of the same file) is dropped with a note. With ``reruns`` "newest" the latest
    run (by its timestamp) is kept and a note names the files it supersedes, stored runs included; with
    "trials" every run becomes a repeated trial of its items (successes of trials) when their documents and
    settings agree with each other and with the stored runs, added to the stored trials, and the import is
    refused, naming the first differing item or each differing setting with both values, when they do not.
    Entries are ``(label, format, parsed, sha256)``; other entries pass through in order."""
    stored = stored or {}
    groups: dict[tuple[str, str, str, str], list[int]] = {}
    for idx, (_, _, parsed, _) in enumerate(parsed_all):
        run = parsed.run
        if not run or run.get("tool") != "lm-eval" or len(parsed.models) != 1:
            continue
        key = (parsed.benchmark, str(parsed.models["name"].iloc[0]), str(run.get("task")), str(run.get("identity")))
        groups.setdefault(key, []).append(idx)
    drop: set[int] = set()
    replace_at: dict[int, tuple[str, str, ParsedImport, str]] = {}
    for (bench, model, task, identity), idxs in groups.items():
        prior = (stored.get(bench) or {}).get((model, task, identity), [])
        order = sorted(idxs, key=lambda i: (str(parsed_all[i][2].run.get("stamp")), parsed_all[i][0]))
        mode = parsed_all[order[-1]][2].run.get("reruns", "newest")
        for i in order:
            parsed_all[i][2].run["records"] = [_record(parsed_all[i][0], parsed_all[i][2], parsed_all[i][3])]
        # One run = its samples' bytes and its timestamp: two runs that answered alike write the same bytes (the
        # samples carry no date), a copied file keeps both.
        before = {r.get("run_id"): r.get("path") for r in prior}
        seen: dict[str, str] = {}
        fresh, notes = [], []
        for i in order:
            label, _, _, _ = parsed_all[i]
            sha = parsed_all[i][2].run["records"][0]["run_id"]
            if sha in seen:
                notes.append(f"{label} holds the same bytes as {seen[sha]} (a copy): counted once")
            elif sha in before and mode == "trials":
                notes.append(f"{label} holds the same bytes as {before[sha]}, already imported: not counted again")
            else:
                fresh.append(i)
            seen.setdefault(sha, label)
        if mode == "trials":
            _same_runs([*prior, *(parsed_all[i][2].run["records"][0] for i in fresh)], task, model)
            keep = fresh[-1] if fresh else order[-1]
            replace_at[keep] = _as_trials(parsed_all, fresh or [keep], task, model, prior, bool(fresh))
            replace_at[keep][2].notes.extend(notes)
            drop.update(i for i in order if i != keep)
            continue
        newest = fresh[-1]
        parsed_all[newest][2].notes.extend(notes)
        this = parsed_all[newest][2].run["records"][0]["run_id"]
        superseded = [parsed_all[i][0] for i in fresh[:-1]]
        earlier = [f"{r.get('path')} ({r.get('stamp')})" for r in prior if r.get("run_id") != this]
        if superseded or earlier:
            parsed_all[newest][2].notes.append(say(
                f"the newest of {len(fresh) + len(earlier)} runs of task {task!r} for model {model!r} "
                f"({parsed_all[newest][2].run.get('stamp')}); it supersedes {', '.join(superseded + earlier)}"
                + (f" (already imported: the stored results of {count(len(earlier), 'run')} are replaced)"
                   if earlier else "") + " (keep every run as repeated trials with ", Opt("reruns", "trials"), ")"))
        drop.update(i for i in order if i != newest)
    return [replace_at.get(i, entry) for i, entry in enumerate(parsed_all) if i not in drop]


def _differences(a, b, prefix: str = "", depth: int = 4) -> list[tuple[str, object, object]]:
    """(dotted key, value in a, value in b) for every leaf where two settings trees differ."""
    if isinstance(a, dict) and isinstance(b, dict) and depth > 0:
        out = []
        for k in dict.fromkeys([*a, *b]):
            out += _differences(a.get(k), b.get(k), f"{prefix}.{k}" if prefix else str(k), depth - 1)
        return out
    return [] if _shown(a, 10 ** 6) == _shown(b, 10 ** 6) else [(prefix, a, b)]


def _same_runs(runs: list[dict], task: str, model: str) -> None:
    """Refuse runs that are not repeated trials of one thing: the same documents and targets for every item they
    share, and the same settings (issue 37). ``runs`` are :func:`_record` dicts, the stored ones first."""
    if len(runs) < 2:
        return
    first = runs[0]
    for run in runs[1:]:
        a, b = first.get("docs"), run.get("docs")
        if a is not None and b is not None:
            changed = [k for k in a if k in b and a[k] != b[k]]
            which = (f"item {changed[0]!r}" + (f" and {len(changed) - 1} more" if len(changed) > 1 else "")
                     + f" has another document or target in {first['path']} than in this file") if changed else ""
        else:  # a run stored by a newest import kept only the digest of its documents
            changed = [] if first.get("docs_digest") == run.get("docs_digest") else [""]
            which = f"the items or their documents or targets differ from those of {first['path']}"
        if changed:
            raise ImportFormatError(
                run["path"], "", f"runs of task {task!r} for model {model!r} differ in their documents, so they are "
                f"not repeated trials of the same items ({which})",
                say("keep the newest run (", Opt("reruns", "newest"), "), or import the runs into separate benchmarks (",
                    Opt("benchmark"), ")"))
        diff = _differences(first.get("settings") or {}, run.get("settings") or {})
        if diff:
            detail = "; ".join(f"{k}: {_shown(va)} vs {_shown(vb)}" for k, va, vb in diff[:4])
            raise ImportFormatError(
                run["path"], "", f"runs of task {task!r} for model {model!r} differ in their settings, so they are not "
                f"repeated trials of one setting ({first['path']} vs this file: {detail}"
                + (f"; and {len(diff) - 4} more" if len(diff) > 4 else "") + ")",
                say("keep the newest run (", Opt("reruns", "newest"), "), or import the runs into separate benchmarks (",
                    Opt("benchmark"), ")"))


def _as_trials(parsed_all, order: list[int], task: str, model: str, prior: list[dict],
               fresh: bool) -> tuple[str, str, ParsedImport, str]:
    """One ParsedImport holding every run of ``order`` as trials: successes and trials per item, items in order of
    first appearance. With ``prior`` (runs the stored cells already count) the writer adds these trials to the
    stored ones (``run["accumulate"]``); without ``fresh`` runs every file was already counted and nothing is added."""
    import pandas as pd

    keys: dict[str, int] = {}
    rows = []
    for i in order:
        items = parsed_all[i][2].items
        for r in items.to_dict("records"):
            if str(r["key"]) not in keys:
                keys[str(r["key"])] = len(rows)
                rows.append(r)
    succ = np.zeros((1, len(rows)), np.int32)
    tri = np.zeros((1, len(rows)), np.int32)
    for i in order if fresh else []:
        parsed = parsed_all[i][2]
        for j, key in enumerate(parsed.items["key"].astype(str)):
            col = keys[key]
            if parsed.trials is not None:
                succ[0, col] += int(parsed.successes[0, j])
                tri[0, col] += int(parsed.trials[0, j])
            elif parsed.correct[0, j] >= 0:
                succ[0, col] += int(parsed.correct[0, j])
                tri[0, col] += 1
    label, fmt, newest, _ = parsed_all[order[-1]]
    records = [parsed_all[i][2].run["records"][0] for i in order] if fresh else []
    if prior:
        for rec in records:
            rec["accumulate"] = True
    merged = ParsedImport(benchmark=newest.benchmark, kind=newest.kind, items=pd.DataFrame(rows),
                          models=newest.models, successes=succ, trials=tri,
                          source=";".join(parsed_all[i][2].source for i in order),
                          notes=[n for i in order for n in parsed_all[i][2].notes],
                          run={**newest.run, "merged": [parsed_all[i][0] for i in order], "records": records,
                               "accumulate": bool(prior),
                               "prior": sorted(str(r.get("run_id")) for r in prior)})
    merged.notes = list(dict.fromkeys(merged.notes))
    if fresh and (prior or len(order) > 1):
        merged.notes.append(
            f"{len(prior) + len(order)} runs of task {task!r} for model {model!r} kept as repeated trials (same "
            "documents and settings): " + ", ".join([*(str(r.get("path")) for r in prior),
                                                     *(parsed_all[i][0] for i in order)])
            + (f" ({len(prior)} already imported; this import adds {len(order)})" if prior else ""))
    sha = hashlib.sha256("".join(parsed_all[i][3] for i in order).encode()).hexdigest()
    return label, fmt, merged, sha


def stored_runs(db_path, parsed_all) -> dict[str, dict]:
    """The harness runs each benchmark's stored cells count, for the benchmarks this batch's runs write (read
    before the write; the writer checks in its transaction that they did not change meanwhile)."""
    from benchloupe.store.db import connect
    from benchloupe.store.harness_runs import current_runs

    names = {p.benchmark for _, _, p, _ in parsed_all if p.run}
    if not names:
        return {}
    conn = connect(db_path)
    try:
        return {name: current_runs(conn, name) for name in names}
    finally:
        conn.close()
