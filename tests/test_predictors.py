"""slr.predictors: Eq. (1), (2), (3) on hand-made examples, their limits and batching."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

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


ALL = sorted(P.PREDICTORS)


@settings(max_examples=25, deadline=None, database=None)
@given(lam=st.one_of(st.floats(max_value=0.0, allow_nan=False), st.just(float("nan")), st.just(float("inf")),
                     st.just(-float("inf"))), name=st.sampled_from(ALL), as_array=st.booleans())
def test_hyp_every_predictor_refuses_bad_lam(lam, name, as_array):
    X = np.ones((2, 3, 4))
    k = np.eye(4)[:1] if name == "multihead" else np.eye(4)[0]
    v = np.eye(4)[1:2] if name == "multihead" else np.eye(4)[1]
    lam = np.array([0.5, lam]) if as_array else lam
    with pytest.raises(ValueError, match=r"\blam\b"):
        P.PREDICTORS[name](X, k, v, lam)


@pytest.mark.parametrize("name", ALL)
def test_every_predictor_is_traceable(name):
    rng = np.random.default_rng(2)
    X = rng.standard_normal((5, 3, 4))
    k = np.eye(4)[:2] if name == "multihead" else np.eye(4)[0]
    v = np.eye(4)[2:] if name == "multihead" else np.eye(4)[1]
    f = P.get_predictor(name)
    out = jax.jit(lambda lam: f(X, k, v, lam))(0.7)
    np.testing.assert_allclose(out, f(X, k, v, 0.7), rtol=1e-13, atol=1e-15)
    jax.grad(lambda lam: jnp.sum(f(X, k, v, lam)))(0.7)
    assert P.get_predictor(f) is f
    with pytest.raises(ValueError, match="activation"):
        P.get_predictor("gelu")


def test_multihead_sums_heads():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((6, 5, 4))
    K, V = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    total = sum(P.attention_erf(X, K[h], V[h], 0.4) for h in range(3))
    np.testing.assert_allclose(P.attention_multihead(X, K, V, 0.4), total, rtol=1e-12)


def test_bayes_is_the_posterior_mean():
    """gamma = 1: E[Y|X] is Eq. (2) at lam = sqrt(d/2); in general it beats the erf oracle on samples and
    equals the brute-force posterior mean computed from the Gaussian densities."""
    d, L = 8, 5
    ks, vs = task.sample_oracle(jax.random.key(0), d)
    X, y, _ = task.sample(jax.random.key(1), 4000, ks, vs, L=L, gamma=1.0, eps=0.1)
    np.testing.assert_allclose(P.bayes(X, ks, vs, gamma=1.0), P.attention_softmax(X, ks, vs, math.sqrt(d / 2)),
                               rtol=1e-12, atol=1e-14)
    g = 0.6
    X, y, _ = task.sample(jax.random.key(2), 4000, ks, vs, L=L, gamma=g, eps=0.1)
    X, ks_, vs_ = np.asarray(X), np.asarray(ks), np.asarray(vs)
    mu = math.sqrt(d / 2) * ks_
    logpost = (-np.sum((X - mu) ** 2, -1) / (2 * g ** 2) - d * math.log(g) + np.sum(X ** 2, -1) / 2)
    w = np.exp(logpost - logpost.max(-1, keepdims=True))
    brute = np.sum(w / w.sum(-1, keepdims=True) * (X @ vs_), -1)
    np.testing.assert_allclose(P.bayes(X, ks, vs, gamma=g), brute, rtol=1e-10, atol=1e-12)
    y = np.asarray(y)
    assert np.mean((y - P.bayes(X, ks, vs, gamma=g)) ** 2) < np.mean((y - P.attention_erf(X, ks, vs, 0.5)) ** 2)
    with pytest.raises(ValueError, match="gamma"):
        P.bayes(X, ks, vs, gamma=0.0)


def test_attention_layer_hand_example_and_cls_row():
    # One query attending to two tokens of R^2 with identity projections: weights softmax(lam q.x_l).
    q, H = jnp.array([[1.0, 0.0]]), jnp.array([[2.0, 1.0], [0.0, 3.0]])
    eye = jnp.eye(2)
    out = P.attention_layer(q, H, eye, eye, eye, eye, 0.5)
    w = np.exp([1.0, 0.0]) / np.exp([1.0, 0.0]).sum()
    np.testing.assert_allclose(np.asarray(out)[0], w @ np.asarray(H), rtol=1e-14)
    # Eq. (5) with p = o = 1: the [CLS] row is the softmax predictor at lam c.q
    rng = np.random.default_rng(0)
    X = jnp.asarray(rng.standard_normal((7, 5, 6)))
    c, k, v = (jnp.asarray(rng.standard_normal(6)) for _ in range(3))
    cls = P.attention_layer(jnp.broadcast_to(c, (7, 1, 6)), X, c[:, None], k[:, None], v[:, None],
                            jnp.ones((1, 1)), 0.3)[:, 0, 0]
    np.testing.assert_allclose(cls, P.attention_softmax(X, k, v, 0.3 * float(c @ c)), atol=1e-12)


def test_sigmoid_matches_erf_slope_and_range():
    """tanh(2x/sqrt(pi)): 0 at 0 and saturating at 1, like erf."""
    x = np.linspace(-1e-4, 1e-4, 3)
    X = np.stack([x, np.ones(3)], axis=-1)[None]  # L=3 tokens, d=2
    k, v = np.array([1.0, 0.0]), np.array([0.0, 1.0])
    np.testing.assert_allclose(float(P.attention_sigmoid(X, k, v, 1.0)[0]), 0.0, atol=1e-12)
    assert abs(float(P.attention_sigmoid(np.array([[[50.0, 1.0]]]), k, v, 1.0)[0]) - 1.0) < 1e-12


def test_unknown_activation():
    with pytest.raises(ValueError, match="activation"):
        P.get_predictor("gelu")
