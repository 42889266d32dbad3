"""Print the runtime dependencies `make demo` installs before the first screen, one shell word each (issue 32
point 16): pyproject's ``dependencies`` less :data:`LATER`, those no demo screen needs, each imported only where
it is used (pyarrow: parquet imports, ``store/importers/columnar.py``; matplotlib: ``benchloupe report``'s
figures; zstandard: Inspect ``.eval`` logs).  The Makefile installs the rest after the first screen, in the
background.  Needs Python >= 3.11 (tomllib), as benchloupe does.

    python3 scripts/demo_deps.py [pyproject.toml]
"""

from __future__ import annotations

import re
import shlex
import sys
import tomllib

LATER = {"pyarrow", "matplotlib", "zstandard"}


def demo_dependencies(pyproject: str = "pyproject.toml") -> list[str]:
    with open(pyproject, "rb") as f:
        deps = tomllib.load(f)["project"]["dependencies"]
    return [d for d in deps if re.match(r"[A-Za-z0-9_.-]+", d)[0].lower() not in LATER]


if __name__ == "__main__":
    print(" ".join(shlex.quote(d) for d in demo_dependencies(*sys.argv[1:2])))
