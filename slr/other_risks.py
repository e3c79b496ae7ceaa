"""Closed-form risks of the predictors the paper compares with the erf predictor, at their best or at
the oracle directions (Sections 2 and 4, Appendix E):

- :func:`linear_risk`, :func:`linear_weights`: the optimal linear predictor (Proposition 3);
  :func:`affine_risk`: the exact risk of any affine predictor.
- :func:`linear_attention_risk`, :func:`linear_attention_best`: linear attention at the oracle.
- :func:`softmax_excess_bound`, :func:`softmax_excess`: softmax attention at the oracle, a closed-form
  bound on its excess risk and the excess by importance sampling.
- :func:`multihead_oracle_excess`: the two-head attention of Eq. (31) at its oracle directions on the
  task of Eq. (30) with two informative locations (independent or shared token noise).

The erf predictor's own risk (Proposition 15, Theorem 1) is in :mod:`slr.risk`, which re-exports these.
``gamma`` and ``eps`` are standard deviations.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from slr import gaussian as G
from slr._validate import (check_int, check_nonneg, check_positive, check_probs, check_risk_args,
                           check_unit)

__all__ = ["linear_risk", "linear_weights", "affine_risk", "linear_attention_risk",
           "linear_attention_best", "softmax_excess_bound", "softmax_excess", "SoftmaxExcess",
           "multihead_oracle_excess"]


def _linear_coefficients(gamma, L, p):
    if p is None:
        L = check_int("L", L)
        p = np.full(L, 1.0 / L)
    else:
        p = check_probs("p", p, L)
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
        check_risk_args(1.0, gamma, None, L, eps)
        L = np.asarray(L, dtype=float)
        return eps ** 2 + g2 * (L - 1.0) / (L + g2 - 1.0)
    p, c = _linear_coefficients(gamma, L, p)
    return eps ** 2 + g2 - float(np.sum(p * g2 * c))


def affine_risk(W, b, k_star, v_star, *, gamma, eps=0.0, p=None):
    """Exact risk E[(Y - b - sum_l W_l^T X_l)^2] of an affine predictor, W of shape (L, d), b a scalar.

    Derivation (the moments of the proof of Proposition 3). With mu = sqrt(d/2) k_star and
    p_l = P(J0 = l): E X_l = p_l mu; E[X_l X_l^T] = (1 - p_l) I + p_l (gamma^2 I + mu mu^T);
    E[X_l X_m^T] = 0 for l != m (one of the two tokens is always centred and independent of the other);
    E[Y X_l] = p_l gamma^2 v_star (mu is orthogonal to v_star); E Y = 0 and E Y^2 = gamma^2 + eps^2.
    Expanding E[(Y - b - sum_l W_l^T X_l)^2],

        R = gamma^2 + eps^2 + b^2 + sum_l [ (1 + p_l (gamma^2 - 1)) |W_l|^2 + p_l (d/2) (W_l.k*)^2
                                            - 2 p_l gamma^2 W_l.v* + 2 b p_l sqrt(d/2) W_l.k* ].

    At b = 0, W_l = c_l v_star (Proposition 3) it is :func:`linear_risk`. ``p``: location probabilities
    of shape (L,), uniform when None.
    """
    check_positive("gamma", gamma)
    check_nonneg("eps", eps)
    W, k_star, v_star = (np.asarray(x, dtype=float) for x in (W, k_star, v_star))
    if W.ndim != 2 or W.shape[1] != k_star.shape[-1]:
        raise ValueError(f"W must have shape (L, d) with d={k_star.shape[-1]}, got shape {W.shape}")
    L, d = W.shape
    p = np.full(L, 1.0 / L) if p is None else check_probs("p", p, L)
    Wk, Wv, Wn2 = W @ k_star, W @ v_star, np.sum(W ** 2, axis=1)
    quad = (1 + p * (gamma ** 2 - 1)) * Wn2 + p * d / 2 * Wk ** 2
    return float(gamma ** 2 + eps ** 2 + b ** 2
                 + np.sum(quad - 2 * p * gamma ** 2 * Wv + 2 * b * p * np.sqrt(d / 2) * Wk))


def linear_attention_risk(*, lam, gamma, d, L, eps=0.0):
    """Risk of linear attention lam sum_l (X_l^T k)(X_l^T v) (``predictors.attention_linear``) at the
    oracle (k, v) = (k_star, v_star):  eps^2 + gamma^2 (1 - lam c)^2 + lam^2 gamma^4 + (L - 1) lam^2,
    c = sqrt(d/2).

    Derivation. With A_l = X_l^T k_star, B_l = X_l^T v_star: A = c + gamma Z_1, B = gamma Z_2 for the
    informative token, independent standard Gaussians for the others; so
    Y - T = gamma Z_2 (1 - lam c - lam gamma Z_1) - lam sum_{l != J0} A_l B_l + xi, uncorrelated terms
    whose variances add. Broadcasts over its arguments."""
    check_risk_args(lam, gamma, d, L, eps)
    c = np.sqrt(np.asarray(d, dtype=float) / 2)
    lam, g2 = np.asarray(lam, dtype=float), np.asarray(gamma, dtype=float) ** 2
    return eps ** 2 + g2 * (1 - lam * c) ** 2 + lam ** 2 * g2 ** 2 + (L - 1) * lam ** 2


def linear_attention_best(*, gamma, d, L, eps=0.0):
    """The lam minimising :func:`linear_attention_risk`, and that minimal risk:
    lam_lin = gamma^2 c / (gamma^2 c^2 + gamma^4 + L - 1), risk eps^2 + gamma^2 - gamma^4 c^2 / (same),
    c = sqrt(d/2) (the minimum of a quadratic in lam). Returns (lam_lin, risk)."""
    check_risk_args(1.0, gamma, d, L, eps)
    c2, g2 = np.asarray(d, dtype=float) / 2, np.asarray(gamma, dtype=float) ** 2
    den = g2 * c2 + g2 ** 2 + L - 1
    return g2 * np.sqrt(c2) / den, eps ** 2 + g2 - g2 ** 2 * c2 / den


class SoftmaxExcess(NamedTuple):
    """:func:`softmax_excess`'s result: the bound U, the excess, its standard error, the rare share."""
    bound: float
    excess: float
    se: float
    rare_share: float


def _softmax_terms(lam, gamma, d, L):
    """The two terms of U (coefficients and tilts, see :func:`softmax_excess_bound`): each is
    E[exp(a linear form of the scores)], whose exponential tilt shifts s_J0 by -2 lam gamma^2 and the
    first noise score by 2 lam (one token) or the first two by lam (two tokens)."""
    mu, g2 = math.sqrt(d / 2), gamma ** 2
    log_e0 = -2 * lam * mu + 2 * lam ** 2 * g2                         # log E exp(-2 lam s_J0)
    shifts = ([2 * lam], [lam, lam])
    try:
        e0 = math.exp(log_e0)
        coefs = ((1 + g2) * (L - 1) * math.exp(2 * lam ** 2) * e0,
                 g2 * (L - 1) * (L - 2) * math.exp(lam ** 2) * e0)
        if e0 > 0.0 and all(math.isfinite(c) for c in coefs):
            return list(zip(coefs, shifts))
    except OverflowError:
        pass
    # exp(2 lam^2) overflows or e0 underflows (far outside the book's range): the products in logs
    logs = (log_e0 + 2 * lam ** 2 + math.log((1 + g2) * (L - 1)),
            log_e0 + lam ** 2 + math.log(g2 * (L - 1) * (L - 2)) if L > 2 else -math.inf)
    return [(math.exp(x) if x < 709.0 else math.inf, sh) for x, sh in zip(logs, shifts)]


def _check_softmax(lam, gamma, d, L, L_min):
    check_positive("lam", lam)
    check_positive("gamma", gamma)
    check_positive("d", d)
    if isinstance(d, (bool, np.bool_)) or d < 1:
        raise ValueError(f"d must be a finite number >= 1, got {d!r}")
    return float(lam), float(gamma), float(d), check_int("L", L, lo=L_min)


def softmax_excess_bound(*, lam, gamma, d, L):
    """The closed-form upper bound U on the excess risk of softmax attention at the oracle (no label
    noise: the risk minus eps^2) with inverse temperature ``lam``:

        U = e^{-2 lam sqrt(d/2) + 2 lam^2 gamma^2} [(1 + gamma^2)(L - 1) e^{2 lam^2}
                                                   + gamma^2 (L - 1)(L - 2) e^{lam^2}].

    Derivation. At the oracle the scores s_l = X_l^T k* are s_J0 ~ N(sqrt(d/2), gamma^2) and N(0, 1)
    otherwise; with R = sum_{l != J0} e^{lam (s_l - s_J0)}, integrating out the v*-coordinates gives
    the excess E[(gamma^2 R^2 + sum_{l != J0} e^{2 lam (s_l - s_J0)}) / (1 + R)^2]. Dropping the
    denominator and using E e^{-2 lam s_J0} = e^{-2 lam sqrt(d/2) + 2 lam^2 gamma^2}, E e^{2 lam s_l}
    = e^{2 lam^2}, E e^{lam s_l} = e^{lam^2 / 2} gives U. It is tight when R is small (lam sqrt(d/2)
    well above log L + lam^2 / 2) and loose otherwise; :func:`softmax_excess` estimates the excess.

    Scalars only: lam, gamma > 0, d >= 1 (it enters only via sqrt(d/2)), L an integer >= 1 (U = 0
    at L = 1). Returns a float (inf where U exceeds the largest float)."""
    lam, gamma, d, L = _check_softmax(lam, gamma, d, L, 1)
    if L == 1:
        return 0.0
    return sum(c for c, _ in _softmax_terms(lam, gamma, d, L))


def softmax_excess(*, lam, gamma, d, L, n: int = 10_000, seed: int = 0) -> SoftmaxExcess:
    """Softmax attention at the oracle, no label noise: the bound U of :func:`softmax_excess_bound`,
    the excess risk itself by importance sampling with its standard error, and the share of the
    excess that comes from the rare draws in which s_J0 falls more than 2 lam gamma^2 below its mean
    and a noise score exceeds 2 lam (the draws that plain Monte Carlo misses when the loss is
    heavy-tailed).

    Each term of U is E[F] for F an exponential of the scores; the same expectation with the factor
    (1 + R)^{-2} is that term times E~(1 + R)^{-2} under the exponentially tilted law (s_J0 lowered by
    2 lam gamma^2, one noise score raised by 2 lam, or two by lam). The factor is the mean of a
    variable in [0, 1], estimated from ``n`` draws per tilted law (``numpy.random.default_rng(seed)``;
    the L - 1 noise scores are exchangeable, so the raised ones are the first). The standard error
    is that of these two means; the estimate never exceeds U.

    Scalars only: lam, gamma > 0, d >= 1, L an integer >= 2, n an integer >= 2, seed an integer >= 0;
    lam must keep U finite (else ValueError). Returns :class:`SoftmaxExcess` (bound, excess, se,
    rare_share), a tuple of floats."""
    lam, gamma, d, L = _check_softmax(lam, gamma, d, L, 2)
    n, seed = check_int("n", n, lo=2), check_int("seed", seed, lo=0)
    mu, g2, rng = math.sqrt(d / 2), gamma ** 2, np.random.default_rng(seed)
    terms = _softmax_terms(lam, gamma, d, L)
    if not all(math.isfinite(c) for c, _ in terms):
        raise ValueError(f"lam must be small enough for the bound U to be finite, got lam={lam!r} "
                         f"(d={d!r}, L={L!r}): U overflows")
    exact, var, rare = 0.0, 0.0, 0.0
    for coef, shift in terms:                                          # the tilted laws
        s0 = rng.normal(mu - 2 * lam * g2, gamma, n)
        s = rng.normal(0.0, 1.0, (n, L - 1))
        s[:, :len(shift)] += shift[:L - 1]
        with np.errstate(over="ignore"):                               # overflow: h = 0
            h = (1 + np.exp(lam * (s - s0[:, None])).sum(1)) ** -2.0  # in [0, 1]
        far = (s0 < mu - 2 * lam * g2) & (s.max(1) > 2 * lam)
        exact, var, rare = (exact + coef * h.mean(), var + coef ** 2 * h.var() / n,
                            rare + coef * (h * far).mean())
    share = rare / exact if exact > 0 else 0.0
    return SoftmaxExcess(float(sum(c for c, _ in terms)), float(exact), math.sqrt(var), float(share))


def multihead_oracle_excess(*, lam, gamma, d, L, shared_noise=False, other_head=True, noise_tokens=None):
    """Excess risk (the risk less eps^2) of the two-head attention of Eq. (31) at the oracle directions,
    k_h = k*_h and v_h = v*_h (h = 1, 2; k*_1, k*_2, v*_1, v*_2 orthonormal), on the task of Eq. (30)
    with two informative locations, exact:

        2 (L - 2) zeta(0; lam) + 2 gamma^2 [zeta(0; b) + E(1 - erf(a + b Z))^2]
                               (+ 4 gamma^2 E[erf(b Z) erf(a + b Z)] with shared token noise),

    a = lam sqrt(d/2), b = lam gamma, Z standard Gaussian; the first two expectations in closed form
    (zeta(0; .) is (G9), E(1 - erf)^2 = 1 - 2 phi(a, b) + zeta(a, b) by (G1), (G5)), the cross term
    by quadrature (:func:`slr.gaussian.expect_normal`).

    Derivation. Write s_lh = X_l.k*_h and u_lh = X_l.v*_h: the predictor is
    sum_h sum_l erf(lam s_lh) u_lh and the label y = gamma sum_j G_j.v*_j + eps xi. A noise token's
    four coordinates are independent standard Gaussians, and u_lh enters nowhere else: its term is
    centred, uncorrelated with the rest, of variance 2 E erf(lam Z)^2 = 2 zeta(0; lam) (one per head),
    hence 2 (L - 2) zeta(0; lam). The informative token of location j, X = sqrt(d/2) k*_j + gamma G_j,
    has s_jj = sqrt(d/2) + gamma G_j.k*_j, s_jh = gamma G_j.k*_h and u_jh = gamma G_j.v*_h. Collecting
    the error along v*_h (h' the other location):

        gamma [G_h.v*_h (1 - erf(a + b G_h.k*_h)) - G_h'.v*_h erf(b G_h'.k*_h)],

    the shortfall of head h's weight on its own token from 1 and the weight it gives the other token;
    the brackets of the two heads are uncorrelated (the factors G.v*_1, G.v*_2 are independent and
    centred). With independent noise (Eq. 30) the two products of a bracket are uncorrelated
    (G_h'.v*_h is centred and independent of the rest): gamma^2 [E(1 - erf(a + b Z))^2 + zeta(0; b)]
    per head. With shared noise (G_1 = G_2, as in the authors' code) the two products share the
    factor G.v*_h and the argument G.k*_h: their covariance adds -2 gamma^2 E[(1 - erf(a + b Z))
    erf(b Z)] = 2 gamma^2 E[erf(b Z) erf(a + b Z)] per head (E erf(b Z) = 0).

    Args:
        lam, gamma: inverse temperature and the informative tokens' noise level, scalars > 0.
        d: ambient dimension (>= 4: the four oracle directions are orthonormal), enters via sqrt(d/2).
        L: tokens per sequence, an integer >= 2 (two of them informative).
        shared_noise: the two informative tokens share their noise draw (adds the cross term).
        other_head: False leaves out the term gamma^2 zeta(0; b) of each informative token (the
            weight the other head gives it), a control; the cross term of shared noise stays.
        noise_tokens: the count of noise tokens, by default L - 2 (another count is a control).

    Returns a float; :func:`slr.montecarlo.multihead_oracle_sq_errors` estimates the same risk (at
    phi = 90 degrees) by Monte Carlo.
    """
    check_positive("lam", lam)
    check_positive("gamma", gamma)
    check_positive("d", d)
    if isinstance(d, (bool, np.bool_)) or d < 4:
        raise ValueError(f"d must be a finite number >= 4, got {d!r}")
    L = check_int("L", L, lo=2)
    m = L - 2 if noise_tokens is None else check_int("noise_tokens", noise_tokens, lo=0)
    for name, val in (("shared_noise", shared_noise), ("other_head", other_head)):
        if not isinstance(val, (bool, np.bool_)):
            raise ValueError(f"{name} must be a bool, got {val!r}")
    g, a, b = gamma, lam * np.sqrt(d / 2), lam * gamma
    own = 1 - 2 * float(G.phi(a, b)) + float(G.zeta(a, b))               # E(1 - erf(a + b Z))^2
    out = 2 * m * float(G.zeta0(lam)) + 2 * g ** 2 * ((float(G.zeta0(b)) if other_head else 0.0) + own)
    if not shared_noise:
        return out
    cross = G.expect_normal(lambda z: math.erf(b * z) * math.erf(a + b * z))
    return out + 4 * g ** 2 * cross
