"""``benchloupe search TEXT``: find items by words across every benchmark (issue 16 #5).

A light command like ``list``: it loads neither the engine nor numpy/pandas (tests/unit/test_cli_startup.py), so a
search is a whole process of tens of milliseconds. The words of the query are plain words unless ``--raw`` is given
(see :mod:`benchloupe.store.search`); hits print through the CLI's output helpers, which escape control characters.
"""

from __future__ import annotations

from benchloupe import ranges
from benchloupe.cli.errors import connect_db
from benchloupe.cli.options import ranged_argument
from benchloupe.cli.output import print_json, table_rows

SNIPPET_WIDTH = 72


def cmd_search(args) -> int:
    from benchloupe.store.search import search_items

    conn = connect_db(args)
    try:
        hits = search_items(conn, " ".join(args.text), benchmark=args.benchmark, limit=args.limit, raw=args.raw)
    finally:
        conn.close()
    if args.json:
        print_json(hits)
    elif not hits:
        print("no items match; words must all appear (in any field); `--raw` takes FTS5 syntax such as OR and "
              "prefix*")
    else:
        print(table_rows(["benchmark", "key", "group", "status", "snippet"],
                         [(h["benchmark"], h["key"], h["group"], h["status"], h["snippet"]) for h in hits],
                         max_width=SNIPPET_WIDTH))
    return 0


def register_search(sub, common) -> None:
    p = sub.add_parser("search", help="find items by words in their text, answer, key, group, metadata or "
                                      "benchmark name, across all benchmarks (best first)")
    common(p)
    p.add_argument("text", nargs="+", help="words to find (all must match; quotes, AND, * are plain words); at most "
                                           "64 words (a repeated word counts once) and 100,000 characters")
    p.add_argument("--benchmark", metavar="B", help="search only this benchmark")
    from benchloupe.store.search import MAX_LIMIT  # one range, the store's (issue 37 #15)

    ranged_argument(p, "--limit", range=ranges.count(1, MAX_LIMIT, "hits"), default=50, metavar="N",
                    help="at most N hits (default 50)")
    p.add_argument("--raw", action="store_true",
                   help="TEXT is an FTS5 query (OR, NOT, NEAR, \"phrases\", prefix*, column:word)")
    p.set_defaults(func=cmd_search)


REGISTRY = [register_search]
