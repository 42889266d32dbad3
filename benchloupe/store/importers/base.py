"""The normalised form every importer produces before anything touches the database.

An importer only *parses and validates*: it reads a file into a :class:`ParsedImport` or raises
:class:`ImportFormatError` with one line naming the file, the line/column and the fix. The store's
writer (``benchloupe.store.writer.write_import``) then applies a ParsedImport in one transaction, so a bad
file never changes the database.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from benchloupe.hints import say


class ImportFormatError(ValueError):
    """A file that cannot be imported. ``str(err)`` is one line: file, where, what, how to fix."""

    def __init__(self, path: str, where: str, what: str, fix: str):
        self.path, self.where, self.what, self.fix = str(path), where, what, fix
        loc = f"{self.path}:{where}" if where else self.path
        super().__init__(say(loc, ": ", what, "; ", fix))


def json_depth(text: str, start: int = 0, limit: int = 1 << 24) -> int:
    """How deeply arrays and objects nest in the JSON *text* from *start* (strings skipped), scanning at most
    *limit* characters: the number a too-deep file's message gives."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text[start:start + limit]:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def too_deep(path, where: str, text: str, start: int = 0) -> ImportFormatError:
    """The one line for JSON nested past what the parser follows (Python's recursion limit, about 1,000 levels:
    ``'[' * 100000`` was an internal RecursionError in every JSON format, issue 24)."""
    import sys

    depth = json_depth(text, start)
    return ImportFormatError(path, where, f"JSON nested {depth:,} levels deep (arrays or objects inside each other; "
                             f"at most about {sys.getrecursionlimit() - 100:,} can be read)",
                             "no results format nests that deep: re-export the file, or check that it is the file "
                             "you meant")


MAX_STORED_DEPTH = 64  # item and model metadata nest at most this deep (real harness documents: under 10)


def nesting_over(value, limit: int = MAX_STORED_DEPTH) -> int | None:
    """The depth of lists and dicts in *value* when it exceeds *limit* (walked without recursion, and no deeper
    than ``limit + 1``), else None."""
    stack = [(value, 1)]
    while stack:
        obj, depth = stack.pop()
        if depth > limit:
            return depth
        children = obj.values() if isinstance(obj, dict) else obj if isinstance(obj, list | tuple) else ()
        stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list | tuple))
    return None


def check_nesting(parsed: ParsedImport, path) -> None:
    """Metadata nested deeper than :data:`MAX_STORED_DEPTH` is refused at import: stored, it would be read back
    where the call stack is already deep (the workbench's screens) and fail there (issue 24, nesting depth)."""
    for frame, what, key in ((parsed.items, "item", "key"), (parsed.models, "model", "name")):
        if "metadata" not in frame.columns:
            continue
        for name, meta in zip(frame[key].tolist(), frame["metadata"].tolist()):
            if isinstance(meta, dict | list) and nesting_over(meta) is not None:
                raise ImportFormatError(path, f"{what} {str(name)[:60]!r}",
                                        f"its metadata nests more than {MAX_STORED_DEPTH} levels deep",
                                        "flatten the document (no harness nests that deep) or re-export the file")


def bad_json_value(path, where: str, exc: ValueError) -> ImportFormatError:
    """A JSON text the decoder refused for its content rather than its syntax: Python's limit of 4,300 digits on
    an integer (a 5,000-digit ``sample_index`` was Python's bare "Exceeds the limit" with no file, issue 24)."""
    if "digits" in str(exc):
        return ImportFormatError(path, where, "a number with more than 4,300 digits",
                                 "no result, score or index is that long: re-export the file")
    return ImportFormatError(path, where, f"not JSON ({str(exc).splitlines()[0][:120]})", "re-export the file")


def not_a_file(path) -> ImportFormatError:
    """The one line for a path that is not a regular file: missing, a folder, or what it is instead (``/dev/null``
    and a FIFO were "no such file", issue 24); nothing is read from a device or a pipe."""
    import os
    import stat

    try:
        mode = os.stat(path).st_mode
    except OSError:
        return ImportFormatError(path, "", "no such file", "check the path")
    for test, what in ((stat.S_ISDIR, "a folder, not a file"), (stat.S_ISCHR, "a character device, not a file"),
                       (stat.S_ISBLK, "a block device, not a file"), (stat.S_ISFIFO, "a named pipe (FIFO), not a file"),
                       (stat.S_ISSOCK, "a socket, not a file")):
        if test(mode):
            fix = "give the path of a file inside it" if test is stat.S_ISDIR else \
                "give a file's path (a pipe's data can come on standard input: `-`)"
            return ImportFormatError(path, "", what, fix)
    return ImportFormatError(path, "", "not a regular file", "give a file's path")


def json_kind(value) -> str:
    """What a parsed JSON value is, in JSON's words ("null", "an array", ...) for messages about a file."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (list, tuple)):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return "a " + type(value).__name__


@dataclass
class ParsedImport:
    """What one import adds to one benchmark.

    Attributes
    ----------
    benchmark : benchmark name (created if absent).
    kind : "static" (0/1 or successes/trials results), "arena" (rewards / preferences) or "mixed".
    items : DataFrame, one row per item, column ``key`` (str, unique) required; optional columns
        ``text``, ``answer``, ``group``, ``kind`` ("static"/"arena"), ``chance`` (float, MC guessing level),
        ``metadata`` (dict per row). Order = column order of the response matrix.
    models : DataFrame, one row per model, column ``name`` (str, unique) required; optional ``family``,
        ``owner``, ``aliases`` (list of str), ``metadata`` (dict). Order = row order of the matrix.
        Missing family/owner are inferred by the writer with the near-tie paper's rules.
    correct : int8 array (n_models x n_items), values 0/1, -1 = missing; or None.
    successes, trials : int32 arrays (n_models x n_items) for binomial results (trials 0 = missing); or None.
    rewards : DataFrame with columns ``model``, ``item`` (keys), ``reward`` (float), ``reward_model`` (str,
        "" when unnamed); or None.
    preferences : DataFrame with columns ``model_a``, ``model_b``, ``item``, ``prob_a`` (P(a beats b) in
        [0, 1]: winner a = 1, b = 0, tie = 0.5); or None.
    source : short description for provenance (format name and file path).
    """

    benchmark: str
    kind: str = "static"
    items: pd.DataFrame = field(default_factory=lambda: pd.DataFrame({"key": []}))
    models: pd.DataFrame = field(default_factory=lambda: pd.DataFrame({"name": []}))
    correct: np.ndarray | None = None
    successes: np.ndarray | None = None
    trials: np.ndarray | None = None
    rewards: pd.DataFrame | None = None
    preferences: pd.DataFrame | None = None
    source: str = ""
    item_metadata_only: bool = False
    notes: list[str] = field(default_factory=list)  # what the parser skipped or assumed, shown to the user
    # One run of a harness (lm-eval): tool, task, stamp, settings, reruns; the batch import resolves re-runs of one
    # (benchmark, model, task) with it (jobs.imports, issue 23). None for every other format.
    run: dict | None = None
    # The chosen option per cell (issue 33): int16 codes (models x items, -1 where unknown) into
    # ``option_labels[j]``, the labels seen for item j. The writer maps them onto the item's choices and scores
    # them with its answer (``correct`` is then computed there); None when the file holds no options.
    options: np.ndarray | None = None
    option_labels: list | None = None
    # False: ``correct`` stays as the file scored it and the options are only kept (an lm-eval log whose metric
    # is the harness's own score); True: the writer scores the options with each item's answer
    score_from_options: bool = True

    def counts(self) -> dict[str, int]:
        """Counts a test or the CLI can report: items, models, observed static cells, rewards, preferences."""
        observed = 0
        if self.correct is not None:
            observed = int((self.correct >= 0).sum())
        elif self.trials is not None:
            observed = int((self.trials > 0).sum())
        return {
            "items": len(self.items),
            "models": len(self.models),
            "static_cells": observed,
            "rewards": 0 if self.rewards is None else len(self.rewards),
            "preferences": 0 if self.preferences is None else len(self.preferences),
        }
