"""lm-evaluation-harness per-sample logs (issue 2, importer 8): ``samples_<task>_<timestamp>.jsonl``
written by ``lm_eval --log_samples`` (0.4.x), one model per file.

Each line has ``doc_id``, ``doc``, ``target``, ``arguments`` (0.4.0-0.4.2: a list of argument tuples;
later: ``{"gen_args_0": {"arg_0": context, ...}}``), ``resps``, ``filtered_resps``, ``filter``,
``metrics`` (the metric names) and one field per metric (``acc``, ``acc_norm``, ``exact_match`` ...).
Correctness is the chosen metric (``metric=``; default: the first name in the row's ``metrics`` list),
which must be 0/1 or true/false unless ``threshold=`` turns a score into pass (>= threshold) / fail.
Generation tasks log one row per filter (e.g. gsm8k "strict-match" and "flexible-extract"): ``filter_name=``
picks one, default the first seen.

The model name is ``model=`` if given, else the sibling ``results_<timestamp>.json``'s ``model_name`` or
the ``pretrained=`` entry of ``config.model_args``. Item keys are the ``doc_id``; text is the first
argument (the prompt context), answer the ``target``; benchmark defaults to the task name.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd

from .base import ImportFormatError, ParsedImport
from .readers import load_text, models_frame, read_table

NAME_RE = re.compile(r"^samples_(?P<task>.+)_(?P<stamp>[0-9]{4}-[0-9]{2}-[0-9]{2}T[^_]+)\.jsonl(\.gz)?$")


def task_of(path: Path) -> str:
    m = NAME_RE.match(path.name)
    return m.group("task") if m else path.name.split(".")[0].removeprefix("samples_")


def model_from_results(path: Path) -> str | None:
    """Model name from the results_*.json next to the samples file (same timestamp preferred)."""
    m = NAME_RE.match(path.name)
    candidates = sorted(path.parent.glob("results_*.json"))
    if m:
        same = [c for c in candidates if m.group("stamp") in c.name]
        candidates = same or candidates
    for cand in candidates:
        try:
            res = json.loads(load_text(cand))
        except (ImportFormatError, json.JSONDecodeError):
            continue
        if res.get("model_name"):
            return str(res["model_name"])
        args = (res.get("config") or {}).get("model_args") or ""
        if isinstance(args, dict):
            args = ",".join(f"{k}={v}" for k, v in args.items())
        for part in str(args).split(","):
            key, _, value = part.partition("=")
            if key.strip() in {"pretrained", "model", "path"} and value.strip():
                return value.strip()
    return None


def _prompt(arguments) -> str | None:
    if isinstance(arguments, dict) and arguments:
        first = next(iter(arguments.values()))
        if isinstance(first, dict) and first:
            return str(next(iter(first.values())))
    if isinstance(arguments, list) and arguments:
        first = arguments[0]
        return str(first[0]) if isinstance(first, list) and first else str(first)
    return None


def parse_lmeval(
    path: str | Path,
    *,
    benchmark: str | None = None,
    model: str | None = None,
    metric: str | None = None,
    filter_name: str | None = None,
    threshold: float | None = None,
    **_: object,
) -> ParsedImport:
    """Parse one lm-eval samples file into a 1 x items static matrix."""
    p = Path(path)
    threshold = None if threshold is None else float(threshold)
    table = read_table(p, fmt="jsonl")
    if table.frame.empty:
        raise ImportFormatError(
            p, "line 1", "no samples", "pass a samples_<task>_*.jsonl written with --log_samples"
        )
    name = model or model_from_results(p)
    if not name:
        raise ImportFormatError(
            p, "", "no model name (no results_*.json next to the file)", "give the model with --model NAME"
        )
    if "doc_id" not in table.frame.columns:
        raise ImportFormatError(
            p,
            "line 1",
            "no 'doc_id' field: not an lm-eval samples file",
            "pass a samples_<task>_*.jsonl written with --log_samples",
        )
    keys: dict[str, int] = {}
    values: list[int] = []
    texts: list[str | None] = []
    answers: list[str | None] = []
    chosen_filter = filter_name
    for i, row in enumerate(table.frame.to_dict("records")):
        row_filter = row.get("filter") if isinstance(row.get("filter"), str) else None
        chosen_filter = chosen_filter or row_filter
        if row_filter is not None and row_filter != chosen_filter:
            continue
        names = row.get("metrics") if isinstance(row.get("metrics"), list) else []
        field = metric or (names[0] if names else None)
        if field is None or field not in row or row[field] is None:
            raise table.error(
                i,
                field or "metrics",
                f"no metric field '{field}'",
                "choose the metric with --metric (e.g. acc, exact_match)",
            )
        value = row[field]
        if isinstance(value, bool) or value in (0, 1):
            score = int(value)
        elif isinstance(value, (int, float)) and threshold is not None:
            score = int(float(value) >= threshold)
        else:
            raise table.error(
                i,
                field,
                f"metric '{field}' = {value!r} is not 0/1",
                "pick a 0/1 metric with --metric or pass --threshold",
            )
        key = str(row["doc_id"])
        if key in keys:
            raise table.error(
                i,
                "doc_id",
                f"doc_id {key} appears twice for filter {chosen_filter!r}",
                "pick one filter with --filter-name",
            )
        keys[key] = len(values)
        values.append(score)
        texts.append(_prompt(row.get("arguments")))
        target = row.get("target")
        answers.append(None if target is None else str(target))
    items = pd.DataFrame({"key": list(keys), "text": texts, "answer": answers})
    return ParsedImport(
        benchmark=benchmark or task_of(p),
        kind="static",
        items=items,
        models=models_frame([name]),
        correct=np.asarray([values], dtype=np.int8),
        source=f"lmeval:{path}",
    )
