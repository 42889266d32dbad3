"""A table as named numpy columns of one length, for the paths that must not load pandas.

Importing pandas costs ~0.15 s, a third of the whole-process budget of the primary near-tie audit (issue 13:
20x the reference's 8.3 s on ARC is 0.415 s, interpreter start included).  So the audit builds its tables as
:class:`Columns`, the store writes them as they are, and code that wants a DataFrame asks for one
(:meth:`Columns.frame`), loading pandas only then.  Only what those paths need is here: build, add columns,
select rows, concatenate, iterate rows as Python values, encode as the store's JSON ``split`` layout.

numpy only, so every layer may import it (like :mod:`benchloupe.textsafe`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np


def _column(value: Any, length: int | None) -> np.ndarray:
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, list | tuple):
        if value and all(isinstance(v, int | float | bool | np.number | np.bool_) for v in value):
            return np.asarray(value)
        return np.fromiter(value, dtype=object, count=len(value))  # one object per row, even for nested lists
    if length is None:
        raise ValueError("a scalar column needs another column to take its length from")
    out = np.empty(length, dtype=object if isinstance(value, str) or value is None else np.asarray(value).dtype)
    out[:] = value
    return out


def _json_values(column: np.ndarray) -> list:
    """A column as JSON-ready Python values: numpy scalars unwrapped, NaN and infinities as None."""
    values = column.tolist()
    if column.dtype.kind == "f":
        for k in np.flatnonzero(~np.isfinite(column)).tolist():
            values[k] = None
    elif column.dtype == object:
        values = [None if isinstance(v, float) and not math.isfinite(v) else v.item() if isinstance(v, np.generic)
                  else v for v in values]
    return values


class Columns:
    """Ordered named columns (numpy arrays) of equal length; scalars broadcast to that length."""

    __slots__ = ("_data", "_length")

    def __init__(self, data: Mapping[str, Any] | None = None, columns: Sequence[str] | None = None):
        data = dict(data or {})
        sized = [len(v) for v in data.values() if isinstance(v, np.ndarray | list | tuple)]
        length = sized[0] if sized else (0 if not data else None)
        if any(n != length for n in sized):
            raise ValueError(f"columns of different lengths: {sorted(set(sized))}")
        names = list(columns) if columns is not None else list(data)
        self._data = {c: _column(data[c], length) if c in data else _column([None] * (length or 0), length)
                      for c in names}
        self._length = length or 0

    @staticmethod
    def from_rows(rows: Sequence[Sequence], columns: Sequence[str]) -> Columns:
        """A table from row tuples (SQL rows, the store's JSON ``data``) and the column names."""
        values = list(zip(*rows, strict=True)) if rows else [()] * len(columns)
        return Columns({c: list(v) for c, v in zip(columns, values, strict=True)}, columns=columns)

    @property
    def columns(self) -> list[str]:
        return list(self._data)

    def __len__(self) -> int:
        return self._length

    def __contains__(self, name: object) -> bool:
        return name in self._data

    def __getitem__(self, name: str) -> np.ndarray:
        return self._data[name]

    def __repr__(self) -> str:
        return f"Columns({self._length} rows: {', '.join(self._data)})"

    def assign(self, **columns: Any) -> Columns:
        """A copy with columns added or replaced (scalars broadcast)."""
        out = Columns.__new__(Columns)
        out._data = {**self._data, **{k: _column(v, self._length) for k, v in columns.items()}}
        sized = {len(v) for v in out._data.values()}
        if sized - {self._length}:
            raise ValueError(f"a column of length {sorted(sized - {self._length})} does not fit {self._length} rows")
        out._length = self._length
        return out

    def take(self, rows: np.ndarray) -> Columns:
        """The rows at the given positions (or where a boolean mask is True), in that order."""
        rows = np.asarray(rows)
        if rows.dtype == bool:
            rows = np.flatnonzero(rows)
        out = Columns.__new__(Columns)
        out._data = {k: v[rows] for k, v in self._data.items()}
        out._length = int(rows.size)
        return out

    @staticmethod
    def concat(parts: Iterable[Columns], columns: Sequence[str] | None = None) -> Columns:
        """Rows of every part in order; the columns are the first part's (or ``columns`` when none is given)."""
        parts = [p for p in parts if len(p) or p.columns]
        names = list(columns) if columns is not None else (parts[0].columns if parts else [])
        if not parts:
            return Columns({c: [] for c in names})
        missing = [c for p in parts for c in names if c not in p]
        if missing:
            raise ValueError(f"column {missing[0]!r} is missing from a part")
        out = Columns.__new__(Columns)
        out._data = {c: _concat([p[c] for p in parts]) for c in names}
        out._length = sum(len(p) for p in parts)
        return out

    def rows(self, columns: Sequence[str] | None = None) -> Iterator[tuple]:
        """Each row as a tuple of Python values (numpy scalars unwrapped; NaN stays NaN)."""
        names = self.columns if columns is None else list(columns)
        return zip(*(self._data[c].tolist() for c in names), strict=True) if names else iter(())

    def records(self) -> list[dict]:
        names = self.columns
        return [dict(zip(names, row, strict=True)) for row in self.rows()]

    def to_split(self) -> dict:
        """``{"columns": [...], "data": [[row], ...]}`` with JSON-ready values: the layout the store keeps
        (pandas ``to_json(orient="split", index=False)``), read back by ``pandas.DataFrame(data, columns=...)``."""
        data = [list(row) for row in zip(*(_json_values(v) for v in self._data.values()), strict=True)]
        return {"columns": self.columns, "data": data}

    def frame(self):
        """The same table as a pandas DataFrame (imports pandas)."""
        import pandas as pd

        return pd.DataFrame({k: (v.tolist() if v.dtype == object else v) for k, v in self._data.items()},
                            columns=self.columns)


def _concat(arrays: list[np.ndarray]) -> np.ndarray:
    arrays = [a for a in arrays if a.size] or arrays[:1]  # an empty part's dtype says nothing
    if any(a.dtype == object for a in arrays) and not all(a.dtype == object for a in arrays):
        out = np.empty(sum(a.size for a in arrays), dtype=object)
        out[:] = [v for a in arrays for v in a.tolist()]
        return out
    return np.concatenate(arrays)
