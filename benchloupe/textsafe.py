"""Text from data made safe to show on a terminal: every C0/C1 control character visibly escaped.

Model names, item text, benchmark names and LLM replies are stored exactly as given; they are escaped only where
they are shown. Each output layer (the CLI's tables and lines, the TUI's widgets) calls :func:`visible` in one place,
so an ``ESC ] 0 ; title BEL`` in a model name prints as ``\\x1b]0;title\\x07`` instead of retitling the terminal.
Rich markup is a separate concern (the TUI renders text literally); this module only handles control characters.

Markdown is a third place text from data is shown: :func:`markdown` and :func:`markdown_code` make it literal there
(every Markdown writer: the report, the near-tie audit's report, the robustness section).

Pure and dependency-free, so every layer may import it.
"""

from __future__ import annotations

import re

# C0 (U+0000-U+001F), DEL (U+007F), C1 (U+0080-U+009F), and the Unicode line/paragraph separators and bidi
# overrides that can reorder or break what a terminal shows.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_CONTROL_KEEP_LAYOUT = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match) -> str:
    c = match.group(0)
    code = ord(c)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: object, *, keep_layout: bool = False) -> str:
    """``str(text)`` with control characters shown as ``\\xNN`` / ``\\uNNNN``.

    ``keep_layout=True`` keeps newline and tab (multi-line item text in a panel); everything else is escaped."""
    s = text if isinstance(text, str) else str(text)
    return (_CONTROL_KEEP_LAYOUT if keep_layout else _CONTROL).sub(_escape, s)


def has_control(text: str, *, allow_layout: bool = True) -> bool:
    """True when ``text`` holds a control character (newline and tab allowed unless ``allow_layout`` is False)."""
    return bool((_CONTROL_KEEP_LAYOUT if allow_layout else _CONTROL).search(text))


_BREAKS = re.compile("\r\n|[\n\r\v\f\x1c-\x1e\x85\u2028\u2029]")


def one_line(text: object) -> str:
    """``text`` on one line: every line break shown as `` ⏎ `` and every other control character escaped, so a
    curator's note cannot start a line of its own in a history (issue 37 #15: a note with a newline printed a
    forged "confirmed by boss at 09:00" line)."""
    return visible(_BREAKS.sub(" \u23ce ", text if isinstance(text, str) else str(text)))


_MD = re.compile(r"([\\`*_\[\]#!|~])")


def markdown(text: object) -> str:
    """Text from data as literal Markdown text, in a paragraph or a table cell: on one line (whitespace runs made one
    space, control characters visibly escaped), HTML's ``< > &`` as entities, and Markdown's punctuation
    (``* _ ` [ ] | # ! ~`` and the backslash) behind a backslash, so a model named ``<script>``, ``**x**`` or
    ``a | b`` reads as itself and never opens a tag, an emphasis, a link or a table cell."""
    s = " ".join(visible(text).split())
    s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MD.sub(r"\\\1", s)


def markdown_code(text: object) -> str:
    """Text from data as one Markdown code span (a command a reader copies): on one line, control characters
    visibly escaped, fenced by one more backtick than its longest run of them, so a backtick in a benchmark name
    cannot close the span early and let what follows be read as Markdown or HTML."""
    s = " ".join(visible(text).split())
    fence = "`" * (max((len(r) for r in re.findall("`+", s)), default=0) + 1)
    pad = " " if s.startswith("`") or s.endswith("`") else ""
    return f"{fence}{pad}{s}{pad}{fence}"
