"""Malformed input -> ImportFormatError with one line naming file, line/column, what and the fix (issue 2,
Reliability). Each case is a small file written into tmp_path."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from benchloupe.store.importers.base import ImportFormatError
from benchloupe.store.importers.detect import detect_format, parse_file
from benchloupe.store.importers.itemmeta import parse_item_metadata
from benchloupe.store.importers.long import parse_long
from benchloupe.store.importers.neartie_npz import parse_neartie_npz
from benchloupe.store.importers.wide import parse_wide


def _write(tmp_path, name, text: str | bytes):
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    return path


def _error(fn, path, **kw) -> str:
    with pytest.raises(ImportFormatError) as info:
        fn(path, **kw)
    msg = str(info.value)
    assert "\n" not in msg, msg
    assert msg.startswith(str(path)), msg
    assert "; " in msg, msg  # "<what>; <fix>"
    return msg


def test_bad_header_blank_item_name(tmp_path):
    path = _write(tmp_path, "w.csv", "model,a,,c\nm1,1,0,1\n")
    msg = _error(parse_wide, path)
    assert "line 1, column 3" in msg and "blank column name" in msg


def test_bad_header_row_with_extra_fields(tmp_path):
    path = _write(tmp_path, "w.csv", "model,a,b\nm1,1,0\nm2,1,0,1\n")
    msg = _error(parse_wide, path)
    assert "line 3" in msg and "malformed CSV" in msg


def test_non_binary_value_in_wide_names_line_and_column(tmp_path):
    path = _write(tmp_path, "w.csv", "model,a,b,c\nm1,1,0,1\nm2,0,2,1\n")
    msg = _error(parse_wide, path)
    assert "line 3, column 3 (b)" in msg and "non-binary value 2" in msg


def test_word_in_wide_found_by_slow_path(tmp_path):
    path = _write(tmp_path, "w.csv", "model,a,b\nm1,1,0\nm2,0,yes\n")
    msg = _error(parse_wide, path)
    assert "line 3, column 3 (b)" in msg and "'yes'" in msg


def test_nan_literal_in_wide_is_rejected(tmp_path):
    path = _write(tmp_path, "w.csv", "model,a,b\nm1,1,NaN\nm2,0,1\n")
    msg = _error(parse_wide, path)
    assert "line 2, column 3 (b)" in msg and "must be empty" in msg


def test_nan_in_long_correct(tmp_path):
    path = _write(tmp_path, "l.csv", "model,item,correct\nm1,a,1\nm1,b,nan\n")
    msg = _error(parse_long, path)
    assert "line 3, column 3 (correct)" in msg and "'nan' is not a result" in msg  # the word, as everywhere (issue 24)


def test_non_binary_in_long(tmp_path):
    path = _write(tmp_path, "l.csv", "model,item,correct\nm1,a,0.5\n")
    assert "non-binary value '0.5'" in _error(parse_long, path)


def test_duplicate_model_row(tmp_path):
    path = _write(tmp_path, "w.csv", "model,a,b\nm1,1,0\nm2,0,1\nm1,1,1\n")
    msg = _error(parse_wide, path)
    assert "line 4" in msg and "duplicate model row 'm1'" in msg and "line 2" in msg


def test_duplicate_item_column(tmp_path):
    path = _write(tmp_path, "w.csv", "model,a,b,a\nm1,1,0,1\n")
    msg = _error(parse_wide, path)
    assert "line 1, column 4" in msg and "duplicate column 'a'" in msg


def test_duplicate_model_item_pair_in_long(tmp_path):
    path = _write(tmp_path, "l.csv", "model,item,correct\nm1,a,1\nm2,a,0\nm1,a,0\n")
    msg = _error(parse_long, path)
    assert "line 4" in msg and "duplicate result" in msg and "first at line 2" in msg


def test_duplicate_item_key_in_metadata(tmp_path):
    path = _write(tmp_path, "i.csv", "key,text\nq1,x\nq1,y\n")
    assert "duplicate item key 'q1'" in _error(parse_item_metadata, path)


def test_unknown_model_column(tmp_path):
    path = _write(tmp_path, "l.csv", "respondent,item,correct\nm1,a,1\n")
    msg = _error(parse_long, path)
    assert "no column 'model'" in msg and "--model-col" in msg and "respondent" in msg
    msg = _error(parse_wide, path, model_col="who")
    assert "no model column 'who'" in msg


def test_truncated_gzip(tmp_path):
    blob = gzip.compress(b"model,a,b\n" + b"m,1,0\n" * 2000)
    path = _write(tmp_path, "w.csv.gz", blob[: len(blob) // 2])
    assert "truncated or corrupt gzip" in _error(parse_wide, path)
    assert "truncated or corrupt gzip" in _error(parse_long, path)


def test_wrong_encoding(tmp_path):
    path = _write(tmp_path, "i.csv", "key,text\nq1,ok\nq2,caf\xe9 cr\xe8me\n".encode("latin-1"))
    msg = _error(parse_item_metadata, path)
    assert "line 3, column 7" in msg and "not UTF-8" in msg and "iconv" in msg


# mtime=0: the same bytes, so the same test id, in every process (pytest-xdist workers must collect alike)
@pytest.mark.parametrize("content", [b"", b"\n\n", gzip.compress(b"", mtime=0)], ids=["empty", "blank-lines", "empty-gzip"])
def test_empty_file(tmp_path, content):
    path = _write(tmp_path, "w.csv", content)
    assert "empty" in _error(parse_wide, path)
    assert "empty" in _error(parse_long, path)


def test_header_only(tmp_path):
    path = _write(tmp_path, "w.csv", "model,a,b\n")
    assert "no data rows" in _error(parse_wide, path)


def test_missing_file(tmp_path):
    assert "no such file" in _error(parse_wide, tmp_path / "nope.csv")


def test_jsonl_line_that_is_not_json(tmp_path):
    path = _write(tmp_path, "l.jsonl", '{"model": "m", "item": "a", "correct": 1}\n{"model": "m", item\n')
    assert "line 2, column" in _error(parse_long, path)


def test_npz_non_binary_and_duplicates(tmp_path):
    base = dict(
        model_id=np.array(["a", "b"]),
        family=np.array(["f", "g"]),
        owner=np.array(["o", "p"]),
        item_group=np.array(["g1", "g1", "g2"]),
    )
    path = tmp_path / "x.npz"
    np.savez(path, responses=np.array([[0, 1], [1, 2], [0, 0]]), **base)
    assert "responses[1, 1]" in _error(parse_neartie_npz, path)
    np.savez(path, responses=np.zeros((3, 2)), **{**base, "model_id": np.array(["a", "a"])})
    assert "duplicate model_id 'a'" in _error(parse_neartie_npz, path)
    np.savez(path, responses=np.zeros((3, 2)), **{**base, "owner": np.array(["o", " "])})
    assert "blank owner" in _error(parse_neartie_npz, path)


def test_undetectable_format(tmp_path):
    path = _write(tmp_path, "x.csv", "only\n1\n")
    with pytest.raises(ImportFormatError, match="cannot tell the format"):
        detect_format(path)


def test_dualeval_without_usable_rows(tmp_path):
    path = _write(
        tmp_path, "d.jsonl", json.dumps({"model_label": "m", "dataset": "d", "sample_index": 0}) + "\n"
    )
    with pytest.raises(ImportFormatError, match="no usable static rows"):
        parse_file(path, "dualeval")


def test_line_numbers_count_quoted_newlines_and_blank_lines(tmp_path):
    path = _write(tmp_path, "i.csv", 'key,text,chance\nq1,"two\nlines",0.25\n\nq2,x,2\n')
    msg = _error(parse_item_metadata, path)
    assert "line 5, column 3 (chance)" in msg
