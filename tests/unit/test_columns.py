"""benchloupe.columns: the pandas-free table the primary audit builds and the store writes (issue 13)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from benchloupe.columns import Columns


def _sample() -> Columns:
    return Columns({"fold": 0, "name": ["a", None, "c"], "x": np.array([0.5, np.nan, np.inf]),
                    "n": np.array([1, 2, 3]), "ok": np.array([True, False, True]),
                    "payload": [{"top": [1, 2]}, {"top": []}, {"top": [3]}]})


def test_scalars_broadcast_and_columns_keep_their_order():
    t = _sample()
    assert len(t) == 3 and t.columns == ["fold", "name", "x", "n", "ok", "payload"]
    assert t["fold"].tolist() == [0, 0, 0] and t["name"].dtype == object
    assert t["payload"][0] == {"top": [1, 2]}  # a list of dicts stays one object per row, never a 2-D array


def test_lists_of_equal_length_lists_stay_one_object_per_row():
    t = Columns({"items": [[1, 2], [3, 4]], "k": [1, 2]})
    assert t["items"].shape == (2,) and t["items"][1] == [3, 4]


def test_columns_of_different_lengths_are_refused():
    with pytest.raises(ValueError, match="different lengths"):
        Columns({"a": [1, 2], "b": [1, 2, 3]})
    with pytest.raises(ValueError, match="does not fit"):
        _sample().assign(z=[1, 2])


def test_take_mask_and_order_and_concat():
    t = _sample()
    assert t.take(np.array([True, False, True]))["n"].tolist() == [1, 3]
    assert t.take(np.array([2, 0]))["name"].tolist() == ["c", "a"]
    both = Columns.concat([t, t.take(np.array([1]))])
    assert len(both) == 4 and both["n"].tolist() == [1, 2, 3, 2] and both["x"].dtype == float
    empty = Columns({c: [] for c in t.columns})  # an empty part (a fold without reversals) keeps the dtypes
    assert Columns.concat([empty, t])["x"].dtype == float
    assert Columns.concat([], ["a", "b"]).columns == ["a", "b"]


def test_to_split_is_json_with_nan_and_inf_as_null_and_python_values():
    text = json.dumps(_sample().to_split(), allow_nan=False)  # allow_nan=False: a NaN left in would raise
    obj = json.loads(text)
    assert obj["columns"][:3] == ["fold", "name", "x"]
    assert obj["data"][1][:5] == [0, None, None, 2, False] and obj["data"][2][2] is None


def test_frame_equals_the_dataframe_built_from_the_same_values():
    t = Columns({"fold": 1, "model": ["m1", "m2"], "family": ["llama", None], "score": np.array([0.25, 0.5]),
                 "kept": np.array([True, False])})
    expected = pd.DataFrame({"fold": 1, "model": ["m1", "m2"], "family": ["llama", None],
                             "score": [0.25, 0.5], "kept": [True, False]})
    pd.testing.assert_frame_equal(t.frame(), expected)


def test_records_and_rows_give_python_values():
    rec = _sample().records()[0]
    assert rec["fold"] == 0 and type(rec["n"]) is int and type(rec["ok"]) is bool and rec["payload"] == {"top": [1, 2]}
    assert list(_sample().rows(["n", "name"])) == [(1, "a"), (2, None), (3, "c")]
