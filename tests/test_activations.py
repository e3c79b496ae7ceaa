import math

import jax
import numpy as np
import pytest

from slr import activations as A, montecarlo as MC, predictors, risk, task

GAMMA = math.sqrt(0.5)


def _data(d=12, L=5, n=64):
    ks, vs = task.sample_oracle(jax.random.key(0), d)
    X, y, _ = task.sample(jax.random.key(1), n, ks, vs, L=L, gamma=GAMMA, eps=0.1)
    return ks, vs, X, y


def test_erf_and_softmax_are_the_paper_predictors():
    ks, vs, X, _ = _data()
    k, v = task.sample_oracle(jax.random.key(3), ks.shape[0])
    np.testing.assert_allclose(A.PREDICTORS["erf"](X, k, v, 0.7), predictors.attention_erf(X, k, v, 0.7), rtol=1e-13)
    np.testing.assert_allclose(A.PREDICTORS["softmax"](X, k, v, 0.7), predictors.attention_softmax(X, k, v, 0.7), rtol=1e-13)


def test_sigmoid_matches_erf_slope_and_range():
    x = np.linspace(-1e-4, 1e-4, 3)
    X = np.stack([x, np.ones(3)], axis=-1)[None]  # L=3 tokens, d=2
    k, v = np.array([1.0, 0.0]), np.array([0.0, 1.0])
    out = float(A.attention_sigmoid(X, k, v, 1.0)[0])
    np.testing.assert_allclose(out, 0.0, atol=1e-12)
    big = float(A.attention_sigmoid(np.array([[[50.0, 1.0]]]), k, v, 1.0)[0])
    assert abs(big - 1.0) < 1e-12


def test_linear_closed_form_oracle_risk():
    """Linear attention at (k*, v*): R = eps^2 + gamma^2 (1 - lam c)^2 + lam^2 gamma^4 + (L-1) lam^2."""
    d, L, eps, lam = 50, 6, 0.1, 0.1
    c = math.sqrt(d / 2)
    e = np.eye(2)
    m, s = MC.risk(jax.random.key(0), e[0], e[1], e[0], e[1], lam=[lam], d=d, gamma=GAMMA, L=L, eps=eps,
                   n=200_000, predictor="linear")
    exact = eps ** 2 + GAMMA ** 2 * (1 - lam * c) ** 2 + lam ** 2 * GAMMA ** 4 + (L - 1) * lam ** 2
    assert exact == pytest.approx(risk.linear_attention_risk(lam=lam, gamma=GAMMA, d=d, L=L, eps=eps), rel=1e-14)
    assert abs(m[0] - exact) < 5 * s[0]


def test_oracle_curve_agrees_with_closed_form_and_full_vectors():
    d, L, eps = 100, 5, 0.1
    e = np.eye(2)
    m, s = MC.risk(jax.random.key(0), e[0], e[1], e[0], e[1], lam=[0.2], d=d, gamma=GAMMA, L=L, eps=eps,
                   n=100_000)
    exact = float(risk.oracle_risk(lam=0.2, gamma=GAMMA, d=d, L=L, eps=eps))
    assert abs(m[0] - exact) < 5 * s[0]
    ks, vs = task.sample_oracle(jax.random.key(1), d)
    mc, se = MC.risk(jax.random.key(2), ks, vs, ks, vs, lam=0.2, gamma=GAMMA, L=L, eps=eps, n=100_000,
                     predictor=A.attention_relu)
    m2, s2 = MC.risk(jax.random.key(3), e[0], e[1], e[0], e[1], lam=[0.2], d=d, gamma=GAMMA, L=L, eps=eps,
                     n=100_000, predictor="relu")
    assert abs(mc - m2[0]) < 5 * math.hypot(se, s2[0])


def test_trainer_lowers_the_risk():
    d, L = 20, 5
    ks, vs = task.sample_oracle(jax.random.key(0), d)
    out = A.train_pgd(jax.random.key(1), "softmax", ks, vs, lam=1.0, gamma=GAMMA, L=L, eps=0.1, lr=0.05,
                      steps=200, batch=32, repeats=2, record_every=20)
    assert out["kappa"].shape == (2, 10) and out["k"].shape == (2, d)
    np.testing.assert_allclose(np.linalg.norm(out["k"], axis=-1), 1.0, rtol=1e-12)
    assert np.all(out["loss"][:, -3:].mean(1) < 0.7 * out["loss"][:, :3].mean(1))


@pytest.mark.parametrize("kwargs,name", [
    ({"lam": -1.0}, "lam"), ({"lr": 0.0}, "lr"), ({"steps": 0}, "steps"), ({"batch": 2.5}, "batch"),
    ({"L": 0}, "L"), ({"gamma": -1.0}, "gamma"), ({"record_every": 3}, "steps"),
])
def test_trainer_validates(kwargs, name):
    ks, vs = task.sample_oracle(jax.random.key(0), 8)
    args = dict(lam=1.0, gamma=GAMMA, L=4, eps=0.0, lr=0.1, steps=10, batch=4, repeats=1, record_every=1)
    args.update(kwargs)
    with pytest.raises(ValueError, match=name):
        A.train_pgd(jax.random.key(1), "erf", ks, vs, **args)


def test_unknown_activation_and_bad_lams():
    with pytest.raises(ValueError, match="activation"):
        A.get_predictor("gelu")
    e = np.eye(2)
    with pytest.raises(ValueError, match="lam"):
        MC.risk(jax.random.key(0), e[0], e[1], e[0], e[1], lam=[0.1, -1.0], d=10, gamma=1.0, L=3, n=10)
