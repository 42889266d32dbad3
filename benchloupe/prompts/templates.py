"""Loader for the editable prompt templates in ``prompts/templates/*.txt``.

A template file holds a ``=== system ===`` part and a ``=== user ===`` part; placeholders are
``string.Template`` names (``$target``), so JSON braces in the text need no escaping.  Item text substituted
into a template is never re-read as a template.  ``BENCHLOUPE_PROMPTS`` may name a folder of overrides.
"""

from __future__ import annotations

import os
import string
from dataclasses import dataclass
from pathlib import Path

TEMPLATE_DIR = Path(__file__).with_name("templates")
_MARK_SYSTEM, _MARK_USER = "=== system ===", "=== user ==="


@dataclass(frozen=True)
class PromptTemplate:
    name: str
    system: string.Template
    user: string.Template

    def render(self, **fields: object) -> list[dict[str, str]]:
        """Chat messages with every placeholder filled; a missing field raises KeyError naming it."""
        values = {k: str(v) for k, v in fields.items()}
        return [{"role": "system", "content": self.system.substitute(values).strip()},
                {"role": "user", "content": self.user.substitute(values).strip()}]


def load_template(name: str, folder: Path | None = None) -> PromptTemplate:
    """Read ``<name>.txt`` from ``folder``, else ``$BENCHLOUPE_PROMPTS``, else the packaged templates."""
    candidates = [folder] if folder else []
    if os.environ.get("BENCHLOUPE_PROMPTS"):
        candidates.append(Path(os.environ["BENCHLOUPE_PROMPTS"]))
    candidates.append(TEMPLATE_DIR)
    for base in candidates:
        path = Path(base) / f"{name}.txt"
        if path.is_file():
            return parse_template(name, path.read_text(encoding="utf-8"))
    raise FileNotFoundError(f"prompt template {name!r} not found in {', '.join(map(str, candidates))}")


def parse_template(name: str, text: str) -> PromptTemplate:
    if _MARK_SYSTEM not in text or _MARK_USER not in text:
        raise ValueError(f"prompt template {name!r} needs a '{_MARK_SYSTEM}' and a '{_MARK_USER}' section")
    system, user = text.split(_MARK_SYSTEM, 1)[1].split(_MARK_USER, 1)
    return PromptTemplate(name, string.Template(system), string.Template(user))
