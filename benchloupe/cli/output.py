"""Plain-text and JSON output for the headless CLI (no Rich markup: data is printed literally).

The CLI's one place where text from data meets the terminal (issue 10): :func:`terminal_safe` wraps stdout and
stderr for the whole command, so every line printed (tables, key/value lists, messages quoting a model name, error
lines, progress) shows control characters visibly escaped by :func:`benchloupe.textsafe.visible`; newline and tab
keep their layout. Tables escape their cells before measuring them, so columns stay aligned. JSON output stays
exact JSON: the characters ``json.dumps`` leaves raw with ``ensure_ascii=False`` (DEL, C1, bidi overrides, the
line separators) are written as ``\\uXXXX`` escapes, which decode to the same string. Data exports written to a file
or a pipe bypass the wrapper (:func:`data_stream`) and stay byte-exact.
"""

from __future__ import annotations

import contextlib
import io
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

import json
import math
import numbers
import sys

from benchloupe.textsafe import visible

# What json.dumps(ensure_ascii=False) does not escape but a terminal may act on.
_JSON_RAW = re.compile("[\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


class OutputError(OSError):
    """Writing the command's own output failed (a full disk behind ``> file``, a closed terminal)."""


class TerminalSafe(io.TextIOBase):
    """A text stream that writes through :func:`visible` (newline and tab kept) to the stream it wraps."""

    def __init__(self, stream):
        self.raw_stream = stream

    def write(self, s: str) -> int:
        try:
            self.raw_stream.write(visible(s, keep_layout=True))
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise OutputError(exc.errno, exc.strerror) from exc
        return len(s)

    def write_visible(self, s: str) -> int:
        """Write text already safe on a terminal (:func:`json_text`'s: no character :func:`visible` escapes) as
        it is, without a second pass over it (33 MB of an anomalies run's ``--json``, issue 26)."""
        try:
            self.raw_stream.write(s)
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise OutputError(exc.errno, exc.strerror) from exc
        return len(s)

    def flush(self) -> None:
        try:
            self.raw_stream.flush()
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise OutputError(exc.errno, exc.strerror) from exc

    def isatty(self) -> bool:
        return self.raw_stream.isatty()

    def fileno(self) -> int:
        return self.raw_stream.fileno()

    def writable(self) -> bool:
        return True

    @property
    def encoding(self):
        return getattr(self.raw_stream, "encoding", "utf-8")


def unwrapped(stream):
    """The stream under any :class:`TerminalSafe` wrapper."""
    while isinstance(stream, TerminalSafe):
        stream = stream.raw_stream
    return stream


@contextlib.contextmanager
def terminal_safe():
    """For the duration of a command, stdout and stderr show data's control characters escaped."""
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = TerminalSafe(unwrapped(sys.stdout)), TerminalSafe(unwrapped(sys.stderr))
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


@contextlib.contextmanager
def raw_terminal():
    """The real streams back (the TUI draws its own screen and escapes in its own layer)."""
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = unwrapped(sys.stdout), unwrapped(sys.stderr)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


def data_stream():
    """Where a data export to stdout goes: exact bytes into a file or pipe, escaped text on a terminal."""
    raw = unwrapped(sys.stdout)
    try:
        tty = raw.isatty()
    except (AttributeError, ValueError):
        tty = False
    return sys.stdout if tty else raw


LONG_LIST = 1000  # a list longer than this prints one compact element per line


def json_text(obj, *, indent: int | None = 2) -> str:
    """Exact JSON that is also safe on a terminal (see the module docstring). Indented as ``json.dumps(indent=2)``,
    except that a list of more than :data:`LONG_LIST` elements has one compact element per line: the same value,
    written by the C encoder (issue 26: an anomalies run's 210,000 unexpected cells took 9 s through the
    pure-Python indenting encoder, and a row per line is what a reader of such a list scrolls anyway).

    A :class:`benchloupe.columns.Columns` value is the list of its rows as dicts (``{column: value}``, values as
    :func:`to_jsonable` makes them), the same text as that list's; a long one is written a column at a time
    straight from its arrays (issue 26: an anomalies run's 210,060 unexpected cells, no dict per row)."""
    value = to_jsonable(obj)
    if indent is None:
        text = json.dumps(value, ensure_ascii=False, default=_columns_default)
    else:
        text = _indented(value, indent, 0)
    return safe_json(text)


def _is_columns(v) -> bool:
    mod = sys.modules.get("benchloupe.columns")  # a Columns value exists only once that module (numpy) is loaded
    return mod is not None and isinstance(v, mod.Columns)


def _columns_default(v):
    if _is_columns(v):
        return columns_records(v)
    raise TypeError(f"Object of type {type(v).__name__} is not JSON serializable")


def _column_values(a) -> list:
    """A numpy column as :func:`to_jsonable` makes its values: floats with NaN and infinities as None, integers
    and booleans as Python ones, anything else value by value."""
    if a.dtype.kind == "f":
        values = a.tolist()
        np = sys.modules["numpy"]
        for k in np.flatnonzero(~np.isfinite(a)).tolist():
            values[k] = None
        return values
    if a.dtype.kind in "iub":
        return a.tolist()
    return [to_jsonable(x) for x in a.tolist()]


def columns_records(cols) -> list[dict]:
    """The rows of a :class:`~benchloupe.columns.Columns` as JSON-ready dicts (what :func:`json_text` prints)."""
    names = [k if type(k) is str else str(k) for k in cols.columns]
    values = [_column_values(cols[k]) for k in cols.columns]
    return [dict(zip(names, row, strict=True)) for row in zip(*values, strict=True)] if names else [{}] * len(cols)


def _array_json(a) -> list[str]:
    """Each value's ``json.dumps(to_jsonable(value), ensure_ascii=False)`` for a numpy column: a float column by
    ``float.__repr__`` (what the encoder writes for a finite float; ``null`` for NaN and the infinities), each
    distinct value once when values repeat (a 0/1 observation); integers by ``int.__repr__``."""
    np = sys.modules["numpy"]
    if a.dtype.kind == "f":
        a = a.astype(np.float64, copy=False)  # float32 values exactly as float() gives them
        finite = np.isfinite(a)
        bits, inverse = np.unique(a.view(np.int64), return_inverse=True)  # -0.0 and 0.0 apart
        if 4 * len(bits) <= len(a):
            enc = np.array([float.__repr__(x) if x - x == 0 else "null" for x in bits.view(np.float64).tolist()],
                           dtype=object)
            return enc[inverse.ravel()].tolist()
        text = list(map(float.__repr__, a.tolist()))
        if not finite.all():
            for k in np.flatnonzero(~finite).tolist():
                text[k] = "null"
        return text
    if a.dtype.kind in "iu":
        return list(map(int.__repr__, a.tolist()))
    if a.dtype.kind == "b":
        return ["true" if x else "false" for x in a.tolist()]
    values = a.tolist()
    if set(map(type, values)) == {str}:  # names and keys: each distinct one encoded once
        enc = {x: json.dumps(x, ensure_ascii=False) for x in set(values)}
        return list(map(enc.__getitem__, values))
    return _column_json([to_jsonable(x) for x in values])


def _columns_pieces(cols, pad: str) -> list[str]:
    """The lines ``pad + json.dumps(row, ensure_ascii=False)`` of every row of a Columns, joined by ``",\\n"``, as
    pieces to join: built a column at a time (:func:`_rows_compact` without a dict per row), interleaved with the
    keys (issue 26: 210,060 unexpected cells)."""
    np = sys.modules["numpy"]
    names = [k if type(k) is str else str(k) for k in cols.columns]
    grid = np.empty((len(cols), 2 * len(names) + 1), dtype=object)
    for j, (k, name) in enumerate(zip(cols.columns, names, strict=True)):
        grid[:, 2 * j] = ("{" if j == 0 else ", ") + json.dumps(name, ensure_ascii=False) + ": "
        grid[:, 2 * j + 1] = _array_json(cols[k])
    grid[:, 0] = pad + grid[0, 0]
    grid[:, -1] = "},\n"
    grid[-1, -1] = "}"
    return grid.ravel().tolist()


def _indented(v, indent: int, level: int) -> str:
    return "".join(_pieces(v, indent, level, []))


def _pieces(v, indent: int, level: int, out: list) -> list:
    """``json.dumps(v, indent=indent)`` at nesting ``level`` (long lists one compact element per line) as pieces
    appended to ``out``: the text is joined once, not copied at every level (a 33 MB list of cells)."""
    if _is_columns(v):
        if len(v) > LONG_LIST and v.columns:
            out.append("[\n")
            out.extend(_columns_pieces(v, " " * (indent * (level + 1))))
            out.append("\n" + " " * (indent * level) + "]")
            return out
        v = columns_records(v)
    if isinstance(v, dict) and v:
        pad = " " * (indent * (level + 1))
        sep = "{\n"
        for k, x in v.items():
            out.append(f"{sep}{pad}{json.dumps(str(k), ensure_ascii=False)}: ")
            _pieces(x, indent, level + 1, out)
            sep = ",\n"
        out.append("\n" + " " * (indent * level) + "}")
        return out
    if isinstance(v, list) and v:
        pad = " " * (indent * (level + 1))
        if len(v) > LONG_LIST:
            lines = _rows_compact(v, pad)
            out.append("[\n")
            out.append(",\n".join(pad + json.dumps(x, ensure_ascii=False) for x in v) if lines is None
                       else ",\n".join(lines))
        else:
            sep = "[\n"
            for x in v:
                out.append(sep + pad)
                _pieces(x, indent, level + 1, out)
                sep = ",\n"
        out.append("\n" + " " * (indent * level) + "]")
        return out
    out.append(json.dumps(v, ensure_ascii=False))
    return out


def _column_json(values: list) -> list[str]:
    """Each value's ``json.dumps(value, ensure_ascii=False)``: a column of floats by ``repr`` (what the encoder
    writes for a finite float), a column of strings by one encoding per distinct string (model and item names
    repeat), any other column value by value."""
    if all(type(x) is float for x in values):
        distinct = set(values)
        if 2 * len(distinct) > len(values):
            return [float.__repr__(x) if x - x == 0 else json.dumps(x) for x in values]
        # a repeated value (a 0/1 observation) written once; a zero by value, as 0.0 == -0.0 in a dict
        enc = {x: float.__repr__(x) if x - x == 0 else json.dumps(x) for x in distinct}
        return [enc[x] if x else float.__repr__(x) for x in values]
    if all(type(x) is str for x in values):
        enc = {x: json.dumps(x, ensure_ascii=False) for x in set(values)}
        return [enc[x] for x in values]
    return [json.dumps(x, ensure_ascii=False) for x in values]


def _rows_compact(rows: list, pad: str) -> list[str] | None:
    """``pad + json.dumps(row, ensure_ascii=False)`` per row when every row is a dict with the same keys in the same
    order (a long list's rows: 210,000 unexpected cells of an anomalies run), written a column at a time (issue 26:
    2.2 s -> 0.4 s at load 8 on that list); None for any other list (encoded row by row).
    tests/unit/test_json_output.py checks the text against ``json.dumps``'s."""
    first = rows[0]
    if type(first) is not dict or not first:
        return None
    keys = tuple(first)
    if not all(type(r) is dict and tuple(r) == keys for r in rows):
        return None
    heads = [json.dumps(k, ensure_ascii=False).replace("%", "%%") + ": %s" for k in keys]
    fmt = pad + "{" + ", ".join(heads) + "}"
    cols = [_column_json([r[k] for r in rows]) for k in keys]
    return [fmt % line for line in zip(*cols, strict=True)]


def safe_json(text: str) -> str:
    """JSON text with the characters a terminal acts on written as ``\\uXXXX`` escapes (same JSON value). An
    ASCII text holds none of them (all are U+007F or above) and is returned as it is without a scan."""
    if text.isascii():
        return text
    return _JSON_RAW.sub(lambda m: f"\\u{ord(m.group(0)):04x}", text)


def to_jsonable(obj):
    # the exact built-in types first: a run's hundreds of thousands of flag fields are these (issue 26)
    t = type(obj)
    if t is str or t is int or t is bool or obj is None:
        return obj
    if t is float:
        return obj if math.isfinite(obj) else None
    if t is dict:
        return {k if type(k) is str else str(k): to_jsonable(v) for k, v in obj.items()}
    if t is list:
        return [to_jsonable(v) for v in obj]
    if _is_columns(obj):  # kept whole: json_text writes its rows a column at a time
        return obj
    # an object can only be a numpy or pandas value when that library is already loaded: import neither otherwise
    # (``list --json`` stays free of both, issue 16)
    pd = sys.modules.get("pandas")
    np = sys.modules.get("numpy")
    if pd is not None and isinstance(obj, pd.DataFrame):
        return [to_jsonable(r) for r in obj.to_dict("records")]
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if np is not None and isinstance(obj, np.ndarray):
        return to_jsonable(obj.tolist())
    if np is not None and isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, bool):
        return obj
    if isinstance(obj, numbers.Integral):
        return int(obj)
    if isinstance(obj, numbers.Real):
        f = float(obj)
        return f if math.isfinite(f) else None
    return obj


def print_json(obj) -> None:
    text = json_text(obj)
    out = sys.stdout
    if isinstance(out, TerminalSafe):  # json_text escaped every character visible() would (module docstring)
        out.write_visible(text)
        out.write_visible("\n")
    else:
        out.write(text + "\n")


def fmt_cell(v) -> str:
    if v is None:
        return ""
    np = sys.modules.get("numpy")  # a numpy value only exists once numpy is loaded: no import here (issue 16)
    if isinstance(v, bool) or (np is not None and isinstance(v, np.bool_)):
        return str(bool(v))
    if isinstance(v, numbers.Integral):
        return str(int(v))
    if isinstance(v, numbers.Real):
        if not math.isfinite(v):
            return ""
        if float(v).is_integer() and abs(v) < 1e15:
            return str(int(v))
        return f"{v:.4g}" if abs(v) < 1e5 else f"{v:.3e}"
    return visible(str(v).replace("\n", " "))


def table(df: pd.DataFrame, *, max_width: int = 40, limit: int | None = None) -> str:
    """A fixed-width text table."""
    if limit is not None:
        df = df.head(limit)
    return table_rows(list(df.columns), df.itertuples(index=False), max_width=max_width)


def table_rows(cols: list, rows, *, max_width: int = 40) -> str:
    """A fixed-width text table from column names and row tuples (no pandas)."""
    cells = [[fmt_cell(v)[:max_width] for v in row] for row in rows]
    cols = [visible(c) for c in cols]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(cols)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(cols, widths)),
             "  ".join("-" * w for w in widths)]
    for r in cells:
        lines.append("  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip())
    return "\n".join(lines)


def kv_value(v) -> str:
    """A value in a key/value list: a missing or non-finite number is "none" (never "nan")."""
    if isinstance(v, (dict, list)):
        return visible(json_text(v, indent=None))
    if v is None or (isinstance(v, float) and not math.isfinite(v)) or (isinstance(v, str) and v.lower() == "nan"):
        return "none"
    return fmt_cell(v) or "none"


def kv(d: dict) -> str:
    width = max((len(visible(k)) for k in d), default=0)
    return "\n".join(f"{visible(k).ljust(width)}  {kv_value(v)}" for k, v in d.items())
