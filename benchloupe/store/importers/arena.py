"""Arena rewards (issue 2, importer 4): one row per (model, prompt[, reward model]) with a float reward.

Columns: ``model``, ``prompt`` (the item key), ``reward``, optional ``reward_model`` (or one name for the
whole file with ``reward_model=``), optional prompt ``text`` and ``group``. CSV or JSONL, gzip accepted.
Rewards are stored raw; any standardisation (DualEval's global z-score, paper A.1) happens in the engine.

AlpacaEval 2 (``annotations_ae2_long.csv.gz``) imports as it is: ``model_col="generator_2"``,
``prompt_col="instruction_id"`` (or ``item_col=``), ``reward_col="preference"`` (the judge's weighted preference in [1, 2]
against the fixed baseline), ``reward_model_col="annotator"``, ``group_col="dataset"``; the instruction text
comes from ``instructions.csv.gz`` imported as item metadata into the same benchmark.
A repeated (model, prompt, reward model) is an error.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from benchloupe.hints import Opt

from .base import ParsedImport
from .long import cell_codes, default_benchmark, first_per_item
from .readers import float_column, key_column, models_frame, read_table, text_column


def parse_arena(
    path: str | Path,
    *,
    benchmark: str | None = None,
    model_col: str = "model",
    prompt_col: str = "prompt",
    item_col: str | None = None,
    reward_col: str = "reward",
    reward_model_col: str = "reward_model",
    reward_model: str | None = None,
    text_col: str = "text",
    group_col: str = "group",
    models_file: str | Path | None = None,
    arch_to_family=None,
    fmt: str | None = None,
    **_: object,
) -> ParsedImport:
    """Parse arena rewards; items get kind "arena"."""
    prompt_col = item_col or prompt_col  # --item-col works too: the prompt is the item
    table = read_table(path, fmt=fmt)
    table.require(model_col, Opt("model_col"))
    table.require(prompt_col, Opt("prompt_col"))
    table.require(reward_col, Opt("reward_col"))
    models = key_column(table, model_col)
    prompts = key_column(table, prompt_col)
    rm_col = table.optional(reward_model_col)
    if reward_model is not None:
        judges = [reward_model] * len(models)
    elif rm_col:
        judges = [j or "" for j in text_column(table, rm_col)]
    else:
        judges = [""] * len(models)
    rewards = float_column(table, reward_col)
    # (model, prompt) must be unique within each reward model: check on a combined item key.
    triples = pd.Series(list(zip(models, prompts, judges, strict=True)), dtype=object)
    dup = np.flatnonzero(triples.duplicated(keep="first").to_numpy())
    if dup.size:
        j = int(dup[0])
        first = triples.tolist().index(triples.iat[j])
        judge = f" and reward model '{judges[j]}'" if judges[j] else ""
        raise table.error(
            j, prompt_col,
            f"duplicate reward for model '{models[j]}' on prompt '{prompts[j]}'{judge} (first at line "
            f"{table.line_of(first)})",
            "keep one reward per (model, prompt, reward model)",
        )
    m_codes, i_codes, m_names, _ = cell_codes(
        table, models, [f"{p}\x00{j}" for p, j in zip(prompts, judges, strict=True)], model_col, prompt_col
    )
    p_codes, p_keys = pd.factorize(pd.Series(prompts, dtype=object), sort=False)
    items = pd.DataFrame({"key": list(p_keys), "kind": "arena"})
    for name, col in (("text", text_col), ("group", group_col)):
        values = first_per_item(p_codes, len(p_keys), text_column(table, table.optional(col)))
        if values is not None:
            items[name] = values
    frame = pd.DataFrame(
        {"model": models, "item": prompts, "reward": rewards.astype(np.float64), "reward_model": judges}
    )
    return ParsedImport(
        benchmark=benchmark or default_benchmark(path),
        kind="arena",
        items=items,
        models=models_frame(list(m_names), models_file, arch_to_family=arch_to_family),
        rewards=frame,
        source=f"arena:{path}",
    )
