"""Stochastic PGD of erf heads (Eq. 31 on Eq. 30) in frame coordinates: exactly the law of the runs'
overlaps, at a cost that does not depend on d (``sampler="coordinates"`` of :func:`slr.sgd.train`:
Figure 9, and the angle between keys in ``beyond_open_questions``).

:func:`slr.reduced.multi_grads` draws the mini-batch gradient exactly in law from the tokens'
coordinates in an orthonormal frame of S = span{k*_j, v*_j, k_h, v_h} (dimension D = 2n + 2H) and keeps
the heads in R^d, whose out-of-span parts cost 2H d normals a step. The run's overlaps need less: a step
is equivariant under the rotations of R^d that fix the oracle directions (its token noise is isotropic),
so their law is that of a Markov chain in the Gram matrix of (k*_j, v*_j, k_h, v_h), which this module
simulates in coordinates.

- **State**: the heads' coordinates (H, D) in an orthonormal basis whose first 2n vectors span the
  oracles (fixed: the oracles' coordinates never change) and whose last 2H span the heads' parts
  off the oracles (they move with the heads).
- **One step**: the informative tokens' coordinates (D each), and the noise tokens' coordinates on an
  orthonormal basis Ph (2H, D) of the heads' span (2H each: a noise token's scores and the labels depend on
  it only through them). A noise token's part off the heads' span is independent of them and enters the
  gradients linearly, so the noise tokens' parts off span(Ph) inside the frame are Fn (I - Ph^T Ph) Zp
  with Fn Fn^T = cn^T cn (cn their coefficients) and Zp (2H, D) standard normal. The in-span gradients
  as in :mod:`slr.reduced` (:func:`slr.reduced.multi_coordinates`, :func:`slr.reduced.multi_in_span`).
  The out-of-span parts of the 2H gradients are F Z with F F^T = c^T c
  (:func:`slr.reduced.noise_sources`) and Z (2H, d - D) standard normal. Bartlett's decomposition
  Z = T U, with U (2H, d - D) orthonormal rows and T lower triangular, T_ii^2 ~ chi^2(d - D - i)
  (i = 0..2H-1) and T_ij ~ N(0, 1) below the diagonal, all independent, gives them as the coordinates
  F T on 2H new unit vectors orthogonal to S. Definition 1's step (:func:`slr.pgd.projected_step`) in
  those D + 2H coordinates, then a new basis of the heads' part by Gram-Schmidt: D coordinates again.
- **Cost**: B n D + B (L - n) 2H + B + 2H D + 4 H^2 normals and 2H gamma variates a step, whatever d
  (Figure 9: 293; with every token's D coordinates, B L D + B + 4 H^2 = 421, measured 10% slower on
  2026-11-29; the d-dimensional reduced sampler: B L D + B + 2H d normals and 2H d-vector operations;
  the full draw: B L d normals).

**Precision.** The Gaussian draws of the steps are made in float32 (JAX's inverse-CDF normals) and
used in float64, like every other operation: float64 draws cost 2.4 times as much (measured on the
book's 2-core CPU, 421 normals a step: 2.96 us against 1.23 us a run-step) and were most of a step. The
law changes only by the float32 resolution of the draws: each is one of 2^23 equally likely values (23
random bits), all in [-5.42, 5.22] (:func:`draw_range`; a Gaussian puts 1.2e-7 of its mass outside), 531
of them beyond |z| = 4. ``tests/test_coordinates.py`` tests the law of the overlaps against the full
float64 sampler. The chi^2 variates and the test samples stay float64.

**What is logged.** The overlaps kappa, nu, theta, eta, rho at the logged steps: exactly in law (with
the draws' float32 resolution, above).
The test error: the mean squared error on ``n_test`` test samples whose frame coordinates are drawn
once from the test key (shared by the runs, each with its oracles): at each log exactly the law of the
test error on a fresh batch, but two logs share the coordinates, not a batch of R^d. The final heads
k, v (R, H, d): their coordinates mapped into R^d by the oracles' basis and 2H random orthonormal vectors
orthogonal to it, which is their law when the starts' law is invariant under the rotations that fix the
oracles (as :func:`slr.pgd.init_sphere`'s).

Needs d >= 2n + 4H (the chi^2 degrees of freedom). Traceable kernels, no checks: :func:`orthonormalise`,
:func:`setup`, :func:`noise`, :func:`step`, :func:`reframe`; :func:`core` runs the runs (jitted).
"""
from __future__ import annotations

import itertools
import math
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from slr import loop, reduced, task
from slr.pgd import projected_step
from slr.predictors import attention_multihead
from slr.risk import closed_form

__all__ = ["orthonormalise", "setup", "noise", "step", "reframe", "core", "draw_range", "psd_factor"]

_TOL = 1e-8          # a residual norm below this counts as zero (the vector lies in the span)
_FALLBACK_SEED = 0xC0DE  # fixed directions completing a degenerate basis (no data randomness)
UNROLL = 1


def orthonormalise(vectors, basis, fallback):
    """Orthonormal rows (m, p) spanning, with the orthonormal rows ``basis`` (q, p), the ``vectors`` (m, p):
    Gram-Schmidt twice against ``basis`` and the rows already made; a vector whose residual is below
    ``_TOL`` (in the span) is replaced by the residual of its row of ``fallback`` (m, p). Traceable."""
    out = []
    for x, w in zip(vectors, fallback):  # static count: unrolled
        cur = jnp.concatenate([basis] + [o[None] for o in out])

        def resid(y):
            for _ in range(2):
                y = y - (cur @ y) @ cur
            return y
        r, rw = resid(x), resid(w)
        n = jnp.linalg.norm(r)
        ok = n > _TOL
        out.append(jnp.where(ok, r / jnp.where(ok, n, 1.0), rw / jnp.linalg.norm(rw)))
    return jnp.stack(out)


def _fallback(m, p):
    return jax.random.normal(jax.random.key(_FALLBACK_SEED), (m, p), dtype=jnp.float64)


def setup(k0, v0, ks, vs):
    """One run's coordinates (k, v (H, D), ks, vs (n, D)) and its basis (D, d): the oracles' basis (2n
    rows) then the heads' parts off it (2H rows)."""
    d = ks.shape[-1]
    O = jnp.concatenate([ks, vs])
    Bo = orthonormalise(O, jnp.zeros((0, d)), _fallback(len(O), d))
    S = jnp.concatenate([k0, v0])
    B = jnp.concatenate([Bo, orthonormalise(S, Bo, _fallback(len(O) + len(S), d)[len(O):])])
    return tuple(x @ B.T for x in (k0, v0, ks, vs)) + (B,)


def noise(key, L, batch, D, H, d, n):
    """One step's draws: the informative tokens' coordinates G (B, n, D), the noise tokens' coordinates
    on the heads' span A (B, L - n, 2H), the label noise (B,), the noise tokens' parts in the frame off the
    heads' span before their covariance factor Zp (2H, D), Bartlett's factor T (2H, 2H) of d - D degrees
    of freedom. Traceable."""
    kn, kc = jax.random.split(key)
    p = 2 * H
    sizes = (batch * n * D, batch * (L - n) * p, batch, p * D, p * p)
    # one kernel for the normals, drawn in float32 (module docstring, "Precision") and used in float64
    z = jax.random.normal(kn, (sum(sizes),), dtype=jnp.float32).astype(jnp.float64)
    G, A, xi, Zp, low = jnp.split(z, list(itertools.accumulate(sizes))[:-1])
    chi2 = 2.0 * jax.random.gamma(kc, (d - D - jnp.arange(p, dtype=jnp.float64)) / 2.0, dtype=jnp.float64)
    T = jnp.tril(low.reshape(p, p), -1) + jnp.diag(jnp.sqrt(chi2))
    return G.reshape(batch, n, D), A.reshape(batch, L - n, p), xi, Zp.reshape(p, D), T


def draw_range():
    """(lowest, highest): the interval that holds every float32 normal of :func:`noise` (module
    docstring, "Precision"): JAX's transform sqrt(2) erfinv(u) of the ends of its float32 uniform grid,
    u = nextafter(-1, 0) and the grid's largest point below 1, computed in float32 as JAX computes them."""
    lo = np.nextafter(np.float32(-1.0), np.float32(0.0))
    hi = np.float32(np.float32(1.0 - 2.0 ** -23) * (np.float32(1.0) - lo) + lo)
    z = np.float32(math.sqrt(2.0)) * jax.lax.erf_inv(jnp.array([lo, hi], dtype=jnp.float32))
    return float(z[0]), float(z[1])


def psd_factor(M):
    """Lower triangular C with C C^T = M (M symmetric positive semi-definite, small, unrolled); a pivot
    below 1e-14 of the largest diagonal entry gives a zero column (M singular)."""
    p = M.shape[0]
    tiny = 1e-14 * jnp.max(jnp.diag(M)) + 1e-300
    C = jnp.zeros_like(M)
    for j in range(p):
        s = M[j, j] - jnp.sum(C[j, :j] ** 2)
        ok = s > tiny
        cjj = jnp.sqrt(jnp.where(ok, s, 1.0))
        col = (M[j + 1:, j] - C[j + 1:, :j] @ C[j, :j]) / cjj
        C = C.at[j, j].set(jnp.where(ok, cjj, 0.0)).at[j + 1:, j].set(jnp.where(ok, col, 0.0))
    return C


def reframe(k, v, n):
    """Coordinates (H, D) of heads given in D + 2H coordinates whose first 2n are the oracles' axes: those
    kept, the heads' parts off them in a new orthonormal basis (:func:`orthonormalise`). Traceable."""
    X = jnp.concatenate([k, v])
    p = X.shape[-1]
    Bn = orthonormalise(X.at[:, :2 * n].set(0.0), jnp.eye(p, dtype=X.dtype)[:2 * n], _fallback(len(X), p))
    to = lambda x: jnp.concatenate([x[:, :2 * n], x @ Bn.T], axis=-1)
    return to(k), to(v)


def step(carry, nz, ks, vs, lam, alpha, gamma, eps, d, shared):
    """One step of stochastic PGD in coordinates (module docstring) from the draws ``nz`` of
    :func:`noise`; ``ks``, ``vs`` (n, D) the oracles' coordinates. Traceable."""
    k, v = carry
    (H, D), n = k.shape, ks.shape[0]
    Gi, A, xi, Zp, T = nz
    heads = jnp.concatenate([k, v])
    Ph = orthonormalise(heads, jnp.zeros((0, D), k.dtype), _fallback(2 * H, D))  # (2H, D): the heads' span
    G = task.tie_tokens(jnp.concatenate([Gi, A @ Ph], axis=1), n, shared)      # noise tokens: on span(Ph)
    C, sig, y = reduced.multi_coordinates(None, ks, vs, G, xi, gamma, eps, d=d)
    gk, gv, coef = reduced.multi_in_span(None, C, y, k, v, lam)
    cn = coef[:, n:].reshape(-1, 2 * H)                          # the noise tokens' coefficients (scale 1)
    g_off = psd_factor(cn.T @ cn) @ (Zp - (Zp @ Ph.T) @ Ph)        # their parts off span(Ph), in the frame
    gk, gv = gk + g_off[:H], gv + g_off[H:]
    c = reduced.noise_sources(coef, sig, n, shared)
    gp = psd_factor(c.T @ c) @ T                                     # (2H, 2H): on 2H new unit vectors
    z = jnp.zeros((H, 2 * H), k.dtype)
    wide = lambda a, b: jnp.concatenate([a, b], axis=-1)
    k2, v2 = jax.vmap(projected_step, in_axes=(0, 0, 0, 0, None))(
        wide(k, z), wide(v, z), wide(gk, gp[:H]), wide(gv, gp[H:]), alpha)
    return reframe(k2, v2, n)


@partial(jax.jit, static_argnames=("fn", "n_chunks", "batch", "n_test", "L", "has_rem", "shared_draws",
                                   "per_run", "block"), compiler_options=loop.CLASSIC_EMITTERS)
def core(key_test, keys, k0, v0, ks, vs, lam0, c, alpha, gamma, eps, log_every, rem, t_log, tied, *, fn,
         n_chunks, batch, n_test, L, has_rem, shared_draws, per_run, block=loop.BLOCK):
    """The runs (R) of :func:`slr.sgd.train` with ``sampler="coordinates"``: (lam (T,), (kappa, nu, theta,
    eta, rho), test error minus eps^2 (R, T), final k, v (R, H, d), closed form (one head on one
    location) or None), the outputs of the full-d program."""
    (R, H, d), n = k0.shape, ks.shape[-2]
    D = 2 * n + 2 * H
    lam_t = loop.lam_fn(fn, lam0, c, jnp.float64)
    o = 0 if per_run else None

    def run(key, a, b, s, u):
        kc, vc, ksc, vsc, _ = setup(a, b, s, u)
        one = lambda cr, t, nz: step(cr, nz, ksc, vsc, lam_t(t), alpha, gamma, eps, d, tied)
        nzf = lambda t: noise(jax.random.fold_in(key, t), L, batch, D, H, d, n)
        K, V = loop.run_chunks(one, (kc, vc), lambda cr: cr, n_chunks, log_every, rem if has_rem else None,
                               UNROLL, nzf, block, one_loop=True)
        return K, V, ksc, vsc

    K, V, KS, VS = jax.vmap(run, in_axes=(None if shared_draws else 0, 0, 0, o, o))(keys, k0, v0, ks, vs)
    dot = lambda a, b: jnp.einsum("rthm,rjm->rthj", a, b)                       # (R, T, H, n)
    logs = (dot(K, KS), dot(V, VS), dot(V, KS), dot(K, VS), jnp.sum(K * V, axis=-1))
    lam = lam_t(t_log.astype(jnp.float64))
    # the test samples' coordinates, once, shared by the runs: each run's oracles make its samples
    kg, kx, kb = jax.random.split(key_test, 3)
    Gt = jax.random.normal(kg, (n_test, L, D), dtype=jnp.float64)
    Gt = task.tie_tokens(Gt, n, tied)
    xit = jax.random.normal(kx, (n_test,), dtype=jnp.float64)

    def test_error(Kr, Vr, ksc, vsc):  # one run, every log
        C, _, y = reduced.multi_coordinates(None, ksc, vsc, Gt, xit, gamma, eps, d=d)
        return jax.lax.map(lambda a: jnp.mean((y - attention_multihead(C, a[0], a[1], a[2])) ** 2), (Kr, Vr, lam))

    test = jax.lax.map(lambda a: test_error(*a), (K, V, KS, VS))               # (R, T)
    # the final heads in R^d: the oracles' basis and 2H random unit vectors orthogonal to it
    ws = jax.random.normal(kb, (R, 2 * H, d), dtype=jnp.float64)

    def embed(Kr, Vr, a, b, s, u, w):
        Bo = setup(a, b, s, u)[-1][:2 * n]
        B = jnp.concatenate([Bo, orthonormalise(w, Bo, _fallback(2 * H, d))])
        return Kr[-1] @ B, Vr[-1] @ B
    k_end, v_end = jax.vmap(embed, in_axes=(0, 0, 0, 0, o, o, 0))(K, V, k0, v0, ks, vs, ws)
    closed = None
    if H == n == 1:
        closed = closed_form(*(x[:, :, 0, 0] for x in logs[:4]), logs[4][:, :, 0], lam, gamma, float(d),
                             float(L), eps) - eps ** 2
    return lam, logs, test - eps ** 2, k_end, v_end, closed
