"""The ``?`` help screen: every key of the screen underneath (shown in the footer or not) and the app's."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen

from benchloupe.tui.widgets.safe import SafeStatic, Text

KEY_NAMES = {"question_mark": "?", "slash": "/", "escape": "esc", "enter": "enter", "space": "space",
             "pagedown": "pgdn", "pageup": "pgup", "ctrl+p": "ctrl+p", "ctrl+s": "ctrl+s",
             "right_square_bracket": "]", "left_square_bracket": "[", "less_than_sign": "<",
             "greater_than_sign": ">", "full_stop": ".", "comma": ",", "minus": "-", "plus": "+",
             "exclamation_mark": "!", "number_sign": "#", "asterisk": "*"}
GENERAL = (("1-8", "switch screen: Bench, Items, Models, Runs, Anomalies, Reversals, Coverage, Fill"),
           ("?", "this help"),
           ("q", "quit (asks first while a job runs)"),
           ("x", "cancel the running job"),
           ("B", "switch benchmark (remembered for this database)"),
           ("w", "export the table shown (filtered, sorted): CSV/JSON"),
           ("W", "export the decisions (flags, proposals): CSV/JSON"),
           ("ctrl+p", "command palette (\"area: verb\" commands)"),
           ("tab / shift+tab", "move between panes and fields"),
           ("j k ↑ ↓ pgup pgdn home end", "move in tables"),
           ("/", "search a table as you type (esc clears)"),
           ("s / S", "sort a table by the next column / reverse (↑↓)"))


def key_label(key: str) -> str:
    return ", ".join(KEY_NAMES.get(k.strip(), k.strip()) for k in key.split(","))


def screen_keys(screen) -> list[tuple[str, str, bool]]:
    """The screen's own keys first, then those of its widgets (a table's moves and sorts; the app's are under
    "Everywhere"), as (keys, description, enabled), one row per action, with every key bound to it, as the
    terminal names them (issue 21 item 11: the generic keys came before the screen's own)."""
    rows: dict[tuple[bool, bool, str], list] = {}
    for key, active in screen.active_bindings.items():
        b = active.binding
        if active.node is screen.app or not b.description or b.action.startswith("go("):
            continue
        theirs = (b.action, key) in textual_bindings(active.node)  # Textual's own (tab: focus next) come last
        row = rows.setdefault((theirs, active.node is not screen, b.action), [[], b.description, active.enabled])
        label = b.key_display or KEY_NAMES.get(key, key)
        if label not in row[0]:
            row[0].append(label)
    order = sorted(rows, key=lambda k: k[:2])  # stable: the screen's own first, each in binding order
    return [(", ".join(rows[k][0]), rows[k][1], rows[k][2]) for k in order]


def textual_bindings(node) -> set[tuple[str, str]]:
    """(action, key) of the bindings that Textual's own classes give *node* (a screen's tab/shift+tab focus
    moves, an input's editing keys): the help lists them after the workbench's (issue 32 point 7)."""
    theirs, ours = set(), set()
    for cls in type(node).__mro__:
        for b in cls.__dict__.get("BINDINGS", []):
            if isinstance(b, Binding):
                (theirs if cls.__module__.startswith("textual") else ours).update(
                    (b.action, k.strip()) for k in b.key.split(","))
    return theirs - ours  # one the workbench binds again (a table's left/right) is its own


def screen_title(screen) -> str:
    """The screen in words: "Items", "the item panel" (a class name read "Keys on ItemPanel")."""
    title = getattr(screen, "HELP_TITLE", "")
    if title:
        return title
    titles = getattr(screen.app, "SCREEN_TITLES", {})  # the app's table of its screens (no import circle)
    return titles.get(getattr(screen, "MODE", ""), type(screen).__name__.removesuffix("Screen"))


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,question_mark,q", "dismiss", "Close", id="help.close"),
                Binding("j,down", "scroll(1)", "Down", show=False), Binding("k,up", "scroll(-1)", "Up", show=False)]

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="dialog help"):
            yield SafeStatic(self._text(), markup=False)

    def _text(self) -> Text:
        below = self.app.screen_stack[-2] if len(self.app.screen_stack) > 1 else self.app.screen
        text = Text(f"Keys on {screen_title(below)}\n", style="bold underline")
        for key, description, enabled in screen_keys(below):
            text.append(f"{key:>16}  ", style="bold")
            text.append(description + ("" if enabled else " (not now)"))
            text.append("\n")
        text.append("\nEverywhere\n", style="bold underline")
        for key, what in GENERAL:
            text.append(f"{key:>16}  ", style="bold")
            text.append(what + "\n")
        text.append("\nesc or ? closes this help", style="dim")
        return text

    def action_scroll(self, step: int) -> None:
        scroll = self.query_one(VerticalScroll)
        scroll.scroll_to(y=scroll.scroll_y + step, animate=False)
