"""OpenCompass per-sample results: ``outputs/<config>/<timestamp>/results/<model>/<dataset>.json``, written
with ``--dump-eval-details`` (the default in recent releases).

The file is the evaluator's result object: aggregate scores (``accuracy`` ...) plus ``details``, either an
object keyed by sample index (``{"0": {"prompt", "origin_prediction", "predictions", "references",
"correct"}}``) or a list of such objects. ``correct`` (a bool, or a list of bools for several predictions:
the first counts) is the result; items are keyed by the sample index (the dataset's row order, as
OpenCompass writes it), text is the prompt (a chat prompt's turns joined), answer the reference. Model = the
``<model>`` folder, benchmark = the dataset abbreviation (the file name).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from .base import ImportFormatError, ParsedImport
from .readers import load_json, models_frame

FIX = "pass results/<model>/<dataset>.json written with --dump-eval-details"


def _text(v) -> str | None:
    if v is None:
        return None
    if isinstance(v, list):
        return "\n".join(str(t.get("prompt", "")) if isinstance(t, dict) else str(t) for t in v)
    return str(v)


def parse_opencompass(path: str | Path, *, benchmark: str | None = None, model: str | None = None,
                      models_file=None, arch_to_family=None, **_: object) -> ParsedImport:
    """Parse one OpenCompass results/<model>/<dataset>.json (with details) into a 1 x items static matrix."""
    p = Path(path)
    data = load_json(p, FIX)
    details = data.get("details") if isinstance(data, dict) else None
    if isinstance(details, list):
        details = {str(i): d for i, d in enumerate(details)}
    if not isinstance(details, dict) or not details:
        raise ImportFormatError(p, "details", "no per-sample 'details'", "re-run OpenCompass with --dump-eval-details")
    keys, values, texts, answers = [], [], [], []
    for k, d in details.items():
        if not isinstance(d, dict) or "correct" not in d:
            raise ImportFormatError(p, f"details.{k}", "a sample without 'correct'", FIX)
        c = d["correct"]
        if isinstance(c, list) and c:
            c = c[0]
        if not isinstance(c, bool) and c not in (0, 1):
            raise ImportFormatError(p, f"details.{k}.correct", f"{str(c)[:20]!r} is not true/false", FIX)
        keys.append(str(k))
        values.append(int(c))
        texts.append(_text(d.get("prompt")))
        ref = d.get("references", d.get("gold", d.get("answer")))
        answers.append(None if ref is None else _text(ref))
    name = model or p.parent.name
    items = pd.DataFrame({"key": keys, "text": texts, "answer": answers}, dtype=object)
    return ParsedImport(benchmark=benchmark or p.stem, kind="static", items=items,
                        models=models_frame([name], models_file, arch_to_family=arch_to_family),
                        correct=np.asarray([values], np.int8), source=f"opencompass:{path}")
