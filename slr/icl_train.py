"""Training the layer of :mod:`slr.icl` (one layer of linear self-attention on in-context linear
regression) by Adam on fresh prompts, from a random start or from the one-step-GD start of Zhang, Frei
and Bartlett (2024), in the settings of :data:`slr.icl.SETTINGS`; the chapter
``book/beyond_linear_attention.ipynb`` compares the learned preconditioner with the optimum of
:func:`slr.icl.gamma_star`.
"""
from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import optax

from slr import cache
from slr._threads import pool_map
from slr._validate import check_int, check_key, check_nonneg, check_positive
from slr.icl import check_task, effective_preconditioner, lsa_loss, sample, task_of

__all__ = ["INITS", "train_lsa", "train_starts", "train_setting", "train_settings"]

INITS = ("random", "gd")


def train_lsa(key, *, cov, n: int, noise: float = 0.0, w_cov=None, response="linear", steps: int, batch: int,
              lr: float, repeats: int = 1, init_scale: float = 0.1, init="random"):
    """Train the LSA layer (p, Q) by Adam (cosine-decayed step from lr to 0) on fresh prompts at each
    step; repeats vmapped, lax.scan.

    ``init="random"``: every entry of p and Q i.i.d. N(0, init_scale^2). ``init="gd"``: the start of
    Zhang, Frei and Bartlett (2024), p = init_scale e_{d+1}, Q = init_scale [Theta Theta^T; 0] with
    Theta a Gaussian (d, d) matrix scaled to ||Theta Theta^T||_F = 1: a layer of the one-step-GD form.

    Returns NumPy arrays: ``p`` (repeats, d+1), ``Q`` (repeats, d+1, d), ``loss`` (repeats, steps).
    """
    check_key("key", key)
    n, steps, batch, repeats = (check_int(k, v) for k, v in (("n", n), ("steps", steps), ("batch", batch),
                                                             ("repeats", repeats)))
    check_nonneg("noise", noise)
    check_positive("lr", lr)
    check_positive("init_scale", init_scale)
    inits = tuple(init) if isinstance(init, (tuple, list)) else (init,)
    for i in inits:
        if i not in INITS:
            raise ValueError(f"init must be one of {INITS} (or a tuple of them), got {init!r}")
    cov, w_cov, response = check_task(cov, w_cov, response)
    chols = map(jnp.asarray, map(np.linalg.cholesky, (cov, w_cov)))
    out = _train(key, *chols, float(noise), float(lr), float(init_scale), jnp.asarray([i == "gd" for i in inits]),
                 n=n, steps=steps, batch=batch, repeats=repeats, response=response)
    out = {i: {name: np.asarray(x[:, j]) for name, x in out.items()} for j, i in enumerate(inits)}
    return out if isinstance(init, (tuple, list)) else out[init]


@cache.memoized
def train_starts(setting: str, *, spectrum, n: int, noise: float, steps: int, batch: int, lr: float,
                 repeats: int, init_scale: float, seed: int = 0) -> dict:
    """:func:`train_lsa` in a setting of :data:`SETTINGS` from ``jax.random.key(seed)`` and from both starts
    of :data:`INITS` at once (a run of either start sees the same prompts: one draw serves both), memoised
    on disk. Keys ``<init>_<name>``: ``p``, ``Q``, ``loss`` of :func:`train_lsa`, the learned
    preconditioners ``A`` (repeats, d, d) and the leftovers ``residual`` (repeats,) of
    :func:`effective_preconditioner`."""
    out = train_lsa(jax.random.key(seed), n=n, noise=noise, steps=steps, batch=batch, lr=lr, repeats=repeats,
                    init=INITS, init_scale=init_scale, **task_of(setting, spectrum))
    res = {}
    for i, o in out.items():
        A, residual = effective_preconditioner(o)
        res.update({f"{i}_{k}": v for k, v in {**o, "A": np.asarray(A), "residual": np.asarray(residual)}.items()})
    return res


def train_setting(setting: str, *, spectrum, n: int, noise: float, steps: int, batch: int, lr: float,
                  repeats: int, init: str, init_scale: float, seed: int = 0, use_cache=None) -> dict:
    """The runs of :func:`train_starts` from the start ``init``: ``p``, ``Q``, ``loss``, ``A``, ``residual``
    (both starts are trained, and stored, together: the second start is then read from the cache)."""
    if init not in INITS:
        raise ValueError(f"init must be one of {INITS}, got {init!r}")
    out = train_starts(setting, spectrum=spectrum, n=n, noise=noise, steps=steps, batch=batch, lr=lr,
                       repeats=repeats, init_scale=init_scale, seed=seed, use_cache=use_cache)
    return {k[len(init) + 1:]: v for k, v in out.items() if k.startswith(init + "_")}


def train_settings(settings, *, spectrum, n: int, noise: float, steps: int, batch: int, lr: float,
                   repeats: int, init_scale: float, seed: int = 0, use_cache=None) -> dict:
    """:func:`train_starts` for each setting of ``settings``, two settings at a time on two threads
    (:func:`slr._threads.pool_map`; the settings differ only in traced arrays: one program, compiled
    once, run on both cores; the numbers of separate calls). Returns {setting: {init: runs of
    :func:`train_setting`}}."""
    settings = tuple(settings)
    for s in settings:
        task_of(s, spectrum)
    run = lambda s: train_starts(s, spectrum=spectrum, n=n, noise=noise, steps=steps, batch=batch, lr=lr,
                                 repeats=repeats, init_scale=init_scale, seed=seed, use_cache=use_cache)
    outs = pool_map(run, settings)
    return {s: {i: {k[len(i) + 1:]: v for k, v in out.items() if k.startswith(i + "_")} for i in INITS}
            for s, out in zip(settings, outs)}


def _init(key, d, scale, gd):
    """Both starts from ``key``, the one of ``gd`` (a traced bool) kept: one program for both."""
    kp, kq = jax.random.split(key)
    T = jax.random.normal(kq, (d, d), dtype=jnp.float64)
    T = T @ T.T
    start_gd = {"p": scale * jnp.zeros(d + 1).at[d].set(1.0),
                "Q": scale * jnp.concatenate([T / jnp.linalg.norm(T), jnp.zeros((1, d))])}
    start_random = {"p": scale * jax.random.normal(kp, (d + 1,), dtype=jnp.float64),
                    "Q": scale * jax.random.normal(kq, (d + 1, d), dtype=jnp.float64)}
    return jax.tree_util.tree_map(lambda a, b: jnp.where(gd, a, b), start_gd, start_random)


@partial(jax.jit, static_argnames=("n", "steps", "batch", "repeats", "response"))
def _train(key, chol, chol_w, noise, lr, init_scale, gd, *, n, steps, batch, repeats, response):
    d = chol.shape[0]
    opt = optax.adam(optax.cosine_decay_schedule(lr, steps))

    def one_run(kr):  # every start of ``gd`` (I,) on the same prompts
        kinit, kdata = jax.random.split(kr)
        params = jax.vmap(lambda g: _init(kinit, d, init_scale, g))(gd)

        def update(params, state, X, y, x_q, y_q):
            loss, g = jax.value_and_grad(lsa_loss)(params, X, y, x_q, y_q)
            upd, state = opt.update(g, state, params)
            return optax.apply_updates(params, upd), state, loss

        def step(carry, kb):
            X, y, x_q, y_q, _ = sample(kb, chol, chol_w, noise, batch=batch, n=n, response=response)
            params, state, loss = jax.vmap(update, (0, 0) + (None,) * 4)(*carry, X, y, x_q, y_q)
            return (params, state), loss

        carry = (params, jax.vmap(opt.init)(params))
        (params, _), loss = jax.lax.scan(step, carry, jax.random.split(kdata, steps))
        return {"p": params["p"], "Q": params["Q"], "loss": loss.T}      # (I, ...) each

    return jax.vmap(one_run)(jax.random.split(key, repeats))
