"""slr.coordinates: stochastic PGD of erf heads in frame coordinates (sampler="coordinates" of slr.sgd.train),
checked against the full draw in R^d (the law of the overlaps and of the test error) and kernel by kernel."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from slr import coordinates as CO, pgd as P, sgd as S, task

GAMMA = math.sqrt(0.5)

# The traceable kernels, jitted (they run inside the jitted slr.coordinates.core): one compiled program
# each instead of one per eager operation of their unrolled loops (most of this file's small programs)
_orthonormalise, _setup, _psd_factor = jax.jit(CO.orthonormalise), jax.jit(CO.setup), jax.jit(CO.psd_factor)
_reframe = jax.jit(CO.reframe, static_argnums=2)


def test_orthonormalise_spans_the_vectors_and_completes_a_degenerate_set():
    """Orthonormal rows whose span holds the vectors; a vector in the span already (here the sum of two
    others) is replaced by a fixed direction's residual, so the rows stay orthonormal. Control: without
    the fallback (a zero fallback) the degenerate row is not a unit vector."""
    x = jax.random.normal(jax.random.key(0), (4, 9), dtype=jnp.float64)
    x = x.at[3].set(x[0] + 2 * x[1])
    basis = jnp.eye(9, dtype=jnp.float64)[:2]
    fb = jax.random.normal(jax.random.key(1), (4, 9), dtype=jnp.float64)
    B = np.asarray(_orthonormalise(x, basis, fb))
    np.testing.assert_allclose(B @ B.T, np.eye(4), atol=1e-13)
    np.testing.assert_allclose(B @ np.asarray(basis).T, 0.0, atol=1e-13)
    full = np.concatenate([np.asarray(basis), B])
    resid = np.asarray(x) - (np.asarray(x) @ full.T) @ full
    assert np.max(np.abs(resid)) < 1e-12
    bad = np.asarray(_orthonormalise(x, basis, jnp.zeros_like(fb)))
    assert not np.all(np.isfinite(bad[3])) or abs(np.linalg.norm(bad[3]) - 1) > 0.5


def test_setup_keeps_every_inner_product():
    """The coordinates of the heads and oracles have the inner products of the vectors in R^d; the
    basis is orthonormal and its first 2n rows span the oracles (whose coordinates vanish beyond 2n)."""
    d, H, n = 20, 2, 2
    ks, vs = task.sample_oracle_multi(jax.random.key(2), d, n)
    k0, v0 = (x[0] for x in P.init_sphere(jax.random.key(3), d, 1, H=H))
    k, v, ksc, vsc, B = (np.asarray(a) for a in _setup(k0, v0, ks, vs))
    V = np.concatenate([np.asarray(x) for x in (ks, vs, k0, v0)])
    C = np.concatenate([ksc, vsc, k, v])
    np.testing.assert_allclose(C @ C.T, V @ V.T, atol=1e-13)
    np.testing.assert_allclose(B @ B.T, np.eye(2 * n + 2 * H), atol=1e-13)
    assert np.max(np.abs(np.concatenate([ksc, vsc])[:, 2 * n:])) < 1e-13


def test_cholesky_factor_of_full_rank_and_singular_matrices():
    """C C^T = M for a positive definite and for a singular (rank-2) positive semi-definite 4 x 4 M,
    C lower triangular and finite. Control: C C^T is not M for a perturbed M's factor."""
    a = jax.random.normal(jax.random.key(4), (50, 4), dtype=jnp.float64)
    for M in (a.T @ a, a[:, :2].T @ a[:, :2], jnp.zeros((4, 4))):
        M = jnp.asarray(M)
        if M.shape != (4, 4):  # rank 2, embedded
            M = jnp.zeros((4, 4)).at[:2, :2].set(M).at[2:, 2:].set(0.0)
        C = np.asarray(_psd_factor(M))
        assert np.all(np.isfinite(C)) and np.allclose(np.triu(C, 1), 0.0)
        np.testing.assert_allclose(C @ C.T, np.asarray(M), atol=1e-10)
    C = np.asarray(_psd_factor(a.T @ a + jnp.eye(4)))
    assert np.max(np.abs(C @ C.T - np.asarray(a.T @ a))) > 0.5


def test_reframe_keeps_the_gram_matrix():
    """Heads in D + 2H coordinates (first 2n the oracles' axes) and their new D coordinates have one Gram
    matrix and the same oracle coordinates."""
    n, H = 2, 2
    x = jax.random.normal(jax.random.key(5), (2 * H, 2 * n + 4 * H), dtype=jnp.float64)
    k, v = x[:H], x[H:]
    k2, v2 = (np.asarray(a) for a in _reframe(k, v, n))
    A, B = np.asarray(x), np.concatenate([k2, v2])
    assert B.shape == (2 * H, 2 * n + 2 * H)
    np.testing.assert_allclose(B @ B.T, A @ A.T, atol=1e-12)
    np.testing.assert_allclose(B[:, :2 * n], A[:, :2 * n], atol=1e-14)


def test_draws_are_float32_gaussians_used_in_float64():
    """The module's "Precision": a step's Gaussian draws are float32 values in float64 arrays, within
    draw_range() (about [-5.42, 5.22]), with the mean and variance of N(0, 1) (|z| < 5 on 193 900
    draws); Bartlett's diagonal (chi^2 variates) is not rounded to float32. Control: float64 normals are
    not float32 values."""
    L, B, D, H, d, n = 10, 5, 8, 2, 80, 2
    draws = jax.jit(jax.vmap(lambda k: CO.noise(k, L, B, D, H, d, n)))(jax.random.split(jax.random.key(9), 700))
    z = np.concatenate([np.asarray(x).reshape(700, -1) for x in draws[:4]], axis=1).ravel()
    T = np.asarray(draws[4])
    as32 = lambda x: x.astype(np.float32).astype(np.float64)
    assert z.dtype == np.float64 and T.dtype == np.float64
    assert z.size == 700 * (B * n * D + B * (L - n) * 2 * H + B + 2 * H * D)
    lo, hi = CO.draw_range()
    assert -5.43 < lo < -5.41 and 5.21 < hi < 5.23
    assert np.array_equal(z, as32(z)) and lo <= z.min() and z.max() <= hi
    assert abs(z.mean()) * math.sqrt(z.size) < 5.0 and abs(z.var() - 1.0) * math.sqrt(z.size / 2) < 5.0
    diag = np.diagonal(T, axis1=1, axis2=2).ravel()
    assert np.mean(diag != as32(diag)) > 0.99
    control = np.asarray(jax.random.normal(jax.random.key(9), (z.size,), dtype=jnp.float64))
    assert np.mean(control != as32(control)) > 0.99


def _overlaps(log):
    """Per run: the final overlaps flattened (kappa, nu, theta, eta: H x n each; rho: H) and the risk."""
    last = [getattr(log, f)[:, -1].reshape(len(log.rho), -1) for f in ("kappa", "nu", "theta", "eta", "rho")]
    return np.concatenate(last + [log.excess_risk[:, -1:]], axis=1)


def _z(a, b):
    """Two-sample z statistics of the means and of the covariances (upper triangle) of the columns."""
    n_a, n_b = len(a), len(b)
    z_mean = (a.mean(0) - b.mean(0)) / np.sqrt(a.var(0) / n_a + b.var(0) / n_b)
    i, j = np.triu_indices(a.shape[1])
    ca, cb = ((x - x.mean(0))[:, i] * (x - x.mean(0))[:, j] for x in (a, b))
    z_cov = (ca.mean(0) - cb.mean(0)) / np.sqrt(ca.var(0) / n_a + cb.var(0) / n_b)
    return np.abs(np.concatenate([z_mean, z_cov]))


@pytest.fixture(scope="module")
def one_step():
    """4000 runs of one step of size 0.4 from one generic start (d = 14, two heads, two locations) under
    each sampler and token noise: the overlaps after the step."""
    d, R = 14, 4000
    ks, vs = task.sample_oracle_multi(jax.random.key(80), d, 2)
    g = jax.random.normal(jax.random.key(81), (4, d), dtype=jnp.float64)
    k = 0.5 * ks + 0.3 * vs[::-1] + 0.4 * g[:2]
    v = 0.4 * vs - 0.2 * ks + 0.5 * g[2:]
    k, v = (x / jnp.linalg.norm(x, axis=1, keepdims=True) for x in (k, v))
    k0, v0 = (jnp.broadcast_to(x, (R, 2, d)) for x in (k, v))
    kw = dict(lam=1.0, alpha=0.4, steps=1, batch=3, gamma=GAMMA, L=4, eps=0.3, log_every=1, n_test=100)
    out = {}
    for smp, key in (("coordinates", 82), ("full", 83)):
        for noise in ("independent", "shared"):
            out[smp, noise] = _overlaps(S.train(jax.random.key(key), k0, v0, ks, vs, sampler=smp,
                                                token_noise=noise, **kw))[:, :-1]
    draw = CO.noise  # control: the noise tokens' parts off the heads' span left out (Zp = 0)
    CO.noise = lambda *a: tuple(0.0 * x if i == 3 else x for i, x in enumerate(draw(*a)))
    CO.core.clear_cache()  # the jitted core traces the patched draw
    try:
        for noise in ("independent", "shared"):
            out["no-Zp", noise] = _overlaps(S.train(jax.random.key(82), k0, v0, ks, vs, sampler="coordinates",
                                                    token_noise=noise, **kw))[:, :-1]
    finally:
        CO.noise = draw
        CO.core.clear_cache()
    return out


@pytest.mark.parametrize("noise", ["independent", "shared"])
def test_one_step_law_of_the_overlaps(one_step, noise):
    """The 18 overlaps after one step: means and covariances (189 statistics) agree between the samplers,
    |z| < 5 each (a true claim fails with probability below 189 * 5.7e-7 = 1.1e-4, union bound, z
    approximately normal at 4000 runs). Power controls: the full draw of the other token noise differs, and
    so does the coordinates sampler without the noise tokens' parts off the heads' span (Zp = 0; measured
    max |z| 15.1 and 14.6, against 3.5 and 3.1 with them, float32 draws)."""
    a, b = one_step["coordinates", noise], one_step["full", noise]
    assert np.all(np.isfinite(a)) and a.shape == (4000, 18)
    assert np.max(_z(a, b)) < 5.0, np.max(_z(a, b))
    other = one_step["full", "shared" if noise == "independent" else "independent"]
    assert np.max(_z(a, other)) > 8.0
    assert np.max(_z(one_step["no-Zp", noise], b)) > 8.0


def test_trajectories_match_the_full_draw(monkeypatch):
    """Two heads on two locations, 500 steps of size 0.2 (400 runs from random starts, d = 14): the final
    overlaps and excess risks have the same means under the coordinates and the full samplers (|z| < 4.5
    for 19 statistics: a true claim fails with probability below 19 * 6.8e-6 = 1.3e-4), the runs moved,
    and the final heads in R^d are unit vectors with the logged rho. Shared token noise (the chain is the
    same program for both noises, the token noise a traced flag; one step's law is tested for both above).
    Control: the coordinates sampler without its out-of-span part (Bartlett's T = 0) is told apart
    (measured |z| 10.8, against 2.0 with it, float32 draws)."""
    d, R = 14, 400
    ks, vs = task.sample_oracle_multi(jax.random.key(70), d, 2)
    k0, v0 = P.init_sphere(jax.random.key(71), d, R, H=2)
    kw = dict(lam=P.InverseTime(1.0, 1e-3), alpha=0.2, batch=3, gamma=GAMMA, L=4, eps=0.1, n_test=400,
              steps=500, log_every=250, token_noise="shared")
    run = lambda key, smp: S.train(jax.random.key(key), k0, v0, ks, vs, sampler=smp, **kw)
    co, full = run(72, "coordinates"), _overlaps(run(73, "full"))
    z = lambda a: np.max(np.abs((a.mean(0) - full.mean(0)) / np.sqrt(a.var(0) / R + full.var(0) / R)))
    assert z(_overlaps(co)) < 4.5, z(_overlaps(co))
    assert np.mean(np.abs(co.kappa[:, -1] - co.kappa[:, 0])) > 5e-2
    np.testing.assert_allclose(np.linalg.norm(co.k, axis=-1), 1.0, atol=1e-12)
    np.testing.assert_allclose(np.sum(co.k * co.v, axis=-1), co.rho[:, -1], atol=1e-12)
    draw = CO.noise
    monkeypatch.setattr(CO, "noise", lambda *a: draw(*a)[:-1] + (0.0 * draw(*a)[-1],))  # T = 0
    CO.core.clear_cache()  # the jitted core traces the patched draw
    try:
        assert z(_overlaps(run(72, "coordinates"))) > 4.5
    finally:
        monkeypatch.undo()
        CO.core.clear_cache()


def test_coordinates_sampler_checks_its_arguments():
    """d < 2 n_loc + 4 H and a predictor other than erf heads raise ValueError naming the sampler."""
    ks, vs = task.sample_oracle_multi(jax.random.key(0), 10, 2)
    k0, v0 = P.init_sphere(jax.random.key(1), 10, 2, H=2)
    kw = dict(lam=1.0, alpha=0.1, steps=2, batch=2, gamma=GAMMA, L=3, eps=0.1, log_every=1)
    with pytest.raises(ValueError, match="coordinates"):
        S.train(jax.random.key(2), k0, v0, ks, vs, sampler="coordinates", **kw)
    ks, vs = task.sample_oracle_multi(jax.random.key(0), 16, 1)
    k0, v0 = P.init_sphere(jax.random.key(1), 16, 2, H=1)
    with pytest.raises(ValueError, match="coordinates"):
        S.train(jax.random.key(2), k0, v0, ks, vs, sampler="coordinates", predictor="relu", **kw)
