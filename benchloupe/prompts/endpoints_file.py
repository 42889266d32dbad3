"""The per-user endpoints file shared by every workspace (issue 12, "The endpoint client").

``$XDG_CONFIG_HOME/benchloupe/endpoints.toml`` (default ``~/.config/benchloupe/endpoints.toml``)::

    [rewriter]
    base_url = "http://localhost:8000/v1"
    model = "gpt-4o-mini"
    api_key_env = "OPENAI_API_KEY"

    [judge]
    model = "gpt-4o-mini"          # no base_url: $OPENAI_BASE_URL

    [[annotators]]
    name = "Llama-3-8B"           # the benchmark model whose ability it carries
    model = "llama3:8b"
    trials = 4

Read with :mod:`tomllib`; written by :func:`save` (tables of scalars and one array of tables, which is all
this file holds). Keys are never written here: the file names the environment variable that holds one.
A database's own endpoints (``benchloupe endpoints set ...`` without ``--user``) override this file per role
and per annotator name.
"""

from __future__ import annotations

import json
import math
import os
import tomllib
from pathlib import Path

from benchloupe.engine.common import EngineError

FILE_ENV = "BENCHLOUPE_ENDPOINTS"


def path() -> Path:
    """``$BENCHLOUPE_ENDPOINTS``, else ``$XDG_CONFIG_HOME/benchloupe/endpoints.toml``."""
    env = os.environ.get(FILE_ENV)
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "benchloupe" / "endpoints.toml"


def empty() -> dict:
    return {"rewriter": None, "judge": None, "annotators": []}


def load(p: Path | None = None) -> dict:
    """The file's endpoints (empty when there is no file); a malformed file is one line naming it."""
    p = p or path()
    try:
        with open(p, "rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError:
        return empty()
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise EngineError(f"{p}: cannot read the endpoints file ({exc}); fix or remove it") from None
    out = empty()
    for role in ("rewriter", "judge"):
        value = data.get(role)
        if value is not None and not isinstance(value, dict):
            raise EngineError(f"{p}: [{role}] must be a table of settings")
        out[role] = value or None
    annotators = data.get("annotators", [])
    if not isinstance(annotators, list) or not all(isinstance(a, dict) and a.get("name") for a in annotators):
        raise EngineError(f"{p}: [[annotators]] must be tables, each with a name")
    out["annotators"] = annotators
    return out


def _value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise EngineError(f"cannot store {v!r} in the endpoints file")
        return repr(v)
    return _string(str(v))


def _string(text: str) -> str:
    """A TOML basic string: JSON's quoting, but a character beyond the BMP written as itself (JSON's surrogate
    pair ``\ud83d\ude00`` is not a TOML escape: a model named with an emoji could not be saved, issue 37 #15),
    and DEL escaped (TOML forbids it raw; JSON leaves it)."""
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def _table(d: dict) -> list[str]:
    return [f"{_string(str(k))} = {_value(v)}" for k, v in d.items() if v is not None]


def dumps(eps: dict) -> str:
    lines = ["# benchloupe endpoints (shared by every database; `benchloupe endpoints show` lists them)"]
    for role in ("rewriter", "judge"):
        if eps.get(role):
            lines += ["", f"[{role}]", *_table(eps[role])]
    for a in eps.get("annotators", []):
        lines += ["", "[[annotators]]", *_table(a)]
    return "\n".join(lines) + "\n"


def save(eps: dict, p: Path | None = None) -> Path:
    """Write the file atomically (a temporary file renamed over it)."""
    p = p or path()
    text = dumps(eps)
    tomllib.loads(text)  # what we write must read back
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, p)
    return p
