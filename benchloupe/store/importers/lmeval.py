"""lm-evaluation-harness per-sample logs: ``samples_<task>_<timestamp>.jsonl`` written by
``lm_eval --log_samples --output_path OUT`` (0.4.x) into ``OUT/<model_name>/``, one model per file; also the
same rows as parquet (the Open LLM Leaderboard's ``details`` datasets).

Each row has ``doc_id``, ``doc``, ``target``, ``arguments`` (0.4.0-0.4.2: a list of argument tuples; later:
``{"gen_args_0": {"arg_0": context, "arg_1": continuation}, ...}``), ``resps``, ``filtered_resps``,
``filter``, ``metrics`` (the metric names) and one field per metric (``acc``, ``exact_match`` ...).
Correctness is the chosen metric (``metric=``; default: the row's first ``metrics`` name, or without that list
the first of acc_norm, acc, exact_match, prompt_level_strict_acc the row has), 0/1 or true/false
unless ``threshold=`` turns a score into pass (>= threshold) / fail. Generation tasks log one row per filter
(gsm8k "strict-match", "flexible-extract"): ``filter_name=`` picks one, default the first seen.

The filter a generation task's rows were scored under is named in a note (the import summary), with the others
the file holds, whenever it is not lm-eval's "none".

Re-runs (issue 23): users re-run a task, and ``lm_eval --output_path OUT`` writes every run into the same model
folder with its own timestamp. Each parsed file carries its run (``ParsedImport.run``: task, timestamp, the
settings that change results, ``reruns=``), and the batch import (``jobs.imports``) resolves several runs of one
(benchmark, model, task): ``reruns="newest"`` (default) keeps the latest run, as leaderboard "latest" details do,
with a note naming the files it supersedes; ``reruns="trials"`` keeps every run as a repeated trial
(successes/trials per item) when their settings agree and refuses naming the settings that differ. The settings
compared are the results file's ``config.model``, ``config.model_args``, ``config.gen_kwargs``, ``config.limit``,
the task's ``n-shot``, ``versions``, ``configs`` and ``task_hashes`` entries, the chat template and system
instruction hashes and ``fewshot_as_multiturn``, and the filter; seeds are not compared (a repeat with another
seed is still a repeat). The documents must agree too (issue 37): each run carries a digest of every item's
document and target (``run["docs"]``), and runs whose documents differ are refused naming the first such item.
A file already counted (the same bytes, in this batch or an earlier import) is not counted again, and a later
trials import adds to the trials already stored or refuses (store/harness_runs.py).

Model: ``model=``, else ``model_name`` of the sibling ``results_<timestamp>.json`` (or ``pretrained=`` of
``config.model_args``). ``--model dummy`` gets a random name each run, so its logs need ``model=``.
Item key (``item_key=``, a dotted path into the row such as ``doc.id``; a bare name is looked up in ``doc``
first): by default the document's own stable id — the first of ``id``, ``question_id``, ``qid``, ``uid``,
``sample_id``, ``task_id`` that every document has, uniquely — else ``doc_id`` (the row's position in the
split, which changes when the split does). Multiple choice (several loglikelihood arguments and an index
target) keeps the choices (``metadata.choices``), stores the answer as the correct choice's text and sets
``chance`` = 1 / number of choices. The document is kept in item metadata; ``group_col=`` names the document
field that is the item's group. Text is the prompt context; benchmark defaults to the task name.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd

from benchloupe.hints import Opt, say

from .base import ImportFormatError, ParsedImport, json_kind
from .names import dotted, key_text
from .readers import Table, base_suffix, load_text, models_frame, read_table

NAME_RE = re.compile(r"^samples_(?P<task>.+)_(?P<stamp>[0-9]{4}-[0-9]{2}-[0-9]{2}T[^_]+)\.(jsonl|parquet)(\.gz)?$")
RESULTS_RE = re.compile(r"^results_[0-9]{4}-[0-9]{2}-[0-9]{2}T.*\.json$")
STABLE_IDS = ("id", "question_id", "qid", "uid", "sample_id", "task_id")
# Without a ``metrics`` list (some parquet details): the first of these 0/1 metrics that the row has.
KNOWN_METRICS = ("acc_norm", "acc", "exact_match", "prompt_level_strict_acc", "prompt_level_loose_acc")
FIX = "pass a samples_<task>_*.jsonl written with --log_samples"


def task_of(path: Path) -> str:
    m = NAME_RE.match(path.name)
    return m.group("task") if m else path.name.split(".")[0].removeprefix("samples_")


def _results(path: Path) -> dict | None:
    """The results_*.json next to the samples file (same timestamp preferred), parsed."""
    m = NAME_RE.match(path.name)
    candidates = sorted(path.parent.glob("results_*.json"))
    if m:
        candidates = [c for c in candidates if m.group("stamp") in c.name] or candidates
    for cand in candidates:
        try:
            res = json.loads(load_text(cand))
        except (ImportFormatError, ValueError, RecursionError):
            continue
        if isinstance(res, dict):
            return res
    return None


RERUNS = ("newest", "trials")
SETTING_KEYS = ("model", "model_args", "gen_kwargs", "limit")
RUN_KEYS = ("system_instruction_sha", "chat_template_sha", "fewshot_as_multiturn")


def _own_results(path: Path) -> dict | None:
    """The results file written by the same run as ``path`` (same timestamp), or None."""
    m = NAME_RE.match(path.name)
    if not m:
        return None
    for cand in sorted(path.parent.glob(f"results_{m.group('stamp')}.json")):
        try:
            res = json.loads(load_text(cand))
        except (ImportFormatError, json.JSONDecodeError):
            continue
        if isinstance(res, dict):
            return res
    return None


def run_settings(path: Path, task: str) -> dict:
    """What a run of ``task`` was run with, from its own results file (module docstring); {} without one."""
    res = _own_results(path)
    if res is None:
        return {}
    config = res.get("config") if isinstance(res.get("config"), dict) else {}
    out = {f"config.{k}": config.get(k) for k in SETTING_KEYS}
    for key in ("n-shot", "versions", "configs", "task_hashes"):
        table = res.get(key) if isinstance(res.get(key), dict) else {}
        out[f"{key}.{task}"] = table.get(task)
    out.update({k: res.get(k) for k in RUN_KEYS})
    return out


def recorded_model(path: Path) -> str:
    """Who ran, as the run's own results file records it (``model_name``, else the model of ``model_args``), or the
    folder lm-eval wrote into when there is no results file: runs of one task are re-runs only when this agrees
    (``--model`` renaming three models' files to one name does not make them re-runs)."""
    res = _own_results(path)
    if res is not None:
        if isinstance(res.get("model_name"), str) and res["model_name"].strip():
            return res["model_name"].strip()
        config = res.get("config") if isinstance(res.get("config"), dict) else {}
        args = config.get("model_args")
        if isinstance(args, dict):
            for key in ("pretrained", "model", "path"):
                if args.get(key):
                    return f"{config.get('model')}:{args[key]}"
        if args:
            return f"{config.get('model')}:{args}"
    return f"folder:{path.parent.resolve()}"


def model_from_results(path: Path) -> str | None:
    """Model name from the sibling results file; ImportFormatError for the dummy model's random name."""
    res = _results(path)
    if res is None:
        return None
    config = res.get("config") if isinstance(res.get("config"), dict) else {}
    if config.get("model") == "dummy" or res.get("model_source") == "dummy":
        raise ImportFormatError(path, "", "written by lm-eval's dummy model, whose name is random each run",
                                say("name the model with ", Opt("model", "NAME")))
    if isinstance(res.get("model_name"), str) and res["model_name"].strip():
        return res["model_name"].strip()
    args = config.get("model_args") or ""
    if isinstance(args, dict):
        args = ",".join(f"{k}={v}" for k, v in args.items())
    for part in str(args).split(","):
        key, _, value = part.partition("=")
        if key.strip() in {"pretrained", "model", "path"} and value.strip():
            return value.strip()
    return None


def _arguments(arguments) -> list[tuple]:
    if isinstance(arguments, str) and arguments[:1] in "[{":
        try:  # parquet details may hold the arguments as a JSON string
            arguments = json.loads(arguments)
        except (ValueError, RecursionError):
            return []
    if isinstance(arguments, dict):
        return [tuple(a.values()) if isinstance(a, dict) else (a,) for a in arguments.values()]
    if isinstance(arguments, list):
        return [tuple(a) if isinstance(a, (list, tuple)) else (a,) for a in arguments]
    return []


def _choices(args: list[tuple], target) -> tuple[list[str] | None, int | None]:
    """(choices, answer index) of a multiple-choice row; (None, None) otherwise."""
    if len(args) < 2 or not all(len(a) >= 2 and isinstance(a[1], str) for a in args):
        return None, None
    try:
        idx = int(str(target).strip())
    except ValueError:
        return None, None
    if not 0 <= idx < len(args):
        return None, None
    return [a[1].strip() for a in args], idx


def _read(p: Path) -> Table:
    if base_suffix(p) == ".parquet":
        from .columnar import read_parquet

        return read_parquet(p)
    return read_table(p, fmt="jsonl")


def _key_field(rows: list[dict], item_key: str | None) -> str:
    if item_key:
        return item_key
    for name in STABLE_IDS:
        values = [key_text(r["doc"].get(name)) if isinstance(r.get("doc"), dict) else None for r in rows]
        if all(v is not None for v in values) and len(set(values)) == len(values):
            return f"doc.{name}"
    return "doc_id"


def _lookup(row: dict, path: str):
    try:
        return dotted(row, path)
    except KeyError:
        if isinstance(row.get("doc"), dict) and not path.startswith("doc."):
            return dotted(row["doc"], path)
        raise


def parse_lmeval(
    path: str | Path,
    *,
    benchmark: str | None = None,
    model: str | None = None,
    metric: str | None = None,
    filter_name: str | None = None,
    threshold: float | None = None,
    item_key: str | None = None,
    group_col: str | None = None,
    reruns: str = "newest",
    **_: object,
) -> ParsedImport:
    """Parse one lm-eval samples file (JSONL or parquet) into a 1 x items static matrix; ``reruns`` says what the
    batch import does with several runs of one task (module docstring)."""
    p = Path(path)
    if reruns not in RERUNS:
        raise ImportFormatError(p, "", say(Opt("reruns"), f" is {str(reruns)[:20]!r}"),
                                "use newest (the latest run wins) or trials (every run is a repeated trial)")
    threshold = None if threshold is None else float(threshold)
    table = _read(p)
    if table.frame.empty:
        raise ImportFormatError(p, "line 1", "no samples", FIX)
    records = table.frame.to_dict("records")
    for i, row in enumerate(records):
        doc_id = row.get("doc_id")
        if key_text(doc_id) is None:
            missing = doc_id is None or (isinstance(doc_id, float) and doc_id != doc_id)  # absent: NaN in the frame
            what = "no 'doc_id'" if missing else \
                f"'doc_id' is {json_kind(doc_id)} ({str(doc_id)[:20]}), not a whole number or a string"
            raise table.error(i, "doc_id", what,
                              "every row of an lm-eval samples file has doc_id; re-run with --log_samples")
    name = model or model_from_results(p)
    if not name:
        raise ImportFormatError(p, "", "no model name (no results_*.json next to the file)",
                                say("give the model with ", Opt("model", "NAME")))
    chosen_filter = filter_name
    kept: list[tuple[int, dict]] = []
    filters: list[str] = []
    for i, row in enumerate(records):
        row_filter = row.get("filter") if isinstance(row.get("filter"), str) else None
        if row_filter is not None and row_filter not in filters:
            filters.append(row_filter)
        chosen_filter = chosen_filter or row_filter
        if row_filter is None or row_filter == chosen_filter:
            kept.append((i, row))
    if not kept:
        raise ImportFormatError(p, "", f"no rows for filter {chosen_filter!r} (the file has "
                                f"{', '.join(filters) or 'no filter'})", say("pick a filter with ", Opt("filter_name")))
    key_field = _key_field([r for _, r in kept], item_key)
    keys: dict[str, int] = {}
    values: list[int] = []
    items: list[dict] = []
    docs: dict[str, str] = {}
    chosen: list[int] = []
    for i, row in kept:
        names = row.get("metrics") if isinstance(row.get("metrics"), list) else []
        names = names or [m for m in KNOWN_METRICS if m in row and row[m] is not None]
        field = metric or (names[0] if names else None)
        if field is None or field not in row or row[field] is None:
            raise table.error(i, field or "metrics", f"no metric field '{field}'",
                              say("choose the metric with ", Opt("metric"), " (e.g. acc, exact_match)"))
        value = row[field]
        if isinstance(value, bool) or (isinstance(value, (int, float)) and value in (0, 1)):
            score = int(value)
        elif isinstance(value, (int, float)) and threshold is not None and np.isfinite(value):
            score = int(float(value) >= threshold)
        else:
            raise table.error(i, field, f"metric '{field}' = {str(value)[:30]!r} is not 0/1",
                              say("pick a 0/1 metric with ", Opt("metric"), " or ", Opt("threshold", verb="pass")))
        try:
            key = key_text(_lookup(row, key_field))
        except KeyError:
            key = None
        if key is None:
            raise table.error(i, key_field, f"no usable item key at '{key_field}'",
                              say("name a field that identifies the item with ", Opt("item_key"), " (e.g. doc.id)"))
        if key in keys:
            raise table.error(i, key_field, f"item key {key} appears twice for filter {chosen_filter!r}",
                              say("pick one filter with ", Opt("filter_name"), ", or another item key with ", Opt("item_key")))
        keys[key] = len(values)
        docs[key] = document_digest(row)
        values.append(score)
        items.append(_item_row(table, i, row, group_col))
        chosen.append(chosen_choice(row, field))
    frame = pd.DataFrame({c: [r[c] for r in items] for c in ("text", "answer", "group", "chance", "metadata")},
                         dtype=object)
    frame.insert(0, "key", list(keys))
    options = labels = None
    if any(c >= 0 for c in chosen):  # multiple choice: the chosen option of every sample is kept (issue 33)
        labels = [list(r["metadata"].get("choices") or []) for r in items]
        frame["choices"] = labels
        options = np.asarray([chosen], dtype=np.int16)
    notes = []
    if chosen_filter is not None and filters != ["none"]:
        others = [f for f in filters if f != chosen_filter]
        notes.append(say(f"scored under lm-eval filter {chosen_filter!r}"
                         + (f" (the file also has {', '.join(repr(f) for f in others)}; choose with " if others
                            else " (choose another with "), Opt("filter_name"), ")"))
    task = task_of(p)
    m = NAME_RE.match(p.name)
    run = {"tool": "lm-eval", "task": task, "stamp": m.group("stamp") if m else "", "reruns": reruns,
           "identity": recorded_model(p),
           "settings": {**run_settings(p, task), "filter": chosen_filter}, "path": str(path), "docs": docs}
    return ParsedImport(
        benchmark=benchmark or task,
        kind="static",
        items=frame,
        models=models_frame([str(name)]),
        correct=np.asarray([values], dtype=np.int8),
        source=f"lmeval:{path}",
        notes=notes,
        run=run,
        options=options,
        option_labels=labels,
        score_from_options=False,
    )


def chosen_choice(row: dict, metric: str | None) -> int:
    """The option a multiple-choice sample chose: the argmax of its per-choice log-likelihoods (``filtered_resps``,
    else ``resps``), divided by each choice's length in characters when the metric is ``acc_norm`` (as lm-eval
    scores it); -1 when the row is not multiple choice or a log-likelihood is unreadable."""
    args = _arguments(row.get("arguments"))
    choices, _idx = _choices(args, row.get("target"))
    if not choices:
        return -1
    resps = row.get("filtered_resps") or row.get("resps")
    if not isinstance(resps, list) or len(resps) != len(choices):
        return -1
    lls = []
    for r in resps:
        while isinstance(r, list) and r and isinstance(r[0], list):  # resps nest one level deeper
            r = r[0]
        try:
            lls.append(float(r[0] if isinstance(r, list) else r))
        except (TypeError, ValueError, IndexError):
            return -1
    ll = np.asarray(lls)
    if metric == "acc_norm":
        ll = ll / np.maximum([len(a[1]) for a in args], 1)
    if not np.isfinite(ll).all():
        return -1
    return int(np.argmax(ll))


def document_digest(row: dict) -> str:
    """A short digest of one sample's document and target: two runs count as trials of one item only when these
    agree (issue 37). Computed from the row itself, not lm-eval's ``doc_hash``/``target_hash`` (absent before
    0.4.3), so logs of any version compare alike."""
    text = json.dumps([row.get("doc"), row.get("target")], sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _prompt_text(context) -> str | None:
    """The prompt; a chat-templated prompt (a JSON list of messages, possibly in a list) becomes its contents."""
    if isinstance(context, list) and len(context) == 1:
        context = context[0]
    if context is None:
        return None
    text = str(context)
    if text.startswith("[{"):
        try:
            messages = json.loads(text)
        except (ValueError, RecursionError):
            return text
        if isinstance(messages, list) and all(isinstance(m, dict) for m in messages):
            return "\n".join(str(m.get("content", "")) for m in messages)
    return text


def _item_row(table: Table, i: int, row: dict, group_col: str | None) -> dict:
    args = _arguments(row.get("arguments"))
    target = row.get("target")
    choices, idx = _choices(args, target)
    doc = row.get("doc") if isinstance(row.get("doc"), dict) else {}
    meta: dict = {"doc_id": row.get("doc_id"), "doc": doc}
    if choices:
        meta["choices"], meta["answer_index"] = choices, idx
    group = None
    if group_col:
        try:
            g = _lookup(row, group_col)
        except KeyError:
            raise table.error(i, group_col, f"no document field '{group_col}'",
                              say("name a field of the document with ", Opt("group_col"))) from None
        group = None if g is None else str(g)
    return {"text": _prompt_text(args[0][0] if args and args[0] else None),
            "answer": choices[idx] if choices else (None if target is None else str(target)),
            "group": group, "chance": 1.0 / len(choices) if choices else None, "metadata": meta}
