"""Baselines trained beside attention: the diagonal MLP of the related-models appendix (``book/related.ipynb``).

The diagonal MLP gives every position l its own one-hidden-layer ReLU block on the token X_l and sums
the blocks: f(X) = sum_l a_l^T ReLU(W_l X_l + b_l) + c. It can read the position of a token but not
its content relative to the other tokens, the opposite inductive bias of attention.
:func:`train_diag_mlp` trains it with Adam on exactly the fresh batches, and scores it on exactly the
test batch, that :func:`slr.sgd.train` draws for one run from the same key (:func:`slr.sgd.batch_keys`,
:func:`slr.sgd.fresh_draws`), so the two learners see the same samples. With ``tied=True`` every
position shares one block (a Deep Sets network, :func:`tied_mlp`): the exercise ``related_ex3``.

:func:`train_activations` trains attention with other activations than erf beside softmax (the
chapter ``book/beyond_activations.ipynb``), keeping the five overlaps of every run: one compiled program
for all the activations, whose runs read the same draws at each step.
"""
from __future__ import annotations

import math
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import optax

from slr import cache, loop, pgd, reduced, sgd, task
from slr._validate import check_int, check_key, check_nonneg, check_oracle, check_positive, check_run
from slr.predictors import READS_PROJECTIONS, attention_erf, get_predictor

PROJECTIONS = ("erf", "sigmoid", "relu", "softmax", "linear")

__all__ = ["diag_mlp_init", "diag_mlp", "tied_mlp_init", "tied_mlp", "n_params", "train_diag_mlp",
           "train_activations"]


def diag_mlp_init(key, *, L: int, d: int, width: int):
    """Parameters of the diagonal MLP: W (L, width, d) ~ N(0, 1/d), b = 0 (L, width), a (L, width) ~
    N(0, 1/width), c = 0."""
    check_key("key", key)
    L, d, width = (check_int(name, x) for name, x in (("L", L), ("d", d), ("width", width)))
    k1, k2 = jax.random.split(key)
    return dict(W=jax.random.normal(k1, (L, width, d)) / math.sqrt(d), b=jnp.zeros((L, width)),
                a=jax.random.normal(k2, (L, width)) / math.sqrt(width), c=jnp.zeros(()))


def diag_mlp(params, X):
    """sum_l a_l^T ReLU(W_l X_l + b_l) + c for X of shape (n, L, d) -> (n,). Traceable."""
    h = jax.nn.relu(jnp.einsum("lpd,nld->nlp", params["W"], X) + params["b"])
    return jnp.einsum("lp,nlp->n", params["a"], h) + params["c"]


def tied_mlp_init(key, *, d: int, width: int):
    """Parameters of the tied (Deep Sets) MLP: one block W (width, d) ~ N(0, 1/d), b = 0 (width,),
    a (width,) ~ N(0, 1/width), c = 0, shared by every position."""
    check_key("key", key)
    d, width = check_int("d", d), check_int("width", width)
    k1, k2 = jax.random.split(key)
    return dict(W=jax.random.normal(k1, (width, d)) / math.sqrt(d), b=jnp.zeros((width,)),
                a=jax.random.normal(k2, (width,)) / math.sqrt(width), c=jnp.zeros(()))


def tied_mlp(params, X):
    """sum_l a^T ReLU(W X_l + b) + c for X of shape (n, L, d) -> (n,): permutation invariant. Traceable."""
    h = jax.nn.relu(jnp.einsum("pd,nld->nlp", params["W"], X) + params["b"])
    return jnp.einsum("p,nlp->n", params["a"], h) + params["c"]


def n_params(tree) -> int:
    """The number of scalar parameters of a pytree."""
    return int(sum(np.size(x) for x in jax.tree_util.tree_leaves(tree)))


@partial(jax.jit, static_argnames=("lr", "n_chunks", "log_every", "batch", "n_test", "L", "has_rem", "tied",
                                   "dtype"))
def _train(key_test, stream, params, ks, vs, gamma, eps, rem, *, lr, n_chunks, log_every, batch, n_test, L,
           has_rem, tied=False, dtype=jnp.float64):
    """Adam on the MLP; ``log_every`` static: the step is compiled once, not twice (a traced chunk
    length adds a copy for its remainder)."""
    d = ks.shape[-1]
    opt = optax.adam(lr)
    Xt, yt, _ = task.assemble(task.draws(key_test, n_test, L=L, d=d), ks[None], vs[None], gamma=gamma, eps=eps)
    mlp = tied_mlp if tied else diag_mlp
    loss = lambda p, X, y: jnp.mean(jnp.square(y - mlp(p, X)))

    def body(carry, t):
        p, st = carry
        X, y, _ = task.assemble(sgd.fresh_draws(stream, t, batch=batch, L=L, d=d, dtype=dtype), ks[None],
                                vs[None], gamma=gamma, eps=eps)
        upd, st = opt.update(jax.grad(loss)(p, X, y), st, p)
        return optax.apply_updates(p, upd), st

    log = lambda carry: loss(carry[0], Xt, yt) - eps ** 2
    carry = (params, opt.init(params))
    out = loop.run_chunks(body, carry, lambda c: (log(c), c[0]), n_chunks, log_every, rem if has_rem else None, 1)
    return out[0], jax.tree_util.tree_map(lambda a: a[-1], out[1])


def train_diag_mlp(key, init_key, k_star, v_star, *, L, gamma, eps, width, lr, steps, batch, log_every,
                   n_test=1000, tied=False, dtype=jnp.float64) -> dict:
    """Adam on the diagonal MLP with the fresh batches and the test batch of :func:`slr.sgd.train` for one
    run with the same ``key`` (one erf head on one location, ``shared_draws=False``).

    Args:
        key: the key given to :func:`slr.sgd.train`. init_key: the key of :func:`diag_mlp_init`.
        k_star, v_star: orthonormal vectors (d,). L, gamma, eps, steps, batch, log_every, n_test: as in
            :func:`slr.sgd.train`. width: hidden units per position. lr: Adam's learning rate > 0.
        dtype: the dtype of the training batches' Gaussian draws, ``jnp.float64`` (those of
            :func:`slr.sgd.train`) or ``jnp.float32`` (those of :func:`slr.appendix_f.diag_mlp_comparison`),
            used in float64 either way.

    Returns:
        A dict: ``step`` (T,), ``excess_risk`` (T,) the test mean squared error minus eps^2 at those
        steps, ``params`` the trained parameters, ``n_params``.
    """
    check_key("key", key)
    ks, vs, d = check_oracle(k_star, v_star)
    steps, batch, log_every, n_test = (check_int(name, x) for name, x in
                                       (("steps", steps), ("batch", batch), ("log_every", log_every),
                                        ("n_test", n_test)))
    check_positive("gamma", gamma)
    check_nonneg("eps", eps)
    check_positive("lr", lr)
    try:
        known = np.dtype(dtype) in (np.float32, np.float64)
    except TypeError:  # not a dtype at all
        known = False
    if not known:
        raise ValueError(f"dtype must be float32 or float64, got {dtype!r}")
    dtype = jnp.float32 if np.dtype(dtype) == np.float32 else jnp.float64
    params = (tied_mlp_init(init_key, d=d, width=width) if tied else
              diag_mlp_init(init_key, L=L, d=d, width=width))
    key_test, streams = sgd.batch_keys(key, 1)
    n_chunks, rem = loop.schedule(steps, log_every)
    ex, trained = _train(key_test, streams[0], params, jnp.asarray(ks), jnp.asarray(vs), float(gamma), float(eps),
                         int(rem or 0), lr=float(lr), n_chunks=n_chunks, log_every=log_every, batch=batch,
                         n_test=n_test, L=int(L), has_rem=rem is not None, tied=bool(tied), dtype=dtype)
    return {"step": loop.log_steps(steps, log_every), "excess_risk": np.asarray(ex),
            "params": jax.tree_util.tree_map(np.asarray, trained), "n_params": n_params(trained)}


@partial(jax.jit, static_argnames=("fs", "n_chunks", "log_every", "rem", "batch", "n_test", "L"))
def _side_by_side(key_test, keys, k0, v0, ks, vs, lams, alpha, gamma, eps, *, fs, n_chunks, log_every, rem, batch,
                  n_test, L):
    """One program for every predictor of ``fs``: per run, each step's reduced draws (:mod:`slr.reduced`,
    those of :func:`slr.sgd.train`) are made once and serve every predictor. ``log_every`` and ``rem``
    are static, so no per-step copy of the draws is compiled beside the blocked one."""
    d, A = ks.shape[0], len(fs)
    w = reduced.fallback_directions(d)

    def step(cr, t, nz):  # sgd's reduced step for each predictor, on the same draws
        out = [pgd.projected_step(cr[0][i], cr[1][i], *reduced.reduced_grads(
            nz, cr[0][i], cr[1][i], ks, vs, w, lams[i], gamma, L, eps, batch, None if f is attention_erf else f),
            alpha) for i, f in enumerate(fs)]
        return tuple(jnp.stack([o[j] for o in out]) for j in range(2))

    def one_run(key, k, v):
        noise = lambda t: reduced.reduced_noise(jax.random.fold_in(key, t), d, L, batch)
        carry = (jnp.broadcast_to(k, (A, d)), jnp.broadcast_to(v, (A, d)))
        return loop.run_chunks(step, carry, lambda cr: cr, n_chunks, log_every, rem, 1, noise, loop.BLOCK)

    K, V = jax.vmap(one_run)(keys, k0, v0)  # (R, T, A, d)
    Xt, yt, _ = task.assemble(task.draws(key_test, n_test, L=L, d=d), ks[None], vs[None], gamma=gamma, eps=eps)
    loss = lambda f, lam: jax.vmap(jax.vmap(lambda k, v: jnp.mean(jnp.square(yt - f(Xt, k, v, lam)))))
    excess = jnp.stack([loss(f, lams[i])(K[:, :, i], V[:, :, i]) for i, f in enumerate(fs)]) - eps ** 2
    rho = jnp.sum(K * V, axis=-1)
    return jnp.stack([K @ ks, V @ vs, V @ ks, K @ vs, rho]), excess  # (5, R, T, A), (A, R, T)


@cache.memoized
def train_activations(names, lams, *, d: int, L: int, gamma: float, eps: float, alpha: float, steps: int,
                      batch: int, repeats: int, log_every: int, seed: int = 0,
                      n_test: int = 1000) -> dict:
    """:func:`slr.sgd.train` (the exact-in-law reduced sampler, :mod:`slr.reduced`) for each predictor ``names[i]`` of
    ``PROJECTIONS`` at the constant temperature ``lams[i]`` (every name in one compiled program, each step's
    draws shared by the predictors: the numbers of separate ``sgd.train`` calls), from the same ``repeats``
    uniform starts (:func:`slr.pgd.init_sphere`) and the same training keys, on the oracle
    ``task.sample_oracle(key(seed), d)``. Returns ``step`` (T,) and per name the overlaps
    ``<name>_kappa``, ``_nu``, ``_theta``, ``_eta``, ``_rho`` (repeats, T) (:mod:`slr.overlaps`: <k, k*>,
    <v, v*>, <v, k*>, <k, v*>, <k, v>) and ``<name>_excess`` (repeats, T) the excess risk on one test batch
    of ``n_test`` sequences (the same for every run and predictor)."""
    if len(names) != len(lams):
        raise ValueError(f"names and lams must have the same length, got {len(names)} and {len(lams)}")
    check_positive("alpha", alpha)
    k_star, v_star = task.sample_oracle(jax.random.key(seed), d)
    k0, v0 = pgd.init_sphere(jax.random.key(seed + 1), d, repeats, H=1)
    steps, log_every = check_int("steps", steps), check_int("log_every", log_every)
    check_run(alpha=alpha, gamma=gamma, L=L, eps=eps, log_every=log_every)
    fs = tuple(get_predictor(name) for name in names)
    if not all(f in READS_PROJECTIONS for f in fs) or d < 4:
        raise ValueError(f"names must be predictors that read X k and X v only {PROJECTIONS}, and d >= 4; "
                         f"got {names!r}, d={d!r}")
    key_test, keys = sgd.batch_keys(jax.random.key(seed + 2), repeats)
    n_chunks, rem = loop.schedule(steps, log_every)
    ov, ex = _side_by_side(key_test, keys, k0[:, 0], v0[:, 0], k_star, v_star, jnp.asarray(lams, float),
                           float(alpha), float(gamma), float(eps), fs=fs, n_chunks=n_chunks, log_every=log_every,
                           rem=rem, batch=check_int("batch", batch), n_test=check_int("n_test", n_test), L=int(L))
    out = {"step": loop.log_steps(steps, log_every)}
    for i, name in enumerate(names):
        for j, f in enumerate(("kappa", "nu", "theta", "eta", "rho")):
            out[f"{name}_{f}"] = np.asarray(ov[j, :, :, i])
        out[f"{name}_excess"] = np.asarray(ex[i])
    return out
