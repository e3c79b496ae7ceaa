"""The best inverse temperature of an attention predictor at the oracle (k, v) = (k*, v*): a 1-D
minimisation in log lam (the chapter ``book/beyond_activations.ipynb``).

- :func:`erf_best`: Theorem 1's closed form (:func:`slr.risk.closed_form`), minimised by bounded Brent
  search after a scan; :func:`slr.risk.linear_attention_best` is the closed form for linear attention.
- :func:`mc_best`: any predictor of :data:`slr.predictors.PREDICTORS`, by Monte Carlo with common random
  numbers: the same samples for every lam (:func:`slr.montecarlo.risk` with one key), so the estimated
  risk is a smooth function of lam that Brent's method minimises. The label noise is left out
  (eps = 0): E[(Y - T)^2] - eps^2 = E[(X_{J0}^T v* - T)^2] for a predictor that does not read the
  noise, so the estimate is the excess risk itself, without the variance of the noise.
- :func:`grid_best`: the smallest value on a grid, the estimate that the minimisation replaces.
"""
from __future__ import annotations

import math

import jax
import numpy as np
from scipy.optimize import minimize_scalar

from slr import cache, montecarlo, risk
from slr._validate import check_int, check_key, check_positive

__all__ = ["erf_best", "mc_best", "grid_best", "oracle_best"]

_erf_excess = jax.jit(lambda lam, gamma, d, L: risk.closed_form(1.0, 1.0, 0.0, 0.0, 0.0, lam, gamma, d, L, 0.0))


def _brent(f, ts, vals=None):
    """Minimise f(t) near the best of the scan points ``ts`` (values ``vals``, computed if None) by
    bounded Brent search between the scan points around it. Returns (t, f(t))."""
    vals = np.asarray(f(ts)) if vals is None else np.asarray(vals)
    i = int(np.argmin(vals))
    a, b = ts[max(i - 1, 0)], ts[min(i + 1, len(ts) - 1)]
    res = minimize_scalar(lambda t: float(np.asarray(f(np.array([t])))[0]), bounds=(a, b), method="bounded",
                          options={"xatol": 1e-5})
    return (res.x, float(res.fun)) if res.fun <= vals[i] else (ts[i], float(vals[i]))


def erf_best(*, gamma, d, L, lo: float = 1e-4, hi: float = 1e2):
    """(lam, excess): the inverse temperature in [lo, hi] minimising the erf oracle excess risk of
    Theorem 1, and that excess risk R - eps^2 (which does not depend on eps)."""
    check_positive("gamma", gamma)
    check_positive("d", d)
    L = check_int("L", L)
    f = lambda t: _erf_excess(np.exp(t), float(gamma), float(d), float(L))
    t, val = _brent(f, np.linspace(math.log(lo), math.log(hi), 141))
    return math.exp(t), val


def mc_best(key, predictor, *, gamma, d, L, n: int, lo: float = 1e-3, hi: float = 1e2, scan: int = 13,
            grid=None):
    """(lam, excess, stderr): the lam minimising the Monte Carlo excess risk of ``predictor`` at the
    oracle (n sequences, the same for every lam), the minimum and its standard error. The search
    scans ``grid`` (default: ``scan`` values log-spaced in [lo, hi]), then refines by Brent's method
    between the scan values around the best; :func:`oracle_best` returns the scan too."""
    return _mc_search(key, predictor, gamma=gamma, d=d, L=L, n=n, lo=lo, hi=hi, scan=scan, grid=grid)[:3]


def _mc_search(key, predictor, *, gamma, d, L, n, lo, hi, scan, grid):
    check_key("key", key)
    e1, e2 = np.eye(2)   # (k*, v*) in the frame of R^2: all that the predictor reads at the oracle
    mc = lambda lam: montecarlo.risk(key, e1, e2, e1, e2, lam=lam, d=d, gamma=gamma, L=L, eps=0.0, n=n,
                                     predictor=predictor)
    lams = np.geomspace(lo, hi, check_int("scan", scan, lo=3)) if grid is None else np.asarray(grid, float)
    curve, curve_se = mc(lams)
    t, val = _brent(lambda ts: np.atleast_1d(mc(np.exp(ts))[0]), np.log(lams), curve)
    return math.exp(t), val, float(mc(math.exp(t))[1]), curve, curve_se


def grid_best(values, lams):
    """(lam, value) at the smallest of ``values`` on the grid ``lams``."""
    i = int(np.argmin(values))
    return float(np.asarray(lams)[i]), float(np.asarray(values)[i])


@cache.memoized
def oracle_best(names, *, gamma, d, L, n: int, grid, seed: int = 0) -> dict:
    """For each predictor name: the minimised Monte Carlo excess risk at the oracle (``<name>_lam``,
    ``<name>_excess``, ``<name>_se``: :func:`mc_best` with ``jax.random.key(seed + i)``, scanning
    ``grid``) and the Monte Carlo curve on ``grid`` from the same samples (``<name>_curve``,
    ``<name>_curve_se``); ``grid`` is kept as ``lam``."""
    out = {"lam": np.asarray(grid, dtype=float)}
    for i, name in enumerate(names):
        found = _mc_search(jax.random.key(seed + i), name, gamma=gamma, d=d, L=L, n=n, lo=None, hi=None,
                           scan=None, grid=out["lam"])
        for field, value in zip(("lam", "excess", "se", "curve", "curve_se"), found):
            out[f"{name}_{field}"] = value
    return out
