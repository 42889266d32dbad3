"""Control characters from data are shown escaped, never sent to the terminal raw."""

from benchloupe.textsafe import has_control, visible


def test_escape_sequences_become_visible():
    hostile = "gpt\x1b]0;pwned\x07-4\x1b[2J\x08\x00\x9b\u202e"
    out = visible(hostile)
    assert "\x1b" not in out and "\x07" not in out and "\x00" not in out and "\x9b" not in out
    assert out == "gpt\\x1b]0;pwned\\x07-4\\x1b[2J\\x08\\x00\\x9b\\u202e"


def test_layout_kept_only_when_asked():
    assert visible("a\nb\tc") == "a\\x0ab\\x09c"
    assert visible("a\nb\tc\x1b", keep_layout=True) == "a\nb\tc\\x1b"
    assert has_control("a\x1bb") and not has_control("a\nb") and has_control("a\nb", allow_layout=False)


def test_plain_text_and_markup_untouched():
    for s in ("[bold red]x[/]", "naïve — 日本語 🙂", ""):
        assert visible(s) == s
    assert visible(3.5) == "3.5"
