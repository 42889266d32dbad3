"""The report as Markdown with its figures (SVG) and their numbers (CSV) as files beside it, linked relatively,
as GitHub renders them. Text from data is escaped for Markdown: control characters made visible, HTML's ``< > &``
as entities, and Markdown's punctuation (``* _ ` [ ] | # !`` ...) behind a backslash
(:func:`benchloupe.textsafe.markdown`, as every Markdown writer escapes it)."""

from __future__ import annotations

from benchloupe.textsafe import markdown as esc

from .doc import Figure, Para, Section, Table


def _code(text: str) -> str:
    parts = text.split("`")
    return "".join(f"`{p.replace('`', '')}`" if k % 2 else esc(p) for k, p in enumerate(parts))


def render(title: str, sections: list[Section]) -> tuple[str, dict[str, str]]:
    """The Markdown text and the files beside it (name -> text)."""
    files: dict[str, str] = {}
    out = [f"# {esc(title)}", "", " · ".join(f"[{esc(s.title)}](#{s.key})" for s in sections), ""]
    for s in sections:
        out += [f'<a id="{s.key}"></a>', "", f"## {esc(s.title)}", ""]
        out += [f"From {_code(line)}  " for line in s.runs]
        out += [f"**Missing:** {_code(line)}  " for line in s.missing]
        out.append("")
        for block in s.blocks:
            if isinstance(block, Para):
                out += [_code(block.text), ""]
            elif isinstance(block, Table):
                out += _table(block) + [""]
            elif isinstance(block, Figure):
                files[f"{block.key}.svg"] = block.svg
                files[f"{block.key}.csv"] = block.data.csv_text()
                out += [f"![{esc(block.alt)}]({block.key}.svg)", "",
                        f"*{esc(block.title)}.* {esc(block.caption)} [Numbers (CSV, {len(block.data.rows):,} rows, "
                        f"full precision)]({block.key}.csv)", ""]
    return "\n".join(out), files


def _table(t: Table) -> list[str]:
    lines = ["| " + " | ".join(esc(c) for c in t.columns) + " |", "|" + "---|" * len(t.columns)]
    lines += ["| " + " | ".join(esc(v) for v in row) + " |" for row in t.rows]
    if t.note:
        lines += ["", f"*{esc(t.note)}*"]
    return lines
