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
import zlib
from collections.abc import Callable
from pathlib import Path

from benchloupe.hints import Alt, Opt, say

from .alpacaeval import parse_alpacaeval
from .arena import parse_arena
from .base import ImportFormatError, ParsedImport, bad_json_value, check_nesting, not_a_file, too_deep
from .battles import parse_battles
from .dualeval import parse_dualeval
from .helm import parse_helm
from .inspect_log import parse_inspect
from .itemmeta import parse_item_metadata
from .lmeval import NAME_RE, RESULTS_RE, parse_lmeval
from .long import parse_long
from .neartie_npz import parse_neartie_npz
from .opencompass import parse_opencompass
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
    "alpacaeval": parse_alpacaeval,
    "battles": parse_battles,
    "helm": parse_helm,
    "opencompass": parse_opencompass,
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
    "alpaca-eval": "alpacaeval",
    "chatbot-arena": "battles",
    "arena-battles": "battles",
    "open-llm-leaderboard": "lm-eval",
    "parquet": "lm-eval",
}
HELM_SIDE_FILES = {"run_spec.json", "stats.json", "scenario_state.json", "scenario.json", "instances.json",
                   "display_predictions.json", "display_requests.json", "per_instance_stats_slim.json"}
INSPECT_SIDE_FILES = {"logs.json", "eval-set.json", "listing.json"}
TABLE_SUFFIXES = {".csv", ".tsv", ".jsonl", ".ndjson", ".json"}


def wanted(path: Path, fmt: str | None) -> bool:
    """Whether a file found in a folder (or by a glob) belongs to ``fmt`` (None: any importable file)."""
    name = path.name
    low = name.lower()
    suffix = base_suffix(path)
    fmt = ALIASES.get(fmt, fmt) if fmt else None
    if low.startswith(".") or low in INSPECT_SIDE_FILES:
        return False
    if fmt == "lm-eval":
        return bool(NAME_RE.match(name)) or suffix == ".parquet"
    if fmt == "inspect":
        return suffix in {".eval", ".json"} and not RESULTS_RE.match(name)
    if fmt == "alpacaeval":
        return low == "annotations.json"
    if fmt == "helm":
        return low == "per_instance_stats.json"
    if fmt == "opencompass":
        return suffix == ".json" and path.parent.parent.name == "results"
    if fmt == "neartie-npz":
        return suffix == ".npz"
    if fmt is not None:
        return suffix in TABLE_SUFFIXES
    return suffix in TABLE_SUFFIXES | {".eval", ".npz", ".parquet"} and low not in HELM_SIDE_FILES


def parse_file(path: str | Path, fmt: str | None = None, **options) -> ParsedImport:
    """Parse ``path`` with the named format (detected when ``fmt`` is None or "auto").

    Options whose value is None are dropped, so a CLI can pass every flag it defines.
    """
    name = ALIASES.get(fmt, fmt) if fmt and fmt != "auto" else detect_format(path)
    options = {k: v for k, v in options.items() if v is not None}  # unset CLI flags keep parser defaults
    if name not in FORMATS:
        raise ImportFormatError(path, "", f"unknown format '{name}'", f"use one of: {', '.join(FORMATS)}")
    if Path(path).is_file() and base_suffix(path) not in BINARY_SUFFIXES and name != "neartie-npz" and \
            not (name == "inspect" and zipfile.is_zipfile(path)):
        refuse_binary(Path(path))  # a text format named for a binary file: say what the file is
    parsed = FORMATS[name](path, **options)
    check_nesting(parsed, path)
    return parsed


# Formats whose files are binary by design (read by their own parsers).
BINARY_SUFFIXES = {".npz", ".parquet", ".eval"}
# What a binary file's first bytes say it is.
MAGIC = ((b"SQLite format 3\x00", "a SQLite database"), (b"PK\x03\x04", "a zip archive"),
         (b"PAR1", "a Parquet file"), (b"\x93NUMPY", "a NumPy array"), (b"\x89PNG", "a PNG image"),
         (b"%PDF", "a PDF"), (b"\x7fELF", "a program"), (b"BZh", "bzip2-compressed"),
         (b"\xfd7zXZ\x00", "xz-compressed"), (b"7z\xbc\xaf", "a 7-zip archive"), (b"\x28\xb5\x2f\xfd", "zstd-compressed"))
TEXT_CONTROLS = set(b"\t\n\r\x0c")


def _size(n: int) -> str:
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n:,} bytes"


def binary_description(path: Path) -> str | None:
    """What *path* is when it is not text (None when it reads as text): its kind when its first bytes name
    one, its size and its first 8 bytes in hex. One short phrase, never the bytes themselves (issue 21 item
    6: a SQLite file's error dumped ~300 bytes of it over ten wrapped lines)."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(8192)
    except OSError:
        return None  # unreadable: the reader that opens it next says why, in its own words
    head = raw
    if raw[:2] == GZIP_MAGIC:
        try:
            with gzip.open(path, "rb") as fh:
                head = fh.read(8192)
        except (EOFError, OSError, zlib.error):
            return None  # a corrupt gzip: _head says so
    if not head:
        return None
    kind = next((name for magic, name in MAGIC if head.startswith(magic)), None)
    if head[:2] in (b"\xff\xfe", b"\xfe\xff"):
        kind = "UTF-16 text"
    controls = sum(1 for b in head if (b < 0x20 and b not in TEXT_CONTROLS) or b == 0x7f)
    bad_utf8 = head.decode("utf-8", errors="replace").count("\ufffd")
    # Text stays text: another encoding (latin-1) has a few bytes that are not UTF-8 (the readers' "not UTF-8"
    # line says how to fix that), hostile names hold escape sequences. A binary file has NUL bytes, or is
    # mostly control bytes or not UTF-8 at all.
    if kind is None and b"\x00" not in head and controls < 0.3 * len(head) and bad_utf8 < 0.3 * len(head):
        return None
    size = path.stat().st_size
    hexed = " ".join(f"{b:02x}" for b in raw[:8])
    return f"a binary file ({kind + ', ' if kind else ''}{_size(size)}, starting {hexed})"


def refuse_binary(path: Path) -> None:
    """Raise the one-line error for a binary file named for import (nothing when it reads as text)."""
    what = binary_description(path)
    if what is None:
        return
    accepted = say("accepted: CSV, TSV, JSON, JSONL (.gz too), .npz, .parquet, .eval (",
                   Alt("`benchloupe import formats`", "the format field lists the formats"), ")")
    if "UTF-16" in what:
        fix = "re-save it as UTF-8 text"
    elif "SQLite" in what:
        fix = say(Alt("open a workspace with `benchloupe open FILE`; ", "a workspace is opened, not imported; "),
                  accepted)
    else:
        fix = accepted
    raise ImportFormatError(path, "", what, fix)


def _head(path: Path, size: int = 65536) -> str:
    with open(path, "rb") as fh:
        raw = fh.read(size)
    if raw[:2] == GZIP_MAGIC:
        try:
            with gzip.open(path, "rb") as fh:
                raw = fh.read(size)
        except (EOFError, OSError, zlib.error) as exc:
            raise ImportFormatError(
                path, "", f"truncated or corrupt gzip ({exc})", "re-download or re-compress the file"
            ) from None
    return raw.decode("utf-8", errors="replace")


def detect_format(path: str | Path) -> str:
    """The FORMATS name for ``path``; ImportFormatError when nothing fits (or the file is a known side file)."""
    p = Path(path)
    if not p.is_file():
        raise not_a_file(p)
    suffix = base_suffix(p)
    low = p.name.lower()
    if suffix == ".npz":
        return "neartie-npz"
    if suffix == ".parquet":
        return "lm-eval"
    if suffix == ".eval" or (suffix == ".json" and zipfile.is_zipfile(p)):
        return "inspect"
    if low == "per_instance_stats.json":
        return "helm"
    if low in HELM_SIDE_FILES:
        raise ImportFormatError(p, "", "a HELM side file, not per-instance results",
                                "import per_instance_stats.json from the same run folder (format helm)")
    if RESULTS_RE.match(p.name):
        raise ImportFormatError(p, "", "an lm-eval results file (aggregate scores only)",
                                "import the samples_<task>_*.jsonl files next to it (run lm_eval with --log_samples)")
    refuse_binary(p)
    head = _head(p)
    if not head.strip():
        raise ImportFormatError(p, "line 1", "the file is empty", "export the data again with a header row")
    if suffix in {".jsonl", ".ndjson", ".json"}:
        if NAME_RE.match(p.name):
            return "lm-eval"
        return _by_json(p, head, suffix)
    header = next(csv.reader(io.StringIO(head.replace("\r\n", "\n").replace("\r", "\n"))), [])
    return _by_columns({h.strip() for h in header}, p, header)


def _first_object(p: Path, head: str) -> tuple[str, dict]:
    """("array" | "object" | "lines", first object) from the head of a JSON or JSONL file."""
    text = head.lstrip()
    decoder = json.JSONDecoder()
    shape = "array" if text[:1] == "[" else "lines"
    try:
        if shape == "array":
            obj, _ = decoder.raw_decode(text, len(text) - len(text[1:].lstrip()))
        else:
            obj, end = decoder.raw_decode(text)
            if not text[end:].strip() or not text[end:].lstrip().startswith("{"):
                shape = "object"
    except RecursionError:  # the whole file's depth, not only its head's
        from .readers import load_text

        raise too_deep(p, "line 1", load_text(p)) from None
    except ValueError as exc:
        if not isinstance(exc, json.JSONDecodeError):
            raise bad_json_value(p, "line 1", exc) from None
        if text[:1] == "{" and len(head) >= 65536:
            return "object", {}  # one big object: decided by its keys below
        raise ImportFormatError(p, "line 1", "not JSON", "write a JSON array, one JSON object per line, or a log") \
            from None
    return shape, obj if isinstance(obj, dict) else {}


def _by_json(p: Path, head: str, suffix: str) -> str:
    shape, first = _first_object(p, head)
    fields = set(first)
    if shape == "object" or (not fields and head.lstrip()[:1] == "{"):
        if "eval" in fields or '"eval"' in head[:65536] and '"version"' in head[:200]:
            return "inspect"
        if "details" in fields:
            return "opencompass"
        raise ImportFormatError(p, "", f"a JSON object with keys {sorted(fields)[:8]}, not a known log",
                                "name the format (benchloupe import formats)")
    if {"generator_2", "preference"} <= fields:
        return "alpacaeval"
    if "doc_id" in fields and ("resps" in fields or "metrics" in fields):
        return "lm-eval"
    if "model_label" in fields:
        return "dualeval"
    if {"model_a", "model_b", "winner"} <= fields and ("question_id" in fields or "judge" in fields):
        return "battles"
    return _by_columns(fields, p)


def _cut(name: str, most: int = 40) -> str:
    """A column name as an error quotes it: at most *most* characters (a header can be a whole line)."""
    return name if len(name) <= most else name[: most - 1] + "…"


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
        f"cannot tell the format from columns {[_cut(c) for c in sorted(cols)[:8]]}",
        say("name it with ", Opt("format"), " (" + ", ".join(FORMATS) + ")"),
    )
