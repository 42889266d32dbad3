"""BenchFill sessions on the store (paper 003 §4, Algorithm 2): endpoints from settings, the problem from the
latest coverage run, the SQLite journal that makes a session survive a crash, and the curator's decisions.

A session is created from a gap of the latest coverage run; everything the loop does is journaled as it
happens (``fill_events``, ``llm_calls``), valid calibrated children become review-queue candidates, and only
:func:`decide_candidate` with "accept" inserts an item (then coverage is recomputed).
"""

from __future__ import annotations

import dataclasses
import json
import threading
from contextlib import ExitStack
from dataclasses import asdict, dataclass

import numpy as np

from benchloupe.engine.benchfill import (
    AnnotatorSpec,
    BenchFillConfig,
    FillItem,
    FillProblem,
    choice_letter,
    gap_fill_metrics,
    run_baseline,
    run_session,
)
from benchloupe.engine.benchfill_types import (
    AnnotationRecord,
    ChildDraft,
    ChildRecord,
    EstimateRecord,
    EventRecord,
    FillState,
    LLMCallRecord,
    RewriteRecord,
    RoundRecord,
    VerdictRecord,
)
from benchloupe.engine.common import Cancelled, EngineError, Progress, no_progress
from benchloupe.engine.online import DifficultyScale
from benchloupe.hints import Alt, Opt, say
from benchloupe.prompts import simulated
from benchloupe.prompts.client import ChatClient
from benchloupe.prompts.llm import LLMAnnotator, LLMJudge, LLMRewriter
from benchloupe.store import fill as fillstore
from benchloupe.store import read, runners, runs
from benchloupe.store.db import StoreError, connect

from .base import cooperative_signals, stop_reason
from .endpoints import (  # noqa: F401 - ENDPOINTS_KEY, set_endpoint: a session's settings, as callers name them
    ENDPOINTS_KEY,
    check_endpoints,
    endpoint_config,
    get_endpoints,
    set_endpoint,
)
from .fill_dupes import ProposalDupes

# ------------------------------------------------------------------------------------------------ journal

def _tuples(d: dict) -> dict:
    return {k: tuple(v) if isinstance(v, list) else v for k, v in d.items()}


class SqliteJournal:
    """:class:`FillJournal` on the store; one short transaction per record, each checking that this runner
    still holds the session's lease (``token``). Texts from the LLMs are stored as received, up to
    ``max_chars`` characters per text, and a cut is said in the journal. Call it from one thread."""

    def __init__(self, db_path, session_id: int, *, token: str | None = None,
                 max_chars: int = fillstore.DEFAULT_MAX_STORED_CHARS):
        self.conn = connect(db_path)
        self.sid, self.token, self.max_chars = session_id, token, max_chars
        sess = fillstore.session(self.conn, session_id)
        self.parent_ids = set(str(i) for i in sess["config"].get("item_ids", []))
        self.dupes = ProposalDupes(self.conn, session_id)

    def close(self) -> None:
        self.conn.close()

    def _append(self, kind: str, round_: int | None, payload: dict) -> None:
        fillstore.append_event(self.conn, self.sid, kind, round_, payload, token=self.token)

    def load_state(self) -> FillState:
        st = FillState()
        for kind, p in fillstore.events(self.conn, self.sid):
            if kind == "round":
                st.rounds.append(RoundRecord(**_tuples(p)))
            elif kind == "rewrite":
                children = tuple(ChildRecord(**_tuples(c)) for c in p.pop("children"))
                st.rewrites.append(RewriteRecord(**p, children=children))
            elif kind == "verdict":
                st.verdicts.append(VerdictRecord(**p))
            elif kind == "annotation":
                st.annotations.append(AnnotationRecord(**p))
            elif kind == "estimate":
                st.estimates.append(EstimateRecord(**p))
            elif kind == "event":
                st.events.append(EventRecord(**p))
        return st  # llm_calls are kept in their own table and not needed to replay

    def record_round(self, record: RoundRecord) -> None:
        self._append("round", record.round, asdict(record))

    def record_rewrite(self, record: RewriteRecord) -> None:
        self._append("rewrite", record.round, asdict(record))
        if record.phase != "benchfill":  # the baseline's children are for comparison, never for review
            return
        for c in record.children:
            parent = self._root_item(c.parent_id)
            payload = {"choices": list(c.choices), "parent_key": c.parent_id}
            dup = self.dupes.mark(c.child_id, c.text, parent)
            if dup is not None:  # shown in the review before the curator decides
                payload["duplicate_of"] = dup
            fillstore.upsert_candidate(self.conn, self.sid, c.child_id, round_=c.round, parent_item_id=parent,
                                       text=c.text, answer=c.answer, payload=payload, token=self.token)

    def _root_item(self, parent_key: str) -> int | None:
        """The benchmark item at the root of a lineage (a child may be rewritten from an earlier child)."""
        if parent_key in self.parent_ids:
            return int(parent_key)
        row = self.conn.execute("SELECT parent_item_id FROM fill_candidates WHERE session_id = ? AND child_key = ?",
                                (self.sid, parent_key)).fetchone()
        return None if row is None else row[0]

    def record_verdict(self, record: VerdictRecord) -> None:
        self._append("verdict", None, asdict(record))
        fillstore.set_verdict(self.conn, self.sid, record.child_id, record.valid, record.reason, token=self.token)

    def record_annotation(self, record: AnnotationRecord) -> None:
        d = asdict(record)
        limit = min(self.max_chars or fillstore.ANNOTATION_EXCERPT_CHARS, fillstore.ANNOTATION_EXCERPT_CHARS)
        d["response"], _ = fillstore.cap_text(record.response, limit)
        self._append("annotation", None, d)  # replay needs the grade; the reply itself is in llm_calls

    def record_estimate(self, record: EstimateRecord) -> None:
        d = {k: (v if not isinstance(v, float) or np.isfinite(v) else None) for k, v in asdict(record).items()}
        self._append("estimate", None, d)
        fillstore.set_estimate(self.conn, self.sid, record.child_id, b=d["b"], z=d["z"], distance=d["abs_dev"],
                               se=d["se"], n_successes=record.n_successes, n_trials=record.n_trials,
                               identified=record.identified, token=self.token)

    def record_event(self, record: EventRecord) -> None:
        self._append("event", None, asdict(record))

    def record_llm_call(self, record: LLMCallRecord) -> None:
        d = asdict(record)
        d["role"], d["base_url"] = record.tag, record.endpoint
        if fillstore.record_llm_call(self.conn, self.sid, d, token=self.token, max_chars=self.max_chars):
            self._cut_note(f"LLM call {record.tag} ({record.model})",
                           max(len(record.prompt or ""), len(record.response or "")))

    def _cut_note(self, what: str, size: int) -> None:
        self._append("event", None, asdict(EventRecord(
            "warning", f"{what}: {size:,} characters, stored the first {self.max_chars:,} (max_stored_chars)")))


# ------------------------------------------------------------------------------------------------ sessions

@dataclass(frozen=True)
class FillOptions:
    """A BenchFill session (paper 003 Algorithm 2, E.1): gap N of the latest coverage run (1 = largest), the
    answer format ("auto" = choice when items have a chance level, else short), and whether to run the
    budget-matched best-of-N baseline beside it; max_stored_chars caps each prompt and reply kept in the
    journal (issue 10 #12; 0 = no cap); approvals is how many curators must accept a proposal before it becomes
    an item (issue 25; the approvers are recorded)."""

    gap: int = 1
    answer_format: str = "auto"
    baseline: bool = False
    max_stored_chars: int = fillstore.DEFAULT_MAX_STORED_CHARS
    approvals: int = 1


class FillStopped(EngineError):
    """A session ended without a proposal (``failed`` or ``no_valid_child``); the message says why and how to
    go on. ``session_id`` and ``state`` say which and how."""

    def __init__(self, session_id: int, state: str, message: str):
        what = "ended with no valid child" if state == "no_valid_child" else "failed"
        then = "" if state == "no_valid_child" else say(
            "; fix it, then resume it with ", Alt(f"`benchloupe fill --resume {session_id}`", "R on the BenchFill screen"))
        super().__init__(say(f"BenchFill session {session_id} {what}: ", message, then))
        self.session_id, self.state = session_id, state


def _problem(conn, sess: dict) -> FillProblem:
    cfg = sess["config"]
    ri = runs.run_items(conn, cfg["coverage_run"])
    its = read.items(conn, sess["benchmark"]).set_index("id")
    ri = ri[ri["item_id"].isin(its.index) & np.isfinite(ri["z"])]
    items = tuple(FillItem(str(int(r.item_id)), str(its.at[r.item_id, "text"]), str(its.at[r.item_id, "answer"]),
                           float(r.z)) for r in ri.itertuples())
    ann = tuple(AnnotatorSpec(a["model"], float(a["theta"]), int(a["trials"])) for a in cfg["annotators"])
    return FillProblem(items, (sess["gap_lo"], sess["gap_hi"]), ann,
                       DifficultyScale(cfg["b_min"], cfg["b_max"]), cfg["answer_format"], float(cfg["guessing"]))


def _llms(eps: dict, notify=None):
    """The three LLM roles; *notify* hears of every wait of a second or more (a 429's Retry-After)."""
    rewriter = LLMRewriter(ChatClient(endpoint_config(eps["rewriter"]), notify=notify))
    judge = LLMJudge(ChatClient(endpoint_config(eps["judge"]), notify=notify))
    annotator = LLMAnnotator({a["model"]: ChatClient(endpoint_config(a), notify=notify) for a in eps["annotators"]})
    return rewriter, judge, annotator


def recompute_coverage(db_path, benchmark: str) -> int:
    """Coverage again after an accept or its undo: the latest coverage run's own settings (its target, group
    and C.6 uncertainty, so the gaps keep their intervals: issue 21 item 7; the slow robustness refits and the
    improvement test left out), now with the accepted items at their online-calibrated difficulties."""
    from .coverage import CoverageConfig, run_coverage

    conn = connect(db_path)
    try:
        cov = runs.latest_run(conn, read.benchmark_id(conn, benchmark), ("coverage",))
        saved = runs.get_run(conn, cov)["config"] if cov is not None else {}
    finally:
        conn.close()
    names = {f.name for f in dataclasses.fields(CoverageConfig)}
    try:
        config = CoverageConfig(**{k: v for k, v in saved.items() if k in names})
    except (TypeError, ValueError, EngineError):  # a run of an older version with settings no longer valid
        config = CoverageConfig()
    return run_coverage(db_path, benchmark, dataclasses.replace(config, robustness="", improvement=""))


class _Noticed:
    """The session's progress, remembering the latest (done, total) so that a notice (the client waiting for a
    server's Retry-After) is shown on the same job line; a progress with a ``notice`` method (the CLI's stderr
    lines) gets the notice there, at once."""

    def __init__(self, progress: Progress) -> None:
        self.progress, self.done, self.total = progress, 0.0, 0.0

    def __call__(self, done: float, total: float, message: str) -> None:
        self.done, self.total = done, total
        self.progress(done, total, message)

    def notice(self, message: str) -> None:
        direct = getattr(self.progress, "notice", None)
        if direct is not None:
            direct(message)
        else:
            self.progress(self.done, self.total, message)


def _coverage_current(db_path, benchmark: str) -> None:
    """Recompute coverage when an accepted BenchFill item is missing from the latest coverage run (the process
    was killed between the accept and the recompute: issue 10, minor)."""
    conn = connect(db_path)
    try:
        bid = read.benchmark_id(conn, benchmark)
        cov = runs.latest_run(conn, bid, ("coverage",))
        if cov is None:
            return
        missing = conn.execute(
            "SELECT count(*) FROM fill_candidates c JOIN fill_sessions s ON s.id = c.session_id"
            " JOIN items i ON i.id = c.item_id WHERE s.benchmark_id = ? AND c.review_state = 'accepted'"
            " AND c.item_id NOT IN (SELECT item_id FROM run_items WHERE run_id = ?)", (bid, cov)).fetchone()[0]
    finally:
        conn.close()
    if missing:
        recompute_coverage(db_path, benchmark)


GAP_CAVEATS = {
    "tail": "gap {n} is a tail gap: it lies beyond the models' abilities, where the prior and a few successes place "
            "the items (engine.coverage.resolution), so it may be no hole in the benchmark and few models can "
            "measure an item made for it",
    "lattice": "gap {n} is below the lattice resolution: no item could be measured between its ends with these "
               "models (their sum scores allow no difficulty inside), so it is no coverage gap",
}


def gap_caveat(db_path, benchmark: str, gap: int) -> str:
    """One line when gap *gap* (1 = largest) of the latest coverage run is a tail or lattice gap (issue 32 point
    9: such a gap was accepted as a session's target without a word); "" otherwise, or when there is no such gap."""
    conn = connect(db_path)
    try:
        cov = runs.latest_run(conn, read.benchmark_id(conn, benchmark), ("coverage",))
        gaps = runs.load_artifact(conn, cov, "gaps") if cov is not None else None
    except (StoreError, EngineError, LookupError):  # no such benchmark: the session's own start says so
        return ""
    finally:
        conn.close()
    if gaps is None or "status" not in gaps or not 1 <= gap <= len(gaps):
        return ""
    caveat = GAP_CAVEATS.get(str(gaps["status"].iloc[gap - 1]), "")
    return caveat.format(n=gap)


def start_fill(db_path, benchmark: str, options: FillOptions = FillOptions(), *,
               config: BenchFillConfig = BenchFillConfig(), progress: Progress = no_progress,
               cancel: threading.Event | None = None) -> int:
    """Create a session on gap ``options.gap`` of the latest coverage run and run it; returns the session id
    when it proposed a child, raises :class:`FillStopped` when it ended without one."""
    _coverage_current(db_path, benchmark)
    conn = connect(db_path)
    try:
        from .coverage import latest_coverage

        bid, cov = latest_coverage(conn, benchmark)
        eps = get_endpoints(conn)
        check_endpoints(eps)
        if isinstance(options.max_stored_chars, bool) or not isinstance(options.max_stored_chars, int) or \
                options.max_stored_chars < 0:
            raise EngineError(say(Opt("max_stored_chars"), " must be a whole number 0 or more, got "
                                  f"{options.max_stored_chars!r}"))
        if isinstance(options.approvals, bool) or not isinstance(options.approvals, int) or \
                not 1 <= options.approvals <= 20:
            raise EngineError(say(Opt("approvals"), f" must be a whole number from 1 to 20, got {options.approvals!r}"))
        gaps = runs.load_artifact(conn, cov, "gaps")
        if not 1 <= options.gap <= len(gaps):
            raise EngineError(f"gap {options.gap} does not exist; the coverage run has gaps 1..{len(gaps)}")
        g = gaps.iloc[options.gap - 1]
        metrics = runs.get_run(conn, cov)["metrics"]
        theta = runs.run_models(conn, cov).set_index("name")["theta"]
        annotators = []
        for a in eps["annotators"]:
            if a["name"] not in theta.index:
                raise EngineError(f"annotator {a['name']!r} is not a model of {benchmark!r}, so it has no ability on "
                                  "this benchmark's scale; configure annotators among its models")
            annotators.append({"model": a["model"], "theta": float(theta[a["name"]]), "trials": int(a["trials"])})
        its = read.items(conn, benchmark)
        chance = its["chance"].dropna()
        fmt = options.answer_format
        if fmt == "auto":
            fmt = "choice" if len(chance) else "short"
        item_ids = runs.run_items(conn, cov)["item_id"].astype(int).tolist()
        session_cfg = {"coverage_run": cov, "gap_index": options.gap, "answer_format": fmt,
                       "guessing": float(chance.median()) if len(chance) else 0.0, "b_min": metrics["b_min"],
                       "b_max": metrics["b_max"], "annotators": annotators, "item_ids": item_ids,
                       "benchfill": _plain(config), "baseline": options.baseline,
                       "max_stored_chars": options.max_stored_chars, "approvals": options.approvals,
                       "endpoints": {r: {k: v for k, v in (eps[r] or {}).items()} for r in ("rewriter", "judge")}}
        runner = runners.this_runner()
        sid = fillstore.create_session(conn, bid, float(g["lo"]), float(g["hi"]), float(g["midpoint"]), session_cfg,
                                       runner=runner)
    finally:
        conn.close()
    return resume_fill(db_path, sid, config=config, progress=progress, cancel=cancel, _runner=runner)


def _plain(config: BenchFillConfig) -> dict:
    return {f.name: getattr(config, f.name) for f in dataclasses.fields(config) if f.name != "calibration"}


def resume_fill(db_path, session_id: int, *, config: BenchFillConfig | None = None, progress: Progress = no_progress,
                cancel: threading.Event | None = None, _runner: dict | None = None) -> int:
    """Run (or continue) a session from its journal; completed work is replayed, not redone.

    One session has one runner: this process takes the session's lease (refused with one line while another
    live runner holds it; taken over when the holder is gone) and renews it by heartbeat. Ctrl-C, SIGTERM or
    ``cancel`` pause the session (resumable); returns the session id when it proposed a child, raises
    :class:`FillStopped` when it ended failed or with no valid child.
    """
    runner = _runner or runners.this_runner()
    conn = connect(db_path)
    try:
        sess = fillstore.session(conn, session_id)
        if sess["state"] == "proposed":
            return session_id
        if sess["state"] == "no_valid_child":
            raise FillStopped(session_id, sess["state"], sess["message"])
        try:
            eps = get_endpoints(conn)
            check_endpoints(eps)
            problem = _problem(conn, sess)
        except EngineError as exc:
            if _runner is not None:  # the session start_fill just made: do not leave it held by a live process
                fillstore.set_session_state(conn, session_id, "failed", str(exc), token=runner["token"])
            raise
        fillstore.acquire_lease(conn, session_id, runner)
    finally:
        conn.close()
    if config is None:
        config = BenchFillConfig(**{k: v for k, v in sess["config"].get("benchfill", {}).items()})
    token = runner["token"]
    progress = _Noticed(progress)
    rewriter, judge, annotator = _llms(eps, progress.notice)
    journal = SqliteJournal(db_path, session_id, token=token,
                            max_chars=int(sess["config"].get("max_stored_chars", fillstore.DEFAULT_MAX_STORED_CHARS)))
    heart = runners.Heartbeat(lambda: connect(db_path),
                              lambda c, now: fillstore.beat_lease(c, session_id, token, now)).start()
    stack = ExitStack()
    try:
        if simulated.uses_simulated(eps):
            _simulate(stack.enter_context(simulated.serving()), problem)
        cancel = cancel if cancel is not None else threading.Event()  # a signal's cancel (cooperative_signals)
        with cooperative_signals(cancel) as signals:
            try:
                result = run_session(problem, rewriter, judge, annotator, journal, config, progress=progress,
                                     cancel=cancel)
                if sess["config"].get("baseline") and result.rounds_run:
                    progress(0, 1, "best-of-N baseline")
                    base = run_baseline(problem, rewriter, judge, annotator, journal, result.rounds_run,
                                        config, progress=progress, cancel=cancel)
                    journal._append("baseline_result", None,
                                    {"status": base.status, "best_z": base.best.z if base.best else None,
                                     "best_abs_dev": base.best.abs_dev if base.best else None,
                                     "n_children": base.n_children, "n_valid": base.n_valid})
            except (Cancelled, KeyboardInterrupt) as exc:
                stopped = signals.stopped(exc)
                why = stop_reason(stopped)[1] if not isinstance(stopped, Cancelled) else "cancelled"
                fillstore.set_session_state(journal.conn, session_id, "paused", f"{why}; resume to continue",
                                            token=token)
                if stopped is not exc:
                    raise stopped from None
                raise
            except fillstore.LeaseLost:
                raise  # another runner has the session now: write nothing
            except Exception as exc:  # noqa: BLE001 - recorded, then raised: the session must not stay held
                try:
                    fillstore.set_session_state(journal.conn, session_id, "failed", stop_reason(exc)[1],
                                                token=token)
                except Exception:  # noqa: BLE001 - e.g. the disk is full: the next open marks it interrupted
                    pass
                raise
        state = {"proposed": "proposed", "no_valid_child": "no_valid_child", "failed": "failed"}[result.status]
        fillstore.set_session_state(journal.conn, session_id, state, result.message or "", token=token)
    finally:
        stack.close()
        heart.stop()
        journal.close()
    if state != "proposed":
        raise FillStopped(session_id, state, result.message or state)
    return session_id


def _simulate(server: simulated.SimulatedServer, problem: FillProblem) -> None:
    """Show the simulated endpoint (held for the session: started here unless the app or the CLI already runs
    it) the session's items, annotator abilities and scale, the hidden world its models answer from."""
    guessing = problem.guessing if problem.answer_format == "choice" else 0.0
    server.world.load(problem.items, {a.model: a.theta for a in problem.annotators}, problem.scale.raw_min,
                      problem.scale.raw_max, guessing)


def effective_endpoints(db_path) -> dict:
    """The endpoints in effect for *db_path* (the user file overridden by the database's own settings)."""
    conn = connect(db_path)
    try:
        return get_endpoints(conn)
    finally:
        conn.close()


def uses_simulated(db_path) -> bool:
    """Whether the endpoints in effect for *db_path* include the built-in simulated one (the app and the CLI
    then hold it: prompts/simulated.py)."""
    conn = connect(db_path)
    try:
        return simulated.uses_simulated(get_endpoints(conn))
    finally:
        conn.close()


def decide_candidate(db_path, candidate_id: int, decision: str, note: str = "", *, edited_text: str | None = None,
                     edited_answer: str | None = None, recompute: bool = True, expect_version: int | None = None,
                     lease_token: str | None = None) -> int | None:
    """Accept (insert the item, then recompute coverage) or reject a proposal; returns the new item id.
    A coverage run missed by an earlier accept (the process was killed before its recompute) is made first.
    *expect_version*, *lease_token*: store.fill.decide (refused when it changed since, or another curator
    reviews it)."""
    conn = connect(db_path)
    try:
        row = conn.execute("SELECT b.name FROM fill_candidates c JOIN fill_sessions s ON s.id = c.session_id"
                           " JOIN benchmarks b ON b.id = s.benchmark_id WHERE c.id = ?", (candidate_id,)).fetchone()
        if row is None:
            raise StoreError(f"no BenchFill candidate {candidate_id}")
    finally:
        conn.close()
    if decision == "accept" and (edited_text is not None or edited_answer is not None):
        conn = connect(db_path)
        try:
            c = conn.execute("SELECT text, answer, payload FROM fill_candidates WHERE id = ?",
                             (candidate_id,)).fetchone()
        finally:
            conn.close()
        choices = json.loads(c["payload"] or "{}").get("choices") or []
        problem = edit_problem(c["text"] if edited_text is None else edited_text,
                               c["answer"] if edited_answer is None else edited_answer, choices)
        if problem:
            raise StoreError(f"proposal {candidate_id} not accepted: {problem}")
    if recompute:
        _coverage_current(db_path, row[0])
    conn = connect(db_path)
    try:
        item_id = fillstore.decide(conn, candidate_id, decision, note, edited_text=edited_text,
                                   edited_answer=edited_answer, expect_version=expect_version,
                                   lease_token=lease_token)
    finally:
        conn.close()
    if item_id is not None and recompute:
        recompute_coverage(db_path, row[0])
    return item_id


def edit_problem(text: str, answer: str, choices=()) -> str | None:
    """Why a curator's edit of a proposal cannot be accepted, or None: the rules a rewrite from the LLM must
    pass (store.fill.edit_problem: not empty, no control characters; engine precheck_child: a multiple-choice
    answer is one of the options, by letter or text)."""
    problem = fillstore.edit_problem(text, answer)
    if problem is None and choices and choice_letter(ChildDraft(str(text), str(answer), tuple(choices))) is None:
        letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"[: len(choices)]
        return f"the reference answer is not one of the {len(choices)} options; give its letter ({letters[0]}-" \
               f"{letters[-1]}) or its text"
    return problem


def _benchmark_of(db_path, candidate_id: int) -> str:
    conn = connect(db_path)
    try:
        row = conn.execute("SELECT b.name FROM fill_candidates c JOIN fill_sessions s ON s.id = c.session_id"
                           " JOIN benchmarks b ON b.id = s.benchmark_id WHERE c.id = ?", (candidate_id,)).fetchone()
    finally:
        conn.close()
    if row is None:
        raise StoreError(f"no BenchFill candidate {candidate_id}")
    return row[0]


def decide_candidates(db_path, candidate_ids: list[int], decision: str, note: str = "", *,
                      expect: dict[int, int] | None = None, lease_token: str | None = None) -> list[int]:
    """Accept or reject several proposals in one transaction (store.fill.decide_many); coverage is recomputed
    once after accepts. Returns the new items' ids."""
    if not candidate_ids:
        return []
    bench = _benchmark_of(db_path, candidate_ids[0])
    if decision == "accept":
        _coverage_current(db_path, bench)
    conn = connect(db_path)
    try:
        items = fillstore.decide_many(conn, candidate_ids, decision, note, expect=expect, lease_token=lease_token)
    finally:
        conn.close()
    if items:
        recompute_coverage(db_path, bench)
    return items


def undo_candidates(db_path, candidate_ids: list[int], note: str = "", *,
                    expect: dict[int, int] | None = None) -> list[dict]:
    """Undo the accept or reject of proposals in one transaction (store.fill.undo_decisions: an accepted item
    is removed again, or the whole undo refused when later work uses one); after an accept's undo, coverage
    is recomputed without the item."""
    if not candidate_ids:
        return []
    bench = _benchmark_of(db_path, candidate_ids[0])
    conn = connect(db_path)
    try:
        out = fillstore.undo_decisions(conn, candidate_ids, note, expect=expect)
    finally:
        conn.close()
    if any(o["item_id"] is not None for o in out):
        recompute_coverage(db_path, bench)
    return out


def undo_candidate(db_path, candidate_id: int, note: str = "") -> dict:
    """:func:`undo_candidates` for one proposal."""
    return undo_candidates(db_path, [candidate_id], note)[0]


def session_summary(db_path, session_id: int) -> dict:
    """Live progress of a session: rounds, children, valid, annotated, best distance, Table 2 metrics."""
    conn = connect(db_path)
    try:
        sess = fillstore.session(conn, session_id)
        ev = fillstore.events(conn, session_id)
        cands = fillstore.candidates(conn, session_id, reviewable_only=False)
        rounds = [p for k, p in ev if k == "round" and p["phase"] == "benchfill"]
        messages = [p for k, p in ev if k == "event"]
        valid = cands[cands["valid"] == 1]
        est = valid.dropna(subset=["distance"])
        out = {"session": session_id, "benchmark": sess["benchmark"], "state": sess["state"],
               "message": sess["message"], "gap": [sess["gap_lo"], sess["gap_hi"]], "target": sess["target"],
               "round": max((r["round"] for r in rounds), default=0), "children": int(len(cands)),
               "valid": int(len(valid)), "annotated": int(len(est)),
               "annotations": sum(1 for k, _ in ev if k == "annotation"),
               "best_distance": float(est["distance"].min()) if len(est) else None,
               "pending": int((est["review_state"] == "pending").sum()),
               "unidentified": int(sum(1 for p in valid["payload"] if p.get("identified") is False)),
               "accepted": int((cands["review_state"] == "accepted").sum()),
               "rejected": int((cands["review_state"] == "rejected").sum()),
               "events": messages[-20:], "baseline": next((p for k, p in ev if k == "baseline_result"), None),
               "llm_calls": conn.execute("SELECT count(*) FROM llm_calls WHERE session_id = ?",
                                         (session_id,)).fetchone()[0]}
        acc = cands[cands["review_state"] == "accepted"]
        cov = sess["config"].get("coverage_run")
        if len(acc) and cov is not None and runs.get_run(conn, cov) is not None:  # its run may have been removed
            ri = runs.run_items(conn, cov)
            m = gap_fill_metrics(ri["z"].to_numpy(), acc["difficulty_norm"].tolist(), [sess["target"]] * len(acc))
            out["table2"] = asdict(m)
        return out
    finally:
        conn.close()
