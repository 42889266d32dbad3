"""Exports that keep what was imported: results with their successes/trials, models with their metadata.

``results``: a 0/1 benchmark exports as the wide matrix (model x item keys, blank = missing); a benchmark
holding successes/trials (Inspect epochs, binomial long files) exports in long form ``model, item,
successes, trials`` so that 2 of 4 stays 2/4 (rounding to a majority would lose it); both re-import as they
are (``import wide`` / ``import long``).
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
import unicodedata

import numpy as np
import pandas as pd

from . import read


def results_frame(conn: sqlite3.Connection, benchmark: str) -> pd.DataFrame:
    sm = read.load_static(conn, benchmark, include_retired=True)
    keys = sm.items["key"].astype(str).to_numpy()
    names = sm.models["name"].astype(str).to_numpy()
    if sm.trials is not None:
        m, j = np.nonzero(sm.trials > 0)
        return pd.DataFrame({"model": names[m], "item": keys[j], "successes": sm.successes[m, j],
                             "trials": sm.trials[m, j]})
    df = pd.DataFrame(sm.correct.astype("float64"), columns=keys, index=names).where(sm.mask)
    df.index.name = "model"
    return df.reset_index()


def models_frame(conn: sqlite3.Connection, benchmark: str) -> pd.DataFrame:
    """``read.models`` plus each model's metadata (a JSON object per row)."""
    df = read.models(conn, benchmark)
    meta = dict(conn.execute("SELECT id, metadata FROM models WHERE id IN (SELECT model_id FROM benchmark_models"
                             " WHERE benchmark_id = ?)", (read.benchmark_id(conn, benchmark),)).fetchall())
    df["metadata"] = [json.dumps(json.loads(meta.get(i) or "{}"), ensure_ascii=False, sort_keys=True)
                      for i in df["id"]]
    return df


# ------------------------------------------------------------------------- closing the loop (issue 12)

def harness_items(conn: sqlite3.Connection, benchmark: str, *, origin: str | None = "benchfill") -> list[dict]:
    """Active items (default: the accepted BenchFill items) as plain records: key, text, answer, group,
    choices (from item metadata, when it has them), chance, parent key and the item's metadata."""
    bid = read.benchmark_id(conn, benchmark)
    sql = ("SELECT i.key, i.text, i.answer, i.grp, i.chance, i.metadata, i.origin, p.key AS parent_key FROM items i"
           " LEFT JOIN items p ON p.id = i.parent_id WHERE i.benchmark_id = ? AND i.status = 'active'")
    args: list = [bid]
    if origin:
        sql += " AND i.origin = ?"
        args.append(origin)
    out = []
    for r in conn.execute(sql + " ORDER BY i.pos", args):
        meta = json.loads(r["metadata"] or "{}")
        choices = meta.get("choices") if isinstance(meta.get("choices"), list) else None
        out.append({"key": r["key"], "text": r["text"] or "", "answer": r["answer"] or "", "group": r["grp"] or "",
                    "chance": r["chance"], "choices": [str(c) for c in choices] if choices else None,
                    "parent_key": r["parent_key"], "origin": r["origin"], "metadata": meta})
    return out


def inspect_samples(rows: list[dict]) -> list[dict]:
    """Inspect AI ``Sample`` records (``json_dataset`` reads them): id, input, target, choices, metadata.
    Multiple choice: target is the letter of the answer among the choices, as Inspect's ``choice()`` expects."""
    out = []
    for r in rows:
        sample = {"id": r["key"], "input": r["text"], "target": r["answer"]}
        if r["choices"] and r["answer"] in r["choices"]:
            sample["choices"] = r["choices"]
            sample["target"] = inspect_letter(r["choices"].index(r["answer"]))
        meta = {k: v for k, v in (("group", r["group"]), ("parent", r["parent_key"]), ("origin", r["origin"])) if v}
        meta.update({k: v for k, v in r["metadata"].items() if k in ("benchfill_session", "candidate", "target",
                                                                      "difficulty_norm")})
        sample["metadata"] = meta
        out.append(sample)
    return out


def inspect_letter(index: int) -> str:
    """The answer character Inspect gives choice ``index`` (``inspect_ai._util.answer.answer_character``): A-Z,
    then the digits 1, 2, ... for the 27th choice on (issue 37: a 30th choice used to get ``^``)."""
    return chr(ord("A") + index) if index < 26 else str(index - 25)


TASK_NAME_MAX = 48


def lmeval_task_name(benchmark: str, *, benchfill: bool = False) -> str:
    """A task name lm-eval can select (``--tasks NAME``: lower-case ASCII letters, digits and single underscores,
    starting with a letter) that is unique per benchmark name (issue 37).

    A name that is already such a name is kept (``mmlu_pro``); any other (``math-1``, ``Math 1``, ``数学``, an emoji,
    dots, a long name) becomes its readable ASCII part plus the first 8 hex digits of the SHA-256 of the exact
    name, so ``math-1`` and ``math_1`` never share a task or its files. The BenchFill export adds ``__benchfill``:
    no derived name holds a double underscore, so it cannot meet another benchmark's name either."""
    slug = re.sub(r"[^a-z0-9]+", "_", benchmark.lower()).strip("_")
    if slug != benchmark or len(slug) > TASK_NAME_MAX or not slug[:1].isalpha():
        digest = hashlib.sha256(benchmark.encode("utf-8", "surrogatepass")).hexdigest()[:8]
        slug = slug[:TASK_NAME_MAX - 9].strip("_")
        slug = f"{slug}_{digest}" if slug[:1].isalpha() else f"b_{digest}" if not slug else f"b_{slug}_{digest}"
    return slug + ("__benchfill" if benchfill else "")


def yaml_string(text: str) -> str:
    r"""``text`` as a YAML double-quoted scalar that every YAML reader gives back exactly: printable characters as
    they are (Han, emoji), quotes and backslashes escaped, every control, format, separator, private or unassigned
    character as ``\uXXXX`` / ``\UXXXXXXXX`` (a non-BMP character is one ``\U`` escape, never a surrogate pair,
    which is what JSON's escaping gave and what YAML readers do not join; issue 37)."""
    out = []
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif " " <= ch <= "~" or (ord(ch) > 0x9F and unicodedata.category(ch)[0] not in "CZ"):
            out.append(ch)
        else:
            out.append(f"\\u{ord(ch):04X}" if ord(ch) < 0x10000 else f"\\U{ord(ch):08X}")
    return '"' + "".join(out) + '"'


TASK_OWNER_KEY = "benchloupe_benchmark"


def lmeval_task_owner(yaml_text: str) -> str | None:
    """The benchmark whose export a task YAML is (the ``benchloupe_benchmark`` line :func:`lmeval_task_yaml`
    writes, read back without a YAML library), or None for a YAML that benchloupe did not write."""
    m = re.search(rf'^  {TASK_OWNER_KEY}: "((?:[^"\\]|\\.)*)"$', yaml_text, re.M)
    if not m:
        return None

    def unescape(e: re.Match) -> str:
        code = e.group(1)
        return chr(int(code[1:], 16)) if code[0] in "uU" and len(code) > 1 else code

    return re.sub(r"\\(u[0-9A-F]{4}|U[0-9A-F]{8}|.)", unescape, m.group(1))


def lmeval_dataset(rows: list[dict]) -> tuple[list[dict], bool]:
    """(JSONL records, multiple_choice) for an lm-eval task over a local file: ``id``, ``question``,
    ``answer``, ``group``, and for multiple choice ``choices`` and ``label`` (the answer's index)."""
    mc = bool(rows) and all(r["choices"] and r["answer"] in r["choices"] for r in rows)
    records = []
    for r in rows:
        rec = {"id": r["key"], "question": r["text"], "answer": r["answer"], "group": r["group"],
               "parent": r["parent_key"]}
        if mc:
            rec["choices"], rec["label"] = r["choices"], r["choices"].index(r["answer"])
        records.append(rec)
    return records, mc


def lmeval_task_yaml(task: str, data_file: str, multiple_choice: bool, benchmark: str = "") -> str:
    """An lm-eval task YAML reading ``data_file`` (JSONL from :func:`lmeval_dataset`), for ``--include_path``; its
    metadata names the benchmark it exports (:func:`lmeval_task_owner`)."""
    head = (f"task: {task}\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: {yaml_string(data_file)}\n"
            f"metadata:\n  version: 1.0\n  {TASK_OWNER_KEY}: {yaml_string(benchmark)}\n"
            "test_split: test\ndoc_to_text: \"Question: {{question}}\\nAnswer:\"\n")
    if multiple_choice:
        return head + ("output_type: multiple_choice\ndoc_to_choice: \"{{choices}}\"\ndoc_to_target: label\n"
                       "metric_list:\n  - metric: acc\n")
    return head + ("output_type: generate_until\ndoc_to_target: answer\ngeneration_kwargs:\n  until: [\"\\n\"]\n"
                   "metric_list:\n  - metric: exact_match\n")
