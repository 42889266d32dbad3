"""Decompression and allocation bombs (issue 37, point 5): every container streams and stops at the stated import
limit (1/16 of the machine's memory, ``$BENCHLOUPE_MAX_IMPORT_BYTES``) before allocating what a file expands to or
claims, with one line, the database unchanged.

Each bomb class (tests/hostile.py ``import_bombs``) is built small with the limit lowered to 1 MB; one real
moderate bomb (a gzip'd long CSV expanding to 2 GB, as in the issue) runs in a process of its own whose address
space is capped below what the bomb expands to, which only a streaming reader survives; a one-row CSV with 10
million columns is refused at its real size.
"""

from __future__ import annotations

import os
import resource
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from tests.hostile import check_outcome, dump, import_bombs, run_cli

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 1_000_000


@pytest.fixture(scope="module")
def bombs(tmp_path_factory):
    pytest.importorskip("zstandard")
    pytest.importorskip("pyarrow")
    return import_bombs(tmp_path_factory.mktemp("bombs"), expand=3 * LIMIT)


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "w.db"
    (tmp_path / "seed.csv").write_text("model,item,correct\nm1,i1,1\n")
    assert run_cli(["import", "long", tmp_path / "seed.csv", "-b", "seed", "--db", path])[0] == 0
    return path


CASES = ["gzip long csv", "gzip of many members", "plain file past the limit", "deflate .eval member",
         "deflate .eval member lying about its size", "zstd .eval member", "zstd .eval member lying about its size",
         "zstd .eval members together past the limit", "parquet with one huge row group",
         "npz header claiming a huge array", "npz whose arrays pass the limit"]


@pytest.mark.parametrize("case", CASES)
def test_every_bomb_class_is_one_line_before_it_is_read(case, bombs, db, monkeypatch):
    monkeypatch.setenv("BENCHLOUPE_MAX_IMPORT_BYTES", str(LIMIT))
    fmt, path = bombs[case]
    before = dump(db)
    rc, out, err = run_cli(["import", fmt, path, "--db", db])
    check_outcome(case, rc, out, err, before, dump(db), expect="fail")
    if "lying" in case:  # never past its claim: the size or CRC does not match the archive
        assert "does not match" in err or "expands past" in err or "CRC" in err, err
    elif "npz header" in case:
        assert "the header is implausible" in err and "10000000" not in err.split("holds")[1], err
    else:
        assert "past the import limit of 976.6 KiB" in err and "BENCHLOUPE_MAX_IMPORT_BYTES" in err, err


def test_under_the_limit_the_same_containers_import(tmp_path, db, monkeypatch):
    """The limit refuses bombs, not files: the same shapes a little under the limit import."""
    small = import_bombs(tmp_path / "small", expand=LIMIT // 4)
    monkeypatch.setenv("BENCHLOUPE_MAX_IMPORT_BYTES", str(LIMIT))
    for case in ("deflate .eval member", "zstd .eval member"):
        fmt, path = small[case]
        rc, out, err = run_cli(["import", fmt, path, "--db", db])
        check_outcome(case, rc, out, err, expect="ok")


def test_a_wide_csv_of_ten_million_columns_is_refused_at_its_real_size(tmp_path, db):
    path = tmp_path / "wide.csv"
    path.write_bytes(b"model" + b",q" * 10_000_000 + b"\nm1" + b",1" * 10_000_000 + b"\n")
    before = dump(db)
    rc, out, err = run_cli(["import", "wide", path, "--db", db])
    check_outcome("10M columns", rc, out, err, before, dump(db), expect="fail")
    assert "10,000,001 columns, more than the 1,000,000" in err and "import long" in err


def _gzip_of_zeros(path: Path, head: bytes, mebibytes: int) -> None:
    """One gzip member holding *head* then *mebibytes* MiB of "0": a valid file (header, deflate stream, CRC-32
    and size trailer) as ``gzip`` writes it, built in half a second. Compressing the 2 GiB took 6 s of CPU: here
    each MiB is deflated once after a full flush (the compressor's history reset), so every MiB's compressed
    block is the same bytes, written *mebibytes* times."""
    zeros = b"0" * (1 << 20)
    z = zlib.compressobj(9, zlib.DEFLATED, -15)  # raw deflate: the gzip header and trailer are written here
    first = z.compress(head) + z.flush(zlib.Z_FULL_FLUSH)
    block = z.compress(zeros) + z.flush(zlib.Z_FULL_FLUSH)
    assert z.compress(zeros) + z.flush(zlib.Z_FULL_FLUSH) == block  # after a full flush, the same bytes again
    crc = zlib.crc32(head)
    for _ in range(mebibytes):
        crc = zlib.crc32(zeros, crc)
    with open(path, "wb") as fh:
        fh.write(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff")  # gzip, deflate, no name, no mtime, best, Unix
        fh.write(first)
        for _ in range(mebibytes):
            fh.write(block)
        fh.write(z.flush())
        fh.write(struct.pack("<II", crc, (len(head) + (mebibytes << 20)) & 0xFFFFFFFF))


def test_the_cheap_gzip_of_zeros_is_what_gzip_reads(tmp_path):
    """The bomb's builder makes a file the standard library reads back whole, CRC and size checked."""
    import gzip

    path = tmp_path / "z.csv.gz"
    _gzip_of_zeros(path, b"model,item,correct\n", 3)
    assert gzip.decompress(path.read_bytes()) == b"model,item,correct\n" + b"0" * (3 << 20)


def _capped(limit_bytes: int):
    def apply():
        resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, limit_bytes))
    return apply


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(resource, "RLIMIT_AS"), reason="needs an address-space limit (resource.RLIMIT_AS)")
def test_a_real_two_gigabyte_gzip_bomb_streams_within_a_memory_cap(tmp_path):
    """2 GiB of a long CSV's zeros in a 2 MB gzip; the process may map 1.5 GiB in all (interpreter, numpy and
    pandas included), so reading the bomb whole (gzip.decompress, as before) runs out of memory; streamed, it
    is refused at the 256 MiB limit with the limit's line."""
    path = tmp_path / "bomb.csv.gz"
    _gzip_of_zeros(path, b"model,item,correct\nm1,i1,1\n", 2048)
    assert path.stat().st_size < 8 << 20
    env = {**os.environ, "BENCHLOUPE_MAX_IMPORT_BYTES": str(256 << 20), "PYTHONPATH": str(ROOT),
           "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-m", "benchloupe", "import", "long", str(path), "--db",
                           str(tmp_path / "w.db")], capture_output=True, text=True, env=env, timeout=300,
                          preexec_fn=_capped(1536 << 20))
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.count("\n") == 1 and "past the import limit of 256.0 MiB" in proc.stderr, proc.stderr
    assert "memory" not in proc.stderr.split("past the import limit")[0]  # not "ran out of memory"
