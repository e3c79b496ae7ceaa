"""Every experiment of the book as a named, frozen configuration: ``run(name, **overrides)``.

An :class:`Experiment` is a frozen configuration (a dataclass with a ``validate()`` method), the
module-level function that computes its result from ``(config, seed)`` as a dict of arrays, and the
function that reads that dict back (a :class:`slr.pgd.Trajectory` for the dynamics figures). The
paper's Section 5 figures (Appendix E.2 for Figure 5) are :class:`DynamicsConfig` entries:

| name  | init     | d   | lam_t               | alpha | steps  | batch | eps |
|-------|----------|-----|---------------------|-------|--------|-------|-----|
| fig4a | sphere   | 400 | 1 / (1 + 1e-4 t)    | 4e-3  | 120000 | exact | 0   |
| fig4b | manifold | 400 | 0.1                 | 4e-3  | 20000  | exact | 0   |
| fig5  | sphere   | 80  | 2 / (1 + 1e-4 t)    | 1e-3  | 200000 | 5     | 0.1 |
| fig7a | sphere   | 400 | 0.9                 | 1e-3  | 120000 | exact | 0   |
| fig7b | sphere   | 400 | 0.1                 | 4e-3  | 20000  | exact | 0   |

All with L = 10, gamma = sqrt(1/2) (the paper's gamma^2 = 1/2) and 30 repeats. ``fig1b`` is the probe of
Section 2.2 (:class:`slr.probe.ProbeConfig`), ``fig3`` the closed forms of Section 4
(:class:`RiskScalingConfig`), ``fig8``-``fig10`` Appendix E.3's, the others the beyond-the-paper sweeps. :func:`run` runs an
experiment at its full scale and memoises the result on disk (:mod:`slr.cache`, keyed by the name, the
whole configuration, the seed, the code and the library versions)::

    traj = run("fig4a")                              # the paper's Figure 4(a)
    traj = run("fig4a", steps=2000, repeats=3)       # one field changed
"""
from __future__ import annotations

import dataclasses
import functools
import math
import os
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np

from slr import appendix_f, cache, multihead, pgd, probe, recovery, risk, sgd, task, transformer
from slr._threads import pool_map
from slr._validate import check_int, check_nonneg, check_positive

__all__ = ["Experiment", "DynamicsConfig", "RiskScalingConfig", "EXPERIMENTS", "CONFIGS", "config", "run",
           "run_many", "run_timed", "seed_offset", "simulate", "risk_scaling"]


@dataclass(frozen=True)
class DynamicsConfig:
    """One PGD experiment (Definition 1) on SLR, lam_t = lam0 / (1 + lam_decay t) (0: constant).

    ``batch=None`` means exact gradients of the closed-form risk (:func:`slr.pgd.pgd`); an integer
    means stochastic PGD on fresh mini-batches of that size (:func:`slr.sgd.sgd`), with the excess
    risk estimated on ``n_test`` fixed test samples. ``gamma`` is the standard deviation of the
    informative token (the paper's gamma^2 = 1/2 is ``gamma = sqrt(0.5)``).
    ``dtype`` is "float64" or "float32"; ``reduced`` selects the exact 4-D simulation (exact PGD only;
    for the float32 Lemma 4 comparison use ``run("fig4b", dtype="float32", reduced=False)``).
    ``log_every`` gives 1001 logged points per figure; the exact-PGD figures then share one compiled
    program (the schedule, step size and log interval are traced). ``sampler`` (stochastic runs): the
    sampler of :func:`slr.sgd.sgd`; Figure 5 is simulated in frame coordinates (:mod:`slr.coordinates`).
    """
    init: str             # "sphere" or "manifold"
    d: int
    L: int
    gamma: float
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
    sampler: str = "reduced"

    def lam(self):
        """The schedule lam_t = lam0 / (1 + lam_decay t), as a :class:`slr.pgd.InverseTime`
        (a callable step -> lam_t whose numbers are traced, so all figures share one compilation)."""
        return pgd.InverseTime(float(self.lam0), float(self.lam_decay))

    def validate(self) -> "DynamicsConfig":
        """Every field in range (ValueError naming the field otherwise); returns the configuration."""
        if self.init not in ("sphere", "manifold"):
            raise ValueError(f"init must be 'sphere' or 'manifold', got {self.init!r}")
        if self.dtype not in ("float64", "float32"):
            raise ValueError(f"dtype must be 'float64' or 'float32', got {self.dtype!r}")
        check_int("d", self.d, lo=4 if self.init == "manifold" else 2)
        for name in ("L", "steps", "repeats", "log_every", "n_test"):
            check_int(name, getattr(self, name))
        for name in ("gamma", "lam0", "alpha"):
            check_positive(name, getattr(self, name))
        check_nonneg("lam_decay", self.lam_decay)
        check_nonneg("eps", self.eps)
        if self.sampler not in sgd.SAMPLERS:
            raise ValueError(f"sampler must be one of {sgd.SAMPLERS}, got {self.sampler!r}")
        if self.batch is not None:
            check_int("batch", self.batch)
            if self.dtype != "float64":
                raise ValueError(f"dtype must be 'float64' for stochastic runs (batch={self.batch}), "
                                 f"got {self.dtype!r}")
        return self


_G = math.sqrt(0.5)
_FIGURES = {
    "fig4a": DynamicsConfig("sphere", 400, 10, _G, 1.0, 1e-4, 4e-3, 120_000, 30, 120),
    "fig4b": DynamicsConfig("manifold", 400, 10, _G, 0.1, 0.0, 4e-3, 20_000, 30, 20),
    "fig5": DynamicsConfig("sphere", 80, 10, _G, 2.0, 1e-4, 1e-3, 200_000, 30, 200, batch=5, eps=0.1,
                           sampler="coordinates"),
    "fig7a": DynamicsConfig("sphere", 400, 10, _G, 0.9, 0.0, 1e-3, 120_000, 30, 120),
    "fig7b": DynamicsConfig("sphere", 400, 10, _G, 0.1, 0.0, 4e-3, 20_000, 30, 20),
}


@functools.partial(jax.jit, static_argnames=("d",))
def _oracle(seed, d):
    """The oracle (k*, v*) of :func:`simulate` and the keys of its starts and stochastic steps, drawn in
    one compiled program (the numbers of :func:`jax.random.split` and :func:`slr.task.sample_oracle`
    called one operation at a time, without compiling each operation on its own)."""
    k_oracle, k_init, k_sgd = jax.random.split(jax.random.key(seed), 3)
    return task.sample_oracle(k_oracle, d) + (k_init, k_sgd)


def simulate(cfg: DynamicsConfig, seed: int) -> dict:
    """The trajectories of a :class:`DynamicsConfig` from ``seed``: exact PGD (:func:`slr.pgd.pgd`) or
    stochastic PGD (:func:`slr.sgd.sgd`), as the dict of :meth:`slr.pgd.Trajectory.to_dict`."""
    k_star, v_star, k_init, k_sgd = _oracle(seed, cfg.d)
    if cfg.init == "sphere":
        k0, v0 = pgd.init_sphere(k_init, cfg.d, cfg.repeats)
    else:
        k0, v0 = pgd.init_manifold(k_init, k_star, v_star, cfg.repeats)
    common = dict(lam=cfg.lam(), alpha=cfg.alpha, steps=cfg.steps, gamma=cfg.gamma, L=cfg.L,
                  eps=cfg.eps, log_every=cfg.log_every)
    if cfg.batch is None:
        traj = pgd.pgd(k0, v0, k_star, v_star, reduced=cfg.reduced, dtype=jnp.dtype(cfg.dtype), **common)
    else:
        traj = sgd.sgd(k_sgd, k0, v0, k_star, v_star, batch=cfg.batch, n_test=cfg.n_test, sampler=cfg.sampler,
                       **common)
    return traj.to_dict()


@dataclass(frozen=True)
class Experiment:
    """A named experiment: its frozen ``config``, the module-level function ``compute(config, seed)``
    that returns its result as a dict of arrays, ``load`` that reads such a dict back, and ``inputs``
    (None, or ``inputs(config)``: what the result reads besides the code, such as an encoder's
    weights, added to the cache key)."""
    config: Any
    compute: Callable
    load: Callable = dict
    inputs: Optional[Callable] = None


EXPERIMENTS = {name: Experiment(cfg, simulate, pgd.Trajectory.from_dict) for name, cfg in _FIGURES.items()}
# --- beyond_open_questions: the book's own experiments on the paper's open questions ---
EXPERIMENTS.update({
    "open-temperature": Experiment(recovery.TemperatureConfig(), recovery.temperature_map),
    "open-dimension": Experiment(recovery.DimensionConfig(), recovery.dimension_sweep),
    # the same recipe as its alpha -> 0 flow (stiff solver), half-decades of d up to 1e6
    "open-dimension-flow": Experiment(recovery.DimensionConfig(
        method="flow", ds=(316, 1000, 3162, 10000, 31623, 100000, 316228, 1000000)), recovery.dimension_sweep),
    "open-angle": Experiment(multihead.AngleConfig(), multihead.angle_heads),
    "related-diag-mlp": Experiment(appendix_f.DiagMLPConfig(), appendix_f.diag_mlp_comparison),
})


@dataclass(frozen=True)
class RiskScalingConfig:
    """Figure 3: the oracle risk (Theorem 1) and the optimal linear risk (Proposition 3), closed forms,
    along L = ``points`` log-spaced integers in [L_min, L_max] (rounded, repeats dropped), d = L^d_power,
    lam = d^(-lam_power): the scaling of Corollary 2 (L = d^(1/4), lam = d^(-3/8))."""
    L_min: int = 3
    L_max: int = 1000
    points: int = 60
    d_power: float = 4.0
    lam_power: float = 0.375
    gamma: float = math.sqrt(0.5)
    eps: float = 0.1

    def validate(self) -> "RiskScalingConfig":
        check_int("L_max", self.L_max, lo=check_int("L_min", self.L_min))
        check_int("points", self.points, lo=2)
        for name in ("d_power", "lam_power", "gamma"):
            check_positive(name, getattr(self, name))
        check_nonneg("eps", self.eps)
        return self


def risk_scaling(cfg: RiskScalingConfig, seed: int) -> dict:
    """Figure 3's curves (``seed`` unused: closed forms): ``L`` (int), ``d``, ``lam``, the ``oracle`` and
    ``linear`` risks along them, and the ``null`` risk gamma^2 + eps^2 (a scalar)."""
    L = np.unique(np.round(np.logspace(np.log10(cfg.L_min), np.log10(cfg.L_max), cfg.points)).astype(int))
    d = L.astype(float) ** cfg.d_power
    lam = d ** -cfg.lam_power
    return dict(L=L, d=d, lam=lam, null=risk.null_risk(gamma=cfg.gamma, eps=cfg.eps),
                oracle=risk.oracle_risk(lam=lam, gamma=cfg.gamma, d=d, L=L, eps=cfg.eps),
                linear=risk.linear_risk(gamma=cfg.gamma, L=L, eps=cfg.eps))


# Section 2.2 and Section 4: Figure 1(b) (the probe, slr.probe) and Figure 3 (closed forms).
EXPERIMENTS["fig1b"] = Experiment(probe.ProbeConfig(), probe.layer_accuracies, inputs=probe.encoder_inputs)
EXPERIMENTS["fig3"] = Experiment(RiskScalingConfig(), risk_scaling)
# Appendix E.3: Figures 8 and 10 (slr.transformer), Figure 9 at the authors' settings (both token-noise
# variants through the field token_noise: run("fig9", token_noise="shared")).
EXPERIMENTS["fig8"] = Experiment(transformer.FIGURE_8, transformer.train)
EXPERIMENTS["fig9"] = Experiment(multihead.AUTHORS, multihead.simulate, sgd.TrainLog.from_dict)
EXPERIMENTS["fig10"] = Experiment(transformer.FIGURE_10, transformer.train)
#: The configurations alone, by name.
CONFIGS = {name: e.config for name, e in EXPERIMENTS.items()}


def config(name: str, **overrides):
    """The configuration of experiment ``name`` with some fields replaced, validated."""
    if name not in EXPERIMENTS:
        raise ValueError(f"name must be one of {sorted(EXPERIMENTS)}, got {name!r}")
    base = EXPERIMENTS[name].config
    fields = {f.name for f in dataclasses.fields(base)}
    unknown = sorted(set(overrides) - fields)
    if unknown:
        raise ValueError(f"unknown override field(s) {unknown}; accepted: {sorted(fields)}")
    return dataclasses.replace(base, **overrides).validate()


def run(name: str, seed: int = 0, **overrides):
    """Run experiment ``name`` with any field of its configuration overridden, memoised on disk
    (:func:`slr.cache.memoize`: keyed by the name, the whole configuration, the seed, the code and the
    library versions; ``SLR_CACHE=0`` or ``with slr.cache.bypass():`` computes afresh). For the
    dynamics figures the result is a :class:`slr.pgd.Trajectory` with arrays of shape (repeats, T)."""
    entry, key = _keyed(name, seed, overrides)
    data = cache.memoize(f"experiment-{name}", key,
                         functools.partial(entry.compute, key["config"], key["seed"]))
    return entry.load(data)


def run_many(*requests):
    """``[run(name, **overrides) for name, overrides in requests]``, computed on up to two threads (XLA
    releases the GIL while it compiles and runs: independent experiments use both cores; the same
    programs and inputs as one at a time, so the same numbers). Each request is a name or a pair
    ``(name, overrides)``; the cache and :func:`slr.cache.bypass` apply to each as in :func:`run`.
    Two programs that each make a batched LAPACK call large enough for jaxlib to split may deadlock here
    (:func:`slr._threads.pool_map`). The Transformer's SVDs and the oracles' QR of
    :func:`slr.task.orthonormal_frame` go through :func:`slr._threads.matrix_by_matrix`, so "fig8" and
    "fig10" run together. Exact PGD's frame (:func:`slr.overlaps.frame`, one QR per run) is still batched:
    the pgd chapter runs two such programs at once at the book's sizes (30 runs) and has not hung, but
    more runs may reach the split."""
    reqs = [(r, {}) if isinstance(r, str) else (r[0], dict(r[1])) for r in requests]
    for name, overrides in reqs:
        config(name, **{k: v for k, v in overrides.items() if k != "seed"})  # all checked first
    return pool_map(lambda req: run(req[0], **req[1]), reqs)


def seed_offset() -> int:
    """The number added to every seed of :func:`run`, :func:`run_many` and :func:`run_timed`: 0, or the
    environment variable ``SLR_SEED`` (an integer >= 0). ``SLR_SEED=1000`` re-runs every named experiment
    of the book on other random streams, distinct from one another as before, which checks whether a
    chapter's claims depend on the streams (benchmarks/README.md, "The claims under other seeds")."""
    text = os.environ.get("SLR_SEED", "0").strip()
    if not text.isdigit():
        raise ValueError(f"SLR_SEED must be an integer >= 0, got {text!r}")
    return int(text)


def _keyed(name, seed, overrides):
    """The experiment and its cache key: the validated configuration, the seed (plus
    :func:`seed_offset`) and its inputs."""
    seed = check_int("seed", seed, lo=0) + seed_offset()
    cfg, entry = config(name, **overrides), EXPERIMENTS[name]
    inputs = {} if entry.inputs is None else {"inputs": entry.inputs(cfg)}
    return entry, {"config": cfg, "seed": seed, **inputs}


def timed_compute(compute, cfg, seed) -> dict:
    """``compute(cfg, seed)`` with the seconds it took (compilation included) under ``"seconds"``."""
    t0 = time.perf_counter()
    data = {k: np.asarray(v) for k, v in compute(cfg, seed).items()}  # asarray waits for the result
    data["seconds"] = time.perf_counter() - t0
    return data


def run_timed(name: str, seed: int = 0, **overrides):
    """``(run(name, ...), seconds)``: the result and the wall-clock seconds its computation took when it
    was computed (compilation included), stored with it in the cache, so a warm call returns the time
    of the computation, never that of reading the stored result."""
    entry, key = _keyed(name, seed, overrides)
    data = cache.memoize(f"experiment-{name}-timed", key,
                         functools.partial(timed_compute, entry.compute, key["config"], key["seed"]))
    seconds = float(data.pop("seconds"))
    return entry.load(data), seconds
