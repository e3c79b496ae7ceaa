"""PGD restricted to the invariant manifold M = {theta = eta = rho = 0}, and step-size stability.

- :func:`manifold_map`, :func:`manifold_pgd`: the 2-D map (kappa, nu) -> (kappa+, nu+) that PGD
  induces on M (Lemma 4: M is invariant; Lemma 7: the map), one step or iterated.
- :func:`gradients`: the partial derivatives of the risk on M in closed form (the formulas of Lemma 7).
- :func:`map_jacobian`: its Jacobian, e.g. at the saddle (0, 0) (Proposition 12); :func:`map_jacobians`
  the same on arrays of points (the Lipschitz and determinant bounds of Proposition 13).
- :func:`fixed_points`: the five fixed points of the map and their type (Propositions 9-10).
- :func:`hessian_top_eigenvalue_overlaps`, :func:`hessian_top_eigenvalue`: the largest eigenvalue
  h_max of the Riemannian Hessian of R_lam on S^{d-1} x S^{d-1}; :func:`stable_step_size` = 2 / h_max,
  the step-size bound: PGD is locally stable only while alpha h_max < 2 (gradient descent on a
  quadratic with curvature h multiplies the error by 1 - alpha h per step); :func:`curvature_on_m`:
  the largest curvature of the risk on M over the square (the small-step hypothesis of Theorem 5).
"""
from __future__ import annotations

import math
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from slr import loop
from slr._validate import check_int, check_interval, check_lam, check_positive, check_run, check_vectors
from slr.overlaps import NAMES, gram_vectors
from slr.pgd import UNROLL, split_lam
from slr.gaussian import derf
from slr.risk import closed_form

__all__ = ["manifold_map", "manifold_pgd", "map_jacobian", "map_jacobians", "gradients", "fixed_points", "FixedPoint",
           "hessian_top_eigenvalue_overlaps", "hessian_top_eigenvalue", "stable_step_size", "curvature_on_m"]


def _on_m_grads(kappa, nu, lam, gamma, d, L, eps):
    z = jnp.zeros_like(kappa)
    g = jax.grad(closed_form, argnums=(0, 1))
    return jnp.vectorize(lambda a, b: g(a, b, 0.0 * a, 0.0 * a, 0.0 * a, lam, gamma, d, L, eps))(
        kappa + z, nu + z)


def _map(kappa, nu, lam, alpha, gamma, d, L, eps):
    rk, rn = _on_m_grads(kappa, nu, lam, gamma, d, L, eps)
    ck, cn = 1.0 - jnp.square(kappa), 1.0 - jnp.square(nu)
    kappa1 = (kappa - alpha * ck * rk) / jnp.sqrt(1.0 + alpha ** 2 * ck * jnp.square(rk))
    nu1 = (nu - alpha * cn * rn) / jnp.sqrt(1.0 + alpha ** 2 * cn * jnp.square(rn))
    return kappa1, nu1


_map_jit = jax.jit(_map)


def _check_map_args(kappa, nu, lam, alpha, gamma, d, L, eps, names=("kappa", "nu")):
    """``lam`` None: already checked (a schedule, by check_lam)."""
    check_interval(names[0], kappa, -1.0, 1.0)
    check_interval(names[1], nu, -1.0, 1.0)
    if lam is not None:
        check_positive("lam", lam)
    check_run(alpha=alpha, gamma=gamma, L=L, eps=eps, d=d)


def manifold_map(kappa, nu, *, lam, alpha, gamma, d, L, eps=0.0):
    """Lemma 7: one PGD step restricted to M, as a map of (kappa, nu) in [-1, 1]^2:

        kappa+ = (kappa - alpha (1 - kappa^2) R_kappa) / sqrt(1 + alpha^2 (1 - kappa^2) R_kappa^2),
        nu+    = (nu    - alpha (1 - nu^2)    R_nu)    / sqrt(1 + alpha^2 (1 - nu^2)    R_nu^2),

    with R_kappa, R_nu the partial derivatives of the risk on M (Lemma 6). Broadcasts over arrays.
    """
    _check_map_args(kappa, nu, lam, alpha, gamma, d, L, eps)
    return _map_jit(jnp.asarray(kappa, jnp.float64), jnp.asarray(nu, jnp.float64), float(lam), float(alpha),
                    float(gamma), float(d), float(L), float(eps))


# every argument but the starts is static (as in a closure over them: bit-identical numbers); a call with
# the same parameters reuses the compiled program
@partial(jax.jit, static_argnums=tuple(range(2, 14)))
def _manifold_core(k, n, lam0, c, alpha, gamma, d, L, eps, log_every, rem, fn, n_chunks, has_rem):
    lam_t = loop.lam_fn(fn, lam0, c, jnp.float64)
    body = lambda cr, t: _map(cr[0], cr[1], lam_t(jnp.asarray(t, jnp.float64)), alpha, gamma, d, L, eps)
    return loop.run_chunks(body, (k, n), lambda cr: cr, n_chunks, log_every, rem if has_rem else None, UNROLL)


def manifold_pgd(kappa0, nu0, *, lam, alpha, steps, gamma, d, L, log_every, eps=0.0):
    """Iterate the Lemma 7 map ``steps`` times from (kappa0, nu0) (scalars or arrays of any shape).

    ``lam`` may be a float, an :class:`slr.pgd.InverseTime` or a traceable callable ``step -> lam``.
    Returns (step, kappa, nu) with step of shape (T,) and kappa, nu of shape (..., T), logged like
    :func:`slr.pgd.pgd`.
    """
    steps = check_int("steps", steps, lo=1)
    lam = check_lam(lam, steps)
    _check_map_args(kappa0, nu0, None, alpha, gamma, d, L, eps, names=("kappa0", "nu0"))
    log_every = check_int("log_every", log_every, lo=1)
    n_chunks, rem = loop.schedule(steps, log_every)
    kappa0, nu0 = jnp.broadcast_arrays(jnp.asarray(kappa0, jnp.float64), jnp.asarray(nu0, jnp.float64))
    fn, lam0, c = split_lam(lam)
    ka, nu = _manifold_core(kappa0, nu0, lam0, c, alpha, gamma, float(d), L, eps, log_every, int(rem or 0), fn,
                            n_chunks, rem is not None)
    return loop.log_steps(steps, log_every), jnp.moveaxis(ka, 0, -1), jnp.moveaxis(nu, 0, -1)


def map_jacobian(kappa, nu, *, lam, alpha, gamma, d, L, eps=0.0):
    """The 2x2 Jacobian of the Lemma 7 map at (kappa, nu) (scalars). At the saddle (0, 0) it has one
    eigenvalue in (0, 1) and one > 1 (Proposition 12)."""
    _check_map_args(kappa, nu, lam, alpha, gamma, d, L, eps)
    f = lambda x: jnp.stack(_map(x[0], x[1], lam, alpha, gamma, float(d), L, eps))
    return jax.jacfwd(f)(jnp.asarray([kappa, nu], jnp.float64))


_jacobians_jit = jax.jit(jnp.vectorize(
    jax.jacfwd(lambda x, *a: jnp.stack(_map(x[0], x[1], *a))), excluded={1, 2, 3, 4, 5, 6},
    signature="(2)->(2,2)"))


def map_jacobians(kappa, nu, *, lam, alpha, gamma, d, L, eps=0.0):
    """The Jacobians of the Lemma 7 map at the points (kappa, nu) (arrays broadcast): shape (..., 2, 2),
    entry [i, j] = d(F_i)/d(z_j) with z = (kappa, nu); one compiled program for every grid."""
    _check_map_args(kappa, nu, lam, alpha, gamma, d, L, eps)
    z = jnp.stack(jnp.broadcast_arrays(jnp.asarray(kappa, jnp.float64), jnp.asarray(nu, jnp.float64)), -1)
    return _jacobians_jit(z, float(lam), float(alpha), float(gamma), float(d), float(L), float(eps))


def gradients(kappa, nu, *, lam, gamma, d, L):
    """The partial derivatives (R_kappa, R_nu) of the risk on M (Lemma 6), in closed form: with
    s = sqrt(1 + 2 lam^2 gamma^2), c = sqrt(1 + 4 lam^2 gamma^2) and u = lam sqrt(d/2) kappa / s,

        R_nu = -2 gamma^2 erf(u),   R_kappa = (2 gamma^2 lam sqrt(d/2) / s) erf'(u) (erf(u / c) - nu).

    (They do not depend on L or eps, which only shift the risk on M.) Arrays broadcast; the map of
    :func:`manifold_map` differentiates the closed form instead, so the two check each other."""
    check_interval("kappa", kappa, -1.0, 1.0)
    check_interval("nu", nu, -1.0, 1.0)
    check_positive("lam", lam)
    check_run(gamma=gamma, L=L, d=d)
    kappa, nu = jnp.asarray(kappa, jnp.float64), jnp.asarray(nu, jnp.float64)
    r, g2 = math.sqrt(d / 2), gamma ** 2
    s, c = math.sqrt(1 + 2 * lam ** 2 * g2), math.sqrt(1 + 4 * lam ** 2 * g2)
    u = lam * r * kappa / s
    erf = jax.scipy.special.erf
    return 2 * g2 * lam * r / s * derf(u) * (erf(u / c) - nu), -2 * g2 * erf(u)


class FixedPoint(NamedTuple):
    """A fixed point (kappa, nu) of the Lemma 7 map, with the risk there, the eigenvalues of the
    Hessian of R in the angle chart kappa = cos(phi), nu = cos(psi), and its type."""
    kappa: float
    nu: float
    risk: float
    hessian_eigenvalues: tuple
    kind: str


def _angle_risk(x, lam, gamma, d, L, eps):
    return closed_form(jnp.cos(x[0]), jnp.cos(x[1]), 0.0, 0.0, 0.0, lam, gamma, d, L, eps)


_angle_hessian = jax.jit(jax.hessian(_angle_risk), static_argnums=(1, 2, 3, 4, 5))


def fixed_points(*, lam, gamma, d, L, eps=0.0):
    """The five fixed points of PGD on M (Propositions 9-10): (0, 0) and the corners (+-1, +-1), where
    (1 - kappa^2) R_kappa = (1 - nu^2) R_nu = 0 (at (0, 0) by the symmetry of the risk on M),
    classified by the Hessian of the risk in the angle chart (kappa, nu) = (cos phi, cos psi):
    "minimum" (both eigenvalues > 0), "maximum" (both < 0) or "saddle". With lam = 0.1, d = 400,
    L = 10, gamma^2 = 1/2: minima at (1, 1) and (-1, -1), maxima at (1, -1) and (-1, 1), a saddle at
    (0, 0). The fixed points do not depend on the step size.
    """
    check_positive("lam", lam)
    check_run(gamma=gamma, L=L, eps=eps, d=d)
    args = (lam, gamma, float(d), L, eps)
    out = []
    for ka, nu in ((0.0, 0.0), (1.0, 1.0), (-1.0, -1.0), (1.0, -1.0), (-1.0, 1.0)):
        x = jnp.asarray([math.acos(ka), math.acos(nu)])
        ev = np.linalg.eigvalsh(np.asarray(_angle_hessian(x, *args)))
        kind = "minimum" if ev[0] > 0 else ("maximum" if ev[-1] < 0 else "saddle")
        out.append(FixedPoint(ka, nu, float(_angle_risk(x, *args)), tuple(float(e) for e in ev), kind))
    return out


def _tangent_basis(x):
    _, _, vh = jnp.linalg.svd(x[None, :], full_matrices=True)
    return vh[1:]


def _hess_top(kappa, nu, theta, eta, rho, lam, gamma, d, L, eps):
    ks, vs, k, v = gram_vectors(kappa, nu, theta, eta, rho, 5)
    n = k.shape[0]

    def f(x):
        a, b = x[:n], x[n:]
        return closed_form(a @ ks, b @ vs, b @ ks, a @ vs, a @ b, lam, gamma, d, L, eps)

    x = jnp.concatenate([k, v])
    g = jax.grad(f)(x)
    H = jax.hessian(f)(x)
    shift = jnp.concatenate([jnp.full(n, k @ g[:n]), jnp.full(n, v @ g[n:])])
    H = H - jnp.diag(shift)
    Tk, Tv = _tangent_basis(k), _tangent_basis(v)
    z = jnp.zeros_like(Tk)
    T = jnp.concatenate([jnp.concatenate([Tk, z], 1), jnp.concatenate([z, Tv], 1)], 0)  # (2n-2, 2n)
    return jnp.linalg.eigvalsh(T @ H @ T.T)[-1]


# gamma, d, L, eps static (a few values per chapter; one compilation each): the same program as a
# closure over them, so the values are bit-identical to it
_BLOCK = 64
_hess_top_jit = jax.jit(jnp.vectorize(_hess_top, excluded={6, 7, 8, 9}), static_argnums=(6, 7, 8, 9))


def hessian_top_eigenvalue_overlaps(kappa, nu, theta, eta, rho, *, lam, gamma, d, L, eps=0.0):
    """Largest eigenvalue of the Riemannian Hessian of R_lam on S^{d-1} x S^{d-1} at a point with the
    given overlaps (arrays broadcast; e.g. the logged overlaps of a :class:`slr.pgd.Trajectory`).

    Riemannian Hessian on a product of spheres: P (nabla^2 R - diag((k.grad_k R) I, (v.grad_v R) I)) P
    on the tangent space. It is computed exactly in R^5 (span{k*, v*, k, v} plus one orthogonal
    direction, which carries every eigenvalue of the d - 4 orthogonal ones; vectors from
    :func:`slr.overlaps.gram_vectors`), keeping the scalar d. ``lam`` may be an array broadcasting with
    the overlaps (e.g. lam_t at the logged steps of a run with a schedule).
    """
    for name, val in zip(NAMES, (kappa, nu, theta, eta, rho)):
        check_interval(name, val, -1.0, 1.0)
    lam_arr = np.asarray(lam, dtype=float)
    if not np.all(np.isfinite(lam_arr) & (lam_arr > 0)):
        raise ValueError(f"lam must be > 0 and finite (a scalar or an array), got {lam!r}")
    check_run(gamma=gamma, L=L, eps=eps, d=d)
    args = (kappa, nu, theta, eta, rho, lam)
    # blocks of _BLOCK points, each a call of one compiled program (a compilation per shape cost about
    # 2.8 s on the book's CPU, five of them in the pgd chapter); the values are those of a call on the
    # points' own shape up to round-off (measured: at most 2.9e-15 relative), not bit for bit
    return loop.in_blocks(lambda *a: _hess_top_jit(*a, float(gamma), float(d), float(L), float(eps)), args, _BLOCK)


def hessian_top_eigenvalue(k, v, k_star, v_star, *, lam, gamma, L, eps=0.0):
    """Largest eigenvalue of the Riemannian Hessian of R_lam at (k, v) (d from the vectors' length).

    See :func:`hessian_top_eigenvalue_overlaps`; k, v of shape (d,) or (R, d).
    """
    k, v, ks, vs, d = check_vectors(k, v, k_star, v_star)
    o = (k @ ks, v @ vs, v @ ks, k @ vs, np.sum(k * v, axis=-1))
    o = tuple(np.clip(x, -1.0, 1.0) for x in o)
    return hessian_top_eigenvalue_overlaps(*o, lam=lam, gamma=gamma, d=d, L=L, eps=eps)


def stable_step_size(kappa, nu, theta, eta, rho, *, lam, gamma, d, L, eps=0.0):
    """The step-size bound 2 / h_max at the given overlaps (h_max from
    :func:`hessian_top_eigenvalue_overlaps`): PGD is locally stable there only for alpha below it."""
    return 2.0 / hessian_top_eigenvalue_overlaps(kappa, nu, theta, eta, rho, lam=lam, gamma=gamma, d=d, L=L,
                                                 eps=eps)


_hess_on_m = jax.jit(jax.vmap(jax.hessian(lambda z, lam, gamma, d, L: closed_form(
    z[0], z[1], 0.0, 0.0, 0.0, lam, gamma, d, L, 0.0)), in_axes=(0, None, None, None, None)))


def curvature_on_m(*, lam, gamma, d, L, grid: int = 41):
    """The largest spectral norm of the Hessian of the risk on M in (kappa, nu) over a grid x grid
    grid of the square [-1, 1]^2: an estimate (not a certified bound) of the Lipschitz constant of
    the gradient of Lemma 6's risk, for the small-step hypothesis alpha h < 1 of Theorem 5."""
    check_positive("lam", lam)
    check_run(gamma=gamma, L=L, d=d)
    grid = check_int("grid", grid, lo=2)
    x = np.linspace(-1.0, 1.0, grid)
    z = jnp.asarray(np.stack(np.meshgrid(x, x), axis=-1).reshape(-1, 2))
    H = np.asarray(_hess_on_m(z, float(lam), float(gamma), float(d), float(L)))
    return float(np.max(np.abs(np.linalg.eigvalsh(H))))
