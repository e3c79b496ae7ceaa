"""A stochastic PGD trainer for any attention predictor (the chapter ``book/beyond_activations.ipynb``).

The predictors themselves (erf, sigmoid, ReLU, softmax, linear) live in :mod:`slr.predictors`
(re-exported here); their Monte Carlo risks in :mod:`slr.montecarlo`.

:func:`train_pgd` is stochastic projected gradient descent (Definition 1 with fresh samples at each
step, as in the paper's Figure 5) on the unit sphere for (k, v), several repeats vmapped, steps
scanned with ``lax.scan``.
"""
from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from slr._validate import (check_int, check_key, check_nonneg, check_orthogonal, check_positive,
                           check_unit)
from slr.predictors import (PREDICTORS, attention_erf, attention_linear, attention_relu,
                            attention_sigmoid, attention_softmax, get_predictor)

__all__ = ["attention_erf", "attention_sigmoid", "attention_relu", "attention_softmax",
           "attention_linear", "PREDICTORS", "get_predictor", "train_pgd"]


def _unit(x):
    return x / jnp.linalg.norm(x, axis=-1, keepdims=True)


def train_pgd(key, activation, k_star, v_star, *, lam, gamma, L, eps=0.0, lr, steps, batch,
              repeats=1, record_every=1):
    """Stochastic projected gradient descent on the sphere for the attention predictor ``activation``.

    Each repeat starts from (k_0, v_0) uniform on S^{d-1} x S^{d-1} (independent), and at each step
    draws ``batch`` fresh samples of SLR(k_star, v_star) (Section 2.1), takes a gradient step of size
    ``lr`` on the empirical squared loss and projects k and v back on the unit sphere (Definition 1,
    stochastic version). ``lam`` is constant. Repeats are vmapped, steps run in ``lax.scan``.

    Returns a dict of NumPy arrays: ``k``, ``v`` (repeats, d) at the end; ``kappa``, ``nu`` (the overlaps
    k.k_star, v.v_star) and ``loss`` (the batch loss) of shape (repeats, steps // record_every),
    recorded every ``record_every`` steps; ``step`` (steps // record_every,).
    """
    check_key("key", key)
    predictor = get_predictor(activation)
    check_unit("k_star", k_star)
    d = int(np.shape(k_star)[0])
    check_unit("v_star", v_star, d=d)
    check_orthogonal("k_star", k_star, "v_star", v_star)
    check_positive("lam", lam)
    check_positive("gamma", gamma)
    check_nonneg("eps", eps)
    check_positive("lr", lr)
    L = check_int("L", L)
    steps = check_int("steps", steps)
    batch = check_int("batch", batch)
    repeats = check_int("repeats", repeats)
    record_every = check_int("record_every", record_every, hi=steps)
    if steps % record_every:
        raise ValueError(f"steps must be a multiple of record_every={record_every}, got {steps!r}")
    out = _train(key, jnp.asarray(k_star, jnp.float64), jnp.asarray(v_star, jnp.float64), float(lam),
                 float(gamma), float(eps), float(lr), predictor=predictor, L=L, steps=steps, batch=batch,
                 repeats=repeats, record_every=record_every)
    out = {name: np.asarray(x) for name, x in out.items()}
    out["step"] = np.arange(record_every, steps + 1, record_every)
    return out


@partial(jax.jit, static_argnames=("predictor", "L", "steps", "batch", "repeats", "record_every"))
def _train(key, k_star, v_star, lam, gamma, eps, lr, *, predictor, L, steps, batch, repeats, record_every):
    d = k_star.shape[0]
    c = jnp.sqrt(d / 2.0)

    def loss_fn(params, kb):
        k, v = params
        kx, kj, kg, kn = jax.random.split(kb, 4)
        X = jax.random.normal(kx, (batch, L, d), dtype=jnp.float64)
        J0 = jax.random.randint(kj, (batch,), 0, L)
        signal = c * k_star + gamma * jax.random.normal(kg, (batch, d), dtype=jnp.float64)
        X = X.at[jnp.arange(batch), J0].set(signal)
        y = signal @ v_star + eps * jax.random.normal(kn, (batch,), dtype=jnp.float64)
        return jnp.mean(jnp.square(y - predictor(X, k, v, lam)))

    grad_fn = jax.value_and_grad(loss_fn)

    def one_run(kr):
        kinit_k, kinit_v, kdata = jax.random.split(kr, 3)
        k0 = _unit(jax.random.normal(kinit_k, (d,), dtype=jnp.float64))
        v0 = _unit(jax.random.normal(kinit_v, (d,), dtype=jnp.float64))

        def step(params, kb):
            loss, (gk, gv) = grad_fn(params, kb)
            k, v = params
            new = (_unit(k - lr * gk), _unit(v - lr * gv))
            return new, loss

        def block(params, kblock):
            params, losses = jax.lax.scan(step, params, jax.random.split(kblock, record_every))
            k, v = params
            return params, (k @ k_star, v @ v_star, jnp.mean(losses))

        (k, v), (kappa, nu, loss) = jax.lax.scan(block, (k0, v0), jax.random.split(kdata, steps // record_every))
        return {"k": k, "v": v, "kappa": kappa, "nu": nu, "loss": loss}

    return jax.vmap(one_run)(jax.random.split(key, repeats))
