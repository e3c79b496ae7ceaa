"""slr.risk: closed forms (Prop. 15, Theorem 1, Prop. 3, affine predictors, linear attention) against
Monte Carlo (slr.montecarlo), quadrature, finite differences and least squares."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import slr  # noqa: F401  (float64)
from slr import gaussian as G, montecarlo as MC, predictors, risk as R, task

G_HALF = math.sqrt(0.5)

# (lam, gamma, d, L, eps): the paper's (lam = 0.1 and 1 at d = 400, L = 10), varied sets, a small-d one.
PARAM_SETS = [
    (0.1, G_HALF, 400, 10, 0.1),
    (1.0, G_HALF, 400, 10, 0.1),
    (0.5, 1.0, 50, 5, 0.3),
    (2.0, 0.5, 20, 3, 0.0),
    (0.3, 1.5, 100, 20, 0.5),
    (0.05, 0.8, 1000, 2, 0.2),
    (0.7, G_HALF, 4, 1, 0.1),
]


def frame_point(rng, d, overlaps_, Q=None):
    """Unit vectors (k, v, k_star, v_star) in R^d with prescribed (kappa, nu, theta, eta, rho),
    built in a random orthonormal frame (k_star, v_star, f3, f4) of R^d (d >= 4), or in the frame Q (d, 4)."""
    kappa, nu, theta, eta, rho = overlaps_
    if Q is None:
        Q, _ = np.linalg.qr(rng.standard_normal((d, 4)))
    ks, vs, f3, f4 = Q.T
    k3 = math.sqrt(1.0 - kappa ** 2 - eta ** 2)
    k = kappa * ks + eta * vs + k3 * f3
    c = (rho - theta * kappa - nu * eta) / k3
    e = math.sqrt(1.0 - theta ** 2 - nu ** 2 - c ** 2)
    v = theta * ks + nu * vs + c * f3 + e * f4
    return k, v, ks, vs


def random_overlaps(rng, on_manifold):
    """Random admissible overlaps (a point of the sphere pair exists), on or off M."""
    while True:
        kappa, nu = rng.uniform(-1, 1, 2)
        if on_manifold:
            kappa, nu = 0.98 * kappa, 0.98 * nu
            return (kappa, nu, 0.0, 0.0, 0.0)
        theta, eta, rho = rng.uniform(-1, 1, 3) * rng.choice([0.05, 0.5, 1.0])
        if kappa ** 2 + eta ** 2 > 0.95:
            continue
        k3 = math.sqrt(1.0 - kappa ** 2 - eta ** 2)
        c = (rho - theta * kappa - nu * eta) / k3
        if theta ** 2 + nu ** 2 + c ** 2 < 0.98:
            return (kappa, nu, theta, eta, rho)


def test_frame_point_has_prescribed_overlaps():
    rng = np.random.default_rng(0)
    for _ in range(20):
        ov = random_overlaps(rng, on_manifold=False)
        k, v, ks, vs = frame_point(rng, 30, ov)
        for x in (k, v):
            assert np.linalg.norm(x) == pytest.approx(1.0, abs=1e-12)
        np.testing.assert_allclose(R.overlaps(k, v, ks, vs), ov, atol=1e-12)


def test_risk_against_monte_carlo():
    """Prop. 15 (and Lemma 6 on M) against the reduced Monte Carlo at 56 seeded points.

    The 8 points of a parameter set share one oracle and one Monte Carlo call: common random numbers, so
    the draws (most of the cost) are made once per set, and their z-scores are correlated. Hence the
    per-point check |z| < 4.5 (false alarm rate <= 56 * 6.8e-6 < 4e-4), and the bias check on the mean z
    of each set with a standard error taken from the per-draw average of the 8 standardised errors
    (which carries the correlation): 7 independent N(0, 1) scores, |each| < 4.5 and |sum| / sqrt(7) < 4.5
    (false alarm rate < 1e-4)."""
    rng = np.random.default_rng(2025)
    key = jax.random.key(7)
    zs, zbar = [], []
    for i, (lam, gamma, d, L, eps) in enumerate(PARAM_SETS):
        Q, _ = np.linalg.qr(rng.standard_normal((d, 4)))
        ovs = [random_overlaps(rng, on_manifold=j < 3) for j in range(8)]
        pts = [frame_point(rng, d, ov, Q) for ov in ovs]
        k, v = np.stack([p[0] for p in pts]), np.stack([p[1] for p in pts])
        ks, vs = pts[0][2], pts[0][3]
        # Sample size: the false-alarm rates above hold at any n (the z-scores are N(0, 1) by the CLT at
        # n >= 1e5); n sets the power, and the draws (n L per point) are the cost. At n = 2e5 for
        # L <= 5 and 1e5 above (half the earlier draws), every point's standard error is at most 0.5%
        # of its risk (measured: 0.32% to 0.50% over the 56 points), so a formula off by 2.3% of the
        # risk at any one point gives |z| > 4.5 there (the earlier n caught 1.6%).
        n = 200_000 if L <= 5 else 100_000
        err = MC.squared_errors(jax.random.fold_in(key, i), k, v, ks, vs, lam=lam, gamma=gamma, L=L, eps=eps,
                                n=n, chunk=200_000)                                      # (8, n)
        exact = np.array([float(R.risk(*ov, lam=lam, gamma=gamma, d=d, L=L, eps=eps)) for ov in ovs])
        assert np.all(exact >= eps ** 2)
        mean, se = MC.mean_se(err)
        zs.extend((exact - mean) / se)
        per_draw = np.mean((exact[:, None] - err) / se[:, None], axis=0)  # mean z = its sample mean
        m, s = MC.mean_se(per_draw)
        zbar.append(m / s)
    zs, zbar = np.array(zs), np.array(zbar)
    print(f"\n[risk vs MC] {len(zs)} points, max |z| = {np.max(np.abs(zs)):.2f}, set scores {np.round(zbar, 2)}")
    assert len(zs) == 56
    assert np.max(np.abs(zs)) < 4.5, zs
    # no bias as a whole: the mean z of each set, standardised with the correlation accounted for
    assert np.max(np.abs(zbar)) < 4.5 and abs(zbar.sum()) / math.sqrt(len(zbar)) < 4.5, zbar


def test_risk_at_equals_risk_of_overlaps():
    rng = np.random.default_rng(3)
    ov = random_overlaps(rng, on_manifold=False)
    k, v, ks, vs = frame_point(rng, 50, ov)
    a = float(R.risk_at(k, v, ks, vs, lam=0.5, gamma=1.0, L=5, eps=0.3))
    b = float(R.risk(*ov, lam=0.5, gamma=1.0, d=50, L=5, eps=0.3))
    assert a == pytest.approx(b, rel=1e-12)


def test_lemma6_on_manifold_and_theorem1():
    """On M the compact form reduces to Lemma 6; at (1, 1, 0, 0, 0) to Theorem 1."""
    from jax.scipy.special import erf
    from slr.gaussian import zeta
    for lam, gamma, d, L, eps in PARAM_SETS:
        for kappa, nu in [(0.3, -0.5), (-0.9, 0.2), (1.0, 1.0)]:
            u = lam * kappa * math.sqrt(d) / math.sqrt(2 * (1 + 2 * lam ** 2 * gamma ** 2))
            lemma6 = (eps ** 2 + gamma ** 2 * (1 - 2 * nu * float(erf(u))
                                               + float(zeta(lam * math.sqrt(d / 2) * kappa, lam * gamma)))
                      + (L - 1) * 2 / math.pi * math.asin(2 * lam ** 2 / (1 + 2 * lam ** 2)))
            got = float(R.risk(kappa, nu, 0.0, 0.0, 0.0, lam=lam, gamma=gamma, d=d, L=L, eps=eps))
            assert got == pytest.approx(lemma6, rel=1e-12, abs=1e-14)
        assert float(R.oracle_risk(lam=lam, gamma=gamma, d=d, L=L, eps=eps)) == pytest.approx(
            float(R.risk(1.0, 1.0, 0.0, 0.0, 0.0, lam=lam, gamma=gamma, d=d, L=L, eps=eps)), rel=1e-14)
        assert float(R.excess_risk(0.2, 0.1, 0.0, 0.3, 0.1, lam=lam, gamma=gamma, d=d, L=L, eps=eps)) == \
            pytest.approx(float(R.risk(0.2, 0.1, 0.0, 0.3, 0.1, lam=lam, gamma=gamma, d=d, L=L, eps=eps))
                          - eps ** 2, abs=1e-14)


@pytest.mark.parametrize("d,expected", [(100, 0.969415), (10 ** 4, 0.122352), (10 ** 6, 0.021436),
                                        (10 ** 8, 0.011146), (10 ** 12, 0.010011)])
def test_oracle_risk_table(d, expected):
    """lam = d^(-1/4), L = 10, gamma^2 = 1/2, eps^2 = 0.01. The expected values are Theorem 1 by
    quadrature, recomputed here: eps^2 + gamma^2 E[erfc(lam sqrt(d/2) + lam gamma Z)^2]
    + (L - 1) (2/pi) asin(2 lam^2 / (1 + 2 lam^2)), with E over Z ~ N(0, 1) by scipy's adaptive quad."""
    from scipy import integrate, special
    lam = d ** -0.25
    gauss = lambda z: math.exp(-z * z / 2) / math.sqrt(2 * math.pi)
    signal = integrate.quad(lambda z: gauss(z) * special.erfc(lam * math.sqrt(d / 2) + lam * G_HALF * z) ** 2,
                            -40, 40, epsabs=1e-14, epsrel=1e-12, limit=400)[0]
    quad = 0.01 + 0.5 * signal + 9 * 2 / math.pi * math.asin(2 * lam ** 2 / (1 + 2 * lam ** 2))
    got = float(R.oracle_risk(lam=lam, gamma=G_HALF, d=d, L=10, eps=0.1))
    assert got == pytest.approx(quad, rel=1e-9, abs=1e-12)
    assert got == pytest.approx(expected, abs=6e-7)


def test_oracle_risk_paper_point():
    assert float(R.oracle_risk(lam=0.1, gamma=G_HALF, d=400, L=10, eps=0.0)) == pytest.approx(0.113498, abs=6e-7)


def test_oracle_risk_controls():
    # lam fixed: the excess does not vanish; lam = d^-1/2: it tends to gamma^2 (1 - erf(1/sqrt2))^2
    for d in (1e2, 1e6, 1e12):
        assert float(R.oracle_risk(lam=0.5, gamma=G_HALF, d=d, L=10)) == pytest.approx(1.947, abs=1e-3)
    lim = 0.5 * (1 - math.erf(1 / math.sqrt(2))) ** 2
    assert float(R.oracle_risk(lam=1e-6, gamma=G_HALF, d=1e12, L=10)) == pytest.approx(lim, abs=1e-4)


def test_oracle_risk_against_monte_carlo():
    key = jax.random.key(11)
    rng = np.random.default_rng(5)
    zs = []
    for i, (lam, gamma, d, L, eps) in enumerate(PARAM_SETS[:4]):
        ks, vs = (np.asarray(x) for x in task.sample_oracle(jax.random.fold_in(key, i), d))
        # test_risk_against_monte_carlo's sample sizes (its compiled draws of each L reused; more power
        # than the 50 000 draws before, the same false-alarm rate)
        mean, se = MC.risk(jax.random.fold_in(key, 50 + i), ks, vs, ks, vs, lam=lam, gamma=gamma,
                           L=L, eps=eps, n=200_000 if L <= 5 else 100_000, chunk=200_000)
        zs.append((float(R.oracle_risk(lam=lam, gamma=gamma, d=d, L=L, eps=eps)) - mean) / se)
    del rng
    print(f"\n[oracle vs MC] z = {np.round(zs, 2)}")
    assert max(map(abs, zs)) < 4.0, zs


def test_risk_against_full_dimensional_monte_carlo():
    """No frame reduction: slr.task.sample + slr.predictors.attention_erf in R^d, on and off M."""
    d, L, lam, gamma, eps, n = 16, 4, 0.6, G_HALF, 0.2, 40_000
    key = jax.random.key(3)
    ks, vs = task.sample_oracle(jax.random.fold_in(key, 0), d)
    X, y, _ = task.sample(jax.random.fold_in(key, 1), n, ks, vs, L=L, gamma=gamma, eps=eps)
    rng = np.random.default_rng(1)
    Qrest = np.linalg.qr(np.column_stack([ks, vs, rng.standard_normal((d, 2))]))[0][:, 2:]
    points = [(np.asarray(ks), np.asarray(vs))]
    k = 0.8 * np.asarray(ks) + 0.36 * np.asarray(vs) + math.sqrt(1 - 0.64 - 0.36 ** 2) * Qrest[:, 0]
    v = 0.3 * np.asarray(ks) + 0.5 * np.asarray(vs) + 0.2 * Qrest[:, 0]
    v = v + math.sqrt(1 - v @ v) * Qrest[:, 1]
    points.append((k, v))
    for k, v in points:
        err = np.asarray(jnp.square(y - predictors.attention_erf(X, k, v, lam)))
        z = (float(R.risk(*R.overlaps(k, v, ks, vs), lam=lam, gamma=gamma, d=d, L=L, eps=eps)) - err.mean()) \
            / (err.std(ddof=1) / math.sqrt(n))
        print(f"\n[full-d MC] z = {z:+.2f}")
        assert abs(z) < 4.0, z


def test_grad_of_risk_against_finite_differences():
    """jax.grad through the closed form (custom JVP of zeta in both arguments) vs central differences."""
    ov = np.array([0.3, -0.4, 0.2, -0.25, 0.15])
    # every parameter traced: one compiled program for the values and one for the gradients, for all sets
    value = jax.jit(lambda x, *p: R.closed_form(*x, *p))
    grad = jax.jit(jax.grad(lambda x, *p: R.closed_form(*x, *p), argnums=(0, 1)))
    for lam, gamma, d, L, eps in PARAM_SETS[1:5]:
        f = lambda x, lam_: value(x, lam_, gamma, d, L, eps)
        g_ov, g_lam = grad(jnp.asarray(ov), lam, gamma, d, L, eps)
        h = 1e-6
        for i in range(5):
            e = np.zeros(5)
            e[i] = h
            fd = (float(f(ov + e, lam)) - float(f(ov - e, lam))) / (2 * h)
            assert float(g_ov[i]) == pytest.approx(fd, rel=1e-6, abs=1e-6)
        fd = (float(f(ov, lam + h)) - float(f(ov, lam - h))) / (2 * h)
        assert float(g_lam) == pytest.approx(fd, rel=1e-6, abs=1e-6)
    # the public risk is differentiable too (traced arguments skip the checks)
    pub = lambda kappa: R.risk(kappa, 0.5, 0.0, 0.0, 0.0, lam=0.1, gamma=G_HALF, d=400, L=10)
    g = jax.grad(pub)(0.5)
    assert float(g) == pytest.approx((float(pub(0.5 + 1e-6)) - float(pub(0.5 - 1e-6))) / 2e-6, rel=1e-6)


@pytest.mark.parametrize("lam", [1e-6, 1e-3, 1.0, 1e3])
@pytest.mark.parametrize("d", [1.0, 2, 1e4, 1e12])
def test_no_nan_at_extreme_legal_values(lam, d):
    g = np.linspace(-1, 1, 5)
    kappa, nu = np.meshgrid(g, g)
    for i, args in enumerate([(kappa, nu, 0.0, 0.0, 0.0), (kappa, nu, 0.3, -0.2, 0.4), (kappa, nu, 1.0, 0.0, -1.0)]):
        for gamma, L, eps in [(1e-3, 1, 0.0), (G_HALF, 10, 0.1), (10.0, 1000, 1.0)]:
            r = np.asarray(R.risk(*args, lam=lam, gamma=gamma, d=d, L=L, eps=eps))
            assert np.all(np.isfinite(r))
            if i == 0:  # on M every (kappa, nu) is attained, so R is a true risk: R >= eps^2
                assert np.all(r >= eps ** 2 - 1e-12 * max(1.0, np.max(np.abs(r))))
    assert np.isfinite(float(R.oracle_risk(lam=lam, gamma=G_HALF, d=d, L=10)))


# ---------- Proposition 3: the optimal linear predictor ----------

LINEAR_CASES = [
    (5, G_HALF, 0.3, None),
    (4, 1.5, 0.1, [0.1, 0.2, 0.3, 0.4]),
    (3, 1.0, 0.0, [0.6, 0.3, 0.1]),
]


@pytest.mark.parametrize("L,gamma,eps,p", LINEAR_CASES)
def test_linear_predictor_against_least_squares(L, gamma, eps, p):
    d, n = 6, 150_000
    key = jax.random.key(L)
    ks, vs = task.sample_oracle(jax.random.fold_in(key, 0), d)
    X, y, _ = task.sample(jax.random.fold_in(key, 1), n, ks, vs, L=L, gamma=gamma, eps=eps, p=p)
    F = np.asarray(X).reshape(n, L * d)
    w, *_ = np.linalg.lstsq(F, np.asarray(y), rcond=None)
    W_theory = np.asarray(R.linear_weights(vs, gamma=gamma, L=L, p=p))
    assert W_theory.shape == (L, d)
    theory = R.linear_risk(gamma=gamma, L=L, eps=eps, p=p)
    # 5 standard errors of a least-squares coefficient (coordinate variance >= min(1, gamma^2))
    tol = 5 * math.sqrt(theory / (n * min(1.0, gamma ** 2)))
    assert np.max(np.abs(w.reshape(L, d) - W_theory)) < tol
    Xt, yt, _ = task.sample(jax.random.fold_in(key, 2), n, ks, vs, L=L, gamma=gamma, eps=eps, p=p)
    err = np.square(np.asarray(yt) - np.asarray(Xt).reshape(n, L * d) @ w)
    mse, se = err.mean(), err.std(ddof=1) / math.sqrt(n)
    print(f"\n[linear L={L} p={p}] max |w - w_lin| = {np.max(np.abs(w.reshape(L, d) - W_theory)):.1e} (tol {tol:.1e}); "
          f"test MSE {mse:.5f} +- {se:.1e} vs formula {theory:.5f} (z = {(mse - theory) / se:+.2f})")
    assert abs(mse - theory) < 4 * se, (mse, se, theory)
    # the theoretical weights do as well on fresh data
    err_t = np.square(np.asarray(yt) - np.asarray(Xt).reshape(n, L * d) @ W_theory.ravel())
    assert abs(err_t.mean() - theory) < 4 * err_t.std(ddof=1) / math.sqrt(n)


def test_linear_risk_closed_forms():
    g2 = 0.5
    for L in (1, 2, 10, 100):
        uniform = R.linear_risk(gamma=math.sqrt(g2), L=L, eps=0.3)
        assert uniform == pytest.approx(0.09 + g2 * (L - 1) / (L + g2 - 1), rel=1e-13)
        assert uniform == pytest.approx(R.linear_risk(gamma=math.sqrt(g2), L=L, eps=0.3, p=np.full(L, 1 / L)),
                                        rel=1e-13)
    Ls = np.array([1, 2, 10, 100])
    np.testing.assert_allclose(R.linear_risk(gamma=math.sqrt(g2), L=Ls, eps=0.3),
                               [R.linear_risk(gamma=math.sqrt(g2), L=int(L), eps=0.3) for L in Ls], rtol=1e-13)
    # L = 5, gamma^2 = 0.5, eps = 0.3: 0.09 + 0.5 * 4 / (5 - 0.5) = 0.09 + 4/9 = 0.53444...
    assert R.linear_risk(gamma=G_HALF, L=5, eps=0.3) == pytest.approx(0.53444, abs=1e-5)
    # uniform p minimises nothing in particular, but the bound with p_max holds
    p = np.array([0.5, 0.3, 0.2])
    bound = g2 * (1 - 0.5) / (1 - 0.5 + 0.5 * g2)
    assert R.linear_risk(gamma=G_HALF, L=3, p=p) >= bound - 1e-15
    assert R.null_risk(gamma=G_HALF, eps=0.3) == pytest.approx(0.59)


def test_affine_risk_against_samples_and_prop3():
    """risk.affine_risk: a random affine predictor against a test-set MSE; Prop. 3's weights give linear_risk."""
    d, L, gamma, eps, n = 12, 4, G_HALF, 0.2, 200_000
    ks, vs = task.sample_oracle(jax.random.key(0), d)
    p = np.array([0.4, 0.3, 0.2, 0.1])
    rng = np.random.default_rng(1)
    W, b = 0.1 * rng.standard_normal((L, d)) + 0.3 * np.outer(np.ones(L), np.asarray(vs)), 0.05
    X, y, _ = task.sample(jax.random.key(2), n, ks, vs, L=L, gamma=gamma, eps=eps, p=p)
    err = np.square(np.asarray(y) - b - np.asarray(X).reshape(n, -1) @ W.ravel())
    exact = R.affine_risk(W, b, ks, vs, gamma=gamma, eps=eps, p=p)
    assert abs(err.mean() - exact) < 4 * err.std(ddof=1) / math.sqrt(n)
    W_opt = np.asarray(R.linear_weights(vs, gamma=gamma, L=L, p=p))
    assert R.affine_risk(W_opt, 0.0, ks, vs, gamma=gamma, eps=eps, p=p) == pytest.approx(
        R.linear_risk(gamma=gamma, L=L, eps=eps, p=p), abs=1e-13)
    with pytest.raises(ValueError, match="W"):
        R.affine_risk(W[:, :5], 0.0, ks, vs, gamma=gamma)
    with pytest.raises(ValueError, match="p"):
        R.affine_risk(W, 0.0, ks, vs, gamma=gamma, p=np.ones(L))


def test_linear_attention_risk_and_its_minimum():
    """Linear attention at the oracle: the closed form against Monte Carlo; the best lam is the minimum."""
    d, L, gamma, eps = 50, 6, G_HALF, 0.1
    lams = np.array([0.05, 0.1, 0.2])
    exact = R.linear_attention_risk(lam=lams, gamma=gamma, d=d, L=L, eps=eps)
    e = np.eye(2)
    m, s = MC.risk(jax.random.key(0), e[0], e[1], e[0], e[1], lam=lams, d=d, gamma=gamma, L=L, eps=eps,
                   n=200_000, predictor="linear")
    assert np.all(np.abs(m - exact) < 5 * s), (m, exact, s)
    lam_best, r_best = R.linear_attention_best(gamma=gamma, d=d, L=L, eps=eps)
    grid = np.linspace(0.5, 1.5, 201) * lam_best
    assert r_best == pytest.approx(R.linear_attention_risk(lam=lam_best, gamma=gamma, d=d, L=L, eps=eps), abs=1e-14)
    assert np.all(R.linear_attention_risk(lam=grid, gamma=gamma, d=d, L=L, eps=eps) >= r_best - 1e-14)


@settings(max_examples=60, deadline=None, database=None)
@given(u=st.lists(st.floats(-1, 1), min_size=8, max_size=8), lam=st.floats(1e-3, 30),
       gamma=st.floats(0.05, 3), d=st.integers(4, 10 ** 6), L=st.integers(1, 200), eps=st.floats(0, 2))
def test_hyp_risk_at_least_eps2(u, lam, gamma, d, L, eps):
    """R >= eps^2 at every realisable overlap: two unit vectors k, v of R^4 in the frame (k*, v*, e3, e4)."""
    k, v = np.array(u[:4]), np.array(u[4:])
    if np.linalg.norm(k) < 1e-3 or np.linalg.norm(v) < 1e-3:
        return
    k, v = k / np.linalg.norm(k), v / np.linalg.norm(v)
    ov = (k[0], v[1], v[0], k[1], k @ v)
    r = float(R.risk(*ov, lam=lam, gamma=gamma, d=d, L=L, eps=eps))
    assert r >= eps ** 2 * (1 - 1e-9) - 1e-9 * gamma ** 2, (ov, r)


def test_manifold_risk_is_lemma6_of_the_closed_form():
    # Lemma 6 written out equals Proposition 15's kernel at theta = eta = rho = 0, on a grid.
    kap, nu = np.meshgrid(np.linspace(-1, 1, 9), np.linspace(-1, 1, 7))
    for lam, d, L in [(0.1, 400, 10), (0.7, 50, 3)]:
        got = R.manifold_risk(kap, nu, lam=lam, gamma=math.sqrt(0.5), d=d, L=L, eps=0.1)
        ref = R.risk(kap, nu, 0.0, 0.0, 0.0, lam=lam, gamma=math.sqrt(0.5), d=d, L=L, eps=0.1)
        np.testing.assert_allclose(got, np.asarray(ref), rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="nu"):
        R.manifold_risk(0.0, 2.0, lam=0.1, gamma=1.0, d=10, L=2)


def test_oracle_signal_part_matches_the_closed_form_and_keeps_precision():
    # gamma^2 E[(1 - erf(a + bZ))^2] = gamma^2 (1 - 2 phi + zeta) (G1, G5); quadrature on erfc agrees
    # where the closed form is accurate, and stays positive and decreasing where it has cancelled.
    g, ds = math.sqrt(0.5), np.logspace(1, 5, 17)
    lam = ds ** -0.25
    sig = R.oracle_signal_part(lam=lam, gamma=g, d=ds)
    a, b = lam * np.sqrt(ds / 2), lam * g
    cf = g ** 2 * (1 - 2 * np.asarray(G.phi(a, b)) + np.asarray(G.zeta(a, b)))
    ok = cf > 1e-8
    assert ok.sum() >= 2
    np.testing.assert_allclose(sig[ok], cf[ok], rtol=1e-6)
    assert np.all(sig > 0) and np.all(np.diff(sig) < 0)


def test_closed_form_expanded_equals_closed_form():
    # two transcriptions of Proposition 15 (compact with zeta', zeta''; expanded by Lemma 18)
    ov = jax.random.uniform(jax.random.key(3), (5, 200), minval=-1.0, maxval=1.0)
    for lam, gamma, d, L, eps in ((0.1, math.sqrt(0.5), 400, 10, 0.1), (2.0, 0.5, 20, 3, 0.0)):
        a = R.closed_form(*ov, lam, gamma, d, L, eps)
        b = R.closed_form_expanded(*ov, lam, gamma, d, L, eps)
        assert float(jnp.max(jnp.abs(a - b) / jnp.abs(a))) < 1e-12


def test_softmax_excess_bound_dominates_monte_carlo():
    """Softmax at the oracle, at a size where the loss is light-tailed and plain Monte Carlo is accurate
    (d = 60, lam = 1, L = 10): the bound U lies above the Monte Carlo excess, the importance-sampled
    excess agrees with it, and a wrong bound (E e^{-2 lam s_J0} replaced by e^{-2 lam E s_J0}, the
    variance of the informative score forgotten) lies below it. Each comparison is a 4-sigma z-test
    (a true statement fails with probability < 6.4e-5)."""
    d, lam, L, gamma = 60, 1.0, 10, G_HALF
    e = np.eye(2)
    m, s = MC.risk(jax.random.key(5), e[0], e[1], e[0], e[1], lam=lam, d=d, gamma=gamma, L=L, eps=0.0,
                   n=400_000, predictor="softmax")
    u = R.softmax_excess_bound(lam=lam, gamma=gamma, d=d, L=L)
    bound, x, se, share = R.softmax_excess(lam=lam, gamma=gamma, d=d, L=L, n=100_000, seed=1)
    assert bound == u and x <= u and 0.0 <= share <= 1.0
    assert u > m + 4 * s, (u, m, s)
    assert abs(x - m) < 4 * math.hypot(se, s), (x, se, m, s)
    wrong = u * math.exp(-2 * lam ** 2 * gamma ** 2)    # the control: a deliberately wrong bound
    assert wrong < m - 4 * s, (wrong, m, s)
    # the closed form, term by term, and U = 0 without noise tokens
    mu, g2 = math.sqrt(d / 2), gamma ** 2
    ref = math.exp(-2 * lam * mu + 2 * lam ** 2 * g2) * ((1 + g2) * (L - 1) * math.exp(2 * lam ** 2)
                                                          + g2 * (L - 1) * (L - 2) * math.exp(lam ** 2))
    assert u == pytest.approx(ref, rel=1e-13)
    assert R.softmax_excess_bound(lam=lam, gamma=gamma, d=d, L=1) == 0.0


def test_softmax_excess_checks_its_arguments():
    ok = dict(lam=1.0, gamma=G_HALF, d=60, L=10)
    for name, bad in [("lam", 0.0), ("lam", -1.0), ("gamma", 0.0), ("d", 0.5), ("d", math.inf),
                      ("L", 1), ("L", 2.5), ("n", 1), ("seed", -1)]:
        with pytest.raises(ValueError, match=name):
            R.softmax_excess(**{**ok, name: bad})
    with pytest.raises(ValueError, match="L"):
        R.softmax_excess_bound(**{**ok, "L": 0})
    # far outside the book's range: U is computed in logs (inf when it overflows, 0 when it underflows)
    assert R.softmax_excess_bound(lam=30.0, gamma=1.0, d=400, L=10) == math.inf
    assert R.softmax_excess_bound(lam=20.0, gamma=G_HALF, d=10 ** 6, L=10) == 0.0
    with pytest.raises(ValueError, match="lam"):
        R.softmax_excess(lam=30.0, gamma=1.0, d=400, L=10)


# (lam, gamma, d, L, eps): Figure 9's task at its final lam = 1/3, and a small one where the shared
# noise's cross term is large (about 9 standard errors of the paired difference).
MULTIHEAD_SETS = [(1 / 3, G_HALF, 80, 10, 0.1), (0.1, 1.0, 20, 5, 0.0)]


@pytest.mark.parametrize("lam, gamma, d, L, eps", MULTIHEAD_SETS)
def test_multihead_oracle_excess_against_monte_carlo(lam, gamma, d, L, eps):
    """The closed form of the oracle heads' excess risk (Eq. 31) within 4 standard errors of the Monte
    Carlo estimate under each token noise (key 3, 200 000 sequences, the same draws for both); the
    shared noise's cross term against the paired difference of the two noises. Controls: a wrong
    term count (L - 1 noise tokens, or without the other head's term) is more than 4 standard errors
    away, and so is the paired difference without the cross term where that term is large."""
    n, kw = 200_000, dict(lam=lam, gamma=gamma, d=d, L=L)
    err = np.asarray(MC.multihead_oracle_sq_errors(jax.random.key(3), n, eps=eps,
                                                   shared_noise=(False, True), **kw))
    mean, se = MC.mean_se(err)
    mean = mean - eps ** 2
    for i, shared in enumerate((False, True)):
        z = lambda **c: (mean[i] - R.multihead_oracle_excess(shared_noise=shared, **kw, **c)) / se[i]
        assert abs(z()) < 4.0
        assert abs(z(noise_tokens=L - 1)) > 4.0          # one location only informative: wrong
        assert abs(z(other_head=False)) > 4.0            # without gamma^2 zeta(0; lam gamma)
    cross = (R.multihead_oracle_excess(shared_noise=True, **kw)
             - R.multihead_oracle_excess(shared_noise=False, **kw))
    dm, dse = MC.mean_se(err[1] - err[0])
    assert abs(dm - cross) / dse < 4.0
    if lam == 0.1:
        assert abs(dm) / dse > 4.0                       # the cross term is needed here


def test_multihead_oracle_excess_terms():
    """The terms one by one: the noise tokens' 2 zeta(0; lam) each, the other head's 2 gamma^2
    zeta(0; lam gamma), and the cross term by quadrature."""
    lam, g, d, L = 0.4, 0.9, 30, 7
    f = lambda **c: R.multihead_oracle_excess(lam=lam, gamma=g, d=d, L=L, **c)
    assert f(noise_tokens=L - 1) - f() == pytest.approx(2 * float(G.zeta0(lam)), rel=1e-12)
    assert f() - f(other_head=False) == pytest.approx(2 * g ** 2 * float(G.zeta0(lam * g)), rel=1e-12)
    a, b = lam * math.sqrt(d / 2), lam * g
    cross = G.expect_normal(lambda z: math.erf(b * z) * math.erf(a + b * z))
    assert f(shared_noise=True) - f() == pytest.approx(4 * g ** 2 * cross, rel=1e-9)
    own = G.expect_normal(lambda z: (1 - math.erf(a + b * z)) ** 2)
    assert f(noise_tokens=0, other_head=False) == pytest.approx(2 * g ** 2 * own, rel=1e-9)


@pytest.mark.parametrize("kw, match", [
    (dict(lam=0.0), "lam"), (dict(gamma=-1.0), "gamma"), (dict(d=2), "d"), (dict(d=True), "d"),
    (dict(L=1), "L"), (dict(L=2.5), "L"), (dict(noise_tokens=-1), "noise_tokens"),
    (dict(noise_tokens=1.5), "noise_tokens"), (dict(shared_noise="yes"), "shared_noise"),
    (dict(other_head=1), "other_head")])
def test_multihead_oracle_excess_checks_its_arguments(kw, match):
    args = dict(lam=0.3, gamma=G_HALF, d=80, L=10) | kw
    with pytest.raises(ValueError, match=match):
        R.multihead_oracle_excess(**args)


_TRACED = []  # JAX's trace events (one per jit cache miss), recorded by a listener (public jax.monitoring)
jax.monitoring.register_event_duration_secs_listener(
    lambda event, secs, **_: _TRACED.append(event) if event == "/jax/core/compile/jaxpr_trace_duration" else None)


def test_closed_form_outside_a_jit_compiles_once_for_every_shape():
    """Called on concrete float64 values, closed_form runs one compiled program on blocks of points: new
    shapes and mixes of scalars, ints and arrays trace nothing new, and each value is the traced kernel's
    (the same function under jax.jit, which compiles per shape) up to round-off. Control: the jitted call
    on the same arguments traces a program per new shape."""
    g, lam3 = math.sqrt(0.5), np.geomspace(0.02, 1.5, 3)
    R.closed_form(1.0, 1.0, 0.0, 0.0, 0.0, 0.1, g, 400.0, 10.0, 0.0)  # the block program, once
    calls = [(1.0, 1.0, 0.0, 0.0, 0.0, 0.1, g, 400, 10, 0.0),                   # ints for d, L
             (0.3, -0.2, 0.1, 0.2, 0.05, np.geomspace(0.02, 1.5, 401), g, 400.0, 10, 0.1),  # two blocks
             (np.linspace(-1, 1, 7)[:, None], 0.5, 0.0, 0.1, 0.0, lam3, g, 80.0, 2, 0.0),  # a (7, 3) grid
             (jnp.asarray(0.5), 1.0, 0.0, 0.0, 0.0, jnp.asarray(lam3), g, 400.0, 10.0, 0.0)]  # jax arrays
    _TRACED.clear()
    out = [np.asarray(R.closed_form(*a)) for a in calls]
    assert _TRACED == []
    kernel = jax.jit(R.closed_form)   # traced: the kernel itself, one program per shape
    ref = [np.asarray(kernel(*a)) for a in calls]
    assert len(_TRACED) >= len(calls)   # control: the jitted call traced every new combination
    for o, r in zip(out, ref):
        assert o.shape == r.shape and o.dtype == np.float64
        np.testing.assert_allclose(o, r, rtol=1e-13, atol=1e-15)
    # float32 arguments keep the kernel's own program and dtype (no float64 blocks)
    assert R.closed_form(np.float32(1.0), 1.0, 0.0, 0.0, 0.0, np.float32(0.1), g, 400.0, 10, 0.0).dtype == np.float32
