"""Messages that name an option the user can set, rendered in the words of the face that shows them.

An engine, store or jobs error often says how to fix the input by naming an option ("pass --arena BENCHMARK").
Written into the text, the flag would make the workbench tell a curator to type a command-line flag into a form
(issue 11, item 7). Instead such a message is built with :func:`say` from plain text and :class:`Opt` parts (an
option by its name, the name of the config field or parser keyword it sets) and :class:`Alt` parts (a phrase
with one wording per face, e.g. a command to run). The result is a :class:`Hinted` string: as a ``str`` it *is*
the command-line wording (so ``str(exc)``, logs and the CLI are unchanged), and :func:`render` gives any other
wording, e.g. the TUI's form-field labels. The parts travel with the string: it pickles (a job's error crossing
a process boundary keeps them).

Every layer may use this module (it imports nothing of benchloupe), like :mod:`benchloupe.textsafe`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Opt:
    """An option named in a message.

    ``name`` is the option's identifier (``"arena"``, ``"reward_model"``, ``"drop_small_families"``); ``value``
    what follows it: a metavar (``"BENCHMARK"``) or a literal value (``"arch"``); ``verb`` turns the mention
    into an instruction ("pass --arena BENCHMARK" on the command line, "set the form's arena benchmark field"
    in a form). ``spelled`` is the flag where it is not ``--name`` (compress's ``purpose`` is ``--for``).
    """

    name: str
    value: str = ""
    verb: str = ""
    spelled: str = ""

    @property
    def flag(self) -> str:
        return self.spelled or "--" + self.name.replace("_", "-")

    def cli(self) -> str:
        text = self.flag + (f" {self.value}" if self.value else "")
        return f"{self.verb} {text}" if self.verb else text

    def ui(self, label: str) -> str:
        literal = self.value and not self.value.isupper()  # a metavar (BENCHMARK) is not a value to set
        if self.verb:
            return f"set the form's {label} field" + (f" to {self.value}" if literal else "")
        return f"{label} = {self.value}" if literal else f"the {label} field"


@dataclass(frozen=True)
class Alt:
    """A phrase with one wording for the command line and one for the workbench (a command to run there)."""

    cli: str
    ui: str


Part = str | Opt | Alt


class Hinted(str):
    """A message that keeps its parts; as a ``str`` it reads as the command line wording."""

    parts: tuple[Part, ...]

    def __new__(cls, *parts: Part) -> Hinted:
        flat: list[Part] = []
        for p in parts:
            flat.extend(p.parts if isinstance(p, Hinted) else (p,))
        obj = super().__new__(cls, _join(flat, None))
        obj.parts = tuple(flat)
        return obj

    def __reduce__(self):
        return (Hinted, self.parts)


def say(*parts: Part) -> Hinted:
    """A message from text, :class:`Opt` and :class:`Alt` parts (Hinted parts are spliced in)."""
    return Hinted(*parts)


def _join(parts, label: Callable[[Opt], str] | None) -> str:
    out = []
    for p in parts:
        if isinstance(p, Opt):
            out.append(p.cli() if label is None else p.ui(label(p)))
        elif isinstance(p, Alt):
            out.append(p.cli if label is None else p.ui)
        else:
            out.append(str(p))
    return "".join(out)


def render(message: object, label: Callable[[Opt], str]) -> str:
    """*message* in another face's words: each option as ``label(opt)``; plain text as it is."""
    if isinstance(message, Hinted):
        return _join(message.parts, label)
    return str(message)


def render_error(exc: BaseException, label: Callable[[Opt], str]) -> str:
    """An exception's message in another face's words (its first argument when that is a :class:`Hinted`)."""
    args = getattr(exc, "args", ())
    if len(args) == 1 and isinstance(args[0], Hinted):
        return render(args[0], label)
    return str(exc)
