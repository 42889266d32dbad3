"""Curation from scripts: ``alias`` links a model's names, ``flags`` lists and triages flags."""

from __future__ import annotations

from benchloupe import ranges
from benchloupe.cli.errors import CliError, connect_db
from benchloupe.cli.options import ranged_argument
from benchloupe.cli.output import print_json, table


def cmd_alias(args) -> int:
    from benchloupe.store.curation import alias_models

    conn = connect_db(args)
    try:
        out = alias_models(conn, args.model, args.aliases)  # all or nothing
    finally:
        conn.close()
    if args.json:
        print_json(out)
    else:
        for o in out:
            print(f"{o['alias']} -> {o['model']}" + (" (merged the separately imported model)" if o["merged"] else ""))
    return 0


def register_alias(sub, common) -> None:
    p = sub.add_parser("alias", help="link names of the same model across sources (merges a separately imported one)")
    common(p)
    p.add_argument("model", help="the model's name in the store")
    p.add_argument("aliases", nargs="+", help="other names of the same model (e.g. in an arena set)")
    p.set_defaults(func=cmd_alias)


FLAG_COLS = ["id", "run_id", "kind", "state", "score", "model", "model_b", "item_key", "note"]


def cmd_flags(args) -> int:
    from benchloupe.store import curation, read

    conn = connect_db(args)
    try:
        if args.set:
            try:
                ranges.ROW_ID.parse(args.set[0])
            except ValueError:
                raise CliError(f"--set needs a flag id (a whole number from 1, as `flags` lists them) then a "
                               f"state; got {ranges.shown(args.set[0])!r}") from None
            curation.set_flag_state(conn, int(args.set[0]), args.set[1], args.note)
            changed = curation.flags(conn)
            changed = changed[changed["id"] == int(args.set[0])]
            if args.json:
                print_json(changed[FLAG_COLS + ["payload"]])
            else:
                f = changed.iloc[0]
                what = " ".join(x for x in (f["model"], f["item_key"]) if isinstance(x, str) and x)
                print(f"flag {f['id']} ({f['kind']}, run #{f['run_id']}{', ' + what if what else ''}) is now "
                      f"{f['state']}")
            return 0
        bid = read.benchmark_id(conn, args.benchmark) if args.benchmark else None
        df = curation.flags(conn, run_id=args.run, kind=args.kind, state=args.state, benchmark_id=bid)
    finally:
        conn.close()
    cols = FLAG_COLS
    if args.json:
        print_json(df[cols + ["payload"]])
    elif df.empty:
        print("no flags match")
    else:
        decided = int((df["state"] != "open").sum())
        print(f"{len(df)} flags, {decided} triaged")
        print(table(df[cols], limit=args.limit))
    return 0


def register_flags(sub, common) -> None:
    p = sub.add_parser("flags", help="list flags (anomalies, reversals, gaps) and triage one headlessly",
                       description="The Anomalies and Reversals screens are the place to step through flags; this "
                                   "lists them and sets one's state from a script: --set ID STATE [--note TEXT].")
    common(p)
    p.add_argument("benchmark", nargs="?")
    ranged_argument(p, "--run", range=ranges.ROW_ID, help="only this run's flags")
    p.add_argument("--kind", choices=["anomaly", "reversal", "gap", "candidate"])
    p.add_argument("--state", choices=["open", "confirmed", "dismissed", "unsure"])
    p.add_argument("--set", nargs=2, metavar=("ID", "STATE"), type=str)
    p.add_argument("--note")
    ranged_argument(p, "--limit", range=ranges.count(1, 10**9, "rows"), default=50,
                    help="rows shown (default: 50)")
    p.set_defaults(func=cmd_flags)


REGISTRY = [register_alias, register_flags]
