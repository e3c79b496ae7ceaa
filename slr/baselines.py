"""Baselines trained beside attention: the diagonal MLP of the related-models appendix (``book/related.ipynb``).

The diagonal MLP gives every position l its own one-hidden-layer ReLU block on the token X_l and sums
the blocks: f(X) = sum_l a_l^T ReLU(W_l X_l + b_l) + c. It can read the position of a token but not
its content relative to the other tokens, the opposite inductive bias of attention.
:func:`train_diag_mlp` trains it with Adam on exactly the fresh batches, and scores it on exactly the
test batch, that :func:`slr.sgd.train` draws for one run from the same key (:func:`slr.sgd.batch_keys`,
:func:`slr.sgd.fresh_draws`), so the two learners see the same samples.
"""
from __future__ import annotations

import math
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import optax

from slr import _loop, sgd, task
from slr._validate import check_int, check_key, check_nonneg, check_oracle, check_positive

__all__ = ["diag_mlp_init", "diag_mlp", "n_params", "train_diag_mlp"]


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


def n_params(tree) -> int:
    """The number of scalar parameters of a pytree."""
    return int(sum(np.size(x) for x in jax.tree_util.tree_leaves(tree)))


@partial(jax.jit, static_argnames=("lr", "n_chunks", "batch", "n_test", "L", "has_rem"))
def _train(key_test, stream, params, ks, vs, gamma, eps, log_every, rem, *, lr, n_chunks, batch, n_test, L,
           has_rem):
    d = ks.shape[-1]
    opt = optax.adam(lr)
    Xt, yt, _ = task.assemble(task.draws(key_test, n_test, L=L, d=d), ks[None], vs[None], gamma=gamma, eps=eps)
    loss = lambda p, X, y: jnp.mean(jnp.square(y - diag_mlp(p, X)))

    def body(carry, t):
        p, st = carry
        X, y, _ = task.assemble(sgd.fresh_draws(stream, t, batch=batch, L=L, d=d), ks[None], vs[None],
                                gamma=gamma, eps=eps)
        upd, st = opt.update(jax.grad(loss)(p, X, y), st, p)
        return optax.apply_updates(p, upd), st

    log = lambda carry: loss(carry[0], Xt, yt) - eps ** 2
    carry = (params, opt.init(params))
    out = _loop.run_chunks(body, carry, lambda c: (log(c), c[0]), n_chunks, log_every, rem if has_rem else None, 1)
    return out[0], jax.tree_util.tree_map(lambda a: a[-1], out[1])


def train_diag_mlp(key, init_key, k_star, v_star, *, L, gamma, eps, width, lr, steps, batch, log_every,
                   n_test=1000) -> dict:
    """Adam on the diagonal MLP with the fresh batches and the test batch of :func:`slr.sgd.train` for one
    run with the same ``key`` (one erf head on one location, ``shared_draws=False``).

    Args:
        key: the key given to :func:`slr.sgd.train`. init_key: the key of :func:`diag_mlp_init`.
        k_star, v_star: orthonormal vectors (d,). L, gamma, eps, steps, batch, log_every, n_test: as in
            :func:`slr.sgd.train`. width: hidden units per position. lr: Adam's learning rate > 0.

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
    params = diag_mlp_init(init_key, L=L, d=d, width=width)
    key_test, streams = sgd.batch_keys(key, 1)
    n_chunks, rem = _loop.schedule(steps, log_every)
    ex, trained = _train(key_test, streams[0], params, jnp.asarray(ks), jnp.asarray(vs), float(gamma), float(eps),
                         log_every, int(rem or 0), lr=float(lr), n_chunks=n_chunks, batch=batch, n_test=n_test,
                         L=int(L), has_rem=rem is not None)
    return {"step": _loop.log_steps(steps, log_every), "excess_risk": np.asarray(ex),
            "params": jax.tree_util.tree_map(np.asarray, trained), "n_params": n_params(trained)}
