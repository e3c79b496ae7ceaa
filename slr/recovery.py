"""Recovery of (k*, v*) by exact PGD from uniform starts on the sphere (the book's own experiments of
the chapter on the paper's open questions; the dynamics is Definition 1 on the closed form of
Proposition 15, simulated exactly in the 4-D frame by :func:`slr.pgd.pgd_overlaps`).

- :func:`sphere_overlaps`: the five overlaps of uniform starts against one sampled oracle.
- :class:`TemperatureConfig`, :func:`temperature_map`: a grid of (lam0, decay) cells, each run to a
  horizon in time alpha t, logged (recovery as a function of time).
- :class:`DimensionConfig`, :func:`dimension_sweep`: one recipe rescaled with d (lam sqrt(d) and
  alpha d fixed), each d to the same horizon in time.
- :func:`first_passage`: the first logged time at which a condition holds; :func:`log_law`: the fit
  T = A + B log d of first-passage times, with a bootstrap over the runs.
- :func:`end_kinds`: :func:`slr.landscape.classify` and the risk minus the oracle's, at every log.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import jax
import numpy as np

from slr import landscape, pgd, task
from slr._validate import check_int, check_key, check_nonneg, check_positive
from slr.overlaps import NAMES, overlaps
from slr.risk import oracle_risk

__all__ = ["sphere_overlaps", "TemperatureConfig", "temperature_map", "DimensionConfig", "dimension_sweep",
           "first_passage", "log_law", "end_kinds"]


def sphere_overlaps(key, d: int, R: int):
    """The overlaps (kappa, nu, theta, eta, rho), each of shape (R,), of R independent uniform starts
    (:func:`slr.pgd.init_sphere`) against one oracle (:func:`slr.task.sample_oracle`); ``key`` is split
    into (oracle, starts)."""
    check_key("key", key)
    k_oracle, k_init = jax.random.split(key)
    return tuple(np.asarray(x) for x in overlaps(*pgd.init_sphere(k_init, d, R), *task.sample_oracle(k_oracle, d)))


def _run_to(o, *, lam0, c_time, alpha, d, horizon, n_logs, gamma, L):
    """Exact PGD to time ``horizon`` with n_logs + 1 logs (one compilation for every (alpha, horizon)):
    lam_t = lam0 / (1 + c_time alpha t). Returns the (N, T) overlaps, excess risk and the times (T,)."""
    steps = int(round(horizon / alpha / n_logs)) * n_logs
    tr = pgd.pgd_overlaps(o, lam0=lam0, c=np.asarray(c_time) * alpha, alpha=alpha, d=d, steps=steps,
                          gamma=gamma, L=L, log_every=steps // n_logs)
    out = {f: np.asarray(getattr(tr, f)) for f in NAMES + ("excess_risk",)}
    out["time"] = np.asarray(tr.step) * alpha
    return out


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
        for x in self.lam0s:
            check_positive("lam0s", x)
        for x in self.decays:
            check_nonneg("decays", x)
        for name in ("horizon", "alpha", "gamma"):
            check_positive(name, getattr(self, name))
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
    out = _run_to(o, lam0=lam0, c_time=c, alpha=cfg.alpha, d=cfg.d, horizon=cfg.horizon, n_logs=cfg.n_logs,
                  gamma=cfg.gamma, L=cfg.L)
    out = {k: (v.reshape(nc, nl, R, -1) if k != "time" else v) for k, v in out.items()}
    lam = np.asarray(cfg.lam0s)[None, :, None] / (1 + np.asarray(cfg.decays)[:, None, None] * out["time"])
    out.update(lam=lam, oracle=np.asarray(oracle_risk(lam=lam, gamma=cfg.gamma, d=cfg.d, L=cfg.L)))
    return out


@dataclass(frozen=True)
class DimensionConfig:
    """One recipe rescaled with d: a constant lam = ell / sqrt(d) and alpha = alpha_d / d (the
    curvature transverse to M grows like d), every d run to the same time ``horizon``. The defaults
    are Figure 7(b)'s recipe (lam = 0.1, alpha = 4e-3 at d = 400)."""
    ell: float = 2.0
    alpha_d: float = 1.6
    horizon: float = 80.0
    L: int = 10
    gamma: float = math.sqrt(0.5)
    repeats: int = 24
    n_logs: int = 400
    ds: tuple = (316, 1000, 3162, 10000)

    def validate(self) -> "DimensionConfig":
        for name in ("L", "repeats", "n_logs"):
            check_int(name, getattr(self, name))
        for name in ("ell", "alpha_d", "horizon", "gamma"):
            check_positive(name, getattr(self, name))
        if not all(isinstance(x, int) and x >= 4 for x in self.ds):
            raise ValueError(f"ds must be integers >= 4, got {self.ds!r}")
        return self


def dimension_sweep(cfg: DimensionConfig, seed: int) -> dict:
    """``cfg.repeats`` uniform starts per d (each d its own oracle, key fold_in(key(seed), d)): the
    overlaps and excess risk of shape (n_d, R, T), ``time`` (T,) (the same for every d) and ``lam``
    (n_d,)."""
    runs = []
    for d in cfg.ds:
        o = sphere_overlaps(jax.random.fold_in(jax.random.key(seed), int(d)), int(d), cfg.repeats)
        runs.append(_run_to(o, lam0=cfg.ell / math.sqrt(d), c_time=0.0, alpha=cfg.alpha_d / d, d=float(d),
                            horizon=cfg.horizon, n_logs=cfg.n_logs, gamma=cfg.gamma, L=cfg.L))
    out = {k: np.stack([r[k] for r in runs]) for k in runs[0] if k != "time"}
    out.update(time=runs[0]["time"], lam=cfg.ell / np.sqrt(np.asarray(cfg.ds, dtype=float)))
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
    gap = np.asarray(data["excess_risk"])[..., sl] - np.asarray(oracle_risk(lam=lam, gamma=gamma, d=d, L=L))
    return kinds, gap
