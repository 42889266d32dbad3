"""The DualEval reference JSONL formats (issue 2, importer 6; REFERENCE-IMPLEMENTATIONS.md A.1).

Static rows ``model_label, dataset, sample_index, correct``; arena rows ``model_label, item_id, reward``.
The format of a file is recognised from its first row (``reward`` -> arena). Rules kept from the
reference: rows without ``model_label`` or ``correct`` (static) / with a null ``reward`` (arena) are
skipped, the last duplicate of a (model, item) wins, ``correct`` is ``int(bool(correct))``.
Variant exposed: ``require_status_ok=True`` follows item_informativeness.py (static rows whose ``status``
is not "ok" count as incorrect; arena rows need status "ok").

Item keys: the reference builds ``"{tag}::{dataset}_{sample_index}"`` with tag = the parent folder's name.
We use ``"{dataset}_{sample_index}"`` (arena: ``item_id``) and let the benchmark name play the tag's role
(the benchmark defaults to the parent folder's name, as the tag does), so the keys do not change when a
file is moved. ``key_prefix="tag"`` reproduces the reference keys exactly.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from .base import ImportFormatError, ParsedImport, json_kind
from .readers import Table, as_bool, models_frame, read_table, short_repr


def _tag(path: Path) -> str:
    return path.parent.name or path.stem


def parse_dualeval(
    path: str | Path,
    *,
    benchmark: str | None = None,
    key_prefix: str = "none",
    require_status_ok: bool = False,
    models_file: str | Path | None = None,
    arch_to_family=None,
    **_: object,
) -> ParsedImport:
    """Parse a DualEval static or arena JSONL file (recognised from its first row)."""
    p = Path(path)
    require_status_ok = as_bool(require_status_ok)
    table = read_table(p, fmt="jsonl")
    if table.frame.empty:
        raise ImportFormatError(p, "line 1", "no JSON rows", "write one JSON object per line")
    tag = _tag(p)
    prefix = f"{tag}::" if key_prefix == "tag" else ""
    arena = "reward" in table.frame.columns and "correct" not in table.frame.columns
    parsed = _arena(table, prefix, require_status_ok) if arena else _static(table, prefix, require_status_ok)
    parsed.benchmark = benchmark or tag
    parsed.models = models_frame(list(parsed.models["name"]), models_file, arch_to_family=arch_to_family)
    parsed.source = f"dualeval:{path}"
    return parsed


def _records(table: Table) -> list[dict]:
    return [
        {k: v for k, v in r.items() if not (isinstance(v, float) and np.isnan(v))}
        for r in table.frame.to_dict("records")
    ]


def _static(table: Table, prefix: str, require_status_ok: bool) -> ParsedImport:
    cells: dict[tuple[str, str], int] = {}
    for i, row in enumerate(_records(table)):
        model, correct = row.get("model_label"), row.get("correct")
        if model in (None, "") or correct is None:
            continue
        for field in ("dataset", "sample_index"):
            if row.get(field) is None:
                raise table.error(
                    i,
                    field,
                    f"static row without '{field}'",
                    "give dataset and sample_index on every static row",
                )
        if isinstance(correct, (dict, list)):
            raise table.error(i, "correct", f"'correct' is {json_kind(correct)}", "use 0/1 or true/false")
        value = int(bool(correct))
        if require_status_ok and row.get("status", "ok") != "ok":
            value = 0
        cells[(str(model), f"{prefix}{row['dataset']}_{row['sample_index']}")] = value  # last one wins
    if not cells:
        raise ImportFormatError(
            table.path,
            "",
            "no usable static rows (all lack model_label or correct)",
            "check the file is DualEval static JSONL",
        )
    models = list(dict.fromkeys(m for m, _ in cells))
    items = list(dict.fromkeys(k for _, k in cells))
    m_index = {m: j for j, m in enumerate(models)}
    i_index = {k: j for j, k in enumerate(items)}
    correct = np.full((len(models), len(items)), -1, dtype=np.int8)
    for (m, k), v in cells.items():
        correct[m_index[m], i_index[k]] = v
    return ParsedImport(
        benchmark="",
        kind="static",
        items=pd.DataFrame({"key": items}),
        models=pd.DataFrame({"name": models}),
        correct=correct,
    )


def _arena(table: Table, prefix: str, require_status_ok: bool) -> ParsedImport:
    cells: dict[tuple[str, str], float] = {}
    for i, row in enumerate(_records(table)):
        model, reward = row.get("model_label"), row.get("reward")
        if model in (None, "") or reward is None:
            continue
        if require_status_ok and row.get("status") != "ok":
            continue
        if row.get("item_id") is None:
            raise table.error(i, "item_id", "arena row without 'item_id'", "give item_id on every arena row")
        try:
            value = float(reward)
        except (TypeError, ValueError):
            raise table.error(
                i, "reward", f"reward {short_repr(reward)} is not a number", "give a float reward"
            ) from None
        except OverflowError:  # a JSON integer beyond the float range
            raise table.error(i, "reward", f"reward {short_repr(reward)} is too large", "give a finite reward") from None
        if not np.isfinite(value):
            raise table.error(i, "reward", f"reward {short_repr(reward)} is not finite", "give a finite reward")
        cells[(str(model), f"{prefix}{row['item_id']}")] = value  # last one wins
    if not cells:
        raise ImportFormatError(
            table.path,
            "",
            "no usable arena rows (all lack model_label or reward)",
            "check the file is DualEval arena JSONL",
        )
    models = list(dict.fromkeys(m for m, _ in cells))
    items = list(dict.fromkeys(k for _, k in cells))
    rewards = pd.DataFrame(
        [(m, k, r, "") for (m, k), r in cells.items()], columns=["model", "item", "reward", "reward_model"]
    )
    return ParsedImport(
        benchmark="",
        kind="arena",
        items=pd.DataFrame({"key": items, "kind": "arena"}),
        models=pd.DataFrame({"name": models}),
        rewards=rewards,
    )
