"""Recovery of (k*, v*) by exact PGD from uniform starts on the sphere (the book's own experiments of
the chapter on the paper's open questions; the dynamics is Definition 1 on the closed form of
Proposition 15, simulated exactly in the 4-D frame by :func:`slr.pgd.pgd_overlaps`).

- :func:`sphere_overlaps`: the five overlaps of uniform starts against one oracle (:func:`sphere_overlaps_law`: in law).
- :class:`TemperatureConfig`, :func:`temperature_map`: a grid of (lam0, decay) cells, each run to a
  horizon in time alpha t, logged (recovery as a function of time).
- :class:`DimensionConfig`, :func:`dimension_sweep`: one recipe rescaled with d (lam sqrt(d) and
  alpha d fixed), each d to the same horizon in time.
- ``DimensionConfig(method="flow")``: the same sweep by the gradient flow in the five overlaps
  (:mod:`slr.flow`, the alpha -> 0 limit of Definition 1), whose cost does not grow with d.
- :func:`first_passage`: the first logged time at which a condition holds; :func:`log_law`: the fit
  T = A + B log d of first-passage times, with a bootstrap over the runs.
- :func:`end_kinds`: :func:`slr.landscape.classify` and the risk minus the oracle's, at every log.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from slr import landscape, loop, pgd, task
from slr._threads import pool_map
from slr._validate import check_int, check_key, check_nonneg, check_positive
from slr.flow import flow_overlaps
from slr.overlaps import NAMES, overlaps
from slr.risk import closed_form, oracle_risk

__all__ = ["sphere_overlaps", "sphere_overlaps_law", "TemperatureConfig", "temperature_map",
           "DimensionConfig", "dimension_sweep", "first_passage", "log_law", "end_kinds", "run_to",
           "run_halves"]


def sphere_overlaps(key, d: int, R: int):
    """The overlaps (kappa, nu, theta, eta, rho), each of shape (R,), of R independent uniform starts
    (:func:`slr.pgd.init_sphere`) against one oracle (:func:`slr.task.sample_oracle`); ``key`` is split
    into (oracle, starts). One compiled program per (d, R)."""
    return tuple(np.asarray(x) for x in _sphere(check_key("key", key), check_int("d", d, lo=2), check_int("R", R)))


_sphere = jax.jit(lambda key, d, R: overlaps(*pgd.init_sphere(jax.random.split(key)[1], d, R),
                                             *task.sample_oracle(jax.random.split(key)[0], d)), static_argnums=(1, 2))


def sphere_overlaps_law(key, d, R: int):
    """The law of :func:`sphere_overlaps` at a cost independent of d (d traced: one compilation for every
    d >= 4): with k = g/|g|, v = h/|h| (g, h standard normal in R^d, k*, v* the first two axes), only
    g1, g2, h1, h2 and the Gram matrix of the other d - 2 coordinates enter, and that matrix is
    (a, sqrt(a) u; ., u^2 + b), a ~ chi2(d-2), u ~ N(0, 1), b ~ chi2(d-3). Not the same draws; shapes (R,)."""
    return tuple(np.asarray(x) for x in _law(check_key("key", key), float(check_int("d", d, lo=4)), check_int("R", R)))


@partial(jax.jit, static_argnums=2)
def _law(key, d, R):
    kn, ka, kb = jax.random.split(key, 3)
    (g1, g2, h1, h2, u), a, b = jax.random.normal(kn, (5, R)), *(jax.random.chisquare(
        k, d - m, (R,)) for k, m in ((ka, 2.0), (kb, 3.0)))
    ng, nh = jnp.sqrt(g1 ** 2 + g2 ** 2 + a), jnp.sqrt(h1 ** 2 + h2 ** 2 + u ** 2 + b)
    return g1 / ng, h2 / nh, h1 / nh, g2 / ng, (g1 * h1 + g2 * h2 + jnp.sqrt(a) * u) / (ng * nh)


def run_to(o, *, lam0, c_time, alpha, d, horizon, n_logs, gamma, L):
    """Exact PGD to time ``horizon`` with n_logs + 1 logs (one compilation for every (alpha, horizon)):
    lam_t = lam0 / (1 + c_time alpha t). Returns the (N, T) overlaps, excess risk and the times (T,)."""
    steps = int(round(horizon / alpha / n_logs)) * n_logs
    tr = pgd.pgd_overlaps(o, lam0=lam0, c=np.asarray(c_time) * alpha, alpha=alpha, d=d, steps=steps,
                          gamma=gamma, L=L, log_every=steps // n_logs)
    out = {f: np.asarray(getattr(tr, f)) for f in NAMES + ("excess_risk",)}
    out["time"] = np.asarray(tr.step) * alpha
    return out


def run_halves(o, *, lam0, c_time, **kw):
    """:func:`run_to` with the N runs split into two halves run on two threads (:func:`pool_map`;
    one compiled program for both), joined, when N is a multiple of 16. A vmap over fewer runs may
    round differently (seen with 4 runs against 2); with N and N / 2 multiples of 8 it gave the numbers
    of one call bit for bit (the book's temperature map, 240 runs against 2 x 120, and the tests);
    any other N runs in one call."""
    n = np.size(o[0])
    if n % 16:
        return run_to(o, lam0=lam0, c_time=c_time, **kw)
    per = lambda x, s: np.broadcast_to(np.asarray(x, dtype=float), (n,))[s]
    parts = pool_map(lambda s: run_to(tuple(np.asarray(x)[s] for x in o), lam0=per(lam0, s),
                                       c_time=per(c_time, s), **kw),
                     [slice(0, n // 2), slice(n // 2, n)])
    return {k: parts[0][k] if k == "time" else np.concatenate([p[k] for p in parts])
            for k in parts[0]}


@dataclass(frozen=True)
class TemperatureConfig:
    """A (lam0, decay) grid from uniform starts: lam_t = lam0 / (1 + c tau) in the time tau = alpha t
    (c = ``decays``; Figure 4(a)'s 1 / (1 + 1e-4 t) at alpha = 4e-3 is c = 0.025), ``repeats`` starts
    per cell (all cells share one oracle and the starts of a cell are its own), to time ``horizon``."""
    lam0s: tuple = (0.03, 0.1, 0.3, 1.0, 3.0)
    decays: tuple = (0.0, 0.025, 0.25)
    horizon: float = 480.0
    alpha: float = 1e-3
    d: int = 400
    L: int = 10
    gamma: float = math.sqrt(0.5)
    repeats: int = 16
    n_logs: int = 240

    def validate(self) -> "TemperatureConfig":
        for name, x in [("lam0s", x) for x in self.lam0s] + [(n, getattr(self, n)) for n in ("horizon", "alpha", "gamma")]:
            check_positive(name, x)
        for x in self.decays:
            check_nonneg("decays", x)
        for name in ("d", "L", "repeats", "n_logs"):
            check_int(name, getattr(self, name))
        return self


def temperature_map(cfg: TemperatureConfig, seed: int) -> dict:
    """Every cell of ``cfg`` to its horizon: overlaps and excess risk of shape (n_decay, n_lam0, R, T),
    ``time`` (T,), ``lam`` (n_decay, n_lam0, T) and the oracle's risk there, ``oracle`` (same shape)."""
    nc, nl, R = len(cfg.decays), len(cfg.lam0s), cfg.repeats
    o = sphere_overlaps(jax.random.key(seed), cfg.d, nc * nl * R)
    lam0 = np.broadcast_to(np.asarray(cfg.lam0s)[None, :, None], (nc, nl, R)).ravel()
    c = np.broadcast_to(np.asarray(cfg.decays)[:, None, None], (nc, nl, R)).ravel()
    out = run_halves(o, lam0=lam0, c_time=c, alpha=cfg.alpha, d=cfg.d, horizon=cfg.horizon,
                     n_logs=cfg.n_logs, gamma=cfg.gamma, L=cfg.L)
    out = {k: (v.reshape(nc, nl, R, -1) if k != "time" else v) for k, v in out.items()}
    lam = np.asarray(cfg.lam0s)[None, :, None] / (1 + np.asarray(cfg.decays)[:, None, None] * out["time"])
    out.update(lam=lam, oracle=np.asarray(oracle_risk(lam=lam, gamma=cfg.gamma, d=cfg.d, L=cfg.L)))
    return out


@dataclass(frozen=True)
class DimensionConfig:
    """One recipe rescaled with d: a constant lam = ell / sqrt(d) and alpha = alpha_d / d (the
    curvature transverse to M grows like d), every d run to the same time ``horizon``. The defaults
    are Figure 7(b)'s recipe (lam = 0.1, alpha = 4e-3 at d = 400). ``method``: "pgd" (exact PGD with
    that step, :func:`slr.pgd.pgd_overlaps`) or "flow" (its alpha -> 0 limit, :func:`slr.flow.flow_overlaps`
    with tolerances ``rtol``, ``atol``; alpha_d unused)."""
    ell: float = 2.0
    alpha_d: float = 1.6
    horizon: float = 80.0
    L: int = 10
    gamma: float = math.sqrt(0.5)
    repeats: int = 96
    n_logs: int = 400
    ds: tuple = (316, 1000, 3162, 10000)
    method: str = "pgd"
    rtol: float = 1e-6
    atol: float = 1e-9

    def validate(self) -> "DimensionConfig":
        for name in ("L", "repeats", "n_logs"):
            check_int(name, getattr(self, name))
        for name in ("ell", "alpha_d", "horizon", "gamma", "rtol", "atol"):
            check_positive(name, getattr(self, name))
        if not all(isinstance(x, int) and x >= 4 for x in self.ds):
            raise ValueError(f"ds must be integers >= 4, got {self.ds!r}")
        if self.method not in ("pgd", "flow"):
            raise ValueError(f"method must be 'pgd' or 'flow', got {self.method!r}")
        return self


def dimension_sweep(cfg: DimensionConfig, seed: int) -> dict:
    """``cfg.repeats`` uniform starts per d (each d its own oracle, key fold_in(key(seed), d): the
    same starts for both methods): the overlaps and excess risk of shape (n_d, R, T), ``time`` (T,)
    (a log every horizon / n_logs), ``time_d`` (n_d, T) (the exact logged times of each d: PGD logs
    every round(horizon / (alpha n_logs)) steps) and ``lam`` (n_d,). ``cfg.method`` picks exact PGD or
    the flow (every d logged at ``time``)."""
    cfg.validate()
    # one compiled program per d for the starts: compiled on two threads
    starts = pool_map(lambda d: sphere_overlaps(jax.random.fold_in(jax.random.key(seed), int(d)), int(d),
                                                 cfg.repeats), cfg.ds)
    if cfg.method == "flow":  # every d in one system: one solver call for the whole sweep
        d_run = np.repeat(np.asarray(cfg.ds, dtype=float), cfg.repeats)
        fl = flow_overlaps(np.concatenate(starts, axis=1), lam=cfg.ell / np.sqrt(d_run), d=d_run,
                           horizon=cfg.horizon, n_logs=cfg.n_logs, gamma=cfg.gamma, L=cfg.L,
                           rtol=cfg.rtol, atol=cfg.atol)
        out = {k: v.reshape(len(cfg.ds), cfg.repeats, -1) for k, v in fl.items() if k != "time"}
        out.update(time=fl["time"], lam=cfg.ell / np.sqrt(np.asarray(cfg.ds, dtype=float)),
                   time_d=np.broadcast_to(fl["time"], (len(cfg.ds), len(fl["time"]))).copy())
        return out
    # every d on one of two threads (one compiled program for all), the longest runs first; a d's runs
    # are not split (a vmap over fewer runs may round differently)
    runs = pool_map(lambda a: run_to(a[0], lam0=cfg.ell / math.sqrt(a[1]), c_time=0.0,
                                      alpha=cfg.alpha_d / a[1], d=float(a[1]), horizon=cfg.horizon,
                                      n_logs=cfg.n_logs, gamma=cfg.gamma, L=cfg.L),
                     list(zip(starts, cfg.ds)), cost=list(cfg.ds))
    out = {k: np.stack([r[k] for r in runs]) for k in runs[0] if k != "time"}
    out.update(time=runs[0]["time"], lam=cfg.ell / np.sqrt(np.asarray(cfg.ds, dtype=float)),
               time_d=np.stack([r["time"] for r in runs]))
    return out


def first_passage(time, hit):
    """The first entry of ``time`` (T,) at which ``hit`` (..., T) holds, np.inf where it never does."""
    hit = np.asarray(hit, dtype=bool)
    first = np.asarray(time)[np.argmax(hit, axis=-1)]
    return np.where(hit.any(axis=-1), first, np.inf)


def log_law(ds, times, *, n_boot: int = 2000, seed: int = 0):
    """Fit T(d) = A + B log d to first-passage times ``times`` (n_d, R) (np.inf: never; the median over
    the runs that pass is fitted, by least squares in log d). Returns ``(A, B)`` and the bootstrap
    ``(n_boot, 2)`` of the fit over runs resampled with replacement within each d."""
    n_boot = check_int("n_boot", n_boot)
    x = np.log(np.asarray(ds, dtype=float))
    t = np.asarray(times, dtype=float)

    def fit(tt):
        med = np.array([np.median(r[np.isfinite(r)]) if np.isfinite(r).any() else np.nan for r in tt])
        ok = np.isfinite(med)
        B, A = np.polyfit(x[ok], med[ok], 1)
        return A, B

    rng = np.random.default_rng(seed)
    idx = rng.integers(0, t.shape[1], size=(n_boot,) + t.shape)
    boot = np.array([fit(np.take_along_axis(t, i, axis=1)) for i in idx])
    return fit(t), boot


# slr.risk.oracle_risk (eps = 0) as one jitted program: end_kinds calls it on blocks of 1024 lams
_oracle = jax.jit(lambda lam, gamma, d, L: closed_form(1.0, 1.0, 0.0, 0.0, 0.0, lam, gamma, d, L, 0.0))


def end_kinds(data: dict, *, gamma, d, L, index=-1, kappa_min: float = 0.9):
    """At log ``index`` (None: every log) of a run dict (overlaps (..., T), ``lam`` of shape (..., T)
    without the run axis, or one lam per leading index): (kinds, gap). kinds: "recovered" for
    :func:`slr.landscape.classify`'s "oracle" with |kappa| >= ``kappa_min``, else its "role-swapped" or
    "other" (an "oracle" point with a smaller |kappa| counts as "other"); gap = R - R_oracle at that lam."""
    lam = np.asarray(data["lam"], dtype=float)
    sl = slice(None) if index is None else index
    lam = lam[..., None, sl] if lam.ndim == np.ndim(data["kappa"]) - 1 else lam[..., None]
    o = [np.asarray(data[f])[..., sl] for f in NAMES]
    kinds = landscape.classify(*o, lam=lam, gamma=gamma, d=d)
    kinds = np.where(kinds == "oracle", np.where(np.abs(o[0]) >= kappa_min, "recovered", "other"), kinds)
    # the oracle's risk (Theorem 1) in blocks of 1024 lams: one compilation
    orc = np.asarray(_oracle(loop.pad_to_block(lam, 1024), gamma, float(d), float(L)))
    gap = np.asarray(data["excess_risk"])[..., sl] - orc[:np.size(lam)].reshape(np.shape(lam))
    return kinds, gap
