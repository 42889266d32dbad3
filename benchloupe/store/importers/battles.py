"""Chatbot Arena battles (``clean_battle_*.json`` dumps, a JSON array; JSONL and CSV too): one row per battle
with ``model_a``, ``model_b``, ``winner`` (``model_a``, ``model_b``, ``tie``, ``tie (bothbad)``; also ``a``/``b``),
``question_id`` (the prompt) and optional ``judge`` (the voter or judge model).

Each battle becomes a pairwise preference, P(a beats b) = 1 / 0 / 0.5 for a win of a / of b / either tie.
Battles repeat (the same pair on the same question by the same judge); each one counts, so a repeat gets the
item key ``<question_id>#<n>`` (n = 2, 3 ...) instead of overwriting the first. Rows without a question id
are keyed by their battle index (``battle-<n>``).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from benchloupe.hints import Opt

from .base import ImportFormatError, ParsedImport
from .long import default_benchmark
from .readers import key_column, models_frame, read_table, text_column

WINNERS = {"model_a": 1.0, "a": 1.0, "model_b": 0.0, "b": 0.0, "tie": 0.5, "tie (bothbad)": 0.5, "draw": 0.5}


def repeat_keys(prompts: list[str], a: list[str], b: list[str], judges: list[str]) -> list[str]:
    """Item keys that keep repeated comparisons: the n-th repeat of (prompt, a, b, judge) gets ``prompt#n``
    (the store keeps one preference per item, pair and judge, so a repeat would overwrite the first)."""
    seen: dict[tuple, int] = {}
    out = []
    for q, x, y, j in zip(prompts, a, b, judges):
        n = seen.get((q, x, y, j), 0) + 1
        seen[(q, x, y, j)] = n
        out.append(q if n == 1 else f"{q}#{n}")
    return out


def parse_battles(path: str | Path, *, benchmark: str | None = None, item_col: str | None = None,
                  prompt_col: str | None = None, judge_col: str = "judge", models_file=None, arch_to_family=None,
                  fmt: str | None = None, **_: object) -> ParsedImport:
    """Parse Chatbot Arena battles into preferences (kind arena)."""
    p = Path(path)
    table = read_table(p, fmt=fmt)
    for col in ("model_a", "model_b", "winner"):
        table.require(col, "a Chatbot Arena battle file")
    a, b = key_column(table, "model_a"), key_column(table, "model_b")
    qcol = table.optional(item_col or prompt_col or "question_id")
    if (item_col or prompt_col) and qcol is None:
        table.require(item_col or prompt_col, Opt("item_col"))
    questions = [None if v is None else str(v) for v in text_column(table, qcol)] if qcol else [None] * len(a)
    judges = [j or "" for j in text_column(table, table.optional(judge_col))] if table.optional(judge_col) \
        else [""] * len(a)
    prob = []
    for i, w in enumerate(text_column(table, "winner")):
        if a[i] == b[i]:
            raise table.error(i, "model_b", f"model {a[i]!r} battles itself", "drop self-battles")
        word = (w or "").strip().lower()
        if word not in WINNERS:
            raise table.error(i, "winner", f"winner {w!r} is not model_a, model_b, tie or tie (bothbad)",
                              "Chatbot Arena battles name the winner as model_a, model_b, tie or tie (bothbad)")
        prob.append(WINNERS[word])
    keys = repeat_keys([q or f"battle-{i + 1}" for i, q in enumerate(questions)], a, b, judges)
    if not keys:
        raise ImportFormatError(p, "", "no battles", "pass a battle dump")
    prefs = pd.DataFrame({"model_a": a, "model_b": b, "item": keys, "prob_a": prob, "judge": judges})
    items = pd.DataFrame({"key": list(dict.fromkeys(keys)), "kind": "arena"})
    names = list(dict.fromkeys(m for pair in zip(a, b) for m in pair))
    return ParsedImport(benchmark=benchmark or default_benchmark(path), kind="arena", items=items,
                        models=models_frame(names, models_file, arch_to_family=arch_to_family),
                        preferences=prefs, source=f"battles:{path}")
