"""Stochastic projected gradient descent (Definition 1 with mini-batch gradients; Figure 5).

Each step draws ``batch`` fresh samples of SLR(k*, v*) (:mod:`slr.task`) and takes the projected
step of Definition 1 (:func:`slr.pgd.projected_step`) on their mean squared error (:func:`loss`).
The default sampler draws the mini-batch gradient exactly in law at a cost of B L 4 + B + 2 d normals
instead of B L d (:func:`reduced_grads`).

Public traceable kernels (no checks): :func:`loss`, :func:`fallback_directions`, :func:`reduced_noise`,
:func:`reduced_grads`. The checked entry: :func:`sgd`.
"""
from __future__ import annotations

import math
from functools import partial

import jax
import jax.numpy as jnp

from slr import _loop, task
from slr._validate import check_int, check_key, check_lam, check_run, check_vectors
from slr.overlaps import overlaps
from slr.pgd import Trajectory, projected_step, split_lam
from slr.predictors import attention_erf
from slr.risk import closed_form

__all__ = ["sgd", "loss", "fallback_directions", "reduced_noise", "reduced_grads", "SAMPLERS"]

SAMPLERS = ("reduced", "full")
_GS_TOL = 1e-8  # residual norm below which a vector counts as lying in the span (then substituted)
_FALLBACK_SEED = 0x51F5  # the fixed directions completing a degenerate frame (no data randomness)
_BLOCK = 50  # steps whose draws are made at once (reduced sampler; 50 and 200 measured alike)
_UNROLL = 4  # inner-loop unrolling of the sgd steps (fig5: 0.33 ms per step of 30 repeats, 1: 0.44 ms)


def loss(k, v, X, y, lam):
    """Mean squared error of the erf predictor (Eq. 3) on a batch (X, y). Traceable; no checks."""
    return jnp.mean(jnp.square(y - attention_erf(X, k, v, lam)))


def fallback_directions(d):
    """The two fixed directions (2, d) completing a degenerate frame in :func:`reduced_grads`."""
    return jax.random.normal(jax.random.key(_FALLBACK_SEED), (2, d), dtype=jnp.float64)


def _safe_unit(x, basis, w):
    """The unit residual of ``x`` against the orthonormal ``basis`` (Gram-Schmidt twice); if that
    residual is below ``_GS_TOL`` (x in the span), the unit residual of the fixed direction ``w``."""
    def resid(y):
        for _ in range(2):
            for q in basis:
                y = y - jnp.sum(q * y, axis=-1) * q
        return y
    r, rw = resid(x), resid(w)
    n, nw = jnp.linalg.norm(r), jnp.linalg.norm(rw)
    ok = n > _GS_TOL
    return jnp.where(ok, r / jnp.where(ok, n, 1.0), rw / nw)


def reduced_noise(key, d, L, batch):
    """One step's draws for :func:`reduced_grads`: (B L 4 + B + 2 d standard normals, B locations)."""
    kn, kj = jax.random.split(key)
    return (jax.random.normal(kn, (batch * L * 4 + batch + 2 * d,), dtype=jnp.float64),
            jax.random.randint(kj, (batch,), 0, L))


def reduced_grads(noise, k, v, ks, vs, w, lam, gamma, L, eps, batch):
    """Mini-batch gradients of :func:`loss` with exactly the law of the full-d draw. Traceable; no checks.

    The loss depends on the tokens only through their coordinates in an orthonormal frame Q (4, d) of
    S = span{k*, v*, k, v} (Q[0] = k*, Q[1] = v*; a degenerate span is completed by the fixed
    directions ``w``, :func:`fallback_directions`). grad_k = sum_il a_il X_il and
    grad_v = sum_il b_il X_il with coefficients depending only on those coordinates and the label noise;
    the out-of-span parts (I - P) X_il = sigma_il (I - P) Z_il are independent of them (Gaussian
    vectors: orthogonal projections of a standard normal are independent), so the out-of-span parts of
    (grad_k, grad_v) are (I - P) times a Gaussian pair with covariance
    [[sum a^2 s^2, sum ab s^2], [sum ab s^2, sum b^2 s^2]] (x) I_d (s = gamma on the informative token,
    1 elsewhere): two d-vectors and a 2x2 Cholesky factor. Cost: B L 4 + B + 2 d normals (B L d for
    the full draw).
    """
    d = ks.shape[0]
    u3 = _safe_unit(k, (ks, vs), w[0])
    u4 = _safe_unit(v, (ks, vs, u3), w[1])
    Q = jnp.stack([ks, vs, u3, u4])  # (4, d), orthonormal
    ck, cv = Q @ k, Q @ v
    G, J0 = noise
    n4 = batch * L * 4
    onehot = J0[:, None] == jnp.arange(L)  # (B, L)
    sig = jnp.where(onehot, gamma, 1.0)
    mean = jnp.zeros(4).at[0].set(math.sqrt(d / 2.0))
    C = sig[..., None] * G[:n4].reshape(batch, L, 4) \
        + jnp.where(onehot[..., None], mean, 0.0)  # (B, L, 4): coordinates of the tokens
    y = jnp.sum(jnp.where(onehot, C[..., 1], 0.0), axis=1) \
        + eps * G[n4:n4 + batch]
    A, Bv = C @ ck, C @ cv  # X.k, X.v: (B, L)
    e = jax.scipy.special.erf(lam * A)
    res = y - jnp.sum(e * Bv, axis=1)  # (B,)
    ca = (-2.0 / batch) * res[:, None] * lam * (2.0 / math.sqrt(math.pi)) * jnp.exp(-jnp.square(lam * A)) * Bv
    cb = (-2.0 / batch) * res[:, None] * e
    gk_in = jnp.einsum("bl,blm->m", ca, C)
    gv_in = jnp.einsum("bl,blm->m", cb, C)
    s2 = jnp.square(sig)
    s11, s12, s22 = jnp.sum(ca * ca * s2), jnp.sum(ca * cb * s2), jnp.sum(cb * cb * s2)
    pos = s11 > 0.0
    l11 = jnp.sqrt(s11)
    l21 = jnp.where(pos, s12 / jnp.where(pos, l11, 1.0), 0.0)
    l22 = jnp.sqrt(jnp.maximum(s22 - jnp.square(l21), 0.0))
    z = G[n4 + batch:].reshape(2, d)
    g = jnp.stack([l11 * z[0], l21 * z[0] + l22 * z[1]])  # (2, d)
    g = g - (g @ Q.T) @ Q  # (I - P)
    return Q.T @ gk_in + g[0], Q.T @ gv_in + g[1]


def _sgd_single(key, k0, v0, ks, vs, w, lam0, c, alpha, gamma, L, eps, log_every, rem, *, fn, n_chunks,
                batch, unroll, sampler):
    lam_fn = _loop.lam_fn(fn, lam0, c, jnp.float64)
    grad = jax.grad(loss, argnums=(0, 1))
    reduced = sampler == "reduced" and ks.shape[0] >= 4  # d < 4: no 4-D frame, the full draw is as cheap

    if reduced:
        d = ks.shape[0]

        def step(cr, t, nz):
            k, v = cr
            gk, gv = reduced_grads(nz, k, v, ks, vs, w, lam_fn(t), gamma, L, eps, batch)
            return projected_step(k, v, gk, gv, alpha)

        noise = lambda t: reduced_noise(jax.random.fold_in(key, t), d, L, batch)
        return _loop.run_chunks(step, (k0, v0), lambda cr: cr, n_chunks, log_every, rem, unroll, noise=noise,
                                block=_BLOCK)

    def body(cr, t):
        k, v = cr
        X, y, _ = task.assemble(task.draws(jax.random.fold_in(key, t), batch, L=L, d=ks.shape[0]), ks[None],
                                vs[None], gamma=gamma, eps=eps)
        gk, gv = grad(k, v, X, y, lam_fn(t))
        return projected_step(k, v, gk, gv, alpha)

    # log the iterates themselves: the test loss is evaluated after the scan, for all repeats at once
    return _loop.run_chunks(body, (k0, v0), lambda cr: cr, n_chunks, log_every, rem, unroll)


@partial(jax.jit, static_argnames=("fn", "n_chunks", "batch", "n_test", "L", "unroll", "batched",
                                   "has_rem", "sampler"))
def _sgd_core(key_test, keys, k0, v0, ks, vs, lam0, c, alpha, gamma, eps, log_every, rem, t_log, *, fn,
              n_chunks, batch, n_test, L, unroll, batched, has_rem, sampler):
    w = fallback_directions(ks.shape[0])
    run = lambda kk, a, b: _sgd_single(kk, a, b, ks, vs, w, lam0, c, alpha, gamma, L, eps, log_every,
                                       rem if has_rem else None, fn=fn, n_chunks=n_chunks, batch=batch,
                                       unroll=unroll, sampler=sampler)
    K, V = jax.vmap(run)(keys, k0, v0) if batched else run(keys, k0, v0)  # (..., T, d)
    lam = _loop.lam_fn(fn, lam0, c, jnp.float64)(t_log.astype(jnp.float64))
    ov = overlaps(K, V, ks, vs)
    closed = closed_form(*ov, lam, gamma, float(ks.shape[0]), float(L), eps) - eps ** 2
    # one fixed test batch shared by the repeats (Figure 5): one matmul per logged step
    Xt, yt, _ = task.assemble(task.draws(key_test, n_test, L=L, d=ks.shape[0]), ks[None], vs[None],
                              gamma=gamma, eps=eps)
    Kb, Vb = (x if batched else x[None] for x in (K, V))

    def test_loss(args):
        Kr, Vr, l = args  # (R, d), (R, d), ()
        pred = jnp.sum(jax.scipy.special.erf(l * (Xt @ Kr.T)) * (Xt @ Vr.T), axis=1)  # (n, R)
        return jnp.mean(jnp.square(yt[:, None] - pred), axis=0)

    test = jax.lax.map(test_loss, (jnp.moveaxis(Kb, -2, 0), jnp.moveaxis(Vb, -2, 0), lam)).T  # (R, T)
    test = test if batched else test[0]
    return ov + (test - eps ** 2, closed)


def sgd(key, k0, v0, k_star, v_star, *, lam, alpha, steps, batch, gamma, L, eps, log_every,
        n_test=1000, sampler="reduced") -> Trajectory:
    """Stochastic projected gradient descent (Definition 1 with mini-batch gradients; Figure 5).

    Args:
        key: JAX PRNG key (split into the fixed test batch, shared by the repeats, and one training
            stream per repeat).
        k0, v0: unit vectors, shape (d,) or (R, d) (repeats vectorised with ``vmap``).
        k_star, v_star, lam, alpha, steps, gamma, L, eps, log_every: as in :func:`slr.pgd.pgd`.
        batch: mini-batch size >= 1. n_test: size of the fixed test batch >= 1.
        sampler: how a mini-batch gradient is drawn. ``"full"``: the B L d token entries themselves
            (:mod:`slr.task`). ``"reduced"`` (default): :func:`reduced_grads`, the tokens' coordinates
            in an orthonormal frame of span{k, v, k*, v*} plus the out-of-span parts of the two
            gradients: the gradients, hence the whole trajectory, have exactly the law of the full draw
            (not the same draws: the two samplers use the random stream differently). A degenerate span
            (e.g. a start at k*, v*) is completed by fixed directions; for d < 4 the full draw is used.

    Returns:
        A :class:`slr.pgd.Trajectory` whose ``excess_risk`` is the test-batch estimate of R - eps^2
        (Figure 5 convention) and ``excess_risk_closed`` the closed form (Proposition 15).
    """
    check_key("key", key)
    lam = check_lam(lam, check_int("steps", steps, lo=1))
    check_run(alpha=alpha, gamma=gamma, L=L, eps=eps, log_every=log_every)
    check_int("batch", batch, lo=1)
    check_int("n_test", n_test, lo=1)
    if not isinstance(sampler, str) or sampler not in SAMPLERS:
        raise ValueError(f"sampler must be one of {SAMPLERS}, got {sampler!r}")
    k0, v0, ks, vs, d = check_vectors(k0, v0, k_star, v_star)
    if d < 2:
        raise ValueError(f"d must be >= 2 for sgd (k_star and v_star orthogonal), got {d}")
    key_test, key_train = jax.random.split(key)
    keys = jax.random.split(key_train, k0.shape[0]) if k0.ndim == 2 else key_train
    fn, lam0, c = split_lam(lam)
    n_chunks, rem = _loop.schedule(int(steps), int(log_every))
    t_log = _loop.log_steps(int(steps), int(log_every))
    out = _sgd_core(key_test, keys, jnp.asarray(k0), jnp.asarray(v0), jnp.asarray(ks), jnp.asarray(vs), lam0, c,
                    float(alpha), float(gamma), float(eps), int(log_every), int(rem or 0),
                    jnp.asarray(t_log), fn=fn, n_chunks=n_chunks, batch=int(batch), n_test=int(n_test),
                    L=int(L), unroll=_UNROLL, batched=k0.ndim == 2, has_rem=rem is not None, sampler=sampler)
    return Trajectory(t_log, *out)
