"""Inspect AI evaluation logs (issue 2, importer 9): the JSON log and the ``.eval`` zip archive.

JSON log: one object with ``eval`` (``task``, ``model`` ...) and ``samples`` (each ``id``, ``epoch``,
``input``, ``target``, ``scores: {scorer: {"value": ..., "answer": ..., "explanation": ...}}``).
``.eval`` archive: ``header.json`` (or, for an unfinished run, ``_journal/start.json``) carries ``eval``;
every sample is ``samples/<id>_epoch_<n>.json``. One model per log (``eval.model``).

Scores are mapped to correct/incorrect: "C" (correct) = 1, "I" (incorrect) and "N" (no answer) = 0,
"P" (partial) by ``partial=`` ("incorrect", the default, "correct" or "error"), true/false = 1/0, numbers
``>= threshold`` (default 1.0) = 1. ``scorer=`` picks the scorer (default: the first one in the first
scored sample); ``score_key=`` picks an entry when a scorer's value is a dict. Samples without scores (an
errored sample) are left missing. With several epochs the result is successes/trials per item.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd

from .base import ImportFormatError, ParsedImport
from .readers import load_text, models_frame

LETTERS = {"C": 1, "I": 0, "N": 0}


def _load(p: Path) -> tuple[dict, list[tuple[str, dict]]]:
    """(eval header, [(where, sample)]) from a .eval archive or a JSON log."""
    if not p.is_file():
        raise ImportFormatError(p, "", "no such file", "check the path")
    if zipfile.is_zipfile(p):
        try:
            with zipfile.ZipFile(p) as z:
                names = z.namelist()
                head_name = "header.json" if "header.json" in names else "_journal/start.json"
                if head_name not in names:
                    raise ImportFormatError(
                        p, "", "no header.json in the .eval archive", "pass a log written by inspect eval"
                    )
                header = json.loads(z.read(head_name).decode("utf-8"))
                samples = [
                    (n, json.loads(z.read(n).decode("utf-8")))
                    for n in sorted(names)
                    if n.startswith("samples/") and n.endswith(".json")
                ]
        except (zipfile.BadZipFile, json.JSONDecodeError, UnicodeDecodeError, EOFError) as exc:
            raise ImportFormatError(p, "", f"corrupt .eval archive ({exc})", "re-export the log") from None
        return header, samples
    try:
        log = json.loads(load_text(p))
    except json.JSONDecodeError as exc:
        raise ImportFormatError(
            p,
            f"line {exc.lineno}, column {exc.colno}",
            f"not JSON ({exc.msg})",
            "pass an Inspect .json or .eval log",
        ) from None
    if not isinstance(log, dict) or "eval" not in log:
        raise ImportFormatError(p, "", "no 'eval' header", "pass an Inspect .json or .eval log")
    return log, [(f"samples[{i}]", s) for i, s in enumerate(log.get("samples") or [])]


def _score(p: Path, where: str, value, partial: str, threshold: float, score_key: str | None) -> int:
    if isinstance(value, dict):
        if score_key is None or score_key not in value:
            raise ImportFormatError(
                p, where, f"score is a dict with keys {sorted(value)}", "choose one with --score-key"
            )
        value = value[score_key]
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)):
        return int(value >= threshold)
    if isinstance(value, str):
        v = value.strip().upper()
        if v in LETTERS:
            return LETTERS[v]
        if v == "P":
            if partial == "error":
                raise ImportFormatError(
                    p, where, "partial score 'P'", "choose --partial correct or incorrect"
                )
            return int(partial == "correct")
        try:
            return int(float(v) >= threshold)
        except ValueError:
            pass
    raise ImportFormatError(
        p,
        where,
        f"score value {value!r} is not C/I/P/N, a bool or a number",
        "choose another scorer with --scorer",
    )


def _text(value) -> str | None:
    if value is None:
        return None
    if isinstance(value, list):
        parts = [m.get("content") if isinstance(m, dict) else m for m in value]
        return "\n".join(str(x) for x in parts if isinstance(x, str))
    return str(value)


def parse_inspect(
    path: str | Path,
    *,
    benchmark: str | None = None,
    scorer: str | None = None,
    score_key: str | None = None,
    partial: str = "incorrect",
    threshold: float = 1.0,
    model: str | None = None,
    metric: str | None = None,
    **_: object,
) -> ParsedImport:
    """Parse one Inspect log into a 1 x items matrix (or successes/trials when it has epochs).

    ``metric`` is accepted as another name for ``scorer`` (the CLI's --metric serves lm-eval and Inspect).
    """
    p = Path(path)
    scorer = scorer or metric
    threshold = float(threshold)
    if partial not in {"incorrect", "correct", "error"}:
        raise ImportFormatError(p, "", f"--partial {partial!r}", "use correct, incorrect or error")
    header, samples = _load(p)
    ev = header.get("eval") or {}
    name = model or ev.get("model")
    if not name:
        raise ImportFormatError(p, "eval.model", "no model in the log", "give the model with --model")
    succ: dict[str, int] = {}
    trials: dict[str, int] = {}
    texts: dict[str, str | None] = {}
    answers: dict[str, str | None] = {}
    for where, s in samples:
        scores = s.get("scores") or {}
        if not scores:
            continue
        chosen = scorer or next(iter(scores))
        if chosen not in scores:
            raise ImportFormatError(
                p, where, f"no scorer '{chosen}' (has {sorted(scores)})", "pick one with --scorer"
            )
        v = _score(
            p, f"{where}.scores.{chosen}", (scores[chosen] or {}).get("value"), partial, threshold, score_key
        )
        scorer = chosen
        key = str(s.get("id"))
        succ[key] = succ.get(key, 0) + v
        trials[key] = trials.get(key, 0) + 1
        texts.setdefault(key, _text(s.get("input")))
        target = s.get("target")
        answers.setdefault(key, "|".join(map(str, target)) if isinstance(target, list) else _text(target))
    if not trials:
        raise ImportFormatError(p, "samples", "no scored samples", "import a finished log with scores")
    keys = list(trials)
    items = pd.DataFrame(
        {"key": keys, "text": [texts[k] for k in keys], "answer": [answers[k] for k in keys]}
    )
    parsed = ParsedImport(
        benchmark=benchmark or str(ev.get("task") or p.stem),
        kind="static",
        items=items,
        models=models_frame([str(name)]),
        source=f"inspect:{path}",
    )
    n = np.asarray([[trials[k] for k in keys]], dtype=np.int32)
    s = np.asarray([[succ[k] for k in keys]], dtype=np.int32)
    if (n == 1).all():
        parsed.correct = s.astype(np.int8)
    else:
        parsed.successes, parsed.trials = s, n
    return parsed
