"""The gradient flow of Definition 1 in the five overlaps: the alpha -> 0 limit of exact PGD in the time
tau = alpha t, a closed 5-D system at every d (Proposition 15 depends on (k, v) only through the overlaps).

- :func:`overlap_flow`: its right-hand side at one point.
- :func:`flow_overlaps`: N runs integrated at once by an implicit (stiff) solver, so that the cost does
  not grow with d (:func:`slr.recovery.dimension_sweep` with ``method="flow"`` goes to d = 10^6).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from scipy.integrate import solve_ivp
from scipy.sparse import csc_matrix

from slr._threads import pool_map
from slr._validate import check_int, check_interval, check_positive
from slr.overlaps import NAMES
from slr.risk import closed_form

__all__ = ["overlap_flow", "flow_overlaps"]


_grad5 = jax.grad(closed_form, argnums=(0, 1, 2, 3, 4))


def _field(o, p):
    """d(kappa, nu, theta, eta, rho)/dtau at o (5,) for p = (lam, gamma, d, L): see overlap_flow."""
    ka, nu, th, et, rh = o
    Rk, Rn, Rt, Re, Rr = _grad5(ka, nu, th, et, rh, p[0], p[1], p[2], p[3], 0.0)
    ak, av = Rk * ka + Re * et + Rr * rh, Rn * nu + Rt * th + Rr * rh  # k.grad_k R, v.grad_v R
    return -jnp.stack([Rk + Rr * th - ak * ka, Rn + Rr * et - av * nu, Rt + Rr * ka - av * th,
                       Re + Rr * nu - ak * et, Rk * th + Re * nu + Rn * et + Rt * ka + 2 * Rr - (ak + av) * rh])


_field_jit = jax.jit(_field)
_field_n = jax.jit(jax.vmap(_field))  # N runs, each with its own parameters (N, 4)
_jac_n = jax.jit(jax.vmap(jax.jacfwd(_field)))
FLOW_BLOCK = 256  # flow_overlaps pads its runs to a multiple of this (one compilation per block count)


def overlap_flow(overlaps0, *, lam, d, gamma, L):
    """The right-hand side of the gradient flow in the time tau = alpha t, the alpha -> 0 limit of
    Definition 1 at a constant lam: dk/dtau = -(I - k k^T) grad_k R, dv/dtau = -(I - v v^T) grad_v R.
    With grad_k R = R_kappa k* + R_eta v* + R_rho v and grad_v R = R_nu v* + R_theta k* + R_rho k
    (Proposition 15 depends on (k, v) only through the overlaps; R_x its partial derivatives), and
    a_k = k.grad_k R = R_kappa kappa + R_eta eta + R_rho rho, a_v = R_nu nu + R_theta theta + R_rho rho:

        kappa' = -(R_kappa + R_rho theta - a_k kappa),   eta'   = -(R_eta + R_rho nu - a_k eta),
        nu'    = -(R_nu + R_rho eta - a_v nu),           theta' = -(R_theta + R_rho kappa - a_v theta),
        rho'   = -(R_kappa theta + R_eta nu + R_nu eta + R_theta kappa + 2 R_rho - (a_k + a_v) rho),

    a closed 5-D system (no eps: it only shifts R). Returns (kappa', nu', theta', eta', rho'), shape (5,)."""
    _check_flow(lam, d, gamma, L)
    o = np.asarray(overlaps0, dtype=float)
    if o.shape != (5,):
        raise ValueError(f"overlaps0 must have shape (5,), got {o.shape}")
    return np.asarray(_field_jit(jnp.asarray(o), jnp.array([lam, gamma, d, L], dtype=float)))


def _check_flow(lam, d, gamma, L):
    """lam > 0 and d >= 1 (scalars or arrays, finite), gamma > 0, L an integer >= 1."""
    if not np.all(np.isfinite(lam) & (np.asarray(lam, dtype=float) > 0)):
        raise ValueError(f"lam must be finite and > 0, got {lam!r}")
    if not np.all(np.isfinite(d) & (np.asarray(d, dtype=float) >= 1)):
        raise ValueError(f"d must be a finite number >= 1, got {d!r}")
    check_positive("gamma", gamma)
    check_int("L", L)


def flow_overlaps(overlaps0, *, lam, d, horizon, n_logs, gamma, L, rtol=1e-6, atol=1e-9):
    """The flow of :func:`overlap_flow` from N starts (overlaps0: five arrays of shape (N,)), run i at
    (lam_i, d_i) (scalars or arrays (N,)), to time ``horizon``, logged at tau = horizon j / n_logs.
    All runs form one system of 5N equations, integrated by scipy's Radau (implicit, order 5;
    Jacobian block-diagonal, its blocks by jax.jacfwd): the modes transverse to M decay at rates ~ d,
    which an explicit method (PGD itself) must follow with steps ~ 1/d, an implicit one does not, so
    the cost hardly depends on d. Returns a dict: the five overlaps and the excess risk, each (N, T), and
    ``time`` (T,)."""
    horizon, n_logs = check_positive("horizon", horizon), check_int("n_logs", n_logs)
    check_positive("rtol", rtol), check_positive("atol", atol)
    o0 = np.stack([np.atleast_1d(np.asarray(x, dtype=float)) for x in overlaps0])
    if o0.ndim != 2 or o0.shape[0] != 5:
        raise ValueError(f"overlaps0 must hold 5 arrays of one shape (N,), got shape {o0.shape}")
    for name, x in zip(NAMES, o0):
        check_interval(name, x, -1.0, 1.0, atol=1e-9)
    n = o0.shape[1]
    lam, d = (np.broadcast_to(np.asarray(x, dtype=float), (n,)) for x in (lam, d))
    _check_flow(lam, d, gamma, L)
    # the runs padded to a multiple of FLOW_BLOCK (repeating the last): one compilation of the field
    # and its Jacobian for every N up to that size; the rows of the padding are dropped
    pad = lambda x: np.pad(x, ((0, -n % FLOW_BLOCK), (0, 0)), mode="edge")
    p = jnp.asarray(pad(np.stack([lam, np.full(n, float(gamma)), d, np.full(n, float(L))], axis=1)))
    idx = np.arange(5 * n).reshape(n, 5)
    rows, cols = np.repeat(idx, 5, axis=1).ravel(), np.tile(idx, (1, 5)).ravel()
    f = lambda t, y: np.asarray(_field_n(jnp.asarray(pad(y.reshape(n, 5))), p))[:n].ravel()
    jac = lambda t, y: csc_matrix((np.asarray(_jac_n(jnp.asarray(pad(y.reshape(n, 5))), p))[:n].ravel(),
                                   (rows, cols)), shape=(5 * n, 5 * n))
    t_eval = horizon * np.arange(n_logs + 1) / n_logs
    y0 = jnp.asarray(pad(o0.T))
    pool_map(lambda g: g(y0, p).block_until_ready(), [_field_n, _jac_n])  # both compiled at once
    sol = solve_ivp(f, (0.0, horizon), o0.T.ravel(), method="Radau", t_eval=t_eval, jac=jac, rtol=rtol,
                    atol=atol)
    if not sol.success:
        raise RuntimeError(f"the flow failed: {sol.message}")
    y = np.clip(sol.y.reshape(n, 5, -1).transpose(1, 0, 2), -1.0, 1.0)  # (5, N, T)
    out = {name: y[i] for i, name in enumerate(NAMES)}
    # the closed form op by op on the padded runs (its programs compiled once for every N up to the block)
    col = lambda x: pad(np.asarray(x)[:, None])
    out["excess_risk"] = np.asarray(closed_form(*(pad(x) for x in y), col(lam), gamma, col(d), float(L),
                                                0.0))[:n]
    out["time"] = t_eval
    return out
