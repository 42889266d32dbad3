"""Issue 25 #5: one database in a group-writable folder works for every member of the group, and a user outside
it gets a read-only workbench with one clear line.

Three Unix users are simulated with numeric ids (no passwd entries needed): the test forks after importing
everything the commands need and the child drops to the user's uid, gid and groups before it runs the real
``benchloupe`` command line (cli.main.main) on the shared file. Root only (switching users needs it).

Before the fix: the file the first member created was ``-rw-r--r--`` in their own group (umask 022), so the
second member's write failed ("the database is read-only"), the -wal/-shm files were the creator's group too,
and a user without write access could not even list the flags (the read-only open tried to write).
"""

from __future__ import annotations

import os
import stat
import sys
import traceback

import pytest

pytestmark = pytest.mark.skipif(not hasattr(os, "fork") or os.geteuid() != 0,
                                reason="switching Unix users needs root and fork")
TEAM, ANN, BEA, CY = 42420, 42001, 42002, 42003


def _warm(tmp_path) -> None:
    """Import what the commands will import lazily: the child cannot read root's interpreter files after it
    drops to another uid."""
    import encodings.ascii  # noqa: F401
    import tempfile  # noqa: F401

    import benchloupe.cli.main as climain
    from benchloupe.jobs import build_demo
    from tests.tui.conftest import add_flags

    build_demo(tmp_path / "warm.db", analyses=False)
    add_flags(tmp_path / "warm.db")
    for argv in (["flags"], ["alias", "a", "b"], ["open"]):
        climain.build_parser(argv)
    climain.main(["--db", str(tmp_path / "warm.db"), "flags", "demo-math"])
    climain.main(["--db", str(tmp_path / "warm.db"), "alias", "nope", "x"])  # the error path too


def as_user(uid: int, gid: int, groups: list[int], fn, umask: int = 0o022) -> tuple[int, str]:
    """Run ``fn()`` (its return value is the exit code) as *uid* in a forked child; (code, its output)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        os.close(r)
        os.dup2(w, 1)
        os.dup2(w, 2)
        sys.stdout = open(1, "w", encoding="utf-8", closefd=False, buffering=1)  # pytest's capture is not fd 1
        sys.stderr = open(2, "w", encoding="utf-8", closefd=False, buffering=1)
        code = 99
        try:
            os.setgroups(groups)
            os.setgid(gid)
            os.setuid(uid)
            os.umask(umask)
            os.environ["BENCHLOUPE_USER"] = f"user{uid}"
            code = int(fn() or 0)
        except BaseException:  # noqa: BLE001
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    os.close(w)
    out = b""
    while chunk := os.read(r, 65536):
        out += chunk
    os.close(r)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), out.decode(errors="replace")


def cli(uid, gid, groups, db, *argv, umask=0o022):
    import benchloupe.cli.main as climain

    return as_user(uid, gid, groups, lambda: climain.main(["--db", str(db), *argv]), umask=umask)


@pytest.fixture
def team_dir(tmp_path):
    """A folder every simulated user can reach (pytest's own temporary folders are root's only), group TEAM."""
    import shutil
    import tempfile
    from pathlib import Path

    base = Path(tempfile.mkdtemp(prefix="benchloupe-team-"))
    base.chmod(0o755)
    shared = base / "team"
    shared.mkdir()
    os.chown(shared, 0, TEAM)
    yield shared
    shutil.rmtree(base, ignore_errors=True)


def _mode(p) -> tuple[str, int]:
    st = os.stat(p)
    return stat.filemode(st.st_mode), st.st_gid


@pytest.mark.timeout(300, method="thread")
def test_a_group_shares_one_database_and_an_outsider_reads_only(tmp_path, team_dir):
    _warm(tmp_path)
    team_dir.chmod(0o775)  # group-writable, not setgid: the group must still reach every file
    db = team_dir / "team.db"

    def create() -> int:
        from benchloupe.jobs import build_demo
        from tests.tui.conftest import add_flags

        build_demo(db, analyses=False)
        add_flags(db)
        return 0

    code, out = as_user(ANN, ANN, [TEAM], create)  # ann's umask is 022 and her own group is ann
    assert code == 0, out
    assert _mode(db) == ("-rw-rw-r--", TEAM)

    # ann keeps the workbench open (so the -wal and -shm files stay), bea decides from her own account
    hold_r, hold_w = os.pipe()
    ready_r, ready_w = os.pipe()
    holder = os.fork()
    if holder == 0:
        os.setgroups([TEAM])
        os.setgid(ANN)
        os.setuid(ANN)
        from benchloupe.store.db import connect

        conn = connect(db)
        conn.execute("SELECT count(*) FROM flags").fetchone()
        os.write(ready_w, b"r")
        os.read(hold_r, 1)
        conn.close()  # the last connection: SQLite checkpoints and removes the -wal and -shm files
        os._exit(0)
    try:
        assert os.read(ready_r, 1) == b"r"
        for side in ("-wal", "-shm"):
            mode, gid = _mode(f"{db}{side}")
            assert gid == TEAM and mode[4:6] == "rw", (side, mode, gid)
        code, out = cli(BEA, BEA, [TEAM], db, "flags", "--set", "1", "dismissed", "--note", "noise")
        assert code == 0 and "is now dismissed" in out, out
        code, out = cli(CY, CY, [], db, "flags", "demo-math", "--limit", "2")  # outside the group: reads
        assert code == 0 and "dismissed" in out, out
        code, out = cli(CY, CY, [], db, "flags", "--set", "1", "confirmed")  # but cannot decide: one line
        assert code == 1 and out.count("\n") == 1, out
        assert "read-only: you cannot write" in out and "Working as a team" in out
    finally:
        os.write(hold_w, b"x")
        os.waitpid(holder, 0)
    # nobody has it open now (no -shm the outsider could use, and it cannot make one): still readable
    assert not os.path.exists(f"{db}-shm")
    code, out = cli(CY, CY, [], db, "flags", "demo-math", "--limit", "2")
    assert code == 0 and "dismissed" in out, out


@pytest.mark.timeout(300, method="thread")
def test_the_workbench_of_a_reader_says_read_only_and_refuses_decisions(tmp_path, team_dir):
    _warm(tmp_path)
    team_dir.chmod(0o2775)  # setgid: everything made in it is the team's
    db = team_dir / "team.db"

    def create() -> int:
        from benchloupe.jobs import build_demo
        from tests.tui.conftest import add_flags

        build_demo(db, analyses=False)
        add_flags(db)
        return 0

    assert as_user(ANN, ANN, [TEAM], create)[0] == 0

    def workbench() -> int:
        import asyncio

        from benchloupe.tui.app import BenchloupeApp
        from tests.tui.conftest import loaded, wait_until

        async def run() -> int:
            app = BenchloupeApp(db, benchmark="demo-math")
            async with app.run_test(size=(80, 24)) as pilot:
                await pilot.press("5")
                await wait_until(pilot, loaded(app, "anomalies"), what="anomalies")
                top = str(app.screen.query_one("#topbar").render())
                await pilot.press("c")
                await pilot.pause(0.2)
                shown = [n.message for n in app._notifications]
                print("TOP", top)
                print("NOTES", shown)
                print("STATE", app.screen.flags["state"].iloc[0])
            return 0

        return asyncio.run(run())

    workbench_on = db
    db = tmp_path / "warm.db"
    assert workbench() == 0  # as root first: every module the app loads is loaded before the fork
    db = workbench_on
    code, out = as_user(CY, CY, [], workbench)
    assert code == 0, out
    assert "read-only" in out.split("TOP", 1)[1].splitlines()[0]
    notes = out.split("NOTES", 1)[1].splitlines()[0]
    assert "read-only: you cannot write" in notes
    assert out.split("STATE", 1)[1].split()[0] == "open"  # the decision did not even show
