"""Replicates on any number of local processes give the same numbers bit for bit (issue 36)."""

from __future__ import annotations

import numpy as np
import pytest

from benchloupe.engine import replicates
from benchloupe.engine.bootstrap import cluster_bootstrap, method_bootstrap
from benchloupe.engine.joint import JointConfig, StaticData
from tests.unit._joint_sim import simulate


def _boot(jobs: int, **kw):
    truth, S, A = simulate(12, 60, 40, seed=8)
    S = StaticData(S.correct, S.mask, item_source=np.repeat(["x", "y"], 30))
    with replicates.use(replicates.Workers(jobs=jobs)):
        return cluster_bootstrap(S, A, JointConfig(), B=9, seed=3, **kw)


def test_bootstrap_same_numbers_on_one_and_two_processes():
    one, two = _boot(1), _boot(2)
    np.testing.assert_array_equal(one.thetas, two.thetas)
    np.testing.assert_array_equal(one.se, two.se)
    np.testing.assert_array_equal(one.rank_low, two.rank_low)
    assert one.failed == two.failed == 0


def test_replicate_b_draws_from_its_own_seed():
    """Replicate b's stream is SeedSequence(seed).spawn(B)[b]: the first replicates of B=9 and of B=3 agree."""
    truth, S, A = simulate(12, 60, 40, seed=8)
    a = method_bootstrap(S, A, JointConfig(), method="arena_bt", B=9, seed=5)
    b = method_bootstrap(S, A, JointConfig(), method="arena_bt", B=3, seed=5)
    np.testing.assert_array_equal(a.thetas[:3], b.thetas)


def test_run_keeps_task_order_and_progress_ends_full():
    seen = []
    with replicates.use(replicates.Workers(jobs=2)):
        out = replicates.run(_square, list(range(11)), 3, progress=lambda d, t, m: seen.append((d, t)))
    assert out == [3 * i * i for i in range(11)]
    assert seen[-1] == (11, 11) and all(d <= t for d, t in seen)


def test_progress_moves_in_small_steps_on_few_workers():
    """Two workers and 2,000 replicates: the job line moves at least every 2 % (50 steps), not every eighth as
    with four batches a worker (a 2,000-replicate bootstrap on GSM8K sat at 0 % for a minute)."""
    seen = []
    with replicates.use(replicates.Workers(jobs=2)):
        out = replicates.run(_square, list(range(2000)), 1, progress=lambda d, t, m: seen.append(d))
    assert out == [i * i for i in range(2000)]
    steps = sorted(set(seen))
    assert steps[0] == 0 and steps[-1] == 2000
    assert max(b - a for a, b in zip(steps, steps[1:])) <= 40, steps


def test_replicate_error_of_a_task_reaches_the_caller_as_itself():
    from benchloupe.engine.common import EngineError

    with replicates.use(replicates.Workers(jobs=2)), pytest.raises(EngineError, match="task 4"):
        replicates.run(_fail_on_four, list(range(6)))


def test_each_replicate_is_single_threaded():
    from benchloupe.engine.common import usable_cores

    with replicates.use(replicates.Workers(jobs=2)):
        assert replicates.run(_cores, [0, 1, 2]) == [1, 1, 1]
    assert replicates.run(_cores, [0]) == [1]
    assert usable_cores() == min(8, replicates.all_cores())  # outside a replicate, as before


def _square(k, i):
    return k * i * i


def _fail_on_four(_, i):
    from benchloupe.engine.common import EngineError

    if i == 4:
        raise EngineError("task 4 cannot run")
    return i


def _cores(_, i):
    from threadpoolctl import threadpool_info

    from benchloupe.engine.common import usable_cores

    blas = [p["num_threads"] for p in threadpool_info()]
    return usable_cores() if all(n == 1 for n in blas) else -1


def test_audit_splits_and_perturbations_same_on_one_and_two_processes():
    """The near-tie audit's replicates keep the reference's seeds per unit (family_seed + i, the primary's seeds
    for each perturbation), so processes change nothing: Table 9 and the split table are equal bit for bit."""
    from dataclasses import replace

    from benchloupe.engine.neartie import run_audit
    from benchloupe.engine.neartie.perturb import population_robustness
    from tests.unit.test_neartie_protocol import FAST, _inputs, simulate

    sim = simulate(seed=3, n_owners=60, n_items=120)
    cfg = replace(FAST, split_seeds=3)
    out = []
    for jobs in (1, 2):
        with replicates.use(replicates.Workers(jobs=jobs)):
            res = run_audit(*sim, cfg)
            out.append((res.tables["split_seeds"].records(), res.summary["split_stability"],
                        population_robustness(res, _inputs(res, *sim), 49)))
    (s1, v1, t1), (s2, v2, t2) = out
    assert s1 == s2 and v1 == v2
    assert t1.equals(t2) and len(t1) == 10


def _both(fn):
    out = []
    for jobs in (1, 2):
        with replicates.use(replicates.Workers(jobs=jobs)):
            out.append(fn())
    return out


def test_subset_recovery_refits_same_on_one_and_two_processes():
    from benchloupe.engine.informativeness import subset_recovery
    from benchloupe.engine.joint import fit_joint

    _, S, A = simulate(14, 60, 40, seed=2)
    res = fit_joint(S, A, JointConfig())
    one, two = _both(lambda: subset_recovery(res, S, A, fractions=(0.25, 0.5, 1.0), seeds=(0, 1)))
    assert one.equals(two) and one["reused"].any()


def test_contamination_protocol_same_on_one_and_two_processes():
    from benchloupe.engine.anomaly import contamination_experiment

    _, S, A = simulate(14, 60, 40, seed=5)
    one, two = _both(lambda: contamination_experiment(S, None, JointConfig(mode="static"), rates=(0.01, 0.05),
                                                      seeds=(0, 1)))
    assert one.equals(two) and len(one) == 8


def test_protocol_tables_same_on_one_and_two_processes():
    """Table 2's permutations (drawn in the reference's order by the caller), Table 4's and Table 5's two folds,
    as replicates: the same tables on one and two processes."""
    from benchloupe.engine.neartie import run_audit
    from benchloupe.engine.neartie.direct_mirt import direct_mirt_audit
    from benchloupe.engine.neartie.replication import replication
    from tests.unit.test_neartie_protocol import FAST, _inputs, simulate

    sim = simulate(seed=3, n_owners=60, n_items=120)
    res = run_audit(*sim, FAST)
    inputs = _inputs(res, *sim)
    from benchloupe.engine.neartie.matched import matched_controls

    one, two = _both(lambda: (replication(res, inputs, permutations=49)["table2"],
                              direct_mirt_audit(res, inputs, max_updates=300), *matched_controls(res, inputs, 49)))
    assert one[0].equals(two[0]) and one[1].equals(two[1]) and one[2].equals(two[2])
    assert one[3]["folds"].equals(two[3]["folds"])
    np.testing.assert_array_equal(one[3]["control_counts"], two[3]["control_counts"])


def _coverage_fit(seed=12):
    from benchloupe.engine.irt import fit_1pl

    rng = np.random.default_rng(seed)
    theta, b = rng.normal(size=30), rng.normal(size=400)
    y = (rng.random((30, 400)) < 1 / (1 + np.exp(-(theta[:, None] - b)))).astype(float)
    return y, fit_1pl(y)


def test_coverage_draws_same_on_one_and_two_processes():
    """C.6's draws as replicates: Laplace draws (with tracked locations and added items) and bootstrap refits
    give the same draws, intervals and location widths on one and two processes."""
    from benchloupe.engine.coverage import UncertaintyConfig, metric_uncertainty

    y, fit = _coverage_fit()
    loc = np.quantile(fit.b, [0.1, 0.5, 0.9])
    lap = _both(lambda: metric_uncertainty(fit, config=UncertaintyConfig(n_draws=250, chunk=60, seed=3),
                                           locations=loc, added_b=np.array([0.4, 3.0]),
                                           added_se=np.array([0.1, 0.0])))
    boot = _both(lambda: metric_uncertainty(fit, config=UncertaintyConfig(method="bootstrap", n_draws=6, seed=1),
                                            correct=y))
    for one, two in (lap, boot):
        assert one.draws.equals(two.draws) and one.max_gap_ci == two.max_gap_ci
    np.testing.assert_array_equal(lap[0].location_widths, lap[1].location_widths)
    assert len(lap[0].draws) == 250 and len(boot[0].draws) == 6


def test_coverage_draw_d_comes_from_its_own_seed():
    """Draw d is SeedSequence(seed).spawn(n)[d]'s: the first 100 of 300 draws are the 100 draws of n = 100 (one
    chunk each), and the uniform baseline comes from the seed's own stream, as before."""
    from benchloupe.engine.coverage import UncertaintyConfig, metric_uncertainty

    _, fit = _coverage_fit()
    many = metric_uncertainty(fit, config=UncertaintyConfig(n_draws=300, seed=4))
    few = metric_uncertainty(fit, config=UncertaintyConfig(n_draws=100, seed=4))
    assert many.draws.iloc[:100].equals(few.draws)
