"""Format registry and detection: ``FORMATS`` maps a format name to its parser, ``detect_format`` guesses
the name from the file's extension and its header (CSV) or first object (JSONL/JSON).

Detection only needs the first few KiB; an explicit ``--format`` always wins. Item-metadata files are
recognised only with the default ``key`` column next to text/answer columns and no model column.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import zipfile
from collections.abc import Callable
from pathlib import Path

from .arena import parse_arena
from .base import ImportFormatError, ParsedImport
from .dualeval import parse_dualeval
from .inspect_log import parse_inspect
from .itemmeta import parse_item_metadata
from .lmeval import NAME_RE, parse_lmeval
from .long import parse_long
from .neartie_npz import parse_neartie_npz
from .preferences import parse_preferences
from .readers import GZIP_MAGIC, base_suffix
from .wide import parse_classic_irt, parse_metabench, parse_wide

Parser = Callable[..., ParsedImport]

FORMATS: dict[str, Parser] = {
    "long": parse_long,
    "wide": parse_wide,
    "items": parse_item_metadata,
    "arena": parse_arena,
    "preferences": parse_preferences,
    "dualeval": parse_dualeval,
    "neartie-npz": parse_neartie_npz,
    "lm-eval": parse_lmeval,
    "inspect": parse_inspect,
    "metabench": parse_metabench,
    "classic-irt": parse_classic_irt,
}

# Other spellings of the same formats (the CLI's help text uses some of these).
ALIASES = {
    "lmeval": "lm-eval",
    "dualeval-static": "dualeval",
    "dualeval-arena": "dualeval",
    "npz": "neartie-npz",
    "item-metadata": "items",
    "rewards": "arena",
    "classic": "classic-irt",
}


def parse_file(path: str | Path, fmt: str | None = None, **options) -> ParsedImport:
    """Parse ``path`` with the named format (detected when ``fmt`` is None or "auto").

    Options whose value is None are dropped, so a CLI can pass every flag it defines.
    """
    name = ALIASES.get(fmt, fmt) if fmt and fmt != "auto" else detect_format(path)
    options = {k: v for k, v in options.items() if v is not None}  # unset CLI flags keep parser defaults
    if name not in FORMATS:
        raise ImportFormatError(path, "", f"unknown format '{name}'", f"use one of: {', '.join(FORMATS)}")
    return FORMATS[name](path, **options)


def _head(path: Path, size: int = 65536) -> str:
    with open(path, "rb") as fh:
        raw = fh.read(size)
    if raw[:2] == GZIP_MAGIC:
        try:
            with gzip.open(path, "rb") as fh:
                raw = fh.read(size)
        except (EOFError, OSError) as exc:
            raise ImportFormatError(
                path, "", f"truncated or corrupt gzip ({exc})", "re-download or re-compress the file"
            ) from None
    return raw.decode("utf-8", errors="replace")


def detect_format(path: str | Path) -> str:
    """The FORMATS name for ``path``; ImportFormatError when nothing fits."""
    p = Path(path)
    if not p.is_file():
        raise ImportFormatError(p, "", "no such file", "check the path")
    suffix = base_suffix(p)
    if suffix == ".npz":
        return "neartie-npz"
    if suffix == ".eval" or (suffix == ".json" and zipfile.is_zipfile(p)):
        return "inspect"
    head = _head(p)
    if not head.strip():
        raise ImportFormatError(p, "line 1", "the file is empty", "export the data again with a header row")
    if suffix == ".json":
        return "inspect"
    if suffix in {".jsonl", ".ndjson"}:
        if NAME_RE.match(p.name):
            return "lm-eval"
        try:
            first = json.loads(head.splitlines()[0])
        except (json.JSONDecodeError, IndexError):
            raise ImportFormatError(
                p, "line 1", "first line is not JSON", "write one JSON object per line"
            ) from None
        fields = set(first) if isinstance(first, dict) else set()
        if "doc_id" in fields and ("resps" in fields or "metrics" in fields):
            return "lm-eval"
        if "model_label" in fields:
            return "dualeval"
        return _by_columns(fields, p)
    header = next(csv.reader(io.StringIO(head)), [])
    return _by_columns({h.strip() for h in header}, p, header)


def _by_columns(cols: set[str], p: Path, header: list[str] | None = None) -> str:
    if {"model_a", "model_b"} <= cols:
        return "preferences"
    if "model" in cols and "reward" in cols:
        return "arena"
    if "model" in cols and "item" in cols and ({"correct", "successes"} & cols):
        return "long"
    if "key" in cols and "model" not in cols and ({"text", "answer", "group", "chance"} & cols):
        return "items"
    if cols & {"freq", "Freq"}:
        return "classic-irt"
    if header is not None and len(header) >= 2:
        if ".responses.csv" in p.name:
            return "metabench"
        return "wide"
    raise ImportFormatError(
        p,
        "line 1",
        f"cannot tell the format from columns {sorted(cols)[:8]}",
        "name it with --format (" + ", ".join(FORMATS) + ")",
    )
