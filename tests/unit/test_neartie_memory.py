"""The near-tie audit at leaderboard scale (issue 26: 2.48 GB peak and 30.7 s at 5,000 x 14,000) changes no number.

- Its 0/1 matrices are int8, not float64: every table and summary value equals, bit for bit, the audit computed
  on float64 copies of the same matrices (the arithmetic before), complete, with missing cells, float tie mode.
- The DIF passes put on threads (working matrix, spectral offsets, the K grid's held-out losses) equal the
  one-thread passes bit for bit; the uncopied working matrix gives the SVD the copy gave.
- The matched-random controls drawn for all replicates at once are ``rng.choice``'s draws, weight for weight."""

import numpy as np
import pytest

from benchloupe.engine import dif
from benchloupe.engine.neartie import AuditConfig, run_audit, scoring
from benchloupe.engine.neartie import audit as audit_module

FAST = AuditConfig(dimensions=(1, 2, 4, 8), controls=99)


def simulate(n_owners=70, n_items=200, seed=3, families=("gemma", "llama", "qwen")):
    rng = np.random.default_rng(seed)
    ids, fams, owners = [], [], []
    for o in range(n_owners):
        for f in rng.choice(families, size=rng.integers(1, 3), replace=False):
            for c in range(rng.integers(1, 6)):
                ids.append(f"owner{o}/{f}-model-{c}")
                fams.append(str(f))
                owners.append(f"owner{o}")
    code = np.searchsorted(sorted(families), fams)
    b = rng.normal(0.2, 1.0, n_items)
    a = rng.normal(0, 0.7, (n_items, 3))
    theta = rng.normal(0, 1, (len(ids), 3))
    delta = rng.normal(0, 0.6, (n_items, len(families))) * (np.arange(n_items) < n_items // 2)[:, None]
    logits = b + theta @ a.T + delta[:, code].T
    y = (rng.random(logits.shape) < 1 / (1 + np.exp(-logits))).astype(np.int8)
    return y, ids, fams, owners, [f"task_{i % 4}" for i in range(n_items)]


def _same(x, y) -> bool:
    """Equal as stored: same columns, same values bit for bit (NaN where NaN, the sign of zero too)."""
    if hasattr(x, "columns"):
        return list(x.columns) == list(y.columns) and len(x) == len(y) and all(
            _same(np.asarray(x[c]), np.asarray(y[c])) for c in x.columns)
    if isinstance(x, np.ndarray) and x.dtype.kind == "f":
        return x.shape == y.shape and x.dtype == y.dtype and np.array_equal(x, y, equal_nan=True) and bool(
            (np.signbit(x) == np.signbit(y)).all())
    if isinstance(x, np.ndarray):
        return x.shape == y.shape and bool((x == y).all())
    if isinstance(x, float) and x != x:
        return y != y
    return x == y


def test_validate_returns_int8_matrices_without_a_float64_copy():
    y, ids, fams, owners, groups = simulate(n_owners=8, n_items=20)
    for responses in (y, y.astype(float), y.astype(bool), y.astype(np.int64)):
        out, obs = audit_module._validate(responses, None, ids, fams, owners, groups)
        assert out.dtype == np.int8 and obs is None
        np.testing.assert_array_equal(out, y)
    mask = np.ones(y.shape, dtype=bool)
    mask[0, :3] = False
    holes = np.where(mask, y, -1).astype(np.int8)
    out, obs = audit_module._validate(holes, mask, ids, fams, owners, groups)
    assert out.dtype == np.int8 and obs.dtype == np.int8
    assert (out[0, :3] == 0).all() and (obs == mask).all()
    assert np.shares_memory(obs, mask) and not obs.flags.writeable  # the caller's mask, viewed, never written
    out, obs = audit_module._validate(holes, mask.astype(float), ids, fams, owners, groups)
    assert out.dtype == np.int8 and obs.dtype == np.int8
    # a mask with other weights than 0/1 keeps them (float64), as before
    weighted = mask * 2.0
    assert audit_module._validate(holes, weighted, ids, fams, owners, groups)[1].dtype == np.float64
    out, obs = audit_module._validate(y, np.ones(y.shape, dtype=bool), ids, fams, owners, groups)
    assert obs is None  # every cell observed: no mask at all


@pytest.mark.parametrize("bad, message", [(2.0, "responses must be 0/1"), (np.nan, "missing values")])
def test_validate_still_refuses_bad_observed_cells_only(bad, message):
    from benchloupe.engine.common import EngineError

    y, ids, fams, owners, groups = simulate(n_owners=8, n_items=20)
    cells = y.astype(float)
    cells[0, 0] = bad
    with pytest.raises(EngineError, match=message):
        audit_module._validate(cells, None, ids, fams, owners, groups)
    mask = np.ones(y.shape, dtype=bool)
    mask[0, 0] = False  # the same value at a missing cell is no error, and becomes 0
    out, obs = audit_module._validate(cells, mask, ids, fams, owners, groups)
    assert out[0, 0] == 0 and out.dtype == np.int8 and not obs[0, 0]
    if bad == 2.0:
        with pytest.raises(EngineError, match=message):
            audit_module._validate(cells.astype(np.int8), None, ids, fams, owners, groups)


def _float64_validate(*args):
    """The pre-issue-26 arithmetic: the validated matrices as float64 (the engine's dif and scoring functions
    take them as they always did)."""
    y, obs = ORIGINAL_VALIDATE(*args)
    return y.astype(np.float64), None if obs is None else obs.astype(np.float64)


ORIGINAL_VALIDATE = audit_module._validate


@pytest.mark.parametrize("variant", ["complete", "missing", "float ties"])
def test_int8_audit_equals_the_float64_audit_bit_for_bit(variant, monkeypatch):
    y, ids, fams, owners, groups = simulate()
    config, mask = FAST, None
    if variant == "missing":
        mask = np.random.default_rng(1).random(y.shape) > 0.08
        y = np.where(mask, y, -1).astype(np.int8)
    if variant == "float ties":
        config = AuditConfig(dimensions=(1, 2, 4, 8), controls=99, anchor_ties="float")
    ours = run_audit(y, ids, fams, owners, groups, config, mask=mask)
    monkeypatch.setattr(audit_module, "_validate", _float64_validate)
    before = run_audit(y, ids, fams, owners, groups, config, mask=mask)
    assert ours.summary["eligible_pairs"] > 0
    for name, table in before.tables.items():
        assert _same(ours.tables[name], table), name
    assert ours.summary.keys() == before.summary.keys()
    for key, value in before.summary.items():
        assert _same(ours.summary[key], value), key



def _dif_inputs(n_models=300, n_items=500, seed=8):
    y, ids, fams, owners, groups = simulate(n_owners=n_models // 5, n_items=n_items, seed=seed)
    mask = np.random.default_rng(seed).random(y.shape) > 0.1
    return y, mask, np.asarray(owners, dtype=str), np.asarray(groups), np.searchsorted(sorted(set(fams)), fams)


@pytest.mark.parametrize("missing", [False, True])
def test_threaded_dif_passes_equal_the_serial_ones_bit_for_bit(missing, monkeypatch):
    """The working matrix, the spectral offsets and the held-out K losses on threads (large matrices) are the
    numbers of the one-thread passes: forced on a small matrix by lowering the threshold, two cores assumed."""
    y_all, mask, owners, groups, codes = _dif_inputs()
    y = np.where(mask, y_all, 0).astype(np.int8)[::2].T  # items x models, a transposed view as the audit has it
    obs = mask.astype(np.int8)[::2].T if missing else None
    own = owners[::2]

    def run():
        p, s = dif.item_rates(y, obs)
        w = dif.working(y, obs, p, s)
        anchors = np.arange(y.shape[0]) % 3 > 0
        order = np.argsort(codes[::2], kind="stable")
        sel = dif.select_dimension(y, obs, own, groups, (1, 2, 4, 8), owner_seed=3, svd_seed=3)
        return (w, dif.offsets_from_working(w, s, anchors, 3, 5), dif.offsets_from_working(w, s, anchors, 2, 6, order),
                dif.offsets_from_working(w, s, np.ones(y.shape[0], bool), 4, 7), sel.curve["mean_log_loss"],
                sel.curve["se"])

    monkeypatch.setattr(dif, "usable_cores", lambda cap=8: 2)
    monkeypatch.setattr(dif, "_THREADED_CELLS", 1 << 40)
    serial = run()
    monkeypatch.setattr(dif, "_THREADED_CELLS", 1000)
    threaded = run()
    for a, b in zip(serial, threaded, strict=True):
        assert _same(np.asarray(a), np.asarray(b))
    assert serial[0].flags.f_contiguous == threaded[0].flags.f_contiguous  # the same layout too


@pytest.mark.parametrize("power_iterations", ["float64", "float32"])
def test_randomized_svd_of_the_uncopied_working_matrix_is_the_copy_s(power_iterations, monkeypatch):
    """The first purification round passes the working matrix itself (F-ordered, as np.where makes it from the
    transposed responses) where it passed an all-anchor copy (C-ordered): the same factors, bit for bit."""
    if power_iterations == "float32":  # as at 5,000 x 14,000 (above dif.F32_SVD_CELLS)
        monkeypatch.setattr(dif, "F32_SVD_CELLS", 1)
    y_all, mask, *_ = _dif_inputs(n_models=400, n_items=700)
    y = y_all[::2].T
    p, s = dif.item_rates(y, None)
    w = dif.working(y, None, p, s)
    assert w.flags.f_contiguous and not w.flags.c_contiguous
    copy = w[np.ones(y.shape[0], dtype=bool)]
    assert copy.flags.c_contiguous
    for k in (1, 5):
        for a, b in zip(dif.randomized_svd(w, k, seed=2), dif.randomized_svd(copy, k, seed=2), strict=True):
            assert _same(a, b)


def _cell_groups(cells, selected):
    groups = [(np.flatnonzero(cells == c), int(selected[cells == c].sum())) for c in np.unique(cells)]
    return [(idx, idx.size, n_sel, idx.size / n_sel) for idx, n_sel in groups]


def _same_weights(a, b) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and a.flags.f_contiguous == b.flags.f_contiguous and bool(
        np.array_equal(a, b))


def test_vectorised_control_draws_are_rng_choice_s_draws():
    """The matched-random controls drawn for all replicates at once (Floyd's algorithm on the PCG64 stream) are
    ``rng.choice``'s, replicate by replicate and cell by cell: every weight, on 300 random blueprints (cells of
    one item, cells wholly selected, one selected item, up to 400 items)."""
    rng = np.random.default_rng(0)
    fast = 0
    for _ in range(300):
        n_items = int(rng.integers(1, 400))
        cells = np.array([f"c{v}" for v in rng.integers(0, int(rng.integers(1, 12)), n_items)])
        selected = np.zeros(n_items, dtype=bool)
        for c in np.unique(cells):
            idx = np.flatnonzero(cells == c)
            selected[rng.choice(idx, int(rng.integers(1, idx.size + 1)), replace=False)] = True
        r, seed = int(rng.integers(1, 300)), int(rng.integers(0, 10**6))
        groups = _cell_groups(cells, selected)
        loop = scoring._choice_weights(groups, r, seed, n_items)
        vectorised = scoring._floyd_weights(groups, r, seed, n_items)
        if vectorised is not None:
            fast += 1
            assert _same_weights(vectorised, loop)
        assert _same_weights(scoring.control_weights(cells, selected, r, seed), loop)
    assert fast >= 290  # a redraw (the loop's case) is rare at these sizes


def test_control_weights_fall_back_to_the_loop_on_a_redraw_or_another_numpy(monkeypatch):
    cells = np.array(["a"] * 9000 + ["b"] * 3000)
    selected = np.zeros(cells.size, dtype=bool)
    selected[:4500] = True
    selected[9000:10500] = True
    groups = _cell_groups(cells, selected)
    assert scoring._floyd_weights(groups, 50, 4, cells.size) is None  # a Lemire redraw in this stream (seed 4)
    loop = scoring._choice_weights(groups, 50, 4, cells.size)
    assert _same_weights(scoring.control_weights(cells, selected, 50, 4), loop)
    # a numpy whose choice drew otherwise: the first replicate differs, so the loop's weights are returned
    monkeypatch.setattr(scoring, "_floyd_weights", lambda g, r, s, n: np.ones((n, r), order="F"))
    loop = scoring._choice_weights(groups, 50, 2, cells.size)
    assert _same_weights(scoring.control_weights(cells, selected, 50, 2), loop)
