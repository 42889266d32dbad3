"""Shared fixtures: isolated databases, the demo workspace, and where ../shared lives."""

from __future__ import annotations

import os

# The command's process defaults (benchloupe/cli/main.py), before anything here imports numpy: single-threaded
# OpenBLAS, no hugepage advice.  Issue 36 point 4: the suite ran numpy with OpenBLAS's default of a thread per
# core in every xdist worker, which on the 2-core machines oversubscribed the cores and spun: the chance tests
# took 7 s of CPU each with it and 0.3 s without (docs/BENCHMARKS.md, "The suite's slowest tests").
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("NUMPY_MADVISE_HUGEPAGE", "0")

import shutil  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

from tests import home_guard  # noqa: E402
from tests.built_once import built_once, checkpointed  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
DATA = SHARED / "data"
REFERENCE = SHARED / "reference" / "outputs"


def need_shared(*parts: str) -> Path:
    """Path under ../shared, or skip the test with the reason."""
    p = SHARED.joinpath(*parts)
    if not p.exists():
        pytest.skip(f"{p} is absent (real data lives in ../shared beside the project)")
    return p


def pytest_configure(config):
    """HOME and XDG_* are a temporary session home before collection, and the real ones guarded (issue 32.15)."""
    config._real_home_before = home_guard.snapshot(home_guard.real_benchloupe_dirs())
    home_guard.isolate()


def pytest_sessionfinish(session, exitstatus):
    """The session fails when anything of it wrote into the real home's benchloupe folders."""
    if hasattr(session.config, "workerinput"):  # xdist workers: the controller compares the folders once
        return
    before = getattr(session.config, "_real_home_before", None)
    if before is None:
        return
    refused = home_guard.take_violations()
    own = [str(session.config._tmp_path_factory.getbasetemp()), str(home_guard.session_home())]
    mine, others = home_guard.changed_by_suite(before, home_guard.snapshot(home_guard.real_benchloupe_dirs()), own)
    tr = session.config.pluginmanager.get_plugin("terminalreporter")
    say = tr.write_line if tr else print
    for p in others:
        say(f"note: {p} changed during the session, not by this session (another benchloupe or test run of this user?)")
    if refused or mine:
        for line in refused + [f"changed {p}" for p in mine]:
            say(f"FAILED: the suite touched the real home: {line}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_xdist_auto_num_workers(config):
    """``-n auto`` (the README's command): two pytest-xdist workers per usable core (issue 36 point 4). A quiet
    2-core run with one worker per core kept the cores busy 1.2 of 2 (docs/BENCHMARKS.md, "The suite in
    minutes"): the suite waits a good deal, on processes it starts, servers that answer late on purpose and the
    workbench's screens, and a second worker per core runs while the first one waits.
    $PYTEST_XDIST_AUTO_NUM_WORKERS still wins (pytest-xdist's own reading of it)."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return 2 * cores


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items):
    """The modules that hold a ``slow`` test run first, each whole and in its own order (issue 36 point 4).
    pytest-xdist's worksteal gives each worker a run of the collection and lets an idle worker take the end of
    another's queue: a long test near the end of the collection ran on after every other test had finished, one
    core idle. First, the long tests start while both queues are full and the end holds short ones. A module is
    moved whole so that its module-scoped fixtures are still built once per worker."""
    slow = {getattr(item, "module", None) for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: getattr(item, "module", None) not in slow)  # stable: the rest keep pytest's order


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path, monkeypatch):
    """No test touches the user's real home (default database, endpoints file, soundness cache) or the caller's
    OpenAI settings; a write refused by the home guard fails the test that made it."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg-state"))
    monkeypatch.delenv("BENCHLOUPE_DB", raising=False)
    monkeypatch.delenv("BENCHLOUPE_ENDPOINTS", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    # one curator name in every test (the TUI header shows it; snapshots must not depend on the login name);
    # a name an earlier test gave with set_actor is forgotten first
    from benchloupe.store import actor

    actor.set_actor(None)
    monkeypatch.setenv("BENCHLOUPE_USER", "curator")
    yield
    refused = home_guard.take_violations()
    if refused:
        pytest.fail("the test wrote into the real home: " + "; ".join(refused), pytrace=False)


@pytest.fixture(scope="session")
def demo_db_template(tmp_path_factory) -> Path:
    from benchloupe.jobs import build_demo

    return built_once(tmp_path_factory, "demo", checkpointed(build_demo))


@pytest.fixture
def demo_db(demo_db_template, tmp_path) -> Path:
    """A private copy of the demo workspace for one test."""
    dst = tmp_path / "demo.db"
    shutil.copy(demo_db_template, dst)
    return dst


@pytest.fixture(scope="session")
def showcase_template(tmp_path_factory) -> Path:
    """The demo as ``benchloupe demo`` builds it: the data, then the showcase analyses (fits, anomalies,
    coverage, the near-tie audit); built once for the session (about 11 s of CPU), a template to copy."""
    from benchloupe.jobs import build_demo

    return built_once(tmp_path_factory, "showcase", checkpointed(lambda p: build_demo(p, analyses=True)))


@pytest.fixture
def showcase_db(showcase_template, tmp_path) -> Path:
    """A private copy of the demo with its analyses run, for one test."""
    dst = tmp_path / "showcase.db"
    shutil.copy(showcase_template, dst)
    return dst


from tests.fake_llm import fake_llm  # noqa: E402,F401  (the local OpenAI-compatible server fixture)
