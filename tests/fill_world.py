"""A gappy benchmark in a real database whose items live in the fake LLM server's world (tests/fake_llm.py).

Respondent models answer item [Q-n] correctly with probability sigmoid(theta - b) from the server's hidden b,
so the coverage fit recovers the world's difficulty axis; the 12 annotator models are models of the benchmark
too (their fitted abilities are what online calibration uses) and answer through the fake endpoint.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from benchloupe.jobs import fill
from benchloupe.jobs.coverage import CoverageConfig, run_coverage
from benchloupe.store.db import connect
from benchloupe.store.importers.base import ParsedImport
from benchloupe.store.writer import write_import
from tests.fake_llm import KEY, REPLY_TIMEOUT_S, FakeLLM, gappy_world

BENCH = "gappy"


def store_world(fake: FakeLLM, db, *, n_respondents: int = 80, trials: int = 2, seed: int = 3) -> str:
    items, specs = gappy_world(fake, n_models=12, trials=trials)
    rng = np.random.default_rng(seed)
    names = [s.model for s in specs] + [f"resp-{i:03d}" for i in range(n_respondents)]
    theta = np.concatenate([[s.theta for s in specs], rng.normal(0.0, 1.6, n_respondents)])
    b = np.array([fake.true_b(it.text) for it in items])
    y = (rng.random((len(names), len(items))) < 1 / (1 + np.exp(-(theta[:, None] - b[None, :])))).astype(np.int8)
    parsed = ParsedImport(BENCH, "static", pd.DataFrame({"key": [it.item_id for it in items],
                                                         "text": [it.text for it in items],
                                                         "answer": [it.answer for it in items]}),
                          pd.DataFrame({"name": names}), correct=y, source="fake world")
    conn = connect(db)
    write_import(conn, parsed, fmt="test")
    conn.close()
    run_coverage(db, BENCH, CoverageConfig(uncertainty="none"))
    return BENCH


def configure_endpoints(fake: FakeLLM, db, monkeypatch, *, n_annotators: int = 12, trials: int = 2) -> None:
    monkeypatch.setenv("FAKE_LLM_KEY", KEY)
    common = {"base_url": fake.base_url, "api_key_env": "FAKE_LLM_KEY", "timeout": REPLY_TIMEOUT_S, "max_retries": 3}
    fill.set_endpoint(db, "rewriter", model="rewriter", **common)
    fill.set_endpoint(db, "judge", model="judge", **common)
    for j in range(n_annotators):
        fill.set_endpoint(db, "annotator", name=f"annot-{j}", model=f"annot-{j}", trials=trials, **common)
