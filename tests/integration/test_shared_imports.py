"""Every ../shared/data set imports with its documented command (docs/IMPORT-FORMATS.md, bench/bench_store.py)
and the store then holds the counts the PROVENANCE files give."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import numpy as np
import pytest

from benchloupe.cli.main import main
from benchloupe.store import read
from benchloupe.store.db import connect

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT.parent / "shared" / "data"

pytestmark = pytest.mark.skipif(not DATA.exists(), reason=f"{DATA} is absent (real data lives in ../shared)")


def _commands():
    spec = importlib.util.spec_from_file_location("bench_store", ROOT / "bench" / "bench_store.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.SHARED_IMPORTS


@pytest.fixture(scope="module")
def shared_db(tmp_path_factory):
    db = tmp_path_factory.mktemp("shared") / "shared.db"
    cwd = os.getcwd()
    os.chdir(DATA)
    try:
        for name, args in _commands():
            assert main(["import", *args, "--db", str(db)]) == 0, name
    finally:
        os.chdir(cwd)
    return db


def test_chembench(shared_db):
    conn = connect(shared_db)
    sm = read.load_static(conn, "chembench", with_text=True)
    assert sm.shape == (32, 2854)
    assert int((~sm.mask).sum()) == 2046
    assert (sm.items["text"] != "").sum() == 2784
    assert sm.items["group"].replace("", np.nan).dropna().nunique() > 5
    humans = read.load_static(conn, "chembench-humans")
    assert humans.shape[0] == 72 and int(humans.mask.sum()) == 94222


@pytest.mark.parametrize("bench,shape", [("metabench-arc", (4280, 100)), ("metabench-gsm8k", (5041, 249)),
                                         ("metabench-truthfulqa", (4280, 136))])
def test_metabench_with_families_from_architecture(shared_db, bench, shape):
    conn = connect(shared_db)
    sm = read.load_static(conn, bench, with_text=True)
    assert sm.shape == shape and sm.mask.all()
    assert (sm.items["text"].str.len() > 50).all()
    fams = sm.models["family"].value_counts()
    assert {"llama", "mistral", "qwen"} <= set(fams.index)
    assert fams.sum() > 0.8 * shape[0]


def test_alpacaeval_as_arena_rewards(shared_db):
    conn = connect(shared_db)
    am = read.load_arena(conn, "alpacaeval2")
    assert am.rewards.shape == (58, 805)
    assert int(np.isfinite(am.rewards).sum()) == 46680
    assert np.nanmin(am.rewards) >= 1 and np.nanmax(am.rewards) <= 2
    its = read.items(conn, "alpacaeval2")
    assert (its["text"] != "").all() and set(its["group"]) == {"selfinstruct", "oasst", "koala", "helpful_base", "vicuna"}


@pytest.mark.parametrize("bench,shape", [("lsat6", (1000, 5)), ("lsat7", (1000, 5)), ("sat12", (600, 32)),
                                         ("asvab", (776, 4))])
def test_classic_sets(shared_db, bench, shape):
    conn = connect(shared_db)
    assert read.load_static(conn, bench).shape == shape


def test_reimport_is_idempotent(shared_db, monkeypatch):
    conn = connect(shared_db)
    before = read.load_static(conn, "lsat7").correct.copy()
    monkeypatch.chdir(DATA)
    assert main(["import", "classic-irt", "classic_irt/LSAT7_patterns.csv", "--benchmark", "lsat7", "--db",
                 str(shared_db)]) == 0
    np.testing.assert_array_equal(read.load_static(conn, "lsat7").correct, before)
    assert read.models(conn, "lsat7").shape[0] == 1000
