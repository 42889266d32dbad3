"""The report as one self-contained HTML file: inline SVG figures, inline CSS, no JavaScript, no network.

Every text from data goes through :func:`esc` (control characters made visible, then ``& < > " '`` escaped), so
an item text holding ``<script>`` or a model name holding ``</svg>`` is shown as text. A Content-Security-Policy
forbids scripts and every fetch besides. A figure's numbers come as an attached CSV (a percent-encoded ``data:`` link
that saves the file) and, when short, as a table under the figure.
"""

from __future__ import annotations

import html
from urllib.parse import quote

from benchloupe.textsafe import visible

from .doc import Figure, Para, Section, Table, full_precision

INLINE_ROWS = 30  # a figure's numbers shown as a table too when it has at most this many rows
EMBED_BYTES = 1_000_000  # a figure's CSV larger than this is not embedded (the 5 MB page at 5,000 x 14,000)

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;max-width:62rem;margin:2rem auto;padding:0 1rem;
color:#222;line-height:1.45}
h1{font-size:1.6rem}h2{border-bottom:1px solid #ccc;padding-bottom:.2rem;margin-top:2.2rem}
table{border-collapse:collapse;margin:.6rem 0;font-size:.85rem}td,th{border:1px solid #ddd;padding:.2rem .45rem;
text-align:left;vertical-align:top}th{background:#f3f3f3}caption{caption-side:bottom;text-align:left;
font-size:.8rem;color:#555}
figure{margin:1.2rem 0}figure svg{max-width:100%;height:auto}figcaption{font-size:.88rem;color:#333}
.runs{font-size:.82rem;color:#444}.missing{color:#8a4b00}nav a{margin-right:.8rem}
details{font-size:.82rem}code{background:#f3f3f3;padding:0 .2rem}
"""


def esc(text: object) -> str:
    return html.escape(visible(text, keep_layout=True), quote=True)


def render(title: str, sections: list[Section]) -> str:
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
           "img-src data:\">",
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           f"<title>{esc(title)}</title><style>{CSS}</style></head><body>", f"<h1>{esc(title)}</h1>",
           "<nav>" + "".join(f'<a href="#{s.key}">{esc(s.title)}</a>' for s in sections) + "</nav>"]
    for s in sections:
        out.append(f'<section id="{s.key}"><h2>{esc(s.title)}</h2>')
        for line in s.runs:
            out.append(f'<p class="runs">From {_code(line)}</p>')
        for line in s.missing:
            out.append(f'<p class="missing">{_code(line)}</p>')
        for block in s.blocks:
            out.append(_block(block))
        out.append("</section>")
    out.append("</body></html>")
    return "\n".join(out)


def _code(text: str) -> str:
    """Escaped text whose `backquoted` parts are shown as code."""
    parts = text.split("`")
    return "".join(f"<code>{esc(p)}</code>" if k % 2 else esc(p) for k, p in enumerate(parts))


def _block(block) -> str:
    if isinstance(block, Para):
        return f"<p>{_code(block.text)}</p>"
    if isinstance(block, Table):
        return _table(block, lambda v: esc(v))
    if isinstance(block, Figure):
        return _figure(block)
    raise TypeError(type(block))


def _table(t: Table, cell) -> str:
    head = "".join(f"<th>{esc(c)}</th>" for c in t.columns)
    body = "".join("<tr>" + "".join(f"<td>{cell(v)}</td>" for v in row) + "</tr>" for row in t.rows)
    cap = f"<caption>{esc(t.note)}</caption>" if t.note else ""
    return f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _figure(f: Figure) -> str:
    svg = f.svg
    start = svg.index(">", svg.index("<svg")) + 1
    opening = svg[:start - 1].replace("<svg", f'<svg role="img" aria-label="{esc(f.alt)}"', 1)
    svg = f"{opening}><title>{esc(f.alt)}</title>{svg[start:]}"
    text = f.data.csv_text()
    if len(text) <= EMBED_BYTES:
        data = quote(text, safe=",.-_:;+()*!~'")  # numbers stay as they are: 1.05x, not base64's 1.33x
        link = (f'<a download="{f.key}.csv" href="data:text/csv;charset=utf-8,{data}">numbers (CSV, '
                f"{len(f.data.rows):,} rows, full precision)</a>")
    else:
        how = f"<code>{esc(f.data.source)}</code> writes them, as does" if f.data.source else "they are in"
        link = (f"Numbers: {len(f.data.rows):,} rows ({len(text) / 1e6:.1f} MB), too many to embed here: {how} "
                f"<code>benchloupe report --format md</code> (a CSV beside each figure).")
    table = ""
    if len(f.data.rows) <= INLINE_ROWS:
        table = f"<details><summary>numbers as a table</summary>{_table(f.data, lambda v: esc(full_precision(v)))}</details>"
    return (f'<figure id="{f.key}">{svg}<figcaption><strong>{esc(f.title)}.</strong> {esc(f.caption)} {link}'
            f"</figcaption>{table}</figure>")
