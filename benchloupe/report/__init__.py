"""The report (issue 35): one file a curator can attach, with the figures and tables of every analysis.

A third face beside cli/ and tui/ (DESIGN.md, "Layers"): it reads what runs stored, through the store, and never
imports cli/ or tui/; both import it lazily, so matplotlib (imported only inside :mod:`.plots`) stays out of
``benchloupe --help`` and the workbench's start-up.

- :mod:`.build`: :func:`~.build.make_report`, the whole report: the output path checked first, sections gathered,
  rendered and written atomically.
- :mod:`.gather`: the store reads: the benchmark, the latest finished run of each kind, how a run is described.
- :mod:`.doc`: the document model (sections, paragraphs, tables, figures with caption, alt text and data).
- :mod:`.plots`: the matplotlib figures (Agg, SVG text, summarised so 5,000 x 14,000 stays small).
- :mod:`.sections` and :mod:`.sections_more`: one function per section, from stored runs to document blocks.
- :mod:`.html` and :mod:`.markdown`: the two renderings (one self-contained HTML file with inline SVG and no
  JavaScript; or a Markdown file with SVG and CSV files beside it).
"""

FORMATS = ("html", "md")
