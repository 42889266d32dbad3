"""One validator for the names people and imports give things: curator names (``--as``, ``$BENCHLOUPE_USER``) and
benchmark names (every import, every derived benchmark), issue 37 #8 and #11.

A name is shown to other people (in history lines, approvals, cards, exports), so it must read as what it is, and
two names that read the same must be the same name:

- it is NFC-normalised (NFC and NFD "José" are one name) and stripped;
- it is refused when blank, when it holds a character that is invisible or reorders text (controls, format
  characters: zero-width space and joiners, bidi marks and overrides, the BOM, the soft hyphen, tag characters;
  separators other than the plain space; unassigned, private-use and surrogate code points: a name that was not
  valid UTF-8 arrives with surrogates), a compatibility form (fullwidth letters, ligatures, circled or
  mathematical letters: NFKC would change it), a combining mark with no letter under it or stacked more than
  :data:`MAX_MARKS` deep, or letters of two scripts that pass for each other (Latin, Cyrillic, Greek mixed in one
  name), or only letters that pass for Latin ones (Cyrillic ``аnn`` is refused; ``Анна`` is not);
- :func:`identity` is its key: two names with the same identity (the NFC case-folded name) are one curator or one
  benchmark ("Ann" and "ann").

Each refusal is one line naming where the name came from (``--as``, ``$BENCHLOUPE_USER``, ``-b/--benchmark``) and
showing it with every invisible character spelled out. Pure and dependency-free: every layer may import it.
"""

from __future__ import annotations

import unicodedata

from benchloupe.hints import Alt, say

MAX_MARKS = 2  # combining marks on one letter (Vietnamese needs two: "ệ" in NFD); deeper stacks are "zalgo"
_CONFUSABLE_SCRIPTS = {"LATIN", "CYRILLIC", "GREEK"}
# Cyrillic and Greek letters that read as Latin ones (a subset of Unicode's confusables.txt, the letters a name
# can be spelled with entirely)
_LATIN_LOOKALIKES = set(
    "аеорсухіјѕԁԛԝһӏҽԍոսпАВЕКМНОРСТХІЈЅԜҮ"
    "αοικνρυχΑΒΕΖΗΙΚΜΝΟΡΤΥΧ")
_BAD_CATEGORIES = {
    "Cc": "control characters", "Cf": "an invisible formatting character", "Cs": "bytes that are not UTF-8",
    "Co": "a private-use character", "Cn": "an unassigned code point", "Zl": "a line separator",
    "Zp": "a paragraph separator",
}


class BadName(ValueError):  # a ValueError: every face shows it as one line
    """A name that cannot be used; the message is one line saying why and where."""


def shown(text: str) -> str:
    """The name in quotes, every character that is not plainly visible spelled out as ``\\uXXXX``."""
    out = []
    for ch in text:
        cat = unicodedata.category(ch)
        if ch == "'" or ch == "\\":
            out.append("\\" + ch)
        elif cat[0] in "CZ" and ch != " " or cat in ("Mn", "Me") or unicodedata.normalize("NFKC", ch) != ch:
            code = ord(ch)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
        else:
            out.append(ch)
    return "'" + "".join(out) + "'"


def _script(ch: str) -> str | None:
    """LATIN, CYRILLIC, GREEK (the scripts whose letters pass for each other) for a letter of one, else None."""
    try:
        first = unicodedata.name(ch).split(" ", 1)[0]
    except ValueError:
        return None
    return first if first in _CONFUSABLE_SCRIPTS else None


def check(name: object, *, what: str, where: str | Alt, max_chars: int, commas: bool = True) -> str:
    """*name* normalised (NFC, stripped), or :class:`BadName` with one line: ``what`` names the thing ("curator
    name"), ``where`` where it came from (an :class:`~benchloupe.hints.Alt` for an option: the command line's
    flag, the workbench's field); ``commas`` False refuses a comma (a list separator)."""
    if isinstance(name, bytes):
        try:
            name = name.decode("utf-8")
        except UnicodeDecodeError:
            raise BadName(say(f"{what} from ", where, " is not valid UTF-8; give it in UTF-8 (plain text)")) from None
    raw = str(name)
    value = unicodedata.normalize("NFC", raw).strip(" ")
    fix = say("; give ", where, " a name of plain letters, digits, spaces and punctuation")
    if not value.strip():
        raise BadName(say(f"{what} from ", where, f" is {'empty' if not raw else 'blank'}", fix,
                          f", such as {'bea' if 'curator' in what else 'my-benchmark'}"))
    if len(value) > max_chars:
        raise BadName(say(f"{what} from ", where,
                          f" ({shown(value[:max_chars])}...) is longer than {max_chars} characters"))
    marks = 0
    scripts: set[str] = set()
    letters = lookalikes = 0
    for i, ch in enumerate(value):
        cat = unicodedata.category(ch)
        if cat in _BAD_CATEGORIES:
            if cat == "Cs":
                raise BadName(say(f"{what} from ", where, f" is not valid UTF-8 (it reads {shown(value)})", fix))
            label = unicodedata.name(ch, "")
            raise BadName(say(f"{what} {shown(value)} from ", where, f" holds {_BAD_CATEGORIES[cat]} "
                              f"(U+{ord(ch):04X}{' ' + label if label else ''})", fix))
        if cat == "Zs" and ch != " ":
            raise BadName(say(f"{what} {shown(value)} from ", where, " holds a space other than the plain one "
                              f"(U+{ord(ch):04X} {unicodedata.name(ch, 'unnamed')})", fix))
        if cat in ("Mn", "Me", "Mc"):
            marks += 1
            if i == 0 or marks > MAX_MARKS:
                raise BadName(say(f"{what} {shown(value)} from ", where, " holds ",
                                  "a combining mark with no letter under it" if i == 0 else "stacked combining marks",
                                  fix))
        else:
            marks = 0
        if not commas and ch in ",\uff0c":
            raise BadName(say(f"{what} {shown(value)} from ", where, " holds a comma, which separates names in "
                              "lists of approvers; leave it out"))
        if cat[0] == "L":
            letters += 1
            script = _script(ch)
            if script:
                scripts.add(script)
            if ch in _LATIN_LOOKALIKES:
                lookalikes += 1
    compat = unicodedata.normalize("NFKC", value)
    if compat != value:
        raise BadName(say(f"{what} {shown(value)} from ", where, " holds compatibility characters (fullwidth, "
                          f"ligature, circled or styled letters); write it plainly, as {shown(compat)}"))
    if len(scripts) > 1:
        raise BadName(say(f"{what} {shown(value)} from ", where,
                          f" mixes {' and '.join(sorted(s.title() for s in scripts))} letters that look alike; write "
                          "it in one script"))
    if letters and lookalikes == letters and scripts != {"LATIN"}:
        raise BadName(say(f"{what} {shown(value)} from ", where, " is spelled only with "
                          f"{''.join(sorted(s.title() for s in scripts))} letters that pass for Latin ones; write it in "
                          "Latin letters"))
    return value


def identity(name: str) -> str:
    """The key under which two names are the same: NFC, case-folded (``Ann`` and ``ann``; NFC and NFD
    ``José``)."""
    return unicodedata.normalize("NFC", unicodedata.normalize("NFC", str(name)).strip().casefold())
