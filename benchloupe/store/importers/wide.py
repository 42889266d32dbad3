"""Wide 0/1 matrices (issue 2, importer 2) and the classic IRT data sets.

``parse_wide``: one row per model, one column per item, first column = model name, empty cell = missing.
It must be fast (a 5,000 x 14,000 matrix well under 40 s on 2 cores, see bench/bench_import.py). Three
paths: a complete matrix of single-digit cells (the usual export) is checked and converted with numpy
directly on the bytes; otherwise pandas' C tokenizer reads straight into float32 (empty -> NaN) followed by
a vectorised 0/1 check; only when that fails (a word, ``NaN``, ``NA``) is the file re-read as text to name
the exact bad cell. A literal ``NaN``/``NA`` is rejected rather than read as missing: missing is an empty
cell, unless the caller lists extra ``na_values``.

``parse_metabench``: metabench's ``<b>.responses.csv.gz`` is such a matrix keyed by Hugging Face model id;
``models_file`` (the leaderboard CSV, ``name``/``arch`` columns) adds each model's architecture to its
metadata, mapped to a family by the ``arch_to_family`` callable the caller passes (the CLI passes
``benchloupe.engine.families.family_from_architecture``: store code may not import engine, DESIGN.md).

``parse_classic_irt``: the mirt data sets. ``*_patterns.csv`` (response pattern + frequency column) are
expanded to one respondent per count (``LSAT7/person_0001`` ...), ``*_expanded.csv`` have no name column
(respondents numbered likewise), ``SAT12_scored.csv`` names them in its ``person`` column. Respondents are
people of their data set, so their names carry it (issue 32: SAT12 after LSAT7 must not reuse LSAT7's people).
"""

from __future__ import annotations

import collections
import io
from pathlib import Path

import numpy as np
import pandas as pd

from benchloupe.hints import Opt, say

from .base import ImportFormatError, ParsedImport
from .long import default_benchmark
from .readers import (
    Table,
    as_bool,
    csv_header,
    duplicate_rows,
    int_column,
    load_bytes,
    models_frame,
    parser_error,
    read_table,
)

ALLOWED = {"0", "1", "0.0", "1.0"}
MAX_RESPONDENTS = 1_000_000  # a classic pattern table expands to one model per respondent


def parse_wide(
    path: str | Path,
    *,
    benchmark: str | None = None,
    model_col: str | None = None,
    na_values: tuple[str, ...] | list[str] = ("",),
    models_file: str | Path | None = None,
    arch_to_family=None,
    no_model_col: bool = False,
    options: bool = False,
    **_: object,
) -> ParsedImport:
    """Parse a models x items 0/1 CSV. ``model_col`` defaults to the first column; with
    ``no_model_col`` every column is an item and rows are named ``<data set>/person_0001`` .... With
    ``options`` the cells are chosen option labels (issue 33), scored later by the writer."""
    path = str(path)
    if isinstance(na_values, str):
        na_values = ["", *na_values.split(",")]
    data = load_bytes(path)
    header = csv_header(path, data)
    if as_bool(no_model_col):
        model_col = None
    else:
        model_col = model_col or header[0]
        if model_col not in header:
            raise ImportFormatError(
                path,
                "line 1",
                f"no model column '{model_col}'",
                say("name it with ", Opt("model_col"), " (default: the first column)"),
            )
    item_cols = [c for c in header if c != model_col]
    if not item_cols:
        raise ImportFormatError(
            path, "line 1", "no item columns", "one column per item after the model column"
        )
    if "" in item_cols:
        j = header.index("")
        raise ImportFormatError(path, f"line 1, column {j + 1}", "blank item name", "name every item column")
    if as_bool(options):
        return _parse_options(path, data, header, model_col, item_cols, na_values, benchmark, models_file,
                              arch_to_family)
    dense = _dense_binary(data, len(header)) if model_col == header[0] else None
    if dense is not None:
        names, correct = dense
        table = Table(path, pd.DataFrame({model_col: names}), "csv", data=data)
        return ParsedImport(
            benchmark=benchmark or default_benchmark(path),
            kind="static",
            items=pd.DataFrame({"key": item_cols}),
            models=models_frame(_model_names(table, model_col), models_file, arch_to_family=arch_to_family),
            correct=correct,
            source=f"wide:{path}",
        )
    dtype: collections.defaultdict = collections.defaultdict(lambda: np.float32)
    if model_col is not None:
        dtype[model_col] = str
    try:
        frame = pd.read_csv(
            io.BytesIO(data),
            header=0,
            names=header,
            dtype=dtype,
            engine="c",
            na_values=list(na_values),
            keep_default_na=False,
            low_memory=False,
        )
    except (pd.errors.ParserError, ValueError, TypeError) as exc:
        if isinstance(exc, pd.errors.ParserError) and "tokenizing" in str(exc):
            raise parser_error(path, exc) from None
        raise _bad_cell(path, data, header, model_col, na_values) from None
    if frame.empty:
        raise ImportFormatError(path, "line 2", "header but no data rows", "export the model rows too")
    values = frame[item_cols].to_numpy(dtype=np.float32)
    missing = np.isnan(values)
    bad = ~(missing | (values == 0) | (values == 1))
    if bad.any():
        r, c = (int(x) for x in np.argwhere(bad)[0])
        table = Table(path, frame, "csv", data=data)
        raise table.error(
            r,
            item_cols[c],
            f"non-binary value {values[r, c]:g} for item '{item_cols[c]}'",
            "use 0 or 1, and leave the cell empty for a missing result",
        )
    correct = np.where(missing, -1, values).astype(np.int8)
    if model_col is None:
        width = max(4, len(str(len(frame))))
        names = [f"{data_set(path)}/person_{i + 1:0{width}d}" for i in range(len(frame))]
    else:
        names = _model_names(Table(path, frame, "csv", data=data), model_col)
    return ParsedImport(
        benchmark=benchmark or default_benchmark(path),
        kind="static",
        items=pd.DataFrame({"key": item_cols}),
        models=models_frame(names, models_file, arch_to_family=arch_to_family),
        correct=correct,
        source=f"wide:{path}",
    )


def _parse_options(path, data, header, model_col, item_cols, na_values, benchmark, models_file, arch_to_family):
    """``--options``: each cell is the label of the option the model chose (``1``..``5``, ``A``..``D``); empty or
    a ``na_values`` code is unknown. Codes per item index the labels seen in that column, sorted. A column of
    only 0/1 beside columns of other labels is refused: that is a scored file mixed with an options file."""
    dtype = {c: str for c in header}
    try:
        frame = pd.read_csv(io.BytesIO(data), header=0, names=header, dtype=dtype, engine="c",
                            na_values={c: list(na_values) for c in item_cols}, keep_default_na=False,
                            low_memory=False)  # missing codes in item columns only: model 8 stays model 8
    except (pd.errors.ParserError, ValueError) as exc:
        raise parser_error(path, exc) from None
    if frame.empty:
        raise ImportFormatError(path, "line 2", "header but no data rows", "export the model rows too")
    codes = np.full((len(frame), len(item_cols)), -1, np.int16)
    labels = []
    binary_col = other_col = None
    for j, col in enumerate(item_cols):
        cells = frame[col].fillna("").astype(str).str.strip().to_numpy(object)
        known = cells != ""
        seen = sorted(set(cells[known].tolist()))
        if len(seen) > 127:
            raise ImportFormatError(path, f"column '{col}'", f"{len(seen)} different option labels",
                                    "an item has at most 127 options; is this a free-text column?")
        index = {label: k for k, label in enumerate(seen)}
        codes[known, j] = [index[x] for x in cells[known].tolist()]
        labels.append(seen)
        if seen and set(seen) <= {"0", "1"} and "0" in seen:
            binary_col = binary_col or col
        elif seen:
            other_col = other_col or col
    if binary_col is not None and other_col is not None:
        raise ImportFormatError(path, f"column '{binary_col}'", f"only 0/1 cells, while column '{other_col}' holds "
                                "option labels", say("an options file holds the chosen option in every column: "
                                "import scored 0/1 results without ", Opt("options"), ", in a file of their own"))
    if model_col is None:
        width = max(4, len(str(len(frame))))
        names = [f"{data_set(path)}/person_{i + 1:0{width}d}" for i in range(len(frame))]
    else:
        names = _model_names(Table(path, frame, "csv", data=data), model_col)
    return ParsedImport(benchmark=benchmark or default_benchmark(path), kind="static",
                        items=pd.DataFrame({"key": item_cols}),
                        models=models_frame(names, models_file, arch_to_family=arch_to_family),
                        correct=np.full(codes.shape, -1, np.int8), options=codes, option_labels=labels,
                        source=f"wide:{path}")


_DENSE_CHUNK_ROWS = 256  # rows checked and converted at a time (their cells are ~2 x items bytes each)


def _dense_binary(data: bytes, n_fields: int) -> tuple[list[str], np.ndarray] | None:
    """Fast path for the common export: every row is ``name,d,d,...,d`` with single-digit 0/1 cells.

    The rows are read straight out of the file's bytes ``_DENSE_CHUNK_ROWS`` at a time: each chunk's cells are
    checked with numpy (commas where they belong, digits 0/1 elsewhere) and written into the int8 matrix, so
    beside the file's bytes only the matrix and one chunk exist (issue 26: the whole-file split and join held
    four copies of a 140 MB file).  Anything else (empty cells, "1.0", quoted names, ragged rows, blank lines)
    returns None and the general pandas path, with its exact error messages, takes over.
    """
    n_items = n_fields - 1
    width = 2 * n_items - 1
    start = data.find(b"\n") + 1
    if b"\r" in data:  # CRLF rows: normalised once (a copy), then read the same way
        data = data[:start] + data[start:].replace(b"\r\n", b"\n")
    end_all = len(data)
    if end_all > start and data[end_all - 1:end_all] == b"\n":
        end_all -= 1  # the final line break ends the last row; an empty line anywhere else is not a row
    if end_all <= start or n_items < 1 or start == 0:
        return None
    n_rows = data.count(b"\n", start, end_all) + 1
    buf = np.frombuffer(data, dtype=np.uint8)
    out = np.empty((n_rows, n_items), dtype=np.int8)
    grid = np.empty((min(_DENSE_CHUNK_ROWS, n_rows), width), dtype=np.uint8)
    names: list[str] = []
    pos, row, k = start, 0, 0
    while row < n_rows:
        stop = data.find(b"\n", pos, end_all)
        stop = end_all if stop < 0 else stop
        cut = data.find(b",", pos, stop)
        if cut < 0 or stop - cut - 1 != width or data[pos:pos + 1] == b'"':
            return None
        names.append(data[pos:cut].decode("utf-8"))
        grid[k] = buf[cut + 1:stop]
        row, k, pos = row + 1, k + 1, stop + 1
        if k == len(grid) or row == n_rows:
            block = grid[:k]
            if n_items > 1 and not (block[:, 1::2] == ord(",")).all():
                return None
            digits = block[:, 0::2] - ord("0")
            if not (digits <= 1).all():
                return None
            out[row - k:row] = digits
            k = 0
    return names, out


def _model_names(table: Table, model_col: str) -> list[str]:
    names = [str(v).strip() for v in table.frame[model_col].fillna("").tolist()]
    for i, name in enumerate(names):
        if not name:
            raise table.error(i, model_col, "blank model name", "name every row's model")
    dup = duplicate_rows(names)
    if dup:
        raise table.error(
            dup[1],
            model_col,
            f"duplicate model row '{names[dup[1]]}' (first at line {table.line_of(dup[0])})",
            "keep one row per model (or merge the rows)",
        )
    return names


def _binary_matrix(table: Table, item_cols: list[str]) -> np.ndarray:
    """0/1 int8 matrix from text cells (small tables only; the wide fast path does not come here)."""
    cells = table.frame[item_cols].apply(lambda s: s.str.strip())
    ok = cells.isin(ALLOWED).to_numpy()
    if not ok.all():
        r, c = (int(x) for x in np.argwhere(~ok)[0])
        raise table.error(
            r,
            item_cols[c],
            f"non-binary value {cells.iat[r, c]!r} for item '{item_cols[c]}'",
            "only 0/1 items can be imported; score polytomous items first",
        )
    return cells.to_numpy().astype(float).astype(np.int8)


def _bad_cell(
    path: str, data: bytes, header: list[str], model_col: str | None, na_values
) -> ImportFormatError:
    """Slow path after the fast parse failed: re-read as text and name the first bad cell."""
    table = read_table(path, fmt="csv")
    ok = ALLOWED | set(na_values)
    for col in header:
        if col == model_col:
            continue
        cells = table.frame[col].str.strip()
        blank = np.flatnonzero(((cells == "") & (table.frame[col] != "")).to_numpy())
        if blank.size:
            return table.error(int(blank[0]), col, "a cell holding only spaces or tabs",
                               "leave a missing result's cell empty (no spaces)")
        bad = np.flatnonzero(~cells.isin(ok).to_numpy())
        if bad.size:
            r = int(bad[0])
            v = table.frame[col].iloc[r]
            what = (
                f"'{v}' is not a result (missing cells must be empty)"
                if v.strip().lower() in {"nan", "na", "null", "none", "n/a"}
                else f"non-binary value {v!r} for item '{col}'"
            )
            return table.error(r, col, what, "use 0 or 1, and leave the cell empty for a missing result")
    return ImportFormatError(path, "", "could not read the matrix", "check that every cell is 0, 1 or empty")


def parse_metabench(
    path: str | Path,
    *,
    benchmark: str | None = None,
    models_file: str | Path | None = None,
    arch_to_family=None,
    **options: object,
) -> ParsedImport:
    """metabench ``<b>.responses.csv.gz`` (wide, model id first); benchmark defaults to ``metabench-<b>``."""
    name = Path(path).name.split("-")[0].split(".")[0]
    parsed = parse_wide(
        path,
        benchmark=benchmark or f"metabench-{name}",
        models_file=models_file,
        arch_to_family=arch_to_family,
        **options,
    )
    parsed.source = f"metabench:{path}"
    return parsed


COUNT_NAMES = ("freq", "Freq", "count", "n")


def data_set(path: str | Path) -> str:
    """The data set a file of unnamed respondents belongs to: its name without the extension and mirt's
    ``_patterns``/``_expanded``/``_scored`` suffixes (``SAT12_scored.csv`` -> ``SAT12``).

    Respondents of classic sets are people of that set, not models shared across benchmarks (issue 32):
    ``person_0001`` of LSAT7 is not ``person_0001`` of SAT12, so their names carry the set,
    ``SAT12/person_0001``. Named models (LLMs) keep their own names and stay shared across benchmarks.
    """
    name = default_benchmark(path)
    for suffix in ("_patterns", "_expanded", "_scored"):
        name = name.removesuffix(suffix)
    return name or "respondents"


def parse_classic_irt(
    path: str | Path, *, benchmark: str | None = None, freq_col: str | None = None, **options: object
) -> ParsedImport:
    """mirt's classic sets: pattern tables (expanded by frequency), expanded matrices, SAT12_scored.

    ``freq_col`` may list several count columns separated by commas (ASVAB's per-group counts); the
    respondents are then named ``<column>_0001`` ... and carry ``{"group": <column>}`` in metadata.
    """
    path = str(path)
    header = csv_header(path, load_bytes(path))
    counts = [c.strip() for c in freq_col.split(",")] if freq_col else [c for c in header if c in COUNT_NAMES]
    dset = data_set(path)
    bench = benchmark or dset
    if not counts:
        if header[0].lower() in {"person", "id", "respondent"}:
            parsed = parse_wide(path, benchmark=bench, **options)
            parsed.models["name"] = [
                f"{dset}/person_{int(n):04d}" if n.isdigit() else f"{dset}/person_{n}" for n in parsed.models["name"]
            ]
        else:
            parsed = parse_wide(path, benchmark=bench, no_model_col=True, **options)
        parsed.source = f"classic_irt:{path}"
        return parsed
    table = read_table(path, fmt="csv")
    for c in counts:
        table.require(c, Opt("freq_col"))
    item_cols = [c for c in header if c not in counts]
    pattern = _binary_matrix(table, item_cols)
    rows, names, groups = [], [], []
    total = 0
    for c in counts:
        n = int_column(table, c)
        over = np.flatnonzero(total + np.cumsum(n) > MAX_RESPONDENTS)
        if over.size:
            raise table.error(int(over[0]), c, f"the pattern frequencies add up to more than {MAX_RESPONDENTS:,} "
                              "respondents (each becomes a model row)", "check the frequency column")
        total += int(n.sum())
        idx = np.repeat(np.arange(len(n)), n)
        rows.append(pattern[idx])
        prefix = "person" if len(counts) == 1 else c
        width = max(4, len(str(len(idx))))
        names += [f"{dset}/{prefix}_{k + 1:0{width}d}" for k in range(len(idx))]
        groups += [c] * len(idx)
    if not names:
        raise ImportFormatError(path, "", "all pattern frequencies are zero", "check the frequency column")
    models = models_frame(names)
    if len(counts) > 1:
        models["metadata"] = [{"group": g} for g in groups]
    return ParsedImport(
        benchmark=bench,
        kind="static",
        items=pd.DataFrame({"key": item_cols}),
        models=models,
        correct=np.vstack(rows),
        source=f"classic_irt:{path}",
    )
