"""slr.multihead: Figure 9's configuration, trained by slr.sgd.train."""
import dataclasses
import math

import jax
import numpy as np
import pytest

from slr import multihead as M, task

# 1000 steps: the excess risk falls to 0.06 and 0.04 of its start there (seed 0; 0.056 and 0.038 after
# 2000 steps), far below the 0.7 that test_short_training_lowers_the_risk asks
SMALL = dataclasses.replace(M.SHORT_SCHEDULE, d=20, steps=1000, log_every=500, repeats=2, n_test=500, alpha=5e-3)


def test_short_training_lowers_the_risk():
    out = M.train(SMALL)
    assert out.excess_risk.shape == (2, 3) and out.kappa.shape == (2, 3, 2, 2) and out.k.shape == (2, 2, 20)
    assert np.all(out.excess_risk[:, -1] < 0.7 * out.excess_risk[:, 0])
    # lambda_t = 2 / (1 + 3e-4 min(t, 10000)) at the logged steps 0, 500, 1000 (the short schedule)
    np.testing.assert_allclose(out.lam, [2.0, 2 / 1.15, 2 / 1.3])


def test_given_oracles_one_per_run():
    # only the start is read: 2 steps logged at 0, 1, 2 (the shapes of SMALL's three logs) instead of 1000
    ks, vs = task.oracle_at_angle(jax.random.key(1), 20, np.deg2rad([90.0, 30.0]))
    out = M.train(dataclasses.replace(SMALL, steps=2, log_every=1), oracles=(ks, vs))
    # the logged overlaps are against the given oracles: the start is random, |kappa| ~ 1/sqrt(d)
    assert out.kappa.shape == (2, 3, 2, 2) and np.all(np.abs(out.kappa[:, 0]) < 4 / math.sqrt(20))


def test_validation():
    with pytest.raises(ValueError, match="cfg must"):
        M.train(None)
    with pytest.raises(ValueError, match="alpha"):
        M.train(dataclasses.replace(SMALL, alpha=0.0))
    with pytest.raises(ValueError, match="k_stars"):
        ks, vs = task.sample_oracle_multi(jax.random.key(0), 20, 2)
        M.train(SMALL, oracles=(ks[None].repeat(3, 0), vs[None].repeat(3, 0)))


def test_end_states_of_the_authors_finals():
    """The rule reads the authors' 20 printed finals as 5 separated, 10 collapsed, 4 without alignment
    and 1 mixed (their run 12: heads at 0.43 / 0.39 on different keys, 0.21 / 0.22 on the others)."""
    s = M.end_states(M.AUTHORS_FIG9_FINALS)
    assert np.bincount(s, minlength=4).tolist() == [5, 10, 4, 1] and s[11] == 3
    # the rule is symmetric in the heads and in the locations
    assert np.array_equal(M.end_states(M.AUTHORS_FIG9_FINALS[:, ::-1]), s)
    assert np.array_equal(M.end_states(M.AUTHORS_FIG9_FINALS[:, :, ::-1]), s)
    assert M.end_states(np.array([[0.5, 0.1], [0.1, 0.5]])) == 0
    assert M.end_states(np.array([[0.5, 0.1], [0.5, 0.1]])) == 1
    assert M.end_states(np.array([[0.4, 0.4], [0.4, 0.4]])) == 3
    with pytest.raises(ValueError, match="kappa"):
        M.end_states(np.zeros((3, 2)))


def test_config_validation():
    with pytest.raises(ValueError, match="token_noise"):
        dataclasses.replace(M.AUTHORS, token_noise="tied").validate()
    with pytest.raises(ValueError, match="sampler"):
        dataclasses.replace(M.AUTHORS, sampler="fast").validate()
    with pytest.raises(ValueError, match="lam_freeze"):
        dataclasses.replace(M.AUTHORS, lam_freeze=-1).validate()


def test_end_state_splits_the_mixed_runs():
    """The five end states: end_states' separated, collapsed and without alignment unchanged; its mixed
    runs split into symmetric (all four |kappa| >= ALIGNED) and other mixed. The authors' one mixed run
    (heads at 0.43 / 0.39 on different keys, 0.21 / 0.22 on the others) is other mixed, not symmetric."""
    s4, s5 = M.end_states(M.AUTHORS_FIG9_FINALS), M.end_state(M.AUTHORS_FIG9_FINALS)
    assert np.bincount(s5, minlength=5).tolist() == [5, 10, 4, 0, 1] and s5[11] == 4
    assert np.array_equal(s5[s4 < 3], s4[s4 < 3]) and len(M.STATES) == 5
    sym = np.array([[0.4, -0.35], [0.3, 0.5]])                # every overlap at least ALIGNED = 0.3
    assert M.end_state(sym) == 3 and M.end_states(sym) == 3
    # control: one overlap just below ALIGNED makes the same run other mixed
    assert M.end_state(np.array([[0.4, -0.35], [0.29, 0.5]])) == 4
    # signs and the order of heads and keys do not matter; batched shapes are kept
    assert np.array_equal(M.end_state(-M.AUTHORS_FIG9_FINALS[:, ::-1, ::-1]), s5)
    assert M.end_state(np.stack([sym, sym[::-1]])[None]).shape == (1, 2)
    with pytest.raises(ValueError, match="kappa"):
        M.end_state(np.zeros((4, 3, 2)))
