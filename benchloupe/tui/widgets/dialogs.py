"""Small modal dialogs: one line of input with validation (paths, notes) and a multi-field form."""

from __future__ import annotations

import asyncio
import shlex
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, Label

from benchloupe.tui.widgets.safe import SafeStatic, Text, safe_text

Validator = Callable[[str], str | None]


class OwnErrors:
    """A dialog shows its own errors inside itself, right under its title, and opens with no toast over it
    (issue 21 item 11: the import summary's toast hid the form's "no such file or folder" line)."""

    def on_mount(self) -> None:
        self.app.clear_notifications()


class PromptDialog(OwnErrors, ModalScreen[str | None]):
    """Ask for one value. Enter submits when *validate* returns None, otherwise its message shows in one line;
    escape cancels (returns None).

    Enter and escape are priority bindings, handled where the app reads the keys, so the keys typed after them
    act on the screen underneath in the order they were typed (issue 21 #3: "fast note", enter, d, z stored
    "fast notedz"): enter first lets the field take every key typed before it, then closes the dialog at once.
    *on_submit* is called with the value right there, before any later key is handled (a note then applies
    before the decision typed after it); the ``push_screen`` callback, if any, runs later as usual."""

    AUTO_FOCUS = "Input"
    BINDINGS = [Binding("escape", "cancel", "Cancel", id="dialog.cancel", priority=True),
                Binding("enter", "submit", "OK", id="dialog.submit", priority=True, show=False)]

    def __init__(self, title: str, *, value: str = "", placeholder: str = "", help: str = "",
                 validate: Validator | None = None, on_submit: Callable[[str], None] | None = None) -> None:
        super().__init__()
        self.title_text, self.value, self.placeholder, self.help = title, value, placeholder, help
        self.validate = validate
        self.on_submit = on_submit
        self._answered = False

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(safe_text(Text(self.title_text, style="bold")))
            yield SafeStatic("", id="dialog-error", classes="error-line", markup=False)
            if self.help:
                yield SafeStatic(Text(self.help, style="dim"))
            yield Input(value=self.value, placeholder=self.placeholder, id="dialog-input")
            yield SafeStatic(Text("enter: ok   escape: cancel", style="dim"))

    async def action_submit(self) -> None:
        """Enter: wait until the field has taken the keys typed before this one, then submit its value."""
        field = self.query_one("#dialog-input", Input)
        drained = asyncio.Event()
        if field.call_later(drained.set):
            try:
                await asyncio.wait_for(drained.wait(), 2.0)
            except TimeoutError:
                pass
        self._submit(field.value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self._submit(event.value)

    def _submit(self, raw: str) -> None:
        if self._answered:
            return
        value = raw.strip()
        bad = control_character(value)
        error = f"contains the control character {bad}; type plain text" if bad else \
            self.validate(value) if self.validate else None
        if error:
            self.query_one("#dialog-error", SafeStatic).update(Text(error))
            return
        self._answered = True
        if self.on_submit is not None:
            self.on_submit(value)
        self.dismiss(value)

    def action_cancel(self) -> None:
        if not self._answered:
            self._answered = True
            self.dismiss(None)


Values = Mapping[str, str]


@dataclass(frozen=True)
class Field:
    """One form field: name, label, initial text, and a parser that raises ValueError with a message.

    ``choices``: the only values accepted (shown as the placeholder; "" among them lets the field be empty); ``applies(raw)``: whether the field
    applies given the raw text of every field by name (e.g. an optimiser's learning rate only for "adam"); a
    field that does not apply is hidden and left out of the result, so its default stands."""

    name: str
    label: str
    value: str
    parse: Callable[[str], object]
    help: str = ""
    choices: tuple[str, ...] = ()
    applies: Callable[[Values], bool] | None = None
    list_paste: bool = False  # pasted lines become space-separated entries (a list of paths copied from a shell)


class HintInput(Input):
    """An Input whose placeholder (a field's help) fits its width, cut with an ellipsis; it was clipped
    mid-word ("one model pe", issue 21 item 11). The whole help is on the form's help line when focused."""

    def __init__(self, *args, placeholder: str = "", **kwargs) -> None:
        super().__init__(*args, placeholder=placeholder, **kwargs)
        self.full_hint = placeholder

    def on_resize(self) -> None:
        from benchloupe.tui.widgets.table import end_cut

        room = self.content_region.width
        if room > 1:
            self.placeholder = end_cut(self.full_hint, room)


class ListInput(HintInput):
    """An Input that takes a pasted list: one entry per line, joined with spaces, an entry holding spaces
    quoted as a shell would (a plain Input keeps only the first pasted line)."""

    def _on_paste(self, event: events.Paste) -> None:
        entries = [line.strip() for line in event.text.splitlines() if line.strip()]
        if entries:
            text = " ".join(shlex.quote(e) if any(c.isspace() for c in e) else e for e in entries)
            if self.selection.is_empty:
                self.insert_text_at_cursor(text)
            else:
                self.replace(text, *self.selection)
        event.stop()
        event.prevent_default()  # Input's own handler would paste the first line again


def control_character(raw: str) -> str | None:
    """The first control or format character of *raw* (ESC, NUL, a bidi override ...) as U+XXXX, or None: no
    form field takes one (they would reach the terminal, the database and the files written from it)."""
    for ch in raw:
        if unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co", "Cn"):
            return f"U+{ord(ch):04X}"
    return None


LABEL_MAX = 30  # at 80 columns the dialog keeps ~40 cells for the value


def label_width(fields) -> int:
    """The label column of a form: its longest label and a space, at most LABEL_MAX (was a fixed 20 that cut
    "min_family_models_per_half" to "min_family_models_pe" with nothing to say so)."""
    return min(LABEL_MAX, max((len(f.label) for f in fields), default=10) + 1)


def cut_label(label: str, width: int) -> str:
    """*label* in *width* cells, cut in the middle with an ellipsis so both its start and its end stay."""
    if len(label) <= width:
        return label
    keep = width - 1
    head = (keep + 1) // 2
    return label[:head] + "…" + label[len(label) - (keep - head):]


class FormDialog(OwnErrors, ModalScreen[dict | None]):
    """A form of text fields; ctrl+s or enter on the last field submits, escape cancels.

    Only the fields that apply to the values typed so far are shown (``Field.applies``, re-read on every
    change). Submitting parses each shown field; a bad value (not a number, out of range, a control character)
    shows one line naming the field and keeps the form open, and so does a failing ``check(values)`` (the
    config's own validation): nothing is started until every value is good."""

    AUTO_FOCUS = "Input"
    BINDINGS = [Binding("escape", "cancel", "Cancel", id="form.cancel"),
                Binding("ctrl+s", "submit", "Start", id="form.submit", priority=True)]

    def __init__(self, title: str, fields: list[Field], *, note: str = "",
                 check: Callable[[dict], None] | None = None) -> None:
        super().__init__()
        self.title_text, self.fields, self.note, self.check = title, fields, note, check

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog form"):
            yield Label(safe_text(Text(self.title_text, style="bold")))
            yield SafeStatic("", id="dialog-error", classes="error-line", markup=False)
            if self.note:
                yield SafeStatic(Text(self.note, style="dim"))
            width = label_width(self.fields)
            with VerticalScroll(id="form-fields", can_focus=False):
                for f in self.fields:
                    hint = " | ".join(f.choices) if f.choices and not f.help else f.help
                    with Horizontal(classes="form-row", id=f"row-{f.name}"):
                        label = Label(Text(cut_label(f.label, width - 1)), classes="form-label")
                        label.styles.width = width
                        yield label
                        widget = ListInput if f.list_paste else HintInput
                        yield widget(value=f.value, placeholder=hint, id=f"field-{f.name}", classes="form-input",
                                     tooltip=hint or None)
            yield SafeStatic("", id="form-help", classes="form-help", markup=False)
            yield SafeStatic(Text("tab: next field   enter/ctrl+s: start   escape: cancel", style="dim"))

    def on_mount(self) -> None:
        super().on_mount()
        self._show_applicable()

    @staticmethod
    def hint_of(f: Field) -> str:
        return " | ".join(f.choices) if f.choices and not f.help else f.help

    def on_descendant_focus(self, event) -> None:
        f = next((f for f in self.fields if event.widget.id == f"field-{f.name}"), None)
        help_line = self.query_one("#form-help", SafeStatic)
        if f is None or not self.hint_of(f):
            help_line.update("")
            return
        text = Text(f"{f.label}: ", style="bold")
        text.append(self.hint_of(f), style="dim")
        help_line.update(text)

    def raw_values(self) -> dict[str, str]:
        return {f.name: self.query_one(f"#field-{f.name}", Input).value.strip() for f in self.fields}

    def shown(self) -> list[Field]:
        """The fields that apply to what is typed now."""
        raw = self.raw_values()
        return [f for f in self.fields if f.applies is None or _applies(f, raw)]

    def _show_applicable(self) -> None:
        shown = {f.name for f in self.shown()}
        for f in self.fields:
            self.query_one(f"#row-{f.name}", Horizontal).display = f.name in shown

    def on_input_changed(self, event: Input.Changed) -> None:
        self._show_applicable()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.action_submit()

    def _fail(self, message: str, field: Field | None = None) -> None:
        self.query_one("#dialog-error", SafeStatic).update(Text(message))
        if field is not None:
            self.query_one(f"#field-{field.name}", Input).focus()

    def action_submit(self) -> None:
        from benchloupe.tui.wording import error_text

        values = {}
        for f in self.shown():
            raw = self.query_one(f"#field-{f.name}", Input).value.strip()
            bad = control_character(raw)
            if bad:
                self._fail(f"{f.label}: contains the control character {bad}; type plain text", f)
                return
            if f.choices and raw not in f.choices:
                self._fail(f"{f.label}: {raw!r} is not one of {', '.join(c for c in f.choices if c)}", f)
                return
            try:
                values[f.name] = f.parse(raw)
            except (ValueError, TypeError, OverflowError) as exc:
                self._fail(f"{f.label}: {error_text(exc) or 'not a valid value'}", f)
                return
        if self.check is not None:
            try:
                self.check(values)
            except (ValueError, TypeError) as exc:
                self._fail(error_text(exc))
                return
        self.dismiss(values)

    def action_cancel(self) -> None:
        self.dismiss(None)


def _applies(field: Field, raw: Values) -> bool:
    try:
        return bool(field.applies(raw))
    except (ValueError, TypeError):  # a half-typed number the rule cannot read yet: keep the field in view
        return True


class ConfirmDialog(OwnErrors, ModalScreen[bool]):
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


class ChoiceDialog(OwnErrors, ModalScreen[str | None]):
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
