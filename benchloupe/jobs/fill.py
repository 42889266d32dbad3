"""BenchFill sessions on the store (paper 003 §4, Algorithm 2): endpoints from settings, the problem from the
latest coverage run, the SQLite journal that makes a session survive a crash, and the curator's decisions.

A session is created from a gap of the latest coverage run; everything the loop does is journaled as it
happens (``fill_events``, ``llm_calls``), valid calibrated children become review-queue candidates, and only
:func:`decide_candidate` with "accept" inserts an item (then coverage is recomputed).
"""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import asdict, dataclass

import numpy as np

from benchloupe.engine.benchfill import (
    AnnotatorSpec,
    BenchFillConfig,
    FillItem,
    FillProblem,
    gap_fill_metrics,
    run_baseline,
    run_session,
)
from benchloupe.engine.benchfill_types import (
    AnnotationRecord,
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
from benchloupe.prompts.client import ChatClient, EndpointConfig
from benchloupe.prompts.llm import LLMAnnotator, LLMJudge, LLMRewriter
from benchloupe.store import fill as fillstore
from benchloupe.store import read, runs
from benchloupe.store.curation import put_setting
from benchloupe.store.db import StoreError, connect

ENDPOINTS_KEY = "benchfill.endpoints"
ENDPOINT_FIELDS = ("base_url", "model", "api_key_env", "timeout", "max_retries", "concurrency", "temperature",
                   "max_tokens")


# ------------------------------------------------------------------------------------------------ endpoints

def get_endpoints(conn) -> dict:
    """``{"rewriter": {...}, "judge": {...}, "annotators": [{"name", "model", "base_url", "trials", ...}]}``."""
    return read.setting(conn, ENDPOINTS_KEY, {"rewriter": None, "judge": None, "annotators": []})


def set_endpoint(db_path, role: str, **fields) -> dict:
    """Set the rewriter or judge endpoint, or add/replace an annotator (``role="annotator"``, ``name=``)."""
    conn = connect(db_path)
    try:
        eps = get_endpoints(conn)
        clean = {k: v for k, v in fields.items() if v is not None and (k in ENDPOINT_FIELDS or k in ("name", "trials"))}
        if role in ("rewriter", "judge", "annotator") and not clean.get("base_url"):
            raise EngineError(f"the {role} endpoint needs --base-url (e.g. https://api.openai.com/v1 or "
                              "http://localhost:8000/v1)")
        if role in ("rewriter", "judge"):
            if not clean.get("model"):
                raise EngineError(f"the {role} endpoint needs --model (the model name the server knows)")
            eps[role] = clean
        elif role == "annotator":
            if not clean.get("name"):
                raise EngineError("an annotator needs --name: the benchmark model whose ability it has")
            clean.setdefault("model", clean["name"])
            clean["trials"] = int(clean.get("trials") or 4)
            eps["annotators"] = [a for a in eps["annotators"] if a["name"] != clean["name"]] + [clean]
        elif role == "remove-annotator":
            eps["annotators"] = [a for a in eps["annotators"] if a["name"] != fields.get("name")]
        else:
            raise EngineError(f"unknown endpoint role {role!r}; use rewriter, judge or annotator")
        put_setting(conn, ENDPOINTS_KEY, eps)
        return eps
    finally:
        conn.close()


def _endpoint(d: dict) -> EndpointConfig:
    return EndpointConfig(**{k: d[k] for k in ENDPOINT_FIELDS if k in d and d[k] is not None})


def _check_endpoints(eps: dict) -> None:
    hint = "set it with `benchloupe endpoints set {role} --base-url URL --model NAME` or in the BenchFill screen"
    for role in ("rewriter", "judge"):
        if not eps.get(role) or not eps[role].get("model"):
            raise EngineError(f"no {role} endpoint configured; " + hint.format(role=role))
    if not eps.get("annotators"):
        raise EngineError("no annotator models configured; add the benchmark's models with `benchloupe endpoints "
                          "set annotator --name MODEL --base-url URL --model NAME_AT_ENDPOINT`")


# ------------------------------------------------------------------------------------------------ journal

def _tuples(d: dict) -> dict:
    return {k: tuple(v) if isinstance(v, list) else v for k, v in d.items()}


class SqliteJournal:
    """:class:`FillJournal` on the store; one short transaction per record. Call it from one thread."""

    def __init__(self, db_path, session_id: int):
        self.conn = connect(db_path)
        self.sid = session_id
        sess = fillstore.session(self.conn, session_id)
        self.parent_ids = set(str(i) for i in sess["config"].get("item_ids", []))

    def close(self) -> None:
        self.conn.close()

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
        fillstore.append_event(self.conn, self.sid, "round", record.round, asdict(record))

    def record_rewrite(self, record: RewriteRecord) -> None:
        fillstore.append_event(self.conn, self.sid, "rewrite", record.round, asdict(record))
        if record.phase != "benchfill":  # the baseline's children are for comparison, never for review
            return
        for c in record.children:
            parent = self._root_item(c.parent_id)
            fillstore.upsert_candidate(self.conn, self.sid, c.child_id, round_=c.round, parent_item_id=parent,
                                       text=c.text, answer=c.answer,
                                       payload={"choices": list(c.choices), "parent_key": c.parent_id})

    def _root_item(self, parent_key: str) -> int | None:
        """The benchmark item at the root of a lineage (a child may be rewritten from an earlier child)."""
        if parent_key in self.parent_ids:
            return int(parent_key)
        row = self.conn.execute("SELECT parent_item_id FROM fill_candidates WHERE session_id = ? AND child_key = ?",
                                (self.sid, parent_key)).fetchone()
        return None if row is None else row[0]

    def record_verdict(self, record: VerdictRecord) -> None:
        fillstore.append_event(self.conn, self.sid, "verdict", None, asdict(record))
        self.conn.execute("UPDATE fill_candidates SET valid = ?, verdict = ? WHERE session_id = ? AND child_key = ?",
                          (int(record.valid), record.reason, self.sid, record.child_id))

    def record_annotation(self, record: AnnotationRecord) -> None:
        fillstore.append_event(self.conn, self.sid, "annotation", None, asdict(record))

    def record_estimate(self, record: EstimateRecord) -> None:
        fillstore.append_event(self.conn, self.sid, "estimate", None, asdict(record))
        self.conn.execute(
            "UPDATE fill_candidates SET difficulty_raw = ?, difficulty_norm = ?, distance = ?,"
            " payload = json_set(payload, '$.se', ?, '$.n_successes', ?, '$.n_trials', ?)"
            " WHERE session_id = ? AND child_key = ?",
            (record.b, record.z, record.abs_dev, record.se, record.n_successes, record.n_trials, self.sid,
             record.child_id))

    def record_event(self, record: EventRecord) -> None:
        fillstore.append_event(self.conn, self.sid, "event", None, asdict(record))

    def record_llm_call(self, record: LLMCallRecord) -> None:
        d = asdict(record)
        d["role"], d["base_url"] = record.tag, record.endpoint
        fillstore.record_llm_call(self.conn, self.sid, d)


# ------------------------------------------------------------------------------------------------ sessions

@dataclass(frozen=True)
class FillOptions:
    """A BenchFill session (paper 003 Algorithm 2, E.1): gap N of the latest coverage run (1 = largest), the
    answer format ("auto" = choice when items have a chance level, else short), and whether to run the
    budget-matched best-of-N baseline beside it."""

    gap: int = 1
    answer_format: str = "auto"
    baseline: bool = False


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


def _llms(eps: dict):
    rewriter = LLMRewriter(ChatClient(_endpoint(eps["rewriter"])))
    judge = LLMJudge(ChatClient(_endpoint(eps["judge"])))
    annotator = LLMAnnotator({a["model"]: ChatClient(_endpoint(a)) for a in eps["annotators"]})
    return rewriter, judge, annotator


def start_fill(db_path, benchmark: str, options: FillOptions = FillOptions(), *,
               config: BenchFillConfig = BenchFillConfig(), progress: Progress = no_progress,
               cancel: threading.Event | None = None) -> int:
    """Create a session on gap ``options.gap`` of the latest coverage run and run it; returns the session id."""
    conn = connect(db_path)
    try:
        bid = read.benchmark_id(conn, benchmark)
        cov = runs.latest_run(conn, bid, ("coverage",))
        if cov is None:
            raise EngineError(f"no coverage run for {benchmark!r}; run `benchloupe coverage {benchmark}` first")
        eps = get_endpoints(conn)
        _check_endpoints(eps)
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
                       "endpoints": {r: {k: v for k, v in (eps[r] or {}).items()} for r in ("rewriter", "judge")}}
        sid = fillstore.create_session(conn, bid, float(g["lo"]), float(g["hi"]), float(g["midpoint"]), session_cfg)
    finally:
        conn.close()
    return resume_fill(db_path, sid, config=config, progress=progress, cancel=cancel)


def _plain(config: BenchFillConfig) -> dict:
    return {f.name: getattr(config, f.name) for f in dataclasses.fields(config) if f.name != "calibration"}


def resume_fill(db_path, session_id: int, *, config: BenchFillConfig | None = None, progress: Progress = no_progress,
                cancel: threading.Event | None = None) -> int:
    """Run (or continue) a session from its journal; completed work is replayed, not redone."""
    conn = connect(db_path)
    try:
        sess = fillstore.session(conn, session_id)
        if sess["state"] in ("proposed", "no_valid_child"):
            return session_id
        eps = get_endpoints(conn)
        _check_endpoints(eps)
        problem = _problem(conn, sess)
        fillstore.set_session_state(conn, session_id, "running", "")
    finally:
        conn.close()
    if config is None:
        config = BenchFillConfig(**{k: v for k, v in sess["config"].get("benchfill", {}).items()})
    rewriter, judge, annotator = _llms(eps)
    journal = SqliteJournal(db_path, session_id)
    try:
        try:
            result = run_session(problem, rewriter, judge, annotator, journal, config, progress=progress,
                                 cancel=cancel)
            if sess["config"].get("baseline") and result.rounds_run:
                progress(0, 1, "best-of-N baseline")
                base = run_baseline(problem, rewriter, judge, annotator, journal, result.rounds_run,
                                    config, progress=progress, cancel=cancel)
                fillstore.append_event(journal.conn, session_id, "baseline_result", None,
                                       {"status": base.status, "best_z": base.best.z if base.best else None,
                                        "best_abs_dev": base.best.abs_dev if base.best else None,
                                        "n_children": base.n_children, "n_valid": base.n_valid})
        except Cancelled:
            fillstore.set_session_state(journal.conn, session_id, "paused", "cancelled; resume to continue")
            raise
        state = {"proposed": "proposed", "no_valid_child": "no_valid_child", "failed": "failed"}[result.status]
        fillstore.set_session_state(journal.conn, session_id, state, result.message or "")
        return session_id
    finally:
        journal.close()


def decide_candidate(db_path, candidate_id: int, decision: str, note: str = "", *, edited_text: str | None = None,
                     edited_answer: str | None = None, recompute: bool = True) -> int | None:
    """Accept (insert the item, then recompute coverage) or reject a proposal; returns the new item id."""
    conn = connect(db_path)
    try:
        row = conn.execute("SELECT b.name FROM fill_candidates c JOIN fill_sessions s ON s.id = c.session_id"
                           " JOIN benchmarks b ON b.id = s.benchmark_id WHERE c.id = ?", (candidate_id,)).fetchone()
        if row is None:
            raise StoreError(f"no BenchFill candidate {candidate_id}")
        item_id = fillstore.decide(conn, candidate_id, decision, note, edited_text=edited_text,
                                   edited_answer=edited_answer)
    finally:
        conn.close()
    if item_id is not None and recompute:
        from .coverage import CoverageConfig, run_coverage

        run_coverage(db_path, row[0], CoverageConfig(uncertainty="none"))
    return item_id


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
               "accepted": int((cands["review_state"] == "accepted").sum()),
               "rejected": int((cands["review_state"] == "rejected").sum()),
               "events": messages[-20:], "baseline": next((p for k, p in ev if k == "baseline_result"), None),
               "llm_calls": conn.execute("SELECT count(*) FROM llm_calls WHERE session_id = ?",
                                         (session_id,)).fetchone()[0]}
        acc = cands[cands["review_state"] == "accepted"]
        if len(acc):
            ri = runs.run_items(conn, sess["config"]["coverage_run"])
            m = gap_fill_metrics(ri["z"].to_numpy(), acc["difficulty_norm"].tolist(), [sess["target"]] * len(acc))
            out["table2"] = asdict(m)
        return out
    finally:
        conn.close()
