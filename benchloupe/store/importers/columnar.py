"""Parquet files as a :class:`Table` of rows (pyarrow, imported only here), so the JSONL parsers read them
unchanged: nested structs and lists come back as dicts and lists. Row numbers count from 1 ("line N" in
errors means the N-th row).

Bounded (issue 37): the footer's row count, columns and uncompressed row-group sizes are checked against the import
limit before any row group is read (30 million rows in one row group aborted the process with std::bad_alloc)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from . import limits
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
        meta = pq.ParquetFile(p).metadata
        _check_size(p, meta)
        rows = pq.read_table(p).to_pylist()
    except ImportFormatError:
        raise
    except Exception as exc:  # noqa: BLE001 - pyarrow raises many types for a damaged file
        raise ImportFormatError(p, "", f"not a readable parquet file ({type(exc).__name__}: {str(exc)[:80]})",
                                "pass a .parquet file (or convert it to JSONL)") from None
    return Table(str(p), pd.DataFrame.from_records(rows), "jsonl", row_lines=np.arange(1, len(rows) + 1))


def _check_size(path: Path, meta) -> None:
    """What reading the file would cost, from its footer: its row groups' uncompressed bytes plus
    limits.BYTES_PER_CELL per cell once they are Python rows; refused past the import limit."""
    limits.check_columns(path, meta.num_columns)
    uncompressed = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
    cells = meta.num_rows * max(1, meta.num_columns)
    cost = uncompressed + cells * limits.BYTES_PER_CELL
    if cost > limits.max_expanded_bytes():
        raise limits.too_big(path, f"its {meta.num_rows:,} rows x {meta.num_columns} columns "
                             f"({limits._size(uncompressed)} uncompressed) need about {limits._size(cost)} as rows")
