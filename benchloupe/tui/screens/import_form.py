"""The import dialog's fields (issue 11, item 7): the options of ``benchloupe import`` (the jobs layer's table,
:data:`benchloupe.store.importers.options.OPTIONS`), each shown only when the chosen format's parser takes it (for
``auto``, the format detected from the first path), and several paths as the CLI takes them: files, folders,
globs, separated by spaces or pasted one per line."""

from __future__ import annotations

import glob
import shlex
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path

from benchloupe import ranges
from benchloupe.tui.widgets.dialogs import Field


def split_paths(raw: str) -> list[str]:
    """Paths as a shell would split them: spaces or newlines separate, quotes keep a path with spaces whole."""
    try:
        paths = shlex.split(raw)
    except ValueError as exc:
        raise ValueError(f"{exc} (close the quote)") from None
    if not paths:
        raise ValueError("give one or more files, folders or globs")
    if "-" in paths:
        raise ValueError("standard input (-) is for the command line; name the files here")
    return [str(Path(p).expanduser()) for p in paths]


DETECT_FILES = 8  # files tried for auto-detection as the user types (each read only at its head)


@lru_cache(maxsize=16)
def detected_format(raw_paths: str) -> str | None:
    """The format ``auto`` would pick for what the first path names (a file, a folder's first files, a glob's
    first matches: the first that parses), or None. Reads at most a few files' heads, so it can run as the user
    types."""
    from benchloupe.jobs.imports import glob_paths, walk
    from benchloupe.store.importers.base import ImportFormatError
    from benchloupe.store.importers.detect import detect_format, wanted

    try:
        first = Path(shlex.split(raw_paths)[0]).expanduser()
    except (ValueError, IndexError):
        return None
    candidates: list[Path] = []
    if first.is_file():
        candidates = [first]
    elif first.is_dir():  # the first few files the walk finds (an lm-eval folder starts with results_*.json)
        for n, (root, _dirs, files) in enumerate(walk(first)):  # never twice into a folder, whatever the links
            candidates += [Path(root) / f for f in files if wanted(Path(root) / f, None)]
            if len(candidates) >= DETECT_FILES or n > 50:
                break
    elif glob.has_magic(str(first)):
        candidates = [Path(h) for h in glob_paths(str(first))[:DETECT_FILES] if Path(h).is_file()]
    for c in candidates[:DETECT_FILES]:
        try:
            return detect_format(c)
        except (ImportFormatError, OSError):
            continue
    return None


def chosen_format(raw: Mapping[str, str]) -> str | None:
    fmt = raw.get("format", "") or "auto"
    return detected_format(raw.get("paths", "")) if fmt == "auto" else fmt


def _parse_option(kind: str, name: str = ""):
    """A form value of an import option: a yes/no switch, a number read against the option's stated range
    (:data:`benchloupe.ranges.FIELDS`, ``import.NAME``: the command line's words), or text."""
    declared = ranges.field_range("import", name)

    def parse(raw: str):
        if not raw:
            return None
        if kind == "flag":
            if raw.lower() in ("yes", "y", "true", "on", "1"):
                return True
            if raw.lower() in ("no", "n", "false", "off", "0"):
                return None
            raise ValueError(f"{raw!r} is not yes or no")
        if kind == "number":
            return (declared or ranges.any_finite()).parse(raw, form=True)
        return raw
    return parse


def _existing_file(raw: str) -> str | None:
    if not raw:
        return None
    p = Path(raw).expanduser()
    if not p.is_file():
        raise ValueError(f"no such file: {p}")
    return str(p)


def _yes_no(raw: str) -> bool:
    if raw.lower() in ("yes", "y", "true", "on", "1"):
        return True
    if raw.lower() in ("", "no", "n", "false", "off", "0"):
        return False
    raise ValueError(f"{raw!r} is not yes or no")


def import_fields() -> list[Field]:
    """The dialog's fields: paths, format, benchmark, replace, then every import option, each shown only when
    the chosen format (or, for auto, the format detected from the first path) takes it."""
    from benchloupe.jobs.imports import OPTIONS, format_options
    from benchloupe.store.importers.detect import ALIASES, FORMATS
    from benchloupe.tui.wording import FORM_LABELS

    formats = ("auto", "", *sorted(FORMATS), *sorted(ALIASES))

    def applies(name: str):
        return lambda raw: (fmt := chosen_format(raw)) is not None and name in format_options(fmt)

    fields = [Field("paths", FORM_LABELS["paths"], "", split_paths, "files, folders or globs (results/*/samples_*.jsonl)", list_paste=True),
              Field("format", FORM_LABELS["format"], "auto", lambda v: v or "auto", f"auto = detect; or one of {', '.join(sorted(FORMATS))}",
                    choices=formats),
              Field("benchmark", FORM_LABELS["benchmark"], "", lambda v: v or None, "empty = from the file"),
              Field("replace", FORM_LABELS["replace"], "no", _yes_no, "yes replaces the benchmark's results (no = merge)")]
    for o in OPTIONS:
        parse = _existing_file if o.name == "models_file" else _parse_option(o.kind, o.name)
        fields.append(Field(o.name, o.label, "", parse, o.help + (" (yes/no)" if o.kind == "flag" else ""),
                            applies=applies(o.name)))
    return fields


def check_import(values: dict) -> None:
    """Every path names something importable (as the CLI checks them) before the job starts."""
    from benchloupe.jobs.imports import expand_paths
    from benchloupe.store.importers.detect import ALIASES, detect_format, refuse_binary

    fmt = values.get("format")
    found = expand_paths(values["paths"], None if fmt in (None, "auto") else fmt)
    if not found:
        raise ValueError(f"files: no importable file in {' '.join(values['paths'])}; name the files, or a folder "
                         "that holds the format's files")
    # a file named here that cannot be imported is said in the form, in one line (issue 21 items 6 and 11: a
    # binary file's error came as a toast after the form had closed, ten wrapped lines of its bytes)
    for path, named in found[:DETECT_FILES]:
        if not named:
            continue
        if fmt in (None, "auto"):
            detect_format(path)
        elif ALIASES.get(fmt, fmt) != "neartie-npz" and path.suffix.lower() not in (".npz", ".parquet", ".eval"):
            refuse_binary(path)
