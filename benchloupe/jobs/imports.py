"""Importing many files at once: paths, globs, folders and stdin -> parsed imports -> one transaction.

``benchloupe import FORMAT PATH...``: each PATH is a file, a glob (``results/*/annotations.json``, ``**``
allowed), a folder (walked recursively: an lm-eval ``--output_path`` tree, an Inspect log dir or eval set,
an AlpacaEval ``results/`` folder) or ``-`` for standard input. Files named explicitly must parse; files
found in a folder or by a glob that the format does not recognise are skipped and counted (the format's
``wants`` rule, see ``store.importers.detect.wanted``). Every file is parsed and validated before the
database is opened; then all of them are written in one transaction, so a bad file among a hundred leaves
the database exactly as it was.
"""

from __future__ import annotations

import glob
import hashlib
import os
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from benchloupe.hints import Alt, Opt, say
from benchloupe.store.importers.base import ImportFormatError, ParsedImport
from benchloupe.store.importers.options import OPTION_NAMES, OPTIONS, ImportOption  # noqa: F401 - re-exported
from benchloupe.words import count

from .reruns import resolve_reruns, stored_runs

STDIN = "-"


def format_options(fmt: str | None) -> list[str]:
    """The names of the OPTIONS the format's parser takes (aliases resolved), in OPTIONS order; for ``None`` or
    "auto" the options of every format (the CLI passes them all and each parser keeps its own)."""
    import inspect

    from benchloupe.store.importers.detect import ALIASES, FORMATS

    if fmt in (None, "", "auto"):
        return list(OPTION_NAMES)
    parser = FORMATS.get(ALIASES.get(fmt, fmt))
    if parser is None:
        return []
    takes = set(inspect.signature(parser).parameters)
    return [n for n in OPTION_NAMES if n in takes]


@dataclass
class BatchSummary:
    """What one ``import`` did: per file, per benchmark and per model."""

    files: list[dict] = field(default_factory=list)
    benchmarks: dict[str, dict] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"files": self.files, "benchmarks": self.benchmarks, "skipped": self.skipped}


def walk(root: str | Path, *, max_depth: int | None = None, visited: set | None = None):
    """``(folder, subfolders, files)`` under *root*, top-down and sorted, hidden names skipped, like ``os.walk``,
    except that a link to a folder is followed only into a folder not visited yet (by device and inode): a tree
    with ``a/self -> .`` and ``a/up -> ..`` is walked once, instead of forever as ``glob('**')`` did (issue 24).
    *max_depth* stops below that many levels; folders that cannot be read are skipped."""
    seen = set() if visited is None else visited
    try:
        st = os.stat(root)
    except OSError:
        return
    seen.add((st.st_dev, st.st_ino))
    stack = [(str(root), 0)]
    while stack:
        folder, depth = stack.pop()
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            continue
        dirs, files = [], []
        for e in entries:
            if e.name.startswith("."):
                continue
            try:
                if e.is_dir():  # follows links
                    if max_depth is not None and depth >= max_depth:
                        continue
                    est = e.stat()
                    key = (est.st_dev, est.st_ino)
                    if key in seen:
                        continue
                    seen.add(key)
                    dirs.append(e.name)
                elif e.is_file():
                    files.append(e.name)
            except OSError:  # a dangling link, a file that vanished
                continue
        yield folder, dirs, files
        stack.extend((os.path.join(folder, d), depth + 1) for d in reversed(dirs))


def glob_paths(pattern: str) -> list[str]:
    """The paths matching *pattern* (``*``, ``?``, ``[...]`` within a name, ``**`` for any number of folders),
    sorted, as ``glob.glob(pattern, recursive=True)`` gives them but walked with :func:`walk`, so links never
    lead back into a folder already visited. Hidden names match only a pattern part that starts with a dot."""
    parts = pattern.split(os.sep)
    fixed = 0
    while fixed < len(parts) - 1 and not glob.has_magic(parts[fixed]):
        fixed += 1
    root = os.sep.join(parts[:fixed]) or ("" if not pattern.startswith(os.sep) else os.sep)
    pats = [q for q in parts[fixed:] if q != ""]
    if not pats:
        return [pattern] if os.path.exists(pattern) else []
    depth = None if "**" in pats else len(pats)
    out = []
    start = root or os.curdir
    if not os.path.isdir(start):
        return []
    only_dirs = pattern.endswith(os.sep)
    for folder, dirs, files in walk(start, max_depth=depth):
        rel = os.path.relpath(folder, start)
        prefix = [] if rel == os.curdir else rel.split(os.sep)
        for name in dirs if only_dirs else dirs + files:
            if _match(prefix + [name], pats):
                out.append(os.path.join(root, *prefix, name) if root else os.path.join(*prefix, name))
    return sorted(out)


def _match(parts: list[str], pats: list[str]) -> bool:
    """Whether path *parts* match pattern *pats* part by part (``**``: zero or more non-hidden folders)."""
    import fnmatch

    if not pats:
        return not parts
    head = pats[0]
    if head == "**":
        if _match(parts, pats[1:]):
            return True
        return bool(parts) and not parts[0].startswith(".") and _match(parts[1:], pats)
    if not parts or (parts[0].startswith(".") and not head.startswith(".")):
        return False
    return fnmatch.fnmatchcase(parts[0], head) and _match(parts[1:], pats[1:])


def expand_paths(paths: list[str], fmt: str | None) -> list[tuple[Path, bool]]:
    """(file, named explicitly) for every PATH; folders walked, globs expanded, duplicates dropped. Walks and
    globs go through :func:`walk`: no folder is entered twice, whatever links point where."""
    from benchloupe.store.importers.detect import wanted

    out: dict[Path, bool] = {}
    seen: set[tuple[int, int]] = set()  # (device, inode) of files found by walks and globs

    def found(f: Path) -> None:
        """A file found in a folder or by a glob, once whatever links lead to it."""
        try:
            st = f.stat()
        except OSError:
            return
        if (st.st_dev, st.st_ino) not in seen:
            seen.add((st.st_dev, st.st_ino))
            out.setdefault(f, False)

    for raw in paths:
        if raw == STDIN:
            continue
        p = Path(raw)
        if p.is_dir():
            for root, _dirs, files in walk(p):
                for name in files:
                    f = Path(root) / name
                    if wanted(f, fmt):
                        found(f)
        elif p.exists():
            out[p] = True
            try:
                st = p.stat()
                seen.add((st.st_dev, st.st_ino))
            except OSError:
                pass
        elif glob.has_magic(raw):
            hits = glob_paths(raw)
            files = [Path(h) for h in hits if Path(h).is_file() and wanted(Path(h), fmt)]
            for d in (Path(h) for h in hits if Path(h).is_dir()):
                files += [f for f, _ in expand_paths([str(d)], fmt)]
            if not files:
                raise ImportFormatError(raw, "", "the pattern matches no importable file", "check the pattern")
            for f in files:
                found(f)
        else:
            raise ImportFormatError(p, "", "no such file or folder", "check the path")
    return list(out.items())


def _stdin_file(fmt: str | None) -> Path:
    """Standard input saved to a temporary file whose suffix the format (or the content) implies."""
    data = sys.stdin.buffer.read()
    if not data.strip():
        raise ImportFormatError("<stdin>", "", "standard input is empty", "pipe a file into `import FORMAT -`")
    head = data.lstrip()[:1]
    suffix = {"inspect": ".json", "neartie-npz": ".npz", "lm-eval": ".jsonl", "parquet": ".parquet"}.get(fmt or "")
    if suffix is None:
        suffix = ".eval" if data[:2] == b"PK" else ".parquet" if data[:4] == b"PAR1" else \
            ".json" if head == b"[" else ".jsonl" if head == b"{" else ".csv"
    fd, name = tempfile.mkstemp(prefix="benchloupe-stdin-", suffix=suffix)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    return Path(name)


def _sha256(data_path: Path) -> str:
    h = hashlib.sha256()
    with open(data_path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _as_binomial(parsed: ParsedImport) -> None:
    if parsed.correct is not None and parsed.trials is None:
        c = parsed.correct
        parsed.successes = np.maximum(c, 0).astype(np.int32)
        parsed.trials = (c >= 0).astype(np.int32)
        parsed.correct = None


def _check_overlaps(batch: list[tuple[str, ParsedImport]]) -> None:
    """Two files of one batch must not both give a result for the same (benchmark, model, item).

    Per benchmark that two or more files of the batch write: one grid over the union of their models and items
    holds the index of the first file that observed each cell, and
    each file in turn is checked against it with array operations. The first conflict in (file, model, item)
    order is reported, naming the file that had the cell first. A benchmark written by one file cannot
    conflict and costs nothing (a 5,000 x 14,000 import used to spend 30 s and 3 GB on a per-cell dictionary)."""
    by_bench: dict[str, list[tuple[str, ParsedImport, np.ndarray]]] = {}
    for path, parsed in batch:
        grid = parsed.trials if parsed.trials is not None else parsed.correct
        if grid is None:
            continue
        by_bench.setdefault(parsed.benchmark, []).append((path, parsed, grid))
    for bench, files in by_bench.items():
        if len(files) < 2:
            continue
        model_ix: dict[str, int] = {}
        item_ix: dict[str, int] = {}
        rows_cols = []
        for _, parsed, _ in files:
            rows = np.array([model_ix.setdefault(n, len(model_ix)) for n in parsed.models["name"].astype(str)], int)
            cols = np.array([item_ix.setdefault(k, len(item_ix)) for k in parsed.items["key"].astype(str)], int)
            rows_cols.append((rows, cols))
        owner = np.full((len(model_ix), len(item_ix)), -1, dtype=np.int32)
        for f, ((path, parsed, grid), (rows, cols)) in enumerate(zip(files, rows_cols, strict=True)):
            observed = grid > 0 if parsed.trials is not None else grid >= 0
            sub = owner[np.ix_(rows, cols)]
            clash = observed & (sub >= 0) & (sub != f)
            if clash.any():
                m, j = (int(v) for v in np.argwhere(clash)[0])
                name, key = str(parsed.models["name"].iat[m]), str(parsed.items["key"].iat[j])
                raise ImportFormatError(
                    path, "", f"model {name!r} item {key!r} of benchmark {bench!r} is also in {files[sub[m, j]][0]}",
                    say("import the files into separate benchmarks (", Opt("benchmark"), "), or choose another ",
                        Opt("item_key")))
            new = observed & (sub < 0)
            if len(set(rows.tolist())) == len(rows) and len(set(cols.tolist())) == len(cols):
                owner[np.ix_(rows, cols)] = np.where(new, f, sub)
            else:  # a name repeated within one file: write only its new cells (a block write would undo some)
                r, c = np.nonzero(new)
                owner[rows[r], cols[c]] = f


def import_paths(db_path: str | Path, paths: list[str], fmt: str | None = None, *, replace: bool = False,
                 progress: Callable[[int, int, str], None] | None = None, **options) -> BatchSummary:
    """Parse every file of ``paths`` (see the module docstring), then write them all in one transaction."""
    from benchloupe.jobs import parse_file
    from benchloupe.store.db import connect
    from benchloupe.store.importers.readers import read_sha256
    from benchloupe.store.writer import write_imports

    fmt = None if fmt in (None, "auto") else fmt
    if options.get("benchmark") is not None:  # before any file is read: the one validator of names (issue 37 #11)
        from benchloupe import names
        from benchloupe.store.writer import MAX_BENCHMARK_CHARS

        options["benchmark"] = names.check(options["benchmark"], what="benchmark name", where=Alt("-b/--benchmark", "the benchmark name field"),
                                           max_chars=MAX_BENCHMARK_CHARS)
    files = expand_paths(paths, fmt)
    temp: list[Path] = []
    if STDIN in paths:
        temp.append(_stdin_file(fmt))
        files.append((temp[-1], True))
    try:
        if not files:
            raise ImportFormatError(", ".join(paths), "", "no importable files found",
                                    "name files, or a folder that holds the format's files")
        summary = BatchSummary()
        parsed_all: list[tuple[str, str, ParsedImport, str]] = []
        for n, (path, explicit) in enumerate(files, start=1):
            label = "<stdin>" if path in temp else str(path)
            if progress:
                progress(n, len(files), label)
            try:
                name, parsed = parse_file(path, fmt, **options)
            except ImportFormatError as exc:
                if explicit or fmt is not None:
                    if path in temp:
                        raise ImportFormatError("<stdin>", exc.where, exc.what, exc.fix) from None
                    raise
                summary.skipped.append(f"{label}: {exc.what}")
                continue
            if path in temp:
                parsed.source = parsed.source.replace(str(path), "<stdin>")
            parsed_all.append((label, name, parsed, read_sha256(path) or _sha256(path)))  # the bytes parsed, once
        if not parsed_all:
            raise ImportFormatError(", ".join(paths), "", f"none of {len(files)} files could be imported "
                                    f"({summary.skipped[0] if summary.skipped else ''})", "name the format explicitly")
        exists = Path(db_path).exists() and not replace  # a refused import must not create the database
        parsed_all = resolve_reruns(parsed_all, stored_runs(db_path, parsed_all) if exists else {})
        conn = connect(db_path)
        try:
            binomial = {p.benchmark for _, _, p, _ in parsed_all if p.trials is not None}
            for _, _, parsed, _ in parsed_all:
                if parsed.benchmark in binomial:
                    _as_binomial(parsed)
            _check_overlaps([(label, p) for label, _, p, _ in parsed_all])
            results = write_imports(conn, [(p, name, sha) for _, name, p, sha in parsed_all], replace=replace)
        finally:
            conn.close()
    finally:
        for t in temp:
            t.unlink(missing_ok=True)
    for (label, name, parsed, _), res in zip(parsed_all, results):
        summary.files.append({"path": label, **res.as_dict()})
        b = summary.benchmarks.setdefault(parsed.benchmark, {
            "files": 0, "formats": [], "items": set(), "items_new": 0, "models_new": 0, "static_cells": 0,
            "cells_changed": 0, "rewards": 0, "preferences": 0, "models": {}, "replaced": res.replaced})
        b["files"] += 1
        if name not in b["formats"]:
            b["formats"].append(name)
        b["items"].update(parsed.items["key"].astype(str))
        for k in ("items_new", "models_new", "static_cells", "cells_changed", "rewards", "preferences"):
            b[k] += getattr(res, k)
        for model, cells in _cells_per_model(parsed).items():
            b["models"][model] = b["models"].get(model, 0) + cells
    for b in summary.benchmarks.values():
        b["items"] = len(b["items"])
    return summary


def _cells_per_model(parsed: ParsedImport) -> dict[str, int]:
    names = parsed.models["name"].astype(str).tolist()
    if parsed.trials is not None:
        return {n: int((parsed.trials[m] > 0).sum()) for m, n in enumerate(names)}
    if parsed.correct is not None:
        return {n: int((parsed.correct[m] >= 0).sum()) for m, n in enumerate(names)}
    out: dict[str, int] = {}
    if parsed.rewards is not None:
        for n, c in parsed.rewards["model"].astype(str).value_counts().items():
            out[n] = out.get(n, 0) + int(c)
    if parsed.preferences is not None:
        for col in ("model_a", "model_b"):
            for n, c in parsed.preferences[col].astype(str).value_counts().items():
                out[n] = out.get(n, 0) + int(c)
    return out


def _n(n: int, word: str) -> str:
    return count(n, word)


def summary_lines(summary: BatchSummary, *, max_models: int | None = None) -> list[str]:
    """What an import did, in lines: per file when there was one, else per benchmark and per model (the CLI
    prints them; the workbench shows them in its notification, with at most *max_models* models a benchmark).
    Text from the files (names, paths, notes) is raw: each face makes it visible."""
    if len(summary.files) == 1 and not summary.skipped:
        s = summary.files[0]
        updated = f", {s['items_updated']} updated" if s["items_updated"] else ""
        lines = [f"imported {s['path']} into {s['benchmark']!r} ({s['format']}): {_n(s['items_new'], 'new item')}"
                 f"{updated}, {_n(s['models_new'], 'new model')}, {_n(s['static_cells'], 'static cell')} "
                 f"({s['cells_changed']} changed), {_n(s['rewards'], 'reward')}, {_n(s['preferences'], 'preference')}"
                 + (" [replaced]" if s["replaced"] else "")]
        return lines + [f"  note: {note}" for note in s["notes"]]
    lines = [f"imported {_n(len(summary.files), 'file')} in one transaction"
             + (f"; skipped {len(summary.skipped)} not recognised" if summary.skipped else "")]
    for name, b in summary.benchmarks.items():
        lines.append(f"{name} ({', '.join(b['formats'])}): {_n(b['files'], 'file')}, {_n(b['items'], 'item')} "
                     f"({b['items_new']} new), {_n(len(b['models']), 'model')} ({b['models_new']} new), "
                     f"{_n(b['static_cells'], 'static cell')} ({b['cells_changed']} changed), "
                     f"{_n(b['rewards'], 'reward')}, {_n(b['preferences'], 'preference')}"
                     + (" [replaced]" if b["replaced"] else ""))
        models = list(b["models"].items())
        shown = models if max_models is None else models[:max_models]
        lines += [f"  {model}: {cells}" for model, cells in shown]
        if len(shown) < len(models):
            lines.append(f"  ... and {_n(len(models) - len(shown), 'more model')}")
    for f in summary.files:
        lines += [f"note: {f['path']}: {note}" for note in f["notes"]]
    lines += [f"skipped {line}" for line in summary.skipped[:5]]
    if len(summary.skipped) > 5:
        lines.append(f"skipped {len(summary.skipped) - 5} more")
    return lines
