"""Inspect AI evaluation logs: the ``.eval`` archive (default since Inspect 0.3.46) and the JSON log.

``.eval``: a zip (members zstd-compressed by current Inspect, deflate by older ones; see ``archive``) with
``header.json`` (``_journal/start.json`` for an unfinished run) carrying ``eval``, and one
``samples/<id>_epoch_<n>.json`` per sample and epoch. JSON log (``inspect log convert --to json``): one
object with ``eval`` and ``samples``. One model per log (``eval.model``).

Scores map to correct/incorrect: "C" (correct) = 1, "I" (incorrect) and "N" (no answer) = 0, "P" (partial) by
``partial=`` ("incorrect", the default, "correct" or "error"), true/false = 1/0, numbers ``>= threshold``
(default 1.0) = 1. ``scorer=`` picks the scorer (default: the first of the first scored sample);
``score_key=`` picks an entry of a dict-valued score. Unscored samples (errors) stay missing. With several
epochs the result is successes/trials per item (2 of 4 epochs right stays 2/4).

Items line up across tools: the key is the sample ``id`` (Inspect takes it from the dataset's ``id`` field),
or ``item_key=`` a dotted path into the sample (``metadata.doc_id``). A sample's ``choices`` are kept in
metadata. The task is multiple choice only when the log says so: a ``multiple_choice`` solver in its plan or the
``choice`` scorer (issue 23: a ``generate()`` task scored by ``match`` whose dataset happens to carry a
``choices`` field is free response, and lm-eval leaves the same items without chance). Then the answer is stored
as the choice's text (target "D" -> its text, label kept as ``answer_label``) and the guessing level ``chance``
is 1 / number of choices, or 1 / (2^n - 1) when the solver lets the model pick several answers
(``multiple_correct``: a guess is one of the non-empty subsets). Sample metadata becomes item metadata;
``group_col=`` names the metadata field that is the item's group.
Models: the provider prefix (``mockllm/``, ``vllm/`` ...) is stripped for identity, the full name is an alias.
"""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd

from benchloupe.hints import Opt, say

from .archive import ArchiveError, ArchiveTooBig, Budget, read_member
from .base import ImportFormatError, ParsedImport, bad_json_value, json_kind, not_a_file, too_deep
from .limits import ENV
from .names import dotted, harness_models, key_text
from .readers import load_json

LETTERS = {"C": 1, "I": 0, "N": 0}
SAMPLE_RE = re.compile(r"^samples/.+\.json$")
FIX = "pass a log written by inspect eval (.eval or .json)"


def _json(p: Path, where: str, raw: bytes):
    try:
        return json.loads(raw.decode("utf-8"))
    except RecursionError:
        raise too_deep(p, where, raw.decode("utf-8")) from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ImportFormatError(p, where, f"not JSON ({exc})", FIX) from None
    except ValueError as exc:
        raise bad_json_value(p, where, exc) from None


def _load(p: Path) -> tuple[dict, list[tuple[str, object]]]:
    """(eval header, [(where, sample)]) from a .eval archive or a JSON log; shapes are checked by the caller."""
    if not p.is_file():
        raise not_a_file(p)
    with open(p, "rb") as fh:
        head = fh.read(4)
    if not zipfile.is_zipfile(p) and (head.startswith(b"PK") or p.suffix.lower() == ".eval"):
        raise ImportFormatError(p, "", "truncated or not a zip archive (an Inspect .eval log is a zip file)",
                                "copy the log again whole, or convert it to a JSON log with Inspect's log convert")
    if zipfile.is_zipfile(p):
        try:
            with zipfile.ZipFile(p) as z:
                infos = {i.filename: i for i in z.infolist()}
                head_name = "header.json" if "header.json" in infos else "_journal/start.json"
                if head_name not in infos:
                    raise ImportFormatError(p, "", "no header.json in the .eval archive", FIX)
                budget = Budget()  # every member read together stays within the import limit (issue 37)
                header = _json(p, head_name, read_member(p, z, infos[head_name], budget=budget))
                samples = [(n, _json(p, n, read_member(p, z, infos[n], budget=budget)))
                           for n in sorted(infos) if SAMPLE_RE.match(n)]
        except ArchiveTooBig as exc:
            raise ImportFormatError(p, "", f"{exc}: refused before reading it into memory",
                                    f"raise the limit with ${ENV}=BYTES if the machine has the memory") from None
        except ArchiveError as exc:
            raise ImportFormatError(p, "", f"cannot read the .eval archive ({exc})", "re-export the log") from None
        except (zipfile.BadZipFile, EOFError, OSError) as exc:
            raise ImportFormatError(p, "", f"corrupt .eval archive ({exc})", "re-export the log") from None
        return header, samples
    log = load_json(p, FIX)
    if not isinstance(log, dict) or "eval" not in log:
        raise ImportFormatError(p, "", "no 'eval' header: not an Inspect log", FIX)
    samples = log.get("samples")
    if samples is None:
        samples = []
    if not isinstance(samples, list):
        raise ImportFormatError(p, "samples", f"'samples' is {json_kind(samples)}, not an array", FIX)
    return log, [(f"samples[{i}]", s) for i, s in enumerate(samples)]


def _score(p: Path, where: str, value, partial: str, threshold: float, score_key: str | None) -> int:
    if isinstance(value, dict):
        if score_key is None or score_key not in value:
            raise ImportFormatError(p, where, f"the score is an object with keys {', '.join(sorted(map(str, value))[:8])}",
                                    say("choose one with ", Opt("score_key")))
        value, where = value[score_key], f"{where}.{score_key}"
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)):
        if not np.isfinite(value):
            raise ImportFormatError(p, where, f"score {value!r} is not finite", say("choose another scorer with ", Opt("scorer")))
        return int(value >= threshold)
    if isinstance(value, str):
        v = value.strip().upper()
        if v in LETTERS:
            return LETTERS[v]
        if v == "P":
            if partial == "error":
                raise ImportFormatError(p, where, "partial score 'P'", say("set ", Opt("partial"), " to correct or incorrect"))
            return int(partial == "correct")
        try:
            x = float(v)
        except ValueError:
            x = float("nan")
        if np.isfinite(x):
            return int(x >= threshold)
    raise ImportFormatError(p, where, f"score value {str(value)[:40]!r} is not C/I/P/N, a bool or a number",
                            say("choose another scorer with ", Opt("scorer")))


def _text(value) -> str | None:
    if value is None:
        return None
    if isinstance(value, list):  # chat messages
        parts = []
        for m in value:
            content = m.get("content") if isinstance(m, dict) else m
            if isinstance(content, list):  # content blocks
                content = "\n".join(str(c.get("text")) for c in content if isinstance(c, dict) and c.get("text"))
            if isinstance(content, str):
                parts.append(content)
        return "\n".join(parts)
    return str(value)


def _answer(target, choices: list[str] | None) -> tuple[str | None, str | None]:
    """(answer text, label) — a letter target of a multiple-choice sample becomes the choice's text."""
    if isinstance(target, list):
        target = "|".join(map(str, target))
    if target is None:
        return None, None
    label = str(target).strip()
    if choices and len(label) == 1 and label.isalpha():
        idx = ord(label.upper()) - ord("A")
        if 0 <= idx < len(choices):
            return choices[idx], label
    return _text(target), None


def _base(name) -> str:
    """A registry name without its package (``inspect_ai/multiple_choice`` -> ``multiple_choice``)."""
    return str(name).rsplit("/", 1)[-1] if isinstance(name, str) else ""


def multiple_choice_plan(header: dict, scorer: str | None) -> tuple[bool, bool]:
    """(multiple choice, several answers allowed) from the log's plan and scorers: a ``multiple_choice`` solver
    step, or ``scorer`` (the one imported; else any the eval declares) being ``choice``."""
    plan = header.get("plan") if isinstance(header.get("plan"), dict) else {}
    steps = plan.get("steps") if isinstance(plan.get("steps"), list) else []
    mc_steps = [st for st in steps if isinstance(st, dict) and _base(st.get("solver")) == "multiple_choice"]
    several = any(isinstance(st.get("params"), dict) and st["params"].get("multiple_correct") is True
                  for st in mc_steps)
    if mc_steps:
        return True, several
    if scorer is not None:
        return _base(scorer) == "choice", False
    ev = header.get("eval") if isinstance(header.get("eval"), dict) else {}
    declared = ev.get("scorers") if isinstance(ev.get("scorers"), list) else []
    return any(isinstance(sc, dict) and _base(sc.get("name")) == "choice" for sc in declared), False


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
    item_key: str | None = None,
    group_col: str | None = None,
    **_: object,
) -> ParsedImport:
    """Parse one Inspect log into a 1 x items matrix (successes/trials when it has epochs).

    ``metric`` is another name for ``scorer`` (the CLI's --metric serves lm-eval and Inspect).
    """
    p = Path(path)
    scorer = scorer or metric
    threshold = float(threshold)
    if partial not in {"incorrect", "correct", "error"}:
        raise ImportFormatError(p, "", say(Opt("partial"), f" is {partial!r}"), "use correct, incorrect or error")
    header, samples = _load(p)
    ev = header.get("eval") if isinstance(header, dict) else None
    if not isinstance(ev, dict):
        raise ImportFormatError(p, "eval", f"'eval' is {json_kind(ev)}, not an object", FIX)
    name = model or ev.get("model")
    if not isinstance(name, str) or not name.strip():
        raise ImportFormatError(p, "eval.model", "no model name in the log", say("give the model with ", Opt("model")))
    succ: dict[str, int] = {}
    trials: dict[str, int] = {}
    rows: dict[str, dict] = {}
    picked: dict[str, str | None] = {}  # the answer letter the scorer read from each sample (issue 33)
    mc = None
    for where, s in samples:
        if not isinstance(s, dict):
            raise ImportFormatError(p, where, f"a sample is {json_kind(s)}, not an object", FIX)
        scores = s.get("scores")
        if scores is None or scores == {}:
            continue
        if not isinstance(scores, dict):
            raise ImportFormatError(p, f"{where}.scores", f"'scores' is {json_kind(scores)}, not an object", FIX)
        chosen = scorer or next(iter(scores))
        if chosen not in scores:
            raise ImportFormatError(p, where, f"no scorer '{chosen}' (has {sorted(scores)[:8]})", say("pick one with ", Opt("scorer")))
        entry = scores[chosen]
        if not isinstance(entry, dict):
            raise ImportFormatError(p, f"{where}.scores.{chosen}", f"a score is {json_kind(entry)}, not an object",
                                    FIX)
        v = _score(p, f"{where}.scores.{chosen}", entry.get("value"), partial, threshold, score_key)
        scorer = chosen
        try:
            key = key_text(dotted(s, item_key or "id"))
        except KeyError:
            key = None
        if key is None:
            raise ImportFormatError(p, f"{where}.{item_key or 'id'}", "no usable item key (a string or whole number)",
                                    say("name a field that identifies the item with ", Opt("item_key"), " (e.g. metadata.id)"))
        succ[key] = succ.get(key, 0) + v
        trials[key] = trials.get(key, 0) + 1
        letter = entry.get("answer")
        picked[key] = str(letter).strip() if isinstance(letter, str) and key not in picked else None
        if mc is None:
            mc = multiple_choice_plan(header, scorer)
        if key not in rows:
            rows[key] = _item_row(p, where, s, group_col, mc)
    if not trials:
        raise ImportFormatError(p, "samples", "no scored samples", "import a finished log with scores")
    keys = list(trials)
    items = pd.DataFrame({c: [rows[k][c] for k in keys] for c in ("text", "answer", "group", "chance", "metadata")},
                         dtype=object)
    items.insert(0, "key", keys)
    parsed = ParsedImport(
        benchmark=benchmark or str(ev.get("task") or p.stem).split("/")[-1],
        kind="static",
        items=items,
        models=harness_models([name.strip()]),
        source=f"inspect:{path}",
    )
    n = np.asarray([[trials[k] for k in keys]], dtype=np.int32)
    s = np.asarray([[succ[k] for k in keys]], dtype=np.int32)
    if (n == 1).all():
        parsed.correct = s.astype(np.int8)
        _keep_choices(parsed, keys, rows, picked)
    else:
        parsed.successes, parsed.trials = s, n
    return parsed


def _keep_choices(parsed: ParsedImport, keys: list[str], rows: dict, picked: dict) -> None:
    """Multiple-choice samples: the option each chose (its answer letter, A = the first choice) is kept beside
    the score, which stays the scorer's (issue 33). Several letters or none: unknown."""
    labels, chosen = [], []
    for k in keys:
        choices = rows[k]["metadata"].get("choices") if rows[k]["chance"] is not None else None
        letter = picked.get(k)
        labels.append(list(choices) if choices else [])
        ok = choices and letter and len(letter) == 1 and letter.isalpha() and ord(letter.upper()) - 65 < len(choices)
        chosen.append(ord(letter.upper()) - 65 if ok else -1)
    if any(c >= 0 for c in chosen):
        parsed.items["choices"] = labels
        parsed.options = np.asarray([chosen], dtype=np.int16)
        parsed.option_labels = labels
        parsed.score_from_options = False


def _item_row(p: Path, where: str, s: dict, group_col: str | None, mc: tuple[bool, bool]) -> dict:
    meta = s.get("metadata") if isinstance(s.get("metadata"), dict) else {}
    meta = dict(meta)
    raw_choices = s.get("choices")
    choices = [str(c) for c in raw_choices] if isinstance(raw_choices, list) and raw_choices else None
    multiple_choice, several = mc
    answer, label = _answer(s.get("target"), choices if multiple_choice else None)
    if choices:
        meta["choices"] = choices
    if label is not None:
        meta["answer_label"] = label
    if s.get("id") is not None:
        meta.setdefault("inspect_id", s.get("id"))
    group = None
    if group_col:
        if group_col not in meta:
            raise ImportFormatError(p, f"{where}.metadata", f"no metadata field '{group_col}' (has {sorted(meta)[:8]})",
                                    say("name a sample metadata field with ", Opt("group_col")))
        group = None if meta[group_col] is None else str(meta[group_col])
    return {"text": _text(s.get("input")), "answer": answer, "group": group,
            "chance": _chance(choices, several) if multiple_choice and choices else None, "metadata": meta}


def _chance(choices: list[str], several: bool) -> float:
    """A blind guess's success probability: one of n options, or one of the 2^n - 1 non-empty subsets."""
    n = len(choices)
    if several:
        return 0.0 if n > 1000 else 1.0 / (2 ** n - 1)
    return 1.0 / n
