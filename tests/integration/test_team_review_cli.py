"""Issue 25 #4 from the command line: two ``benchloupe review`` processes on one BenchFill session. The proposal
one shows is held by its review lease, so the other skips it and reviews the next; once the first is killed its
lease is gone and the proposal can be reviewed; a session with ``approvals 2`` needs two curators."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.tui.team import candidate_rows, small_session


def _review(db, who: str, sid: int, **kw) -> subprocess.Popen:
    env = {**os.environ, "BENCHLOUPE_USER": ""}
    return subprocess.Popen([sys.executable, "-m", "benchloupe", "--db", str(db), "--as", who, "review",
                             "--session", str(sid)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, **kw)


def _until_prompt(proc) -> bytes:
    shown = b""
    while b"[a]ccept" not in shown:
        chunk = os.read(proc.stdout.fileno(), 4096)
        assert chunk, proc.stderr.read().decode()
        shown += chunk
    return shown


@pytest.mark.slow
def test_a_second_reviewer_skips_the_held_proposal_and_a_killed_ones_lease_goes(demo_db):
    sid = small_session(demo_db, n=3)
    ids = list(candidate_rows(demo_db, sid).sort_values(["distance", "id"]).index)
    ann = _review(demo_db, "ann", sid)
    try:
        assert f"candidate {ids[0]}".encode() in _until_prompt(ann)  # ann holds the first
        bea = subprocess.run([sys.executable, "-m", "benchloupe", "--db", str(demo_db), "--as", "bea", "review",
                              "--session", str(sid)], input="r\nnot for us\nq\n", capture_output=True, text=True,
                             env={**os.environ, "BENCHLOUPE_USER": ""}, timeout=120)
        assert bea.returncode == 0, bea.stderr
        assert f"proposal #{ids[0]}: ann is reviewing it (since " in bea.stdout
        assert f"candidate {ids[1]}" in bea.stdout and "rejected" in bea.stdout
        ann.kill()
        ann.wait(timeout=30)
        cy = subprocess.run([sys.executable, "-m", "benchloupe", "--db", str(demo_db), "--as", "cy", "review",
                             "--session", str(sid)], input="r\n\nq\n", capture_output=True, text=True,
                            env={**os.environ, "BENCHLOUPE_USER": ""}, timeout=120)
        assert cy.returncode == 0 and f"candidate {ids[0]}" in cy.stdout, cy.stdout + cy.stderr
    finally:
        if ann.poll() is None:
            ann.kill()
    cands = candidate_rows(demo_db, sid)
    assert (cands.loc[ids[0], "decided_by"], cands.loc[ids[1], "decided_by"]) == ("cy", "bea")
    assert cands.loc[ids[2], "review_state"] == "pending"


def test_two_approvals_from_the_command_line(demo_db):
    sid = small_session(demo_db, n=1, approvals=2)
    env = {**os.environ, "BENCHLOUPE_USER": ""}

    def review(who: str, answers: str) -> str:
        out = subprocess.run([sys.executable, "-m", "benchloupe", "--db", str(demo_db), "--as", who, "review",
                              "--session", str(sid)], input=answers, capture_output=True, text=True, env=env,
                             timeout=300)
        assert out.returncode == 0, out.stderr
        return out.stdout

    first = review("ann", "a\nlooks right\n")
    assert "approvals: 0 of 2" in first and "approved; it becomes an item" in first
    assert "no proposals wait for review" in review("ann", "a\n\n")  # ann has approved it already
    second = review("bea", "a\nagreed\n")
    assert "approvals: 1 of 2 (ann)" in second and f"accepted as item benchfill-{sid}-" in second
    cands = candidate_rows(demo_db, sid)
    assert cands["review_state"].tolist() == ["accepted"] and cands["approvers"].tolist() == ["ann, bea"]
