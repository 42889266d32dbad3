"""Plain-text and JSON output for the headless CLI (no Rich markup: data is printed literally)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

import json
import math
import sys


def to_jsonable(obj):
    import numpy as np
    import pandas as pd

    if isinstance(obj, pd.DataFrame):
        return [to_jsonable(r) for r in obj.to_dict("records")]
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return to_jsonable(obj.tolist())
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (np.floating, float)):
        f = float(obj)
        return f if math.isfinite(f) else None
    if isinstance(obj, np.bool_):
        return bool(obj)
    return obj


def print_json(obj) -> None:
    json.dump(to_jsonable(obj), sys.stdout, indent=2, ensure_ascii=False)
    sys.stdout.write("\n")


def fmt_cell(v) -> str:
    import numpy as np

    if v is None:
        return ""
    if isinstance(v, (float, np.floating)):
        if not math.isfinite(v):
            return ""
        return f"{v:.4g}" if abs(v) < 1e5 else f"{v:.3e}"
    return str(v).replace("\n", " ")


def table(df: pd.DataFrame, *, max_width: int = 40, limit: int | None = None) -> str:
    """A fixed-width text table."""
    if limit is not None:
        df = df.head(limit)
    cols = list(df.columns)
    cells = [[fmt_cell(v)[:max_width] for v in row] for row in df.itertuples(index=False)]
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
