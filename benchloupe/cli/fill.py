"""``benchloupe endpoints``, ``benchloupe fill`` and ``benchloupe review`` (BenchFill, paper 003 §4)."""

from __future__ import annotations

import argparse
import difflib
import sys

from benchloupe import ranges
from benchloupe.cli.errors import CliError, db_path
from benchloupe.cli.options import StderrProgress, ranged_argument
from benchloupe.cli.output import kv, print_json, table
from benchloupe.words import count


def cmd_endpoints(args) -> int:
    # jobs.endpoints: the settings only, neither the BenchFill engine nor openai (issue 36 point 4)
    from benchloupe.jobs import endpoints, simulated
    from benchloupe.store.db import connect

    if args.action == "show":
        conn = connect(db_path(args))
        try:
            eps = endpoints.get_endpoints(conn, with_source=True)
        finally:
            conn.close()
    else:
        fields = {"base_url": args.base_url, "model": args.model, "api_key_env": args.api_key_env,
                  "timeout": args.timeout, "max_retries": args.max_retries, "concurrency": args.concurrency,
                  "name": args.name, "trials": args.trials, "json_mode": args.json_mode,
                  "retry_after_max": args.retry_after_max, "deadline": args.deadline, "max_reply_mb": args.max_reply_mb}
        for flag, value, least in (("--timeout", args.timeout, None), ("--max-retries", args.max_retries, 0),
                                   ("--concurrency", args.concurrency, 1), ("--trials", args.trials, 1)):
            if value is None:
                continue
            if least is None and not value > 0:
                raise CliError(f"{flag} {value:g}: give the seconds to wait per request, a number above 0 "
                               "(default: 60)")
            if least is not None and value < least:
                raise CliError(f"{flag} {value}: give a whole number of at least {least}")
        if args.action == "set" and not args.role:
            raise CliError("endpoints set needs a role: rewriter, judge or annotator")
        if args.action == "remove" and args.role in ("rewriter", "judge"):
            role = f"remove-{args.role}"
        elif args.action == "remove":
            if not args.name:
                raise CliError("endpoints remove needs a role (rewriter or judge) or --name: the annotator to remove")
            role = "remove-annotator"
        else:
            role = args.role
        eps = endpoints.set_endpoint(db_path(args), role, scope="user" if args.user else "database", **fields)
    eps = endpoints.redacted(eps)  # a URL with credentials stored by an older version is shown without them
    if args.json:
        print_json(eps)
        return 0

    def where(e: dict) -> str:
        url = e.get("base_url") or "$OPENAI_BASE_URL"
        if simulated.is_simulated(url):
            return f"{e.get('model')} at {url} (simulated: built-in server on 127.0.0.1, no network, no key)" + (
                f"  [{e['source']}]" if e.get("source") else "")
        src = f"  [{e['source']}]" if e.get("source") else ""
        mode = ", JSON mode" if e.get("json_mode") else ""
        env = e.get("api_key_env", "OPENAI_API_KEY")
        key = f"key from ${env}" if env else "no key"
        return f"{e.get('model')} at {url}, {key}{mode}{src}"

    for role in ("rewriter", "judge"):
        e = eps.get(role)
        print(f"{role:9s} " + ("(not set)" if not e else where(e)))
    for a in eps.get("annotators", []):
        print(f"annotator {a['name']} -> {where(a)}, {a['trials']} trials")
    print(f"(user file: {endpoints.user_endpoints_path()}; a database's own settings override it)")
    return 0


def register_endpoints(sub, common) -> None:
    p = sub.add_parser("endpoints", help="OpenAI-compatible endpoints of the BenchFill rewriter, judge and annotators",
                       description="Endpoints live in the per-user file $XDG_CONFIG_HOME/benchloupe/endpoints.toml "
                                   "(--user; shared by every database) and in the database (default), which "
                                   "overrides the file per role and annotator. Never the key: it is read from the "
                                   "environment variable named by --api-key-env, default OPENAI_API_KEY; no "
                                   "--base-url means $OPENAI_BASE_URL.")
    common(p)
    p.add_argument("action", choices=["show", "set", "remove"])
    p.add_argument("role", nargs="?", choices=["rewriter", "judge", "annotator"])
    p.add_argument("--base-url", help="e.g. https://api.openai.com/v1 or http://localhost:8000/v1 "
                                      "(default: $OPENAI_BASE_URL when the session runs)")
    p.add_argument("--user", action="store_true",
                   help="set it in the per-user endpoints file shared by every database, not in this database")
    p.add_argument("--json-mode", action=argparse.BooleanOptionalAction, default=None,
                   help="ask the rewriter and judge for JSON replies (response_format), where the server supports it")
    p.add_argument("--model", help="model name the server knows")
    p.add_argument("--api-key-env", help="environment variable holding the key (default: OPENAI_API_KEY)")
    p.add_argument("--name", help="annotator: the benchmark model whose fitted ability it carries")
    ranged_argument(p, "--trials", range=ranges.FIELDS["AnnotatorSpec.trials"],
                    help="annotator: trials K_j per child (default: 4)")
    ranged_argument(p, "--timeout", range=ranges.FIELDS["EndpointConfig.timeout"], help="seconds per request (default: 60)")
    ranged_argument(p, "--max-retries", range=ranges.FIELDS["EndpointConfig.max_retries"],
                    help="retries on 429/5xx/timeouts (default: 4)")
    ranged_argument(p, "--concurrency", range=ranges.FIELDS["EndpointConfig.concurrency"],
                    help="parallel requests to this endpoint (default: 8)")
    ranged_argument(p, "--retry-after-max", range=ranges.FIELDS["EndpointConfig.retry_after_max"], metavar="SECONDS",
                    help="longest Retry-After of a 429/503 that a request waits for; a server asking more fails the "
                         "request at once (default: 60)")
    ranged_argument(p, "--deadline", range=ranges.FIELDS["EndpointConfig.deadline"], metavar="SECONDS",
                    help="longest one request may take in all, headers and body (--timeout bounds each read); a server "
                         "that drips its reply is cut off there with one line (default: 300)")
    ranged_argument(p, "--max-reply-mb", range=ranges.FIELDS["EndpointConfig.max_reply_mb"], metavar="MIB",
                    help="largest reply body, decoded (gzip and deflate are decoded as they arrive); a larger or "
                         "endless reply is cut off there with one line (default: 32)")
    p.set_defaults(func=cmd_endpoints)


def cmd_fill(args) -> int:
    from benchloupe.jobs import fill
    from benchloupe.store import fill as fillstore
    from benchloupe.store.db import connect

    if args.list:
        conn = connect(db_path(args))
        try:
            df = fillstore.sessions(conn, args.benchmark)
        finally:
            conn.close()
        if args.json:
            print_json(df)
        else:
            print(table(df) if len(df) else "no BenchFill sessions")
        return 0
    if fill.uses_simulated(db_path(args)):
        from benchloupe.jobs import simulated

        print(_simulated_line(fill.effective_endpoints(db_path(args))), file=sys.stderr)
        with simulated.serving():
            return _run_fill(args)
    return _run_fill(args)


def _rounded(v):
    """Numbers as a curator reads them (issue 32: raw floats such as 0.30000000000000004): 4 significant digits,
    through lists and dicts (the gap, Table 2's metrics); --json keeps them exact."""
    if isinstance(v, float):
        return float(f"{v:.4g}") if v == v else v
    if isinstance(v, list | tuple):
        return [_rounded(x) for x in v]
    if isinstance(v, dict):
        return {k: _rounded(x) for k, x in v.items()}
    return v


def _simulated_line(eps: dict) -> str:
    """Which BenchFill roles use the built-in simulated endpoint, and which do not (issue 32)."""
    from benchloupe.jobs.simulated import simulated_roles

    sim, real = simulated_roles(eps)
    where = "the built-in server on 127.0.0.1 runs for this command"
    if not real:
        return f"BenchFill endpoints: simulated ({where}; `benchloupe endpoints set` points them at a real one)"
    ann = [r for r in sim if r.startswith("annotator ")]
    named = [r for r in sim if not r.startswith("annotator ")] + ([count(len(ann), "annotator")] if ann else [])
    ann_real = [r for r in real if r.startswith("annotator ")]
    others = [r for r in real if not r.startswith("annotator ")] + (
        [count(len(ann_real), "annotator")] if ann_real else [])
    return (f"BenchFill: {' and '.join(named)} on the simulated endpoint ({where}); {' and '.join(others)} on "
            f"{'its' if len(real) == 1 else 'their'} own {'endpoint' if len(real) == 1 else 'endpoints'}")


def _run_fill(args) -> int:
    from benchloupe.jobs import fill

    progress = StderrProgress("fill")
    stopped = None
    try:
        if args.resume is not None:
            sid = fill.resume_fill(db_path(args), args.resume, progress=progress)
        else:
            if not args.benchmark:
                raise CliError("fill needs a BENCHMARK (or --resume SESSION / --list)")
            options = fill.FillOptions(gap=args.gap, answer_format=args.answer_format, baseline=args.baseline,
                                       approvals=args.approvals,
                                       **({} if args.max_stored_chars is None
                                          else {"max_stored_chars": args.max_stored_chars}))
            sid = fill.start_fill(db_path(args), args.benchmark, options, progress=progress)
    except fill.FillStopped as exc:  # the session exists: show what it did, then say why it stopped (exit 1)
        stopped, sid = exc, exc.session_id
    summary = fill.session_summary(db_path(args), sid)
    if args.json:
        print_json(summary)
    else:
        events = summary.pop("events")
        print(kv({k: _rounded(v) for k, v in summary.items() if v is not None}))
        for e in events:
            if e["level"] != "info":
                print(f"{e['level']}: {e['message']}")
        if summary["pending"]:
            print(f"\n{count(summary['pending'], 'proposal')} {'waits' if summary['pending'] == 1 else 'wait'} for "
                  f"review: `benchloupe review --session {sid}`")
    if stopped is not None:
        raise CliError(str(stopped))
    return 0


def register_fill(sub, common) -> None:
    p = sub.add_parser("fill", help="BenchFill: rewrite items toward a coverage gap's target difficulty",
                       description="Paper 003 Algorithm 2 on gap N (1 = largest) of the latest coverage run: R=4 "
                                   "parents, L=16 references, C=4 children, validity judge, annotation by the "
                                   "configured annotator models, online calibration, T=8 rounds, tau=0.01. "
                                   "Every step is written to the database as it happens; --resume continues an "
                                   "interrupted session. Proposals wait for `benchloupe review`.")
    common(p)
    p.add_argument("benchmark", nargs="?")
    ranged_argument(p, "--gap", range=ranges.FIELDS["FillOptions.gap"], default=1, help="which gap (1 = largest; default: 1)")
    p.add_argument("--answer-format", default="auto", choices=["auto", "short", "choice", "free"])
    p.add_argument("--baseline", action="store_true", help="also run the budget-matched best-of-N baseline (E.1)")
    ranged_argument(p, "--resume", range=ranges.ROW_ID, metavar="SESSION", help="continue a session")
    ranged_argument(p, "--max-stored-chars", range=ranges.FIELDS["FillOptions.max_stored_chars"], metavar="N",
                   help="keep at most N characters of each prompt and reply in the journal (default: 16384; 0 = all)")
    p.add_argument("--list", action="store_true", help="list sessions")
    ranged_argument(p, "--approvals", range=ranges.FIELDS["FillOptions.approvals"], default=1, metavar="N",
                   help="curators who must accept a proposal before it becomes an item (default: 1); the "
                        "approvers are recorded")
    p.set_defaults(func=cmd_fill)


def _diff(parent: str, child: str) -> str:
    lines = difflib.unified_diff(parent.splitlines(), child.splitlines(), "parent", "proposal", lineterm="", n=2)
    return "\n".join(lines)


class _Heartbeat:
    """Renews this reviewer's review leases every REVIEW_BEAT_S from a thread with its own connection, while the
    prompt waits for the curator (store/fill.py: a lease not renewed expires)."""

    def __init__(self, db, token: str) -> None:
        import threading

        self.db, self.token, self.stop = db, token, threading.Event()
        self.thread = threading.Thread(target=self._run, name="review-heartbeat", daemon=True)

    def _run(self) -> None:
        from benchloupe.store import fill as fillstore
        from benchloupe.store.db import connect

        while not self.stop.wait(fillstore.REVIEW_BEAT_S):
            try:
                conn = connect(self.db)
                try:
                    fillstore.renew_reviews(conn, self.token)
                finally:
                    conn.close()
            except Exception:  # noqa: BLE001 - a missed beat: the lease lasts REVIEW_LEASE_S
                pass

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()


def cmd_review(args) -> int:
    from benchloupe.store import actor, runners
    from benchloupe.store import fill as fillstore
    from benchloupe.store.actor import by_at, short_time
    from benchloupe.store.db import StoreError, connect

    me = actor.current()
    conn = connect(db_path(args))
    try:
        if args.session is not None:
            fillstore.session(conn, args.session)  # no such session: one line, exit 1 (issue 24)
        queue = fillstore.candidates(conn, args.session)
    finally:
        conn.close()
    queue = queue[queue["review_state"].isin(("pending", "waiting"))]
    queue = queue[[not fillstore.approved_by(a, me) for a in queue["approvers"]]]  # not approved by me yet
    if args.json:
        from benchloupe.jobs.fill_dupes import words

        out = queue.drop(columns=["payload"])
        out["duplicate_of"] = [words(p.get("duplicate_of")) or None for p in queue["payload"]]
        print_json(out)
        return 0
    if queue.empty:
        print("no proposals wait for review")
        return 0
    reviewer = runners.this_runner()
    decided = refused = 0
    try:
        with _Heartbeat(db_path(args), reviewer["token"]):
            for n, c in enumerate(queue.itertuples(), 1):
                conn = connect(db_path(args))
                try:
                    busy = fillstore.claim_review(conn, int(c.id), reviewer)
                    rows = fillstore.candidates(conn, int(c.session_id), reviewable_only=False)
                    now = rows.set_index("id").loc[int(c.id)]
                finally:
                    conn.close()
                if busy is not None:
                    print(f"proposal #{c.id}: {busy['holder']} is reviewing it (since {short_time(busy['since_at'])});"
                          " skipped")
                    continue
                if now["review_state"] not in ("pending", "waiting"):
                    print(f"proposal #{c.id}: already {now['review_state']} "
                          f"{by_at(now['decided_by'], now['decided_at'])}; skipped")
                    continue
                outcome = _review_one(args, c, now, n, len(queue), reviewer["token"])
                if outcome == "quit":
                    break
                if outcome == "decided":
                    decided += 1
                elif outcome == "refused":
                    refused += 1
    finally:
        try:
            conn = connect(db_path(args))
            try:
                fillstore.release_reviews(conn, reviewer["token"])
            finally:
                conn.close()
        except StoreError:
            pass
    print(f"{decided} decided" + (f", {refused} refused (another curator got there first)" if refused else ""))
    return 0


def _review_one(args, c, now, n: int, total: int, token: str) -> str:
    """Show one proposal and take the curator's decision: decided, refused, skipped or quit."""
    from benchloupe.jobs import fill
    from benchloupe.jobs.fill_dupes import words
    from benchloupe.store import fill as fillstore
    from benchloupe.store.db import StoreError

    inp = sys.stdin
    print(f"\n=== proposal {n} of {total} (candidate {c.id}, session {c.session_id}, round {c.round}) ===")
    print(f"target z* = {c.target:.3f}   estimated z = {c.difficulty_norm:.3f}   |z - z*| = {c.distance:.3f}")
    if int(now["approvals"]) > 1:
        got = fillstore.approver_list(now["approvers"])
        print(f"approvals: {len(got)} of {int(now['approvals'])}" + (f" ({', '.join(got)})" if got else ""))
    print(f"judge: {c.verdict or 'valid'}")
    dup = words(c.payload.get("duplicate_of")) if isinstance(c.payload, dict) else ""
    if dup:
        print(f"warning: {dup}")
    print("--- parent " + (c.parent_key or "") + "\n" + (c.parent_text or "(another proposal)"))
    print("--- proposal\n" + c.text + f"\n--- answer: {c.answer}")
    if c.parent_text:
        print("--- diff\n" + _diff(c.parent_text, c.text))
    while True:
        print("[a]ccept  [r]eject  [e]dit then accept  [s]kip  [q]uit > ", end="", flush=True)
        choice = inp.readline()
        if not choice:
            return "quit"
        choice = choice.strip().lower()[:1]
        if choice == "s":
            return "skipped"
        if choice == "q":
            return "quit"
        if choice not in ("a", "r", "e"):
            continue
        print("note (optional) > ", end="", flush=True)
        note = inp.readline().rstrip("\n")
        edited = None
        if choice == "e":
            print("new text, end with a line holding only '.' >", flush=True)
            lines = []
            for line in inp:
                if line.rstrip("\n") == ".":
                    break
                lines.append(line.rstrip("\n"))
            edited = "\n".join(lines)
        try:
            item = fill.decide_candidate(db_path(args), int(c.id), "reject" if choice == "r" else "accept", note,
                                         edited_text=edited, expect_version=int(now["version"]), lease_token=token)
        except StoreError as exc:  # another curator decided it meanwhile: say so and go on
            print(f"refused: {exc}", file=sys.stderr, flush=True)
            return "refused"
        if choice == "r":
            print("rejected")
        elif item is None:
            print("approved; it becomes an item when the session's other approvals are in")
        else:
            print(f"accepted as item {_item_key(args, item)}; coverage recomputed")
        return "decided"


def _item_key(args, item_id: int) -> str:
    from benchloupe.store.db import connect

    conn = connect(db_path(args))
    try:
        row = conn.execute("SELECT key FROM items WHERE id = ?", (item_id,)).fetchone()
    finally:
        conn.close()
    return row[0] if row else f"#{item_id}"


def register_review(sub, common) -> None:
    p = sub.add_parser("review", help="accept / reject / edit BenchFill proposals at a plain line prompt",
                       description="Each proposal shown is held for you by a short review lease (renewed while the "
                                   "prompt waits), so another curator reviewing the same session skips it; one "
                                   "decided or held by someone else meanwhile is skipped or refused with their name.")
    common(p)
    ranged_argument(p, "--session", range=ranges.ROW_ID, help="only this session's proposals")
    p.set_defaults(func=cmd_review)
