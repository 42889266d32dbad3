"""The layering rules of DESIGN.md, checked in fresh interpreters and on the source."""

from __future__ import annotations

import ast
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import benchloupe

PKG = Path(benchloupe.__file__).parent
FORBIDDEN_FOR_ENGINE = ("sqlite3", "sqlite_utils", "openai", "httpx", "httpx2", "textual")


def _modules(sub: str) -> list[str]:
    return [f"benchloupe.{sub}.{m.name}" for m in pkgutil.iter_modules([str(PKG / sub)])]


def _loaded_after_import(module: str) -> set[str]:
    code = (f"import sys, importlib; importlib.import_module({module!r}); "
            "print(' '.join(sorted(m for m in sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return set(out.split())


@pytest.mark.parametrize("module", [m for m in _modules("engine") if not m.endswith(".jobs")])
def test_engine_imports_no_store_ui_or_network(module):
    loaded = _loaded_after_import(module)
    bad = [m for m in FORBIDDEN_FOR_ENGINE if m in loaded]
    assert not bad, f"{module} pulls in {bad}"
    ours = [m for m in loaded if m.startswith(("benchloupe.store", "benchloupe.tui", "benchloupe.prompts"))]
    assert not ours, f"{module} imports other layers: {ours}"


@pytest.mark.parametrize("module", _modules("store") + _modules("prompts") + ["benchloupe.engine.jobs"])
def test_lower_layers_never_import_textual(module):
    assert "textual" not in _loaded_after_import(module)


def _imports_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module if node.level == 0 else f"{'.' * node.level}{node.module}")
    return names


def test_store_imports_no_other_layer():
    for path in (PKG / "store").rglob("*.py"):
        bad = [n for n in _imports_of(path) if n.startswith(("benchloupe.engine", "benchloupe.tui",
                                                              "benchloupe.prompts"))]
        assert not bad, f"{path.relative_to(PKG)} imports {bad}"


def test_prompts_import_only_engine_types():
    for path in (PKG / "prompts").rglob("*.py"):
        bad = [n for n in _imports_of(path) if n.startswith(("benchloupe.store", "benchloupe.tui",
                                                              "benchloupe.engine.jobs"))]
        assert not bad, f"{path.relative_to(PKG)} imports {bad}"
