"""Parquet files as a :class:`Table` of rows (pyarrow, imported only here), so the JSONL parsers read them
unchanged: nested structs and lists come back as dicts and lists. Row numbers count from 1 ("line N" in
errors means the N-th row)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from .base import ImportFormatError, not_a_file
from .readers import Table


def read_parquet(path: str | Path) -> Table:
    p = Path(path)
    if not p.is_file():
        raise not_a_file(p)
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise ImportFormatError(p, "", "reading parquet needs pyarrow", "pip install pyarrow") from None
    try:
        rows = pq.read_table(p).to_pylist()
    except Exception as exc:  # noqa: BLE001 - pyarrow raises many types for a damaged file
        raise ImportFormatError(p, "", f"not a readable parquet file ({type(exc).__name__}: {str(exc)[:80]})",
                                "pass a .parquet file (or convert it to JSONL)") from None
    return Table(str(p), pd.DataFrame.from_records(rows), "jsonl", row_lines=np.arange(1, len(rows) + 1))
