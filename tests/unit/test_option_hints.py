"""Error messages name options as structured parts (benchloupe.hints, issue 11 item 7): the CLI shows flags, the
workbench its form fields; no message of the engine, jobs, store or prompts layers spells a CLI flag or command
in plain text."""

from __future__ import annotations

import ast
import pickle
import re
from pathlib import Path

import benchloupe
from benchloupe.hints import Alt, Hinted, Opt, render, render_error, say

PKG = Path(benchloupe.__file__).parent
LAYERS = ("engine", "jobs", "store", "prompts")
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z_-]*")
# Flags of other tools a message may tell the user to pass to *them*, and argv of a subprocess.
FOREIGN = {"--log_samples", "--dump-eval-details", "--short"}
FILE_TEXT = {"# benchloupe endpoints (shared by every database; `benchloupe endpoints show` lists them)"}


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def _cli_wording(tree: ast.AST) -> set[int]:
    """Nodes inside the command-line half of an Alt(cli, ui), and an Opt's own flag (``spelled=``)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Alt" and node.args:
            out |= {id(n) for n in ast.walk(node.args[0])}
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Opt":
            out |= {id(n) for k in node.keywords if k.arg == "spelled" for n in ast.walk(k.value)}
    return out


# Messages that still spell a flag instead of using benchloupe.hints, listed by their first 40 characters so that
# any new one still fails here (issue 32: the 24 of issues 33, 34 and 37 are written with Opt / Alt now).
DEBT: set[str] = set()


def test_no_message_spells_a_cli_flag_or_command():
    bad = []
    for layer in LAYERS:
        for path in sorted((PKG / layer).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            skip = _docstrings(tree) | _cli_wording(tree)
            for node in ast.walk(tree):
                if not (isinstance(node, ast.Constant) and isinstance(node.value, str)) or id(node) in skip:
                    continue
                if node.value in FILE_TEXT:
                    continue
                flags = set(FLAG.findall(node.value)) - FOREIGN
                if (flags or "`benchloupe " in node.value) and node.value[:40] not in DEBT:
                    bad.append(f"{path.relative_to(PKG)}:{node.lineno}: {node.value[:80]!r}")
    assert not bad, "write these with benchloupe.hints (Opt / Alt):\n" + "\n".join(bad)


def test_hinted_reads_as_the_cli_and_renders_as_form_fields():
    msg = say("benchmark 'b' has no arena rewards; ", Opt("arena", "BENCHMARK", verb="pass"), " or fit in static mode")
    assert isinstance(msg, str) and msg == "benchmark 'b' has no arena rewards; pass --arena BENCHMARK or fit in static mode"
    ui = render(msg, lambda o: {"arena": "arena benchmark"}[o.name])
    assert ui == "benchmark 'b' has no arena rewards; set the form's arena benchmark field or fit in static mode"
    assert render(say(Opt("family_from", "arch"), ": none"), lambda o: o.name) == "family_from = arch: none"
    assert render(say("see ", Opt("k"), " and ", Alt("`benchloupe x`", "screen 4")), lambda o: o.name) == \
        "see the k field and screen 4"
    assert render("plain text", lambda o: "x") == "plain text"


def test_parts_survive_joining_exceptions_and_pickling():
    from benchloupe.engine.common import EngineError
    from benchloupe.store.importers.base import ImportFormatError

    exc = ImportFormatError("f.csv", "line 1", "no column 'who'", say("name it with ", Opt("model_col")))
    assert str(exc) == "f.csv:line 1: no column 'who'; name it with --model-col"
    assert render_error(exc, lambda o: "model column") == \
        "f.csv:line 1: no column 'who'; name it with the model column field"
    back = pickle.loads(pickle.dumps(exc.args[0]))
    assert isinstance(back, Hinted) and back.parts == exc.args[0].parts and back == str(exc)
    err = pickle.loads(pickle.dumps(EngineError(say("lower ", Opt("min_family_models")))))
    assert render_error(err, lambda o: o.name) == "lower the min_family_models field"


def test_cli_still_prints_flags(tmp_path, capsys):
    from benchloupe.cli.main import main

    bad = tmp_path / "r.csv"
    bad.write_text("who,item,correct\nm,i,1\n")
    assert main(["import", "long", str(bad), "--db", str(tmp_path / "x.db")]) == 1
    err = capsys.readouterr().err
    assert "name the right column with --model-col" in err


def test_a_flag_spelled_otherwise_than_its_field_and_a_name_from_an_option():
    """compress's purpose is --for on the command line; a name's origin (--as, -b/--benchmark) is an Alt, so the
    workbench names its own field (issue 32: two of the 24 messages that spelled flags)."""
    from benchloupe.engine.common import EngineError
    from benchloupe.jobs.diagnostics import CompressConfig
    from benchloupe.names import BadName, check

    try:
        CompressConfig(purpose="estimate")
    except EngineError as exc:
        assert str(exc) == "--for estimate needs --k K, the number of items to select"
        assert render_error(exc, lambda o: o.name) == "purpose = estimate needs the k field, the number of items to select"
    else:
        raise AssertionError("an estimation subset without k was accepted")
    try:
        check(" ", what="benchmark name", where=Alt("-b/--benchmark", "the benchmark name field"), max_chars=9)
    except BadName as exc:
        assert str(exc).startswith("benchmark name from -b/--benchmark is blank; give -b/--benchmark a name")
        assert render_error(exc, lambda o: o.name).startswith(
            "benchmark name from the benchmark name field is blank; give the benchmark name field a name")
