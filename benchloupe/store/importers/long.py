"""Long-table static results (issue 2, importer 1): one row per (model, item) with 0/1 ``correct`` or
binomial ``successes``/``trials``, plus optional item ``text``/``answer``/``group`` and model
``family``/``owner`` columns. CSV or JSONL, gzip accepted.

Every column name is an option, so a file imports as it is: ChemBench's ``responses_long.csv.gz`` is
``model_col="respondent", item_col="question_name", correct_col="all_correct"``. A repeated (model, item)
pair is an error (the file is ambiguous; the DualEval format's "last wins" rule is kept in dualeval.py only,
where the reference defines it). Models and items keep their first-seen order.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from benchloupe.hints import Opt, say

from .base import ImportFormatError, ParsedImport
from .readers import (
    Table,
    binary_column,
    int_column,
    key_column,
    models_frame,
    read_table,
    text_column,
)


def default_benchmark(path: str | Path) -> str:
    """Benchmark name from a file name: ``responses_long.csv.gz`` -> ``responses_long``."""
    name = Path(path).name
    for ext in (".gz", ".csv", ".jsonl", ".ndjson", ".json", ".tsv", ".npz", ".eval"):
        if name.lower().endswith(ext):
            name = name[: -len(ext)]
    return name


def cell_codes(
    table: Table, model_keys: list[str], item_keys: list[str], model_col: str, item_col: str
) -> tuple[np.ndarray, np.ndarray, pd.Index, pd.Index]:
    """Factorise model and item keys (first-seen order); a repeated (model, item) pair is an error."""
    m_codes, m_uniques = pd.factorize(pd.Series(model_keys, dtype=object), sort=False)
    i_codes, i_uniques = pd.factorize(pd.Series(item_keys, dtype=object), sort=False)
    flat = m_codes.astype(np.int64) * len(i_uniques) + i_codes
    dup = pd.Series(flat).duplicated(keep="first").to_numpy()
    if dup.any():
        j = int(np.flatnonzero(dup)[0])
        first = int(np.flatnonzero(flat == flat[j])[0])
        raise table.error(
            j,
            item_col,
            f"duplicate result for model '{model_keys[j]}' and item "
            f"'{item_keys[j]}' (first at line {table.line_of(first)})",
            "keep one row per (model, item), or aggregate repeats into successes/trials",
        )
    return m_codes, i_codes, m_uniques, i_uniques


def first_per_item(codes: np.ndarray, n: int, values: list | None) -> list | None:
    """First non-blank value per item code, for optional per-item text/answer/group columns."""
    if values is None:
        return None
    out: list = [None] * n
    for c, v in zip(codes.tolist(), values, strict=True):
        if out[c] is None and v is not None and v != "":
            out[c] = v
    return out


def parse_long(
    path: str | Path,
    *,
    benchmark: str | None = None,
    model_col: str = "model",
    item_col: str = "item",
    correct_col: str = "correct",
    successes_col: str = "successes",
    trials_col: str = "trials",
    text_col: str = "text",
    answer_col: str = "answer",
    group_col: str = "group",
    family_col: str = "family",
    owner_col: str = "owner",
    exclude_models: str | None = None,
    models_file: str | Path | None = None,
    arch_to_family=None,
    fmt: str | None = None,
    option_col: str | None = None,
    **_: object,
) -> ParsedImport:
    """Parse a long results table into a models x items matrix.

    With ``option_col`` each row gives the chosen option's label instead of a 0/1 (issue 33): the writer scores
    it with the item's answer (this file's answer column, else the one from ``import items``) and keeps it.

    ``correct_col`` is used when present, else ``successes_col`` + ``trials_col``. ``exclude_models`` is a
    regular expression; matching models are left out (e.g. ``^human_`` for ChemBench's human experts).
    ``models_file`` adds family/owner/arch/metadata per model (see readers.read_models_file).
    """
    table = read_table(path, fmt=fmt)
    table.require(model_col, Opt("model_col"))
    table.require(item_col, Opt("item_col"))
    if exclude_models:
        try:
            pattern = re.compile(exclude_models)
        except re.error as exc:
            raise ImportFormatError(
                path, "", say("bad ", Opt("exclude_models"), f" pattern ({exc})"), "give a Python regular expression"
            ) from None
        names = table.frame[model_col].astype(str).tolist()
        keep = ~np.array([pattern.search(n) is not None for n in names], dtype=bool)
        if not keep.any():  # an import that keeps no model would create an empty benchmark (issue 24)
            raise ImportFormatError(path, "", say(Opt("exclude_models"), f" {exclude_models[:60]!r} leaves out every "
                                                  f"model ({len(set(names)):,} of {len(set(names)):,})"),
                                    "give a pattern that matches only the models to leave out")
        table.keep_rows(keep)
    if option_col:
        table.require(option_col, Opt("option_col"))
    binomial = not option_col and correct_col not in table.frame.columns and successes_col in table.frame.columns
    if not binomial and not option_col:
        table.require(correct_col, say(Opt("correct_col"), " (or give successes and trials columns)"))
    models = key_column(table, model_col)
    items = key_column(table, item_col)
    m_codes, i_codes, m_names, i_keys = cell_codes(table, models, items, model_col, item_col)
    shape = (len(m_names), len(i_keys))
    parsed = ParsedImport(
        benchmark=benchmark or default_benchmark(path), kind="static", source=f"long:{path}"
    )
    if binomial:
        table.require(trials_col, Opt("trials_col"))
        succ = int_column(table, successes_col)
        trials = int_column(table, trials_col, minimum=1)
        over = np.flatnonzero(succ > trials)
        if over.size:
            raise table.error(
                int(over[0]),
                successes_col,
                "successes exceed trials",
                "check the successes and trials columns",
            )
        parsed.successes = np.zeros(shape, dtype=np.int32)
        parsed.trials = np.zeros(shape, dtype=np.int32)
        parsed.successes[m_codes, i_codes] = succ
        parsed.trials[m_codes, i_codes] = trials
    elif option_col:
        chosen = np.array([str(v).strip() if v is not None and v == v else "" for v in
                           table.frame[option_col].tolist()], dtype=object)
        parsed.options = np.full(shape, -1, dtype=np.int16)
        parsed.option_labels = []
        for j in range(len(i_keys)):
            rows = np.flatnonzero((i_codes == j) & (chosen != ""))
            labels = sorted(set(chosen[rows].tolist()))
            if len(labels) > 127:
                raise ImportFormatError(path, f"item {i_keys[j]!r}", f"{len(labels)} different option labels",
                                        "an item has at most 127 options; is this the chosen option's column?")
            index = {x: k for k, x in enumerate(labels)}
            parsed.options[m_codes[rows], j] = [index[x] for x in chosen[rows].tolist()]
            parsed.option_labels.append(labels)
        parsed.correct = np.full(shape, -1, dtype=np.int8)
    else:
        parsed.correct = np.full(shape, -1, dtype=np.int8)
        parsed.correct[m_codes, i_codes] = binary_column(table, correct_col)
    items_frame = pd.DataFrame({"key": list(i_keys)})
    for name, col in (("text", text_col), ("answer", answer_col), ("group", group_col)):
        values = first_per_item(i_codes, len(i_keys), text_column(table, table.optional(col)))
        if values is not None:
            items_frame[name] = values
    parsed.items = items_frame
    family = first_per_item(m_codes, len(m_names), text_column(table, table.optional(family_col)))
    owner = first_per_item(m_codes, len(m_names), text_column(table, table.optional(owner_col)))
    parsed.models = models_frame(list(m_names), models_file, family, owner, arch_to_family=arch_to_family)
    return parsed
