"""Text from data in the near-tie audit's Markdown: the file `audit neartie --report` writes (also stored with the
run) and the one `audit robustness --report` writes. Benchmark, model, owner, family and item-group names that are
markup injections (tests/hostile.py ``markup_injections``) must read as themselves: none may break a table, open a
tag, a link, an emphasis or a code span. The files are read back through a real CommonMark renderer with tables
(markdown-it-py, which Textual brings)."""

from __future__ import annotations

import csv
import re
import shlex
from html.parser import HTMLParser

import numpy as np
import pytest
from markdown_it import MarkdownIt

from benchloupe.store import runs
from benchloupe.store.db import connect
from benchloupe.textsafe import visible
from tests.hostile import markup_injections, run_cli
from tests.unit.test_neartie_protocol import simulate

BENCH = "b | `x` *y* <script>alert(0)</script>"  # a backtick would close the code span of the flags command
FAST = ["--protocol", "full", "--controls", "99", "--bootstrap", "20", "--k-grid", "1,2,4", "--split-seeds", "0"]
TAGS = {"h1", "h2", "h3", "p", "ul", "li", "table", "thead", "tbody", "tr", "th", "td", "strong", "em", "code"}  # our own


class Rendered(HTMLParser):
    """The HTML a Markdown viewer makes of the file: its tags, its text, and the text of its code spans."""

    def __init__(self, markdown: str):
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.text: list[str] = []
        self.code: list[str] = []
        self._in_code = False
        self.feed(MarkdownIt("commonmark").enable("table").render(markdown))

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self._in_code = tag == "code"
        if tag == "code":
            self.code.append("")

    def handle_endtag(self, tag):
        self._in_code = self._in_code and tag != "code"

    def handle_data(self, data):
        self.text.append(data)
        if self._in_code:
            self.code[-1] += data


def shown(name: str) -> str:
    """A name as a reader must see it: control characters visibly escaped, on one line."""
    return " ".join(visible(name).split())


def check_markdown(text: str, names: list[str]) -> Rendered:
    """No tag but ours, every table row as many cells as its header, every name in ``names`` shown as itself."""
    page = Rendered(text)
    assert set(page.tags) <= TAGS, set(page.tags) - TAGS
    widths: list[int] = []
    for line in text.splitlines() + [""]:
        if line.startswith("|"):
            widths.append(len(re.findall(r"(?<!\\)(?:\\\\)*\|", line)))
        elif widths:
            assert len(set(widths)) == 1, (widths, line)
            widths = []
    body = "".join(page.text)
    for name in names:
        assert shown(name) in body, name
    return page


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """A simulated benchmark (3 families, 4 item groups, owners with several models) whose names are all markup
    injections, audited with the full protocol; returns (database, report file, model names, family and group
    names)."""
    folder = tmp_path_factory.mktemp("neartie-markup")
    y, ids, fams, owners, groups = simulate(seed=0, n_owners=60, n_items=120)
    h = markup_injections()
    family = {f: f"{h[k]} f{k}" for k, f in enumerate(sorted(set(fams)))}
    group = {g: f"{h[3 + k]} g{k}" for k, g in enumerate(sorted(set(groups)))}
    owner = {o: f"{h[k % len(h)]} o{k}" for k, o in enumerate(dict.fromkeys(owners))}
    models = [f"{h[j % len(h)]} m{j}" for j in range(len(ids))]
    with open(folder / "r.csv", "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["model", "item", "correct", "family", "owner", "group"])
        for j in range(len(ids)):
            for k in range(y.shape[1]):
                w.writerow([models[j], f"i{k}", int(y[j, k]), family[fams[j]], owner[owners[j]], group[groups[k]]])
    db, report = folder / "h.db", folder / "neartie.md"
    rc, _, err = run_cli(["--db", db, "import", "long", folder / "r.csv", "-b", BENCH])
    assert rc == 0, err
    rc, out, err = run_cli(["audit", "neartie", BENCH, "--db", db, "--family-from", "column", "--report", report,
                            "--json", *FAST])
    assert rc == 0, err
    return db, report, [*family.values(), *group.values(), *owner.values()], folder / "r.csv"


def test_neartie_report_shows_names_as_themselves(hostile):
    db, report, labels, _ = hostile
    conn = connect(db)
    try:
        rid = conn.execute("SELECT max(id) FROM runs WHERE kind = 'neartie'").fetchone()[0]
        pairs = runs.load_artifact(conn, rid, "pairs")
        stored = runs.load_artifact(conn, rid, "report")
    finally:
        conn.close()
    reversed_ = pairs[pairs["reversed"].astype(bool) & ~pairs["tied"].astype(bool)]
    names = sorted(set(reversed_["model_a"]) | set(reversed_["model_b"]))
    assert len(names) >= 10 and len(set(np.concatenate([pairs["owner_a"], pairs["owner_b"]]))) >= 10
    text = report.read_text(encoding="utf-8")
    assert text == stored
    page = check_markdown(text, [BENCH, *labels[:7], *names])  # the families and groups; the pairs' models
    assert "## Table 2" in text and "## Table 10" in text  # where the family and group names are
    assert f"benchloupe flags {shlex.quote(BENCH)} --kind reversal --run {rid}" in page.code


def test_robustness_report_shows_benchmark_names_as_themselves(hostile, tmp_path):
    db, _, _, _ = hostile
    out = tmp_path / "robustness.md"
    rc, _, err = run_cli(["audit", "robustness", BENCH, "--db", db, "--need", "1", "--report", out])
    assert rc == 0, err
    check_markdown(out.read_text(encoding="utf-8"), [BENCH])


def test_the_report_of_the_audit_shows_names_and_quotes_its_commands(hostile, tmp_path):
    """`benchloupe report --format md` on the audited benchmark: the near-tie section's pairs show the names as
    themselves, and every command it suggests takes the benchmark's name as one shell word (a name with a space or
    a ``;`` printed raw there made another command of the rest)."""
    db, _, _, results = hostile
    bench = "b2; rm -rf x <script>alert(0)</script>"
    for argv in (["import", "long", results, "-b", bench], ["audit", "neartie", bench, "--family-from", "column"],
                 ["report", bench, "--format", "md", "-o", tmp_path / "md"]):
        rc, _, err = run_cli(["--db", db, *argv])
        assert rc == 0, err
    text = (tmp_path / "md" / "report.md").read_text(encoding="utf-8")
    page = Rendered(text)
    assert set(page.tags) <= TAGS | {"a", "img", "br"}, set(page.tags) - TAGS
    shown_pairs = text[text.index("reversed pairs, the most robust"):]
    assert "&lt;script&gt;" in text and shown_pairs
    commands = [c for c in page.code if c.startswith("benchloupe ")]
    assert len([c for c in commands if " flags " in c or " fill " in c]) >= 2
    for c in commands:
        words = shlex.split(c)
        assert bench in words, c
