"""AlpacaEval annotations: ``results/<model>/<annotator>/annotations.json`` (alpaca_eval 0.6.x), a JSON
array with one object per instruction: ``instruction``, ``dataset``, ``generator_1`` (the baseline),
``output_1``, ``generator_2`` (the model), ``output_2``, ``annotator``, ``preference``.

``preference`` follows the package's own convention: 1 = the baseline's output is better, 2 = the model's;
AlpacaEval 2's weighted annotators give the judge's probability-weighted value in [1, 2]; a draw is coded
0 or 1.5 (both read as 1.5); null means the judge gave no verdict: the row is skipped and counted (a note).
Each row becomes an arena reward (model = generator_2, reward = preference, reward model = annotator) and a
pairwise preference generator_2 vs generator_1 with P(model beats baseline) = preference - 1 (judge =
annotator), so both the reward and the pairwise methods see it. The item key is a stable digest of the
instruction text (``ae-`` + 16 hex digits of its SHA-1): the same instruction gets the same key in every
model's file; ``dataset`` is the item's group.
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

import numpy as np
import pandas as pd

from .base import ImportFormatError, ParsedImport
from .readers import key_column, models_frame, read_table

TIE_CODES = (0.0, 1.5)


def instruction_key(text: str) -> str:
    return "ae-" + hashlib.sha1(text.encode("utf-8")).hexdigest()[:16]


def _benchmark(p: Path, annotator: str | None) -> str:
    return f"alpacaeval-{annotator}" if annotator else "alpacaeval"


def parse_alpacaeval(path: str | Path, *, benchmark: str | None = None, models_file=None, arch_to_family=None,
                     **_: object) -> ParsedImport:
    """Parse an AlpacaEval annotations.json into rewards and preferences (kind arena)."""
    p = Path(path)
    table = read_table(p, fmt="jsonl")
    if table.frame.empty:
        raise ImportFormatError(p, "line 1", "no annotations", "pass results/<model>/<annotator>/annotations.json")
    for col in ("instruction", "generator_1", "generator_2", "preference"):
        table.require(col, "an annotations.json written by AlpacaEval")
    gen1 = key_column(table, "generator_1")
    gen2 = key_column(table, "generator_2")
    judges = ["" if v is None or (isinstance(v, float) and math.isnan(v)) else str(v)
              for v in table.frame["annotator"].tolist()] if "annotator" in table.frame.columns else [""] * len(gen1)
    rows, skipped = [], 0
    for i, (inst, pref) in enumerate(zip(table.frame["instruction"].tolist(), table.frame["preference"].tolist())):
        if pref is None or (isinstance(pref, float) and math.isnan(pref)):
            skipped += 1
            continue
        if isinstance(pref, bool) or not isinstance(pref, (int, float)) or not math.isfinite(pref):
            raise table.error(i, "preference", f"preference {str(pref)[:20]!r} is not a number",
                              "AlpacaEval preferences are numbers in [1, 2] (0 or 1.5 for a draw) or null")
        pref = 1.5 if float(pref) in TIE_CODES else float(pref)
        if not 1.0 <= pref <= 2.0:
            raise table.error(i, "preference", f"preference {pref:g} outside [1, 2]",
                              "AlpacaEval preferences are in [1, 2] (0 or 1.5 for a draw)")
        if not isinstance(inst, str) or not inst.strip():
            raise table.error(i, "instruction", "blank instruction", "every annotation needs its instruction")
        group = table.frame["dataset"].iat[i] if "dataset" in table.frame.columns else None
        rows.append((i, instruction_key(inst), inst, None if not isinstance(group, str) else group, pref))
    if not rows:
        raise ImportFormatError(p, "", f"all {skipped} preferences are null", "pass annotations with verdicts")
    idx = [r[0] for r in rows]
    keys = [r[1] for r in rows]
    item_frame = pd.DataFrame({"key": keys, "text": [r[2] for r in rows], "group": [r[3] for r in rows],
                               "kind": "arena"}).drop_duplicates("key").reset_index(drop=True)
    prefs = np.array([r[4] for r in rows])
    rewards = pd.DataFrame({"model": [gen2[i] for i in idx], "item": keys, "reward": prefs,
                            "reward_model": [judges[i] for i in idx]})
    dup = rewards.duplicated(["model", "item", "reward_model"])
    if dup.any():
        j = int(np.flatnonzero(dup.to_numpy())[0])
        raise table.error(idx[j], "instruction", f"instruction annotated twice for {rewards['model'].iat[j]!r}",
                          "keep one annotation per (model, instruction, annotator)")
    pair = np.array([gen1[i] != gen2[i] for i in idx])
    preferences = pd.DataFrame({"model_a": [gen2[i] for i in idx], "model_b": [gen1[i] for i in idx],
                                "item": keys, "prob_a": prefs - 1.0, "judge": [judges[i] for i in idx]})[pair]
    names = list(dict.fromkeys([gen2[i] for i in idx] + [gen1[i] for i in idx if gen1[i] != gen2[i]]))
    annotators = sorted({judges[i] for i in idx})
    parsed = ParsedImport(
        benchmark=benchmark or _benchmark(p, annotators[0] if len(annotators) == 1 else None),
        kind="arena", items=item_frame,
        models=models_frame(names, models_file, arch_to_family=arch_to_family),
        rewards=rewards, preferences=preferences.reset_index(drop=True), source=f"alpacaeval:{path}",
    )
    if skipped:
        parsed.notes.append(f"{skipped} annotations with a null preference skipped")
    return parsed
