"""Figure 9's configuration: two heads of Eq. (31) trained on two-location regression (Eq. 30).

The predictor is :func:`slr.predictors.attention_multihead` (Eq. 31); the trainer is the book's one
stochastic PGD, :func:`slr.sgd.train` (the Riemannian step of Definition 1, head by head).
"""
from __future__ import annotations

import dataclasses
import math

import jax

from slr import pgd, sgd, task

__all__ = ["MultiHeadConfig", "FIGURE_9", "train"]


@dataclasses.dataclass(frozen=True)
class MultiHeadConfig:
    """Stochastic PGD on Eq. (31) for multiple-location regression (Eq. 30).

    The inverse temperature is ``lam_t = lam0 / (1 + lam_decay min(t, lam_freeze))`` (the paper's
    Figure 9 holds lambda constant after some step). ``gamma``, ``eps`` are standard deviations;
    ``batch`` fresh samples per step, step size ``alpha``. With ``shared_draws`` the draws of a step
    are shared by the repetitions, each turning them into samples of its own oracle.
    """
    L: int = 10                      # tokens per sequence
    d: int = 80                      # dimension of the tokens
    H: int = 2                       # heads (k_h, v_h) of Eq. (31)
    n_locations: int = 2             # informative tokens of Eq. (30)
    gamma: float = math.sqrt(0.5)    # std of an informative token (gamma^2 = 1/2)
    eps: float = 0.1                 # std of the label noise
    batch: int = 20                  # fresh samples per step
    steps: int = 30000
    alpha: float = 3e-3              # step size of Definition 1
    lam0: float = 2.0                # lam_t = lam0 / (1 + lam_decay min(t, lam_freeze))
    lam_decay: float = 3e-4
    lam_freeze: int = 10000
    repeats: int = 10                # runs, each with its own oracle and start
    log_every: int = 500
    n_test: int = 1000               # test samples per run
    seed: int = 0
    shared_draws: bool = True        # one draw per step for all runs


#: Figure 9: two heads on two-location regression. Figure 5's d, L, gamma, eps, lam0 and ratio of step
#: size to batch size (alpha / batch = 1.5e-4); batch 20, lambda frozen after 10000 steps (see the chapter).
FIGURE_9 = MultiHeadConfig()


def train(cfg: MultiHeadConfig = FIGURE_9, oracles=None) -> sgd.TrainLog:
    """``cfg.repeats`` runs of :func:`slr.sgd.train` with the predictor of Eq. (31) (float64).

    Each run has its own oracle (2 n_locations orthonormal directions, :func:`slr.task.sample_oracle_multi`)
    unless ``oracles`` = (k_stars, v_stars) of shape (repeats, n_locations, d) is given (e.g.
    :func:`slr.task.oracle_at_angle`), and its own start (:func:`slr.pgd.init_sphere` with H heads).
    """
    if not isinstance(cfg, MultiHeadConfig):
        raise ValueError(f"cfg must be a MultiHeadConfig, got {type(cfg).__name__}")
    k_oracle, k_init, k_train = jax.random.split(jax.random.key(cfg.seed), 3)
    if oracles is None:
        oracles = jax.vmap(lambda k: task.sample_oracle_multi(k, cfg.d, cfg.n_locations))(
            jax.random.split(k_oracle, cfg.repeats))
    k0, v0 = pgd.init_sphere(k_init, cfg.d, cfg.repeats, H=cfg.H)
    lam = pgd.InverseTime(cfg.lam0, cfg.lam_decay, cfg.lam_freeze)
    return sgd.train(k_train, k0, v0, *oracles, lam=lam, alpha=cfg.alpha, steps=cfg.steps, batch=cfg.batch,
                     gamma=cfg.gamma, L=cfg.L, eps=cfg.eps, log_every=cfg.log_every, predictor="erf",
                     n_test=cfg.n_test, shared_draws=cfg.shared_draws)
