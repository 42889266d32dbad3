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
