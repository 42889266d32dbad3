"""benchloupe: a terminal workbench for LLM-benchmark curators.

Layers (see docs/ARCHITECTURE.md): ``engine`` (mathematics on arrays), ``store`` (SQLite),
``prompts`` (LLM templates and client), ``engine.jobs`` (the one bridge), ``tui`` (app and CLI).
"""

__version__ = "0.1.0"
