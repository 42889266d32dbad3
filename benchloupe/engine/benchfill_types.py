"""Data types, LLM-facing protocols and the persistence journal of BenchFill (paper 003, Algorithm 2).

The loop in :mod:`benchloupe.engine.benchfill` never talks to a network or a database.  It calls three
abstract protocols, implemented over OpenAI-compatible endpoints in :mod:`benchloupe.prompts.llm`:

- :class:`Rewriter` (the rewriter LLM G of Algorithm 2 line 11),
- :class:`Judge` (the validity judge J of line 13, also the grader of free-form answers),
- :class:`Annotator` (the IRT evaluation LLMs M_j of line 15; one object dispatching to every model).

Every reply carries the :class:`LLMCallRecord` of each HTTP attempt, so the loop can journal calls in its own
thread.  A failure that the session cannot continue past (no endpoint, wrong key, unknown model, endless
429s, unreachable host) is raised as :class:`LLMFailure` with ``fatal=True`` and a one-line message.

Everything that happens is reported, as it happens, to a :class:`FillJournal` (the store implements it on
SQLite; :class:`MemoryJournal` here is the in-memory one).  ``load_state()`` returns what was recorded, and
the loop replays it instead of asking the LLMs again: that is how an interrupted session resumes.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

AnswerFormat = Literal["short", "choice", "free"]
Phase = Literal["benchfill", "baseline"]


@dataclass(frozen=True)
class FillItem:
    """An item with its normalised difficulty z; benchmark items and accepted children alike."""

    item_id: str
    text: str
    answer: str
    z: float
    choices: tuple[str, ...] = ()


@dataclass(frozen=True)
class ChildDraft:
    """One child proposed by the rewriter (question text, reference answer, options for multiple choice)."""

    text: str
    answer: str
    choices: tuple[str, ...] = ()


@dataclass(frozen=True)
class LLMCallRecord:
    """One HTTP attempt against a chat-completions endpoint; never holds the API key."""

    tag: str
    endpoint: str
    model: str
    attempt: int
    prompt: str
    response: str | None
    latency_s: float
    prompt_tokens: int | None
    completion_tokens: int | None
    status: str  # "ok" or a short error class such as "http_429", "timeout", "connection"
    http_status: int | None
    error: str | None
    started_at: float


class LLMFailure(RuntimeError):
    """An LLM step failed; ``message`` is one line.  ``fatal`` stops the session (its state is kept)."""

    def __init__(self, message: str, *, fatal: bool, calls: Sequence[LLMCallRecord] = ()):
        super().__init__(message)
        self.message = message
        self.fatal = fatal
        self.calls = tuple(calls)


@dataclass(frozen=True)
class RewriteRequest:
    """Algorithm 2 line 11: parent, target and reference list, difficulties already rescaled to [0, 10]."""

    tag: str
    parent: FillItem
    parent_display: float
    target_display: float
    references: tuple[tuple[FillItem, float], ...]  # (item, displayed difficulty in [0, 10])
    n_children: int
    answer_format: AnswerFormat


@dataclass(frozen=True)
class RewriteReply:
    children: tuple[ChildDraft, ...]
    calls: tuple[LLMCallRecord, ...] = ()


@dataclass(frozen=True)
class VerdictReply:
    valid: bool
    reason: str
    calls: tuple[LLMCallRecord, ...] = ()


@dataclass(frozen=True)
class GradeReply:
    correct: bool
    calls: tuple[LLMCallRecord, ...] = ()


@dataclass(frozen=True)
class AnnotationRequest:
    """Evaluate annotator ``model`` once (trial number ``trial``) on child ``child_id``."""

    tag: str
    child_id: str
    model: str
    trial: int
    child: ChildDraft
    answer_format: AnswerFormat


@dataclass(frozen=True)
class AnnotationReply:
    request: AnnotationRequest
    response: str
    calls: tuple[LLMCallRecord, ...] = ()


class Rewriter(Protocol):
    def rewrite(self, request: RewriteRequest) -> RewriteReply:
        """Return up to ``request.n_children`` children; raise LLMFailure when none can be had."""
        ...


class Judge(Protocol):
    def verify(self, child: ChildDraft, parent: FillItem, tag: str) -> VerdictReply:
        """Is the child's reference answer correct (Algorithm 2 line 13)?"""
        ...

    def grade(self, child: ChildDraft, response: str, tag: str) -> GradeReply:
        """Does a free-form response match the child's reference answer?"""
        ...


class Annotator(Protocol):
    def answer_many(self, requests: Sequence[AnnotationRequest]) -> Iterator[AnnotationReply]:
        """Run all requests (concurrently, bounded) and yield replies in the caller's thread as they finish.

        Raise LLMFailure(fatal=True) when a call cannot be completed; replies already yielded stand.
        """
        ...


# ----------------------------------------------------------------------------------------------- journal


@dataclass(frozen=True)
class RoundRecord:
    """A round starts (with its parents and references) and later finishes (``done=True``)."""

    phase: Phase
    round: int
    parent_ids: tuple[str, ...]
    reference_ids: tuple[str, ...]
    target_z: float
    done: bool
    best_abs_dev: float | None = None


@dataclass(frozen=True)
class ChildRecord:
    child_id: str
    phase: Phase
    round: int
    parent_id: str
    text: str
    answer: str
    choices: tuple[str, ...]


@dataclass(frozen=True)
class RewriteRecord:
    """One rewriter call for one parent slot, with all its children (written in one transaction)."""

    phase: Phase
    round: int
    slot: int
    parent_id: str
    children: tuple[ChildRecord, ...]
    error: str | None = None


@dataclass(frozen=True)
class VerdictRecord:
    child_id: str
    valid: bool
    reason: str


@dataclass(frozen=True)
class AnnotationRecord:
    """One annotator trial; ``answered`` is False when the reply held no answer at all (empty content, no
    choice letter): such a trial carries no signal and does not count in the calibration (issue 10 #8)."""

    child_id: str
    model: str
    trial: int
    response: str
    correct: bool
    answered: bool = True


@dataclass(frozen=True)
class EstimateRecord:
    """Online calibration of a valid child: raw b on the IRT scale, normalised z, |z - z*|. ``identified`` is
    False when the answers do not determine b (no answered trial, or all right / all wrong: b at the search
    bound); ``reason`` says which. An unidentified child is never proposed."""

    child_id: str
    b: float
    se: float
    z: float
    abs_dev: float
    n_trials: int
    n_successes: int
    identified: bool = True
    reason: str = ""


@dataclass(frozen=True)
class EventRecord:
    level: Literal["info", "warning", "error"]
    message: str


@dataclass
class FillState:
    """Everything a journal holds for one session; the loop replays it on resume."""

    rounds: list[RoundRecord] = field(default_factory=list)
    rewrites: list[RewriteRecord] = field(default_factory=list)
    verdicts: list[VerdictRecord] = field(default_factory=list)
    annotations: list[AnnotationRecord] = field(default_factory=list)
    estimates: list[EstimateRecord] = field(default_factory=list)
    events: list[EventRecord] = field(default_factory=list)
    llm_calls: list[LLMCallRecord] = field(default_factory=list)


class FillJournal(Protocol):
    """Persistence sink called by the loop as each thing happens (the store implements it on SQLite)."""

    def load_state(self) -> FillState: ...

    def record_round(self, record: RoundRecord) -> None: ...

    def record_rewrite(self, record: RewriteRecord) -> None: ...

    def record_verdict(self, record: VerdictRecord) -> None: ...

    def record_annotation(self, record: AnnotationRecord) -> None: ...

    def record_estimate(self, record: EstimateRecord) -> None: ...

    def record_event(self, record: EventRecord) -> None: ...

    def record_llm_call(self, record: LLMCallRecord) -> None: ...


class MemoryJournal:
    """In-memory :class:`FillJournal`; ``load_state`` returns a copy, exactly what a database would give."""

    def __init__(self) -> None:
        self._state = FillState()
        self._lock = threading.Lock()

    def load_state(self) -> FillState:
        with self._lock:
            s = self._state
            return FillState(list(s.rounds), list(s.rewrites), list(s.verdicts), list(s.annotations),
                             list(s.estimates), list(s.events), list(s.llm_calls))

    def _add(self, name: str, record: object) -> None:
        with self._lock:
            getattr(self._state, name).append(record)

    def record_round(self, record: RoundRecord) -> None:
        self._add("rounds", record)

    def record_rewrite(self, record: RewriteRecord) -> None:
        self._add("rewrites", record)

    def record_verdict(self, record: VerdictRecord) -> None:
        self._add("verdicts", record)

    def record_annotation(self, record: AnnotationRecord) -> None:
        self._add("annotations", record)

    def record_estimate(self, record: EstimateRecord) -> None:
        self._add("estimates", record)

    def record_event(self, record: EventRecord) -> None:
        self._add("events", record)

    def record_llm_call(self, record: LLMCallRecord) -> None:
        self._add("llm_calls", record)
