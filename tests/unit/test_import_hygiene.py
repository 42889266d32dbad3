"""The layering rules of DESIGN.md, stated once in ``LAYERS`` and checked on the source and in fresh interpreters."""

from __future__ import annotations

import ast
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import benchloupe

PKG = Path(benchloupe.__file__).parent

# layer -> the layers of benchloupe it may import (itself always). "(root)" is benchloupe/__init__.py (__version__).
LAYERS: dict[str, set[str]] = {
    "engine": {"(root)"},
    "store": {"(root)"},
    "prompts": {"(root)", "engine"},
    "jobs": {"(root)", "engine", "store", "prompts"},
    "cli": {"(root)", "engine", "store", "prompts", "jobs"},
    "tui": {"(root)", "engine", "store", "prompts", "jobs"},
}
# The one arrow between the two faces: `benchloupe open` starts the app (imported lazily, inside the function).
ALLOWED_ARROWS = {("cli", "benchloupe.tui.app")}
# Third-party packages a layer must never load, even indirectly.
FORBIDDEN_PACKAGES = {
    "engine": ("sqlite3", "sqlite_utils", "openai", "httpx", "textual"),
    "store": ("openai", "httpx", "textual", "torch"),
    "prompts": ("sqlite3", "textual"),
    "jobs": ("textual",),
    "cli": ("textual",),
}


def _layer_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else "(root)"


def _imports_of(path: Path) -> list[tuple[str, int]]:
    """Absolute benchloupe module names imported by one file (relative imports resolved), with line numbers."""
    rel = path.relative_to(PKG.parent).with_suffix("")
    package = list(rel.parts[:-1]) if rel.name != "__init__" else list(rel.parts[:-1])
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names if a.name.startswith("benchloupe")]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if mod.startswith("benchloupe"):
                if mod == "benchloupe":  # `from benchloupe import jobs` imports a layer
                    out += [(f"benchloupe.{a.name}", node.lineno) for a in node.names]
                else:
                    out.append((mod, node.lineno))
    return out


def _violations() -> list[str]:
    bad = []
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG)
        if len(rel.parts) < 2:
            continue
        layer = rel.parts[0]
        for mod, line in _imports_of(path):
            target = _layer_of(mod)
            if target == layer or target in LAYERS[layer] or (layer, mod) in ALLOWED_ARROWS:
                continue
            bad.append(f"{rel}:{line} ({layer}) imports {mod} ({target})")
    return bad


def test_every_module_belongs_to_a_layer():
    layers = {p.name for p in PKG.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert layers == set(LAYERS), f"packages without a rule (or rules without a package): {layers ^ set(LAYERS)}"


def test_source_imports_follow_the_layer_table():
    assert _violations() == []


def test_rule_checker_sees_a_violation(tmp_path, monkeypatch):
    """The checker itself can fail: an engine module importing the store is reported."""
    fake = tmp_path / "benchloupe"
    (fake / "engine").mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "engine" / "__init__.py").write_text("")
    (fake / "engine" / "bad.py").write_text("from benchloupe.store.db import connect\nfrom ..jobs import x\n")
    monkeypatch.setattr(sys.modules[__name__], "PKG", fake)
    found = _violations()
    assert any("engine/bad.py:1" in v and "store" in v for v in found)
    assert any("engine/bad.py:2" in v and "jobs" in v for v in found)


def _modules(sub: str) -> list[str]:
    return [f"benchloupe.{sub}.{m.name}" for m in pkgutil.walk_packages([str(PKG / sub)], prefix="")
            if not m.name.startswith("_")] + [f"benchloupe.{sub}"]


def _loaded_after_import(module: str) -> set[str]:
    code = (f"import sys, importlib; importlib.import_module({module!r}); "
            "print(' '.join(sorted(m for m in sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return set(out.split())


@pytest.mark.parametrize("module", [m for layer in FORBIDDEN_PACKAGES for m in _modules(layer)])
def test_layers_load_no_forbidden_package(module):
    loaded = _loaded_after_import(module)
    layer = _layer_of(module)
    bad = [m for m in FORBIDDEN_PACKAGES[layer] if m in loaded]
    assert not bad, f"{module} pulls in {bad}"
    ours = {_layer_of(m) for m in loaded if m.startswith("benchloupe.")} - {layer, "(root)"} - LAYERS[layer]
    assert not ours, f"{module} loads layers {ours}"


def test_help_imports_no_engine_module():
    out = subprocess.run([sys.executable, "-X", "importtime", "-m", "benchloupe", "--help"],
                         capture_output=True, text=True, check=True)
    engine = [ln.rsplit("|", 1)[-1].strip() for ln in out.stderr.splitlines() if "benchloupe.engine" in ln]
    assert engine == [], f"--help imported {engine}"


@pytest.mark.parametrize("json_out", [True, False])
def test_the_primary_neartie_audit_process_loads_neither_pandas_nor_scipy(demo_db, json_out):
    """Issue 13: the whole `benchloupe audit neartie` process must run in 20x less time than the reference (ARC:
    0.415 s, interpreter start included); importing pandas (~0.15 s) or scipy.linalg (~0.1 s) alone breaks it.
    The audit's tables are :class:`benchloupe.columns.Columns` and the store writes them as they are."""
    argv = ["audit", "neartie", "demo-chem", "--db", str(demo_db)] + (["--json"] if json_out else [])
    code = ("import sys\nfrom benchloupe.cli.main import main\n"
            f"rc = main({argv!r})\n"
            "print('RC', rc, 'LOADED', *[m for m in ('pandas', 'scipy', 'pyarrow') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines()[-1] == "RC 0 LOADED", out[-2000:]
