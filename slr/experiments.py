"""The paper's Section 5 / Appendix E.2 experiments as named, frozen configurations.

Each figure is one :class:`Config` (parameters from the paper: Section 5 and Appendix E.2):

| name  | init     | d   | lam_t               | alpha | steps  | batch | eps |
|-------|----------|-----|---------------------|-------|--------|-------|-----|
| fig4a | sphere   | 400 | 1 / (1 + 1e-4 t)    | 4e-3  | 120000 | exact | 0   |
| fig4b | manifold | 400 | 0.1                 | 4e-3  | 20000  | exact | 0   |
| fig5  | sphere   | 80  | 2 / (1 + 1e-4 t)    | 1e-3  | 200000 | 5     | 0.1 |
| fig7a | sphere   | 400 | 0.9                 | 1e-3  | 120000 | exact | 0   |
| fig7b | sphere   | 400 | 0.1                 | 4e-3  | 20000  | exact | 0   |

All with L = 10, gamma^2 = 1/2 and 30 repeats. :func:`run` runs one at the paper's full scale
(all repeats, all steps) and memoises the result on disk (:mod:`slr.cache`)::

    traj = run("fig4a")                              # the paper's Figure 4(a)
    traj = run("fig4a", steps=2000, repeats=3)       # one field changed
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Optional

import jax
import jax.numpy as jnp

from slr import cache, pgd, sgd, task
from slr._validate import check_int

__all__ = ["Config", "CONFIGS", "run", "config"]


@dataclass(frozen=True)
class Config:
    """One PGD experiment. ``lam_t = lam0 / (1 + lam_decay * t)`` (lam_decay = 0: constant).

    ``batch=None`` means exact gradients of the closed-form risk (:func:`slr.pgd.pgd`); an integer
    means stochastic PGD on fresh mini-batches of that size (:func:`slr.sgd.sgd`), with the excess
    risk estimated on ``n_test`` fixed test samples. ``gamma2`` is the paper's gamma^2 (a variance).
    ``dtype`` is "float64" or "float32"; ``reduced`` selects the exact 4-D simulation (exact PGD only;
    for the float32 Lemma 4 comparison use ``run("fig4b", dtype="float32", reduced=False)``).
    ``log_every`` gives 1001 logged points per figure; the exact-PGD figures then share one compiled
    program (the schedule, step size and log interval are traced).
    """
    figure: str
    init: str             # "sphere" or "manifold"
    d: int
    L: int
    gamma2: float
    lam0: float
    lam_decay: float
    alpha: float
    steps: int
    repeats: int
    log_every: int
    batch: Optional[int] = None
    eps: float = 0.0
    n_test: int = 1000
    reduced: bool = True
    dtype: str = "float64"

    @property
    def gamma(self) -> float:
        """Standard deviation of the informative token: sqrt(gamma2)."""
        return math.sqrt(self.gamma2)

    def lam(self):
        """The schedule lam_t = lam0 / (1 + lam_decay t), as a :class:`slr.pgd.InverseTime`
        (a callable step -> lam_t whose numbers are traced, so all figures share one compilation)."""
        return pgd.InverseTime(float(self.lam0), float(self.lam_decay))


CONFIGS = {
    "fig4a": Config("fig4a", "sphere", 400, 10, 0.5, 1.0, 1e-4, 4e-3, 120_000, 30, 120),
    "fig4b": Config("fig4b", "manifold", 400, 10, 0.5, 0.1, 0.0, 4e-3, 20_000, 30, 20),
    "fig5": Config("fig5", "sphere", 80, 10, 0.5, 2.0, 1e-4, 1e-3, 200_000, 30, 200, batch=5, eps=0.1),
    "fig7a": Config("fig7a", "sphere", 400, 10, 0.5, 0.9, 0.0, 1e-3, 120_000, 30, 120),
    "fig7b": Config("fig7b", "sphere", 400, 10, 0.5, 0.1, 0.0, 4e-3, 20_000, 30, 20),
}


def _validate(cfg: Config) -> Config:
    if cfg.init not in ("sphere", "manifold"):
        raise ValueError(f"init must be 'sphere' or 'manifold', got {cfg.init!r}")
    if cfg.dtype not in ("float64", "float32"):
        raise ValueError(f"dtype must be 'float64' or 'float32', got {cfg.dtype!r}")
    check_int("d", cfg.d, lo=4 if cfg.init == "manifold" else 2)
    check_int("L", cfg.L, lo=1)
    check_int("steps", cfg.steps, lo=1)
    check_int("repeats", cfg.repeats, lo=1)
    check_int("log_every", cfg.log_every, lo=1)
    check_int("n_test", cfg.n_test, lo=1)
    for name in ("gamma2", "lam0", "alpha"):
        val = getattr(cfg, name)
        if not (isinstance(val, (int, float)) and math.isfinite(val) and val > 0):
            raise ValueError(f"{name} must be > 0, got {val!r}")
    for name in ("lam_decay", "eps"):
        val = getattr(cfg, name)
        if not (isinstance(val, (int, float)) and math.isfinite(val) and val >= 0):
            raise ValueError(f"{name} must be >= 0, got {val!r}")
    if cfg.batch is not None:
        check_int("batch", cfg.batch, lo=1)
        if cfg.dtype != "float64":
            raise ValueError(f"dtype must be 'float64' for stochastic runs (batch={cfg.batch}), got {cfg.dtype!r}")
    return cfg


def config(name: str, **overrides) -> Config:
    """The configuration of figure ``name`` with some fields replaced (validated)."""
    if name not in CONFIGS:
        raise ValueError(f"name must be one of {sorted(CONFIGS)}, got {name!r}")
    fields = {f.name for f in dataclasses.fields(Config)} - {"figure"}
    unknown = sorted(set(overrides) - fields)
    if unknown:
        raise ValueError(f"unknown override field(s) {unknown}; accepted: {sorted(fields)}")
    return _validate(dataclasses.replace(CONFIGS[name], **overrides))


def _compute(cfg: Config, seed: int) -> pgd.Trajectory:
    key = jax.random.key(seed)
    k_oracle, k_init, k_sgd = jax.random.split(key, 3)
    k_star, v_star = task.sample_oracle(k_oracle, cfg.d)
    if cfg.init == "sphere":
        k0, v0 = pgd.init_sphere(k_init, cfg.d, cfg.repeats)
    else:
        k0, v0 = pgd.init_manifold(k_init, k_star, v_star, cfg.repeats)
    common = dict(lam=cfg.lam(), alpha=cfg.alpha, steps=cfg.steps, gamma=cfg.gamma, L=cfg.L,
                  eps=cfg.eps, log_every=cfg.log_every)
    if cfg.batch is None:
        return pgd.pgd(k0, v0, k_star, v_star, reduced=cfg.reduced,
                       dtype=jnp.dtype(cfg.dtype), **common)
    return sgd.sgd(k_sgd, k0, v0, k_star, v_star, batch=cfg.batch, n_test=cfg.n_test, **common)


def run(name: str, seed: int = 0, **overrides) -> pgd.Trajectory:
    """Run the experiment of figure ``name`` ("fig4a", "fig4b", "fig5", "fig7a", "fig7b") at the
    paper's full scale, with any field of :class:`Config` overridden, memoised with
    :func:`slr.cache.memoize` (keyed by the figure, the full configuration, the seed and the code).

    Set ``SLR_CACHE=0`` to bypass the cache. Returns a :class:`slr.pgd.Trajectory` with arrays
    of shape (repeats, T).
    """
    seed = check_int("seed", seed, lo=0)
    cfg = config(name, **overrides)
    key_cfg = dict(dataclasses.asdict(cfg), seed=seed)
    data = cache.memoize(f"dynamics-{name}", key_cfg, lambda: _compute(cfg, seed).to_dict())
    return pgd.Trajectory.from_dict(data)
