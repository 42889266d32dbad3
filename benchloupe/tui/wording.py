"""The workbench's words for the options an error message names (:mod:`benchloupe.hints`): each option as the
label of the form field that sets it, so a toast says "set the form's arena benchmark field", never "pass
--arena BENCHMARK" (issue 11, item 7). Config fields keep their own names as labels (the analysis forms show
them so); the import dialog's fields and the analysis forms' extra fields are named here and in
:data:`benchloupe.store.importers.options.OPTIONS`, the one table both the dialog and this module read."""

from __future__ import annotations

from benchloupe.hints import Opt, render_error

# Fields the forms add beside a config's own: the ones whose labels differ from the option's name.
FORM_LABELS = {
    "arena": "arena benchmark",
    "benchmark": "benchmark name",
    "format": "format",
    "replace": "replace results",
    "paths": "files",
}


def _labels() -> dict[str, str]:
    from benchloupe.store.importers.options import OPTIONS

    return {**{o.name: o.label for o in OPTIONS}, **FORM_LABELS}


def label(opt: Opt) -> str:
    """The label of the field that sets *opt* (its own name for a config field)."""
    return _labels().get(opt.name, opt.name)


def error_text(exc: BaseException) -> str:
    """An error's message in the workbench's words."""
    return render_error(exc, label)
