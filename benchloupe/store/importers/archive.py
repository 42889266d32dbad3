"""Zip members as bytes, whatever the compression: stored, deflate (the standard library) and zstd (zip
method 93, written by current Inspect AI for every member of a ``.eval`` log; Python's ``zipfile`` cannot
read it). zstd members are read raw from their local header and decompressed with ``zstandard``, imported
only when such a member is met; the CRC-32 recorded in the archive is checked.
"""

from __future__ import annotations

import struct
import zipfile
import zlib
from pathlib import Path

ZSTD = 93
LOCAL_HEADER = struct.Struct("<4s2B4HL2L2H")  # the 30-byte local file header


class ArchiveError(ValueError):
    """A member that cannot be read: the message says why (the caller adds file and fix)."""


def read_member(path: str | Path, zf: zipfile.ZipFile, info: zipfile.ZipInfo, *, limit: int = 1 << 31) -> bytes:
    """The uncompressed bytes of ``info``; ``limit`` caps the size a member may claim."""
    if info.file_size > limit:
        raise ArchiveError(f"member {info.filename} claims {info.file_size} bytes")
    if info.compress_type != ZSTD:
        try:
            return zf.read(info)
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
        data = zstandard.ZstdDecompressor().decompressobj().decompress(raw)
    except zstandard.ZstdError as exc:
        raise ArchiveError(f"member {info.filename}: corrupt zstd data ({exc})") from None
    if len(data) != info.file_size or zlib.crc32(data) != info.CRC:
        raise ArchiveError(f"member {info.filename}: size or CRC does not match the archive")
    return data
