"""Shared fixtures: isolated databases, the demo workspace, and where ../shared lives."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

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


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path, monkeypatch):
    """No test touches the user's real default database or endpoints file, or the caller's OpenAI settings."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    monkeypatch.delenv("BENCHLOUPE_DB", raising=False)
    monkeypatch.delenv("BENCHLOUPE_ENDPOINTS", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    # one curator name in every test (the TUI header shows it; snapshots must not depend on the login name);
    # a name an earlier test gave with set_actor is forgotten first
    from benchloupe.store import actor

    actor.set_actor(None)
    monkeypatch.setenv("BENCHLOUPE_USER", "curator")


@pytest.fixture(scope="session")
def demo_db_template(tmp_path_factory) -> Path:
    from benchloupe.jobs import build_demo

    path = tmp_path_factory.mktemp("demo") / "demo.db"
    build_demo(path)
    from benchloupe.store.db import connect

    conn = connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return path


@pytest.fixture
def demo_db(demo_db_template, tmp_path) -> Path:
    """A private copy of the demo workspace for one test."""
    dst = tmp_path / "demo.db"
    shutil.copy(demo_db_template, dst)
    return dst


from tests.fake_llm import fake_llm  # noqa: E402,F401  (the local OpenAI-compatible server fixture)
