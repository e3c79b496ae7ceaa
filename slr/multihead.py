"""The multi-head simplified predictor (Appendix E.3, Eq. 31) and its stochastic PGD training.

Defined and discussed in the chapter ``book/transformer.ipynb``. The project's issue placed this code
"in slr.dynamics"; it lives here instead because :mod:`slr.dynamics` (the single-head PGD of
Definition 1) was being written in parallel. It follows Definition 1 head by head: a stochastic
gradient step on every ``k_h`` and ``v_h``, then each of them is projected back onto the unit sphere.

Eq. (31):  T_lam(X) = sum_{h=1..H} sum_{l=1..L} erf(lam X_l^T k_h) X_l^T v_h,  with k, v of shape (H, d).
For H = 1 it is :func:`slr.predictors.attention_erf` (Eq. 3).
"""
from __future__ import annotations

import dataclasses
import math
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from slr._validate import check_int, check_key, check_nonneg, check_positive
from slr.predictors import attention_multihead
from slr.task import sample_oracle_multi

__all__ = ["MultiHeadConfig", "FIGURE_9", "predict", "lam_schedule", "init_heads", "draw_batch",
           "train"]


@dataclasses.dataclass(frozen=True)
class MultiHeadConfig:
    """Stochastic PGD on Eq. (31) for multiple-location regression (Eq. 30).

    The inverse temperature follows ``lam_t = lam0 / (1 + lam_decay t)`` up to step ``lam_freeze``
    and stays constant afterwards (the paper's Figure 9 holds lambda constant after some step).
    ``gamma``, ``eps`` are standard deviations; ``batch`` fresh samples per step. With
    ``shared_draws`` the standard Gaussian draws of a step are shared by the repetitions, each turning
    them into samples of its own oracle (as in :func:`slr.transformer.train`).
    """
    L: int = 10
    d: int = 80
    H: int = 2
    n_locations: int = 2
    gamma: float = math.sqrt(0.5)
    eps: float = 0.1
    batch: int = 20
    steps: int = 30000
    lr: float = 3e-3
    lam0: float = 2.0
    lam_decay: float = 3e-4
    lam_freeze: int = 10000
    reps: int = 10
    log_every: int = 500
    n_test: int = 1000
    seed: int = 0
    shared_draws: bool = True

    def validate(self):
        check_int("L", self.L, lo=self.n_locations)
        check_int("d", self.d, lo=2 * self.n_locations)
        check_int("H", self.H)
        check_int("n_locations", self.n_locations)
        check_positive("gamma", self.gamma)
        check_nonneg("eps", self.eps)
        check_int("batch", self.batch)
        check_int("steps", self.steps)
        check_positive("lr", self.lr)
        check_positive("lam0", self.lam0)
        check_nonneg("lam_decay", self.lam_decay)
        check_int("lam_freeze", self.lam_freeze, lo=0)
        check_int("reps", self.reps)
        check_int("log_every", self.log_every)
        if self.steps % self.log_every:
            raise ValueError(f"steps must be a multiple of log_every, got steps={self.steps!r}, "
                             f"log_every={self.log_every!r}")
        check_int("n_test", self.n_test)
        check_int("seed", self.seed, lo=0)
        return self


#: Figure 9: two heads on two-location regression. Figure 5's d, L, gamma, eps, lam0 and ratio of step
#: size to batch size (lr / batch = 1.5e-4); batch 20, lambda frozen after 10000 steps (see the chapter).
FIGURE_9 = MultiHeadConfig()


#: Eq. (31): sum_h sum_l erf(lam X_l^T k_h) X_l^T v_h (it lives in :mod:`slr.predictors`).
predict = attention_multihead


def lam_schedule(t, lam0, lam_decay, lam_freeze):
    """lam_t = lam0 / (1 + lam_decay * min(t, lam_freeze))."""
    return lam0 / (1.0 + lam_decay * jnp.minimum(t, lam_freeze))


def init_heads(key, d: int, H: int):
    """Independent uniform points of the sphere S^{d-1} for every k_h and v_h: two arrays (H, d)."""
    check_key("key", key)
    d = check_int("d", d, lo=2)
    H = check_int("H", H)
    g = jax.random.normal(key, (2, H, d), dtype=jnp.float64)
    g = g / jnp.linalg.norm(g, axis=-1, keepdims=True)
    return g[0], g[1]


def draw_batch(key, n, k_stars, v_stars, *, L, gamma, eps):
    """Traceable float64 draw of Eq. (30), identical to :func:`slr.task.sample_multi` for the same key."""
    from slr.transformer import draw_batch as _draw
    return _draw(key, n, k_stars, v_stars, L=L, gamma=gamma, eps=eps, dtype=jnp.float64)


def _project(a):
    return a / jnp.linalg.norm(a, axis=-1, keepdims=True)


def _setup(key, cfg: MultiHeadConfig):
    k_oracle, k_init, k_test = jax.random.split(key, 3)
    k_stars, v_stars = sample_oracle_multi(k_oracle, cfg.d, cfg.n_locations)
    k0, v0 = init_heads(k_init, cfg.d, cfg.H)
    Xt, yt = draw_batch(k_test, cfg.n_test, k_stars, v_stars, L=cfg.L, gamma=cfg.gamma, eps=cfg.eps)
    return (k0, v0), k_stars, v_stars, Xt, yt


@partial(jax.jit, static_argnums=2)
def _train(run_keys, data_key, cfg):
    from slr.transformer import _assemble, _shared_draws

    kv, k_stars, v_stars, Xt, yt = jax.vmap(lambda k: _setup(k, cfg))(run_keys)

    def loss(kv, X, y, lam):
        return jnp.mean((predict(X, kv[0], kv[1], lam) - y) ** 2)

    def metrics(kv, t):
        lam = lam_schedule(t, cfg.lam0, cfg.lam_decay, cfg.lam_freeze)

        def one(kv, ks, vs, Xt, yt):
            return {"excess_risk": loss(kv, Xt, yt, lam) - cfg.eps**2,
                    "kappa": kv[0] @ ks.T,     # (H heads, n_locations), signed
                    "nu": kv[1] @ vs.T}
        out = jax.vmap(one)(kv, k_stars, v_stars, Xt, yt)
        out["lam"] = jnp.broadcast_to(lam, (cfg.reps,))
        return out

    def one_update(kv, ks, vs, draws, lam):
        X, y = _assemble(draws, ks, vs, cfg)
        gk, gv = jax.grad(loss)(kv, X, y, lam)
        return _project(kv[0] - cfg.lr * gk), _project(kv[1] - cfg.lr * gv)

    def step(kv, inp):
        t, key = inp
        lam = lam_schedule(t, cfg.lam0, cfg.lam_decay, cfg.lam_freeze)
        if cfg.shared_draws:
            draws = _shared_draws(key, cfg, jnp.float64)
            axes = (0, 0, 0, None, None)
        else:
            draws = jax.vmap(lambda k: _shared_draws(k, cfg, jnp.float64))(jax.random.split(key, cfg.reps))
            axes = (0, 0, 0, 0, None)
        return jax.vmap(one_update, in_axes=axes)(kv, k_stars, v_stars, draws, lam), None

    def block(kv, inp):
        b, key = inp
        ts = b * cfg.log_every + jnp.arange(cfg.log_every)
        kv, _ = jax.lax.scan(step, kv, (ts, jax.random.split(key, cfg.log_every)))
        return kv, metrics(kv, (b + 1) * cfg.log_every)

    n_logs = cfg.steps // cfg.log_every
    m0 = metrics(kv, 0)
    _, logs = jax.lax.scan(block, kv, (jnp.arange(n_logs), jax.random.split(data_key, n_logs)))
    return jax.tree.map(lambda a, b: jnp.concatenate([a[:, None], jnp.swapaxes(b, 0, 1)], axis=1), m0, logs)


def train(cfg: MultiHeadConfig = FIGURE_9):
    """Stochastic PGD on Eq. (31), ``cfg.reps`` independent runs vectorised with vmap (float64).

    Returns NumPy arrays with a leading axis of repetitions, logged every ``log_every`` steps (step 0
    included): ``excess_risk`` (test risk minus eps^2 on a fixed batch of ``n_test`` samples),
    ``kappa`` <k_h, k_star_j> and ``nu`` <v_h, v_star_j> of shape (H, n_locations), ``lam``; and
    ``steps`` (n_logs,).
    """
    if not isinstance(cfg, MultiHeadConfig):
        raise ValueError(f"cfg must be a MultiHeadConfig, got {type(cfg).__name__}")
    cfg.validate()
    run_key, data_key = jax.random.split(jax.random.key(cfg.seed))
    out = jax.tree.map(np.asarray, _train(jax.random.split(run_key, cfg.reps), data_key, cfg))
    out["steps"] = np.arange(0, cfg.steps + 1, cfg.log_every)
    return out
