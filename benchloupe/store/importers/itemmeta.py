"""Item metadata files (issue 2, importer 3): one row per item with ``key`` and optional ``text``,
``answer``, ``group``, ``kind`` (static/arena) and ``chance`` (the multiple-choice guessing level, a
probability in [0, 1); e.g. 0.25 for four options). CSV or JSONL, gzip accepted.

The result has ``item_metadata_only=True``: the writer updates or adds these items of the benchmark and
touches no results. Column names are options, so published files import as they are (ChemBench
``questions.csv.gz``: key/input/target/topic_dir; metabench ``<b>.items.csv.gz``: item/prompt; AlpacaEval
``instructions.csv.gz``: instruction_id/instruction/dataset). Every other column is kept per item in
``metadata`` (e.g. metabench's published mirt estimates, ChemBench's keywords and difficulty).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from benchloupe.hints import Opt

from .base import ParsedImport
from .long import default_benchmark
from .readers import duplicate_rows, float_column, key_column, read_table, text_column

KINDS = {"static", "arena"}


def parse_item_metadata(
    path: str | Path,
    *,
    benchmark: str | None = None,
    key_col: str = "key",
    text_col: str = "text",
    answer_col: str = "answer",
    group_col: str = "group",
    kind_col: str = "kind",
    chance_col: str = "chance",
    keep_other_columns: bool = True,
    fmt: str | None = None,
    **_: object,
) -> ParsedImport:
    """Parse an item metadata file; a repeated key, a bad kind or a chance outside [0, 1) is an error."""
    table = read_table(path, fmt=fmt)
    table.require(key_col, Opt("key_col"))
    keys = key_column(table, key_col)
    dup = duplicate_rows(keys)
    if dup:
        raise table.error(
            dup[1],
            key_col,
            f"duplicate item key '{keys[dup[1]]}' (first at line {table.line_of(dup[0])})",
            "keep one row per item",
        )
    items = pd.DataFrame({"key": keys})
    used = {key_col}
    for name, col in (("text", text_col), ("answer", answer_col), ("group", group_col)):
        if table.optional(col):
            items[name] = text_column(table, col)
            used.add(col)
    if table.optional(kind_col):
        kinds = text_column(table, kind_col)
        for i, k in enumerate(kinds):
            if k is not None and k.strip().lower() not in KINDS:
                raise table.error(i, kind_col, f"unknown item kind {k!r}", "use 'static' or 'arena'")
        items["kind"] = [None if k is None else k.strip().lower() for k in kinds]
        used.add(kind_col)
    if table.optional(chance_col):
        chance = float_column(table, chance_col, allow_missing=True)
        bad = np.flatnonzero(~np.isnan(chance) & ((chance < 0) | (chance >= 1)))
        if bad.size:
            raise table.error(
                int(bad[0]),
                chance_col,
                f"chance level {chance[bad[0]]:g} outside [0, 1)",
                "give the guessing probability, e.g. 0.25 for four options",
            )
        items["chance"] = chance
        used.add(chance_col)
    extra = [c for c in table.columns if c not in used] if keep_other_columns else []
    if extra:
        items["metadata"] = table.frame[extra].to_dict("records")
    return ParsedImport(
        benchmark=benchmark or default_benchmark(path),
        kind="static",
        items=items,
        source=f"item_metadata:{path}",
        item_metadata_only=True,
    )
