"""The layering rules of DESIGN.md, stated once in ``LAYERS`` and checked on the source and in interpreters that
have imported nothing of benchloupe (a fresh one, or one forked per module: ``importer``)."""

from __future__ import annotations

import ast
import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import benchloupe

PKG = Path(benchloupe.__file__).parent

# layer -> the layers of benchloupe it may import (itself always). "(root)" is benchloupe/__init__.py (__version__)
# and the root helpers (columns, textsafe, hints).
LAYERS: dict[str, set[str]] = {
    "engine": {"(root)"},
    "store": {"(root)"},
    "prompts": {"(root)", "engine"},
    "jobs": {"(root)", "engine", "store", "prompts"},
    # The two faces reach the engine and the prompts only through jobs (issue 27): a run's config class, the choices
    # of its fields and the engine's errors come from the jobs module that runs it (jobs.calibration.JointConfig,
    # jobs.audit.AuditConfig, jobs.fill.BenchFillConfig, jobs.diagnostics.SELECTIONS, jobs.EngineError), and the
    # simulated endpoint's lifetime from jobs.simulated, as every other run's does from jobs.
    # The report (issue 35) is a third face: it reads what runs stored; the other two faces start it lazily.
    "cli": {"(root)", "store", "jobs", "report"},
    "tui": {"(root)", "store", "jobs", "report"},
    "report": {"(root)", "store"},
}
# The one arrow between the two faces: `benchloupe open` starts the app (imported lazily, inside the function).
ALLOWED_ARROWS = {("cli", "benchloupe.tui.app")}
# Third-party packages a layer must never load, even indirectly.
FORBIDDEN_PACKAGES = {
    "engine": ("sqlite3", "sqlite_utils", "openai", "httpx", "textual"),
    "store": ("openai", "httpx", "textual", "torch"),
    "prompts": ("sqlite3", "textual"),
    "jobs": ("textual",),
    "cli": ("textual", "matplotlib"),
    "report": ("textual", "matplotlib"),  # matplotlib only once a figure is drawn (report/plots.py)
}


def _layer_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else "(root)"


def _how(stack: list[ast.AST]) -> str:
    """Where an import statement runs: "module" (on import), "function" (lazily, when called) or "type-checking"
    (never at run time: ``if TYPE_CHECKING:``)."""
    kinds = []
    for node in stack:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            kinds.append("function")
        elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            kinds.append("type-checking")
    return "type-checking" if "type-checking" in kinds else ("function" if kinds else "module")


def _import_statements(path: Path, pkg: Path) -> list[tuple[str, list[str], int, str]]:
    """(absolute benchloupe module, names imported from it, line, how) for each import in one file (relative
    imports resolved)."""
    rel = path.relative_to(pkg.parent).with_suffix("")
    package = list(rel.parts[:-1])
    out: list[tuple[str, list[str], int, str]] = []

    def visit(node: ast.AST, stack: list[ast.AST]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                out.extend((a.name, [], child.lineno, _how(stack)) for a in child.names
                           if a.name.startswith("benchloupe"))
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package[: len(package) - child.level + 1]
                    mod = ".".join(base + ([child.module] if child.module else []))
                else:
                    mod = child.module or ""
                if mod.startswith("benchloupe"):
                    out.append((mod, [a.name for a in child.names], child.lineno, _how(stack)))
            visit(child, [*stack, child])

    visit(ast.parse(path.read_text(encoding="utf-8")), [])
    return out


def _imports_of(path: Path) -> list[tuple[str, int]]:
    """Absolute benchloupe module names imported by one file (relative imports resolved), with line numbers."""
    out = []
    for mod, names, line, _ in _import_statements(path, PKG):
        if mod == "benchloupe" and names:  # `from benchloupe import jobs` imports a layer
            out += [(f"benchloupe.{n}", line) for n in names]
        else:
            out.append((mod, line))
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


# ------------------------------------------------------------------------------------------------ import circles
# No module imports itself back through another (issue 27): in a circle a reader cannot tell which module is the
# lower one. Every import counts, wherever it runs: at module level, inside a function (a lazy import that points back
# up is still a circle for a reader, and only defers the import-order trap to the first call) and under
# ``if TYPE_CHECKING:`` (a type from above is a dependency on above). An import names the module it reads from: the
# submodule for ``from pkg import submodule``, else the package's ``__init__``; the parent packages that Python also
# runs on the way are not counted (``from a.b import x`` depends on a.b, not on a).

def _module_of(path: Path, pkg: Path) -> str:
    rel = path.relative_to(pkg.parent).with_suffix("")
    parts = list(rel.parts[:-1]) if rel.name == "__init__" else list(rel.parts)
    return ".".join(parts)


def _import_graph(pkg: Path) -> dict[str, list[tuple[str, str]]]:
    """module -> [(module it imports, "file:line (how)")], over the modules of the package."""
    files = {_module_of(p, pkg): p for p in sorted(pkg.rglob("*.py"))}
    graph: dict[str, list[tuple[str, str]]] = {m: [] for m in files}
    for mod, path in files.items():
        for target, names, line, how in _import_statements(path, pkg):
            targets = [f"{target}.{n}" if f"{target}.{n}" in files else target for n in names] or [target]
            for t in dict.fromkeys(targets):
                if t in files and t != mod:
                    graph[mod].append((t, f"{path.relative_to(pkg.parent)}:{line} ({how})"))
    return graph


def _circles(pkg: Path) -> list[list[str]]:
    """Each import circle (a strongly connected set of two or more modules, Tarjan's algorithm), with the imports
    that make it: ``["a -> b  at benchloupe/a.py:3 (module)", ...]``."""
    graph = _import_graph(pkg)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w, _ in graph[v]:
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            members = []
            while True:
                w = stack.pop()
                members.append(w)
                if w == v:
                    break
            if len(members) > 1:
                found.append(sorted(members))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return [[f"{a} -> {b}  at {where}" for a in members for b, where in graph[a] if b in members]
            for members in sorted(found)]


def test_no_module_imports_itself_back_through_another():
    circles = _circles(PKG)
    assert circles == [], "import circles:\n" + "\n\n".join("\n".join(c) for c in circles)


def test_circle_checker_sees_circles(tmp_path):
    """The checker itself can fail: a lazy import back up, a type-only one, and a package's ``__init__`` that
    imports (lazily) the module that imports it back are all circles, inside a subpackage or reaching out of it; an
    import into a circle is not part of it."""
    files = {
        "__init__.py": "",
        "engine/__init__.py": "",
        "engine/a.py": "from benchloupe.engine.b import f\n",
        "engine/b.py": "def f():\n    from .a import g\n",
        "engine/c.py": "from benchloupe.engine import a\n",  # into the a-b circle, not in it
        "engine/d.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import e\n",
        "engine/e.py": "import benchloupe.engine.d\n",
        "engine/neartie/__init__.py": "",
        "engine/neartie/x.py": "from .y import f\n",
        "engine/neartie/y.py": "def f():\n    from .x import g\n",
        "engine/neartie/z.py": "from benchloupe.engine.w import h\n",
        "engine/w.py": "from .neartie.z import k\n",
        "jobs/__init__.py": "def load():\n    from . import area\n\ndef register(): ...\n",
        "jobs/area.py": "from . import register\n",
    }
    for name, text in files.items():
        (tmp_path / "benchloupe" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "benchloupe" / name).write_text(text)
    found = _circles(tmp_path / "benchloupe")
    members = [sorted({line.split(" -> ")[0] for line in c}) for c in found]
    e = "benchloupe.engine"
    assert members == [[f"{e}.a", f"{e}.b"], [f"{e}.d", f"{e}.e"], [f"{e}.neartie.x", f"{e}.neartie.y"],
                       [f"{e}.neartie.z", f"{e}.w"], ["benchloupe.jobs", "benchloupe.jobs.area"]]
    assert f"{e}.b -> {e}.a  at benchloupe/engine/b.py:2 (function)" in found[0]
    assert f"{e}.d -> {e}.e  at benchloupe/engine/d.py:3 (type-checking)" in found[1]
    assert "benchloupe.jobs.area -> benchloupe.jobs  at benchloupe/jobs/area.py:1 (module)" in found[4]


def _modules(sub: str) -> list[str]:
    return [f"benchloupe.{sub}.{m.name}" for m in pkgutil.walk_packages([str(PKG / sub)], prefix="")
            if not m.name.startswith("_")] + [f"benchloupe.{sub}"]


# What one module loads is seen in an interpreter that has imported nothing of benchloupe. A fresh interpreter per
# module spent ~0.35 s of CPU each (105 modules, ~36 s of the suite), nearly all of it importing numpy, scipy and
# pandas again. So one interpreter per worker imports PRELOAD (third-party packages that no layer is forbidden)
# and forks a child per module: the child imports the module and reports sys.modules. That is the set a fresh
# interpreter reports plus PRELOAD's own imports; since those hold no forbidden package and no benchloupe module
# (test_the_preload_holds_nothing_a_layer_is_checked_for), both checks below see what they saw in a fresh one.
PRELOAD = ("numpy", "scipy.optimize", "scipy.stats", "pandas")
_FORK_PER_MODULE = r"""
import importlib, os, sys
for name in sys.argv[1:]:
    importlib.import_module(name)
print(" ".join(sorted(sys.modules)), flush=True)
for line in sys.stdin:
    pid = os.fork()
    if pid == 0:
        try:
            importlib.import_module(line.strip())
            out = " ".join(sorted(sys.modules))
        except BaseException as exc:
            out = "ERROR " + " ".join(repr(exc).split())
        sys.stdout.write(out + "\n")
        sys.stdout.flush()
        os._exit(0)
    os.waitpid(pid, 0)
"""


@pytest.fixture(scope="module")
def importer():
    """``loaded(module)``: the modules in sys.modules after importing *module* in a child forked from the
    preloaded interpreter; ``.preloaded``: what that interpreter held before any fork."""
    proc = subprocess.Popen([sys.executable, "-c", _FORK_PER_MODULE, *PRELOAD], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})

    def loaded(module: str) -> set[str]:
        proc.stdin.write(module + "\n")
        proc.stdin.flush()
        line = proc.stdout.readline()
        assert line and not line.startswith("ERROR"), f"importing {module}: {line or 'the interpreter ended'}"
        return set(line.split())

    loaded.preloaded = set(proc.stdout.readline().split())
    yield loaded
    proc.stdin.close()
    proc.wait(timeout=60)


def test_the_preload_holds_nothing_a_layer_is_checked_for(importer):
    held = {m.split(".")[0] for m in importer.preloaded}
    assert "numpy" in held and "pandas" in held  # it did preload
    forbidden = {p for packages in FORBIDDEN_PACKAGES.values() for p in packages}
    assert held & forbidden == set() and "benchloupe" not in held


def test_the_forked_import_sees_what_a_module_pulls_in(importer):
    """The per-module check can fail: a module that pulls in sqlite3 (not preloaded) shows it."""
    assert "sqlite3" not in importer.preloaded and "sqlite3" in importer("benchloupe.store.db")


@pytest.mark.parametrize("module", [m for layer in FORBIDDEN_PACKAGES for m in _modules(layer)])
def test_layers_load_no_forbidden_package(module, importer):
    loaded = importer(module)
    layer = _layer_of(module)
    bad = [m for m in FORBIDDEN_PACKAGES[layer] if m in loaded]
    assert not bad, f"{module} pulls in {bad}"
    ours = {_layer_of(m) for m in loaded if m.startswith("benchloupe.")} - {layer, "(root)"} - _below(layer)
    assert not ours, f"{module} loads layers {ours}"


def _below(layer: str) -> set[str]:
    """The layers *layer* may load, directly or through the layers it imports (the faces load the engine through
    jobs)."""
    seen, todo = set(), list(LAYERS[layer])
    while todo:
        nxt = todo.pop()
        if nxt not in seen:
            seen.add(nxt)
            todo += LAYERS.get(nxt, ())
    return seen


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


def test_the_endpoints_command_loads_neither_openai_nor_the_benchfill_engine(tmp_path):
    """Issue 36 point 4: ``benchloupe endpoints set/show`` imported jobs.fill, hence the BenchFill engine (with
    pandas' and scipy's statistics) and the openai package: 1.9 s of CPU per command, for a settings file and
    one database row. The settings live in jobs.endpoints and prompts.endpoint."""
    db, home = tmp_path / "e.db", tmp_path / "h"
    code = ("import sys\nfrom benchloupe.cli.main import main\n"
            f"assert main(['import', 'wide', {str(tmp_path / 's.csv')!r}, '-b', 'b', '--db', {str(db)!r}]) == 0\n"
            "before = set(sys.modules)\n"
            f"rc = main(['endpoints', 'set', 'judge', '--model', 'j', '--user', '--db', {str(db)!r}])\n"
            f"rc += main(['endpoints', 'show', '--json', '--db', {str(db)!r}])\n"
            "print('RC', rc, 'LOADED', *[m for m in ('openai', 'scipy', 'benchloupe.engine.benchfill', "
            "'benchloupe.jobs.fill') if m in sys.modules and m not in before])")
    (tmp_path / "s.csv").write_text("model,q1\nm1,1\n")
    env = {**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": str(home / "config")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout
    assert out.splitlines()[-1] == "RC 0 LOADED", out[-2000:]
