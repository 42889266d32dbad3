"""The TUI's one output filter for text from data: model names, benchmark names, item text and LLM replies may
hold ESC sequences (``ESC]0;title BEL``, ``ESC]52;c;...`` clipboard writes, ``ESC[2J``), backspaces or NULs.
Everything the workbench draws from data goes through here (tables through :func:`cell_text`, panels and lines
through :class:`SafeStatic`, notifications through the app's ``notify``), and every C0/C1 control character is
shown escaped by :func:`benchloupe.textsafe.visible` instead of reaching the terminal (issue 10 #2).
Newline and tab are kept in multi-line panels; a table cell keeps nothing."""

from __future__ import annotations

from rich.text import Text as RichText
from textual.widgets import Static

from benchloupe.textsafe import has_control, visible


class Text(RichText):
    """Rich's ``Text`` with the control characters of every piece escaped as it is added (newline and tab
    kept). Rich itself drops BEL, BS, VT, FF and CR from a ``Text(...)`` or an ``append`` (its
    ``strip_control_codes``), so they were gone before :func:`safe_text` could show them: "good\\rEVIL"
    drew as ``goodEVIL`` (issue 21 item 10). Every TUI module builds its text with this class (the import
    hygiene test checks that none imports Rich's)."""

    def __init__(self, text: str = "", *args, **kwargs) -> None:
        super().__init__(visible(text, keep_layout=True) if isinstance(text, str) else text, *args, **kwargs)

    def append(self, text, style=None) -> Text:
        return super().append(visible(text, keep_layout=True) if isinstance(text, str) else text, style)


def cell_text(value: str) -> str:
    """One table cell or one-line label: every control character escaped."""
    return visible(value)


def safe_text(text: RichText | str, *, keep_layout: bool = True) -> RichText | str:
    """*text* with its control characters escaped, styles kept on the pieces they covered."""
    if isinstance(text, str):
        return visible(text, keep_layout=keep_layout)
    plain = text.plain
    if not has_control(plain, allow_layout=keep_layout):
        return text
    cuts = sorted({0, len(plain), *(s.start for s in text.spans), *(s.end for s in text.spans)})
    out = Text(style=text.style, justify=text.justify, overflow=text.overflow, no_wrap=text.no_wrap,
               end=text.end)
    for a, b in zip(cuts, cuts[1:]):
        start = len(out)
        out.append(visible(plain[a:b], keep_layout=keep_layout))
        for span in text.spans:
            if span.start <= a and span.end >= b:
                out.stylize(span.style, start, len(out))
    return out


class SafeStatic(Static):
    """A Static that never passes a control character from data to the terminal (and never reads markup)."""

    def __init__(self, content: object = "", **kwargs) -> None:
        kwargs.setdefault("markup", False)
        super().__init__(safe_text(content) if isinstance(content, RichText | str) else content, **kwargs)

    def update(self, content: object = "", **kwargs) -> None:
        super().update(safe_text(content) if isinstance(content, RichText | str) else content, **kwargs)
