"""HELM per-instance results: ``benchmark_output/runs/<suite>/<run>/per_instance_stats.json`` (crfm-helm),
with the model read from ``run_spec.json`` beside it.

``per_instance_stats.json`` is a JSON array of ``{"instance_id", "train_trial_index", ["perturbation"],
"stats": [{"name": {"name", "split", ["perturbation"]}, "count", "sum", "mean", ...}]}``. The chosen stat
(``metric=``, default ``exact_match``) of the unperturbed instance is its result: mean >= ``threshold``
(default 1) is correct; several train trials give successes/trials. ``run_spec.json`` gives the model
(``adapter_spec.model``) and the run name ``<scenario>:<arg>=<v>,...,model=<m>``: the benchmark is the
scenario, the item group is the run's other arguments (e.g. ``subject=anatomy,method=multiple_choice_joint``)
and items are keyed ``<group>/<instance_id>`` (HELM instance ids repeat across subjects), the same for every
model run on that scenario. With ``scenario_state.json`` in the run folder the items get their input text and
correct reference (and, for a multiple-choice run, the references as choices and chance = 1/choices).

The option each model chose is kept per cell (issue 33), so that the item audit can suggest a key; the score
stays HELM's. A ``multiple_choice_separate_*`` run writes it as the per-instance stat ``predicted_index`` (the
argmax of the references' scores); a ``multiple_choice_joint`` run as its completion: the most likely
completion's text, stripped, mapped back to a reference's text by the request state's ``output_mapping`` ("C" ->
the third reference), read from ``scenario_state.json``. A letter outside the mapping (a small model answering
"M"), a run with several train trials, or a run that is not multiple choice: no option.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from benchloupe.hints import Opt, say

from .base import ImportFormatError, ParsedImport
from .readers import load_json, models_frame

FIX = "pass benchmark_output/runs/<suite>/<run>/per_instance_stats.json (run_spec.json next to it)"


def _run_spec(p: Path, model: str | None) -> tuple[str, str, str, str]:
    """(scenario, group, model, adaptation method) from run_spec.json beside ``p``."""
    spec_path = p.parent / "run_spec.json"
    spec = load_json(spec_path, FIX) if spec_path.is_file() else {}
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
                                say("give the model with ", Opt("model")))
    method = adapter.get("method") or next(
        (a.split("=", 1)[1] for a in args.split(",") if a.startswith("method=")), "")
    return scenario, group, str(name), str(method)


def _instances(p: Path) -> tuple[dict[str, dict], dict[tuple[str, int], int]]:
    """From ``scenario_state.json`` beside ``p`` (when present): each instance's text, correct reference and
    choices; and the reference each unperturbed joint multiple-choice request chose, by (instance, train trial)."""
    state_path = p.parent / "scenario_state.json"
    if not state_path.is_file():
        return {}, {}
    state = load_json(state_path, FIX)
    out: dict[str, dict] = {}
    picked: dict[tuple[str, int], int] = {}
    for rs in state.get("request_states") or [] if isinstance(state, dict) else []:
        inst = rs.get("instance") if isinstance(rs, dict) else None
        if not isinstance(inst, dict) or inst.get("perturbation"):
            continue
        iid = str(inst.get("id"))
        refs = [r for r in inst.get("references") or [] if isinstance(r, dict)]
        texts = [str((r.get("output") or {}).get("text", "")) for r in refs]
        if iid not in out:
            correct = [t for t, r in zip(texts, refs) if "correct" in (r.get("tags") or [])]
            text = (inst.get("input") or {}).get("text") if isinstance(inst.get("input"), dict) else None
            out[iid] = {"text": None if text is None else str(text), "answer": correct[0] if correct else None,
                        "choices": texts if len(texts) > 1 else None}
        choice = _joint_choice(rs, texts)
        if choice is not None:
            picked[(iid, _trial(rs.get("train_trial_index")))] = choice
    return out, picked


def _trial(value) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _joint_choice(rs: dict, texts: list[str]) -> int | None:
    """The reference a joint multiple-choice request chose (-1: an answer outside its mapping), None when the
    request is not one (no output mapping, or no completion)."""
    mapping = rs.get("output_mapping")
    result = rs.get("result")
    if not isinstance(mapping, dict) or not mapping or not isinstance(result, dict):
        return None
    completions = [c for c in result.get("completions") or [] if isinstance(c, dict)]
    if not completions:
        return None

    def logprob(c: dict) -> float:
        v = c.get("logprob")
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else -math.inf

    best = max(completions, key=logprob)  # HELM scores the most likely completion
    chosen = mapping.get(str(best.get("text") or "").strip())
    return texts.index(str(chosen)) if chosen is not None and str(chosen) in texts else -1


def parse_helm(path: str | Path, *, benchmark: str | None = None, metric: str | None = None,
               threshold: float | None = None, model: str | None = None, models_file=None, arch_to_family=None,
               **_: object) -> ParsedImport:
    """Parse one HELM run's per_instance_stats.json into a 1 x items static matrix."""
    p = Path(path)
    stat = metric or "exact_match"
    threshold = 1.0 if threshold is None else float(threshold)
    data = load_json(p, FIX)
    if not isinstance(data, list):
        raise ImportFormatError(p, "", "per_instance_stats.json must be a JSON array", FIX)
    scenario, group, name, method = _run_spec(p, model)
    succ: dict[str, int] = {}
    trials: dict[str, int] = {}
    predicted: dict[str, int] = {}  # the stat predicted_index of a separate multiple-choice run
    names_seen: set[str] = set()
    for i, inst in enumerate(data):
        if not isinstance(inst, dict) or not isinstance(inst.get("stats"), list):
            raise ImportFormatError(p, f"[{i}]", "an entry is not an object with 'stats'", FIX)
        if inst.get("perturbation"):
            continue
        iid = inst.get("instance_id")
        if not isinstance(iid, (str, int)) or isinstance(iid, bool):
            raise ImportFormatError(p, f"[{i}].instance_id", "missing or not a string", FIX)
        key = f"{group}/{iid}" if group else str(iid)
        counted = False
        for s in inst["stats"]:
            sname = s.get("name") if isinstance(s, dict) else None
            if not isinstance(sname, dict):
                continue
            names_seen.add(str(sname.get("name")))
            if sname.get("name") == "predicted_index" and not sname.get("perturbation"):
                v = s.get("mean")
                if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0:
                    predicted[key] = int(v) if key not in predicted else -1  # several trials: not one choice
            if sname.get("name") != stat or sname.get("perturbation") or counted:
                continue
            mean = s.get("mean")
            if isinstance(mean, bool) or not isinstance(mean, (int, float)) or not math.isfinite(mean):
                raise ImportFormatError(p, f"[{i}].stats.{stat}", f"mean {str(mean)[:20]!r} is not a number", FIX)
            succ[key] = succ.get(key, 0) + int(mean >= threshold)
            trials[key] = trials.get(key, 0) + 1
            counted = True
    if not trials:
        have = ", ".join(sorted(names_seen)[:10])
        raise ImportFormatError(p, "", f"no unperturbed '{stat}' stat (stats: {have})", say("choose one with ", Opt("metric")))
    keys = list(trials)
    inst, picked = _instances(p)
    ids = [k.rsplit("/", 1)[-1] for k in keys]
    info = [inst.get(i, {}) for i in ids]
    multiple_choice = "multiple_choice" in group or method.startswith("multiple_choice")
    meta = []
    for k, i in zip(keys, info):
        m = {"helm_instance_id": k.rsplit("/", 1)[-1], "helm_stat": stat}
        if i.get("choices") and multiple_choice:
            m["choices"] = i["choices"]
        meta.append(m)
    items = pd.DataFrame({"key": keys, "text": [i.get("text") for i in info], "answer": [i.get("answer") for i in info],
                          "group": group or None,
                          "chance": [1.0 / len(i["choices"]) if multiple_choice and i.get("choices") else None
                                     for i in info], "metadata": meta}, dtype=object)
    parsed = ParsedImport(benchmark=benchmark or scenario, kind="static", items=items,
                          models=models_frame([name], models_file, arch_to_family=arch_to_family),
                          source=f"helm:{path}")
    n = np.asarray([[trials[k] for k in keys]], np.int32)
    s = np.asarray([[succ[k] for k in keys]], np.int32)
    if (n == 1).all():
        parsed.correct = s.astype(np.int8)
        if multiple_choice:
            _keep_choices(parsed, keys, ids, info, predicted, picked)
    else:
        parsed.successes, parsed.trials = s, n
    return parsed


def _keep_choices(parsed: ParsedImport, keys: list[str], ids: list[str], info: list[dict],
                  predicted: dict[str, int], picked: dict[tuple[str, int], int]) -> None:
    """The reference each instance chose, kept beside HELM's score (issue 33): ``predicted_index`` (separate
    runs), else the joint run's mapped completion; -1 where neither is known or it is not among the choices."""
    labels, chosen = [], []
    for k, iid, i in zip(keys, ids, info):
        choices = i.get("choices") or []
        c = predicted.get(k, picked.get((iid, 0), -1))
        labels.append(list(choices))
        chosen.append(c if 0 <= c < len(choices) else -1)
    if any(c >= 0 for c in chosen):
        parsed.items["choices"] = labels
        parsed.options = np.asarray([chosen], dtype=np.int16)
        parsed.option_labels = labels
        parsed.score_from_options = False
