"""slr.gaussian against adaptive quadrature, finite differences and the Gaussian-erf identities (G1)-(G9) (book/oracle.ipynb)."""
import math
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate, special

import slr  # noqa: F401  (float64)
from slr import gaussian as G

A_GRID = [-6.0, -3.0, -1.2, -0.3, 0.0, 0.3, 1.2, 3.0, 6.0]
B_GRID = [0.01, 0.1, 0.5, 1.0, 2.0, 5.0]
EDGE = [(6.0, 0.01), (-6.0, 0.01), (6.0, 5.0), (-6.0, 5.0), (0.0, 0.01), (0.0, 5.0), (1e-8, 0.01), (-2.5, 1e-3)]
POINTS = [(a, b) for a in A_GRID for b in B_GRID] + EDGE


def _derf(x):
    return 2.0 / math.sqrt(math.pi) * np.exp(-x * x)


def _d2erf(x):
    return -2.0 * x * _derf(x)


# E[f(a + b Z)] for the seven functions, each as an integrand f.
INTEGRANDS = {
    "phi": special.erf,
    "phi1": _derf,
    "phi2": _d2erf,
    "zeta": lambda x: special.erf(x) ** 2,
    "zeta1": lambda x: 2.0 * special.erf(x) * _derf(x),
    "zeta2": lambda x: 2.0 * (_derf(x) ** 2 + special.erf(x) * _d2erf(x)),
}


def _gauss_expect(f, a, b):
    """E[f(a + b Z)], Z ~ N(0, 1), by adaptive quadrature on [-40, 40] (the tail beyond is < 1e-300)."""
    dens = lambda z: math.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)
    pts = [0.0] + ([-a / b] if abs(a / b) < 39.0 else [])
    with warnings.catch_warnings():   # asked for 1e-15, quad may report round-off; the test's
        warnings.simplefilter("ignore", integrate.IntegrationWarning)   # 1e-12 bound decides
        val, _ = integrate.quad(lambda z: f(a + b * z) * dens(z), -40.0, 40.0, points=pts,
                                epsabs=1e-15, epsrel=1e-14, limit=400)
    return val


def test_against_quadrature():
    a, b = np.array(POINTS).T
    errs = {}
    for name, f in INTEGRANDS.items():
        got = np.asarray(getattr(G, name)(a, b))
        errs[name] = max(abs(g - _gauss_expect(f, ai, bi)) for g, ai, bi in zip(got, a, b))
    b0 = np.array(B_GRID + [1e-3, 10.0])
    errs["zeta0"] = max(abs(g - _gauss_expect(INTEGRANDS["zeta"], 0.0, bi)) for g, bi in zip(np.asarray(G.zeta0(b0)), b0))
    print(f"\n[gaussian] max |closed form - quadrature| over {len(POINTS)} points: {max(errs.values()):.2e}")
    assert max(errs.values()) < 1e-12, errs


def test_vectorised_matches_scalar():
    a = np.array(A_GRID)[:, None]
    b = np.array(B_GRID)[None, :]
    for name in INTEGRANDS:
        grid = np.asarray(getattr(G, name)(a, b))
        assert grid.shape == (len(A_GRID), len(B_GRID))
    assert float(G.zeta(A_GRID[2], B_GRID[3])) == pytest.approx(np.asarray(G.zeta(a, b))[2, 3], abs=1e-15)


@pytest.mark.parametrize("b", [0.01, 0.3, 1.0, 5.0])
def test_even_in_a_and_limits(b):
    a = np.linspace(0.0, 8.0, 33)
    np.testing.assert_allclose(G.zeta(a, b), G.zeta(-a, b), atol=1e-15)
    np.testing.assert_allclose(G.zeta2(a, b), G.zeta2(-a, b), atol=1e-15)
    np.testing.assert_allclose(G.zeta1(a, b), -G.zeta1(-a, b), atol=1e-15)
    np.testing.assert_allclose(G.phi(a, b), -G.phi(-a, b), atol=1e-15)
    # zeta decreases on (-inf, 0] i.e. increases on [0, inf)
    assert np.all(np.diff(np.asarray(G.zeta(a, b))) >= -1e-15)
    for inf in (np.inf, -np.inf):
        assert float(G.zeta(inf, b)) == pytest.approx(1.0, abs=1e-15)
        assert abs(float(G.phi(inf, b))) == pytest.approx(1.0, abs=1e-15)
    assert float(G.zeta(40.0, b)) == pytest.approx(1.0, abs=1e-14)
    # zeta''(0; b) = 8 / (pi (1 + 2 b^2) c_b)
    c = math.sqrt(1 + 4 * b * b)
    assert float(G.zeta2(0.0, b)) == pytest.approx(8.0 / (math.pi * (1 + 2 * b * b) * c), rel=1e-13)


def test_b_to_zero_limit():
    # b -> 0: zeta(a; b) -> erf(a)^2, phi -> erf(a)
    a = np.linspace(-3, 3, 13)
    np.testing.assert_allclose(G.zeta(a, 1e-9), special.erf(a) ** 2, atol=1e-13)
    np.testing.assert_allclose(G.phi(a, 1e-9), special.erf(a), atol=1e-13)
    np.testing.assert_allclose(G.zeta(a, 0.0), special.erf(a) ** 2, atol=1e-13)


def test_g9_identity():
    b = np.geomspace(1e-3, 100.0, 200)
    z0 = np.asarray(G.zeta0(b))
    np.testing.assert_allclose(z0, np.asarray(G.zeta(0.0, b)), atol=1e-14)
    np.testing.assert_allclose(z0, 1 - 4 / np.pi * np.arctan(1 / np.sqrt(1 + 4 * b * b)), atol=1e-14)
    assert float(G.zeta0(1e12)) == pytest.approx(1.0, abs=1e-12)


JVP_POINTS = [(-4.0, 0.05), (0.0, 0.7), (0.4, 1.0), (2.0, 2.0), (0.7, 4.0)]


@pytest.mark.parametrize("a,b", JVP_POINTS)
def test_zeta_jvp_both_arguments(a, b):
    h = 1e-5
    fd_a = (float(G.zeta(a + h, b)) - float(G.zeta(a - h, b))) / (2 * h)
    fd_b = (float(G.zeta(a, b + h)) - float(G.zeta(a, b - h))) / (2 * h)
    ga, gb = jax.grad(G.zeta, argnums=(0, 1))(a, b)
    assert float(ga) == pytest.approx(fd_a, abs=1e-9)
    assert float(gb) == pytest.approx(fd_b, abs=1e-9)
    # a jvp along a mixed direction
    _, t = jax.jvp(G.zeta, (jnp.float64(a), jnp.float64(b)), (jnp.float64(0.6), jnp.float64(-0.8)))
    assert float(t) == pytest.approx(0.6 * fd_a - 0.8 * fd_b, abs=1e-9)
    # second derivative in a through the custom rule equals (G7)
    gaa = jax.grad(jax.grad(G.zeta))(a, b)
    assert float(gaa) == pytest.approx(float(G.zeta2(a, b)), abs=1e-12)
    # and zeta1, phi derivatives agree with autodiff of their parents
    assert float(jax.grad(G.zeta1)(a, b)) == pytest.approx(float(G.zeta2(a, b)), abs=1e-12)
    assert float(jax.grad(G.phi)(a, b)) == pytest.approx(float(G.phi1(a, b)), abs=1e-13)
    assert float(jax.grad(G.phi1)(a, b)) == pytest.approx(float(G.phi2(a, b)), abs=1e-13)


def test_zeta_jit_and_vmap():
    a = jnp.linspace(-3.0, 3.0, 7)
    b = jnp.full(7, 0.5)
    out = jax.jit(jax.vmap(jax.grad(G.zeta, argnums=(0, 1))))(a, b)
    np.testing.assert_allclose(out[0], G.zeta1(a, b), atol=1e-14)
    np.testing.assert_allclose(out[1], b * G.zeta2(a, b), atol=1e-14)


def test_identities_match_monte_carlo():
    # Each left side averaged over 4e5 draws of Z agrees with its closed form (|z| < 5), at two points.
    Z = np.random.default_rng(3).standard_normal(400_000)
    for a, b in [(0.3, 0.5), (-0.7, 1.3)]:
        names, samples, exact = G.identities(a, b, Z)
        assert len(names) == samples.shape[0] == exact.shape[0] == 10
        z = (samples.mean(1) - exact) / (samples.std(1, ddof=1) / np.sqrt(Z.size))
        assert np.all(np.abs(z) < 5), dict(zip(names, z))


def test_expect_normal_moments_and_phi():
    # E[Z^2] = 1, E[Z^4] = 3, E[erf(a + bZ)] = erf(a / sqrt(1 + 2 b^2)) (Lemma 18, item 1)
    assert abs(G.expect_normal(lambda z: z * z) - 1.0) < 1e-12
    assert abs(G.expect_normal(lambda z: z ** 4) - 3.0) < 1e-11
    assert abs(G.expect_normal(lambda z: math.erf(0.7 + 1.5 * z)) - float(G.phi(0.7, 1.5))) < 1e-12
