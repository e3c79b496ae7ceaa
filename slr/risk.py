"""Closed-form risks of single-location regression, and a Monte Carlo estimator to check them.

- :func:`risk`: the risk R_lam(k, v) = E[(Y - T_lam(X))^2] of the erf predictor (Eq. 3) as a function
  of the five overlaps (kappa, nu, theta, eta, rho) = (k.k*, v.v*, v.k*, k.v*, k.v), on and off the
  manifold M = {theta = eta = rho = 0} (Proposition 15; Lemma 6 on M). Noise included: R >= eps^2.
- :func:`oracle_risk`: R_lam(k_star, v_star) (Theorem 1).
- :func:`linear_risk`, :func:`linear_weights`: the optimal linear predictor (Proposition 3).
- :func:`monte_carlo_risk`: an unbiased Monte Carlo estimate with its standard error.

Notation (MATH.md section 0): b = lam gamma, a = lam sqrt(d/2) kappa, m = sqrt(d/2) theta,
psi0 = 2 / sqrt(pi (1 + 2 lam^2)). ``gamma`` and ``eps`` are standard deviations.
"""
from __future__ import annotations

import math
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from slr import gaussian as G
from slr._validate import (check_int, check_interval, check_key, check_nonneg, check_orthogonal,
                           check_positive, check_unit, is_traced)
from slr.overlaps import overlaps  # noqa: F401  (risk_at; risk.overlaps kept importable for callers)

__all__ = ["risk", "risk_at", "oracle_risk", "excess_risk", "null_risk", "linear_risk",
           "linear_weights", "monte_carlo_risk", "closed_form"]


def _as_float_array(name, val, accepted):
    try:
        return np.asarray(val, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be {accepted}, got {val!r}") from None


def _check_common(lam, gamma, d, L, eps):
    for name, val in (("lam", lam), ("gamma", gamma)):
        if not is_traced(val):
            arr = _as_float_array(name, val, "> 0 and finite")
            if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
                raise ValueError(f"{name} must be > 0 and finite, got {val!r}")
    if not is_traced(eps):
        arr = _as_float_array("eps", eps, ">= 0 and finite")
        if not np.all(np.isfinite(arr)) or np.any(arr < 0):
            raise ValueError(f"eps must be >= 0 and finite, got {eps!r}")
    if d is not None and not is_traced(d):
        arr = _as_float_array("d", d, "a finite number >= 1")
        if (not np.all(np.isfinite(arr)) or np.any(arr < 1) or isinstance(d, (bool, np.bool_))
                or np.asarray(d).dtype == bool):
            raise ValueError(f"d must be a finite number >= 1, got {d!r}")
    if not is_traced(L):
        farr = _as_float_array("L", L, "an integer >= 1")
        if (not np.all(np.isfinite(farr)) or np.any(farr < 1) or np.any(farr != np.round(farr))
                or np.asarray(L).dtype == bool):
            raise ValueError(f"L must be an integer >= 1, got {L!r}")


def closed_form(kappa, nu, theta, eta, rho, lam, gamma, d, L, eps):
    """Proposition 15, compact form: the traceable kernel of :func:`risk` (positional arguments, no
    validation, differentiable; :func:`risk` is the checked entry point)."""
    r = jnp.sqrt(d / 2.0)
    b = lam * gamma
    a = lam * r * kappa
    m = r * theta
    g2 = gamma ** 2
    ph, ph1, ph2 = G.phi(a, b), G.phi1(a, b), G.phi2(a, b)
    ze, ze1, ze2 = G.zeta(a, b), G.zeta1(a, b), G.zeta2(a, b)
    psi0 = 2.0 / jnp.sqrt(math.pi * (1.0 + 2.0 * lam ** 2))
    lam2rho2 = lam ** 2 * rho ** 2
    return (eps ** 2 + g2
            - 2.0 * g2 * (nu * ph + lam * m * eta * ph1 + lam ** 2 * g2 * eta * rho * ph2)
            + (m ** 2 + g2) * ze + 2.0 * lam * g2 * m * rho * ze1 + lam ** 2 * g2 ** 2 * rho ** 2 * ze2
            + (L - 1) * (G.zeta0(lam) + lam2rho2 * G.zeta2(0.0, lam))
            + (L - 1) * (L - 2) * lam2rho2 * psi0 ** 2
            + 2.0 * (L - 1) * lam * rho * psi0 * (m * ph + lam * g2 * rho * ph1))


def risk(kappa, nu, theta, eta, rho, *, lam, gamma, d, L, eps=0.0):
    """R_lam as a function of the five overlaps (Proposition 15; Lemma 6 on M; Theorem 1 at (1,1,0,0,0)).

    All arguments broadcast (arrays give a grid of risks). The risk includes the noise: R >= eps^2.
    Overlaps must lie in [-1, 1]; lam, gamma > 0; eps >= 0; d >= 1 (d enters only via sqrt(d/2));
    L an integer >= 1. Under ``jax.jit``/``jax.grad`` traced values skip the checks.
    """
    for name, val in (("kappa", kappa), ("nu", nu), ("theta", theta), ("eta", eta), ("rho", rho)):
        check_interval(name, val, -1.0, 1.0, atol=1e-9)  # overlaps of unit vectors: allow round-off
    _check_common(lam, gamma, d, L, eps)
    # lists and tuples broadcast like arrays
    kappa, nu, theta, eta, rho, lam, gamma, d, L, eps = (
        jnp.asarray(x) if isinstance(x, (list, tuple)) else x
        for x in (kappa, nu, theta, eta, rho, lam, gamma, d, L, eps))
    return closed_form(kappa, nu, theta, eta, rho, lam, gamma, d, L, eps)


def risk_at(k, v, k_star, v_star, *, lam, gamma, L, eps=0.0):
    """R_lam(k, v) for unit vectors k, v (d taken from their length)."""
    for name, val in (("k", k), ("v", v), ("k_star", k_star), ("v_star", v_star)):
        check_unit(name, val)
    check_orthogonal("k_star", k_star, "v_star", v_star)
    d = np.shape(k)[-1]
    return risk(*overlaps(k, v, k_star, v_star), lam=lam, gamma=gamma, d=d, L=L, eps=eps)


def oracle_risk(*, lam, gamma, d, L, eps=0.0):
    """Theorem 1: R_lam(k_star, v_star)
    = eps^2 + gamma^2 E[(1 - erf(lam sqrt(d/2) + lam gamma Z))^2] + (L - 1) zeta(0; lam)."""
    return risk(1.0, 1.0, 0.0, 0.0, 0.0, lam=lam, gamma=gamma, d=d, L=L, eps=eps)


def excess_risk(kappa, nu, theta, eta, rho, *, lam, gamma, d, L, eps=0.0):
    """R_lam - eps^2: the distance to the Bayes risk eps^2 (Eq. 8)."""
    return risk(kappa, nu, theta, eta, rho, lam=lam, gamma=gamma, d=d, L=L, eps=eps) - jnp.square(eps)


def null_risk(*, gamma, eps=0.0):
    """Risk of the null predictor 0: E[Y^2] = gamma^2 + eps^2."""
    check_positive("gamma", gamma)
    check_nonneg("eps", eps)
    return gamma ** 2 + eps ** 2


def _linear_coefficients(gamma, L, p):
    if p is None:
        L = check_int("L", L)
        p = np.full(L, 1.0 / L)
    else:
        p = np.asarray(p, dtype=float)
        if p.ndim != 1 or p.shape[0] != L:
            raise ValueError(f"p must have shape (L,) = ({L},), got shape {p.shape}")
        check_interval("p", p, 0.0, 1.0)
        if abs(p.sum() - 1.0) > 1e-9:
            raise ValueError(f"p must sum to 1, got sum {p.sum()!r}")
    g2 = gamma ** 2
    return p, p * g2 / (1.0 + p * (g2 - 1.0))


def linear_weights(v_star, *, gamma, L, p=None):
    """Proposition 3: the optimal linear predictor sum_l w_l^T X_l has w_l = c_l v_star with
    c_l = p_l gamma^2 / (1 + p_l (gamma^2 - 1)). Returns W of shape (L, d)."""
    check_positive("gamma", gamma)
    check_unit("v_star", v_star)
    _, c = _linear_coefficients(gamma, L, p)
    return jnp.asarray(c)[:, None] * jnp.asarray(v_star)[None, :]


def linear_risk(*, gamma, L, eps=0.0, p=None):
    """Proposition 3: risk of the best linear predictor,
    eps^2 + gamma^2 - sum_l p_l^2 gamma^4 / (1 + p_l (gamma^2 - 1));
    for uniform p: eps^2 + gamma^2 (L - 1) / (L + gamma^2 - 1). Does not depend on d.

    ``L`` may be an integer array when ``p`` is None (a sweep over sequence lengths)."""
    check_positive("gamma", gamma)
    check_nonneg("eps", eps)
    g2 = gamma ** 2
    if p is None and np.ndim(L) > 0:
        _check_common(1.0, gamma, None, L, eps)
        L = np.asarray(L, dtype=float)
        return eps ** 2 + g2 * (L - 1.0) / (L + g2 - 1.0)
    p, c = _linear_coefficients(gamma, L, p)
    return eps ** 2 + g2 - float(np.sum(p * g2 * c))


def _frame(k, v, k_star, v_star):
    """Orthonormal basis Q (d, r) of span{k_star, v_star, k, v}, r = min(4, d)."""
    d = k.shape[0]
    if d <= 4:
        return jnp.eye(d)
    q, _ = jnp.linalg.qr(jnp.stack([k_star, v_star, k, v], axis=1))
    return q


@partial(jax.jit, static_argnames=("chunk", "L", "predictor"))
def _mc_errors(key, kr, vr, ksr, vsr, scale, gamma, eps, lam, *, chunk, L, predictor):
    """Squared errors of ``chunk`` samples drawn in the reduced frame (compiled once per shape)."""
    r = kr.shape[0]
    kx, kj, kg, kn = jax.random.split(key, 4)
    X = jax.random.normal(kx, (chunk, L, r), dtype=jnp.float64)
    J0 = jax.random.randint(kj, (chunk,), 0, L)
    signal = scale * ksr + gamma * jax.random.normal(kg, (chunk, r), dtype=jnp.float64)
    X = X.at[jnp.arange(chunk), J0].set(signal)
    y = signal @ vsr + eps * jax.random.normal(kn, (chunk,), dtype=jnp.float64)
    return jnp.square(y - predictor(X, kr, vr, lam))


def monte_carlo_risk(key, k, v, k_star, v_star, *, lam, gamma, L, eps=0.0, n, predictor=None,
                     chunk: int = 200_000):
    """Monte Carlo estimate of E[(Y - T(X))^2] with its standard error: returns (mean, stderr).

    ``predictor(X, k, v, lam)`` defaults to the erf predictor (Eq. 3); any predictor that sees the
    tokens only through X k and X v may be passed (``attention_softmax`` for instance). Sampling is
    done exactly in an orthonormal frame of span{k_star, v_star, k, v}: the other d - 4 coordinates of
    the tokens enter neither T nor Y, so the estimate has the law of a full d-dimensional one at a cost
    independent of d.
    """
    from slr.predictors import attention_erf

    check_key("key", key)
    n = check_int("n", n)
    chunk = check_int("chunk", chunk)
    L = check_int("L", L)
    check_positive("lam", lam)
    check_positive("gamma", gamma)
    check_nonneg("eps", eps)
    for name, val in (("k", k), ("v", v), ("k_star", k_star), ("v_star", v_star)):
        check_unit(name, val)
    d = np.shape(k_star)[0]
    for name, val in (("k", k), ("v", v), ("v_star", v_star)):
        check_unit(name, val, d=d)
    check_orthogonal("k_star", k_star, "v_star", v_star)
    predictor = attention_erf if predictor is None else predictor
    k, v, k_star, v_star = map(lambda x: jnp.asarray(x, jnp.float64), (k, v, k_star, v_star))
    Q = _frame(k, v, k_star, v_star)
    kr, vr, ksr, vsr = (Q.T @ x for x in (k, v, k_star, v_star))

    chunk = min(chunk, n)
    scale = math.sqrt(d / 2.0)

    def sums(kk, _):
        return _mc_errors(kk, kr, vr, ksr, vsr, scale, gamma, eps, lam, chunk=chunk, L=L, predictor=predictor)

    total, total2, count = 0.0, 0.0, 0
    keys = jax.random.split(key, -(-n // chunk))
    for i, kk in enumerate(keys):
        err = np.asarray(sums(kk, 0))[: min(chunk, n - i * chunk)]
        total += float(err.sum())
        total2 += float(np.square(err).sum())
        count += err.shape[0]
    mean = total / count
    var = max(total2 / count - mean ** 2, 0.0) * count / max(count - 1, 1)
    return mean, math.sqrt(var / count)
