"""Curation from scripts: ``alias`` links a model's names, ``flags`` lists and triages flags."""

from __future__ import annotations

from benchloupe import ranges
from benchloupe.cli.errors import CliError, connect_db
from benchloupe.cli.options import ranged_argument
from benchloupe.cli.output import print_json, table
from benchloupe.words import count


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


FLAG_COLS = ["id", "run_id", "kind", "state", "score", "model", "model_b", "item_key", "note", "updated_by",
             "updated_at", "version"]


def _flag_line(f) -> str:
    what = " ".join(x for x in (f["model"], f["item_key"]) if isinstance(x, str) and x)
    return f"flag {f['id']} ({f['kind']}, run #{f['run_id']}{', ' + what if what else ''})"


def cmd_flags(args) -> int:
    """List the current flags (store/queue.py ``current_flags``: the latest run of each analysis, decisions
    carried over; the workbench's queues count the same), every run's with ``--all-runs``; or act on one."""
    import pandas as pd

    from benchloupe.store import read
    from benchloupe.store.actor import by_at
    from benchloupe.store.queue import current_flags

    conn = connect_db(args)
    try:
        if args.fix_key or args.retire is not None:
            return _item_decision(args, conn)
        if args.set or args.undo is not None or args.history is not None:
            return _flag_action(args, conn)
        bid = read.benchmark_id(conn, args.benchmark) if args.benchmark else None
        history = bool(args.all_runs) or args.run is not None
        df = current_flags(conn, benchmark_id=bid, kind=args.kind, state=args.state, run_id=args.run,
                           all_runs=bool(args.all_runs))
    finally:
        conn.close()
    if args.by is not None:
        df = df[(df["updated_by"] == args.by) & (df["version"] > 0)]
    cols = FLAG_COLS
    if args.json:
        print_json(df[cols + ["carried_from", "superseded", "payload"]])
    elif df.empty:
        print("no flags match")
    else:
        decided = int((df["state"] != "open").sum())
        print(f"{count(len(df), 'flag')}, {decided} triaged" + (
            f" ({count(int(df['superseded'].sum()), 'flag')} of earlier runs)" if history else ""))
        shown = df[cols[:-3]].copy()
        carried = [None if pd.isna(c) else int(c) for c in df["carried_from"]]
        shown["decided"] = [f"carried from #{c}" if c is not None else (by_at(b, a) if v else "")
                            for b, a, v, c in zip(df["updated_by"], df["updated_at"], df["version"], carried,
                                                  strict=True)]
        if history:
            shown["run"] = ["earlier" if s else "current" for s in df["superseded"]]
        print(table(shown, limit=args.limit))
    return 0


def _item_decision(args, conn) -> int:
    """``--fix-key FLAG LABEL`` (the item's new answer; its results re-scored from the stored options, the flag
    confirmed, one transaction; ``--expect LABEL`` is the key you saw) and ``--retire FLAG`` (the item retired and
    the flag confirmed) on an item flag (issue 33)."""
    from benchloupe.store import curation, itemkeys

    fid = args.fix_key[0] if args.fix_key else args.retire
    try:
        fid = int(ranges.ROW_ID.parse(str(fid)))
    except ValueError:
        raise CliError(f"give a flag id (a whole number from 1, as `flags --kind item` lists them); got "
                       f"{ranges.shown(str(fid))!r}") from None
    row = conn.execute("SELECT kind, item_id FROM flags WHERE id = ?", (fid,)).fetchone()
    if row is None:
        raise CliError(f"no flag with id {fid}")
    if row["kind"] != "item" or row["item_id"] is None:
        article = "an" if row["kind"][:1] in "aeiou" else "a"
        raise CliError(f"flag {fid} is {article} {row['kind']} flag, not an item flag; --fix-key and --retire decide "
                       "item flags (`flags --kind item` lists them)")
    if args.fix_key:
        out = itemkeys.fix_key(conn, int(row["item_id"]), args.fix_key[1], args.note or "",
                               expect_answer=args.expect_key, flag_id=fid)
        if args.json:
            print_json(out)
        else:
            print(f"item {out['item']}: key {out['from']} -> {out['to']}; {count(out['changed'], 'result')} "
                  f"re-scored; flag {fid} confirmed (undo: `benchloupe flags --undo {fid}`)")
        return 0
    curation.set_item_status(conn, int(row["item_id"]), "retired", args.note or "")
    curation.set_flag_state(conn, fid, "confirmed", args.note)
    key = conn.execute("SELECT key FROM items WHERE id = ?", (row["item_id"],)).fetchone()[0]
    if args.json:
        print_json({"flag": fid, "item": key, "status": "retired", "state": "confirmed"})
    else:
        print(f"item {key} retired; flag {fid} confirmed")
    return 0


def _flag_action(args, conn) -> int:
    """``--set ID STATE`` (optimistic with ``--expect``), ``--undo [ID]``, ``--history ID``."""
    from benchloupe.store import curation
    from benchloupe.store.actor import by_at, current
    from benchloupe.textsafe import one_line

    if args.history is not None:
        rows = curation.flag_history(conn, [args.history], limit=args.limit)
        if args.json:
            print_json(rows)
        elif rows.empty:
            print(f"flag {args.history} has no decisions")
        else:
            for r in rows.itertuples():
                print(f"{r.state:9s} {'(undo) ' if r.action == 'flag:undo' else ''}{by_at(r.actor, r.at)}"
                      + (f"  note: {one_line(r.note)}" if r.note else ""))
        return 0
    if args.undo is not None:
        out = curation.undo_latest(conn, None if args.undo == 0 else args.undo)
        changed = curation.flags(conn, ids=list(out["flags"]))
        if args.json:
            print_json({"undone": out["undone"], "flags": changed[FLAG_COLS]})
        else:
            for f in changed.to_dict("records"):
                print(f"{_flag_line(f)}: {current()}'s decision undone; back to {f['state']}")
        return 0
    try:
        ranges.ROW_ID.parse(args.set[0])
    except ValueError:
        raise CliError(f"--set needs a flag id (a whole number from 1, as `flags` lists them) then a state; got "
                       f"{ranges.shown(args.set[0])!r}") from None
    fid = int(args.set[0])
    before = curation.flags(conn, ids=[fid])
    if args.expect is not None and args.expect_version is not None:
        raise CliError("give --expect STATE or --expect-version N, not both")
    curation.set_flag_state(conn, fid, args.set[1], args.note, expect_state=args.expect,
                            expect_version=args.expect_version)
    changed = curation.flags(conn, ids=[fid])
    if args.json:
        print_json(changed[FLAG_COLS + ["payload"]])
    else:
        f, old = changed.iloc[0], before.iloc[0]
        was = f"was {old['state']}" + (f" {by_at(old['updated_by'], old['updated_at'])}" if old["version"] else "")
        print(f"{_flag_line(f)} is now {f['state']} ({was})")
    return 0


def register_flags(sub, common) -> None:
    p = sub.add_parser("flags", help="list flags (anomalies, reversals, gaps) and triage one headlessly",
                       description="The Anomalies and Reversals screens are the place to step through flags; this "
                                   "lists them and sets one's state from a script: --set ID STATE [--note TEXT]. "
                                   "With several curators on one database, --expect STATE (or --expect-version N) "
                                   "refuses the write, exit 1, naming who changed it when the flag is no longer "
                                   "in that state; without it the write goes through and the audit log keeps "
                                   "what it replaced. --undo takes back your own latest decision (--as NAME).")
    common(p)
    p.add_argument("benchmark", nargs="?")
    ranged_argument(p, "--run", range=ranges.ROW_ID, help="only this run's flags")
    p.add_argument("--kind", choices=["anomaly", "reversal", "gap", "candidate", "item"])
    p.add_argument("--state", choices=["open", "confirmed", "dismissed", "unsure"])
    p.add_argument("--by", metavar="NAME", help="only flags last decided by this curator")
    p.add_argument("--all-runs", action="store_true",
                   help="also the flags of earlier runs of each analysis (history; by default only the latest "
                        "run's, with decisions carried over, as the workbench shows them)")
    p.add_argument("--set", nargs=2, metavar=("ID", "STATE"), type=str)
    p.add_argument("--note")
    p.add_argument("--expect", choices=["open", "confirmed", "dismissed", "unsure"], metavar="STATE",
                   help="with --set: the state the flag must still be in (else refused: another curator changed it)")
    ranged_argument(p, "--expect-version", range=ranges.count(0, ranges.INT64_MAX, "a flag's version"), metavar="N",
                   help="with --set: the version the flag must still have (the version column of the listing)")
    ranged_argument(p, "--undo", nargs="?", const=0, metavar="ID",
                    range=ranges.count(1, ranges.INT64_MAX, "a flag id", special=(0, "your latest decision")),
                   help="undo your own latest flag decision (on flag ID when given); refused when someone "
                        "changed the flag since")
    p.add_argument("--fix-key", nargs=2, metavar=("ID", "LABEL"),
                   help="item flag ID: make LABEL the item's key, re-score its results from the stored chosen "
                        "options and confirm the flag, in one transaction (undo with --undo ID)")
    p.add_argument("--expect-key", metavar="LABEL",
                   help="with --fix-key: the key the item must still have (else refused: someone changed it)")
    ranged_argument(p, "--retire", range=ranges.ROW_ID, metavar="ID",
                    help="item flag ID: retire the item (left out of new fits, results kept) and confirm the flag")
    ranged_argument(p, "--history", range=ranges.ROW_ID, metavar="ID", help="who decided what on flag ID, and when")
    ranged_argument(p, "--limit", range=ranges.count(1, 10**9, "rows"), default=50, help="rows shown (default: 50)")
    p.set_defaults(func=cmd_flags)


REGISTRY = [register_alias, register_flags]
