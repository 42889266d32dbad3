"""Pairwise preferences (issue 2, importer 5): one row per comparison of two models on one prompt.

Columns ``model_a``, ``model_b``, ``prompt`` and either ``winner`` (``a``/``b``/``tie``, also
``model_a``/``model_b``, or the winning model's name) or ``probability`` (P(a beats b) in [0, 1]). The
parsed ``prob_a`` is 1 / 0 / 0.5 for a / b / tie. Repeated comparisons are kept (several judges or
battles per pair are normal in arena data): the n-th repeat of a (prompt, a, b) gets the item key
``prompt#n``; a model compared with itself is an error.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from benchloupe.hints import Opt, say

from .base import ParsedImport
from .battles import repeat_keys
from .long import default_benchmark, first_per_item
from .readers import float_column, key_column, models_frame, read_table, text_column

WINNER_WORDS = {
    "a": 1.0,
    "model_a": 1.0,
    "b": 0.0,
    "model_b": 0.0,
    "tie": 0.5,
    "draw": 0.5,
    "tie (bothbad)": 0.5,
}


def parse_preferences(
    path: str | Path,
    *,
    benchmark: str | None = None,
    model_a_col: str = "model_a",
    model_b_col: str = "model_b",
    prompt_col: str = "prompt",
    item_col: str | None = None,
    winner_col: str = "winner",
    probability_col: str = "probability",
    text_col: str = "text",
    group_col: str = "group",
    models_file: str | Path | None = None,
    arch_to_family=None,
    fmt: str | None = None,
    **_: object,
) -> ParsedImport:
    """Parse pairwise preferences into ``ParsedImport.preferences`` (model_a, model_b, item, prob_a)."""
    prompt_col = item_col or prompt_col  # --item-col works too: the prompt is the item
    table = read_table(path, fmt=fmt)
    for col, opt in (
        (model_a_col, Opt("model_a_col")),
        (model_b_col, Opt("model_b_col")),
        (prompt_col, Opt("prompt_col")),
    ):
        table.require(col, opt)
    a = key_column(table, model_a_col)
    b = key_column(table, model_b_col)
    prompts = key_column(table, prompt_col)
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        if x == y:
            raise table.error(i, model_b_col, f"model '{x}' compared with itself", "drop self-comparisons")
    if table.optional(probability_col):
        prob = float_column(table, probability_col)
        bad = np.flatnonzero((prob < 0) | (prob > 1))
        if bad.size:
            raise table.error(
                int(bad[0]),
                probability_col,
                f"probability {prob[bad[0]]:g} outside [0, 1]",
                "give P(model_a beats model_b)",
            )
    else:
        table.require(winner_col, say(Opt("winner_col"), " (or give a probability column)"))
        prob = np.empty(len(a))
        for i, w in enumerate(text_column(table, winner_col)):
            word = (w or "").strip()
            if word.lower() in WINNER_WORDS:
                prob[i] = WINNER_WORDS[word.lower()]
            elif word == a[i]:
                prob[i] = 1.0
            elif word == b[i]:
                prob[i] = 0.0
            else:
                raise table.error(
                    i,
                    winner_col,
                    f"winner {w!r} is neither a, b, tie nor one of the two models",
                    "write a, b or tie (or the winning model's name)",
                )
    prompts = repeat_keys(prompts, a, b, [""] * len(a))  # a repeated comparison is kept, not overwritten
    p_codes, p_keys = pd.factorize(pd.Series(prompts, dtype=object), sort=False)
    items = pd.DataFrame({"key": list(p_keys), "kind": "arena"})
    for name, col in (("text", text_col), ("group", group_col)):
        values = first_per_item(p_codes, len(p_keys), text_column(table, table.optional(col)))
        if values is not None:
            items[name] = values
    names = list(dict.fromkeys(m for pair in zip(a, b, strict=True) for m in pair))
    prefs = pd.DataFrame({"model_a": a, "model_b": b, "item": prompts, "prob_a": prob})
    return ParsedImport(
        benchmark=benchmark or default_benchmark(path),
        kind="arena",
        items=items,
        models=models_frame(names, models_file, arch_to_family=arch_to_family),
        preferences=prefs,
        source=f"preferences:{path}",
    )
