"""A fresh clone on a machine that never saw the project must build and test (issue 21, defect 1).

A tracked symlink (``.venv-litellm -> /tmp/lltest``) once broke ``make test`` on every new machine: the link
pointed into a temporary folder of the machine that committed it. These checks read the git index, so they
see exactly what a clone gets.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Absolute paths of one machine: a temporary folder with something in it, a home folder.
MACHINE_PATH = re.compile(rb"(/tmp/[A-Za-z0-9_.-]+/|/[r]oot/|/home/[a-z]+/)")

# Files allowed to hold such a path, each for a stated reason.
ALLOWED = {
    # Recorded by the real tools that wrote them (Inspect/lm-eval logs record where they ran); the README
    # shows how they were regenerated.
    "tests/fixtures/",
    # This test names the patterns it looks for.
    "tests/unit/test_fresh_clone.py",
}


def _git(*args: str) -> bytes:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: nothing a clone would get to check")
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True).stdout


def _allowed(path: str) -> bool:
    return any(path == a or (a.endswith("/") and path.startswith(a)) for a in ALLOWED)


def test_the_tree_tracks_no_symlink() -> None:
    links = [
        line.split(b"\t", 1)[1].decode()
        for line in _git("ls-files", "-s", "-z").split(b"\0")
        if line.startswith(b"120000 ")
    ]
    assert links == [], f"tracked symlinks (a fresh clone gets a link to this machine's paths): {links}"


def test_no_tracked_file_names_a_path_of_the_machine_that_made_it() -> None:
    offenders = []
    for raw in _git("ls-files", "-z").split(b"\0"):
        path = raw.decode()
        if not path or _allowed(path):
            continue
        file = ROOT / path
        if file.is_symlink() or not file.is_file():
            continue
        data = file.read_bytes()
        if b"\0" in data[:8192]:
            continue  # binary
        match = MACHINE_PATH.search(data)
        if match:
            line = data[: match.start()].count(b"\n") + 1
            offenders.append(f"{path}:{line}: {match.group().decode(errors='replace')}")
    assert offenders == [], "files naming a path of one machine:\n" + "\n".join(offenders)


def test_gitignore_ignores_the_litellm_venv_as_a_folder_or_a_link() -> None:
    """``.venv-litellm/`` matches folders only; a link of that name would be committable."""
    _git("rev-parse", "HEAD")
    for name in (".venv-litellm", ".venv"):
        out = subprocess.run(["git", "check-ignore", "--no-index", "-q", name], cwd=ROOT, capture_output=True)
        assert out.returncode == 0, f"{name} (a file or link of that name) is not ignored by .gitignore"
