"""The suite never touches the real user's home (issue 32, point 15; tests/home_guard.py): HOME and every XDG
folder are temporary for the whole session and each test, every place benchloupe writes under the home resolves
inside them, and a write into the real home's benchloupe folders is refused and fails the test that made it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import home_guard

ROOT = Path(__file__).resolve().parents[2]
REAL_HOME = Path(json.loads(os.environ["BENCHLOUPE_TESTS_REAL_HOME"]).get("HOME", "/nonexistent"))

# every place benchloupe derives a per-user path from the home (grep expanduser, Path.home, XDG_ in benchloupe/)
PER_USER_PATHS = ("from benchloupe.store import db, soundness\n"
                  "from benchloupe.prompts import endpoints_file\n"
                  "print(db.default_db_path()); print(soundness._cache_file());"
                  " print(endpoints_file.path())\n")


def _inside(p: Path, folder: Path) -> bool:
    return str(p.resolve()).startswith(str(folder.resolve()) + os.sep)


def test_home_and_every_xdg_folder_are_temporary(tmp_path):
    assert Path(os.environ["HOME"]) == tmp_path / "home"
    assert Path(os.path.expanduser("~")) != REAL_HOME
    for var in ("XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME"):
        assert _inside(Path(os.environ[var]), tmp_path), var


@pytest.mark.parametrize("where", ["in-process", "subprocess"])
def test_every_per_user_path_of_benchloupe_is_inside_the_test_folder(tmp_path, where):
    if where == "in-process":
        from benchloupe.prompts import endpoints_file
        from benchloupe.store import db, soundness

        paths = [db.default_db_path(), soundness._cache_file(), endpoints_file.path()]
    else:  # a CLI subprocess inherits the environment; with no XDG_* at all it falls back to HOME
        env = {k: v for k, v in os.environ.items() if not k.startswith("XDG_")}
        env["PYTHONPATH"] = str(ROOT)
        out = subprocess.run([sys.executable, "-c", PER_USER_PATHS], env=env, capture_output=True, text=True,
                             timeout=120, check=True).stdout
        paths = [Path(line) for line in out.splitlines()]
    assert len(paths) == 3
    for p in paths:
        assert _inside(p, tmp_path), p
        assert not _inside(p, REAL_HOME), p


def test_the_real_homes_benchloupe_folders_are_guarded():
    guarded = home_guard.guarded()
    assert str(REAL_HOME / ".cache" / "benchloupe") in guarded
    assert str(REAL_HOME / ".local" / "share" / "benchloupe") in guarded
    assert str(REAL_HOME / ".config" / "benchloupe") in guarded


@pytest.mark.parametrize("how", ["open", "os.open", "sqlite3", "mkdir", "replace"])
def test_a_write_into_the_real_home_is_refused_and_recorded(tmp_path, how):
    import sqlite3

    target = Path(home_guard.guarded()[0]) / "written-by-the-test-suite"
    assert not target.exists()
    src = tmp_path / "src"
    src.write_text("x")
    write = {"open": lambda: open(target, "w"),
             "os.open": lambda: os.open(target, os.O_WRONLY | os.O_CREAT),
             "sqlite3": lambda: sqlite3.connect(target),
             "mkdir": lambda: os.makedirs(target),
             "replace": lambda: os.replace(src, target)}[how]
    with pytest.raises(PermissionError, match="real home"):
        write()
    assert not target.exists()
    refused = home_guard.take_violations()  # taken here, so this test itself passes
    # os.makedirs refuses at the first folder it would make: the guarded folder itself where it does not exist yet
    # (a fresh machine's home)
    assert refused and (str(target) in refused[0] or refused[0].endswith(str(target.parent))), refused


def test_reading_the_real_home_is_not_refused(tmp_path):
    for d in home_guard.guarded():
        os.path.exists(d)
    with open(__file__) as f:  # an ordinary read elsewhere
        assert f.read(1)
    assert home_guard.take_violations() == []


def test_only_a_change_naming_this_sessions_folders_fails_the_session(tmp_path):
    cache = tmp_path / "fake-real" / ".cache" / "benchloupe"
    cache.mkdir(parents=True)
    theirs = cache / "theirs.json"
    theirs.write_text('{"/srv/data/leaderboard.db": [1]}')
    before = home_guard.snapshot([cache])
    ours, other_run = cache / "sound.json", cache / "other-run.json"
    ours.write_text(json.dumps({"/scratch/pytest-of-ann/pytest-3/test_x0/demo.db": [1, 2]}))
    other_run.write_text(json.dumps({"/scratch/pytest-of-ann/pytest-31/test_x0/demo.db": [1, 2]}))
    theirs.write_text('{"/srv/data/leaderboard.db": [2]}')
    mine, others = home_guard.changed_by_suite(before, home_guard.snapshot([cache]),
                                               ["/scratch/pytest-of-ann/pytest-3"])
    assert mine == [str(ours)] and sorted(others) == sorted([str(theirs), str(other_run)])


def test_a_session_leaves_no_session_home_behind(tmp_path):
    """The session home goes when the interpreter exits, after the soundness cache's own exit hook has written
    into it (store/soundness.py saves at exit what the process's writes left): before, every session left a
    ``benchloupe-tests-home-*`` folder holding that ``sound.json`` in the temporary folder."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp), "PYTHONPATH": str(ROOT)}
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                        "tests/unit/test_file_pin.py::test_a_deleted_pinned_database_is_refused_and_never_made_anew"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    left = sorted(x.name for x in tmp.iterdir() if x.name.startswith(home_guard.SESSION_HOME_PREFIX))
    assert left == [], left
