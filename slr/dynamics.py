"""Projected gradient descent on the sphere (Definition 1), exact and stochastic, and the 2-D map on M.

The paper trains the erf predictor (Eq. 3) by projected (Riemannian) gradient descent on the product
of unit spheres (Definition 1):

    k+ = (k - alpha (I - k k^T) grad_k R) / ||.||,      v+ = (v - alpha (I - v v^T) grad_v R) / ||.||.

- :func:`pgd`: PGD on the closed-form risk (Proposition 15, :func:`slr.risk.risk`) with exact gradients
  (``jax.grad`` of the closed form). The risk depends on (k, v) only through the five overlaps
  (kappa, nu, theta, eta, rho), so grad_k R = R_kappa k* + R_eta v* + R_rho v and
  grad_v R = R_nu v* + R_theta k* + R_rho k: every iterate stays in span{k0, v0, k*, v*}, and
  ``reduced=True`` runs the same iteration exactly in a 4-D orthonormal frame of that span
  (MATH.md section 6), at a cost independent of d.
- :func:`sgd`: the same projected step on the empirical loss of fresh mini-batches (Figure 5).
- :func:`manifold_map`, :func:`manifold_pgd`: the 2-D map (kappa, nu) -> (kappa+, nu+) that PGD
  induces on the invariant manifold M = {theta = eta = rho = 0} (Lemma 4, Lemma 7).
- :func:`fixed_points`: the five fixed points of that map and their type (Propositions 9-10).
- :func:`map_jacobian`: the Jacobian of the map, e.g. at the saddle (0, 0) (Proposition 12).
- :func:`hessian_top_eigenvalue`: the largest eigenvalue of the Riemannian Hessian of R at (k, v);
  PGD is stable only while alpha times it stays below 2 (MATH.md section 6 caveat).
- :func:`init_sphere`, :func:`init_manifold`: random initialisations.

Trajectories are returned as a :class:`Trajectory` (a pytree), logged every ``log_every`` steps.
"""
from __future__ import annotations

import math
from functools import partial
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from slr import task as _task
from slr._validate import (check_int, check_interval, check_key, check_nonneg, check_orthogonal,
                           check_positive)
from slr.predictors import attention_erf
from slr.risk import closed_form

__all__ = ["Trajectory", "pgd", "sgd", "manifold_map", "manifold_pgd", "fixed_points",
           "map_jacobian", "hessian_top_eigenvalue", "hessian_top_eigenvalue_overlaps",
           "init_sphere", "init_manifold", "FixedPoint", "InverseTime"]

_UNROLL = 2  # inner-loop unrolling: faster steps, longer compile (measured best trade-off)
_FIELDS = ("kappa", "nu", "theta", "eta", "rho", "excess_risk")


class Trajectory(NamedTuple):
    """A logged PGD/SGD trajectory (a JAX pytree: NamedTuples are registered automatically).

    Attributes:
        step: shape (T,), the logged step numbers (step 0 included).
        kappa, nu, theta, eta, rho: shape (..., T), the five overlaps k.k*, v.v*, v.k*, k.v*, k.v
            (a leading repeat axis when the run had repeats).
        excess_risk: shape (..., T), R_lam_t(k_t, v_t) - eps^2 with the inverse temperature lam_t of
            that step. For :func:`pgd` it is the closed form (Proposition 15); for :func:`sgd` it is
            the Monte Carlo estimate on a fixed test batch (the Figure 5 convention).
        excess_risk_closed: shape (..., T), the closed-form excess risk for :func:`sgd`; ``None`` for
            :func:`pgd` (where ``excess_risk`` already is the closed form).
    """
    step: jnp.ndarray
    kappa: jnp.ndarray
    nu: jnp.ndarray
    theta: jnp.ndarray
    eta: jnp.ndarray
    rho: jnp.ndarray
    excess_risk: jnp.ndarray
    excess_risk_closed: Optional[jnp.ndarray] = None

    @property
    def dist_manifold(self):
        """Distance to M = {theta = eta = rho = 0}: sqrt(theta^2 + eta^2 + rho^2), shape (..., T)."""
        return jnp.sqrt(jnp.square(self.theta) + jnp.square(self.eta) + jnp.square(self.rho))

    def to_dict(self) -> dict:
        """The fields as a dict of NumPy arrays (``None`` fields left out), for :mod:`slr.cache`."""
        return {k: np.asarray(v) for k, v in self._asdict().items() if v is not None}

    @classmethod
    def from_dict(cls, data) -> "Trajectory":
        """Inverse of :meth:`to_dict`."""
        missing = [f for f in ("step",) + _FIELDS if f not in data]
        if missing:
            raise ValueError(f"data must hold the fields {('step',) + _FIELDS}, missing {missing}")
        return cls(**{k: np.asarray(data[k]) for k in cls._fields if k in data})


# ----------------------------------------------------------------------------------------------
# validation helpers


def _check_lam(lam, steps):
    """lam: a positive float, or a callable step -> lam (traceable) positive on 0..steps."""
    if callable(lam):
        t = np.arange(steps + 1, dtype=float)
        try:
            vals = np.asarray(lam(jnp.asarray(t)), dtype=float)
        except Exception as exc:  # noqa: BLE001 - report any failure of the user's schedule
            raise ValueError(f"lam must be a float > 0 or a traceable callable step -> lam, calling it "
                             f"on an array of steps failed: {exc}") from None
        vals = np.broadcast_to(vals, t.shape)
        bad = ~(np.isfinite(vals) & (vals > 0))
        if np.any(bad):
            i = int(np.argmax(bad))
            raise ValueError(f"lam(t) must be > 0 and finite for t in [0, {steps}], got lam({i}) = {vals[i]!r}")
        return lam
    check_positive("lam", lam)
    return float(lam)


def _check_common(*, alpha=None, steps=None, gamma=None, L=None, eps=None, log_every=None, d=None):
    if alpha is not None:
        check_positive("alpha", alpha)
    if steps is not None:
        check_int("steps", steps, lo=1)
    if gamma is not None:
        check_positive("gamma", gamma)
    if L is not None:
        check_int("L", L, lo=1)
    if eps is not None:
        check_nonneg("eps", eps)
    if log_every is not None:
        check_int("log_every", log_every, lo=1)
    if d is not None:
        check_positive("d", d)
        if float(d) < 1:
            raise ValueError(f"d must be >= 1, got {d!r}")


def _unit_rows(name, x, d=None, tol=1e-6):
    arr = np.asarray(x, dtype=float)
    if arr.ndim not in (1, 2):
        raise ValueError(f"{name} must have shape (d,) or (R, d), got shape {arr.shape}")
    if d is not None and arr.shape[-1] != d:
        raise ValueError(f"{name} must have length d={d} (the length of k_star), got {arr.shape[-1]}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite")
    norms = np.linalg.norm(arr, axis=-1)
    if np.any(np.abs(norms - 1.0) > tol):
        bad = norms.ravel()[np.argmax(np.abs(norms - 1.0).ravel())]
        raise ValueError(f"{name} must have unit norm (|norm - 1| <= {tol}), got norm {bad!r}")
    return arr


def _check_vectors(k0, v0, k_star, v_star):
    ks = np.asarray(k_star, dtype=float)
    if ks.ndim != 1:
        raise ValueError(f"k_star must be a vector of shape (d,), got shape {ks.shape}")
    d = ks.shape[0]
    _unit_rows("k_star", ks)
    vs = _unit_rows("v_star", v_star, d)
    if vs.ndim != 1:
        raise ValueError(f"v_star must be a vector of shape (d,), got shape {vs.shape}")
    check_orthogonal("k_star", ks, "v_star", vs)
    k0 = _unit_rows("k0", k0, d)
    v0 = _unit_rows("v0", v0, d)
    if k0.shape != v0.shape:
        raise ValueError(f"k0 and v0 must have the same shape, got {k0.shape} and {v0.shape}")
    return k0, v0, ks, vs, d


def _dtype(dtype):
    dt = jnp.dtype(dtype)
    if dt not in (jnp.dtype(jnp.float32), jnp.dtype(jnp.float64)):
        raise ValueError(f"dtype must be jnp.float32 or jnp.float64, got {dtype!r}")
    return dt


class InverseTime(NamedTuple):
    """The schedule lam_t = lam0 / (1 + c t) (the paper's decreasing inverse temperature, c = 1e-4).

    A callable ``step -> lam``; passed as ``lam`` to :func:`pgd`/:func:`sgd`, its two numbers are
    traced (not baked into the compiled program), so runs that differ only in them share one
    compilation. A plain float ``lam`` is ``InverseTime(lam, 0.0)``.
    """
    lam0: float
    c: float = 0.0

    def __call__(self, t):
        return self.lam0 / (1.0 + self.c * t)


def _lam_parts(lam):
    """(static callable or None, lam0, c): None means the traced schedule lam0 / (1 + c t)."""
    if isinstance(lam, InverseTime):
        return None, float(lam.lam0), float(lam.c)
    if callable(lam):
        return lam, 1.0, 0.0
    return None, float(lam), 0.0


def _lam_fn(fn, lam0, c, dt):
    if fn is None:
        return lambda t: jnp.asarray(lam0 / (1.0 + c * t), dt)
    return lambda t: jnp.asarray(fn(t), dt)


def _log_steps(steps, log_every):
    """Logged steps: 0, log_every, 2 log_every, ..., and ``steps`` itself."""
    s = list(range(0, steps + 1, log_every))
    if s[-1] != steps:
        s.append(steps)
    return np.asarray(s, dtype=np.int64)


# ----------------------------------------------------------------------------------------------
# the projected step (Definition 1)


def _dot(x, y):
    return jnp.sum(x * y, axis=-1)


def _project_step(k, v, gk, gv, alpha):
    """One step of Definition 1: Riemannian gradient (I - x x^T) g, step, renormalise."""
    gk = gk - _dot(k, gk) * k
    gv = gv - _dot(v, gv) * v
    k = k - alpha * gk
    v = v - alpha * gv
    return k / jnp.linalg.norm(k), v / jnp.linalg.norm(v)


_grad5 = jax.grad(closed_form, argnums=(0, 1, 2, 3, 4))


def _closed_grads(k, v, ks, vs, lam, gamma, d, L, eps):
    """Euclidean gradients of the closed form: chain rule through the five overlaps (MATH.md section 6)."""
    o = (_dot(k, ks), _dot(v, vs), _dot(v, ks), _dot(k, vs), _dot(k, v))
    gka, gnu, gth, get, grh = _grad5(*o, lam, gamma, d, L, eps)
    gk = gka * ks + get * vs + grh * v
    gv = gnu * vs + gth * ks + grh * k
    return gk, gv


def _run_chunks(body, carry, log_fn, n_chunks, log_every, rem, unroll, noise=None, block=64):
    """Run n_chunks * log_every + rem steps of ``body(carry, t) -> carry``, logging ``log_fn(carry)``
    at step 0, after every chunk, and at the end when rem > 0 (``rem`` None: no remainder).
    ``log_every`` and ``rem`` may be traced: only ``n_chunks`` (the number of logs) is static.

    With ``noise`` (a function step -> pytree of that step's random draws), the body is
    ``body(carry, t, noise(t))`` and the draws are made ``block`` steps at a time, vectorised over the
    steps (one large random-number kernel instead of ``block`` small ones): the same numbers as drawing
    them inside each step, since each step's draws depend only on its index."""
    if noise is not None:
        step = body
        body = lambda cc, t: step(cc, t, noise(t))

    def steps_from(t0, n, c):
        """n steps from step t0; the loop body does ``unroll`` steps (n may be traced)."""
        if noise is not None:
            def blk(j, cc):
                tb = t0 + j * block
                nz = jax.vmap(noise)(tb + jnp.arange(block))
                one = lambda u, c2: step(c2, tb + u, jax.tree_util.tree_map(lambda a: a[u], nz))
                return jax.lax.fori_loop(0, block, one, cc, unroll=unroll)
            q = n // block
            c = jax.lax.fori_loop(0, q, blk, c)
            return jax.lax.fori_loop(q * block, n, lambda j, cc: body(cc, t0 + j), c)

        def many(j, cc):
            for u in range(unroll):
                cc = body(cc, t0 + j * unroll + u)
            return cc
        if isinstance(n, int):  # static trip count: let XLA see the unrolled loop
            return jax.lax.fori_loop(0, n, lambda j, cc: body(cc, t0 + j), c, unroll=unroll)
        q = n // unroll
        c = jax.lax.fori_loop(0, q, many, c)
        return jax.lax.fori_loop(q * unroll, n, lambda j, cc: body(cc, t0 + j), c)

    def chunk(c, i):
        return (c := steps_from(i * log_every, log_every, c)), log_fn(c)

    first = log_fn(carry)
    carry, logs = jax.lax.scan(chunk, carry, jnp.arange(n_chunks))
    out = jax.tree_util.tree_map(lambda a, b: jnp.concatenate([a[None], b]), first, logs)
    if rem is not None:
        t0 = n_chunks * log_every
        carry = steps_from(t0, rem, carry)
        out = jax.tree_util.tree_map(lambda a, b: jnp.concatenate([a, b[None]]), out, log_fn(carry))
    return out


def _schedule(steps, log_every):
    """(n_chunks, rem or None) for :func:`_run_chunks`."""
    n, r = divmod(steps, log_every)
    return n, (r if r else None)


def _frame(ks, vs, k0, v0):
    """Orthonormal Q (d, 4) with span{k*, v*, k0, v0} in its range (Householder QR: Q orthonormal
    even when the four vectors are dependent, and then still spans them)."""
    q, _ = jnp.linalg.qr(jnp.stack([ks, vs, k0, v0], axis=1))
    return q


def _overlaps(k, v, ks, vs):
    return jnp.stack([_dot(k, ks), _dot(v, vs), _dot(v, ks), _dot(k, vs), _dot(k, v)])


def _pgd_single(k0, v0, ks, vs, lam0, c, alpha, gamma, d, L, eps, log_every, rem, *, fn, n_chunks,
                reduced, dt, unroll):
    if reduced and k0.shape[-1] > 4:
        Q = _frame(ks, vs, k0, v0)
        k0, v0, ks, vs = (Q.T @ x for x in (k0, v0, ks, vs))
    k0, v0, ks, vs = (x.astype(dt) for x in (k0, v0, ks, vs))
    gamma, eps, alpha, d, L = (jnp.asarray(x, dt) for x in (gamma, eps, alpha, d, L))
    lam_fn = _lam_fn(fn, lam0, c, dt)

    def body(cr, t):
        k, v = cr
        gk, gv = _closed_grads(k, v, ks, vs, lam_fn(jnp.asarray(t, dt)), gamma, d, L, eps)
        return _project_step(k, v, gk, gv, alpha)

    o = _run_chunks(body, (k0, v0), lambda cr: _overlaps(*cr, ks, vs), n_chunks, log_every, rem, unroll)
    return o.T  # (5, T)


@partial(jax.jit, static_argnames=("fn", "n_chunks", "reduced", "dt", "unroll", "batched", "has_rem"))
def _pgd_core(k0, v0, ks, vs, lam0, c, alpha, gamma, d, L, eps, log_every, rem, t_log, *, fn, n_chunks,
              reduced, dt, unroll, batched, has_rem):
    run = lambda a, b: _pgd_single(a, b, ks, vs, lam0, c, alpha, gamma, d, L, eps, log_every,
                                   rem if has_rem else None, fn=fn, n_chunks=n_chunks, reduced=reduced,
                                   dt=dt, unroll=unroll)
    o = jax.vmap(run)(k0, v0) if batched else run(k0, v0)  # (..., 5, T)
    # the excess risk at the logged points, from the logged overlaps (one copy of the closed form)
    lam = _lam_fn(fn, lam0, c, dt)(t_log.astype(dt))
    cast = lambda x: jnp.asarray(x, dt)
    excess = closed_form(*(o[..., i, :] for i in range(5)), lam, cast(gamma), cast(d), cast(L), cast(eps)) \
        - jnp.square(cast(eps))
    return tuple(o[..., i, :] for i in range(5)) + (excess,)


def pgd(k0, v0, k_star, v_star, *, lam, alpha, steps, gamma, L, log_every, reduced=True, eps=0.0,
        dtype=jnp.float64) -> Trajectory:
    """Projected gradient descent (Definition 1) on the closed-form risk R_lam (Proposition 15).

    Each step: k+ = (k - alpha (I - k k^T) grad_k R) / ||.||, and the same for v, with the exact
    gradient of the closed form (``jax.grad`` through the five overlaps).

    Args:
        k0, v0: unit vectors, shape (d,) or (R, d) for R repeats (vectorised with ``vmap``).
        k_star, v_star: orthonormal unit vectors, shape (d,).
        lam: inverse temperature, a float > 0 or a traceable callable ``step -> lam``
            (e.g. ``lambda t: 1 / (1 + 1e-4 * t)``, the paper's decreasing schedule).
        alpha: step size > 0. steps: number of steps >= 1. gamma: std of the informative token > 0.
        L: number of tokens (integer >= 1). eps: label noise std >= 0 (only shifts the risk).
        log_every: log every this many steps (step 0 and the last step are always logged).
        reduced: run exactly in the 4-D frame of span{k0, v0, k*, v*} (MATH.md section 6; cost
            independent of d) instead of in R^d. Both give the same iterates up to roundoff.
        dtype: ``jnp.float64`` (default) or ``jnp.float32`` (everything, the risk included).
            For the Lemma 4 comparison (distance to M ~1e-16 in float64, ~1e-7 in float32) use
            ``reduced=False`` in float32: the 4-D frame is aligned with k*, v* and, from a start on M,
            keeps the off-M coordinates exactly zero, which hides the float32 roundoff.

    Returns:
        A :class:`Trajectory`; arrays of shape (T,) or (R, T) with T = len(step).
    """
    lam = _check_lam(lam, check_int("steps", steps, lo=1))
    _check_common(alpha=alpha, gamma=gamma, L=L, eps=eps, log_every=log_every)
    k0, v0, ks, vs, d = _check_vectors(k0, v0, k_star, v_star)
    dt = _dtype(dtype)
    fn, lam0, c = _lam_parts(lam)
    n_chunks, rem = _schedule(int(steps), int(log_every))
    t_log = _log_steps(int(steps), int(log_every))
    out = _pgd_core(jnp.asarray(k0), jnp.asarray(v0), jnp.asarray(ks), jnp.asarray(vs), lam0, c,
                    float(alpha), float(gamma), float(d), float(L), float(eps), int(log_every),
                    int(rem or 0), jnp.asarray(t_log), fn=fn, n_chunks=n_chunks, reduced=bool(reduced),
                    dt=dt, unroll=_UNROLL, batched=k0.ndim == 2, has_rem=rem is not None)
    # logged arrays: shape (T,) without repeats, (R, T) with (vmap adds the leading axis)
    return Trajectory(t_log, *out)


# ----------------------------------------------------------------------------------------------
# stochastic PGD (Figure 5)


def _loss(k, v, X, y, lam):
    return jnp.mean(jnp.square(y - attention_erf(X, k, v, lam)))


_SAMPLERS = ("reduced", "full")
_GS_TOL = 1e-8  # residual norm below which a vector counts as lying in the span (then substituted)
_FALLBACK_SEED = 0x51F5  # the fixed directions completing a degenerate frame (no data randomness)
_BLOCK = 50  # steps whose draws are made at once (reduced sampler; 50 and 200 measured alike)
_SGD_UNROLL = 4  # inner-loop unrolling of the sgd steps (fig5: 0.33 ms per step of 30 repeats, 1: 0.44 ms)


def _safe_unit(x, basis, w):
    """The unit residual of ``x`` against the orthonormal ``basis`` (Gram-Schmidt twice); if that
    residual is below ``_GS_TOL`` (x in the span), the unit residual of the fixed direction ``w``."""
    def resid(y):
        for _ in range(2):
            for q in basis:
                y = y - _dot(q, y) * q
        return y
    r, rw = resid(x), resid(w)
    n, nw = jnp.linalg.norm(r), jnp.linalg.norm(rw)
    ok = n > _GS_TOL
    return jnp.where(ok, r / jnp.where(ok, n, 1.0), rw / nw)


def _reduced_noise(key, d, L, batch):
    """One step's draws for :func:`_reduced_grads`: (B L 4 + B + 2 d standard normals, B locations)."""
    kn, kj = jax.random.split(key)
    return (jax.random.normal(kn, (batch * L * 4 + batch + 2 * d,), dtype=jnp.float64),
            jax.random.randint(kj, (batch,), 0, L))


def _reduced_grads(noise, k, v, ks, vs, w, lam, gamma, L, eps, batch):
    """Mini-batch gradients of :func:`_loss` with exactly the law of the full-d draw (MATH.md section 6).

    The loss depends on the tokens only through their coordinates in an orthonormal frame Q (4, d) of
    S = span{k*, v*, k, v} (Q[0] = k*, Q[1] = v*; a degenerate span is completed by fixed directions
    ``w``). grad_k = sum_il a_il X_il and grad_v = sum_il b_il X_il with coefficients depending only on
    those coordinates and the label noise; the out-of-span parts (I - P) X_il = sigma_il (I - P) Z_il are
    independent of them, so the out-of-span parts of (grad_k, grad_v) are (I - P) times a Gaussian pair
    with covariance [[sum a^2 s^2, sum ab s^2], [sum ab s^2, sum b^2 s^2]] (x) I_d (s = gamma on the
    informative token, 1 elsewhere): two d-vectors and a 2x2 Cholesky factor. Cost: B L 4 + B + 2 d
    normals (B L d for the full draw).
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
    lam_fn = _lam_fn(fn, lam0, c, jnp.float64)
    grad = jax.grad(_loss, argnums=(0, 1))
    reduced = sampler == "reduced" and ks.shape[0] >= 4  # d < 4: no 4-D frame, the full draw is as cheap

    if reduced:
        d = ks.shape[0]

        def step(cr, t, nz):
            k, v = cr
            gk, gv = _reduced_grads(nz, k, v, ks, vs, w, lam_fn(t), gamma, L, eps, batch)
            return _project_step(k, v, gk, gv, alpha)

        noise = lambda t: _reduced_noise(jax.random.fold_in(key, t), d, L, batch)
        return _run_chunks(step, (k0, v0), lambda cr: cr, n_chunks, log_every, rem, unroll, noise=noise,
                           block=_BLOCK)

    def body(cr, t):
        k, v = cr
        X, y, _ = _task.assemble(_task.draws(jax.random.fold_in(key, t), batch, L=L, d=ks.shape[0]), ks[None],
                                 vs[None], gamma=gamma, eps=eps)
        gk, gv = grad(k, v, X, y, lam_fn(t))
        return _project_step(k, v, gk, gv, alpha)

    # log the iterates themselves: the test loss is evaluated after the scan, for all repeats at once
    return _run_chunks(body, (k0, v0), lambda cr: cr, n_chunks, log_every, rem, unroll)


@partial(jax.jit, static_argnames=("fn", "n_chunks", "batch", "n_test", "L", "unroll", "batched",
                                   "has_rem", "sampler"))
def _sgd_core(key_test, keys, k0, v0, ks, vs, lam0, c, alpha, gamma, eps, log_every, rem, t_log, *, fn,
              n_chunks, batch, n_test, L, unroll, batched, has_rem, sampler):
    w = jax.random.normal(jax.random.key(_FALLBACK_SEED), (2, ks.shape[0]), dtype=jnp.float64)
    run = lambda kk, a, b: _sgd_single(kk, a, b, ks, vs, w, lam0, c, alpha, gamma, L, eps, log_every,
                                       rem if has_rem else None, fn=fn, n_chunks=n_chunks, batch=batch,
                                       unroll=unroll, sampler=sampler)
    K, V = jax.vmap(run)(keys, k0, v0) if batched else run(keys, k0, v0)  # (..., T, d)
    lam = _lam_fn(fn, lam0, c, jnp.float64)(t_log.astype(jnp.float64))
    ov = (_dot(K, ks), _dot(V, vs), _dot(V, ks), _dot(K, vs), _dot(K, V))
    closed = closed_form(*ov, lam, gamma, float(ks.shape[0]), float(L), eps) - eps ** 2
    # one fixed test batch shared by the repeats (Figure 5): one matmul per logged step
    Xt, yt, _ = _task.assemble(_task.draws(key_test, n_test, L=L, d=ks.shape[0]), ks[None], vs[None],
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

    Each step draws ``batch`` fresh samples of SLR(k*, v*) in R^d (:mod:`slr.task`) and takes the
    projected step of Definition 1 on their mean squared error.

    Args:
        key: JAX PRNG key (split into the fixed test batch, shared by the repeats, and one training
            stream per repeat).
        k0, v0: unit vectors, shape (d,) or (R, d) (repeats vectorised with ``vmap``).
        k_star, v_star, lam, alpha, steps, gamma, L, eps, log_every: as in :func:`pgd`.
        batch: mini-batch size >= 1. n_test: size of the fixed test batch >= 1.
        sampler: how a mini-batch gradient is drawn. ``"full"``: the B L d token entries themselves
            (:mod:`slr.task`). ``"reduced"`` (default): the tokens' coordinates in an orthonormal frame
            of span{k, v, k*, v*} (B L 4 normals) plus the out-of-span parts of the two gradients,
            jointly Gaussian given those coordinates (2 d normals and a 2x2 Cholesky factor): the
            gradients, hence the whole trajectory, have exactly the law of the full draw (not the same
            draws: the two samplers use the random stream differently). A degenerate span (k or v in
            span{k*, v*}, e.g. a start at k*, v*) is completed by fixed directions; for d < 4 the full
            draw is used.

    Returns:
        A :class:`Trajectory` whose ``excess_risk`` is the test-batch estimate of R - eps^2 (Figure 5
        convention) and ``excess_risk_closed`` the closed form (Proposition 15).
    """
    check_key("key", key)
    lam = _check_lam(lam, check_int("steps", steps, lo=1))
    _check_common(alpha=alpha, gamma=gamma, L=L, eps=eps, log_every=log_every)
    check_int("batch", batch, lo=1)
    check_int("n_test", n_test, lo=1)
    if not isinstance(sampler, str) or sampler not in _SAMPLERS:
        raise ValueError(f"sampler must be one of {_SAMPLERS}, got {sampler!r}")
    k0, v0, ks, vs, d = _check_vectors(k0, v0, k_star, v_star)
    if d < 2:
        raise ValueError(f"d must be >= 2 for sgd (k_star and v_star orthogonal), got {d}")
    key_test, key_train = jax.random.split(key)
    keys = jax.random.split(key_train, k0.shape[0]) if k0.ndim == 2 else key_train
    fn, lam0, c = _lam_parts(lam)
    n_chunks, rem = _schedule(int(steps), int(log_every))
    t_log = _log_steps(int(steps), int(log_every))
    out = _sgd_core(key_test, keys, jnp.asarray(k0), jnp.asarray(v0), jnp.asarray(ks), jnp.asarray(vs), lam0, c,
                    float(alpha), float(gamma), float(eps), int(log_every), int(rem or 0),
                    jnp.asarray(t_log), fn=fn, n_chunks=n_chunks, batch=int(batch), n_test=int(n_test),
                    L=int(L), unroll=_SGD_UNROLL, batched=k0.ndim == 2, has_rem=rem is not None, sampler=sampler)
    return Trajectory(t_log, *out)


# ----------------------------------------------------------------------------------------------
# initialisations


def init_sphere(key, d, R):
    """R independent pairs (k0, v0), each uniform on S^{d-1} and independent: arrays of shape (R, d)."""
    check_key("key", key)
    d = check_int("d", d, lo=1)
    R = check_int("R", R, lo=1)
    g = jax.random.normal(key, (2, R, d), dtype=jnp.float64)
    g = g / jnp.linalg.norm(g, axis=-1, keepdims=True)
    return g[0], g[1]


def init_manifold(key, k_star, v_star, R):
    """R random starts on M = {theta = eta = rho = 0} (Lemma 4): arrays of shape (R, d).

    Construction: k0 is uniform on the unit sphere of v*^perp (so eta = 0), then v0 is uniform on the
    unit sphere of span{k*, k0}^perp (so theta = rho = 0); Gaussian vectors projected and normalised,
    with the projections done by Gram-Schmidt. Needs d >= 4. This is "uniform-ish" on M: each factor is
    uniform given the previous one (kappa has the law of one coordinate of a uniform point of S^{d-2},
    and nu of S^{d-3}: both are O(1/sqrt(d))).
    """
    check_key("key", key)
    R = check_int("R", R, lo=1)
    ks = np.asarray(k_star, dtype=float)
    if ks.ndim != 1:
        raise ValueError(f"k_star must be a vector of shape (d,), got shape {ks.shape}")
    d = ks.shape[0]
    _unit_rows("k_star", ks)
    vs = _unit_rows("v_star", v_star, d)
    check_orthogonal("k_star", ks, "v_star", vs)
    if d < 4:
        raise ValueError(f"d must be >= 4 for init_manifold (k_star, v_star, k0, v0 generic on M), got {d}")
    ks, vs = jnp.asarray(ks), jnp.asarray(vs)
    g = jax.random.normal(key, (2, R, d), dtype=jnp.float64)

    def orth(x, u):
        for _ in range(2):  # twice is enough (Gram-Schmidt re-orthogonalisation)
            x = x - _dot(x, u)[..., None] * u
        return x

    k = orth(g[0], vs)
    k = k / jnp.linalg.norm(k, axis=-1, keepdims=True)
    v = g[1]
    for _ in range(2):
        v = orth(v, ks)
        kp = orth(k - _dot(k, ks)[..., None] * ks, ks)
        kp = kp / jnp.linalg.norm(kp, axis=-1, keepdims=True)
        v = v - _dot(v, kp)[..., None] * kp
    v = v / jnp.linalg.norm(v, axis=-1, keepdims=True)
    return k, v


# ----------------------------------------------------------------------------------------------
# the dynamics on M: Lemma 7, Propositions 9, 10, 12


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


def _check_map_args(lam, alpha, gamma, d, L, eps):
    check_positive("lam", lam)
    _check_common(alpha=alpha, gamma=gamma, L=L, eps=eps, d=d)


def manifold_map(kappa, nu, *, lam, alpha, gamma, d, L, eps=0.0):
    """Lemma 7: one PGD step restricted to M, as a map of (kappa, nu) in [-1, 1]^2:

        kappa+ = (kappa - alpha (1 - kappa^2) R_kappa) / sqrt(1 + alpha^2 (1 - kappa^2) R_kappa^2),
        nu+    = (nu    - alpha (1 - nu^2)    R_nu)    / sqrt(1 + alpha^2 (1 - nu^2)    R_nu^2),

    with R_kappa, R_nu the partial derivatives of the risk on M (Lemma 6). Broadcasts over arrays.
    """
    check_interval("kappa", kappa, -1.0, 1.0)
    check_interval("nu", nu, -1.0, 1.0)
    _check_map_args(lam, alpha, gamma, d, L, eps)
    return _map_jit(jnp.asarray(kappa, jnp.float64), jnp.asarray(nu, jnp.float64), float(lam), float(alpha),
                    float(gamma), float(d), float(L), float(eps))


def manifold_pgd(kappa0, nu0, *, lam, alpha, steps, gamma, d, L, log_every, eps=0.0):
    """Iterate the Lemma 7 map ``steps`` times from (kappa0, nu0) (scalars or arrays of any shape).

    ``lam`` may be a float or a traceable callable ``step -> lam``. Returns (step, kappa, nu) with
    step of shape (T,) and kappa, nu of shape (..., T), logged like :func:`pgd`.
    """
    check_interval("kappa0", kappa0, -1.0, 1.0)
    check_interval("nu0", nu0, -1.0, 1.0)
    steps = check_int("steps", steps, lo=1)
    lam = _check_lam(lam, steps)
    _check_common(alpha=alpha, gamma=gamma, L=L, eps=eps, log_every=log_every, d=d)
    lam_fn = _lam_fn(*_lam_parts(lam), jnp.float64)
    n_chunks, rem = _schedule(steps, int(log_every))
    kappa0 = jnp.asarray(kappa0, jnp.float64)
    nu0 = jnp.asarray(nu0, jnp.float64)
    kappa0, nu0 = jnp.broadcast_arrays(kappa0, nu0)

    @jax.jit
    def run(k, n):
        body = lambda c, t: _map(c[0], c[1], lam_fn(jnp.asarray(t, jnp.float64)), alpha, gamma, float(d),
                                 L, eps)
        return _run_chunks(body, (k, n), lambda c: c, n_chunks, log_every, rem, _UNROLL)

    ka, nu = run(kappa0, nu0)
    return _log_steps(steps, log_every), jnp.moveaxis(ka, 0, -1), jnp.moveaxis(nu, 0, -1)


def map_jacobian(kappa, nu, *, lam, alpha, gamma, d, L, eps=0.0):
    """The 2x2 Jacobian of the Lemma 7 map at (kappa, nu) (scalars). At the saddle (0, 0) it has one
    eigenvalue in (0, 1) and one > 1 (Proposition 12)."""
    check_interval("kappa", kappa, -1.0, 1.0)
    check_interval("nu", nu, -1.0, 1.0)
    _check_map_args(lam, alpha, gamma, d, L, eps)
    f = lambda x: jnp.stack(_map(x[0], x[1], lam, alpha, gamma, float(d), L, eps))
    return jax.jacfwd(f)(jnp.asarray([kappa, nu], jnp.float64))


class FixedPoint(NamedTuple):
    """A fixed point (kappa, nu) of the Lemma 7 map, with the risk there, the eigenvalues of the
    Hessian of R in the angle chart kappa = cos(phi), nu = cos(psi), and its type."""
    kappa: float
    nu: float
    risk: float
    hessian_eigenvalues: tuple
    kind: str


def fixed_points(*, lam, gamma, d, L, eps=0.0):
    """The five fixed points of PGD on M (Propositions 9-10; MATH.md section 8): (0, 0) and the
    corners (+-1, +-1), classified by the Hessian of the risk in the angle chart
    (kappa, nu) = (cos phi, cos psi): "minimum" (both eigenvalues > 0), "maximum" (both < 0) or
    "saddle". With lam = 0.1, d = 400, L = 10, gamma^2 = 1/2: minima at (1, 1) and (-1, -1), maxima at
    (1, -1) and (-1, 1), a saddle at (0, 0). The fixed points do not depend on the step size.
    """
    check_positive("lam", lam)
    _check_common(gamma=gamma, L=L, eps=eps, d=d)
    d = float(d)
    f = lambda x: closed_form(jnp.cos(x[0]), jnp.cos(x[1]), 0.0, 0.0, 0.0, lam, gamma, d, L, eps)
    hess = jax.jit(jax.hessian(f))
    out = []
    for ka, nu in ((0.0, 0.0), (1.0, 1.0), (-1.0, -1.0), (1.0, -1.0), (-1.0, 1.0)):
        x = jnp.asarray([math.acos(ka), math.acos(nu)])
        ev = np.linalg.eigvalsh(np.asarray(hess(x)))
        kind = "minimum" if ev[0] > 0 else ("maximum" if ev[-1] < 0 else "saddle")
        out.append(FixedPoint(ka, nu, float(f(x)), tuple(float(e) for e in ev), kind))
    return out


# ----------------------------------------------------------------------------------------------
# Riemannian Hessian (step-size stability, MATH.md section 6 caveat)


def _gram_vectors(kappa, nu, theta, eta, rho):
    """Vectors k*, v*, k, v in R^5 with the given overlaps (a factor of their Gram matrix), plus room
    for one direction orthogonal to all four (the fifth coordinate)."""
    G = jnp.array([[1.0, 0.0, kappa, theta],
                   [0.0, 1.0, eta, nu],
                   [kappa, eta, 1.0, rho],
                   [theta, nu, rho, 1.0]])
    w, U = jnp.linalg.eigh(G)
    B = U * jnp.sqrt(jnp.clip(w, 0.0))
    B = jnp.concatenate([B, jnp.zeros((4, 1))], axis=1)
    return B[0], B[1], B[2] / jnp.linalg.norm(B[2]), B[3] / jnp.linalg.norm(B[3])


def _tangent_basis(x):
    _, _, vh = jnp.linalg.svd(x[None, :], full_matrices=True)
    return vh[1:]


def _hess_top(kappa, nu, theta, eta, rho, lam, gamma, d, L, eps):
    ks, vs, k, v = _gram_vectors(kappa, nu, theta, eta, rho)
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


def hessian_top_eigenvalue_overlaps(kappa, nu, theta, eta, rho, *, lam, gamma, d, L, eps=0.0):
    """Largest eigenvalue of the Riemannian Hessian of R_lam on S^{d-1} x S^{d-1} at a point with the
    given overlaps (arrays broadcast; e.g. the logged overlaps of a :class:`Trajectory`).

    Riemannian Hessian on a product of spheres: P (nabla^2 R - diag((k.grad_k R) I, (v.grad_v R) I)) P
    on the tangent space. It is computed exactly in R^5 (span{k*, v*, k, v} plus one orthogonal
    direction, which carries every eigenvalue of the d - 4 orthogonal ones), keeping the scalar d.
    PGD with step alpha is locally stable only where alpha times this is < 2.
    ``lam`` may be an array broadcasting with the overlaps (e.g. lam_t at the logged steps of a run
    with a schedule).
    """
    for name, val in (("kappa", kappa), ("nu", nu), ("theta", theta), ("eta", eta), ("rho", rho)):
        check_interval(name, val, -1.0, 1.0)
    lam_arr = np.asarray(lam, dtype=float)
    if not np.all(np.isfinite(lam_arr) & (lam_arr > 0)):
        raise ValueError(f"lam must be > 0 and finite (a scalar or an array), got {lam!r}")
    _check_common(gamma=gamma, L=L, eps=eps, d=d)
    fn = jnp.vectorize(lambda a, b, c, e, r, l: _hess_top(a, b, c, e, r, l, gamma, float(d), L, eps))
    return jax.jit(fn)(*(jnp.asarray(x, jnp.float64) for x in (kappa, nu, theta, eta, rho, lam)))


def hessian_top_eigenvalue(k, v, k_star, v_star, *, lam, gamma, L, eps=0.0):
    """Largest eigenvalue of the Riemannian Hessian of R_lam at (k, v) (d from the vectors' length).

    See :func:`hessian_top_eigenvalue_overlaps`; k, v of shape (d,) or (R, d).
    """
    k, v, ks, vs, d = _check_vectors(k, v, k_star, v_star)
    o = (k @ ks, v @ vs, v @ ks, k @ vs, np.sum(k * v, axis=-1))
    o = tuple(np.clip(x, -1.0, 1.0) for x in o)
    return hessian_top_eigenvalue_overlaps(*o, lam=lam, gamma=gamma, d=d, L=L, eps=eps)
