"""How much an imported file may expand to, and bounded readers for every container (issue 37, point 5).

Decompression and allocation bombs: a gzip'd CSV of a header, one row and then zeros that expands to 1.5 GB took
18.5 GB resident in ``import long`` on a 24 GB machine; deflate and zstd members of an ``.eval`` log that lie
about their size, a parquet file with 30 million rows in one row group (``std::bad_alloc``, the process aborted),
a one-row CSV with 10 million columns and a 608-byte ``.npz`` whose header claims a huge array each reached the
memory cap before any line. Every reader here streams and stops at the stated limit, before allocating what a
file claims or expands to, with one line that names the limit and how to raise it.

The limit (:func:`max_expanded_bytes`): the bytes one import file may expand to, one sixteenth of the machine's
memory and at least 256 MiB (1.5 GiB on a 24 GB machine: parsing a text file costs several times its size in
memory, 12 times for the long CSV above), or ``$BENCHLOUPE_MAX_IMPORT_BYTES`` (tests lower it to build each bomb
small; a curator with a bigger file raises it). Tables are bounded by :data:`MAX_COLUMNS` columns and, for
parquet, by the cells their rows become (:data:`BYTES_PER_CELL` each once read into Python rows).
"""

from __future__ import annotations

import gzip
import io
import os
import zlib
from pathlib import Path

from .base import ImportFormatError

ENV = "BENCHLOUPE_MAX_IMPORT_BYTES"
MIN_LIMIT = 256 << 20
MAX_COLUMNS = 1_000_000  # a wide matrix has one column per item; 10 million header names alone took > 4 GB
BYTES_PER_CELL = 64  # what one parquet cell costs once read into Python rows (dicts of objects), at least
CHUNK = 1 << 20


def machine_memory() -> int:
    """Physical memory in bytes (0 when unknown)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 0


def max_expanded_bytes() -> int:
    """The bytes one import file may expand to (module docstring)."""
    value = os.environ.get(ENV, "").strip()
    if value:
        try:
            return max(1, int(float(value)))
        except ValueError:
            pass
    return max(MIN_LIMIT, machine_memory() // 16)


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


def too_big(path, what: str, limit: int | None = None) -> ImportFormatError:
    """The one line for a file past the limit: what it expands to, the limit, and how to raise it."""
    limit = max_expanded_bytes() if limit is None else limit
    return ImportFormatError(path, "", f"{what}, past the import limit of {_size(limit)} (1/16 of this machine's "
                             "memory): refused before reading it into memory",
                             f"split the file, or raise the limit with ${ENV}=BYTES if the machine has the memory")


def check_file_size(path, size: int) -> None:
    """An uncompressed file is read whole: refuse one larger than the limit before reading it."""
    limit = max_expanded_bytes()
    if size > limit:
        raise too_big(path, f"the file holds {_size(size)}", limit)


def gunzip(path, raw: bytes) -> bytes:
    """The gzip stream ``raw`` decompressed (every member), read in chunks and refused as soon as it expands past
    the limit, so a bomb never allocates more than the limit."""
    limit = max_expanded_bytes()
    out = io.BytesIO()
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(raw)) as fh:
            while True:
                chunk = fh.read(CHUNK)
                if not chunk:
                    break
                if out.tell() + len(chunk) > limit:
                    raise too_big(path, f"the gzip data expands past {_size(limit)} (from {_size(len(raw))})", limit)
                out.write(chunk)
    except (EOFError, OSError, zlib.error) as exc:
        raise ImportFormatError(path, "", f"truncated or corrupt gzip ({exc})",
                                "re-download or re-compress the file") from None
    return out.getvalue()


def read_stream(stream, cap: int) -> bytes:
    """At most ``cap + 1`` bytes of a file-like ``stream``, in chunks (the caller refuses a result over ``cap``)."""
    out = io.BytesIO()
    while out.tell() <= cap:
        chunk = stream.read(min(CHUNK, cap + 1 - out.tell()))
        if not chunk:
            break
        out.write(chunk)
    return out.getvalue()


def check_columns(path, n: int) -> None:
    """A table's columns, bounded before they are read (a wide CSV of 10 million columns)."""
    if n > MAX_COLUMNS:
        raise ImportFormatError(path, "line 1", f"the header has {n:,} columns, more than the {MAX_COLUMNS:,} a "
                                "table may have", "split the items over several files, or write the results in long "
                                "form (one row per model and item: `import long`)")


def stat_size(path) -> int:
    try:
        return Path(path).stat().st_size
    except OSError:
        return 0
