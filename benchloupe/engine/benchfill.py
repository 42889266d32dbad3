"""BenchFill: difficulty-targeted gap filling by rewrite-and-annotate search (paper 003, section 4, Algorithm 2,
Appendix E.1, Table 2).

For a gap [z_L, z_R] of the normalised difficulty axis the loop aims at z* = (z_L + z_R) / 2.  A memory M is
initialised with the benchmark items nearest the gap; each round t = 1..T retrieves the R items of M nearest
z* as parents, builds a reference list of at most L items of M (half the closest below z*, the rest the
closest above), rescales z* and the references' difficulties to [0, 10] for the prompt (E.1), asks the
rewriter for C children per parent, lets the judge verify each child's reference answer, evaluates every
annotator model K_j times on each valid child, grades the answers, calibrates the child online
(:mod:`benchloupe.engine.online`), adds it to M and to the valid set, and stops early once a valid child lies
within tau of z*.  The valid child nearest z* is the proposal; nothing enters the benchmark without a human.

Also here: the budget-matched best-of-N uniform-parent baseline of E.1 (4 uniformly sampled benchmark parents,
4 T_g children each, no references, no memory), the oracle of Table 2 (insert the midpoint of the current
largest gap, k times) and Table 2's metrics (Top-3 gap sum reduction, Target Dev.).

Where the paper is silent (no public code exists) we chose, and say so:
- Size of the initial memory: ``memory_size`` = L items nearest z*, split half below / half above like the
  reference list (the paper says only "near the selected gap").
- Reference list: up to L/2 below z* (strictly), the rest at or above; if one side runs short the other side
  fills the list up to L ("when available").
- Cheap validity pre-checks before the judge: an empty rewrite, a child identical to its parent (after
  case/whitespace folding), a multiple-choice answer that is not one of the options, control characters in
  the text, answer or options are invalid, with reasons.
- Identification (issue 10 #8): a trial whose reply holds no answer carries no signal and is not counted; a
  child whose difficulty the answers do not determine (no answered trial, or every answer right or every
  answer wrong, so the maximum likelihood sits at the search bound) is not a candidate. A session whose
  valid children are all unidentified ends ``no_valid_child`` and says why.
- Grading: normalised exact match on the extracted final answer for short answers, the choice letter for
  multiple choice, the judge otherwise (issue 5).
- The baseline issues its 4 T_g children per parent as T_g rewriter calls of C children (the per-call size of
  BenchFill), so that one call's output length is the same in both arms.
- Gaps come from :mod:`benchloupe.engine.coverage` (end points 0 and 1, section 2.2 Eq. 1); an inserted item
  whose z falls outside [0, 1] is clipped to the axis for gap arithmetic.

Resume: every rewrite, verdict, annotation and estimate goes to the :class:`FillJournal` as it happens.  On a
new call the loop first loads the journal and replays it: recorded rewrites, verdicts and annotations are used
instead of calling the LLMs again, so a session interrupted mid-round continues without redoing them.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from benchloupe.engine.benchfill_types import (
    AnnotationRecord,
    AnnotationRequest,
    Annotator,
    AnswerFormat,
    ChildDraft,
    ChildRecord,
    EstimateRecord,
    EventRecord,
    FillItem,
    FillJournal,
    FillState,
    Judge,
    LLMCallRecord,
    LLMFailure,
    Phase,
    Rewriter,
    RewriteRecord,
    RewriteRequest,
    RoundRecord,
    VerdictRecord,
)
from benchloupe.engine.common import EngineError, Progress, check_cancel, no_progress
from benchloupe.engine.coverage import gap_table, topk_gap_sum
from benchloupe.engine.online import DifficultyScale, OnlineCalibrationConfig, calibrate_item
from benchloupe.textsafe import has_control


@dataclass(frozen=True)
class BenchFillConfig:
    """Search settings, defaults from paper 003 section 4.2 and Appendix E.1.

    R parents per round, C children per parent, reference list budget L, at most T rounds, tolerance tau on the
    normalised [0, 1] scale, prompt scale 10 ([0, 1] shown as [0, 10]), memory_size initial memory items
    (our choice, see module docstring), seed for the baseline's uniform parent draw, max_child_chars: a child
    longer than this is dropped with a warning (a runaway reply is not an item).
    """

    n_parents: int = 4
    n_children: int = 4
    reference_budget: int = 16
    max_rounds: int = 8
    tolerance: float = 0.01
    prompt_scale: float = 10.0
    memory_size: int = 16
    seed: int = 0
    max_child_chars: int = 20_000
    calibration: OnlineCalibrationConfig = OnlineCalibrationConfig()


@dataclass(frozen=True)
class AnnotatorSpec:
    """An IRT evaluation LLM M_j: its name at the endpoint, its pre-estimated ability, its trials K_j."""

    model: str
    theta: float
    trials: int


@dataclass(frozen=True)
class FillProblem:
    """One gap of one benchmark: items with normalised difficulty, the gap, annotators and the scale."""

    items: tuple[FillItem, ...]
    gap: tuple[float, float]
    annotators: tuple[AnnotatorSpec, ...]
    scale: DifficultyScale
    answer_format: AnswerFormat = "short"
    guessing: float = 0.0

    @property
    def target(self) -> float:
        return 0.5 * (self.gap[0] + self.gap[1])

    def validate(self) -> None:
        lo, hi = self.gap
        if not (0.0 <= lo < hi <= 1.0):
            raise EngineError(f"gap must satisfy 0 <= z_L < z_R <= 1 on the normalised scale, got {self.gap}")
        if not self.items:
            raise EngineError("the benchmark has no items to rewrite: import items with difficulties first")
        if len({it.item_id for it in self.items}) != len(self.items):
            raise EngineError("item ids must be unique within the benchmark")
        if not self.annotators:
            raise EngineError("no annotator models: give the benchmark's models with abilities and trials")
        for a in self.annotators:
            if not np.isfinite(a.theta) or a.trials < 1:
                raise EngineError(f"annotator {a.model!r} needs a finite ability and at least one trial")
        if len({a.model for a in self.annotators}) != len(self.annotators):
            raise EngineError("annotator model names must be unique")
        if self.answer_format not in ("short", "choice", "free"):
            raise EngineError(f"answer format must be short, choice or free, got {self.answer_format!r}")


@dataclass(frozen=True)
class Candidate:
    """A valid, annotated child (x, z_hat) of the valid set C_valid."""

    child_id: str
    phase: Phase
    round: int
    parent_id: str
    text: str
    answer: str
    choices: tuple[str, ...]
    b: float
    se: float
    z: float
    abs_dev: float
    n_successes: int
    n_trials: int


@dataclass(frozen=True)
class FillResult:
    """Outcome of one session.  status: proposed | no_valid_child | failed (message says why)."""

    status: str
    message: str
    phase: Phase
    target_z: float
    gap: tuple[float, float]
    best: Candidate | None
    candidates: tuple[Candidate, ...]
    rounds_run: int
    round_mean_abs_dev: tuple[float, ...]
    n_children: int
    n_valid: int
    converged: bool


# ------------------------------------------------------------------------------------------ grading


_ARTICLES = re.compile(r"\b(a|an|the)\b")
_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_ANSWER_LINE = re.compile(r"(?:final answer|answer)\s*(?:is)?\s*[:=]?\s*(.+)", re.IGNORECASE)
_CHOICE_PATTERNS = (
    re.compile(r"answer\s*(?:is)?\s*[:=]?\s*\(?([A-Z])\)?(?![A-Za-z])", re.IGNORECASE),
    re.compile(r"\(([A-Z])\)"),
    re.compile(r"(?<![A-Za-z])([A-Z])(?![A-Za-z])"),
)


def extract_final_answer(response: str) -> str:
    """The last \\boxed{...}, else the text after the last 'answer:', else the last non-empty line."""
    boxed = _BOXED.findall(response)
    if boxed:
        return boxed[-1]
    lines = [ln.strip() for ln in response.strip().splitlines() if ln.strip()]
    for line in reversed(lines):
        m = _ANSWER_LINE.search(line)
        if m:
            return m.group(1)
    return lines[-1] if lines else ""


def normalise_answer(text: str) -> str:
    """Lower case, strip accents, punctuation, articles and spacing; canonical numbers (1,000.0 -> 1000)."""
    s = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode().lower().strip()
    s = s.replace("$", "").strip().rstrip(".")
    number = s.replace(",", "")
    try:
        value = float(number)
    except ValueError:
        s = re.sub(r"[^\w\s.\-/]", " ", s)
        s = _ARTICLES.sub(" ", s)
        return " ".join(s.split())
    return str(int(value)) if value.is_integer() else repr(value)


def extract_choice(response: str, n_choices: int) -> str | None:
    """The chosen option letter (A, B, ...) among the first ``n_choices``, or None."""
    letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"[: max(n_choices, 0)]
    for pattern in _CHOICE_PATTERNS:
        hits = [h.upper() for h in pattern.findall(response) if h.upper() in letters]
        if hits:
            return hits[-1]
    return None


def choice_letter(child: ChildDraft) -> str | None:
    """The reference answer of a multiple-choice child as a letter (the answer may be the letter or text)."""
    letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"[: len(child.choices)]
    a = child.answer.strip().strip("().").upper()
    if len(a) == 1 and a in letters:
        return a
    wanted = normalise_answer(child.answer)
    for letter, option in zip(letters, child.choices):
        if normalise_answer(option) == wanted:
            return letter
    return None


def grade_locally(child: ChildDraft, response: str, answer_format: AnswerFormat) -> bool | None:
    """Grade without the judge where possible; None means the judge must grade (free-form answers)."""
    if answer_format == "choice":
        return extract_choice(response, len(child.choices)) == choice_letter(child)
    if answer_format == "short":
        return normalise_answer(extract_final_answer(response)) == normalise_answer(child.answer)
    return None


def answered(response: str, child: ChildDraft, answer_format: AnswerFormat) -> bool:
    """Whether an annotator reply holds an answer at all (an empty or answerless reply carries no signal)."""
    if not response.strip():
        return False
    if answer_format == "choice":
        return extract_choice(response, len(child.choices)) is not None
    if answer_format == "short":
        return bool(extract_final_answer(response).strip())
    return True


def precheck_child(child: ChildDraft, parent: FillItem, answer_format: AnswerFormat) -> str | None:
    """Reason a child is invalid before the judge sees it, or None."""
    if not child.text.strip() or not child.answer.strip():
        return "empty rewrite: the child has no question text or no reference answer"
    if any(has_control(t) for t in (child.text, child.answer, *child.choices)):
        return "the rewrite contains control characters (terminal escapes, NUL, backspace)"
    if " ".join(child.text.lower().split()) == " ".join(parent.text.lower().split()):
        return "child identical to its parent"
    if answer_format == "choice":
        if len(child.choices) < 2:
            return "multiple-choice child has fewer than two options"
        if choice_letter(child) is None:
            return "reference answer is not one of the options"
    return None


# ------------------------------------------------------------------------- retrieval (lines 4, 7, 8)


def _by_distance(items: Sequence[FillItem], target: float) -> list[FillItem]:
    return sorted(items, key=lambda it: (abs(it.z - target), it.item_id))


def nearest_items(items: Sequence[FillItem], target: float, k: int) -> list[FillItem]:
    """The k items whose difficulty is closest to the target (Algorithm 2 line 7)."""
    return _by_distance(items, target)[:k]


def reference_list(items: Sequence[FillItem], target: float, budget: int) -> list[FillItem]:
    """Up to budget/2 closest below the target, the rest closest at or above; sorted by difficulty (E.1)."""
    below = _by_distance([it for it in items if it.z < target], target)
    above = _by_distance([it for it in items if it.z >= target], target)
    n_below = min(budget // 2, len(below))
    n_above = min(budget - n_below, len(above))
    n_below = min(budget - n_above, len(below))
    return sorted(below[:n_below] + above[:n_above], key=lambda it: (it.z, it.item_id))


def top_k_gaps(z: np.ndarray, k: int) -> list[tuple[float, float]]:
    """The k largest adjacent gaps (lo, hi) of normalised difficulties, end points 0 and 1 (Eq. 1)."""
    table = gap_table(np.clip(np.asarray(z, dtype=float), 0.0, 1.0)).head(k)
    return [(float(lo), float(hi)) for lo, hi in zip(table["lo"], table["hi"])]


def top_k_gap_sum(z: np.ndarray, k: int) -> float:
    """Table 2's Top-k gap sum; z outside [0, 1] (an item beyond the original range) is clipped to the axis."""
    return topk_gap_sum(np.clip(np.asarray(z, dtype=float), 0.0, 1.0), k)


def oracle_insertions(z: np.ndarray, k: int = 3) -> np.ndarray:
    """Table 2's oracle: insert, k times in turn, the midpoint of the current largest gap."""
    current = list(np.clip(np.asarray(z, dtype=float), 0.0, 1.0))
    added = []
    for _ in range(k):
        lo, hi = top_k_gaps(np.asarray(current), 1)[0]
        added.append(0.5 * (lo + hi))
        current.append(added[-1])
    return np.asarray(added)


@dataclass(frozen=True)
class GapFillMetrics:
    """Table 2: Top-k gap sum before/after, its relative reduction (%), and Target Dev."""

    top_sum_before: float
    top_sum_after: float
    reduction_pct: float
    target_dev: float


def gap_fill_metrics(z: np.ndarray, inserted_z: Sequence[float], targets: Sequence[float],
                     k: int = 3) -> GapFillMetrics:
    """Top-k gap sum reduction after inserting items, and mean |z_hat - z*| over the filled gaps (Table 2)."""
    if len(inserted_z) != len(targets):
        raise EngineError("give one target difficulty per inserted item")
    before = top_k_gap_sum(z, k)
    after = top_k_gap_sum(np.concatenate([np.asarray(z, float), np.asarray(inserted_z, float)]), k)
    dev = float(np.mean(np.abs(np.asarray(inserted_z, float) - np.asarray(targets, float)))) if len(targets) else 0.0
    return GapFillMetrics(before, after, 100.0 * (before - after) / before if before > 0 else 0.0, dev)


# ------------------------------------------------------------------------------------------ the loop


class _Stop(Exception):
    """A fatal LLM failure: the session stops, its state is in the journal."""


class _Replay:
    """Lookups into a loaded journal, so the loop reuses what was already done."""

    def __init__(self, state: FillState):
        self.rounds = {(r.phase, r.round, r.done) for r in state.rounds}
        self.rewrites = {(w.phase, w.round, w.slot): w for w in state.rewrites}
        self.verdicts = {v.child_id: v for v in state.verdicts}
        self.annotations: dict[str, dict[tuple[str, int], AnnotationRecord]] = {}
        for a in state.annotations:
            self.annotations.setdefault(a.child_id, {})[(a.model, a.trial)] = a
        self.estimates = {e.child_id for e in state.estimates}


class _Calls:
    """LLM calls done of calls planned for the whole session (issue 21 item 8: the progress restarted at every
    round). A call is a rewrite request, a judged child or an annotation (a judge's grading of a free answer
    rides with its annotation); calls replayed from the journal count as done. The plan is every round still to
    run at its most (each parent rewritten into ``n_children`` children, each judged and answered by every
    annotator trial), brought down to the real counts as a round learns them (how many children came back,
    how many were valid); a session that stops early (the tolerance reached) ends at its total."""

    def __init__(self, progress: Progress, label: str, rounds: int, rewrites: int, children: int, answers: int):
        self.progress, self.label, self.rounds = progress, label, rounds
        self.rewrites, self.children, self.answers = rewrites, children, answers
        self.done = 0
        self.total = rounds * self.per_round()
        self.round, self.stage = 1, "rewriting"

    def per_round(self) -> int:
        return self.rewrites + self.children * (1 + self.answers)

    def plan(self, t: int, rest: int, stage: str) -> None:
        """Round *t* has *rest* calls left; the rounds after it are planned at their most."""
        self.round, self.stage = t, stage
        self.total = max(self.done + rest + (self.rounds - t) * self.per_round(), self.done)
        self.report()

    def tick(self, n: int = 1) -> None:
        self.done += n
        self.total = max(self.total, self.done)
        self.report()

    def report(self) -> None:
        self.progress(self.done, self.total, f"{self.label}round {self.round}/{self.rounds} {self.stage}: "
                                             f"{self.done:,} of {self.total:,} LLM calls")

    def finish(self, message: str) -> None:
        self.total = self.done
        self.progress(self.done, max(self.total, 1), message)


class _Session:
    def __init__(self, problem: FillProblem, rewriter: Rewriter, judge: Judge, annotator: Annotator,
                 journal: FillJournal, config: BenchFillConfig, phase: Phase,
                 progress: Progress, cancel: threading.Event | None):
        problem.validate()
        self.p, self.rewriter, self.judge, self.annotator = problem, rewriter, judge, annotator
        self.journal, self.cfg, self.phase = journal, config, phase
        self.progress, self.cancel = progress, cancel
        self.replay = _Replay(journal.load_state())
        self.target = problem.target
        self.theta = np.array([a.theta for a in problem.annotators])
        self.valid: list[Candidate] = []
        self.unidentified: Counter[str] = Counter()
        self.n_children = 0
        self.round_devs: list[float] = []
        self.calls: _Calls | None = None  # set by run_session / run_baseline before the first round

    # -- journal helpers
    def _calls(self, calls: Sequence[LLMCallRecord]) -> None:
        for call in calls:
            self.journal.record_llm_call(call)

    def _fatal(self, failure: LLMFailure) -> None:
        self._calls(failure.calls)
        if failure.fatal:
            self.journal.record_event(EventRecord("error", failure.message))
            raise _Stop(failure.message)
        self.journal.record_event(EventRecord("warning", failure.message))

    # -- one round
    def run_round(self, t: int, parents: Sequence[FillItem], refs: Sequence[FillItem],
                  n_calls_per_parent: int) -> None:
        ids = tuple(p.item_id for p in parents)
        if (self.phase, t, False) not in self.replay.rounds:
            self.journal.record_round(RoundRecord(self.phase, t, ids, tuple(r.item_id for r in refs),
                                                  self.target, done=False))
        calls = self.calls
        slots = len(parents) * n_calls_per_parent
        most = self.cfg.n_children
        answers = sum(a.trials for a in self.p.annotators)
        children: list[tuple[ChildRecord, FillItem]] = []
        for slot in range(slots):
            check_cancel(self.cancel)
            if calls:
                calls.plan(t, (slots - slot) * (1 + most * (1 + answers)) + len(children) * (1 + answers),
                           "rewriting")
            parent = parents[slot // n_calls_per_parent]
            record = self.replay.rewrites.get((self.phase, t, slot)) or self._rewrite(t, slot, parent, refs)
            children.extend((c, parent) for c in record.children)
            if calls:
                calls.tick()
        self.n_children += len(children)
        valid_children = []
        for k, (c, parent) in enumerate(children):
            if calls:
                calls.plan(t, (len(children) - k) * (1 + answers) + len(valid_children) * answers, "judging")
            if self._verdict(c, parent):
                valid_children.append((c, parent))
            if calls:
                calls.tick()
        if calls:
            calls.plan(t, len(valid_children) * answers, "annotating")
        self._annotate(t, [c for c, _ in valid_children])
        devs = []
        for child, _ in valid_children:
            cand = self._estimate(child)
            if cand is None:
                continue
            self.valid.append(cand)
            devs.append(cand.abs_dev)
        self.round_devs.append(float(np.mean(devs)) if devs else float("nan"))
        if (self.phase, t, True) not in self.replay.rounds:
            best = min((c.abs_dev for c in self.valid), default=None)
            self.journal.record_round(RoundRecord(self.phase, t, ids, tuple(r.item_id for r in refs),
                                                  self.target, done=True, best_abs_dev=best))

    def _rewrite(self, t: int, slot: int, parent: FillItem, refs: Sequence[FillItem]) -> RewriteRecord:
        s = self.cfg.prompt_scale
        tag = f"{self.phase}/r{t}/s{slot}/rewrite"
        request = RewriteRequest(tag, parent, s * parent.z, s * self.target, tuple((r, s * r.z) for r in refs),
                                 self.cfg.n_children, self.p.answer_format)
        prefix = "b" if self.phase == "baseline" else "r"
        try:
            reply = self.rewriter.rewrite(request)
        except LLMFailure as failure:
            self._fatal(failure)
            record = RewriteRecord(self.phase, t, slot, parent.item_id, (), error=failure.message)
        else:
            self._calls(reply.calls)
            drafts = list(enumerate(reply.children[: self.cfg.n_children]))
            limit = self.cfg.max_child_chars
            for i, d in drafts:
                size = len(d.text) + len(d.answer) + sum(map(len, d.choices))
                if size > limit:
                    self.journal.record_event(EventRecord(
                        "warning", f"{tag}: child {i} of {size:,} characters dropped (max_child_chars {limit:,})"))
            kids = tuple(
                ChildRecord(f"{prefix}{t}.s{slot}.c{i}", self.phase, t, parent.item_id, d.text, d.answer,
                            tuple(d.choices))
                for i, d in drafts if len(d.text) + len(d.answer) + sum(map(len, d.choices)) <= limit)
            record = RewriteRecord(self.phase, t, slot, parent.item_id, kids)
        self.journal.record_rewrite(record)
        return record

    def _verdict(self, child: ChildRecord, parent: FillItem) -> bool:
        known = self.replay.verdicts.get(child.child_id)
        if known is not None:
            return known.valid
        check_cancel(self.cancel)
        draft = ChildDraft(child.text, child.answer, child.choices)
        reason = precheck_child(draft, parent, self.p.answer_format)
        valid = reason is None
        if valid:
            try:
                reply = self.judge.verify(draft, parent, f"{self.phase}/{child.child_id}/judge")
            except LLMFailure as failure:
                self._fatal(failure)
                valid, reason = False, f"judge failed: {failure.message}"
            else:
                self._calls(reply.calls)
                valid, reason = reply.valid, reply.reason or ("valid" if reply.valid else "judged invalid")
        self.journal.record_verdict(VerdictRecord(child.child_id, valid, reason or ""))
        return valid

    def _annotate(self, t: int, children: Sequence[ChildRecord]) -> None:
        requests = []
        replayed = 0
        for child in children:
            done = self.replay.annotations.setdefault(child.child_id, {})
            draft = ChildDraft(child.text, child.answer, child.choices)
            for spec in self.p.annotators:
                for trial in range(spec.trials):
                    if (spec.model, trial) not in done:
                        requests.append(AnnotationRequest(
                            f"{self.phase}/{child.child_id}/{spec.model}/t{trial}", child.child_id,
                            spec.model, trial, draft, self.p.answer_format))
                    else:
                        replayed += 1
        if self.calls and replayed:
            self.calls.tick(replayed)
        if not requests:
            return
        check_cancel(self.cancel)
        try:
            for n, reply in enumerate(self.annotator.answer_many(requests), start=1):
                self._calls(reply.calls)
                req = reply.request
                correct = grade_locally(req.child, reply.response, self.p.answer_format)
                if correct is None:
                    grade = self.judge.grade(req.child, reply.response, f"{req.tag}/grade")
                    self._calls(grade.calls)
                    correct = grade.correct
                ok = answered(reply.response, req.child, self.p.answer_format)
                record = AnnotationRecord(req.child_id, req.model, req.trial, reply.response,
                                          bool(correct) and ok, ok)
                self.journal.record_annotation(record)
                self.replay.annotations[req.child_id][(req.model, req.trial)] = record
                if self.calls:
                    self.calls.tick()
                else:
                    self.progress(n, len(requests), f"{self.phase} round {t}: annotated {n}/{len(requests)}")
                check_cancel(self.cancel)
        except LLMFailure as failure:
            self._fatal(failure)
            raise _Stop(failure.message) from failure

    def _estimate(self, child: ChildRecord) -> Candidate | None:
        """Online calibration from the answered trials; None (and the reason kept) when b is not identified."""
        done = self.replay.annotations.get(child.child_id, {})
        recs = [[done[(a.model, k)] for k in range(a.trials)] for a in self.p.annotators]
        c = np.array([sum(r.correct for r in rs if r.answered) for rs in recs])
        trials = np.array([sum(1 for r in rs if r.answered) for rs in recs])
        guessing = self.p.guessing if self.p.answer_format == "choice" else 0.0
        n_asked = sum(len(rs) for rs in recs)
        if trials.sum() == 0:
            b, se, z, reason = float("nan"), float("nan"), float("nan"), (
                f"no annotator reply held an answer ({n_asked} of {n_asked} empty or answerless)")
            n_trials = n_successes = 0
        else:
            cal = calibrate_item(self.theta, c, trials, guessing=guessing, config=self.cfg.calibration)
            b, se, z = cal.b, cal.se, self.p.scale.to_unit(cal.b)
            n_trials, n_successes = cal.n_trials, cal.n_successes
            reason = ""
            if cal.at_bound:
                side = "every answer was right" if n_successes == n_trials else (
                    "every answer was wrong" if n_successes == 0 else "the answers put it at the search bound")
                reason = f"difficulty not identified: {side} ({n_successes}/{n_trials})"
        identified = not reason
        if child.child_id not in self.replay.estimates:
            self.journal.record_estimate(EstimateRecord(child.child_id, b, se, z, abs(z - self.target), n_trials,
                                                        n_successes, identified, reason))
            self.replay.estimates.add(child.child_id)
        if not identified:
            self.unidentified[reason.split(" (")[0]] += 1
            return None
        return Candidate(child.child_id, self.phase, child.round, child.parent_id, child.text, child.answer,
                         child.choices, b, se, z, abs(z - self.target), n_successes, n_trials)

    def result(self, rounds_run: int, failed: str | None) -> FillResult:
        best = min(self.valid, key=lambda c: (c.abs_dev, c.child_id), default=None)
        converged = best is not None and best.abs_dev <= self.cfg.tolerance
        if failed is not None:
            status, message = "failed", failed
        elif best is None and self.unidentified:
            why = "; ".join(f"{n} x {r}" for r, n in self.unidentified.most_common(3))
            status, message = "no_valid_child", (f"no valid child with an identified difficulty after {rounds_run} "
                                                 f"round(s): {why}; check the annotator endpoints' replies")
        elif best is None:
            status, message = "no_valid_child", "no valid child after all rounds: try another gap or rewriter"
        else:
            status = "proposed"
            message = f"proposed {best.child_id} at z={best.z:.4f} (target {self.target:.4f})"
        return FillResult(status, message, self.phase, self.target, self.p.gap, best, tuple(self.valid),
                          rounds_run, tuple(self.round_devs), self.n_children, len(self.valid), converged)


def run_session(problem: FillProblem, rewriter: Rewriter, judge: Judge, annotator: Annotator,
                journal: FillJournal, config: BenchFillConfig = BenchFillConfig(),
                progress: Progress = no_progress, cancel: threading.Event | None = None) -> FillResult:
    """Algorithm 2 on one gap; resumes from whatever ``journal`` already holds.  Raises Cancelled on cancel."""
    s = _Session(problem, rewriter, judge, annotator, journal, config, "benchfill", progress, cancel)
    answers = sum(a.trials for a in problem.annotators)
    s.calls = _Calls(progress, "", config.max_rounds, config.n_parents,
                     config.n_parents * config.n_children, answers)
    memory = nearest_items_split(problem.items, s.target, config.memory_size)
    rounds_run = 0
    try:
        for t in range(1, config.max_rounds + 1):
            parents = nearest_items(memory, s.target, config.n_parents)
            refs = reference_list(memory, s.target, config.reference_budget)
            before = len(s.valid)
            s.run_round(t, parents, refs, 1)
            rounds_run = t
            memory.extend(FillItem(c.child_id, c.text, c.answer, c.z, c.choices) for c in s.valid[before:])
            if s.valid and min(c.abs_dev for c in s.valid) <= config.tolerance:
                break
    except _Stop as stop:
        return s.result(rounds_run, str(stop))
    s.calls.finish(f"benchfill done: {s.calls.done:,} LLM calls in {rounds_run} round(s)")
    return s.result(rounds_run, None)


def run_baseline(problem: FillProblem, rewriter: Rewriter, judge: Judge, annotator: Annotator,
                 journal: FillJournal, rounds: int, config: BenchFillConfig = BenchFillConfig(),
                 progress: Progress = no_progress, cancel: threading.Event | None = None) -> FillResult:
    """E.1's budget-matched best-of-N uniform-parent baseline for a BenchFill session that ran ``rounds``.

    n_parents benchmark items drawn uniformly (seeded), each rewritten into n_children * rounds children
    conditioned on parent and target only; the valid child nearest the target is selected.
    """
    if rounds < 1:
        raise EngineError("the baseline needs the number of rounds BenchFill ran (at least 1)")
    s = _Session(problem, rewriter, judge, annotator, journal, config, "baseline", progress, cancel)
    rng = np.random.default_rng(config.seed)
    pick = rng.choice(len(problem.items), size=min(config.n_parents, len(problem.items)), replace=False)
    parents = [problem.items[i] for i in sorted(pick)]
    slots = len(parents) * rounds
    s.calls = _Calls(progress, "baseline ", 1, slots, slots * config.n_children,
                     sum(a.trials for a in problem.annotators))
    try:
        s.run_round(1, parents, (), rounds)
    except _Stop as stop:
        return s.result(0, str(stop))
    return s.result(rounds, None)


def nearest_items_split(items: Sequence[FillItem], target: float, size: int) -> list[FillItem]:
    """Initial memory (Algorithm 2 line 4): ``size`` benchmark items nearest the gap, half on each side."""
    return list(reference_list(items, target, size))

