"""Small modal dialogs: one line of input with validation (paths, notes) and a multi-field form."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, Label

from benchloupe.tui.widgets.safe import SafeStatic, safe_text

Validator = Callable[[str], str | None]


class PromptDialog(ModalScreen[str | None]):
    """Ask for one value. Enter submits when *validate* returns None, otherwise its message shows in one line;
    escape cancels (returns None)."""

    AUTO_FOCUS = "Input"
    BINDINGS = [Binding("escape", "cancel", "Cancel", id="dialog.cancel")]

    def __init__(self, title: str, *, value: str = "", placeholder: str = "", help: str = "",
                 validate: Validator | None = None) -> None:
        super().__init__()
        self.title_text, self.value, self.placeholder, self.help = title, value, placeholder, help
        self.validate = validate

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(safe_text(Text(self.title_text, style="bold")))
            if self.help:
                yield SafeStatic(Text(self.help, style="dim"))
            yield Input(value=self.value, placeholder=self.placeholder, id="dialog-input")
            yield SafeStatic("", id="dialog-error", classes="error-line", markup=False)
            yield SafeStatic(Text("enter: ok   escape: cancel", style="dim"))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        value = event.value.strip()
        error = self.validate(value) if self.validate else None
        if error:
            self.query_one("#dialog-error", SafeStatic).update(Text(error))
            return
        self.dismiss(value)

    def action_cancel(self) -> None:
        self.dismiss(None)


@dataclass(frozen=True)
class Field:
    """One form field: name, label, initial text, and a parser that raises ValueError with a message."""

    name: str
    label: str
    value: str
    parse: Callable[[str], object]
    help: str = ""


class FormDialog(ModalScreen[dict | None]):
    """A form of text fields; ctrl+s or enter on the last field submits, escape cancels."""

    AUTO_FOCUS = "Input"
    BINDINGS = [Binding("escape", "cancel", "Cancel", id="form.cancel"),
                Binding("ctrl+s", "submit", "Start", id="form.submit", priority=True)]

    def __init__(self, title: str, fields: list[Field], *, note: str = "") -> None:
        super().__init__()
        self.title_text, self.fields, self.note = title, fields, note

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog form"):
            yield Label(safe_text(Text(self.title_text, style="bold")))
            if self.note:
                yield SafeStatic(Text(self.note, style="dim"))
            with VerticalScroll(id="form-fields", can_focus=False):
                for f in self.fields:
                    with Horizontal(classes="form-row"):
                        yield Label(Text(f.label), classes="form-label")
                        yield Input(value=f.value, placeholder=f.help, id=f"field-{f.name}", classes="form-input",
                                    tooltip=f.help or None)
            yield SafeStatic("", id="dialog-error", classes="error-line", markup=False)
            yield SafeStatic(Text("tab: next field   enter/ctrl+s: start   escape: cancel", style="dim"))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.action_submit()

    def action_submit(self) -> None:
        values = {}
        for f in self.fields:
            raw = self.query_one(f"#field-{f.name}", Input).value.strip()
            try:
                values[f.name] = f.parse(raw)
            except (ValueError, TypeError) as exc:
                self.query_one("#dialog-error", SafeStatic).update(Text(f"{f.label}: {exc}"))
                self.query_one(f"#field-{f.name}", Input).focus()
                return
        self.dismiss(values)

    def action_cancel(self) -> None:
        self.dismiss(None)


class ConfirmDialog(ModalScreen[bool]):
    """Ask a yes/no question: ``y`` answers yes, ``n`` or escape no (the safe answer is the default)."""

    BINDINGS = [Binding("y", "answer(True)", "Yes", id="confirm.yes"),
                Binding("n,escape", "answer(False)", "No", id="confirm.no")]

    def __init__(self, question: str, *, detail: str = "") -> None:
        super().__init__()
        self.question, self.detail = question, detail

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(safe_text(Text(self.question, style="bold")))
            if self.detail:
                yield SafeStatic(Text(self.detail, style="dim"))
            yield SafeStatic(Text("y: yes   n/escape: no", style="dim"))

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


class ChoiceDialog(ModalScreen[str | None]):
    """Ask which of a few answers: each choice is ``(key, value, label)`` and its key answers *value*;
    escape answers None (nothing is done)."""

    def __init__(self, question: str, choices: tuple[tuple[str, str, str], ...], *, detail: str = "") -> None:
        super().__init__()
        self.question, self.choices, self.detail = question, choices, detail

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(safe_text(Text(self.question, style="bold")))
            if self.detail:
                yield SafeStatic(Text(self.detail, style="dim"))
            keys = "   ".join(f"{key}: {label}" for key, _value, label in self.choices)
            yield SafeStatic(Text(f"{keys}   escape: cancel", style="dim"))

    def on_key(self, event) -> None:
        for key, value, _label in self.choices:
            if event.key == key:
                event.stop()
                self.dismiss(value)
                return
        if event.key == "escape":
            event.stop()
            self.dismiss(None)
