"""Warnings shown on stderr as a user would see them, for tests that assert exactly one stderr line."""

from __future__ import annotations

import contextlib
import sys
import warnings


@contextlib.contextmanager
def warnings_on_stderr():
    """Warnings printed as a user would see them (pytest otherwise records them and stderr stays clean)."""
    with warnings.catch_warnings():
        warnings.simplefilter("default")  # Python's own defaults: these four are not shown to users
        for category in (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning):
            warnings.simplefilter("ignore", category)
        warnings.showwarning = lambda message, category, filename, lineno, file=None, line=None: sys.stderr.write(
            warnings.formatwarning(message, category, filename, lineno, line))
        yield
