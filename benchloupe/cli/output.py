"""Plain-text and JSON output for the headless CLI (no Rich markup: data is printed literally)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

import json
import math
import numbers
import sys

from benchloupe.textsafe import visible


def to_jsonable(obj):
    # an object can only be a numpy or pandas value when that library is already loaded: import neither otherwise
    # (``list --json`` stays free of both)
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
    if isinstance(obj, bool):
        return obj
    if isinstance(obj, numbers.Integral):
        return int(obj)
    if isinstance(obj, numbers.Real):
        f = float(obj)
        return f if math.isfinite(f) else None
    if np is not None and isinstance(obj, np.bool_):
        return bool(obj)
    return obj


def print_json(obj) -> None:
    json.dump(to_jsonable(obj), sys.stdout, indent=2, ensure_ascii=False)
    sys.stdout.write("\n")


def fmt_cell(v) -> str:
    if v is None:
        return ""
    if isinstance(v, numbers.Real) and not isinstance(v, numbers.Integral):  # float and numpy floats, no numpy import
        if not math.isfinite(v):
            return ""
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
    widths = [max([len(str(c))] + [len(r[i]) for r in cells]) for i, c in enumerate(cols)]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(cols, widths)),
             "  ".join("-" * w for w in widths)]
    for r in cells:
        lines.append("  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip())
    return "\n".join(lines)


def kv(d: dict) -> str:
    width = max((len(str(k)) for k in d), default=0)
    return "\n".join(f"{str(k).ljust(width)}  {fmt_cell(v) if not isinstance(v, (dict, list)) else json.dumps(to_jsonable(v))}"
                     for k, v in d.items())
