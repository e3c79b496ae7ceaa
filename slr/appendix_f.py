"""Appendix F's comparison: the attention predictor of Eq. (3) against the diagonal MLP, both tuned,
several seeds (the appendix on related models), and the tuned risks of erf, linear and softmax
attention at the oracle as the sequence grows.

- :func:`best_lambda`: the constant lam minimising the oracle risk (Theorem 1), by :func:`slr.tuning.erf_best`.
- :class:`DiagMLPConfig`, :func:`diag_mlp_comparison`: the step size of each model chosen on a tuning
  seed from a grid, then both trained on the same fresh batches for ``seeds`` evaluation seeds.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import jax
import numpy as np

from slr import baselines, pgd, sgd, task, tuning
from slr import risk as R
from slr._validate import check_int, check_nonneg, check_positive

__all__ = ["best_lambda", "DiagMLPConfig", "diag_mlp_comparison"]


def best_lambda(*, gamma, d, L, eps=0.0):
    """(lam*, R(lam*)): the constant inverse temperature minimising the oracle risk of Theorem 1 and
    that risk, eps^2 + the excess risk of :func:`slr.tuning.erf_best` (the one minimiser)."""
    lam, excess = tuning.erf_best(gamma=gamma, d=d, L=L)
    return lam, excess + check_nonneg("eps", eps) ** 2


@dataclass(frozen=True)
class DiagMLPConfig:
    """Attention (projected SGD on the spheres at lam = :func:`best_lambda`, :func:`slr.sgd.train`)
    against the diagonal MLP of Appendix F (Adam, :func:`slr.baselines.train_diag_mlp`), on the same
    fresh batches, at each L of ``Ls``. Each model's step size is the best of its grid on a tuning
    seed (``tune_seed``), then ``seeds`` evaluation seeds are run with it."""
    d: int = 32
    gamma: float = math.sqrt(0.5)
    eps: float = 0.1
    Ls: tuple = (5, 20)
    steps: int = 1500
    batch: int = 128
    width: int = 16
    lrs_attention: tuple = (0.01, 0.03, 0.1)
    lrs_mlp: tuple = (3e-3, 1e-2, 3e-2)
    seeds: int = 4
    tune_seed: int = 1000
    n_test: int = 4000
    n_eval: int = 15

    def validate(self) -> "DiagMLPConfig":
        for name in ("d", "steps", "batch", "width", "seeds", "n_test", "n_eval"):
            check_int(name, getattr(self, name))
        check_int("tune_seed", self.tune_seed, lo=0)
        for x in self.Ls:
            check_int("Ls", x)
        for x in self.lrs_attention + self.lrs_mlp:
            check_positive("lrs", x)
        check_positive("gamma", self.gamma)
        check_nonneg("eps", self.eps)
        return self


def _pair(cfg, L, seed, lr_att, lr_mlp, lam):
    """One seed at one L: (attention TrainLog, MLP dict) on the same fresh batches."""
    k_oracle, k_init, k_mlp, k_train = jax.random.split(jax.random.key(seed * 1000 + L), 4)
    k_star, v_star = task.sample_oracle(k_oracle, cfg.d)
    run = dict(L=L, gamma=cfg.gamma, eps=cfg.eps, steps=cfg.steps, batch=cfg.batch, n_test=cfg.n_test,
               log_every=cfg.steps // cfg.n_eval)
    att = mlp = None
    if lr_att is not None:
        att = sgd.train(k_train, *pgd.init_sphere(k_init, cfg.d, 1, H=1), k_star[None], v_star[None], lam=lam,
                        alpha=lr_att, **run)
    if lr_mlp is not None:
        mlp = baselines.train_diag_mlp(k_train, k_mlp, k_star, v_star, width=cfg.width, lr=lr_mlp, **run)
    return att, mlp


def diag_mlp_comparison(cfg: DiagMLPConfig, seed: int) -> dict:
    """For each L (axis 0): the tuned step sizes ``lr_att``, ``lr_mlp``; over the evaluation seeds
    (seed, ..., seed + seeds - 1; axis 1) the test mean squared errors ``att_mse``, ``mlp_mse`` at the
    logged ``step`` (axis 2), the closed-form risk of the learnt (k, v) ``att_exact``, its ``kappa``,
    ``nu``, ``theta``, ``eta``; per L the ``lam`` used, the ``oracle`` and best ``linear`` risks, ``n_mlp`` parameters."""
    out = {k: [] for k in ("lr_att", "lr_mlp", "att_mse", "mlp_mse", "att_exact", "kappa", "nu", "theta", "eta", "lam", "oracle",
                           "linear", "n_mlp")}
    eps2 = cfg.eps ** 2
    for L in cfg.Ls:
        lam, oracle = best_lambda(gamma=cfg.gamma, d=cfg.d, L=L, eps=cfg.eps)
        tune_a = [_pair(cfg, L, cfg.tune_seed, a, None, lam)[0].excess_risk[0, -1] for a in cfg.lrs_attention]
        tune_m = [_pair(cfg, L, cfg.tune_seed, None, m, lam)[1]["excess_risk"][-1] for m in cfg.lrs_mlp]
        lr_a, lr_m = cfg.lrs_attention[int(np.argmin(tune_a))], cfg.lrs_mlp[int(np.argmin(tune_m))]
        runs = [_pair(cfg, L, seed + s, lr_a, lr_m, lam) for s in range(cfg.seeds)]
        out["att_mse"].append([a.excess_risk[0] + eps2 for a, _ in runs])
        out["mlp_mse"].append([m["excess_risk"] + eps2 for _, m in runs])
        out["att_exact"].append([a.excess_risk_closed[0, -1] + eps2 for a, _ in runs])
        for f in ("kappa", "nu", "theta", "eta"):
            out[f].append([getattr(a, f)[0, -1, 0, 0] for a, _ in runs])
        out["n_mlp"].append(runs[0][1]["n_params"])
        out["step"] = runs[0][0].step
        for k, v in (("lr_att", lr_a), ("lr_mlp", lr_m), ("lam", lam), ("oracle", oracle),
                     ("linear", R.linear_risk(gamma=cfg.gamma, L=L, eps=cfg.eps))):
            out[k].append(v)
    return {k: np.asarray(v, dtype=float) for k, v in out.items()}
