"""Batch triage and jumps from a flag (issue 11, "what a curator expects" 2 and 4): space marks flags and one key
decides them all in one transaction, "every open flag of this model/item" after a confirmation with the count,
one z undoes a batch; from a flag to its item (panel and Items) and its model (Models), the curve marking the
flagged model. The demo workspace with flags written like the analyses write them; keys only."""

from __future__ import annotations

import json

import pytest

from benchloupe.tui.app import BenchloupeApp
from tests.tui.conftest import idle, loaded, wait_until

pytestmark = pytest.mark.anyio
SIZE = (80, 24)


def _flags(db, kind: str):
    from benchloupe.store import curation
    from benchloupe.store.db import connect

    conn = connect(db)
    try:
        return curation.flags(conn, kind=kind).set_index("id"), curation.audit_log(conn)
    finally:
        conn.close()


def _more_flags_on_one_model(db) -> tuple[int, str, list[int]]:
    """Three more anomalies of the latest anomaly run on the first flagged model (other items)."""
    from benchloupe.store.db import connect

    conn = connect(db)
    try:
        run, bid, model = conn.execute("SELECT run_id, benchmark_id, model_id FROM flags WHERE kind = 'anomaly'"
                                       " ORDER BY score LIMIT 1").fetchone()
        items = [r[0] for r in conn.execute("SELECT id FROM items WHERE benchmark_id = ? AND id NOT IN (SELECT"
                                            " item_id FROM flags WHERE item_id IS NOT NULL) LIMIT 3", (bid,))]
        ids = [conn.execute("INSERT INTO flags (run_id, kind, benchmark_id, item_id, model_id, score, payload)"
                            " VALUES (?, 'anomaly', ?, ?, ?, ?, ?)",
                            (run, bid, it, model, -1.0 - k, json.dumps({"expected_p": 0.8, "observed": 0}))).lastrowid
               for k, it in enumerate(items)]
        conn.commit()
        name = conn.execute("SELECT name FROM models WHERE id = ?", (model,)).fetchone()[0]
        return int(model), name, ids
    finally:
        conn.close()


def _static_fit(db) -> None:
    """A static calibration of demo-math saved like the job saves one (abilities and item parameters)."""
    import numpy as np
    import pandas as pd

    from benchloupe.store import read, runs
    from benchloupe.store.db import connect

    conn = connect(db)
    try:
        bid = read.benchmark_id(conn, "demo-math")
        models, items = read.models(conn, "demo-math"), read.items(conn, "demo-math")
        rid = runs.create_run(conn, "static", bid, config={}, seed=0, code_version="test", input_fingerprint="t")
        runs.save_outputs(conn, rid, runs.RunOutputs(
            models=pd.DataFrame({"model_id": models["id"], "theta": np.linspace(-2, 2, len(models))}),
            items=pd.DataFrame({"item_id": items["id"], "difficulty": 0.1, "sharpness": 1.2})))
    finally:
        conn.close()


def _status(screen) -> str:
    return str(screen.query_one("#queue-status").render())


def _detail(screen) -> str:
    return str(screen.query_one("#queue-detail").render())


@pytest.mark.parametrize("key, mode, kind", [("5", "anomalies", "anomaly"), ("6", "reversals", "reversal")])
async def test_mark_then_decide_all_marked_and_one_undo(flagged_db, key, mode, kind):
    app = BenchloupeApp(flagged_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press(key)
        await wait_until(pilot, loaded(app, mode), what=mode)
        screen = app.screen
        ids = [int(screen.flags["id"].iloc[screen.view[i]]) for i in range(2)]
        await pilot.press("space")  # marked, and the queue moves on
        assert screen.current_id() == ids[1]
        await pilot.press("k")
        assert "● marked" in _detail(screen)
        await pilot.press("space")  # again: unmarked
        assert "marked" not in _status(screen) and "● marked" not in _detail(screen)
        await pilot.press("space", "space")
        assert "2 marked" in _status(screen)
        await pilot.press("d")  # both dismissed at once
        assert set(screen.flags.set_index("id").loc[ids, "state"]) == {"dismissed"}
        assert f"2 marked {screen.PLURAL} dismissed" in _status(screen)
        assert "2 marked:" not in _status(screen)
        await wait_until(pilot, lambda: not screen.saving and idle(app)(), what="batch write")
        flags, log = _flags(flagged_db, kind)
        assert set(flags.loc[ids, "state"]) == {"dismissed"}
        batch = log[log["action"] == "flag:dismissed"]
        assert sorted(batch["entity_id"]) == sorted(ids)
        assert all(json.loads(d)["batch"] == 2 for d in batch["detail"])
        await pilot.press("z")  # one undo: the whole batch
        assert set(screen.flags.set_index("id").loc[ids, "state"]) == {"open"}
        assert f"2 {screen.PLURAL} back" in _status(screen)
        await wait_until(pilot, lambda: not screen.saving and idle(app)(), what="undo write")
    flags, log = _flags(flagged_db, kind)
    assert set(flags.loc[ids, "state"]) == {"open"}
    assert sorted(log.loc[log["action"] == "flag:undo", "entity_id"]) == sorted(ids)


async def test_decide_every_open_flag_of_a_model_after_the_count(flagged_db):
    from benchloupe.tui.widgets.dialogs import ChoiceDialog

    model, name, extra = _more_flags_on_one_model(flagged_db)
    app = BenchloupeApp(flagged_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("5")
        await wait_until(pilot, loaded(app, "anomalies"), what="anomalies")
        screen = app.screen
        mine = [int(i) for i in screen.flags.loc[screen.flags["model_id"] == model, "id"]]
        assert len(mine) == 4
        while int(screen.flags["model_id"].iloc[screen.view[screen.pos]]) != model:
            await pilot.press("j")
        await pilot.press("c")  # one of them decided already: M takes the three still open
        while int(screen.flags["model_id"].iloc[screen.view[screen.pos]]) != model:
            await pilot.press("j")
        await pilot.press("M")
        await wait_until(pilot, lambda: isinstance(app.screen, ChoiceDialog), what="confirmation")
        assert f"Decide the 3 open anomalies of model {name}?" in str(app.screen.query_one("Label").render())
        await pilot.press("escape")  # nothing done
        await pilot.pause(0.1)
        assert app.screen is screen and (screen.flags.set_index("id").loc[mine, "state"] == "open").sum() == 3
        await pilot.press("M")
        await wait_until(pilot, lambda: isinstance(app.screen, ChoiceDialog), what="asked again")
        await pilot.press("u")
        await wait_until(pilot, lambda: app.screen is screen, what="dialog closed")
        states = screen.flags.set_index("id").loc[mine, "state"]
        assert sorted(states) == ["confirmed", "unsure", "unsure", "unsure"]
        await wait_until(pilot, lambda: not screen.saving and idle(app)(), what="batch write")
        assert sorted(_flags(flagged_db, "anomaly")[0].loc[mine, "state"]) == sorted(states)
        await pilot.press("z")  # the batch back to open; the single confirm stays
        await wait_until(pilot, lambda: not screen.saving and idle(app)(), what="undo write")
        await pilot.press("I")  # every open flag of this item: just this one (the others are on other items)
        await wait_until(pilot, lambda: isinstance(app.screen, ChoiceDialog), what="item confirmation")
        assert "Decide the 1 open anomaly of item" in str(app.screen.query_one("Label").render())
        await pilot.press("escape")
    assert sorted(_flags(flagged_db, "anomaly")[0].loc[mine, "state"]) == ["confirmed", "open", "open", "open"]


async def test_jumps_from_an_anomaly_to_its_item_and_model(flagged_db):
    _static_fit(flagged_db)
    app = BenchloupeApp(flagged_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("5")
        await wait_until(pilot, loaded(app, "anomalies"), what="anomalies")
        queue = app.screen
        await pilot.press("j", "j")
        row = queue.flags.iloc[queue.view[queue.pos]]
        item_id, model_id, model = int(row["item_id"]), int(row["model_id"]), str(row["model"])
        await pilot.press("enter")  # the item panel, its curve marking the flagged model
        await wait_until(pilot, lambda: type(app.screen).__name__ == "ItemPanel" and idle(app)()
                         and app.screen.detail is not None, what="panel")
        assert app.screen.item_id == item_id
        plot = str(app.screen.query_one("#item-plot").render())
        assert f"{model} (the flagged model)" in plot and "◆" in plot
        await pilot.press("escape")
        assert app.screen is queue
        await pilot.press("m")  # the model selected on Models
        await wait_until(pilot, lambda: getattr(app.screen, "MODE", "") == "models" and idle(app)()
                         and app.screen.query_one("FrameTable").current_value("id") == model_id, what="model")
        assert str(app.screen.query_one("#models-detail").render()).startswith(model)
        await pilot.press("5")
        await wait_until(pilot, loaded(app, "anomalies"), what="back to the queue")
        assert app.screen.current_id() == int(row["id"])
        await pilot.press("i")  # the item selected on Items
        await wait_until(pilot, lambda: getattr(app.screen, "MODE", "") == "items" and idle(app)()
                         and app.screen.query_one("FrameTable").current_value("id") == item_id, what="item")
        await pilot.press("enter")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "ItemPanel" and idle(app)(), what="its panel")
        assert app.screen.item_id == item_id


async def test_jump_from_a_reversal_to_its_driving_item_on_items(flagged_db):
    app = BenchloupeApp(flagged_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("6")
        await wait_until(pilot, loaded(app, "reversals"), what="reversals")
        row = app.screen.flags.iloc[app.screen.view[app.screen.pos]]
        key = row["payload"]["top_items"][0]["item"]
        await pilot.press("i")
        await wait_until(pilot, lambda: getattr(app.screen, "MODE", "") == "items" and idle(app)()
                         and app.screen.query_one("FrameTable").current_value("key") == key, what="driving item")


async def test_gaps_marked_then_decided_together_and_undone_together(flagged_db):
    app = BenchloupeApp(flagged_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("7")
        await wait_until(pilot, loaded(app, "coverage"), what="coverage")
        table = app.screen.query_one("FrameTable")
        ids = [int(table.frame["flag_id"].iloc[table.view[i]]) for i in range(2)]
        await pilot.press("space", "space")  # marked (● on the row), the cursor moving down
        assert all(table._lines[table.view[i]].startswith("●") for i in range(2))
        await pilot.press("d")
        assert all("dismissed" in table._lines[table.view[i]] and "●" not in table._lines[table.view[i]]
                   for i in range(2))
        await wait_until(pilot, loaded(app, "coverage"), what="batch written")
        flags, log = _flags(flagged_db, "gap")
        assert set(flags.loc[ids, "state"]) == {"dismissed"}
        assert all(json.loads(d)["batch"] == 2 for d in log.loc[log["action"] == "flag:dismissed", "detail"])
        await pilot.press("z")
        await wait_until(pilot, lambda: loaded(app, "coverage")() and not any(
            "dismissed" in table._lines[table.view[i]] for i in range(2)), what="undo written")
    flags, log = _flags(flagged_db, "gap")
    assert set(flags.loc[ids, "state"]) == {"open"}
    assert sorted(log.loc[log["action"] == "flag:undo", "entity_id"]) == sorted(ids)
