"""The landscape of R_lam off the manifold M: the role-swapped stationary point, the global minimiser
on S^{d-1} x S^{d-1}, and the end points of PGD (the book's own results; the risk is Proposition 15).

The *role-swapped* point has k = +-v* (kappa = 0, eta = +-1, rho = 0) and v = theta k* + sqrt(1 - theta^2) w
with w orthogonal to k*, v* (nu = 0): the key reads the value direction, the value reads the key
direction. On it a = lam sqrt(d/2) kappa = 0, so every Gaussian-erf function of Proposition 15 is
explicit and, with b = lam gamma, r = sqrt(d/2),

    R(theta) = eps^2 + gamma^2 (1 + zeta0(b)) + (L - 1) zeta0(lam) - 2 gamma^2 lam r theta phi1(0; b)
               + r^2 theta^2 zeta0(b),

a quadratic in theta minimised at theta* = gamma^2 lam phi1(0; b) / (r zeta0(b)) (clipped to 1).

- :func:`swap_theta`, :func:`swap_risk`: theta* and the risk there (exact); :func:`swap_theta_linear`,
  :func:`swap_risk_linear`: the same with erf replaced by its tangent 2x/sqrt(pi) at 0.
- :func:`crossover`: lam_c(d), the root of swap_risk - oracle_risk.
- :func:`riemannian_derivatives`: the Riemannian gradient and every eigenvalue of the Riemannian Hessian
  of R_lam on S^{d-1} x S^{d-1} at given overlaps (exact in R^5, d a scalar).
- :func:`random_overlaps`: overlaps of independent uniform k, v in R^dim (starts of a global search);
  :func:`global_minimum`: a multi-start search of the minimum of R_lam on the product of spheres;
  :func:`pgd_search`: the same search by exact PGD (Definition 1) from many starts.
- :func:`classify`: the kind of an end point (oracle, role-swapped, other) by a rule on all five overlaps;
  :func:`swap_deviation`: how far a point is from the role-swapped point, overlap by overlap.
- :func:`transverse_hessian`: the Hessian of R_lam in the two directions that leave M at first order
  at a corner (+-1, +-1) of M (rotate k towards v*, v towards k*): the transversal stability of M.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from scipy.optimize import brentq, minimize

from slr import cache, loop
from slr._minimize import bfgs_together
from slr import gaussian as G
from slr._validate import (check_int, check_interval, check_key, check_open_interval, check_positive,
                           check_positive_array, check_run)
from slr.overlaps import NAMES, dist_manifold, gram_vectors
from slr.risk import closed_form

__all__ = ["swap_theta", "swap_theta_linear", "swap_risk", "swap_risk_linear", "crossover",
           "riemannian_derivatives", "random_overlaps", "global_minimum", "pgd_search", "classify", "point_masks",
           "KINDS", "swap_deviation", "transverse_hessian", "risk8_value_grad", "risk8_value_grad_rows"]

KINDS = ("oracle", "role-swapped", "other")
_C = 2.0 / math.sqrt(math.pi)  # erf'(0): erf(x) = C x + O(x^3)


def _check(lam, gamma, d, L=None, eps=None):
    check_positive_array("lam", lam)
    check_positive("gamma", gamma)
    check_positive("d", d)
    if not d >= 1:
        raise ValueError(f"d must be >= 1, got {d!r}")
    check_run(L=L, eps=eps)
    return np.asarray(lam, dtype=float)


def swap_theta(lam, *, gamma, d):
    """theta* = min(1, gamma^2 lam phi1(0; lam gamma) / (sqrt(d/2) zeta0(lam gamma))): the theta of the
    role-swapped stationary point (exact; broadcasts over lam). At theta* < 1, dR/dtheta = 0; at
    theta* = 1 the point (k, v) = (v*, k*) is stationary because theta = 1 is the edge of [-1, 1]."""
    lam = _check(lam, gamma, d)
    b = lam * gamma
    t = gamma ** 2 * lam * np.asarray(G.phi1(0.0, b)) / (math.sqrt(d / 2) * np.asarray(G.zeta0(b)))
    return np.minimum(t, 1.0)[()]


def swap_theta_linear(lam, *, d):
    """theta* with erf linearised at 0: min(1, sqrt(pi) / (2 lam sqrt(d/2))) (the informative token's
    prediction (2/sqrt(pi)) lam theta sqrt(d/2) Y equals Y at theta = 1 when lam = sqrt(pi)/(2 sqrt(d/2)))."""
    lam = _check(lam, 1.0, d)
    return np.minimum(1.0 / (_C * lam * math.sqrt(d / 2)), 1.0)[()]


def swap_risk(lam, *, gamma, d, L, eps=0.0):
    """R_lam at the role-swapped point (0, 0, theta*, 1, 0), exact (Proposition 15)."""
    theta = swap_theta(lam, gamma=gamma, d=d)
    check_run(L=L, eps=eps)
    return np.asarray(closed_form(0.0, 0.0, theta, 1.0, 0.0, np.asarray(lam, float), gamma, float(d), L, eps))[()]


def swap_risk_linear(lam, *, gamma, d, L, eps=0.0):
    """The role-swapped risk with erf replaced by C x, C = 2/sqrt(pi), at theta = swap_theta_linear:

        eps^2 + gamma^2 (1 - C lam sqrt(d/2) theta)^2 + C^2 lam^2 (gamma^4 + L - 1),

    which is eps^2 + (4 lam^2 / pi)(L - 1 + gamma^4) once theta < 1 (lam > sqrt(pi) / (2 sqrt(d/2))).
    Valid for lam << 1 (the first order in lam^2 of the exact risk)."""
    lam = _check(lam, gamma, d, L, eps)
    theta = swap_theta_linear(lam, d=d)
    return (eps ** 2 + gamma ** 2 * (1 - _C * lam * math.sqrt(d / 2) * theta) ** 2
            + _C ** 2 * lam ** 2 * (gamma ** 4 + L - 1))[()]


def _gap_kernel(lam, gamma, d, L, eps):
    b = lam * gamma
    theta = jnp.minimum(gamma ** 2 * lam * G.phi1(0.0, b) / (jnp.sqrt(d / 2) * G.zeta0(b)), 1.0)
    return (closed_form(0.0, 0.0, theta, 1.0, 0.0, lam, gamma, d, L, eps)
            - closed_form(1.0, 1.0, 0.0, 0.0, 0.0, lam, gamma, d, L, eps))


_gap_jit = jax.jit(_gap_kernel)


def _gap(lam, gamma, d, L, eps):  # one compiled program for the grid and for Brent's scalars
    return loop.in_blocks(_gap_jit, (lam, gamma, d, L, eps), 256)


def crossover(d, *, gamma, L, eps=0.0, grid: int = 200):
    """lam_c(d): the largest root of R_swap(lam) - R_oracle(lam) (the role-swapped point has the lower
    risk just below it, the oracle just above), found on a geometric grid of ``grid`` points in
    [1e-2, 20] / sqrt(d) and refined by Brent's method. ValueError if the grid shows no sign change."""
    _check(1.0, gamma, d, L, eps)
    grid = check_int("grid", grid, lo=3)
    lams = np.geomspace(1e-2, 20.0, grid) / math.sqrt(d)
    gaps = _gap(lams, gamma, d, L, eps)
    neg = np.nonzero(gaps < 0)[0]
    if neg.size == 0 or neg[-1] == grid - 1:
        raise ValueError(f"no crossover in lam in [{lams[0]:.3g}, {lams[-1]:.3g}] for d={d!r}")
    i = neg[-1]
    return brentq(lambda x: float(_gap(x, gamma, d, L, eps)), lams[i], lams[i + 1], xtol=1e-14, rtol=1e-13)


def _complement(x):
    """Rows: an orthonormal basis of x^perp in R^5 (Householder QR of [x, I])."""
    q, _ = jnp.linalg.qr(jnp.concatenate([x[:, None], jnp.eye(x.shape[0])], axis=1))
    return q[:, 1:].T


def _pullback_derivs(kappa, nu, theta, eta, rho, lam, gamma, d, L, eps):
    ks, vs, k, v = gram_vectors(kappa, nu, theta, eta, rho, 5)
    tk, tv = _complement(k), _complement(v)

    def pulled(x):  # R through the retraction x -> (x + xi) / |x + xi|, second order on the sphere
        kk, vv = k + x[:4] @ tk, v + x[4:] @ tv
        kk, vv = kk / jnp.linalg.norm(kk), vv / jnp.linalg.norm(vv)
        return closed_form(kk @ ks, vv @ vs, vv @ ks, kk @ vs, kk @ vv, lam, gamma, d, L, eps)

    z = jnp.zeros(8)
    return jax.grad(pulled)(z), jnp.linalg.eigvalsh(jax.hessian(pulled)(z))


_derivs_jit = jax.jit(jax.vmap(_pullback_derivs))
_DERIVS_BLOCK = 64  # points per call of _derivs_jit: one compilation for any number of points


def riemannian_derivatives(kappa, nu, theta, eta, rho, *, lam, gamma, d, L, eps=0.0):
    """(gradient, eigenvalues): the Riemannian gradient of R_lam on S^{d-1} x S^{d-1} in an orthonormal
    basis of the tangent space, shape (..., 8), and all eigenvalues of the Riemannian Hessian in
    increasing order, shape (..., 8), at vectors with the given overlaps (arrays broadcast).

    Computed in R^5 (span{k*, v*, k, v} plus one orthogonal direction, whose eigenvalue is that of all
    d - 4 orthogonal ones; :func:`slr.overlaps.gram_vectors`): the Hessian of R o (R_k x R_v) at 0, with
    R_x(xi) = (x + xi)/|x + xi| the projection retraction, which is of second order, so that this is
    the Riemannian Hessian at every point (not only at critical points).
    """
    for name, val in zip(NAMES, (kappa, nu, theta, eta, rho)):
        check_interval(name, val, -1.0, 1.0, atol=1e-9)
    _check(lam, gamma, d, L, eps)
    clipped = (np.clip(np.asarray(x, np.float64), -1.0, 1.0) for x in (kappa, nu, theta, eta, rho))
    # blocks of _DERIVS_BLOCK points, each a call of one compiled program (a compilation per shape of the
    # points cost about 4 s on the slowest CPU the book ran on, four of them in the landscape chapter); the
    # values are those of a call on the points' own shape up to round-off, not bit for bit
    return loop.in_blocks(_derivs_jit, (*clipped, lam, gamma, d, L, eps), _DERIVS_BLOCK)


def random_overlaps(key, n, *, dim: int = 4):
    """Overlaps (kappa, nu, theta, eta, rho), each of shape (n,), of n independent pairs (k, v) uniform on
    S^{dim-1} x S^{dim-1} with k* = e1, v* = e2: starts spread over the whole landscape (dim = 4: the
    4-D frame of PGD) instead of the near-orthogonal starts of a uniform point of S^{d-1}, d large."""
    check_key("key", key)
    n = check_int("n", n)
    dim = check_int("dim", dim, lo=2)
    g = np.asarray(jax.random.normal(key, (2, n, dim), dtype=jnp.float64))
    k, v = g / np.linalg.norm(g, axis=-1, keepdims=True)
    return k[:, 0], v[:, 1], v[:, 0], k[:, 1], np.sum(k * v, axis=-1)


def _risk8(x, lam, gamma, d, L, eps):
    k, v = x[:4] / jnp.linalg.norm(x[:4]), x[4:] / jnp.linalg.norm(x[4:])
    return closed_form(k[0], v[1], v[0], k[1], k @ v, lam, gamma, d, L, eps)


# risk8_value_grad(x, lam, gamma, d, L, eps): the closed-form risk of the heads k = x[:4], v = x[4:] (each
# normalised) in the 4-D frame (k*, v*, e3, e4), and its gradient in x (jitted)
risk8_value_grad = jax.jit(jax.value_and_grad(_risk8))
# a block of (x, lam) evaluated in one call: lax.map runs the unbatched program on each row (every
# argument traced, as in risk8_value_grad), so each value and gradient is bit for bit that of risk8_value_grad
# (tests/test_landscape.py checks it; vmap would vectorise the arithmetic and change the last bits)
risk8_value_grad_rows = jax.jit(lambda X, lams, gamma, d, L, eps: jax.lax.map(
    lambda a: jax.value_and_grad(_risk8)(a[0], a[1], gamma, d, L, eps), (X, lams)))
_BLOCK = 64  # rows per call of risk8_value_grad_rows: one compilation for any number of starts


def _minimize_all(x0, lams, args, options):
    """BFGS from each row of ``x0`` (n, 8) at its ``lams`` (n,), the evaluations batched
    (:func:`slr._minimize.bfgs_together`): bit for bit n sequential calls of ``minimize`` on risk8_value_grad."""
    return bfgs_together(lambda X, P: risk8_value_grad_rows(X, P, *args), x0, lams, options, block=_BLOCK)


@cache.memoized
def global_minimum(lam, *, gamma, d, L, eps=0.0, starts: int = 32, seed: int = 0):
    """Multi-start minimisation of R_lam over S^3 x S^3 (the 4-D frame, k* = e1, v* = e2; d a scalar):
    BFGS on R(x/|x|, y/|y|) from ``starts`` Gaussian points (x, y), for each lam of a 1-D array.

    Returns a dict: ``lam``; ``risk`` (n,), the lowest risk found; ``overlaps`` (n, 5), where;
    ``ends`` (n, starts), every start's final risk. Memoised (:func:`slr.cache.memoized`).
    Every (lam, start) pair runs scipy's BFGS in its own thread, the risk and gradient of all of them
    evaluated together (:func:`_minimize_all`): the same numbers as one minimisation after another."""
    lams = np.atleast_1d(_check(lam, gamma, d, L, eps))
    starts, seed = check_int("starts", starts), check_int("seed", seed, lo=0)
    x0 = np.random.default_rng(seed).standard_normal((starts, 8))
    res_all = _minimize_all(np.tile(x0, (lams.size, 1)), np.repeat(lams, starts),
                            (gamma, float(d), L, eps), dict(gtol=1e-10))
    best, where, ends = [], [], []
    for j in range(lams.size):
        res = res_all[j * starts:(j + 1) * starts]
        i = int(np.argmin([r.fun for r in res]))
        k, v = (res[i].x[s] / np.linalg.norm(res[i].x[s]) for s in (slice(0, 4), slice(4, 8)))
        best.append(res[i].fun)
        where.append([k[0], v[1], v[0], k[1], k @ v])
        ends.append([r.fun for r in res])
    return dict(lam=lams, risk=np.array(best), overlaps=np.array(where), ends=np.array(ends))


@cache.memoized
def pgd_search(lam, *, gamma, d, L, n: int = 40, alpha: float = 2e-3, steps: int = 20_000, seed: int = 0):
    """Exact PGD (:func:`slr.pgd.pgd_overlaps`, constant lam) from ``n`` starts spread over the landscape
    (:func:`random_overlaps` with ``jax.random.key(seed)``): a dict with the end ``overlaps`` (5, n) and
    the end ``risk`` (n,) (eps = 0). Memoised."""
    from slr.pgd import pgd_overlaps

    o0 = random_overlaps(jax.random.key(check_int("seed", seed, lo=0)), n)
    tr = pgd_overlaps(o0, lam0=lam, alpha=alpha, d=d, steps=steps, gamma=gamma, L=L, log_every=steps)
    ends = np.stack([np.asarray(getattr(tr, f))[:, -1] for f in NAMES])
    return dict(overlaps=ends, risk=np.asarray(tr.excess_risk)[:, -1])


def classify(kappa, nu, theta, eta, rho, *, lam, gamma, d, tol: float = 0.2):
    """The kind of each point, an array of strings from :data:`KINDS`, by this rule on the overlaps:

    - "oracle": near M (sqrt(theta^2 + eta^2 + rho^2) <= tol), |nu| >= 1 - tol and kappa nu > 0
      (kappa may stay below 1: at large lam the risk on M is flat in kappa once erf saturates);
    - "role-swapped": |eta| >= 1 - tol, |kappa|, |nu|, |rho| <= tol, theta eta > 0 and
      ||theta| - theta*(lam)| <= tol (:func:`swap_theta`);
    - "other": everything else.
    """
    o = [np.asarray(x, dtype=float) for x in (kappa, nu, theta, eta, rho)]
    for name, val in zip(NAMES, o):
        check_interval(name, val, -1.0, 1.0, atol=1e-9)
    tol = float(tol)
    check_open_interval("tol", tol, 0.0, 0.5)
    oracle, swap = point_masks(*np.broadcast_arrays(*o), theta_star=swap_theta(lam, gamma=gamma, d=d), tol=tol)
    return np.where(oracle, KINDS[0], np.where(swap, KINDS[1], KINDS[2]))


def point_masks(kappa, nu, theta, eta, rho, *, theta_star, tol):
    """(at the oracle point, at the role-swapped point): the two boolean rules of :func:`classify`, with the
    role-swapped point's theta* given (:func:`swap_theta`) and no argument checks. Traceable (JAX arrays or
    tracers in, JAX out; NumPy in, NumPy out), so that a training loop can read it at every step
    (:mod:`slr.appendix_f`)."""
    xp = jnp if any(isinstance(x, jax.Array) for x in (kappa, nu, theta, eta, rho)) else np
    k, n, t, e, r = kappa, nu, theta, eta, rho
    oracle = (dist_manifold(t, e, r) <= tol) & (xp.abs(n) >= 1 - tol) & (k * n > 0)
    swap = ((xp.abs(e) >= 1 - tol) & (xp.maximum(xp.maximum(xp.abs(k), xp.abs(n)), xp.abs(r)) <= tol)
            & (t * e > 0) & (xp.abs(xp.abs(t) - theta_star) <= tol))
    return oracle, swap


def swap_deviation(kappa, nu, theta, eta, rho, *, lam, gamma, d):
    """How far each point is from the role-swapped point (0, 0, theta*(lam), 1, 0) or its images
    under the sign symmetries (theta eta > 0), all five overlaps read: an array of shape (3, ...)
    with max(|kappa|, |nu|, |rho|), |theta - sign(eta) theta*(lam)| (:func:`swap_theta`) and
    |1 - |eta|| (|eta| may exceed 1 by round-off). All three are 0 at the point; :func:`classify`
    calls a point role-swapped when they are within its tolerance (provided theta*(lam) > tol, so
    that |theta - sign(eta) theta*| <= tol implies theta eta > 0)."""
    o = [np.asarray(x, dtype=float) for x in (kappa, nu, theta, eta, rho)]
    for name, val in zip(NAMES, o):
        check_interval(name, val, -1.0, 1.0, atol=1e-9)
    k, n, t, e, r = np.broadcast_arrays(*o)
    ts = swap_theta(lam, gamma=gamma, d=d)
    return np.stack([np.maximum(np.maximum(np.abs(k), np.abs(n)), np.abs(r)),
                     np.abs(t - np.sign(e) * ts), np.abs(1.0 - np.abs(e))])


def _transverse(ab, s, lam, gamma, d, L, eps):
    a, b = ab[0], ab[1]  # k = cos a s0 k* + sin a v*, v = cos b s1 v* + sin b k*
    return closed_form(s[0] * jnp.cos(a), s[1] * jnp.cos(b), jnp.sin(b), jnp.sin(a),
                       s[0] * jnp.cos(a) * jnp.sin(b) + s[1] * jnp.sin(a) * jnp.cos(b),
                       lam, gamma, d, L, eps)


_transverse_hess = jax.jit(jax.vmap(jax.hessian(_transverse), in_axes=(None, None, 0, None, None, None, None)))


def transverse_hessian(lam, *, gamma, d, L, eps=0.0, corner=(1, 1)):
    """The 2 x 2 Hessian of R_lam, shape (..., 2, 2) for an array ``lam``, in the angles (a, b) of
    k = cos(a) k0 + sin(a) v*, v = cos(b) v0 + sin(b) k* at the corner (k0, v0) = (s0 k*, s1 v*) of M
    (``corner`` = (s0, s1), signs). The overlaps are (s0 cos a, s1 cos b, sin b, sin a,
    s0 cos a sin b + s1 sin a cos b): at a = b = 0 these are the only tangent directions that leave M at
    first order, and the corner is a critical point on S^{d-1} x S^{d-1} (M is invariant, Lemma 4), so
    this is the transverse block of the Riemannian Hessian. PGD's linearisation multiplies the
    transverse deviation by I - alpha H: M is transversally stable there iff 0 < eig(H) < 2 / alpha."""
    lams = np.atleast_1d(_check(lam, gamma, d, L, eps))
    if len(corner) != 2 or any(c not in (1, -1) for c in corner):
        raise ValueError(f"corner must be a pair of signs (+-1, +-1), got {corner!r}")
    pad = loop.pad_to_block(lams, 64)  # 64 lams a block: one compilation
    out = np.asarray(_transverse_hess(jnp.zeros(2), jnp.asarray(corner, float), jnp.asarray(pad, jnp.float64),
                                      float(gamma), float(d), float(L), float(eps)))[:lams.size]
    return out.reshape(np.shape(lam) + (2, 2))
