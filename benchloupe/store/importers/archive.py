"""Zip members as bytes, whatever the compression: stored, deflate (the standard library) and zstd (zip
method 93, written by current Inspect AI for every member of a ``.eval`` log; Python's ``zipfile`` cannot
read it). zstd members are read raw from their local header and decompressed with ``zstandard``, imported
only when such a member is met; the CRC-32 recorded in the archive is checked.

Bounded (issue 37): a member is read in chunks, never past the size it claims, and the members of one archive
together never past the import limit (:mod:`.limits`); a member claiming more, or a zstd member expanding past its
claim, is refused before its bytes are allocated.
"""

from __future__ import annotations

import io
import struct
import zipfile
import zlib
from pathlib import Path

from .limits import _size, max_expanded_bytes, read_stream

ZSTD = 93
LOCAL_HEADER = struct.Struct("<4s2B4HL2L2H")  # the 30-byte local file header


class ArchiveError(ValueError):
    """A member that cannot be read: the message says why (the caller adds file and fix)."""


class Budget:
    """What the members of one archive may still expand to (the import limit, spent member by member)."""

    def __init__(self, limit: int | None = None):
        self.limit = max_expanded_bytes() if limit is None else limit
        self.left = self.limit

    def spend(self, info: zipfile.ZipInfo) -> None:
        if info.file_size > self.left:
            raise ArchiveTooBig(f"member {info.filename} claims {_size(info.file_size)}"
                                + ("" if self.left == self.limit else f" after {_size(self.limit - self.left)} of "
                                   "other members") + f", past the import limit of {_size(self.limit)}")
        self.left -= info.file_size


class ArchiveTooBig(ArchiveError):
    """A member (or the members together) past the import limit: the caller says how to raise it."""


def read_member(path: str | Path, zf: zipfile.ZipFile, info: zipfile.ZipInfo, *,
                budget: Budget | None = None) -> bytes:
    """The uncompressed bytes of ``info``, read in chunks and never past the size the member claims; the claim is
    first spent from ``budget`` (by default a budget of its own: the import limit)."""
    (budget or Budget()).spend(info)
    if info.compress_type != ZSTD:
        try:
            with zf.open(info) as fh:
                return read_stream(fh, info.file_size)
        except NotImplementedError as exc:
            raise ArchiveError(f"member {info.filename}: {exc} (method {info.compress_type})") from None
    import zstandard

    with open(path, "rb") as fh:
        fh.seek(info.header_offset)
        head = fh.read(LOCAL_HEADER.size)
        if len(head) != LOCAL_HEADER.size or head[:4] != b"PK\x03\x04":
            raise ArchiveError(f"member {info.filename}: bad local header")
        fields = LOCAL_HEADER.unpack(head)
        fh.seek(fields[-2] + fields[-1], 1)  # file name and extra field
        raw = fh.read(info.compress_size)
    if len(raw) != info.compress_size:
        raise ArchiveError(f"member {info.filename} is truncated")
    try:
        with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(raw)) as reader:
            data = read_stream(reader, info.file_size)
    except zstandard.ZstdError as exc:
        raise ArchiveError(f"member {info.filename}: corrupt zstd data ({exc})") from None
    if len(data) > info.file_size:
        raise ArchiveError(f"member {info.filename} expands past the {_size(info.file_size)} it claims")
    if len(data) != info.file_size or zlib.crc32(data) != info.CRC:
        raise ArchiveError(f"member {info.filename}: size or CRC does not match the archive")
    return data
