"""Projected gradient descent on the sphere (Definition 1), exact: one engine for every run.

Definition 1 trains the erf predictor (Eq. 3) on the product of unit spheres:

    k+ = (k - alpha (I - k k^T) grad_k R) / ||.||,      v+ = (v - alpha (I - v v^T) grad_v R) / ||.||.

With the closed-form risk (Proposition 15) R depends on (k, v) only through the five overlaps
(:mod:`slr.overlaps`), so by the chain rule grad_k R = R_kappa k* + R_eta v* + R_rho v and
grad_v R = R_nu v* + R_theta k* + R_rho k: every iterate stays in span{k0, v0, k*, v*}, and the
iteration runs exactly in a 4-D orthonormal frame of that span, at a cost independent of d (d enters
the closed form only as a scalar).

- :func:`projected_step`: one step of Definition 1 from given Euclidean gradients (traceable).
- :func:`pgd`: exact PGD from vectors (k0, v0) of R^d, batched over starts; in the 4-D frame
  (``reduced=True``) or in R^d; float64 or float32; a float, a callable or an :class:`InverseTime` lam.
- :func:`pgd_overlaps`: exact PGD for N runs given by their initial overlaps, each with its own
  (lam0, c, alpha, d), all traced: one compiled program for a whole sweep.
- :func:`init_sphere` (one or H heads), :func:`init_manifold`: random starts. :class:`Trajectory`: the logged result;
  :func:`final_summary`: the final median, minimum and maximum over its runs.

Both entries run one jitted engine: the steps of the chunked loop of :mod:`slr.loop` with one copy of
the step in the compiled program (:func:`slr.loop.run_one_copy`).
"""
from __future__ import annotations

from functools import partial
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from slr import loop
from slr._validate import (check_float_dtype, check_int, check_interval, check_key, check_lam, check_oracle,
                           check_per_run, check_run, check_vectors)
from slr.overlaps import NAMES, dist_manifold, frame, frame_vectors, overlaps
from slr.risk import closed_form

__all__ = ["Trajectory", "InverseTime", "projected_step", "pgd", "pgd_overlaps", "init_sphere",
           "init_manifold", "split_lam", "final_summary"]

UNROLL = 2  # inner-loop unrolling of slr.manifold's loop (faster steps, longer compile); pgd's own loop
#             runs one copy of the step (loop.run_one_copy: each copy compiled costs more than it saves here)
_FIELDS = NAMES + ("excess_risk",)


class Trajectory(NamedTuple):
    """A logged PGD/SGD trajectory (a JAX pytree: NamedTuples are registered automatically).

    Attributes:
        step: shape (T,), the logged step numbers (step 0 included).
        kappa, nu, theta, eta, rho: shape (..., T), the five overlaps k.k*, v.v*, v.k*, k.v*, k.v
            (a leading repeat axis when the run had repeats).
        excess_risk: shape (..., T), R_lam_t(k_t, v_t) - eps^2 with the inverse temperature lam_t of
            that step: the closed form (Proposition 15) for exact PGD, the Monte Carlo estimate on a
            fixed test batch for :func:`slr.sgd.sgd` (the Figure 5 convention).
        excess_risk_closed: shape (..., T), the closed-form excess risk for :func:`slr.sgd.sgd`;
            ``None`` for exact PGD (where ``excess_risk`` already is the closed form).
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
        return dist_manifold(self.theta, self.eta, self.rho)

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


class InverseTime(NamedTuple):
    """The schedule lam_t = lam0 / (1 + c min(t, freeze)) (the paper's decreasing inverse temperature,
    c = 1e-4; ``freeze`` None: never frozen. Figure 9 holds lambda constant after step ``freeze``).

    A callable ``step -> lam``; passed as ``lam`` to :func:`pgd` or :func:`slr.sgd.train`, lam0 and c
    are traced (not baked into the compiled program), so runs that differ only in them share one
    compilation (a frozen schedule is compiled as a whole). A plain float ``lam`` is
    ``InverseTime(lam, 0.0)``.
    """
    lam0: float
    c: float = 0.0
    freeze: Optional[float] = None

    def __call__(self, t):
        if self.freeze is None:
            return self.lam0 / (1.0 + self.c * t)
        return self.lam0 / (1.0 + self.c * jnp.minimum(t, self.freeze))


def split_lam(lam):
    """(static callable or None, lam0, c) of a checked ``lam``; None means the traced schedule
    lam0 / (1 + c t) (an unfrozen :class:`InverseTime` or a float); a frozen :class:`InverseTime` is
    returned as the static callable. No checks."""
    if isinstance(lam, InverseTime) and lam.freeze is None:
        return None, float(lam.lam0), float(lam.c)
    if callable(lam):
        return lam, 1.0, 0.0
    return None, float(lam), 0.0


def _check_lam(lam, steps):
    """:func:`slr._validate.check_lam`; an unfrozen :class:`InverseTime` is evaluated in NumPy for the
    check (the same test on lam_t, t = 0..steps, without compiling its three operations)."""
    if isinstance(lam, InverseTime) and lam.freeze is None:
        check_lam(lambda t: lam(np.asarray(t)), steps)
        return lam
    return check_lam(lam, steps)


def projected_step(k, v, gk, gv, alpha):
    """One step of Definition 1 from the Euclidean gradients (gk, gv) at unit (k, v) of shape (d,):
    Riemannian gradient (I - x x^T) g, step of size alpha, renormalise. Traceable; no checks."""
    gk = gk - jnp.sum(k * gk, axis=-1) * k
    gv = gv - jnp.sum(v * gv, axis=-1) * v
    k = k - alpha * gk
    v = v - alpha * gv
    return k / jnp.linalg.norm(k), v / jnp.linalg.norm(v)


_grad5 = jax.grad(closed_form, argnums=(0, 1, 2, 3, 4))


def _closed_grads(k, v, ks, vs, lam, gamma, d, L, eps):
    """Euclidean gradients of the closed form: the chain rule through the five overlaps."""
    gka, gnu, gth, get, grh = _grad5(*overlaps(k, v, ks, vs), lam, gamma, d, L, eps)
    return gka * ks + get * vs + grh * v, gnu * vs + gth * ks + grh * k


def _pgd_single(k0, v0, ks, vs, lam0, c, alpha, d, gamma, L, eps, log_every, last, *, fn, n_logs, reduced,
                dt):
    if reduced and k0.shape[-1] > 4:
        Q = frame(ks, vs, k0, v0)
        k0, v0, ks, vs = (Q.T @ x for x in (k0, v0, ks, vs))
    k0, v0, ks, vs = (x.astype(dt) for x in (k0, v0, ks, vs))
    gamma, eps, alpha, d, L = (jnp.asarray(x, dt) for x in (gamma, eps, alpha, d, L))
    lam_t = loop.lam_fn(fn, lam0, c, dt)

    def body(cr, t):
        k, v = cr
        gk, gv = _closed_grads(k, v, ks, vs, lam_t(jnp.asarray(t, dt)), gamma, d, L, eps)
        return projected_step(k, v, gk, gv, alpha)

    log = lambda cr: jnp.stack(overlaps(*cr, ks, vs))
    return loop.run_one_copy(body, (k0, v0), log, n_logs, log_every, last).T  # (5, T)


@partial(jax.jit, static_argnames=("fn", "n_logs", "reduced", "dt", "axes"))
def _pgd_core(k0, v0, ks, vs, lam0, c, alpha, d, gamma, L, eps, log_every, last, t_log, *, fn, n_logs,
              reduced, dt, axes):
    """The one engine: ``axes`` (None or vmap in_axes of (k0, v0, ks, vs, lam0, c, alpha, d)) says which
    of them carry a leading run axis."""
    run = lambda *a: _pgd_single(*a, gamma, L, eps, log_every, last, fn=fn, n_logs=n_logs, reduced=reduced,
                                 dt=dt)
    args = (k0, v0, ks, vs, lam0, c, alpha, d)
    o = jax.vmap(run, in_axes=axes)(*args) if axes is not None else run(*args)  # (..., 5, T)
    # the excess risk at the logged points, from the logged overlaps (one copy of the closed form)
    col = lambda x, i: x[:, None] if axes is not None and axes[i] == 0 else x
    cast = lambda x: jnp.asarray(x, dt)
    lam = loop.lam_fn(fn, col(lam0, 4), col(c, 5), dt)(t_log.astype(dt))
    excess = closed_form(*(o[..., i, :] for i in range(5)), lam, cast(gamma), cast(col(d, 7)), cast(L),
                         cast(eps)) - jnp.square(cast(eps))
    return tuple(o[..., i, :] for i in range(5)) + (excess,)


def _run(args, *, fn, steps, log_every, gamma, L, eps, reduced, dt, axes):
    n_chunks, rem = loop.schedule(steps, log_every)
    t_log = loop.log_steps(steps, log_every)
    out = _pgd_core(*args, float(gamma), float(L), float(eps), log_every, int(rem or log_every),
                    jnp.asarray(t_log), fn=fn, n_logs=n_chunks + (rem is not None), reduced=reduced, dt=dt,
                    axes=axes)
    return Trajectory(t_log, *out)


def pgd(k0, v0, k_star, v_star, *, lam, alpha, steps, gamma, L, log_every, reduced=True, eps=0.0,
        dtype=jnp.float64) -> Trajectory:
    """Projected gradient descent (Definition 1) on the closed-form risk R_lam (Proposition 15).

    Args:
        k0, v0: unit vectors, shape (d,) or (R, d) for R repeats (vectorised with ``vmap``).
        k_star, v_star: orthonormal unit vectors, shape (d,).
        lam: inverse temperature, a float > 0, an :class:`InverseTime` or a traceable callable
            ``step -> lam`` (e.g. ``lambda t: 1 / (1 + 1e-4 * t)``, the paper's decreasing schedule).
        alpha: step size > 0. steps: number of steps >= 1. gamma: std of the informative token > 0.
        L: number of tokens (integer >= 1). eps: label noise std >= 0 (only shifts the risk).
        log_every: log every this many steps (step 0 and the last step are always logged).
        reduced: run exactly in the 4-D frame of span{k0, v0, k*, v*} (:func:`slr.overlaps.frame`;
            cost independent of d) instead of in R^d. Both give the same iterates up to roundoff.
        dtype: ``jnp.float64`` (default) or ``jnp.float32`` (everything, the risk included).
            For the Lemma 4 comparison (distance to M ~1e-16 in float64, ~1e-7 in float32) use
            ``reduced=False`` in float32: the 4-D frame is aligned with k*, v* and, from a start on M,
            keeps the off-M coordinates exactly zero, which hides the float32 roundoff.

    Returns:
        A :class:`Trajectory`; arrays of shape (T,) or (R, T) with T = len(step).
    """
    steps = check_int("steps", steps, lo=1)
    lam = _check_lam(lam, steps)
    check_run(alpha=alpha, gamma=gamma, L=L, eps=eps, log_every=log_every)
    k0, v0, ks, vs, d = check_vectors(k0, v0, k_star, v_star)
    fn, lam0, c = split_lam(lam)
    args = tuple(map(jnp.asarray, (k0, v0, ks, vs))) + (lam0, c, float(alpha), float(d))
    axes = (0, 0) + (None,) * 6 if k0.ndim == 2 else None
    return _run(args, fn=fn, steps=steps, log_every=int(log_every), gamma=gamma, L=L, eps=eps,
                reduced=bool(reduced), dt=check_float_dtype(dtype), axes=axes)


def pgd_overlaps(overlaps0, *, lam0, alpha, d, steps, gamma, L, log_every, c=0.0, eps=0.0) -> Trajectory:
    """Exact PGD (float64, 4-D frame) for N runs, run i from vectors with the overlaps overlaps0[:, i]
    (:func:`slr.overlaps.frame_vectors`) under the schedule lam0_i / (1 + c_i t), step size alpha_i
    and dimension d_i (d enters the closed form only as a scalar). Same iterates as :func:`pgd` from
    d-dim vectors with those overlaps, up to round-off (the frame differs).

    Args:
        overlaps0: the five initial overlaps (kappa, nu, theta, eta, rho), arrays of shape (N,).
        lam0 (> 0), c (>= 0), alpha (> 0), d (>= 1): scalars or arrays of shape (N,), all traced.
        steps, gamma, L, log_every, eps: as in :func:`pgd`.

    Returns:
        A :class:`Trajectory` with arrays of shape (N, T).
    """
    steps = check_int("steps", steps, lo=1)
    check_run(gamma=gamma, L=L, eps=eps, log_every=log_every)
    o0 = [np.atleast_1d(np.asarray(x, dtype=float)) for x in overlaps0]
    if len(o0) != 5:
        raise ValueError(f"overlaps0 must hold 5 arrays (kappa, nu, theta, eta, rho), got {len(o0)}")
    n = o0[0].shape[0]
    for name, x in zip(NAMES, o0):
        if x.ndim != 1 or x.shape != (n,):
            raise ValueError(f"overlaps0 arrays must share one shape (N,), got {name} of shape {x.shape}")
        check_interval(name, x, -1.0, 1.0, atol=1e-9)
    ks, vs, k0, v0 = frame_vectors(*o0)
    per = [check_per_run("lam0", lam0, n), check_per_run("c", c, n, strict=False),
           check_per_run("alpha", alpha, n), check_per_run("d", d, n, lo=1.0, strict=False)]
    args = (k0, v0, ks, vs) + tuple(jnp.asarray(x) for x in per)
    return _run(args, fn=None, steps=steps, log_every=int(log_every), gamma=gamma, L=L, eps=eps,
                reduced=False, dt=jnp.dtype(jnp.float64), axes=(0,) * 8)


def init_sphere(key, d, R, H=None):
    """R independent pairs (k0, v0), each uniform on S^{d-1} and independent: arrays of shape (R, d);
    with ``H`` heads, shape (R, H, d) (every k_h and v_h uniform and independent; the same numbers as
    ``init_sphere(key, d, R * H)`` reshaped)."""
    check_key("key", key)
    d = check_int("d", d, lo=1)
    R = check_int("R", R, lo=1)
    shape = (2, R) if H is None else (2, R, check_int("H", H, lo=1))
    g = jax.random.normal(key, shape + (d,), dtype=jnp.float64)
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
    ks, vs, d = check_oracle(k_star, v_star)
    if d < 4:
        raise ValueError(f"d must be >= 4 for init_manifold (k_star, v_star, k0, v0 generic on M), got {d}")
    ks, vs = jnp.asarray(ks), jnp.asarray(vs)
    g = jax.random.normal(key, (2, R, d), dtype=jnp.float64)
    dot = lambda x, y: jnp.sum(x * y, axis=-1)

    def orth(x, u):
        for _ in range(2):  # twice is enough (Gram-Schmidt re-orthogonalisation)
            x = x - dot(x, u)[..., None] * u
        return x

    k = orth(g[0], vs)
    k = k / jnp.linalg.norm(k, axis=-1, keepdims=True)
    v = g[1]
    for _ in range(2):
        v = orth(v, ks)
        kp = orth(k - dot(k, ks)[..., None] * ks, ks)
        kp = kp / jnp.linalg.norm(kp, axis=-1, keepdims=True)
        v = v - dot(v, kp)[..., None] * kp
    v = v / jnp.linalg.norm(v, axis=-1, keepdims=True)
    return k, v


def final_summary(traj: Trajectory) -> dict:
    """The final |kappa|, |nu|, excess risk and distance to M of a trajectory with repeats (R, T):
    ``{name: (median, min, max)}`` over the R runs, as floats (no interpolated percentiles: with 30
    runs that end at two points, a 95% "band" would invent values between them)."""
    if np.ndim(traj.kappa) != 2:
        raise ValueError(f"traj must have a repeat axis (arrays (R, T)), got kappa of shape {np.shape(traj.kappa)}")
    last = {"kappa": np.abs(traj.kappa[:, -1]), "nu": np.abs(traj.nu[:, -1]),
            "risk": np.asarray(traj.excess_risk)[:, -1], "dist": np.asarray(traj.dist_manifold)[:, -1]}
    return {q: (float(np.median(x)), float(np.min(x)), float(np.max(x))) for q, x in last.items()}
