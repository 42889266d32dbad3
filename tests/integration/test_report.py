"""`benchloupe report` (issue 35): the HTML and Markdown reports from stored runs, what they hold, what they refuse,
how they escape text from data, and that a real browser shows the HTML with no broken image and no console error."""

from __future__ import annotations

import csv
import io
import json
import os
import random
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote

import pytest

from tests.hostile import check_outcome, dump, markup_injections, run_cli

SECTIONS = ("overview", "calibration", "items", "compression", "anomalies", "neartie", "coverage", "decisions",
            "provenance")
# Tags a report may hold: the page's own and matplotlib's SVG elements. A tag from data would be anything else.
ALLOWED_TAGS = {"html", "head", "meta", "title", "style", "body", "h1", "h2", "nav", "a", "section", "p", "code",
                "table", "caption", "thead", "tbody", "tr", "th", "td", "figure", "figcaption", "strong", "details",
                "summary", "svg", "g", "defs", "path", "clippath", "use", "text", "rect", "image", "metadata",
                "rdf:rdf", "cc:work", "dc:type", "dc:format", "dc:date", "dc:creator", "dc:title", "tspan"}


class Page(HTMLParser):
    """Start and end tags with their attributes, and the text, as a browser's tokenizer sees them."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.starts: list[tuple[str, dict]] = []
        self.ends: list[str] = []
        self.text: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.starts.append((tag, dict(attrs)))

    def handle_endtag(self, tag):
        self.ends.append(tag)

    def handle_data(self, data):
        self.text.append(data)

    def count(self, tag: str) -> int:
        return sum(1 for t, _ in self.starts if t == tag)


@pytest.fixture(scope="module")
def analysed(showcase_template, tmp_path_factory) -> Path:
    """The demo with its showcase analyses and those it lacks: a bootstrap, the item audit, subset recovery,
    contamination. Run once for the session (tests/built_once.py); each module of a worker gets its own copy."""
    from tests.built_once import built_once, checkpointed

    def build(path: Path) -> None:
        shutil.copy(showcase_template, path)
        for argv in (["bootstrap", "demo-chem", "--B", "10"], ["audit", "items", "demo-chem", "--permutations", "99"],
                     ["compress", "demo-chem"], ["contamination", "demo-math"],
                     ["bootstrap", "demo-math", "--B", "10"]):
            rc, _, err = run_cli(["--db", path, *argv])
            assert rc == 0, (argv, err)

    template = built_once(tmp_path_factory, "report-analysed", checkpointed(build))
    db = tmp_path_factory.mktemp("report") / "a.db"
    shutil.copy(template, db)
    return db


def _report(db: Path, out: Path, *args: str, benchmark: str = "demo-chem") -> dict:
    rc, stdout, err = run_cli(["--db", db, "report", benchmark, "-o", out, "--json", *args])
    assert rc == 0, err
    return json.loads(stdout)


def _csv_links(page: Page) -> dict[str, list[list[str]]]:
    out = {}
    for tag, attrs in page.starts:
        href = attrs.get("href", "")
        if tag == "a" and href.startswith("data:text/csv"):
            text = unquote(href.split(",", 1)[1])
            out[attrs["download"]] = list(csv.reader(io.StringIO(text)))
    return out


def _check_structure(page: Page, figures: int) -> None:
    tags = {t for t, _ in page.starts}
    assert tags <= ALLOWED_TAGS, tags - ALLOWED_TAGS
    assert page.count("svg") == page.ends.count("svg") == page.count("figure") == figures
    for tag, attrs in page.starts:
        assert not any(k.startswith("on") for k in attrs), (tag, attrs)
        for k in ("href", "xlink:href", "src"):
            v = attrs.get(k)
            assert v is None or v.startswith(("#", "data:text/csv;", "data:image/png;")), (tag, k, v[:80])


def test_html_report_has_every_section_figure_caption_and_number(analysed, tmp_path):
    out = tmp_path / "r.html"
    got = _report(analysed, out)
    text = out.read_text(encoding="utf-8")
    page = Page(text)
    assert got["files"] == [str(out)] and got["bytes"] == len(text.encode())
    assert got["figures"] >= 10, got
    _check_structure(page, got["figures"])
    ids = {a.get("id") for t, a in page.starts if t == "section"}
    assert ids == set(SECTIONS)
    svgs = [a for t, a in page.starts if t == "svg"]
    assert all(a.get("role") == "img" and len(a.get("aria-label", "")) > 20 for a in svgs)
    assert page.count("figcaption") == got["figures"]
    csvs = _csv_links(page)
    assert len(csvs) == got["figures"]
    # full precision: the Wright map's numbers are the stored abilities exactly (float repr round-trips)
    from benchloupe.store import runs
    from benchloupe.store.db import connect

    conn = connect(analysed)
    fit = conn.execute("SELECT max(r.id) FROM runs r JOIN benchmarks b ON b.id = r.benchmark_id WHERE b.name ="
                       " 'demo-chem' AND r.kind IN ('joint', 'static') AND r.status = 'done'").fetchone()[0]
    theta = dict(zip(runs.run_models(conn, fit)["name"], runs.run_models(conn, fit)["theta"]))
    conn.close()
    wright = {r[1]: float(r[2]) for r in csvs["calibration-wright.csv"][1:] if r[0] == "model"}
    assert wright == theta
    joined = " ".join(page.text)
    for words in ("run #", "Table 1", "Status: no significant excess detected", "benchloupe compress demo-chem "
                  "--validate", "benchloupe contamination demo-chem", "report made by"):
        assert words in joined, words


def test_each_section_names_its_run_or_the_command_that_makes_it(demo_db, tmp_path):
    from benchloupe.store.db import connect

    conn = connect(demo_db)
    conn.execute("DELETE FROM runs")
    conn.close()
    out = tmp_path / "bare.html"
    got = _report(demo_db, out, benchmark="demo-math")
    for command in ("fit static demo-math", "bootstrap demo-math", "audit items demo-math", "compress demo-math",
                    "anomalies demo-math", "contamination demo-math", "audit neartie demo-math",
                    "coverage demo-math"):
        assert any(f"`benchloupe {command}" in m for m in got["missing"]), command
    assert got["figures"] == 1  # the accuracy histogram needs no run
    _check_structure(Page(out.read_text()), 1)


def test_markdown_report_links_its_figures_and_numbers_relatively(analysed, tmp_path):
    folder = tmp_path / "md"
    got = _report(analysed, folder, "--format", "md")
    md = (folder / "report.md").read_text(encoding="utf-8")
    images = re.findall(r"!\[[^\]]+\]\(([^)]+)\)", md)
    links = re.findall(r"\]\(([^)#]+\.csv)\)", md)
    assert len(images) == len(links) == got["figures"] >= 10
    for name in images + links:
        assert "/" not in name and (folder / name).is_file(), name
    for name in images:
        svg = (folder / name).read_text(encoding="utf-8")
        assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>")
    assert sorted(p.name for p in folder.iterdir()) == sorted(["report.md", *images, *links])


def test_bad_output_or_benchmark_is_one_line_and_leaves_everything_as_it_was(demo_db, tmp_path):
    (tmp_path / "folder").mkdir()
    (tmp_path / "file.md").write_text("x")
    cases = {
        "unknown benchmark": (["report", "no-such", "-o", tmp_path / "x.html"], "no benchmark named"),
        "existing folder for html": (["report", "demo-math", "-o", tmp_path / "folder"], "is a folder"),
        "missing folder": (["report", "demo-math", "-o", tmp_path / "nope" / "r.html"], "no such folder"),
        "file for the md folder": (["report", "demo-math", "-o", tmp_path / "file.md", "--format", "md"],
                                   "not a folder"),
        "missing database": (["report", "demo-math", "-o", tmp_path / "y.html", "--db", tmp_path / "none.db"],
                             "no such database"),
    }
    if os.geteuid() != 0:  # root writes anywhere
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        cases["unwritable folder"] = (["report", "demo-math", "-o", locked / "r.html"], "not writable")
    def listing():  # what the test made (the isolated home and caches are the harness's)
        return sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")
                      if not p.relative_to(tmp_path).parts[0].startswith(("home", "xdg")))

    for case, (argv, words) in cases.items():
        before, files = dump(demo_db), listing()
        rc, out, err = run_cli(["--db", demo_db, *argv] if "--db" not in argv else argv)
        check_outcome(case, rc, out, err, before, dump(demo_db))
        assert rc == 1 and words in err, (case, err)
        assert listing() == files, case
    assert not (tmp_path / "none.db").exists()


@pytest.fixture(scope="module")
def hostile_db(tmp_path_factory) -> Path:
    """A benchmark whose model names, item keys, item text and groups are markup injections
    (tests/hostile.py ``markup_injections``), fitted, bootstrapped, audited, screened for anomalies, its coverage
    measured and its estimates cross-validated (every model answered every item)."""
    folder = tmp_path_factory.mktemp("hostile-report")
    hostile = markup_injections()
    rng = random.Random(0)
    models = [f"m{j}" for j in range(30)] + hostile
    items = [f"i{k}" for k in range(40)] + [f"k{n}{h}" for n, h in enumerate(hostile)]
    rows = [("model", "item", "correct", "text", "group")]
    for j, m in enumerate(models):
        for k, it in enumerate(items):
            p = 1 / (1 + 2.718 ** (-(j % 10 - 5) / 3 + (k % 10 - 5) / 3))
            rows.append((m, it, int(rng.random() < p), f"{hostile[k % len(hostile)]} item {k}", f"g{hostile[k % 3]}"))
    with open(folder / "h.csv", "w", newline="", encoding="utf-8") as fh:
        csv.writer(fh).writerows(rows)
    db = folder / "h.db"
    for argv in (["import", "long", folder / "h.csv", "-b", "hostile"], ["fit", "static", "hostile"],
                 ["bootstrap", "hostile", "--B", "10"], ["anomalies", "hostile"],
                 ["audit", "items", "hostile", "--permutations", "99"], ["coverage", "hostile"],
                 ["compress", "hostile", "--validate", "10,25"]):
        rc, _, err = run_cli(["--db", db, *argv])
        assert rc == 0, (argv, err)
    return db


def test_text_from_data_is_escaped_in_html(hostile_db, tmp_path):
    out = tmp_path / "h.html"
    got = _report(hostile_db, out, benchmark="hostile")
    text = out.read_text(encoding="utf-8")
    page = Page(text)
    _check_structure(page, got["figures"])  # no <script>, <img>, handler or link from data; every </svg> ours
    assert page.count("script") == 0 and "<script" not in text.lower()
    assert "compression-prediction.csv" in _csv_links(page)  # every model answered every item: validated
    shown = "".join(page.text)
    for h in markup_injections():  # each name is shown, as text (control characters visibly escaped)
        from benchloupe.textsafe import visible

        assert visible(h) in shown, h
    for name, rows in _csv_links(page).items():  # the CSVs keep the names exactly
        if name == "calibration-ranks.csv":
            assert set(markup_injections()) <= {r[0] for r in rows[1:]}


def test_text_from_data_is_escaped_in_markdown(hostile_db, tmp_path):
    folder = tmp_path / "md"
    _report(hostile_db, folder, "--format", "md", benchmark="hostile")
    md = (folder / "report.md").read_text(encoding="utf-8")
    assert re.findall(r"<[^a/]|<a [^i]|</[^a]", md) == []  # only our own <a id=...></a> anchors
    assert re.findall(r"(?<!\\)\]\((https?|javascript):", md) == []  # a link from data would be unescaped
    assert re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md) == [p.name for p in sorted(folder.glob("*.svg"),
                                                                                  key=lambda p: md.index(p.name))]
    for svg in folder.glob("*.svg"):  # each figure file is well-formed XML with our tags only
        import xml.etree.ElementTree as ET

        root = ET.fromstring(svg.read_text(encoding="utf-8"))
        assert not [e.tag for e in root.iter() if e.tag.rsplit("}", 1)[-1].lower() in ("script", "foreignobject")]


# ------------------------------------------------------------------------------------------------ in a real browser
def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


CHECKER = """<!DOCTYPE html><html><body><iframe id="r" src="REPORT" width="1200" height="900"></iframe>
<pre id="out">pending</pre><script>
document.getElementById('r').addEventListener('load', function () {
  var d = this.contentDocument, res = {};
  try {
    var imgs = Array.from(d.images);
    res.images = imgs.length;
    res.broken = imgs.filter(function (i) { return !i.complete || i.naturalWidth === 0; }).length;
    var svgs = Array.from(d.querySelectorAll('svg'));
    res.svgs = svgs.length;
    res.empty_svgs = svgs.filter(function (s) { var b = s.getBoundingClientRect(); return b.width < 50 || b.height < 50; }).length;
    var inner = Array.from(d.querySelectorAll('svg image'));
    res.svg_images = inner.length;
    res.scripts = d.querySelectorAll('script').length;
    res.figures = d.querySelectorAll('figure').length;
  } catch (e) { res.error = String(e); }
  document.getElementById('out').textContent = 'RESULT ' + JSON.stringify(res);
});
</script></body></html>"""


def _browser(report: Path, tmp_path: Path) -> tuple[dict, list[str], Path]:
    """What headless Chromium sees: the checker page's counts (images, broken ones, SVGs, scripts), the console
    lines the report itself logs, and a screenshot."""
    exe = _chromium()
    base = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
            f"--user-data-dir={tmp_path / 'profile'}"]
    checker = report.parent / f"check-{report.stem}.html"
    checker.write_text(CHECKER.replace("REPORT", report.name))
    dom = subprocess.run(base + ["--allow-file-access-from-files", "--virtual-time-budget=10000", "--dump-dom",
                                 checker.as_uri()], capture_output=True, text=True, timeout=120)
    found = re.search(r"RESULT (\{.*?\})", dom.stdout)
    assert found, dom.stdout[-2000:] + dom.stderr[-2000:]
    shot = tmp_path / f"{report.stem}.png"
    run = subprocess.run(base + ["--enable-logging=stderr", "--v=0", "--hide-scrollbars", "--window-size=1200,2400",
                                 f"--screenshot={shot}", report.as_uri()], capture_output=True, text=True, timeout=120)
    console = [ln for ln in run.stderr.splitlines() if "CONSOLE" in ln or "Refused to" in ln]
    return json.loads(found.group(1)), console, shot


def _not_blank(shot: Path) -> float:
    import matplotlib.image

    px = matplotlib.image.imread(str(shot))[..., :3]
    return float((px.min(axis=2) < 0.9).mean())  # share of pixels that are not (near) white


@pytest.fixture
def browser():
    if _chromium() is None:
        pytest.skip("no Chromium here (Debian: apt-get install chromium; .ci/run installs it): the report's "
                    "browser check cannot run")


def test_the_browser_check_itself_sees_a_broken_image_and_a_console_error(browser, tmp_path):
    bad = tmp_path / "bad.html"
    bad.write_text('<html><body><script>console.error("boom")</script><img src="missing.png"><svg width="100" '
                   'height="100"><rect width="100" height="100"/></svg></body></html>')
    seen, console, shot = _browser(bad, tmp_path)
    assert seen["broken"] == 1 and seen["scripts"] == 1
    assert any("boom" in ln for ln in console)
    blank = tmp_path / "blank.html"
    blank.write_text("<html><body></body></html>")
    assert _not_blank(_browser(blank, tmp_path)[2]) < 0.001


@pytest.mark.parametrize("which", ["demo", "hostile"])
def test_html_report_in_headless_chromium(browser, which, analysed, hostile_db, tmp_path):
    db, bench = (analysed, "demo-chem") if which == "demo" else (hostile_db, "hostile")
    out = tmp_path / f"{which}.html"
    got = _report(db, out, benchmark=bench)
    seen, console, shot = _browser(out, tmp_path)
    assert "error" not in seen, seen
    assert seen["broken"] == 0 and seen["scripts"] == 0, seen
    assert seen["svgs"] == seen["figures"] == got["figures"] and seen["empty_svgs"] == 0, seen
    assert console == [], console
    assert _not_blank(shot) > 0.02, "the screenshot is (nearly) blank"


def test_help_and_workbench_start_load_no_matplotlib(tmp_path):
    code = ("import sys, runpy; sys.argv = ['benchloupe', '--help']\n"
            "try:\n    runpy.run_module('benchloupe', run_name='__main__')\nexcept SystemExit:\n    pass\n"
            "import benchloupe.tui.app, benchloupe.report.build, benchloupe.cli.report\n"
            "sys.stderr.write('LOADED ' + ' '.join(m for m in sys.modules if m.startswith('matplotlib')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stderr.rstrip().endswith("LOADED"), out.stderr[-500:]


def test_numbers_too_big_to_embed_name_the_command_that_writes_them():
    """A figure's CSV over html.EMBED_BYTES (the near-tie pairs at 5,000 x 14,000: 20,557 rows) is not embedded:
    the caption names the export command instead, and the Markdown variant still writes it beside the figure."""
    from benchloupe.report import html, markdown
    from benchloupe.report.doc import Figure, Section, Table

    rows = [(f"model-{k}", k / 7, k * 1e-9) for k in range(60_000)]
    table = Table(["model", "x", "y"], rows, source="benchloupe export run-artifact b --run 7 --name pairs")
    assert len(table.csv_text()) > html.EMBED_BYTES
    svg = '<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><rect width="10" height="10"/></svg>'
    s = Section("x", "X", blocks=[Figure("big", "Big", "caption", "alt", svg, table),
                                  Figure("small", "Small", "caption", "alt", svg, Table(["a"], [(0.1 + 0.2,)]))])
    page = html.render("t", [s])
    assert "data:text/csv" in page and page.count("data:text/csv") == 1
    assert "too many to embed here: <code>benchloupe export run-artifact b --run 7 --name pairs</code>" in page
    assert "0.30000000000000004" in unquote(page)  # full precision where embedded
    md, files = markdown.render("t", [s])
    assert files["big.csv"].count("\n") == 60_001


def test_the_pairs_drawn_keep_the_reversed_share_and_are_the_same_each_time():
    import numpy as np

    from benchloupe.report.sections_more import _sample

    flag = np.zeros(20_557, bool)
    flag[::5] = True
    a, b = _sample(flag, 2000), _sample(flag, 2000)
    assert np.array_equal(a, b) and len(a) == 2000 and np.all(np.diff(a) > 0)
    assert abs(flag[a].mean() - flag.mean()) < 0.01
    assert np.array_equal(_sample(flag[:100], 2000), np.arange(100))


def test_decisions_count_states_by_kind_and_curator(analysed, tmp_path):
    db = tmp_path / "d.db"
    shutil.copy(analysed, db)
    from benchloupe.store.db import connect

    conn = connect(db)
    ids = [r[0] for r in conn.execute("SELECT f.id FROM flags f JOIN benchmarks b ON b.id = f.benchmark_id WHERE"
                                      " b.name = 'demo-chem' AND f.kind = 'anomaly' ORDER BY f.id LIMIT 3")]
    conn.close()
    for fid, who, state in zip(ids, ("bea", "bea", "ann"), ("confirmed", "confirmed", "dismissed")):
        rc, _, err = run_cli(["--db", db, "--as", who, "flags", "--set", fid, state])
        assert rc == 0, err
    out = tmp_path / "d.html"
    _report(db, out)
    page = Page(out.read_text(encoding="utf-8"))
    cells = [t.strip() for t in page.text if t.strip()]
    at = len(cells) - 1 - cells[::-1].index("Decisions")  # the section's heading (the first is the menu's)
    rows = cells[at:cells.index("Provenance", at)]
    assert ["anomaly", "confirmed", "bea", "2"] == rows[rows.index("confirmed") - 1:rows.index("confirmed") + 3]
    assert ["anomaly", "dismissed", "ann", "1"] == rows[rows.index("dismissed") - 1:rows.index("dismissed") + 3]
