"""slr.predictors: Eq. (1), (2), (3) on hand-made examples, their limits and batching."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import slr  # noqa: F401  (float64)
from slr import predictors as P, task


def test_erf_predictor_hand_example():
    X = np.array([[1.0, 0.0, 2.0],
                  [0.0, 3.0, -1.0]])  # L = 2, d = 3
    k = np.array([1.0, 0.0, 0.0])
    v = np.array([0.0, 0.0, 1.0])
    lam = 0.5
    # token 1: erf(0.5 * 1) * 2 ; token 2: erf(0) * (-1) = 0
    expected = math.erf(0.5) * 2.0
    assert float(P.attention_erf(X, k, v, lam)) == pytest.approx(expected, abs=1e-15)
    v2 = np.array([0.0, 1.0, 0.0])
    k2 = np.array([0.0, 0.6, 0.8])
    # token 1: erf(lam * 1.6) * 0 ; token 2: erf(lam * (1.8 - 0.8)) * 3
    assert float(P.attention_erf(X, k2, v2, lam)) == pytest.approx(3.0 * math.erf(0.5), abs=1e-15)


def test_softmax_and_argmax_hand_example():
    X = np.array([[1.0, 0.0], [2.0, 1.0], [0.0, 5.0]])
    k = np.array([1.0, 0.0])
    v = np.array([0.0, 1.0])
    s = np.array([1.0, 2.0, 0.0])
    w = np.exp(0.7 * s) / np.exp(0.7 * s).sum()
    assert float(P.attention_softmax(X, k, v, 0.7)) == pytest.approx(float(w @ np.array([0.0, 1.0, 5.0])), abs=1e-15)
    assert float(P.oracle_argmax(X, k, v)) == 1.0


def test_softmax_tends_to_argmax():
    ks, vs = task.sample_oracle(jax.random.key(0), 10)
    X, _, _ = task.sample(jax.random.key(1), 500, ks, vs, L=6, gamma=math.sqrt(0.5))
    target = np.asarray(P.oracle_argmax(X, ks, vs))
    gaps = [float(np.max(np.abs(np.asarray(P.attention_softmax(X, ks, vs, lam)) - target)))
            for lam in (1.0, 10.0, 1e3, 1e6)]
    assert gaps[-1] < 1e-6
    assert gaps[0] > gaps[-1]
    # softmax is a convex combination: within the range of the X_l^T v
    Xv = np.asarray(X @ vs)
    out = np.asarray(P.attention_softmax(X, ks, vs, 0.3))
    assert np.all(out <= Xv.max(-1) + 1e-12) and np.all(out >= Xv.min(-1) - 1e-12)


def test_erf_large_lam_is_sign_weighting():
    ks, vs = task.sample_oracle(jax.random.key(0), 10)
    X, _, _ = task.sample(jax.random.key(1), 200, ks, vs, L=6, gamma=1.0)
    X = np.asarray(X)
    expected = np.sum(np.sign(X @ np.asarray(ks)) * (X @ np.asarray(vs)), axis=-1)
    np.testing.assert_allclose(P.attention_erf(X, ks, vs, 1e8), expected, atol=1e-6)


@pytest.mark.parametrize("fn", [P.attention_erf, P.attention_softmax,
                                lambda X, k, v, lam: P.oracle_argmax(X, k, v)])
def test_batching_over_leading_axes(fn):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((3, 4, 5, 6))  # (..., L, d)
    k, v = rng.standard_normal(6), rng.standard_normal(6)
    out = np.asarray(fn(X, k, v, 0.8))
    assert out.shape == (3, 4)
    for i in range(3):
        for j in range(4):
            assert out[i, j] == pytest.approx(float(fn(X[i, j], k, v, 0.8)), abs=1e-13)
    assert np.asarray(fn(X[0, 0], k, v, 0.8)).shape == ()


def test_jit_and_grad():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((7, 4, 3))
    k, v = rng.standard_normal(3), rng.standard_normal(3)
    f = jax.jit(lambda k: jnp.sum(P.attention_erf(X, k, v, 0.5)))
    g = jax.grad(f)(jnp.asarray(k))
    h = 1e-6
    fd = [(float(f(k + h * e)) - float(f(k - h * e))) / (2 * h) for e in np.eye(3)]
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8)
