"""slr.reduced: the exact-in-law reduced sampler of stochastic PGD (one erf head, one location)."""
import math
import re
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from slr import predictors, task
from slr import pgd as P, reduced as RD, sgd as S

GAMMA = math.sqrt(0.5)


def _one_step_grads(sampler, key, k, v, ks, vs, n, *, lam, L, eps, batch):
    """n independent draws of the mini-batch gradient (gk, gv) at (k, v), each shape (n, d)."""
    d = ks.shape[0]
    w = RD.fallback_directions(d)
    grad = jax.grad(RD.loss, argnums=(0, 1))

    def one(kk):
        if sampler == "reduced":
            return RD.reduced_grads(RD.reduced_noise(kk, d, L, batch), k, v, ks, vs, w, lam, GAMMA, L, eps,
                                    batch)
        X, y, _ = task.assemble(task.draws(kk, batch, L=L, d=ks.shape[0]), ks[None], vs[None], gamma=GAMMA, eps=eps)
        return grad(k, v, X, y, lam)

    return jax.jit(jax.vmap(one))(jax.random.split(key, n))


def test_reduced_sampler_one_step_gradient_law():
    """At a generic (k, v) off M, mean and covariance of the mini-batch gradient, projected on
    directions in and out of span{k, v, k*, v*}, agree between the samplers (|z| < 5, 20000 draws)."""
    d, L, n = 12, 4, 20000
    ks, vs = task.sample_oracle(jax.random.key(20), d)
    g = jax.random.normal(jax.random.key(21), (4, d))
    k = 0.6 * ks + 0.3 * vs + g[0] / np.linalg.norm(g[0]) * 0.5
    k = k / jnp.linalg.norm(k)
    v = -0.2 * ks + 0.5 * vs + g[1] / np.linalg.norm(g[1]) * 0.7
    v = v / jnp.linalg.norm(v)
    Q, _ = jnp.linalg.qr(jnp.stack([ks, vs, k, v], axis=1))
    out = g[2:] - (g[2:] @ Q) @ Q.T
    out = out / jnp.linalg.norm(out, axis=1, keepdims=True)
    dirs = jnp.concatenate([Q.T, out, (Q[:, 2] + out[0])[None] / math.sqrt(2)])  # 4 in, 2 out, 1 mixed
    stats = {}
    for sampler, seed in (("reduced", 22), ("full", 23)):
        gk, gv = _one_step_grads(sampler, jax.random.key(seed), k, v, ks, vs, n, lam=0.8, L=L, eps=0.3,
                                 batch=3)
        P = np.asarray(jnp.concatenate([gk @ dirs.T, gv @ dirs.T], axis=1))  # (n, 14)
        assert np.all(np.isfinite(P))
        stats[sampler] = P
    a, b = stats["reduced"], stats["full"]
    # means
    z_mean = (a.mean(0) - b.mean(0)) / np.sqrt(a.var(0) / n + b.var(0) / n)
    # second moments (variances and a set of covariances between projections)
    idx = [(i, j) for i in range(a.shape[1]) for j in range(i, a.shape[1])]
    ca = np.stack([(a[:, i] - a[:, i].mean()) * (a[:, j] - a[:, j].mean()) for i, j in idx], 1)
    cb = np.stack([(b[:, i] - b[:, i].mean()) * (b[:, j] - b[:, j].mean()) for i, j in idx], 1)
    z_cov = (ca.mean(0) - cb.mean(0)) / np.sqrt(ca.var(0) / n + cb.var(0) / n)
    assert np.max(np.abs(z_mean)) < 5, np.max(np.abs(z_mean))
    assert np.max(np.abs(z_cov)) < 5, np.max(np.abs(z_cov))
    # the out-of-span parts are not degenerate: their variance is that of the in-span noise scale
    assert a[:, 4].var() > 0.1 * b[:, 4].var() and a[:, 4].var() < 10 * b[:, 4].var()


def test_reduced_sampler_short_trajectories_match_full():
    """kappa, nu and the excess risks after 300 steps (128 repeats): means and variances agree."""
    d, R = 10, 128
    ks, vs = task.sample_oracle(jax.random.key(30), d)
    k0, v0 = P.init_sphere(jax.random.key(31), d, R)
    kw = dict(lam=P.InverseTime(1.0, 1e-3), alpha=5e-2, steps=300, batch=3, gamma=GAMMA, L=3, eps=0.1,
              log_every=150, n_test=100)
    red = S.sgd(jax.random.key(32), k0, v0, ks, vs, sampler="reduced", **kw)
    full = S.sgd(jax.random.key(33), k0, v0, ks, vs, sampler="full", **kw)
    for f in ("kappa", "nu", "theta", "rho", "excess_risk_closed"):
        a, b = np.asarray(getattr(red, f))[:, -1], np.asarray(getattr(full, f))[:, -1]
        assert np.all(np.isfinite(a))
        z = (a.mean() - b.mean()) / np.sqrt(a.var() / R + b.var() / R)
        assert abs(z) < 4.5, (f, z)
        # the runs moved: a real comparison, not two copies of the start
        assert np.mean(np.abs(a - np.asarray(getattr(red, f))[:, 0])) > 1e-2, f
        ra = np.log(a.var() / b.var())  # log variance ratio, sd ~ sqrt(4 / R) for near-Gaussian data
        assert abs(ra) < 5 * math.sqrt(4.0 / R) + 0.3, (f, ra)


@pytest.mark.parametrize("d", [4, 5])
def test_reduced_sampler_degenerate_span_no_nan(d):
    """k0 = k*, v0 = v* (span{k, v, k*, v*} of dimension 2) and small d: finite, unit iterates."""
    ks, vs = task.sample_oracle(jax.random.key(40), d)
    k0 = jnp.stack([ks, -ks, vs])
    v0 = jnp.stack([vs, vs, ks])
    tr = S.sgd(jax.random.key(41), k0, v0, ks, vs, lam=1.0, alpha=1e-2, steps=50, batch=5, gamma=GAMMA,
               L=3, eps=0.1, log_every=10, n_test=50)
    for f in ("kappa", "nu", "theta", "eta", "rho", "excess_risk", "excess_risk_closed"):
        assert np.all(np.isfinite(np.asarray(getattr(tr, f)))), f
    assert np.all(np.abs(np.asarray(tr.kappa)) <= 1 + 1e-12)
    # the fallback directions are orthonormal to k*, v* and the step still moves off span{k*, v*}
    assert np.max(np.abs(np.asarray(tr.kappa[0, 1:]))) < 1.0


# --- several heads on several locations (Eq. 31 on Eq. 30): slr.reduced.multi_grads ---------------

def _two_heads(d, seed):
    """Two-location oracles and two generic unit heads (off every special set)."""
    ks, vs = task.sample_oracle_multi(jax.random.key(seed), d, 2)
    g = jax.random.normal(jax.random.key(seed + 1), (4, d))
    k = 0.5 * ks + 0.2 * vs[::-1] + 0.4 * g[:2] / np.linalg.norm(g[:2], axis=1, keepdims=True)
    v = 0.3 * vs - 0.2 * ks + 0.5 * g[2:] / np.linalg.norm(g[2:], axis=1, keepdims=True)
    return ks, vs, k / jnp.linalg.norm(k, axis=1, keepdims=True), v / jnp.linalg.norm(v, axis=1, keepdims=True)


@partial(jax.jit, static_argnums=0)
def _multi_deterministic_parts(shared, ks, vs, k, v):
    """The arrays that test_multi_deterministic_parts_agree_with_the_full_draw compares (one program)."""
    d, L, B, lam, eps = 12, 5, 3, 0.7, 0.1
    Q = RD.frame(jnp.concatenate([ks, vs, k, v]))
    Z, _, G, xi = task.draws(jax.random.key(61), B, L=L, d=d, H=2)
    G = jnp.broadcast_to(G[:, :1], G.shape) if shared else G
    X, y, _ = task.assemble((Z, jnp.tile(jnp.arange(2), (B, 1)), G, xi), ks, vs, gamma=GAMMA, eps=eps)
    gk, gv = jax.grad(lambda a, b: jnp.mean((y - predictors.attention_multihead(X, a, b, lam)) ** 2),
                      argnums=(0, 1))(k, v)
    # the frame coordinates of the tokens, recentred and rescaled, are the draws of multi_coordinates
    Gc = (X @ Q.T - jnp.zeros((B, L, 8)).at[:, :2].set(math.sqrt(d / 2) * ks @ Q.T)) \
        / jnp.where(jnp.arange(L) < 2, GAMMA, 1.0)[:, None]
    C, sig, y2 = RD.multi_coordinates(Q, ks, vs, Gc, xi, GAMMA, eps)
    gki, gvi, coef = RD.multi_in_span(Q, C, y, k, v, lam)
    P_ = Q.T @ Q
    out = jnp.einsum("blh,bld->hd", coef, X - X @ P_)
    return dict(Q=Q, X=X, y=y, gk=gk, gv=gv, C=C, y2=y2, gki=gki, gvi=gvi, P_=P_, out=out)


@pytest.mark.parametrize("shared", [False, True])
def test_multi_deterministic_parts_agree_with_the_full_draw(shared):
    """On one full draw (informative tokens at positions 0, 1), the frame coordinates give the labels,
    the in-span gradients, and the out-of-span gradients sum_bl coef_bl (I - P) X_bl, to 1e-12.
    (Computed in one jitted program, compared here in NumPy.)"""
    d, B = 12, 3
    ks, vs, k, v = _two_heads(d, 60)
    r = {name: np.asarray(a) for name, a in _multi_deterministic_parts(shared, ks, vs, k, v).items()}
    Q, X, P_, gk, gv = r["Q"], r["X"], r["P_"], r["gk"], r["gv"]
    np.testing.assert_allclose(Q @ Q.T, np.eye(8), atol=1e-13)
    np.testing.assert_allclose(r["C"], X @ Q.T, atol=1e-12)
    np.testing.assert_allclose(r["y2"], r["y"], atol=1e-12)
    np.testing.assert_allclose(r["gki"], gk @ P_, atol=1e-12)
    np.testing.assert_allclose(r["gvi"], gv @ P_, atol=1e-12)
    np.testing.assert_allclose(r["out"][:2], gk - gk @ P_, atol=1e-12)
    np.testing.assert_allclose(r["out"][2:], gv - gv @ P_, atol=1e-12)
    if shared:  # the two informative tokens share their noise, in and out of the span
        np.testing.assert_allclose(X[:, 0] - X[:, 1],
                                   np.broadcast_to(math.sqrt(d / 2) * (np.asarray(ks[0]) - np.asarray(ks[1])), (B, d)),
                                   atol=1e-12)


def _multi_step_projections(sampler, key, ks, vs, k, v, n, dirs, *, shared, lam, L, eps, batch):
    """n draws of the mini-batch gradients of two heads, projected on ``dirs``: shape (n, 4 len(dirs))."""
    d = ks.shape[1]
    grad = jax.grad(lambda a, b, X, y: jnp.mean((y - predictors.attention_multihead(X, a, b, lam)) ** 2),
                    argnums=(0, 1))

    def one(kk):
        if sampler == "reduced":
            nz = RD.multi_noise(kk, d, L, batch, 8, 2, 2, shared)
            gk, gv = RD.multi_grads(nz, k, v, ks, vs, lam, GAMMA, eps, shared)
        else:  # task.draws: random distinct positions (the reduced sampler puts them at 0 and 1)
            Z, J, G, xi = task.draws(kk, batch, L=L, d=d, H=2)
            G = jnp.broadcast_to(G[:, :1], G.shape) if shared else G
            gk, gv = grad(k, v, *task.assemble((Z, J, G, xi), ks, vs, gamma=GAMMA, eps=eps)[:2])
        return jnp.concatenate([gk, gv]) @ dirs.T

    return np.asarray(jax.jit(jax.vmap(one))(jax.random.split(key, n))).reshape(n, -1)


@pytest.fixture(scope="module")
def multi_law():
    """The two heads and projection directions of the one-step law, and the n = 20 000 projected draws of
    each sampler and noise variant, each computed once: the full draws of one noise variant are one
    parametrisation's reference sample and the other's power control."""
    d, L, n = 12, 4, 20000
    ks, vs, k, v = _two_heads(d, 62)
    Q = RD.frame(jnp.concatenate([ks, vs, k, v]))
    g = jax.random.normal(jax.random.key(63), (2, d))
    out = g - (g @ Q.T) @ Q
    out = out / jnp.linalg.norm(out, axis=1, keepdims=True)
    dirs = jnp.concatenate([Q[4:], out, (Q[6] + out[0])[None] / math.sqrt(2)])  # 4 in, 2 out, 1 across
    done = {}

    def draws(sampler, shared):
        if (sampler, shared) not in done:
            key = jax.random.key(64 if sampler == "reduced" else 65)
            done[sampler, shared] = _multi_step_projections(sampler, key, ks, vs, k, v, n, dirs, shared=shared,
                                                            lam=0.8, L=L, eps=0.3, batch=3)
        return done[sampler, shared]

    return n, draws


@pytest.mark.parametrize("shared", [False, True])
def test_multi_one_step_gradient_law(multi_law, shared):
    """Mean and covariances of the four gradients (two heads), projected on 4 directions in the span,
    2 out of it and 1 across, agree between the reduced and the full draw (20 000 draws each).
    28 projections: 28 means and 406 covariances, two-sided |z| < 5.3 each: a true claim fails with
    probability below 434 * 1.2e-7 = 5e-5 (union bound; z approximately normal at n = 20 000).
    The power control is the full draw of the other noise variant (independent of the reduced draws)."""
    n, draws = multi_law
    a, b = draws("reduced", shared), draws("full", shared)
    assert np.all(np.isfinite(a)) and a.shape == (n, 28)
    z_mean = (a.mean(0) - b.mean(0)) / np.sqrt(a.var(0) / n + b.var(0) / n)
    i, j = np.triu_indices(a.shape[1])
    ca, cb = ((x - x.mean(0))[:, i] * (x - x.mean(0))[:, j] for x in (a, b))
    z_cov = (ca.mean(0) - cb.mean(0)) / np.sqrt(ca.var(0) / n + cb.var(0) / n)
    assert np.max(np.abs(z_mean)) < 5.3 and np.max(np.abs(z_cov)) < 5.3, (np.abs(z_mean).max(), np.abs(z_cov).max())
    # the test has power: the other noise variant is told apart (covariances across the two heads)
    c = draws("full", not shared)
    cc = (c - c.mean(0))[:, i] * (c - c.mean(0))[:, j]
    assert np.max(np.abs((ca.mean(0) - cc.mean(0)) / np.sqrt(ca.var(0) / n + cc.var(0) / n))) > 8


@pytest.mark.parametrize("token_noise", ["independent", "shared"])
def test_multi_short_trajectories_match_full(token_noise):
    """Two heads, 300 steps of stochastic PGD (160 runs): the final overlaps and excess risks have the
    same means under both samplers (two-sample |z| < 4.5 for 6 statistics: a true claim fails with
    probability below 6 * 6.8e-6 = 4e-5), and the runs moved away from their start."""
    d, R = 10, 160
    ks, vs = task.sample_oracle_multi(jax.random.key(70), d, 2)
    k0, v0 = P.init_sphere(jax.random.key(71), d, R, H=2)
    kw = dict(lam=P.InverseTime(1.0, 1e-3), alpha=5e-2, steps=300, batch=3, gamma=GAMMA, L=4, eps=0.1,
              log_every=150, n_test=200, token_noise=token_noise)
    red = S.train(jax.random.key(72), k0, v0, ks, vs, sampler="reduced", **kw)
    full = S.train(jax.random.key(73), k0, v0, ks, vs, sampler="full", **kw)
    stats = lambda lg: {"|kappa|": np.abs(lg.kappa[:, -1]).mean((-1, -2)), "|nu|": np.abs(lg.nu[:, -1]).mean((-1, -2)),
                        "kappa11": lg.kappa[:, -1, 0, 0], "nu22": lg.nu[:, -1, 1, 1], "rho": lg.rho[:, -1, 0],
                        "risk": lg.excess_risk[:, -1]}
    sr, sf = stats(red), stats(full)
    for f in sr:
        a, b = sr[f], sf[f]
        z = (a.mean() - b.mean()) / np.sqrt(a.var() / R + b.var() / R)
        assert abs(z) < 4.5, (f, z)
    assert np.mean(np.abs(red.kappa[:, -1] - red.kappa[:, 0])) > 2e-2


def test_batched_factorisations_call_lapack_matrix_by_matrix():
    """Under vmap (the runs, the heads), the frame's QR and the R factor of multi_grads call LAPACK on
    one matrix at a time, so jaxlib never splits a batch over XLA's thread pool (the split deadlocks
    when sgd.train runs two halves at once: measured with 32 runs of d = 80 per half), with the numbers
    of the unbatched calls. Control: jnp.linalg.qr vmapped is one call on the whole batch."""
    x = jax.random.normal(jax.random.key(0), (3, 5, 8, 80), dtype=jnp.float64)
    c = jax.random.normal(jax.random.key(1), (3, 5, 50, 4), dtype=jnp.float64)
    batch_dims = lambda f, a: set(re.findall(r'num_batch_dims = "(\d+)"', jax.jit(f).lower(a).as_text()))
    for f, a in ((RD.frame, x), (RD.r_factor, c)):
        assert batch_dims(jax.vmap(jax.vmap(f)), a) == {"0"}
        one = np.stack([np.stack([np.asarray(f(m)) for m in row]) for row in a])
        np.testing.assert_array_equal(np.asarray(jax.vmap(jax.vmap(f))(a)), one)
    assert batch_dims(jax.vmap(jax.vmap(lambda v: jnp.linalg.qr(v.T)[0].T)), x) == {"2"}
