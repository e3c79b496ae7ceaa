"""slr.multihead: the multi-head simplified predictor (Eq. 31) and its stochastic PGD."""
import dataclasses

import jax
import numpy as np
import pytest

from slr import multihead as M
from slr.predictors import attention_erf


def test_one_head_is_attention_erf():
    X = jax.random.normal(jax.random.key(0), (4, 6, 9))
    k, v = jax.random.normal(jax.random.key(1), (2, 9))
    np.testing.assert_allclose(M.predict(X, k[None], v[None], 0.7), attention_erf(X, k, v, 0.7), atol=1e-13)


def test_heads_add_up():
    X = jax.random.normal(jax.random.key(2), (4, 6, 9))
    k, v = M.init_heads(jax.random.key(3), 9, 3)
    total = sum(attention_erf(X, k[h], v[h], 1.3) for h in range(3))
    np.testing.assert_allclose(M.predict(X, k, v, 1.3), total, atol=1e-13)


def test_init_heads_on_the_sphere():
    k, v = M.init_heads(jax.random.key(4), 12, 2)
    assert k.shape == v.shape == (2, 12)
    np.testing.assert_allclose(np.linalg.norm(k, axis=1), 1, atol=1e-14)
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1, atol=1e-14)


def test_lam_schedule_freezes():
    lam = np.asarray(M.lam_schedule(np.array([0, 100, 200, 1000]), 2.0, 1e-2, 200))
    np.testing.assert_allclose(lam, [2.0, 1.0, 2 / 3, 2 / 3])


def test_short_training_lowers_the_risk():
    cfg = dataclasses.replace(M.FIGURE_9, d=20, steps=2000, log_every=1000, reps=2, n_test=500, lr=5e-3)
    out = M.train(cfg)
    assert out["excess_risk"].shape == (2, 3) and out["kappa"].shape == (2, 3, 2, 2)
    assert np.all(out["excess_risk"][:, -1] < 0.7 * out["excess_risk"][:, 0])


def test_validation():
    X = np.zeros((3, 4, 5))
    with pytest.raises(ValueError, match="k and v"):
        M.predict(X, np.ones((2, 5)), np.ones((1, 5)), 1.0)
    with pytest.raises(ValueError, match="X must"):
        M.predict(X, np.ones((2, 6)), np.ones((2, 6)), 1.0)
    with pytest.raises(ValueError, match="lr must"):
        M.train(dataclasses.replace(M.FIGURE_9, lr=0.0))
    with pytest.raises(ValueError, match="steps must be a multiple"):
        M.train(dataclasses.replace(M.FIGURE_9, steps=1001))
    with pytest.raises(ValueError, match="d must"):
        M.init_heads(jax.random.key(0), 1, 2)
    with pytest.raises(ValueError, match="cfg must"):
        M.train(None)
