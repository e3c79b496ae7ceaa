"""The exact-in-law reduced sampler of stochastic PGD (Figure 5): one erf head, one location.

The mini-batch loss of the erf predictor (Eq. 3) depends on the tokens only through their coordinates
in an orthonormal frame of span{k*, v*, k, v} plus the out-of-span parts of its two gradients, which
are Gaussian given those coordinates. :func:`reduced_grads` draws the mini-batch gradient exactly in
law at a cost of B L 4 + B + 2 d normals instead of the B L d of the full draw (:mod:`slr.task`);
:func:`slr.sgd.train` uses it with ``sampler="reduced"``.

Public traceable kernels (no checks): :func:`loss`, :func:`fallback_directions`, :func:`reduced_noise`,
:func:`reduced_grads`.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from slr.predictors import attention_erf

__all__ = ["loss", "fallback_directions", "reduced_noise", "reduced_grads"]

_GS_TOL = 1e-8  # residual norm below which a vector counts as lying in the span (then substituted)
_FALLBACK_SEED = 0x51F5  # the fixed directions completing a degenerate frame (no data randomness)


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
