"""Every command's --help renders (argparse expands ``%`` in help texts: one bare ``95%`` broke the top-level help
of every command at once)."""

from __future__ import annotations

import argparse

import pytest

from benchloupe.cli.main import build_parser


def _parsers(parser: argparse.ArgumentParser, path=()):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, (*path, name))


def test_every_parser_formats_its_help():
    seen = 0
    for path, parser in _parsers(build_parser()):
        text = parser.format_help()
        assert text.strip(), path
        seen += 1
    assert seen > 20


@pytest.mark.parametrize("argv", [["--help"], ["estimate", "--help"]])
def test_help_exits_zero(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(argv)
    assert exc.value.code == 0
    assert "usage" in capsys.readouterr().out
