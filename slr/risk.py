"""Closed-form risks of single-location regression (Section 4 and Appendix B of the paper).

- :func:`closed_form`: the traceable kernel of Proposition 15 (positional, no checks); :func:`risk`,
  its checked wrapper: the risk R_lam(k, v) = E[(Y - T_lam(X))^2] of the erf predictor (Eq. 3) as a
  function of the five overlaps (kappa, nu, theta, eta, rho) = (k.k*, v.v*, v.k*, k.v*, k.v), on and
  off the manifold M = {theta = eta = rho = 0} (Lemma 6 on M). Noise included: R >= eps^2.
- :func:`closed_form_expanded`: the same risk written term by term as in the paper's Proposition 15
  (zeta' and zeta'' expanded by Lemma 18): a second, independent transcription that checks the first.
- :func:`risk_at` (vectors), :func:`oracle_risk` (Theorem 1; Corollary 2 is its large-d limit),
  :func:`excess_risk`, :func:`null_risk`.
- :func:`manifold_risk` (the risk on M, vectorised in NumPy) and :func:`oracle_signal_part` (the
  oracle's signal part by Gauss-Hermite quadrature, where the closed form loses its digits).
- The risks of the other predictors (Proposition 3's linear predictor, affine predictors, linear and
  softmax attention, the two heads of Eq. (31)) are in :mod:`slr.other_risks`; this module re-exports
  them under the same names.

Monte Carlo estimates of any risk are in :mod:`slr.montecarlo`.

Notation: b = lam gamma, a = lam sqrt(d/2) kappa, m = sqrt(d/2) theta, psi0 = 2 / sqrt(pi (1 + 2 lam^2)),
and phi, zeta and their derivatives are the Gaussian-erf integrals of :mod:`slr.gaussian` (Lemma 18).
``gamma`` and ``eps`` are standard deviations.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from slr import gaussian as G
from slr import loop
from slr._validate import (check_int, check_interval, check_nonneg, check_orthogonal, check_positive,
                           check_risk_args, check_unit, is_traced)
from slr.overlaps import overlaps  # noqa: F401  (risk_at; risk.overlaps kept importable for callers)
from slr.other_risks import (SoftmaxExcess, affine_risk, linear_attention_best,  # noqa: F401
                             linear_attention_risk, linear_risk, linear_weights,
                             multihead_oracle_excess, softmax_excess, softmax_excess_bound)

__all__ = ["risk", "risk_at", "oracle_risk", "excess_risk", "null_risk", "linear_risk",
           "linear_weights", "affine_risk", "linear_attention_risk", "linear_attention_best", "closed_form",
           "manifold_risk", "oracle_signal_part", "closed_form_expanded", "softmax_excess_bound",
           "softmax_excess", "SoftmaxExcess", "multihead_oracle_excess"]


_BLOCK = 256  # points per call of the compiled closed form outside a jit


def closed_form(kappa, nu, theta, eta, rho, lam, gamma, d, L, eps):
    """Proposition 15, compact form: the traceable kernel of :func:`risk` (positional arguments, no
    validation, differentiable; :func:`risk` is the checked entry point). Traced (under ``jax.jit``,
    ``jax.grad``, ``vmap``), or with float32 arguments, it is one jitted program. Called on concrete
    float64 values outside a jit, it evaluates that program on blocks of ``_BLOCK`` points
    (:func:`slr.loop.in_blocks`): one compilation for every shape, where each combination of
    shapes and dtypes compiled its own program (14 in the landscape chapter, 11.1 s of XLA compilation
    on the slowest CPU the book ran on); the values move by round-off only. Returns a float64 array."""
    args = (kappa, nu, theta, eta, rho, lam, gamma, d, L, eps)
    if any(is_traced(a) for a in args) or jnp.result_type(*args) != jnp.float64:
        return _closed_form_jit(*args)
    return jax.device_put(loop.in_blocks(_closed_form_jit, args, _BLOCK))  # (jnp.asarray compiles per shape)


@jax.jit
def _closed_form_jit(kappa, nu, theta, eta, rho, lam, gamma, d, L, eps):
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


@jax.jit
def closed_form_expanded(kappa, nu, theta, eta, rho, lam, gamma, d, L, eps):
    """Proposition 15 as the paper writes it, with zeta'(a; b) and zeta''(a; b) expanded by Lemma 18
    into erf, erf' and erf'' of u = lam sqrt(d/2) kappa / s (s = sqrt(1 + 2 lam^2 gamma^2),
    c = sqrt(1 + 4 lam^2 gamma^2)). Traceable, positional, no checks; equal to :func:`closed_form` up
    to round-off (an independent transcription: the book's proofs appendix compares the two)."""
    erf, derf, d2erf = jax.scipy.special.erf, G.derf, G.d2erf
    r, g2 = jnp.sqrt(d / 2), gamma ** 2
    s, c = jnp.sqrt(1 + 2 * lam ** 2 * g2), jnp.sqrt(1 + 4 * lam ** 2 * g2)
    u = lam * r * kappa / s
    on_token = (g2 - 2 * (g2 * nu * erf(u) + lam * g2 * r * eta * theta / s * derf(u)
                          + lam ** 2 * g2 ** 2 * eta * rho / s ** 2 * d2erf(u))
                + (d / 2 * theta ** 2 + g2) * G.zeta(lam * r * kappa, lam * gamma)
                + 4 * lam * g2 * r / s * (theta * rho - lam ** 2 * g2 * rho ** 2 * kappa / s ** 2)
                * erf(u / c) * derf(u)
                + 4 * lam ** 2 * g2 ** 2 * rho ** 2 / (jnp.sqrt(jnp.pi) * s ** 2 * c)
                * derf(lam * jnp.sqrt(d) * kappa / c))
    noise = ((L - 1) * 8 * lam ** 2 * rho ** 2 / (jnp.pi * (1 + 2 * lam ** 2) * jnp.sqrt(1 + 4 * lam ** 2))
             + (L - 1) * (L - 2) * 4 * lam ** 2 * rho ** 2 / (jnp.pi * (1 + 2 * lam ** 2))
             + (L - 1) * 4 * lam * rho / jnp.sqrt(jnp.pi * (1 + 2 * lam ** 2))
             * (r * theta * erf(u) + lam * g2 * rho / s * derf(u)))
    return eps ** 2 + (L - 1) * G.zeta0(lam) + on_token + noise


def risk(kappa, nu, theta, eta, rho, *, lam, gamma, d, L, eps=0.0):
    """R_lam as a function of the five overlaps (Proposition 15; Lemma 6 on M; Theorem 1 at (1,1,0,0,0)).

    All arguments broadcast (arrays give a grid of risks). The risk includes the noise: R >= eps^2.
    Overlaps must lie in [-1, 1]; lam, gamma > 0; eps >= 0; d >= 1 (d enters only via sqrt(d/2));
    L an integer >= 1. Under ``jax.jit``/``jax.grad`` traced values skip the checks.
    """
    for name, val in (("kappa", kappa), ("nu", nu), ("theta", theta), ("eta", eta), ("rho", rho)):
        check_interval(name, val, -1.0, 1.0, atol=1e-9)  # overlaps of unit vectors: allow round-off
    check_risk_args(lam, gamma, d, L, eps)
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


def manifold_risk(kappa, nu, *, lam, gamma, d, L, eps=0.0):
    """Lemma 6, written out: the risk on M = {theta = eta = rho = 0},
    eps^2 + gamma^2 [1 - 2 nu erf(lam kappa sqrt(d) / sqrt(2 (1 + 2 lam^2 gamma^2))) + zeta(a; b)]
          + (L - 1) (2 / pi) arcsin(2 lam^2 / (1 + 2 lam^2)),   a = lam sqrt(d/2) kappa, b = lam gamma.
    An independent expression of :func:`risk` at (kappa, nu, 0, 0, 0). Broadcasts."""
    from scipy.special import erf

    for name, val in (("kappa", kappa), ("nu", nu)):
        check_interval(name, val, -1.0, 1.0, atol=1e-9)
    check_risk_args(lam, gamma, d, L, eps)
    kappa, nu, lam, gamma, d = (np.asarray(x, dtype=float) for x in (kappa, nu, lam, gamma, d))
    s = np.sqrt(1 + 2 * lam ** 2 * gamma ** 2)
    signal = 1 - 2 * nu * erf((lam * kappa * np.sqrt(d) / (np.sqrt(2) * s)))
    signal = signal + np.asarray(G.zeta(lam * np.sqrt(d / 2) * kappa, lam * gamma))
    return (eps ** 2 + gamma ** 2 * signal
            + (L - 1) * 2 / math.pi * np.arcsin(2 * lam ** 2 / (1 + 2 * lam ** 2)))


def oracle_signal_part(*, lam, gamma, d, nodes: int = 120):
    """The signal part of the oracle excess risk (Theorem 1), gamma^2 E[(1 - erf(a + b Z))^2] with
    a = lam sqrt(d/2), b = lam gamma, computed as gamma^2 E[erfc(a + b Z)^2] by Gauss-Hermite quadrature
    (``nodes`` nodes): no cancellation, so it keeps its relative precision where 1 - 2 phi + zeta
    (:mod:`slr.gaussian`) has lost every digit (below about 1e-15). Broadcasts over lam and d."""
    from scipy.special import erfc

    check_risk_args(lam, gamma, d, 1, 0.0)
    z, w = np.polynomial.hermite_e.hermegauss(check_int("nodes", nodes, lo=2))
    w = w / w.sum()
    a = np.asarray(lam, dtype=float) * np.sqrt(np.asarray(d, dtype=float) / 2)
    b = np.asarray(lam, dtype=float) * gamma
    a, b = np.broadcast_arrays(a, b)
    return gamma ** 2 * np.sum(w * erfc(a[..., None] + b[..., None] * z) ** 2, axis=-1)
