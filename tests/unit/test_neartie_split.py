"""Issue 22: the owner split follows the reference's float64 arithmetic, not exact rationals.

The oracle here states the reference's rule (REFERENCE-IMPLEMENTATIONS.md B.1, maintainer variant) with numpy
arrays and numpy's array sums, as the reference computes its costs, and pandas 2.3.3's compensated groupby sum
(:func:`compensated`, checked against pandas 2.3.3's own output by digest; the installed pandas may differ);
the engine (:mod:`benchloupe.engine.neartie.population`) computes the same numbers in plain Python floats.
The differential test against a rebuild of the reference itself is ``bench/bench_neartie.py reference``.
"""

import hashlib
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from benchloupe.engine.neartie import HALVES, AuditConfig, build_population
from benchloupe.engine.neartie.population import kahan_sum, numpy_sum, population_with_split


def compensated(values) -> float:
    """pandas 2.3.3 groupby sum: Kahan's running sum, returned before the last correction is added."""
    s = c = 0.0
    for v in values:
        y = v - c
        t = s + y
        c = (t - s) - y
        s = t
    return s


def reference_halves(acc: list[float], families: list[str], owners: list[str], seed: int) -> list[str]:
    """The greedy owner split of B.1 as pandas and numpy compute it (no owner above the cap, so no cap draws).

    Frame order: families sorted, owners sorted within a family, input order within an owner.  Family means and
    per-owner family sums are pandas 2.3.3 groupby mean / sum (:func:`compensated`); each side's cost is two numpy sums over the families of
    |count difference| / T_f and |(s0 - c0 m) - (s1 - c1 m)| / T_f; equal costs draw rng.integers(0, 2)."""
    rng = np.random.default_rng(seed)
    fams = sorted(set(families))
    frame = pd.DataFrame({"family": families, "owner": owners, "acc": acc, "row": range(len(acc))})
    frame = frame.sort_values(["family", "owner", "row"], kind="stable")
    total = frame.groupby("family").size().reindex(fams).to_numpy()
    mean = np.array([compensated(frame.loc[frame["family"] == f, "acc"]) for f in fams]) / total
    owner_rows = []
    for owner, rows in frame.groupby("owner", sort=True):
        c = np.array([(rows["family"] == f).sum() for f in fams])
        s = np.array([compensated(rows.loc[rows["family"] == f, "acc"]) for f in fams])
        owner_rows.append((-len(rows), rng.uniform(), owner, c, s))
    owner_rows.sort(key=lambda r: r[:2])
    count, level, side_of = np.zeros((2, len(fams))), np.zeros((2, len(fams))), {}
    for _, _, owner, c, s in owner_rows:
        cost = []
        for side in (0, 1):
            cc, ss = count.copy(), level.copy()
            cc[side] += c
            ss[side] += s
            expect = cc * mean[None, :]
            cost.append(float(np.sum(np.abs(cc[0] - cc[1]) / total)
                              + np.sum(np.abs((ss[0] - expect[0]) - (ss[1] - expect[1])) / total)))
        side = int(rng.integers(0, 2)) if cost[0] == cost[1] else int(np.argmin(cost))
        count[side] += c
        level[side] += s
        side_of[owner] = side
    return [HALVES[side_of[o]] for o in owners]


def exact_costs(acc: list[Fraction], families: list[str], owners: list[str], order: list[str], step: int):
    """Both candidate costs at ``step`` in exact rational arithmetic, the owners before it placed as ``order``
    (owner, side) says."""
    fams = sorted(set(families))
    total = [families.count(f) for f in fams]
    mean = [sum(a for a, f in zip(acc, families, strict=True) if f == ff) / total[k] for k, ff in enumerate(fams)]
    count = [[0] * len(fams), [0] * len(fams)]
    level = [[Fraction(0)] * len(fams), [Fraction(0)] * len(fams)]

    def add(side, owner, into_c, into_s):
        for a, f, o in zip(acc, families, owners, strict=True):
            if o == owner:
                into_c[side][fams.index(f)] += 1
                into_s[side][fams.index(f)] += a

    for owner, side in order[:step]:
        add(side, owner, count, level)
    out = []
    for side in (0, 1):
        c, s = [row[:] for row in count], [row[:] for row in level]
        add(side, order[step][0], c, s)
        out.append(sum(Fraction(abs(c[0][k] - c[1][k]), total[k]) for k in range(len(fams)))
                   + sum(abs((s[0][k] - c[0][k] * mean[k]) - (s[1][k] - c[1][k] * mean[k])) / total[k]
                         for k in range(len(fams))))
    return out


def _order(log) -> list[tuple[str, int]]:
    return list(zip(log.owners.tolist(), log.side.tolist(), strict=True))


# sha256 of the 20,000 groupby sums and means below as pandas 2.3.3 (the reference's pin) computes them, in a scratch
# environment with the reference's pinned versions (docs/NEARTIE.md); pandas 3.1 no longer gives these bits
PANDAS_233_SUMS = "33b933952682f549e8d9ef2f90fd987738829f602d331139c75cbb99478dc0fc"
PANDAS_233_MEANS = "0441c0176fbc5ad13173af1a8ad4fbc4899a39e31a0e1b29faa575f03153d0c8"


def test_kahan_sum_is_pandas_233_groupby_sum():
    """20,000 groups of accuracies k / n: the engine's sum (and sum / count) equals pandas 2.3.3's groupby sum
    (and mean) bit for bit, checked against their recorded digest; a plain running sum differs in thousands."""
    rng = np.random.default_rng(0)
    n = rng.integers(30, 300, size=20000)
    sizes = rng.integers(1, 9, size=20000)
    values = [(rng.integers(0, m + 1, size=k) / m).tolist() for m, k in zip(n, sizes, strict=True)]
    sums = [kahan_sum(v) for v in values]
    assert hashlib.sha256(np.array(sums, dtype="<f8").tobytes()).hexdigest() == PANDAS_233_SUMS
    means = [kahan_sum(v) / len(v) for v in values]
    assert hashlib.sha256(np.array(means, dtype="<f8").tobytes()).hexdigest() == PANDAS_233_MEANS
    assert sums[8] == 2.857142857142857 and sum(values[8]) == 2.8571428571428568  # no final compensation
    assert sum(sum(v) != k for v, k in zip(values, sums, strict=True)) > 4000


@pytest.mark.parametrize("n", [1, 2, 5, 7, 8, 9, 15, 16, 17, 127, 128, 129, 300])
def test_numpy_sum_adds_in_numpy_order(n):
    rng = np.random.default_rng(n)
    for _ in range(200):
        v = rng.random(n) * 10.0 ** rng.integers(-8, 8, size=n)
        assert numpy_sum(v.tolist()) == float(np.sum(v))


def test_an_exact_tie_that_the_float_residual_breaks_takes_the_lower_side():
    """Five single-model owners, two families.  At step 4 (index 3) owner o0's two costs are both 16/15 exactly, so
    exact arithmetic draws; in float64 they are 0x1.1111111111110p+0 and ...111p+0 (one ulp apart), so the
    reference puts o0 on the lower side (discovery) with no draw, and o0 then lands in the other half."""
    rows = [("o0", "llama", 50), ("o1", "qwen", 30), ("o2", "llama", 30), ("o3", "qwen", 70), ("o4", "llama", 70)]
    owners, families, correct = (list(x) for x in zip(*rows, strict=True))
    acc = [k / 100 for k in correct]
    cfg = AuditConfig(min_family_models=1, min_family_models_per_half=0, family_seed=59)
    pop, log = population_with_split(np.array(acc), [f"{o}/m" for o in owners], families, owners, cfg,
                                     correct=np.array(correct), observed=100)
    step = log.owners.tolist().index("o0")
    assert step == 3
    exact = exact_costs([Fraction(k, 100) for k in correct], families, owners, _order(log), step)
    assert exact[0] == exact[1] == Fraction(16, 15)
    assert log.cost[step].tolist() == [float.fromhex("0x1.1111111111110p+0"), float.fromhex("0x1.1111111111111p+0")]
    assert not log.drawn[step] and log.knife_edge[step]
    assert pop["half"].tolist() == reference_halves(acc, families, owners, cfg.family_seed)
    assert pop["half"][owners.index("o0")] == "discovery"
    assert log.summary() == {"split_decisions": 5, "split_ties": 2, "split_knife_edges": 1}  # the first owner draws
    edges = log.edges()
    assert edges["owner"].tolist()[-1] == "o0" and edges["decision"].tolist()[-1] == "lower cost"


def test_a_float_tie_at_residual_zero_draws():
    """Six single-model owners with float accuracies (no counts: their exact binary values).  At step 6 owner
    o5's two costs are equal in float64 (0x1.a4fa4fa4fa4fap-1, residual 0.0) while their exact values differ by
    about 1e-17: the reference draws rng.integers(0, 2) there, which also moves the random stream."""
    acc = [0.6, 0.2, 0.5, 0.6, 0.3, 0.4]
    families = ["llama", "qwen"] * 3
    owners = [f"o{k}" for k in range(6)]
    cfg = AuditConfig(min_family_models=1, min_family_models_per_half=0, family_seed=23)
    pop, log = population_with_split(np.array(acc), [f"{o}/m" for o in owners], families, owners, cfg)
    step = log.owners.tolist().index("o5")
    assert step == 5
    exact = exact_costs([Fraction(a) for a in acc], families, owners, _order(log), step)
    assert exact[0] != exact[1] and abs(exact[0] - exact[1]) < Fraction(1, 10**16)
    assert log.cost[step, 0] == log.cost[step, 1] == float.fromhex("0x1.a4fa4fa4fa4fap-1")
    assert log.drawn[step]
    assert pop["half"].tolist() == reference_halves(acc, families, owners, cfg.family_seed)


def _population(rng):
    """4-6 families, mostly single-model owners, accuracies on a few levels: ties everywhere."""
    n_fam = int(rng.integers(4, 7))
    fams = ["gemma", "llama", "mistral", "phi", "qwen", "yi"][:n_fam]
    n_items = int(rng.choice([20, 37, 100]))
    levels = rng.choice(np.arange(n_items + 1), size=int(rng.integers(2, 6)), replace=False)
    owners, families, correct = [], [], []
    for o in range(int(rng.integers(12, 60))):
        for f in rng.choice(fams, size=1 if rng.random() < 0.7 else 2, replace=False):
            for _ in range(1 if rng.random() < 0.75 else int(rng.integers(2, 5))):
                owners.append(f"owner{o:02d}")
                families.append(str(f))
                correct.append(int(rng.choice(levels)))
    return owners, families, correct, n_items


def test_split_equals_the_reference_rule_on_populations_full_of_ties():
    rng = np.random.default_rng(22)
    ties = edges = checked = 0
    for _ in range(150):
        owners, families, correct, n_items = _population(rng)
        if len(set(owners)) < 4 or len(set(families)) < 2:
            continue
        seed = int(rng.integers(0, 10**6))
        cfg = AuditConfig(min_family_models=1, min_family_models_per_half=0, family_seed=seed)
        acc = [k / n_items for k in correct]
        pop, log = population_with_split(np.array(acc), [f"{o}/m{i}" for i, o in enumerate(owners)], families,
                                         owners, cfg, correct=np.array(correct), observed=n_items)
        assert pop["half"].tolist() == reference_halves(acc, families, owners, seed)
        ties += int(log.drawn.sum())
        edges += int(log.knife_edge.sum())
        checked += 1
    assert checked > 140 and ties > 100 and edges > 10  # the generator does hit the edges


def test_build_population_is_the_table_of_population_with_split():
    owners, families, correct, n_items = _population(np.random.default_rng(3))
    cfg = AuditConfig(min_family_models=1, min_family_models_per_half=0)
    args = (np.array(correct) / n_items, [f"{o}/m{i}" for i, o in enumerate(owners)], families, owners, cfg)
    table = build_population(*args, correct=np.array(correct), observed=n_items)
    assert table["half"].tolist() == population_with_split(*args, correct=np.array(correct),
                                                           observed=n_items)[0]["half"].tolist()
