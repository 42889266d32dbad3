"""Shared file readers for the importers: bytes -> validated text -> a table with line numbers.

Every failure becomes an :class:`ImportFormatError` whose one-line message names the file, the line/column
and the fix: missing or empty file, truncated or corrupt gzip (detected by its magic bytes, whatever the
extension), text that is not UTF-8, a CSV row with the wrong number of fields, a bad or duplicated header,
JSONL lines that are not JSON objects, a value that is not 0/1 or not a number. Parsers build on
:class:`Table`, which keeps every cell as read (strings for CSV, JSON values for JSONL) and maps a data row
back to its physical line, so that an error points at the line a curator opens in an editor.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from benchloupe.hints import Opt, say

from . import limits
from .base import ImportFormatError, bad_json_value, not_a_file, too_deep

GZIP_MAGIC = b"\x1f\x8b"
TRUE_WORDS = {"1", "1.0", "true", "yes"}
# Words some tools write for "no value". The one rule (issue 24): a missing value is an empty cell (JSON: null or
# an absent field); these words are refused in every column (wide takes them as missing only when --na-values
# names them), so that `chance=NaN` and `correct=NaN` get the same answer.
NAN_WORDS = {"nan", "na", "n/a", "null", "none"}
FALSE_WORDS = {"0", "0.0", "false", "no"}


def base_suffix(path: str | Path) -> str:
    """The extension that names the format, ignoring a trailing ``.gz`` (``a.csv.gz`` -> ``.csv``)."""
    name = Path(path).name.lower()
    if name.endswith(".gz"):
        name = name[:-3]
    return Path(name).suffix


def load_bytes(path: str | Path) -> bytes:
    """The file's bytes, gunzipped when they start with the gzip magic; checked to be non-empty UTF-8.

    A UTF-8 byte-order mark is removed. Raises ImportFormatError for a missing, empty, truncated or
    corrupt file, one that is not UTF-8 (with the line and column of the first bad byte), or one larger, or
    expanding to more, than the import limit (:mod:`.limits`).
    """
    p = Path(path)
    if not p.is_file():
        raise not_a_file(p)
    limits.check_file_size(p, limits.stat_size(p))
    raw = read_file_bytes(p)
    if raw[:2] == GZIP_MAGIC:  # streamed and bounded: a bomb is refused at the import limit (issue 37)
        raw = limits.gunzip(p, raw)
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    if not raw.strip():
        raise ImportFormatError(p, "line 1", "the file is empty", "export the data again with a header row")
    if b"\r" in raw and b"\n" not in raw:  # classic Mac line endings: one CR per line
        raw = raw.replace(b"\r", b"\n")
    try:
        if not raw.isascii():  # ASCII is UTF-8: no decoded copy of a 140 MB file just to check it
            raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        col = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise ImportFormatError(
            p,
            f"line {line}, column {col}",
            f"byte 0x{raw[exc.start]:02x} is not UTF-8",
            "re-save the file as UTF-8 (e.g. iconv -f latin1 -t utf-8)",
        ) from None
    return raw


_READ_SHA256: dict[str, str] = {}


def read_sha256(path: str | Path) -> str | None:
    """sha256 of the bytes the last :func:`read_file_bytes` of *path* returned (what an import parsed, even when
    the file has grown since); None when it was not read through here."""
    return _READ_SHA256.get(str(Path(path).resolve()))


def read_file_bytes(path: str | Path) -> bytes:
    """The raw bytes of *path*; an unreadable file (permissions, I/O error) is one ImportFormatError."""
    try:
        raw = Path(path).read_bytes()
        _READ_SHA256[str(Path(path).resolve())] = hashlib.sha256(raw).hexdigest()
        return raw
    except IsADirectoryError:
        raise ImportFormatError(path, "", "is a directory, not a file", "give the path of a file inside it") from None
    except OSError as exc:
        raise ImportFormatError(path, "", f"cannot read the file ({exc.strerror or exc})",
                                "check the file's permissions") from None


def load_text(path: str | Path) -> str:
    """The file as validated UTF-8 text (see :func:`load_bytes`)."""
    return load_bytes(path).decode("utf-8")


def load_json(path: Path, fix: str):
    """The file as one JSON document; what it cannot be read as is one :class:`ImportFormatError` (*fix*: what to
    pass instead): a syntax error with its line and column, nesting too deep to follow, a value the decoder refuses
    (a 5,000-digit integer)."""
    text = load_text(path)
    try:
        return json.loads(text)
    except RecursionError:
        raise too_deep(path, "line 1", text) from None
    except json.JSONDecodeError as exc:
        raise ImportFormatError(path, f"line {exc.lineno}, column {exc.colno}", f"not JSON ({exc.msg})", fix) from None
    except ValueError as exc:
        raise bad_json_value(path, "", exc) from None


def csv_header(path: str | Path, data: bytes) -> list[str]:
    """The first CSV record, checked: no blank and no duplicated column names, at most limits.MAX_COLUMNS."""
    line = data[: data.find(b"\n") + 1 if b"\n" in data else len(data)]
    limits.check_columns(path, line.count(b",") + 1)  # before splitting it (10 million names took > 4 GB)
    first = io.StringIO(line.decode("utf-8"))
    try:
        header = next(csv.reader(first), [])
    except csv.Error as exc:
        raise csv_error(path, exc, 1) from None
    header = [h.strip() for h in header]
    if not header or all(not h for h in header):
        raise ImportFormatError(path, "line 1", "no header row", "put the column names on the first line")
    for j, name in enumerate(header):
        if not name and j > 0:
            raise ImportFormatError(
                path, f"line 1, column {j + 1}", "blank column name", "give every column a name"
            )
    seen: dict[str, int] = {}
    for j, name in enumerate(header):
        if name in seen:
            raise ImportFormatError(
                path,
                f"line 1, column {j + 1}",
                f"duplicate column '{name}' (also column {seen[name] + 1})",
                "make column names unique",
            )
        seen[name] = j
    return header


def csv_row_lines(data: bytes, path: str | Path = "") -> np.ndarray:
    """Physical start line (1-based) of every CSV data row (blank lines skipped, as pandas does)."""
    csv.field_size_limit(2**31 - 1)  # few-shot prompts exceed the default 128 KiB field limit
    reader = csv.reader(io.StringIO(data.decode("utf-8")))
    starts, start, header_seen = [], 1, False
    try:
        for record in reader:
            if record:
                if header_seen:
                    starts.append(start)
                header_seen = True
            start = reader.line_num + 1
    except csv.Error as exc:
        raise csv_error(path or "the file", exc, reader.line_num) from None
    return np.asarray(starts, dtype=np.int64)


def csv_error(path: str | Path, exc: csv.Error, line: int) -> ImportFormatError:
    """The csv module's complaint (a stray carriage return or NUL in an unquoted field) as one line."""
    what = str(exc).split(" - ")[0]
    return ImportFormatError(path, f"line {line}", f"malformed CSV: {what}",
                             "quote fields holding line breaks; save with one kind of line ending (LF or CRLF)")


def csv_line_of_row(data: bytes, row: int) -> int:
    """Physical line (1-based) where data row ``row`` (0-based, after the header) starts."""
    lines = csv_row_lines(data)
    return int(lines[row]) if row < len(lines) else int(lines[-1]) + 1 if len(lines) else 2


def parser_error(path: str | Path, exc: Exception) -> ImportFormatError:
    """Turn a pandas/csv tokenizer error ("Expected 3 fields in line 5, saw 4") into one clear line."""
    msg = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
    msg = msg.replace("Error tokenizing data. C error: ", "")
    found = re.search(r"line (\d+)", msg)
    where = f"line {found.group(1)}" if found else ""
    return ImportFormatError(
        path,
        where,
        f"malformed CSV: {msg}",
        "every row needs as many fields as the header; quote fields containing commas",
    )


@dataclass
class Table:
    """Cells of a CSV or JSONL file as read, with a way back from a data row to its file line."""

    path: str
    frame: pd.DataFrame
    kind: str  # "csv" or "jsonl"
    data: bytes = b""
    row_lines: np.ndarray | None = None  # physical line of each data row, when known

    @property
    def columns(self) -> list[str]:
        return [str(c) for c in self.frame.columns]

    def line_of(self, row: int) -> int:
        if self.row_lines is not None:
            return int(self.row_lines[row])
        return csv_line_of_row(self.data, row)

    def keep_rows(self, keep: np.ndarray) -> None:
        """Drop the rows where ``keep`` is False, keeping line numbers right for later errors."""
        if self.row_lines is None:
            self.row_lines = csv_row_lines(self.data, self.path)
        self.row_lines = self.row_lines[keep]
        self.frame = self.frame[keep].reset_index(drop=True)

    def where(self, row: int, column: str | None = None) -> str:
        loc = f"line {self.line_of(row)}"
        if column is not None:
            if self.kind == "csv":
                loc += f", column {self.columns.index(column) + 1} ({column})"
            else:
                loc += f", field '{column}'"
        return loc

    def error(self, row: int, column: str | None, what: str, fix: str) -> ImportFormatError:
        return ImportFormatError(self.path, self.where(row, column), what, fix)

    def require(self, column: str, option: Opt | str) -> str:
        """Check that ``column`` exists; the error names the columns there are and the option that names it
        (an :class:`Opt`), or what kind of file has it (a str, for a format's fixed columns)."""
        if column not in self.frame.columns:
            have = ", ".join(self.columns[:12]) + (" ..." if len(self.columns) > 12 else "")
            where = "line 1" if self.kind == "csv" else "line 1, fields"
            raise ImportFormatError(
                self.path,
                where,
                f"no column '{column}' (columns: {have})",
                say("name the right column with ", option, " or rename it in the file") if isinstance(option, Opt)
                else f"pass {option}, which has this column",
            )
        return column

    def optional(self, column: str | None) -> str | None:
        return column if column and column in self.frame.columns else None


def read_table(path: str | Path, *, fmt: str | None = None) -> Table:
    """Read a CSV or JSONL file (gzip accepted) into a :class:`Table` of raw cells.

    CSV cells stay strings (no NA guessing: an empty cell is ""), so validation sees exactly what the
    file says. ``fmt`` forces "csv" or "jsonl"; by default ``.jsonl``/``.json``/``.ndjson`` are JSONL.
    """
    path = str(path)
    data = load_bytes(path)
    kind = fmt or ("jsonl" if base_suffix(path) in {".jsonl", ".ndjson", ".json"} else "csv")
    if kind == "jsonl":
        return _read_jsonl(path, data)
    header = csv_header(path, data)
    try:
        frame = pd.read_csv(
            io.BytesIO(data),
            dtype=str,
            keep_default_na=False,
            na_filter=False,
            engine="c",
            header=0,
            names=header,
            encoding="utf-8",
        )
    except (pd.errors.ParserError, csv.Error, ValueError) as exc:
        raise parser_error(path, exc) from None
    if frame.empty:
        raise ImportFormatError(path, "line 2", "header but no data rows", "export the data rows too")
    return Table(path, frame, "csv", data=data)


def _read_json_array(path: str, text: str) -> Table:
    """A JSON array of objects (AlpacaEval annotations, Chatbot Arena battle dumps); each row keeps the line
    its object starts on."""
    decoder = json.JSONDecoder()
    records: list[dict] = []
    lines: list[int] = []
    pos = text.index("[") + 1
    line = text.count("\n", 0, pos) + 1
    last = pos
    ws = re.compile(r"[\s,]*")
    while True:
        pos = ws.match(text, pos).end()
        if pos >= len(text) or text[pos] == "]":
            break
        line += text.count("\n", last, pos)
        last = pos
        try:
            obj, end = decoder.raw_decode(text, pos)
        except RecursionError:
            raise too_deep(path, f"line {line}", text) from None
        except json.JSONDecodeError as exc:
            raise ImportFormatError(path, f"line {exc.lineno}, column {exc.colno}", f"not JSON ({exc.msg})",
                                    "the file must be a JSON array of objects, or one object per line") from None
        except ValueError as exc:
            raise bad_json_value(path, f"line {line}", exc) from None
        if not isinstance(obj, dict):
            raise ImportFormatError(path, f"line {line}", "an element of the JSON array is not an object {...}",
                                    "the file must be a JSON array of objects")
        records.append(obj)
        lines.append(line)
        pos = end
    if pos >= len(text) or text[pos] != "]" or text[pos + 1:].strip():
        raise ImportFormatError(path, f"line {text.count(chr(10), 0, min(pos, len(text))) + 1}",
                                "the JSON array is not closed or has text after it", "re-export the file")
    return Table(path, pd.DataFrame.from_records(records), "jsonl", row_lines=np.asarray(lines, dtype=np.int64))


def _read_jsonl(path: str, data: bytes) -> Table:
    if data.lstrip()[:1] == b"[":
        return _read_json_array(path, data.decode("utf-8"))
    records: list[dict] = []
    lines: list[int] = []
    for n, line in enumerate(data.decode("utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except RecursionError:
            raise too_deep(path, f"line {n}", line) from None
        except json.JSONDecodeError as exc:
            raise ImportFormatError(
                path,
                f"line {n}, column {exc.colno}",
                f"not JSON ({exc.msg})",
                "write one JSON object per line",
            ) from None
        except ValueError as exc:
            raise bad_json_value(path, f"line {n}", exc) from None
        if not isinstance(obj, dict):
            raise ImportFormatError(
                path, f"line {n}", "a JSONL line must be an object {...}", "write one JSON object per line"
            )
        records.append(obj)
        lines.append(n)
    return Table(path, pd.DataFrame.from_records(records), "jsonl", row_lines=np.asarray(lines))


def as_bool(value) -> bool:
    """An option that may arrive as text from the command line ("true", "1", "yes")."""
    return value if isinstance(value, bool) else str(value).strip().lower() in TRUE_WORDS


def _is_missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or value == ""


def binary_column(table: Table, column: str) -> np.ndarray:
    """0/1 values of a column as int8; accepts 0/1, 0.0/1.0, true/false, yes/no (any case)."""
    values = table.frame[column].tolist()
    out = np.empty(len(values), dtype=np.int8)
    for i, v in enumerate(values):
        if isinstance(v, bool):
            out[i] = int(v)
            continue
        if isinstance(v, (int, float)) and not _is_missing(v) and v in (0, 1):
            out[i] = int(v)
            continue
        word = str(v).strip().lower() if v is not None else ""
        if word in TRUE_WORDS:
            out[i] = 1
        elif word in FALSE_WORDS:
            out[i] = 0
        elif _is_missing(v) or word == "":
            raise table.error(
                i,
                column,
                f"missing value {v!r} in '{column}'",
                "drop rows without a result (a missing cell is simply an absent row)",
            )
        elif word in NAN_WORDS:
            raise table.error(i, column, f"{short_repr(v)} is not a result (a word, not 0 or 1)",
                              "drop rows without a result (a missing cell is simply an absent row)")
        else:
            raise table.error(
                i,
                column,
                f"non-binary value {v!r} in '{column}'",
                "use 0/1 (or true/false); for partial credit use successes and trials",
            )
    return out


def float_column(table: Table, column: str, *, allow_missing: bool = False) -> np.ndarray:
    """Finite float values of a column (NaN where missing, only if ``allow_missing``; a missing value is an empty
    cell or a JSON null, never the word NaN: :data:`NAN_WORDS`)."""
    values = table.frame[column].tolist()
    out = np.empty(len(values), dtype=np.float64)
    for i, v in enumerate(values):
        if isinstance(v, str) and v.strip().lower() in NAN_WORDS:  # one rule in every column and format (issue 24)
            raise table.error(i, column, f"{short_repr(v)} is a word, not a number",
                              "leave the cell empty where there is no value" if allow_missing
                              else "give a number or drop the row")
        if _is_missing(v) or (isinstance(v, str) and not v.strip()):
            if allow_missing:
                out[i] = np.nan
                continue
            raise table.error(
                i, column, f"missing value {v!r} in '{column}'", "give a number or drop the row"
            )
        try:
            x = float(v)
        except (TypeError, ValueError):
            raise table.error(i, column, f"not a number: {short_repr(v)}", "give a number") from None
        except OverflowError:  # a JSON integer beyond the float range
            raise table.error(i, column, f"number too large: {short_repr(v)}", "give a finite number") from None
        if not math.isfinite(x):
            raise table.error(i, column, f"not a finite number: {short_repr(v)}", "give a finite number")
        out[i] = x
    return out


INT32_MAX = 2**31 - 1  # counts are stored as int32 (static_results.successes/trials)


def int_column(table: Table, column: str, *, minimum: int = 0, maximum: int = INT32_MAX) -> np.ndarray:
    """Whole numbers in [``minimum``, ``maximum``] of a column as int64 (the default maximum is the storage
    type's, so a count never wraps around when it is written)."""
    x = float_column(table, column)
    bad = np.flatnonzero((x != np.round(x)) | (x < minimum) | (x > maximum))
    if bad.size:
        i = int(bad[0])
        raise table.error(
            i,
            column,
            f"expected a whole number from {minimum} to {maximum:,}, got {short_repr(table.frame[column].iloc[i])}",
            "give counts as whole numbers in that range",
        )
    return x.astype(np.int64)


def short_repr(value, limit: int = 40) -> str:
    """``repr`` of a cell, cut to *limit* characters (a 400-digit number or a 2 MB cell stays one short line)."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 5] + "...'" + f" ({len(str(value)):,} characters)"


def key_column(table: Table, column: str) -> list[str]:
    """Non-blank string keys of a column (numbers are written without a trailing ``.0``)."""
    out: list[str] = []
    for i, v in enumerate(table.frame[column].tolist()):
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        s = "" if _is_missing(v) else str(v).strip()
        if not s:
            raise table.error(i, column, f"blank '{column}'", f"every row needs a '{column}'")
        out.append(s)
    return out


def text_column(table: Table, column: str | None) -> list[str | None] | None:
    """Optional text column: None for blank cells; None when the column is absent."""
    if column is None:
        return None
    return [None if _is_missing(v) else str(v) for v in table.frame[column].tolist()]


def duplicate_rows(keys: Iterable) -> tuple[int, int] | None:
    """(first, second) row index of the first repeated key, or None."""
    seen: dict = {}
    for i, k in enumerate(keys):
        if k in seen:
            return seen[k], i
        seen[k] = i
    return None


def read_models_file(path: str | Path) -> dict[str, dict]:
    """A models side file (CSV): name column (``name``/``model``/``model_id``/``respondent``, the first
    found) plus optional ``family``, ``owner``, ``arch``/``architecture``; other columns become metadata.

    Returns ``{name: {"family", "owner", "arch", "metadata"}}`` (blank cells are None).
    """
    table = read_table(path, fmt="csv")
    name_col = next(
        (c for c in ("name", "model", "model_id", "respondent") if c in table.frame.columns), None
    )
    if name_col is None:
        raise ImportFormatError(
            path,
            "line 1",
            "no model-name column (name, model, model_id or respondent)",
            "add a 'name' column",
        )
    names = key_column(table, name_col)
    dup = duplicate_rows(names)
    if dup:
        raise table.error(dup[1], name_col, f"model '{names[dup[1]]}' listed twice", "keep one row per model")
    arch_col = table.optional("arch") or table.optional("architecture")
    known = {name_col, "family", "owner", arch_col}
    extra = [c for c in table.columns if c not in known]
    rows = table.frame.to_dict("records")
    out: dict[str, dict] = {}
    for name, row in zip(names, rows, strict=True):
        out[name] = {
            "family": row.get("family") or None,
            "owner": row.get("owner") or None,
            "arch": (row.get(arch_col) or None) if arch_col else None,
            "metadata": {c: row[c] for c in extra},
        }
    return out


def models_frame(
    names: list[str],
    models_file: str | Path | None = None,
    family: list | None = None,
    owner: list | None = None,
    arch_to_family: Callable[[str], str | None] | None = None,
) -> pd.DataFrame:
    """The ParsedImport.models frame for ``names`` (in order), enriched from an optional models file.

    Family/owner columns of the data file win over the models file. A models-file ``arch`` column is kept
    in metadata and, when the caller passes ``arch_to_family`` (the CLI passes
    ``benchloupe.engine.families.family_from_architecture``; store code may not import engine, DESIGN.md),
    fills a missing family. Models the file does not list keep family None (inferred later from the name).
    """
    fam = list(family) if family is not None else [None] * len(names)
    own = list(owner) if owner is not None else [None] * len(names)
    meta: list[dict] = [{} for _ in names]
    if models_file is not None:
        side = read_models_file(models_file)
        for i, name in enumerate(names):
            row = side.get(name)
            if row is None:
                continue
            meta[i] = dict(row["metadata"])
            if row["arch"]:
                meta[i]["arch"] = row["arch"]
            fam[i] = (
                fam[i]
                or row["family"]
                or (arch_to_family(row["arch"]) if arch_to_family and row["arch"] else None)
            )
            own[i] = own[i] or row["owner"]
    return pd.DataFrame({"name": names, "family": fam, "owner": own, "metadata": meta}, dtype=object)
