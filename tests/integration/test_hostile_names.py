"""Issue 37 #8 and #11: curator names (``--as``, ``$BENCHLOUPE_USER``) and benchmark names (every import) go
through one validator (benchloupe/names.py). Every Unicode general category is tried (tests/hostile.py
``unicode_category_samples``), and every class of name that passes for another (``lookalike_names``): each is
refused with one line naming where it came from, the database unchanged, or accepted as a name that reads as what
it is; one identity per normalised, case-folded name; approvals counted by identity; a curator named ``nan`` is
a curator like any other."""

from __future__ import annotations

import json
import unicodedata

import pytest

from benchloupe import names
from benchloupe.store import actor, fill
from benchloupe.store.db import StoreError, connect
from tests.hostile import check_outcome, dump, lookalike_names, run_cli, unicode_category_samples
from tests.tui.team import small_session

ALWAYS_REFUSED = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}


def _readable(value: str) -> bool:
    """Every character visible and in its plain form: what an accepted name must be."""
    return all(unicodedata.category(c) not in ALWAYS_REFUSED and (c == " " or unicodedata.category(c) != "Zs")
               for c in value) and unicodedata.normalize("NFKC", value) == value == value.strip()


@pytest.mark.parametrize("kind", ["curator", "benchmark"])
def test_every_unicode_category_is_refused_or_reads_as_itself(kind):
    samples = unicode_category_samples()
    assert len(samples) == 30  # every general category, the surrogates included
    where = "--as" if kind == "curator" else "-b/--benchmark"
    for cat, chars in samples.items():
        for ch in chars:
            for name in (f"ann{ch}", f"{ch}ann", f"an{ch}n", ch):
                try:
                    value = (actor.check_name(name) if kind == "curator" else
                             names.check(name, what="benchmark name", where=where, max_chars=200))
                except ValueError as exc:
                    line = str(exc)
                    assert "\n" not in line and where in line, (cat, name, line)
                    assert not any(unicodedata.category(c) in ALWAYS_REFUSED for c in line), (cat, name, line)
                    continue
                assert cat not in ALWAYS_REFUSED and _readable(value), (cat, ascii(name), ascii(value))


def test_names_that_pass_for_another_are_refused_naming_the_source(tmp_path, monkeypatch):
    db = tmp_path / "n.db"
    csv = tmp_path / "r.csv"
    csv.write_text("model,item,correct\nm1,i1,1\nm2,i1,0\n")
    assert run_cli(["--db", db, "import", "long", csv, "-b", "ann"])[0] == 0
    for name in lookalike_names("ann"):
        before = dump(db)
        rc, out, err = run_cli(["--db", db, "--as", name, "import", "long", csv, "-b", "other"])
        check_outcome(("--as", ascii(name)), rc, out, err, before, dump(db))
        assert rc == 1 and "--as" in err, (ascii(name), err)
        if name and "\x00" not in name:  # set but empty is unset; an environment holds no NUL
            monkeypatch.setenv("BENCHLOUPE_USER", name)
            rc, out, err = run_cli(["--db", db, "import", "long", csv, "-b", "other"])
            check_outcome(("$BENCHLOUPE_USER", ascii(name)), rc, out, err, before, dump(db))
            assert rc == 1 and "$BENCHLOUPE_USER" in err, (ascii(name), err)  # refused, never the login instead
        monkeypatch.setenv("BENCHLOUPE_USER", "curator")
        if "," in name:
            continue  # a comma is fine in a benchmark name
        rc, out, err = run_cli(["--db", db, "import", "long", csv, "-b", name])
        check_outcome(("-b", ascii(name)), rc, out, err, before, dump(db))
        assert rc == 1 and "-b/--benchmark" in err, (ascii(name), err)
    for spelling in ("ANN", "Ann", "a\u0301nn"[0:0] + "ann "):  # other spellings of the same identity
        before = dump(db)
        rc, out, err = run_cli(["--db", db, "import", "long", csv, "-b", spelling])
        if spelling.strip() == "ann":
            assert rc == 0, err  # the same name, stripped
        else:
            check_outcome(("-b", spelling), rc, out, err, before, dump(db))
            assert rc == 1 and "another spelling of the existing benchmark 'ann'" in err, err


def test_non_utf8_names_are_one_line():
    bad = b"a\xffb".decode("utf-8", "surrogateescape")
    rc, out, err = run_cli(["--as", bad, "list"])
    check_outcome("non-utf8 --as", rc, out, err)
    assert rc == 1 and "--as is not valid UTF-8" in err


def test_nfc_and_nfd_and_case_are_one_curator(demo_db):
    sid = small_session(demo_db, n=2, approvals=3)
    conn = connect(demo_db)
    try:
        cid = int(fill.candidates(conn, sid)["id"].iloc[0])
        actor.set_actor("Jos\u00e9")  # NFC
        assert fill.decide(conn, cid, "accept") is None
        for same in ("Jose\u0301", "JOSÉ", "jos\u00e9"):  # NFD, upper case, lower case
            actor.set_actor(same)
            with pytest.raises(StoreError, match="already approved"):
                fill.decide(conn, cid, "accept")
        actor.set_actor("ann")
        assert fill.decide(conn, cid, "accept") is None
        got = fill.approver_list(fill.candidates(conn, sid).set_index("id").loc[cid, "approvers"])
        assert got == ["José", "ann"]
    finally:
        actor.set_actor(None)
        conn.close()


def test_a_curator_named_nan_has_approved_nothing(demo_db, capsys):
    """pandas reads a proposal with no approvals as NaN, and ``str(nan)`` is "nan": `review --as nan` skipped
    every proposal as approved by nan already."""
    sid = small_session(demo_db, n=2, approvals=2)
    for who in ("nan", "NaN", "None", "null"):
        rc, out, err = run_cli(["--db", demo_db, "--as", who, "review", "--session", sid, "--json"])
        assert rc == 0, err
        assert len(json.loads(out)) == 2, (who, out[:300])  # both wait for this curator's review
    conn = connect(demo_db)
    try:
        approvers = fill.candidates(conn, sid)["approvers"]
        assert not any(fill.approved_by(a, "nan") for a in approvers)
        assert fill.approver_list(float("nan")) == [] and fill.approver_list(None) == []
    finally:
        conn.close()
