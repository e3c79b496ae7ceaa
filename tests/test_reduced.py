"""slr.reduced: the exact-in-law reduced sampler of stochastic PGD (one erf head, one location)."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from slr import task
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
