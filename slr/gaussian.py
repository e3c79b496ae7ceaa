"""Gaussian-erf identities (the paper's Lemma 18 and its analogues, derived in the oracle chapter).

For Z ~ N(0, 1), a real and b >= 0, with s_b = sqrt(1 + 2 b^2) and c_b = sqrt(1 + 4 b^2):

- (G1) ``phi(a, b)   = E[erf(a + b Z)]       = erf(a / s_b)``
- (G2) ``phi1(a, b)  = d/da phi               = erf'(a / s_b) / s_b``,   ``phi2 = erf''(a / s_b) / s_b^2``
- (G5) ``zeta(a, b)  = E[erf(a + b Z)^2]     = 1 - 8 T(sqrt(2) a / s_b, 1 / c_b)``  (Owen's T)
- (G6) ``zeta1(a, b) = d/da zeta``,  (G7) ``zeta2(a, b) = d^2/da^2 zeta``
- (G8) ``d/db zeta   = b * zeta2``  (heat equation), used as the exact derivative in b.

Everything is closed form (no quadrature) and differentiable to any order: ``zeta`` carries a custom
JVP built from (G6) and (G8), and the derivatives themselves are elementary functions. Each is jitted:
called on arrays outside a jit (the chapters' grids), one program per shape is compiled instead of one
per operation.
:func:`expect_normal` computes E[f(Z)] by adaptive quadrature, independently of every closed form.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import erf, owens_t

__all__ = ["derf", "d2erf", "phi", "phi1", "phi2", "zeta", "zeta1", "zeta2", "zeta0", "identities",
           "expect_normal"]

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def expect_normal(f, *, epsabs=1e-14, epsrel=1e-13):
    """E[f(Z)] for Z ~ N(0, 1), by adaptive quadrature on the real line (scipy.integrate.quad; f maps a
    float to a float). Independent of the closed forms of this module, which it serves to check."""
    import scipy.integrate

    g = lambda z: f(z) * math.exp(-z * z / 2) / math.sqrt(2 * math.pi)
    return scipy.integrate.quad(g, -math.inf, math.inf, epsabs=epsabs, epsrel=epsrel, limit=200)[0]


@jax.jit
def derf(x):
    """erf'(x) = 2/sqrt(pi) exp(-x^2)."""
    return _TWO_OVER_SQRT_PI * jnp.exp(-jnp.square(x))


@jax.jit
def d2erf(x):
    """erf''(x) = -2 x erf'(x)."""
    return -2.0 * x * derf(x)


def _s(b):
    return jnp.sqrt(1.0 + 2.0 * jnp.square(b))


def _c(b):
    return jnp.sqrt(1.0 + 4.0 * jnp.square(b))


@jax.jit
def phi(a, b):
    """(G1) E[erf(a + b Z)] = erf(a / sqrt(1 + 2 b^2))."""
    return erf(a / _s(b))


@jax.jit
def phi1(a, b):
    """(G2) d/da E[erf(a + b Z)] = E[erf'(a + b Z)] = erf'(a / s_b) / s_b."""
    s = _s(b)
    return derf(a / s) / s


@jax.jit
def phi2(a, b):
    """(G2) d^2/da^2 E[erf(a + b Z)] = erf''(a / s_b) / s_b^2."""
    s = _s(b)
    return d2erf(a / s) / jnp.square(s)


@jax.jit
def zeta1(a, b):
    """(G6) d/da E[erf(a + b Z)^2] = (2 / s_b) erf(a / (s_b c_b)) erf'(a / s_b)."""
    s, c = _s(b), _c(b)
    return 2.0 / s * erf(a / (s * c)) * derf(a / s)


@jax.jit
def zeta2(a, b):
    """(G7) d^2/da^2 E[erf(a + b Z)^2].

    = 2/(s^2 c) * (2/sqrt(pi)) erf'(sqrt(2) a / c) + (2/s^2) erf(a/(s c)) erf''(a / s).
    """
    s, c = _s(b), _c(b)
    s2 = jnp.square(s)
    return (2.0 / (s2 * c) * _TWO_OVER_SQRT_PI * derf(math.sqrt(2.0) * a / c)
            + 2.0 / s2 * erf(a / (s * c)) * d2erf(a / s))


@jax.custom_jvp
def zeta(a, b):
    """(G5) zeta(a; b) = E[erf(a + b Z)^2] = 1 - 8 T(sqrt(2) a / s_b, 1 / c_b), with Owen's T.

    Even in ``a``; ``zeta(+-inf; b) = 1``; ``zeta(0; b) = (2/pi) arcsin(2 b^2 / (1 + 2 b^2))`` (G9).
    Differentiable in both arguments: d zeta = zeta1 da + b zeta2 db (G6, G8).
    """
    return _zeta(a, b)


@jax.jit
def _zeta(a, b):
    """zeta's value (one compiled program per shape: Owen's T is some fifty operations, each of them
    compiled apart when called outside a jit)."""
    a, b = jnp.asarray(a), jnp.asarray(b)
    # owens_t computes in float64 even for float32 inputs: keep the dtype of (a, b), as the JVP does
    dtype = jnp.result_type(a, b)
    return (1.0 - 8.0 * owens_t(math.sqrt(2.0) * a / _s(b), 1.0 / _c(b))).astype(dtype)


@zeta.defjvp
def _zeta_jvp(primals, tangents):
    a, b = primals
    da, db = tangents
    out = zeta(a, b)
    return out, zeta1(a, b) * da + b * zeta2(a, b) * db


@jax.jit
def zeta0(b):
    """(G9) zeta(0; b) = (2/pi) arcsin(2 b^2 / (1 + 2 b^2)): the squared-erf mean of a centred input."""
    b2 = jnp.square(b)
    return 2.0 / math.pi * jnp.arcsin(2.0 * b2 / (1.0 + 2.0 * b2))


IDENTITY_NAMES = ("G1  E erf", "G2  E erf'", "G2  E erf''", "G3  E Z erf", "G4  E Z^2 erf", "G5  E erf^2",
                  "G6  2 E erf erf'", "G7  2 E[erf'^2 + erf erf'']", "G8  2 E Z erf erf'", "G9  E erf(bZ)^2")


def identities(a, b, Z):
    """The identities (G1)-(G9) at (a, b) as ``(names, samples, exact)``: ``samples[i]`` (shape of Z) has
    expectation ``exact[i]`` when Z ~ N(0, 1) (for Monte Carlo checks: compare ``samples.mean(-1)``).
    The left sides are E erf, E erf', E erf'', E Z erf, E Z^2 erf, E erf^2, E (erf^2)', E (erf^2)'',
    E Z (erf^2)' at a + bZ, and E erf(bZ)^2; the right sides use phi, zeta and their derivatives."""
    Z = np.asarray(Z, dtype=float)
    x = a + b * Z
    e, e1, e2 = (np.asarray(f(x)) for f in (erf, derf, d2erf))
    samples = np.stack([e, e1, e2, Z * e, Z ** 2 * e, e ** 2, 2 * e * e1, 2 * (e1 ** 2 + e * e2),
                        2 * Z * e * e1, np.asarray(erf(b * Z)) ** 2])
    exact = np.array([float(v) for v in (phi(a, b), phi1(a, b), phi2(a, b), b * phi1(a, b),
                                         phi(a, b) + b ** 2 * phi2(a, b), zeta(a, b), zeta1(a, b),
                                         zeta2(a, b), b * zeta2(a, b), zeta0(b))])
    return IDENTITY_NAMES, samples, exact
