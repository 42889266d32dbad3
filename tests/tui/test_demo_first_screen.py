"""`make demo` shows its first screen before the showcase runs (issue 32 point 16).

``benchloupe demo --open`` on a terminal built the data, ran the seven showcase analyses and imported the late model
(half a minute and more on a loaded machine, a blank terminal but for progress lines) before the workbench opened.
Now it writes the data, opens the workbench, and the showcase runs are the workbench's first job: the Benchmarks
table is on screen while the job line shows them running, and they land in the same store as before (every run, then
the late model, held out of the clean fit)."""

from __future__ import annotations

import pytest

from tests.tmux_app import HAVE_TMUX, TmuxApp


@pytest.mark.skipif(not HAVE_TMUX, reason="tmux is not installed")
def test_the_first_screen_comes_before_the_showcase_runs(tmp_path):
    from benchloupe.engine.simulate import demo_workspace
    from benchloupe.jobs import demo_unfinished
    from benchloupe.store import read
    from benchloupe.store.db import connect

    db = tmp_path / "demo.db"
    with TmuxApp(db, "curator", size=(160, 48), home=tmp_path, command=("demo", "--open")) as app:
        app.wait_for("demo analyses · ", timeout=240)  # the job line: the showcase runs are going on ...
        screen = app.screen()
        assert "1 Bench" in screen and "demo-math" in screen and "demo-chem" in screen  # ... under the first screen
        assert demo_unfinished(db)  # the late model comes last
        app.wait_for("demo analyses: 7 showcase runs done, then the late model", timeout=480)
    assert not demo_unfinished(db)
    conn = connect(db, create=False)
    try:
        kinds = [r[0] for r in conn.execute("SELECT kind FROM runs WHERE status = 'done' ORDER BY id")]
        late = demo_workspace().late.name
        assert late in set(read.models(conn, "demo-math")["name"])
    finally:
        conn.close()
    assert kinds == ["static", "joint", "anomalies", "anomalies", "coverage", "coverage", "neartie"]


def test_a_demo_written_without_its_showcase_is_unfinished(demo_db, tmp_path):
    """The bare demo (the tests' template, ``demo --bare``, or a workbench closed while the job ran) is what
    ``demo --open`` finishes in the workbench; a database without the demo is not (the full demo:
    tests/integration/test_demo_analyses.py)."""
    from benchloupe.jobs import demo_unfinished
    from benchloupe.store.db import connect

    assert demo_unfinished(demo_db)
    connect(tmp_path / "empty.db").close()
    assert not demo_unfinished(tmp_path / "empty.db")
