"""The exact-in-law reduced samplers of stochastic PGD: one erf head on one location (Figure 5), and H
erf heads on n informative tokens (Eq. 31 on Eq. 30, Figure 9).

The mini-batch loss of the erf predictor (Eq. 3) depends on the tokens only through their coordinates
in an orthonormal frame of span{k*, v*, k, v} plus the out-of-span parts of its two gradients, which
are Gaussian given those coordinates. :func:`reduced_grads` draws the mini-batch gradient exactly in
law at a cost of B L 4 + B + 2 d normals instead of the B L d of the full draw (:mod:`slr.task`);
:func:`slr.sgd.train` uses it with ``sampler="reduced"`` (:func:`sampler`: a step's gradients and draws).

Several heads (:func:`multi_grads`): the loss of sum_h erf-heads depends on the tokens only through
their coordinates in an orthonormal frame of S = span{k*_j, v*_j, k_h, v_h} (dimension D = 2n + 2H),
and the same argument applies with a (2H x 2H) covariance for the out-of-span parts of the 2H
gradients. The informative tokens sit at positions 0..n-1: the predictor is a sum over tokens, so the
mini-batch gradient is a symmetric function of each sequence's tokens and its law does not depend on
where the informative tokens are. With ``shared`` the n informative tokens of a sequence share one
noise draw (X_j = sqrt(d/2) k*_j + gamma z with one z, as in the authors' code); else they are
independent (Eq. 30).

Other predictors of one head that read the tokens only through X k and X v (softmax, the sigmoid,
ReLU, linear attention) use the same argument with their coefficients obtained by differentiation
(:func:`projection_coefficients`).

Public traceable kernels (no checks): :func:`loss`, :func:`fallback_directions`, :func:`reduced_noise`,
:func:`projection_coefficients`, :func:`reduced_grads`, :func:`frame`, :func:`multi_noise`, :func:`multi_coordinates`,
:func:`multi_in_span`, :func:`multi_grads`.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from slr import task
from slr._threads import matrix_by_matrix
from slr.predictors import attention_erf

__all__ = ["loss", "fallback_directions", "reduced_noise", "projection_coefficients", "reduced_grads", "frame", "multi_noise",
           "multi_coordinates", "multi_in_span", "noise_sources", "multi_grads",
           "sampler", "r_factor"]

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


def projection_coefficients(f, A, Bv, y, lam):
    """(dl/dA, dl/dBv), each (B, L), of the mean squared error l of a predictor f(X, k, v, lam) that
    reads the tokens only through their projections A = X k and Bv = X v (every component-wise
    activation, softmax): f is evaluated on the 2-D tokens (A_l, Bv_l) with k = e1, v = e2, and
    differentiated. Traceable; no checks."""
    e1, e2 = jnp.eye(2, dtype=A.dtype)

    def mse(a, b):
        return jnp.mean(jnp.square(y - f(jnp.stack([a, b], axis=-1), e1, e2, lam)))
    return jax.grad(mse, argnums=(0, 1))(A, Bv)


def reduced_grads(noise, k, v, ks, vs, w, lam, gamma, L, eps, batch, f=None):
    """Mini-batch gradients of :func:`loss` with exactly the law of the full-d draw. Traceable; no checks.
    ``f``: another predictor that reads the tokens only through X k and X v (its coefficients by
    :func:`projection_coefficients`); None: erf (Eq. 3), with its coefficients written out.

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
    if f is None:
        e = jax.scipy.special.erf(lam * A)
        res = y - jnp.sum(e * Bv, axis=1)  # (B,)
        ca = (-2.0 / batch) * res[:, None] * lam * (2.0 / math.sqrt(math.pi)) * jnp.exp(-jnp.square(lam * A)) * Bv
        cb = (-2.0 / batch) * res[:, None] * e
    else:
        ca, cb = projection_coefficients(f, A, Bv, y, lam)
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


# LAPACK matrix by matrix (slr._threads.matrix_by_matrix: no deadlock when sgd.train runs two halves at once)
_q_factor = matrix_by_matrix(lambda a: jnp.linalg.qr(a)[0])
# r_factor(c): the triangular factor R of c = QR (R^T R = c^T c), batched matrix by matrix; traceable
r_factor = matrix_by_matrix(lambda a: jnp.linalg.qr(a, mode="r"))


def frame(vectors):
    """An orthonormal frame (D, d) whose span holds the D vectors (D, d) (D <= d): the Q factor of
    their Householder QR, orthonormal even when the vectors are linearly dependent (then the frame
    holds directions beyond their span, chosen by the vectors alone). Traceable; no checks."""
    return _q_factor(vectors.T).T


def multi_noise(key, d, L, batch, D, H, n, shared):
    """One step's draws for :func:`multi_grads`: the in-frame token noise (B, L, D), the label noise
    (B,) and the 2H out-of-span normals (2H, d); with ``shared`` the n informative tokens (positions
    0..n-1) of a sequence share token 0's noise. Traceable."""
    kg, kx, kz = jax.random.split(key, 3)
    G = jax.random.normal(kg, (batch, L, D), dtype=jnp.float64)
    G = task.tie_tokens(G, n, shared)  # shared: traced or static
    return G, jax.random.normal(kx, (batch,), dtype=jnp.float64), \
        jax.random.normal(kz, (2 * H, d), dtype=jnp.float64)


def multi_coordinates(Q, ks, vs, G, xi, gamma, eps, d=None):
    """The tokens' frame coordinates C (B, L, D), their noise scales sig (L,) and the labels y (B,) of
    Eq. (30) with the informative tokens at positions 0..n-1 (n = len(ks)), from the draws G, xi of
    :func:`multi_noise`. ``Q`` None: ``ks``, ``vs`` are already coordinates (n, D) and ``d`` the
    dimension of the tokens (:mod:`slr.coordinates`). Traceable; no checks."""
    n = ks.shape[0]
    d = ks.shape[1] if d is None else d
    to = (lambda x: x) if Q is None else (lambda x: x @ Q.T)
    mean = to(math.sqrt(d / 2.0) * ks)  # (n, D): frame coordinates of sqrt(d/2) k*_j
    sig = jnp.where(jnp.arange(G.shape[1]) < n, gamma, 1.0)  # (L,)
    C = sig[:, None] * G + jnp.zeros_like(G).at[:, :n].set(mean)
    y = jnp.einsum("bjm,jm->b", C[:, :n], to(vs)) + eps * xi
    return C, sig, y


def multi_in_span(Q, C, y, k, v, lam):
    """The in-span mini-batch gradients of sum_h erf(lam X.k_h) X.v_h and the coefficients of the tokens.

    With residual r_b = y_b - sum_lh erf(lam A_blh) B_blh (A = X.k, B = X.v), the gradients are
    grad k_h = sum_bl ca_blh X_bl and grad v_h = sum_bl cb_blh X_bl with ca = -(2/B) r lam erf'(lam A) B
    and cb = -(2/B) r erf(lam A). Returns (gk_in (H, d), gv_in (H, d), coef (B, L, 2H) = [ca, cb]): the
    projections of the gradients on span(Q) and the coefficients (``Q`` None: ``k``, ``v`` and the
    gradients in the coordinates of C). Traceable; no checks."""
    batch = C.shape[0]
    to = (lambda x: x) if Q is None else (lambda x: x @ Q.T)
    A, Bv = C @ to(k).T, C @ to(v).T  # (B, L, H)
    e = jax.scipy.special.erf(lam * A)
    res = y - jnp.sum(e * Bv, axis=(1, 2))  # (B,)
    ca = (-2.0 / batch) * res[:, None, None] * lam * (2.0 / math.sqrt(math.pi)) \
        * jnp.exp(-jnp.square(lam * A)) * Bv
    cb = (-2.0 / batch) * res[:, None, None] * e
    g = jnp.einsum("blh,blm->hm", jnp.concatenate([ca, cb], axis=-1), C)
    g = g if Q is None else g @ Q  # (2H, d)
    H = k.shape[0]
    return g[:H], g[H:], jnp.concatenate([ca, cb], axis=-1)


def noise_sources(coef, sig, n, shared):
    """The matrix (sources, 2H) of c_s = sum over the tokens of noise source s of s_bl coef_bl
    (:func:`multi_grads`): one source a token, or with ``shared`` one for the n informative tokens of a
    sequence. The out-of-span parts of the 2H gradients have covariance c^T c (x) (I - P). Traceable."""
    c = coef * sig[None, :, None]  # (B, L, 2H)
    merged = jnp.zeros_like(c).at[:, 0].set(jnp.sum(c[:, :n], axis=1)).at[:, n:].set(c[:, n:])
    return jnp.where(shared, merged, c).reshape(-1, c.shape[-1])  # shared: one source for tokens 0..n-1


def multi_grads(noise, k, v, ks, vs, lam, gamma, eps, shared):
    """Mini-batch gradients (grad k, grad v), each (H, d), of the mean squared error of Eq. (31) on
    Eq. (30) with exactly the law of the full-d draw. Traceable; no checks.

    Q = :func:`frame` of (k*_1..n, v*_1..n, k_1..H, v_1..H), P its projection. Why exact in law: a
    token is X_bl = m_bl + s_bl W_s with m_bl in S (sqrt(d/2) k*_j or 0), s_bl = gamma on an
    informative token and 1 elsewhere, and W_s standard normal d-vectors, one per noise source s (a
    token; with ``shared`` the n informative tokens of a sequence are one source). P W_s and (I - P) W_s
    are independent Gaussian vectors (orthogonal projections of one standard normal), and the labels,
    the scores and hence the coefficients coef_bl (:func:`multi_in_span`) are functions of the frame
    coordinates Q X_bl and the label noise only. So, given them, the out-of-span parts of the 2H
    gradients are (I - P) sum_s c_s W_s with c_s = sum over the tokens of s of s_bl coef_bl: a Gaussian
    with covariance M (x) (I - P), M = sum_s c_s c_s^T = R^T R (R the triangular factor of the QR of
    the matrix of the c_s), which is the law of (I - P) (R^T Z) with Z (2H, d) standard normal. Cost:
    B L D + B + 2H d normals (B L d for the full draw).
    """
    n, H = ks.shape[0], k.shape[0]
    Q = frame(jnp.concatenate([ks, vs, k, v]))
    G, xi, Z = noise
    C, sig, y = multi_coordinates(Q, ks, vs, G, xi, gamma, eps)
    gk, gv, coef = multi_in_span(Q, C, y, k, v, lam)
    c = noise_sources(coef, sig, n, shared)
    g = r_factor(c).T @ Z  # (2H, d): covariance R^T R = c^T c
    g = g - (g @ Q.T) @ Q
    return gk + g[:H], gv + g[H:]


def sampler(key, ks, vs, lam_t, gamma, L, eps, batch, tied, H, f):
    """The reduced sampler of :func:`slr.sgd.train` for H heads on the oracles ks, vs (n, d): ``grads(k, v,
    t, nz)``, the heads' (H, d) gradients at step t from its draws ``nz = noise(t)`` (made from
    ``fold_in(key, t)``). One head on one location: :func:`reduced_grads` (Figure 5; a predictor ``f``
    other than erf by its projections); else :func:`multi_grads` (erf heads). Traceable, no checks."""
    n, d = ks.shape
    if H == n == 1:
        w, g_f = fallback_directions(d), None if f is attention_erf else f
        grads = lambda k, v, t, nz: (g[None] for g in reduced_grads(nz, k[0], v[0], ks[0], vs[0], w, lam_t(t),
                                                                    gamma, L, eps, batch, g_f))
        noise = lambda t: reduced_noise(jax.random.fold_in(key, t), d, L, batch)
    else:
        grads = lambda k, v, t, nz: multi_grads(nz, k, v, ks, vs, lam_t(t), gamma, eps, tied)
        noise = lambda t: multi_noise(jax.random.fold_in(key, t), d, L, batch, 2 * (n + H), H, n, tied)
    return grads, noise
