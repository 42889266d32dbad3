"""BenchFill progress over the whole session (issue 21 item 8): LLM calls done of calls planned for every
round, not per round (the CLI's percentage restarted at each round: "87.0% round 1" then "0.1% round 2"); the
counts are in the message, the fraction never goes back, and the plan shrinks to what the rounds really need.
Real local OpenAI-compatible server (tests/fake_llm.py)."""

from __future__ import annotations

import re

from benchloupe.engine.benchfill import BenchFillConfig, run_session
from benchloupe.engine.benchfill_types import MemoryJournal
from tests.fake_llm import fake_llm, gappy_world, largest_gaps, problem_for_gap  # noqa: F401
from tests.unit.test_benchfill_e2e import llms

CALLS = re.compile(r"([\d,]+) of ([\d,]+) LLM calls")


def test_progress_counts_calls_of_the_whole_session(fake_llm):  # noqa: F811
    items, specs = gappy_world(fake_llm)
    rewriter, judge, annotator = llms(fake_llm, specs)
    problem = problem_for_gap(fake_llm, items, specs, largest_gaps(items, 1)[0])
    reports = []
    config = BenchFillConfig(max_rounds=3, tolerance=0.0)  # tolerance 0: every round runs
    journal = MemoryJournal()
    res = run_session(problem, rewriter, judge, annotator, journal, config,
                      progress=lambda done, total, stage: reports.append((done, total, stage)))
    assert res.rounds_run == 3
    fractions = [d / t for d, t, _ in reports if t]
    assert fractions == sorted(fractions), "the session's progress went back"
    assert fractions[-1] == 1.0
    done = [d for d, _, _ in reports]
    assert done == sorted(done)
    for d, t, stage in reports[:-1]:
        m = CALLS.search(stage)
        assert m, stage
        assert (int(m.group(1).replace(",", "")), int(m.group(2).replace(",", ""))) == (d, t)
    rounds = [int(m.group(1)) for _, _, s in reports if (m := re.search(r"round (\d)/3", s))]
    assert rounds == sorted(rounds) and set(rounds) == {1, 2, 3}
    # the last count is every rewrite, every judged child and every annotation of the session
    state = journal.load_state()
    n_children = sum(len(w.children) for w in state.rewrites)
    assert reports[-1][0] == len(state.rewrites) + n_children + len(state.annotations)
    # the first plan was the most the three rounds could need; it only came down from there
    first = reports[0][1]
    per_round = config.n_parents * (1 + config.n_children * (1 + sum(a.trials for a in problem.annotators)))
    assert first == 3 * per_round
    assert [t for _, t, _ in reports] == sorted((t for _, t, _ in reports), reverse=True)
