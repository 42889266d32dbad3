"""cli/output.json_text: the same text as ``json.dumps(indent=2)`` for every ordinary structure, and a long list
(an anomalies run's 210,000 unexpected cells, issue 26) one compact element per line through the C encoder: 9.4 s
of a 24 s ``anomalies --json`` at 5,000 x 14,000 was the pure-Python indenting encoder and the value walk."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd

from benchloupe.cli import output
from benchloupe.cli.output import json_text, to_jsonable


def _value(rng, depth=0):
    kind = rng.integers(0, 9 if depth < 4 else 5)
    if kind == 0:
        return None
    if kind == 1:
        return bool(rng.integers(0, 2))
    if kind == 2:
        return int(rng.integers(-10**6, 10**6))
    if kind == 3:
        return float(rng.normal()) * 10 ** int(rng.integers(-5, 5))
    if kind == 4:
        return "".join(rng.choice(list("abc é\"\\\n\t{}[]:,"), int(rng.integers(0, 6))))
    if kind in (5, 6):
        return [_value(rng, depth + 1) for _ in range(int(rng.integers(0, 4)))]
    return {f"k{j}{rng.integers(0, 3)}": _value(rng, depth + 1) for j in range(int(rng.integers(0, 4)))}


def test_ordinary_structures_print_as_json_dumps_with_indent_2():
    rng = np.random.default_rng(3)
    for case in range(300):
        v = _value(rng)
        want = json.dumps(v, indent=2, ensure_ascii=False)
        assert json_text(v) == output.safe_json(want), case


def test_a_long_list_prints_one_compact_element_per_line_and_reads_back():
    cells = [{"model": f"m{i}", "item": f"q{i}", "residual": -3.5 - i / 7, "payload": {"observed": i % 2}}
             for i in range(output.LONG_LIST + 5)]
    value = {"run": 7, "metrics": {"candidates": len(cells)}, "unexpected_cells": cells}
    text = json_text(value)
    assert json.loads(text) == value
    lines = text.splitlines()
    first = lines.index('  "unexpected_cells": [')
    assert lines[first + 1] == "    " + json.dumps(cells[0], ensure_ascii=False) + ","
    assert lines[first + len(cells)] == "    " + json.dumps(cells[-1], ensure_ascii=False)
    assert text.startswith('{\n  "run": 7,\n  "metrics": {\n    "candidates": ')


def test_long_lists_of_rows_print_each_row_as_json_dumps_does():
    """A long list of same-key rows is written a column at a time (issue 26): every line is the row's
    ``json.dumps(ensure_ascii=False)``, whatever the values (mixed types in a column, nested values, names that
    repeat, quotes, control characters, a percent sign in a key); rows with other keys or key orders, and lists
    of non-dicts, take the row-by-row path with the same text."""
    rng = np.random.default_rng(9)
    names = ["m\u00e9", 'q"1', "%s", "a\nb", "\u2028x"]

    def row(i, keys=("model", "it%em", "residual", "extra", "observed")):
        vals = [names[i % len(names)], str(rng.choice(names)), float(rng.normal() * 10 ** int(rng.integers(-8, 8))),
                _value(rng) if i % 3 else 1.5, [0.0, -0.0, 1.0, 0.25][i % 4]]  # a repeated float column, both zeros
        return dict(zip(keys, vals))

    n = output.LONG_LIST + 3
    cases = {"same keys": [row(i) for i in range(n)],
             "other order": [row(i) for i in range(n - 1)] + [row(0, ("it%em", "model", "residual", "extra", "observed"))],
             "other keys": [row(i) for i in range(n - 1)] + [{"model": "x"}],
             "not dicts": [float(rng.normal()) for _ in range(n)] + ["x", None, True, 3]}
    for label, rows in cases.items():
        value = to_jsonable({"cells": rows})
        want = '{\n  "cells": [\n' + ",\n".join("    " + json.dumps(r, ensure_ascii=False) for r in value["cells"])
        assert json_text(value) == output.safe_json(want + "\n  ]\n}"), label
    assert output._rows_compact(to_jsonable(cases["same keys"]), "") is not None
    assert output._rows_compact(to_jsonable(cases["other order"]), "") is None


def test_to_jsonable_keeps_the_conversions():
    frame = pd.DataFrame({"a": [1, 2], "b": [0.5, float("nan")]})
    value = {1: np.int64(3), "f": np.float32(0.25), "inf": float("inf"), "b": np.bool_(True), "t": (1, 2),
             "arr": np.array([1.5, np.nan]), "df": frame, "s": "x", "n": None, "bool": False}
    got = to_jsonable(value)
    assert got == {"1": 3, "f": 0.25, "inf": None, "b": True, "t": [1, 2], "arr": [1.5, None],
                   "df": [{"a": 1, "b": 0.5}, {"a": 2, "b": None}], "s": "x", "n": None, "bool": False}
    assert type(got["1"]) is int and type(got["b"]) is bool and type(got["bool"]) is bool
    assert not any(isinstance(v, float) and not math.isfinite(v) for v in got["arr"])


def test_columns_print_as_the_list_of_their_rows():
    """A Columns value (the job's unexpected cells, issue 26) prints as the list of its rows' dicts, values as
    to_jsonable makes them (NaN and infinities null, numpy scalars unwrapped), short or long, nested or flat,
    indented or not: the same text as that list's."""
    from benchloupe.columns import Columns

    rng = np.random.default_rng(11)
    names = np.array(["m\u00e9", 'q"1', "%s", "a\nb", "\u2028x", "\x1b[0m"], dtype=object)
    for n in (0, 1, 7, output.LONG_LIST, output.LONG_LIST + 1, 3 * output.LONG_LIST):
        f = rng.normal(size=n) * 10.0 ** rng.integers(-8, 8, n)
        f[rng.random(n) < 0.05] = np.nan
        f[rng.random(n) < 0.02] = np.inf
        f[rng.random(n) < 0.05] = -0.0
        cols = Columns({"model": names[rng.integers(0, len(names), n)], "it%em": rng.integers(-5, 5, n),
                        "residual": f, "observed": rng.integers(0, 2, n).astype(float),
                        "f32": rng.normal(size=n).astype(np.float32), "ok": rng.random(n) < 0.5,
                        "mixed": np.array([None, 1.5, "s", float("nan"), np.int64(4), [1, {"a": 2}]] * n,
                                          dtype=object)[:n]})
        rows = to_jsonable([dict(zip(cols.columns, r)) for r in cols.rows()])
        for payload, want in (({"run_id": 3, "cells": cols, "after": [1]}, {"run_id": 3, "cells": rows, "after": [1]}),
                              (cols, rows)):
            assert json_text(payload) == json_text(want), n
            assert json_text(payload, indent=None) == json_text(want, indent=None), n
            assert json.loads(json_text(payload)) == json.loads(json_text(want))


def test_json_text_needs_no_terminal_escaping(capsys):
    """print_json writes json_text's text without the terminal wrapper's visible() pass (issue 26: a second scan
    of 33 MB): that text holds no character visible() would escape, for any string, so the bytes are the same."""
    from benchloupe.textsafe import visible

    rng = np.random.default_rng(5)
    chars = [chr(c) for c in list(range(0, 0x20)) + list(range(0x7f, 0xa0))] + list(
        "\u2028\u2029\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069a\u00e9\"\\")
    for _ in range(200):
        s = "".join(rng.choice(chars, int(rng.integers(0, 12))))
        value = {s: [s, {s: s}], "cells": [{"m": s, "x": 1.5}] * (output.LONG_LIST + 1)}
        text = json_text(value)
        assert visible(text, keep_layout=True) == text and json.loads(text) == value
        with output.terminal_safe():
            output.print_json(value)
        assert capsys.readouterr().out == text + "\n"
