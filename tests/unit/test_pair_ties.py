"""Ties in discrete rewards (issue 14, fix 2): equal rewards are always ties, and a zero threshold is reported."""

import numpy as np

from benchloupe.engine.joint import ArenaData, JointConfig, build_pairs, in_sample_metrics


def _discrete(n_models=30, n_prompts=200, levels=(1.0, 2.0), seed=0):
    rng = np.random.default_rng(seed)
    skill = rng.normal(size=n_models)
    p = 1 / (1 + np.exp(-(skill[:, None] - rng.normal(size=n_prompts))))
    return np.where(rng.random(p.shape) < p, levels[1], levels[0])


def test_equal_rewards_are_ties_with_the_expected_count():
    r = _discrete()
    pairs = build_pairs(ArenaData(r), JointConfig())
    # expected ties: every pair with the same level on a prompt, counted directly
    expected = sum(int((col == 1).sum() * ((col == 1).sum() - 1) / 2 + (col == 2).sum() * ((col == 2).sum() - 1) / 2)
                   for col in r.T)
    assert pairs.tie_delta == 0.0
    assert int(pairs.tie.sum()) == expected
    assert np.all(pairs.target[pairs.decisive] != 0.5)
    assert len(pairs.warnings) == 1 and "equal rewards" in pairs.warnings[0]


def test_equal_rewards_are_ties_even_at_percentile_zero():
    r = np.array([[0.0, 1.0, np.nan], [2.0, 1.0, 5.0], [4.0, 0.5, 1.0]])
    p0 = build_pairs(ArenaData(r), JointConfig(tie_pct=0.0, bb_pct=0.0))
    assert int(p0.tie.sum()) == 1  # models 0 and 1 on prompt 1
    assert p0.warnings == []  # percentile 0 asks for no threshold; nothing to warn about


def test_continuous_rewards_unchanged_and_no_warning():
    rng = np.random.default_rng(1)
    r = rng.normal(size=(20, 50))
    pairs = build_pairs(ArenaData(r), JointConfig())
    assert pairs.tie_delta > 0 and pairs.warnings == []
    np.testing.assert_array_equal(pairs.tie, np.abs(pairs.z_gap) < pairs.tie_delta)


def test_decisive_agreement_ignores_equal_reward_pairs():
    from benchloupe.engine.joint import fit_joint

    r = _discrete(n_models=12, n_prompts=60)
    res = fit_joint(None, ArenaData(r), JointConfig(mode="arena"))
    m = in_sample_metrics(res, None)
    assert m["arena_decisive_pairs"] == int(res.pairs.decisive.sum())
    assert m["arena_tie_pairs"] == int(res.pairs.tie.sum()) > 0
    assert not np.any(res.pairs.target[res.pairs.decisive] == 0.5)
