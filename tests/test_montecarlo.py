"""slr.montecarlo: the one Monte Carlo risk estimator, against the closed form of Prop. 15 (z-scores), on
and off the manifold; common random numbers; batching; the frame reduction; validation."""
import math

import jax
import numpy as np
import pytest

import slr  # noqa: F401  (float64)
from slr import montecarlo as MC, predictors as P, risk as R, task

G = math.sqrt(0.5)


def in_frame(kappa, nu, theta, eta, rho):
    """Unit k, v of R^4 with the five overlaps, in the frame (k*, v*, e3, e4) = the standard basis."""
    a = math.sqrt(1 - kappa ** 2 - eta ** 2)
    b = (rho - kappa * theta - eta * nu) / a
    return np.array([kappa, eta, a, 0.0]), np.array([theta, nu, b, math.sqrt(1 - theta ** 2 - nu ** 2 - b ** 2)])


POINTS = [(1.0 - 1e-12, 1.0, 0.0, 0.0, 0.0), (0.5, -0.3, 0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 0.0, 0.0),
          (0.5, 0.3, 0.6, -0.4, 0.2), (0.9, 0.2, 0.1, 0.2, 0.3), (-0.3, 0.6, -0.5, 0.1, -0.3)]


def test_against_prop15_on_and_off_manifold():
    d, L, eps, lams = 400, 10, 0.1, np.array([0.1, 1.0])
    K, V = map(np.stack, zip(*[in_frame(*p) for p in POINTS]))
    E = np.eye(4)
    m, s = MC.risk(jax.random.key(0), K, V, E[0], E[1], lam=lams, d=d, gamma=G, L=L, eps=eps, n=100_000)
    assert m.shape == s.shape == (len(POINTS), 2)
    exact = np.array([[float(R.risk(*p, lam=lam, gamma=G, d=d, L=L, eps=eps)) for lam in lams] for p in POINTS])
    z = (m - exact) / s
    assert np.max(np.abs(z)) < 4.5, z


def test_full_vectors_in_high_dimension_match_the_closed_form():
    """Vectors of R^300: the estimator builds the frame of span{k*, v*, k, v} itself."""
    d, L, eps, lam = 300, 5, 0.2, 0.3
    F = np.asarray(task.orthonormal_frame(jax.random.key(1), d, 4))
    k4, v4 = in_frame(*POINTS[3])
    m, s = MC.risk(jax.random.key(2), k4 @ F, v4 @ F, F[0], F[1], lam=lam, gamma=G, L=L, eps=eps, n=100_000)
    exact = float(R.risk(*POINTS[3], lam=lam, gamma=G, d=d, L=L, eps=eps))
    assert abs(m - exact) < 4 * s


def test_common_random_numbers():
    """Neighbouring lams share their samples: their difference is far more precise than each value."""
    E = np.eye(4)
    k, v = in_frame(*POINTS[3])
    errs = MC.squared_errors(jax.random.key(3), k, v, E[0], E[1], lam=[0.30, 0.31], d=100, gamma=G, L=5,
                             eps=0.1, n=20_000)
    assert errs.shape == (2, 20_000)
    mean, se = MC.mean_se(errs)
    dm, dse = MC.mean_se(errs[1] - errs[0])
    assert dse < 0.1 * se.min(), (dse, se)
    m2, s2 = MC.risk(jax.random.key(3), k, v, E[0], E[1], lam=[0.30, 0.31], d=100, gamma=G, L=5, eps=0.1,
                     n=20_000)
    np.testing.assert_allclose(m2, mean, rtol=1e-12)
    np.testing.assert_allclose(s2, se, rtol=1e-9)


def test_batch_equals_separate_calls():
    E = np.eye(4)
    K, V = map(np.stack, zip(*[in_frame(*p) for p in POINTS[:3]]))
    kw = dict(lam=np.array([[0.2], [0.5]]), d=50, gamma=G, L=4, eps=0.1, n=5_000, chunk=2_000)
    m, s = MC.risk(jax.random.key(4), K, V, E[0], E[1], **kw)
    assert m.shape == (3, 2, 1)
    for i in range(3):
        mi, si = MC.risk(jax.random.key(4), K[i], V[i], E[0], E[1], **kw)
        np.testing.assert_array_equal(mi, m[i])
        np.testing.assert_array_equal(si, s[i])
    # the same key gives the same draws whatever the predictor: argmax at the oracle reaches eps^2 exactly
    errs = MC.squared_errors(jax.random.key(4), E[0], E[1], E[0], E[1], lam=1.0, d=50, gamma=G, L=4, eps=0.1,
                             n=5_000, predictor="argmax")
    assert errs.shape == (5_000,)


def test_multihead_points_and_multiple_locations():
    """Eq. (31) heads on the task of Eq. (30): two heads at the two oracles beat the null risk
    2 gamma^2 + eps^2 and swapped values, and one head (H = 1) is Eq. (3)."""
    d, L = 80, 10
    Fr = np.asarray(task.orthonormal_frame(jax.random.key(5), d, 4))
    ks, vs = Fr[:2], Fr[2:]
    m, s = MC.risk(jax.random.key(6), np.stack([ks, ks]), np.stack([vs, vs[::-1]]), ks, vs, lam=[0.1], gamma=G,
                   L=L, eps=0.1, n=20_000, predictor="multihead")
    assert m.shape == (2, 1) and m[0, 0] + 4 * s[0, 0] < 2 * G ** 2 + 0.01 < m[1, 0]
    e = np.eye(2)
    m1, _ = MC.risk(jax.random.key(7), e[0][None], e[1][None], e[0], e[1], lam=0.3, d=d, gamma=G, L=L,
                    eps=0.1, n=20_000, predictor="multihead")
    m2, _ = MC.risk(jax.random.key(7), e[0], e[1], e[0], e[1], lam=0.3, d=d, gamma=G, L=L, eps=0.1, n=20_000)
    assert m1 == pytest.approx(m2, rel=1e-12)


def test_bayes_predictor_needs_the_full_draw():
    """E[Y | X] reads |X_l|^2: with reduce=False its risk is near eps^2 at d = 32 (and below erf's)."""
    d, L, eps = 32, 10, 0.1
    ks, vs = task.sample_oracle(jax.random.key(0), d)
    bayes = lambda X, k, v, lam: P.bayes(X, k, v, gamma=G)
    m, s = MC.risk(jax.random.key(1), ks, vs, ks, vs, lam=1.0, gamma=G, L=L, eps=eps, n=20_000,
                   predictor=bayes, reduce=False)
    assert eps ** 2 - 4 * s < m < 1.2 * eps ** 2
    with pytest.raises(ValueError, match="d"):
        MC.risk(jax.random.key(1), ks, vs, ks, vs, lam=1.0, d=64, gamma=G, L=L, n=10, reduce=False)


@pytest.mark.parametrize("kw,name", [({"lam": 0.0}, "lam"), ({"lam": [0.1, np.nan]}, "lam"),
                                     ({"gamma": -1.0}, "gamma"), ({"eps": -0.1}, "eps"), ({"n": 0}, "n"),
                                     ({"L": 0}, "L"), ({"d": 3}, "d"), ({"chunk": 1.5}, "chunk"),
                                     ({"predictor": "gelu"}, "activation"), ({"k": np.ones(4)}, "k"),
                                     ({"v_star": np.eye(4)[0]}, "v_star")])
def test_validation(kw, name):
    E = np.eye(4)
    args = dict(k=E[2], v=E[3], k_star=E[0], v_star=E[1], lam=0.5, gamma=G, L=3, eps=0.0, n=10, d=100)
    args.update(kw)
    key_args = [args.pop(a) for a in ("k", "v", "k_star", "v_star")]
    with pytest.raises(ValueError, match=name):
        MC.risk(jax.random.key(0), *key_args, **args)


def test_risk_at_overlaps_is_risk_at_the_frame_vectors():
    from slr.overlaps import oracle_frame_vectors
    pts = [(1.0, 1.0, 0.0, 0.0, 0.0), (0.5, 0.3, 0.6, -0.4, 0.2)]
    kw = dict(lam=np.array([0.1, 0.3]), d=400, gamma=math.sqrt(0.5), L=5, eps=0.1, n=2000)
    got = MC.risk_at_overlaps(jax.random.key(0), pts, **kw)
    K, V = map(np.stack, zip(*[oracle_frame_vectors(*p) for p in pts]))
    ref = MC.risk(jax.random.key(0), K, V, np.eye(4)[0], np.eye(4)[1], **kw)
    assert got[0].shape == (2, 2)
    np.testing.assert_array_equal(got[0], ref[0])
    np.testing.assert_array_equal(got[1], ref[1])
    # another predictor: the same vectors, the predictor passed through (ReLU differs from erf)
    got = MC.risk_at_overlaps(jax.random.key(0), pts, predictor="relu", **kw)
    ref = MC.risk(jax.random.key(0), K, V, np.eye(4)[0], np.eye(4)[1], predictor="relu", **kw)
    np.testing.assert_array_equal(got[0], ref[0])
    assert np.all(np.abs(got[0] - MC.risk_at_overlaps(jax.random.key(0), pts, **kw)[0]) > 1e-3)


def test_least_squares_recovers_proposition_3():
    # d = 4, L = 3: the fitted weights are within 5 standard errors of c_l v*, the test MSE within
    # 4 standard errors of the optimal linear risk (plus the small estimation excess).
    g = math.sqrt(0.5)
    ks, vs = task.sample_oracle(jax.random.key(0), 4)
    W, W_se, mse, se = MC.least_squares(3, ks, vs, L=3, gamma=g, eps=0.3, n_train=20_000, n_test=20_000)
    assert W.shape == W_se.shape == (3, 4)
    assert np.max(np.abs(W - np.asarray(R.linear_weights(vs, gamma=g, L=3))) / W_se) < 5
    assert abs(mse - R.linear_risk(gamma=g, L=3, eps=0.3)) < 4 * se + 0.01
    # robust=True: the same fit, with the HC0 errors of sandwich_cov on the same training draw, key(3)
    W2, W2_se, mse2, se2 = MC.least_squares(3, ks, vs, L=3, gamma=g, eps=0.3, n_train=20_000,
                                            n_test=20_000, robust=True)
    np.testing.assert_array_equal(W2, W)
    assert (mse2, se2) == (mse, se)
    X, y, _ = task.sample(jax.random.key(3), 20_000, ks, vs, L=3, gamma=g, eps=0.3)
    X, y = np.asarray(X).reshape(20_000, -1), np.asarray(y)
    hc0 = np.sqrt(np.diag(MC.sandwich_cov(X, y - X @ W.ravel()))).reshape(3, 4)
    np.testing.assert_allclose(W2_se, hc0, rtol=1e-10)
    assert np.max(np.abs(W2_se / W_se - 1)) > 1e-3  # control: not the textbook errors


def test_linear_attention_closed_form_oracle_risk():
    """Linear attention at (k*, v*): R = eps^2 + gamma^2 (1 - lam c)^2 + lam^2 gamma^4 + (L-1) lam^2
    with c = sqrt(d/2) (condition on J0: the informative token contributes gamma Z2 (1 - lam c - lam gamma Z1),
    each noise token lam A B with A, B independent standard normals; all terms uncorrelated)."""
    d, L, eps, lam = 50, 6, 0.1, 0.1
    c = math.sqrt(d / 2)
    e = np.eye(2)
    m, s = MC.risk(jax.random.key(0), e[0], e[1], e[0], e[1], lam=[lam], d=d, gamma=G, L=L, eps=eps,
                   n=200_000, predictor="linear")
    exact = eps ** 2 + G ** 2 * (1 - lam * c) ** 2 + lam ** 2 * G ** 4 + (L - 1) * lam ** 2
    assert exact == pytest.approx(R.linear_attention_risk(lam=lam, gamma=G, d=d, L=L, eps=eps), rel=1e-14)
    assert abs(m[0] - exact) < 5 * s[0]


def test_relu_full_vectors_match_the_frame():
    d, L, eps = 100, 5, 0.1
    ks, vs = task.sample_oracle(jax.random.key(1), d)
    mc, se = MC.risk(jax.random.key(2), ks, vs, ks, vs, lam=0.2, gamma=G, L=L, eps=eps, n=100_000,
                     predictor=P.attention_relu)
    e = np.eye(2)
    m2, s2 = MC.risk(jax.random.key(3), e[0], e[1], e[0], e[1], lam=[0.2], d=d, gamma=G, L=L, eps=eps,
                     n=100_000, predictor="relu")
    assert abs(mc - m2[0]) < 5 * math.hypot(se, s2[0])


def test_draws_compiled_once_for_every_predictor_and_grid(traced):
    """The random-number program of a chunk depends on its shape only: other predictors, lam grids
    and points reuse it (the jitted draws of montecarlo), and the numbers are those of one program."""
    from slr import montecarlo as mc
    e1, e2 = np.eye(2)
    args = dict(d=40, gamma=0.7, L=3, n=1234)
    mc.risk(jax.random.key(0), e1, e2, e1, e2, lam=[0.1, 0.2], predictor="erf", **args)
    assert "_draws" in traced  # control: the first call traces the draws (the listener sees them)
    traced.clear()
    a = mc.risk(jax.random.key(1), e1, e2, e1, e2, lam=0.3, predictor="relu", **args)
    b = mc.risk(jax.random.key(1), np.stack([e1, e2]), np.stack([e2, e1]), e1, e2, lam=[0.3, 0.5],
                predictor="relu", **args)
    assert "_draws" not in traced and "_errors" in traced  # the relu errors traced, the draws reused
    np.testing.assert_allclose(b[0][0, 0], a[0], rtol=1e-14)


def test_sandwich_cov_against_the_closed_form_and_a_simulation():
    # y = e on two independent N(0, 1) features (true weights 0). Homoscedastic e = z: the HC0
    # variance of each weight is 1/n, the textbook one's value. Heteroscedastic e = x1 z: HC0 gives
    # E[x1^4] / n = 3/n for the first weight and 1/n for the second, while the textbook formula,
    # s^2 (X^T X)^-1, still gives 1/n for both (the control: it misses the factor sqrt 3).
    rng = np.random.default_rng(0)
    n = 20_000
    X, z = rng.standard_normal((n, 2)), rng.standard_normal(n)
    for e, want in [(z, [1.0, 1.0]), (X[:, 0] * z, [math.sqrt(3), 1.0])]:
        W = np.linalg.solve(X.T @ X, X.T @ e)
        r = e - X @ W
        se = np.sqrt(np.diag(MC.sandwich_cov(X, r))) * math.sqrt(n)
        textbook = np.sqrt(np.mean(r ** 2) * np.diag(np.linalg.inv(X.T @ X))) * math.sqrt(n)
        np.testing.assert_allclose(se, want, rtol=0.1)
        np.testing.assert_allclose(textbook, [1.0, 1.0], rtol=0.1)
    assert abs(textbook[0] / math.sqrt(3) - 1) > 0.3            # the control fails
    # a simulation: the spread of the first weight over 400 heteroscedastic fits (n = 1000) is the
    # mean HC0 standard error, not the textbook one
    W1, se1 = [], []
    for _ in range(400):
        X, z = rng.standard_normal((1000, 2)), rng.standard_normal(1000)
        e = X[:, 0] * z
        W = np.linalg.solve(X.T @ X, X.T @ e)
        W1.append(W[0])
        se1.append(math.sqrt(MC.sandwich_cov(X, e - X @ W)[0, 0]))
    assert abs(np.std(W1) / np.mean(se1) - 1) < 0.12
    assert abs(np.std(W1) * math.sqrt(1000 / 3) - 1) < 0.12


@pytest.mark.parametrize("X,e,match", [(np.ones(5), np.ones(5), "X"), (np.ones((2, 3)), np.ones(2), "X"),
                                       (np.ones((5, 2)), np.ones(4), "residuals"),
                                       (np.ones((5, 2)), np.array([1, 1, np.nan, 1, 1]), "finite")])
def test_sandwich_cov_validation(X, e, match):
    with pytest.raises(ValueError, match=match):
        MC.sandwich_cov(X, e)


def test_multihead_oracle_sq_errors_rows_angles_and_jit():
    """One draw for every row (a row alone equals the same row in a batch of noises), exactly the
    standard frame at 90 degrees, the keys' angle read from phi_deg, and the same numbers under jit."""
    kw = dict(lam=0.3, gamma=G, d=80, L=10, eps=0.1)
    key = jax.random.key(4)
    both = np.asarray(MC.multihead_oracle_sq_errors(key, 1000, shared_noise=(False, True), **kw))
    assert both.shape == (2, 1000)
    for i, shared in enumerate((False, True)):
        one = MC.multihead_oracle_sq_errors(key, 1000, shared_noise=(shared,), **kw)
        np.testing.assert_array_equal(np.asarray(one)[0], both[i])
    assert not np.array_equal(both[0], both[1])
    e = np.eye(4)                                           # 90 degrees: k*_h = e_h, v*_h = e_{2+h}
    X, y, _ = task.assemble(task.draws(key, 1000, L=10, d=4, H=2), e[:2], e[2:], gamma=G, eps=0.1, d=80)
    np.testing.assert_array_equal(both[0], np.square(y - P.attention_multihead(X, e[:2], e[2:], 0.3)))
    c = math.cos(math.radians(60.0))
    ks = np.array([[1.0, 0, 0, 0], [c, math.sqrt(1 - c * c), 0, 0]])
    X, y, _ = task.assemble(task.draws(key, 1000, L=10, d=4, H=2), ks, e[2:], gamma=G, eps=0.1, d=80)
    np.testing.assert_allclose(MC.multihead_oracle_sq_errors(key, 1000, phi_deg=60.0, **kw)[0],
                               np.square(y - P.attention_multihead(X, ks, e[2:], 0.3)), rtol=1e-12)
    f = jax.jit(lambda k, lam, m: MC.multihead_oracle_sq_errors(
        k, m, lam=lam, gamma=G, d=80, L=10, eps=0.1, shared_noise=(False, True)), static_argnames="m")
    np.testing.assert_allclose(f(key, 0.3, m=1000), both, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("kw, match", [
    (dict(m=0), "m"), (dict(lam=-0.1), "lam"), (dict(gamma=0.0), "gamma"), (dict(eps=-1.0), "eps"),
    (dict(d=3), "d"), (dict(L=1), "L"), (dict(phi_deg=0.0), "phi_deg"), (dict(phi_deg=200), "phi_deg"),
    (dict(shared_noise=()), "shared_noise"), (dict(shared_noise=True), "shared_noise"),
    (dict(shared_noise=(0,)), "shared_noise"), (dict(key=3), "key")])
def test_multihead_oracle_sq_errors_validation(kw, match):
    args = dict(key=jax.random.key(0), m=10, lam=0.3, gamma=G, d=80, L=10) | kw
    with pytest.raises(ValueError, match=match):
        MC.multihead_oracle_sq_errors(args.pop("key"), args.pop("m"), **args)
