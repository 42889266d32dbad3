"""Control characters from data are shown escaped on every screen (issue 21 item 10): Rich's ``Text`` drops
BEL, BS, VT, FF and CR before our escaping sees them, so "good\\rEVIL" showed as ``goodEVIL``, "abc\\b\\b\\bXYZ" as
``abcXYZ`` and the tab line lost the ``\\x07`` of a benchmark name. The real app, keys only, over a benchmark
whose name, model names, item keys and texts hold them: on every screen (tables, panels, status, tab and
title lines, the picker, the help) their escaped form is drawn and their stripped form never is."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from benchloupe.store.db import connect
from benchloupe.tui.app import BenchloupeApp
from tests.tui.conftest import add_flags, loaded, wait_until

pytestmark = pytest.mark.anyio
BENCH = "bell\x07bench"
MODELS = ["good\rEVIL", "abc\b\b\bXYZ", "vt\x0bff\x0cend"] + [f"lab/model-{k}" for k in range(9)]
# what Rich's stripping made of them (must never be drawn) and what the CLI prints (must be drawn somewhere)
STRIPPED = ["bellbench", "goodEVIL", "abcXYZ", "vtffend", "vt ff end", "key1", "key 1", "then overwritten"]
ESCAPED = {"bell\\x07bench", "good\\x0dEVIL", "abc\\x08\\x08\\x08XYZ", "vt\\x0bff\\x0cend"}


def _hostile(db) -> None:
    from benchloupe.engine.joint import JointConfig
    from benchloupe.jobs import ANALYSES
    from benchloupe.store.importers.base import ParsedImport
    from benchloupe.store.writer import write_import

    rng = np.random.default_rng(1)
    n = 40
    keys = ["key\r1"] + [f"q{j}" for j in range(1, n)]
    texts = ["text then \roverwritten"] + [f"question {j}" for j in range(1, n)]
    items = pd.DataFrame({"key": keys, "text": texts, "answer": ["a\x07"] + ["1"] * (n - 1), "group": "g"})
    theta, b = rng.normal(size=len(MODELS)), rng.normal(size=n)
    correct = (rng.random((len(MODELS), n)) < 1 / (1 + np.exp(-(theta[:, None] - b)))).astype(np.int8)
    conn = connect(db)
    try:
        write_import(conn, ParsedImport("bellbench", "static", items, pd.DataFrame({"name": MODELS}), correct=correct,
                                        source="test"), fmt="test")
    finally:
        conn.close()
    ANALYSES["static"].run(db, "bellbench", JointConfig(mode="static"), heldout=False)
    add_flags(db, "bellbench", n_anomalies=12, n_reversals=4)
    # imports refuse a control character in a benchmark name now (issue 37 #11); a database from before the
    # rule can hold one, and every screen must still show it escaped
    conn = connect(db)
    try:
        conn.execute("UPDATE benchmarks SET name = ? WHERE name = 'bellbench'", (BENCH,))
        conn.commit()
    finally:
        conn.close()


def _lines(app) -> list[str]:
    return [strip.text for strip in app.screen._compositor.render_strips()]


def _check(app, where: str, drawn: set[str]) -> None:
    text = "\n".join(_lines(app))
    for bad in STRIPPED:
        assert bad not in text, (where, bad, text)
    assert not any(ch in text for ch in "\x07\x08\x0b\x0c\r"), where
    assert "bell\\x07bench" in text, (where, "the tab line")
    drawn |= {e for e in ESCAPED if e in text}


async def test_control_characters_are_escaped_on_every_screen(tmp_path):
    db = tmp_path / "ctrl.db"
    connect(db).close()
    _hostile(db)
    drawn: set[str] = set()
    app = BenchloupeApp(db, benchmark=BENCH)
    async with app.run_test(size=(160, 48)) as pilot:
        for key, mode in (("1", "benchmarks"), ("2", "items"), ("3", "models"), ("4", "runs"),
                          ("5", "anomalies"), ("6", "reversals"), ("7", "coverage"), ("8", "benchfill")):
            await pilot.press(key)
            await wait_until(pilot, loaded(app, mode), what=mode)
            await pilot.pause()
            _check(app, mode, drawn)
            if mode == "items":  # the hostile item first: its panel
                await pilot.press("enter")
                await wait_until(pilot, loaded(app, "items") and (lambda: type(app.screen).__name__ == "ItemPanel"
                                                                  and app.screen.detail is not None), what="panel")
                await pilot.pause()
                _check(app, "item panel", drawn)
                assert "key\\x0d1" in "\n".join(_lines(app)) and "\\x0doverwritten" in "\n".join(_lines(app))
                await pilot.press("escape")
            if mode == "models":
                for _ in range(len(MODELS)):  # each model's detail line under the table
                    _check(app, "models detail", drawn)
                    await pilot.press("j")
                    await pilot.pause()
        await pilot.press("B")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "BenchmarkPicker", what="picker")
        await pilot.pause(0.3)
        _check(app, "picker", drawn)
        await pilot.press("escape", "question_mark")
        await pilot.pause(0.3)
        _check(app, "help", drawn)
    assert drawn == ESCAPED, ESCAPED - drawn


def test_no_tui_module_builds_text_with_richs_own_class():
    """The class of defect 10: any ``rich.text.Text`` built from data drops BEL/BS/VT/FF/CR. Every TUI module
    builds its text with :class:`benchloupe.tui.widgets.safe.Text` (which escapes them first)."""
    import ast
    from pathlib import Path

    import benchloupe.tui

    root = Path(benchloupe.tui.__file__).parent
    offenders = []
    for path in sorted(root.rglob("*.py")):
        if path.name == "safe.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == "rich.text" and \
                    any(a.name == "Text" for a in node.names):
                offenders.append(str(path.relative_to(root)))
    assert not offenders, offenders


def test_the_safe_text_keeps_layout_and_escapes_the_rest():
    from benchloupe.tui.widgets.safe import Text

    t = Text("a\rb\tc\nd")
    t.append("\x07\x08", style="bold")
    assert t.plain == "a\\x0db\tc\nd\\x07\\x08"
    assert Text.assemble("x\x0c", ("y\x0b", "red")).plain == "x\\x0cy\\x0b"
