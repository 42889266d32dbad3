"""HELM per-instance results: ``benchmark_output/runs/<suite>/<run>/per_instance_stats.json`` (crfm-helm),
with the model read from ``run_spec.json`` beside it.

``per_instance_stats.json`` is a JSON array of ``{"instance_id", "train_trial_index", ["perturbation"],
"stats": [{"name": {"name", "split", ["perturbation"]}, "count", "sum", "mean", ...}]}``. The chosen stat
(``metric=``, default ``exact_match``) of the unperturbed instance is its result: mean >= ``threshold``
(default 1) is correct; several train trials give successes/trials. ``run_spec.json`` gives the model
(``adapter_spec.model``) and the run name ``<scenario>:<arg>=<v>,...,model=<m>``: the benchmark is the
scenario, the item group is the run's other arguments (e.g. ``subject=anatomy,method=multiple_choice_joint``)
and items are keyed ``<group>/<instance_id>`` (HELM instance ids repeat across subjects), the same for every
model run on that scenario.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from .base import ImportFormatError, ParsedImport
from .readers import load_text, models_frame

FIX = "pass benchmark_output/runs/<suite>/<run>/per_instance_stats.json (run_spec.json next to it)"


def _json(p: Path):
    try:
        return json.loads(load_text(p))
    except json.JSONDecodeError as exc:
        raise ImportFormatError(p, f"line {exc.lineno}, column {exc.colno}", f"not JSON ({exc.msg})", FIX) from None


def _run_spec(p: Path, model: str | None) -> tuple[str, str, str]:
    """(scenario, group, model) from run_spec.json beside ``p``."""
    spec_path = p.parent / "run_spec.json"
    spec = _json(spec_path) if spec_path.is_file() else {}
    if not isinstance(spec, dict):
        raise ImportFormatError(spec_path, "", "run_spec.json is not an object", FIX)
    run = str(spec.get("name") or p.parent.name)
    scenario, _, args = run.partition(":")
    group = ",".join(a for a in args.split(",") if a and not a.startswith("model="))
    adapter = spec.get("adapter_spec") if isinstance(spec.get("adapter_spec"), dict) else {}
    name = model or adapter.get("model") or next(
        (a.split("=", 1)[1] for a in args.split(",") if a.startswith("model=")), None)
    if not name:
        raise ImportFormatError(p, "", "no model (no run_spec.json with adapter_spec.model)",
                                "give the model with --model")
    return scenario, group, str(name)


def parse_helm(path: str | Path, *, benchmark: str | None = None, metric: str | None = None,
               threshold: float | None = None, model: str | None = None, models_file=None, arch_to_family=None,
               **_: object) -> ParsedImport:
    """Parse one HELM run's per_instance_stats.json into a 1 x items static matrix."""
    p = Path(path)
    stat = metric or "exact_match"
    threshold = 1.0 if threshold is None else float(threshold)
    data = _json(p)
    if not isinstance(data, list):
        raise ImportFormatError(p, "", "per_instance_stats.json must be a JSON array", FIX)
    scenario, group, name = _run_spec(p, model)
    succ: dict[str, int] = {}
    trials: dict[str, int] = {}
    names_seen: set[str] = set()
    for i, inst in enumerate(data):
        if not isinstance(inst, dict) or not isinstance(inst.get("stats"), list):
            raise ImportFormatError(p, f"[{i}]", "an entry is not an object with 'stats'", FIX)
        if inst.get("perturbation"):
            continue
        iid = inst.get("instance_id")
        if not isinstance(iid, (str, int)) or isinstance(iid, bool):
            raise ImportFormatError(p, f"[{i}].instance_id", "missing or not a string", FIX)
        for s in inst["stats"]:
            sname = s.get("name") if isinstance(s, dict) else None
            if not isinstance(sname, dict):
                continue
            names_seen.add(str(sname.get("name")))
            if sname.get("name") != stat or sname.get("perturbation"):
                continue
            mean = s.get("mean")
            if isinstance(mean, bool) or not isinstance(mean, (int, float)) or not math.isfinite(mean):
                raise ImportFormatError(p, f"[{i}].stats.{stat}", f"mean {str(mean)[:20]!r} is not a number", FIX)
            key = f"{group}/{iid}" if group else str(iid)
            succ[key] = succ.get(key, 0) + int(mean >= threshold)
            trials[key] = trials.get(key, 0) + 1
            break
    if not trials:
        have = ", ".join(sorted(names_seen)[:10])
        raise ImportFormatError(p, "", f"no unperturbed '{stat}' stat (stats: {have})", "choose one with --metric")
    keys = list(trials)
    items = pd.DataFrame({"key": keys, "group": group or None,
                          "metadata": [{"helm_instance_id": k.rsplit("/", 1)[-1], "helm_stat": stat} for k in keys]})
    parsed = ParsedImport(benchmark=benchmark or scenario, kind="static", items=items,
                          models=models_frame([name], models_file, arch_to_family=arch_to_family),
                          source=f"helm:{path}")
    n = np.asarray([[trials[k] for k in keys]], np.int32)
    s = np.asarray([[succ[k] for k in keys]], np.int32)
    if (n == 1).all():
        parsed.correct = s.astype(np.int8)
    else:
        parsed.successes, parsed.trials = s, n
    return parsed
