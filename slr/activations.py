"""Component-wise attention activations beyond erf, and a stochastic PGD trainer for any of them.

Defined for the chapter ``book/beyond_activations.ipynb``. Every predictor has the signature
``f(X, k, v, lam)`` of :mod:`slr.predictors` (``X`` of shape (..., L, d) -> (...)), so it can be
passed to :func:`slr.risk.monte_carlo_risk` as ``predictor=``. With ``s_l = lam X_l^T k``:

- ``erf``:     sum_l erf(s_l) X_l^T v                          (Eq. 3, the paper's predictor)
- ``sigmoid``: sum_l tanh(2 s_l / sqrt(pi)) X_l^T v            (the logistic sigmoid centred and
  rescaled, 2 sigma(4 s / sqrt(pi)) - 1: odd, values in (-1, 1), slope 2/sqrt(pi) at 0, like erf)
- ``relu``:    sum_l max(s_l, 0) X_l^T v                       (unbounded: no saturation)
- ``softmax``: sum_l softmax_l(s) X_l^T v                      (Eq. 2: weights sum to 1)
- ``linear``:  sum_l s_l X_l^T v = lam sum_l (X_l^T k)(X_l^T v) (linear attention: a quadratic form)

Normalisations: erf and sigmoid saturate at +-1, so the informative token gets weight ~1 once
``lam sqrt(d/2)`` is large; softmax weights sum to 1 at every ``lam``; relu and linear do not saturate,
the informative token gets weight ~ ``lam sqrt(d/2)``, so their natural scale is ``lam ~ sqrt(2/d)``.

:func:`train_pgd` is stochastic projected gradient descent (Definition 1 with fresh samples at each
step, as in the paper's Figure 5) on the unit sphere for (k, v), several repeats vmapped, steps
scanned with ``lax.scan``.
"""
from __future__ import annotations

import math
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import erf

from slr import predictors
from slr._validate import (check_int, check_key, check_nonneg, check_orthogonal, check_positive,
                           check_unit)

__all__ = ["attention_erf", "attention_sigmoid", "attention_relu", "attention_softmax",
           "attention_linear", "PREDICTORS", "get_predictor", "oracle_risk_curve", "train_pgd"]

_SIGMOID_SCALE = 2.0 / math.sqrt(math.pi)

attention_erf = predictors.attention_erf
attention_softmax = predictors.attention_softmax


def attention_sigmoid(X, k, v, lam):
    """sum_l tanh(2 lam X_l^T k / sqrt(pi)) X_l^T v: a centred logistic sigmoid matched to erf at 0.

    X: (..., L, d) -> (...). tanh(2x/sqrt(pi)) = 2 sigma(4x/sqrt(pi)) - 1 has the range and the
    slope at the origin of erf; it differs in its tails (exponential instead of Gaussian)."""
    X = jnp.asarray(X)
    return jnp.sum(jnp.tanh(_SIGMOID_SCALE * lam * (X @ k)) * (X @ v), axis=-1)


def attention_relu(X, k, v, lam):
    """sum_l max(lam X_l^T k, 0) X_l^T v (ReLU attention).  X: (..., L, d) -> (...)."""
    X = jnp.asarray(X)
    return jnp.sum(jax.nn.relu(lam * (X @ k)) * (X @ v), axis=-1)


def attention_linear(X, k, v, lam):
    """lam sum_l (X_l^T k)(X_l^T v) (linear attention, identity activation).  X: (..., L, d) -> (...)."""
    X = jnp.asarray(X)
    return lam * jnp.sum((X @ k) * (X @ v), axis=-1)


PREDICTORS = {
    "erf": attention_erf,
    "sigmoid": attention_sigmoid,
    "relu": attention_relu,
    "softmax": attention_softmax,
    "linear": attention_linear,
}


def get_predictor(activation):
    """The predictor ``f(X, k, v, lam)`` named ``activation`` (one of ``PREDICTORS``), or a callable as is."""
    if callable(activation):
        return activation
    if activation not in PREDICTORS:
        raise ValueError(f"activation must be one of {sorted(PREDICTORS)} or a callable, got {activation!r}")
    return PREDICTORS[activation]


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


def oracle_risk_curve(key, activation, lams, *, d, gamma, L, eps=0.0, n):
    """Monte Carlo risk E[(Y - f(X, k_star, v_star, lam))^2] at the oracle parameters, for every lam.

    The same ``n`` samples serve every ``lam`` (common random numbers: the curve is smooth and two
    values of it can be compared). At (k_star, v_star) a predictor that sees the tokens only through
    X k and X v needs the two coordinates (X_l^T k_star, X_l^T v_star) only: they are drawn exactly, in
    the frame (k_star, v_star) = (e_1, e_2) of R^2 (the signal token is (sqrt(d/2) + gamma Z_1, gamma Z_2),
    the others standard Gaussian). Cross-check: :func:`slr.risk.monte_carlo_risk` with ``predictor=``.

    Returns (mean, stderr), two arrays of the shape of ``lams``; the risk includes the noise eps^2.
    """
    check_key("key", key)
    predictor = get_predictor(activation)
    lams = np.atleast_1d(np.asarray(lams, dtype=float))
    if lams.ndim != 1 or not np.all(np.isfinite(lams)) or np.any(lams <= 0):
        raise ValueError(f"lams must be a 1-D array of finite values > 0, got {lams!r}")
    d = check_int("d", d, lo=2)
    check_positive("gamma", gamma)
    check_nonneg("eps", eps)
    L = check_int("L", L)
    n = check_int("n", n, lo=2)
    sq = _oracle_sq_errors(key, jnp.asarray(lams), float(d), float(gamma), float(eps),
                           predictor=predictor, L=L, n=n)
    sq = np.asarray(sq)
    return sq.mean(axis=1), sq.std(axis=1, ddof=1) / math.sqrt(n)


@partial(jax.jit, static_argnames=("predictor", "L", "n"))
def _oracle_sq_errors(key, lams, d, gamma, eps, *, predictor, L, n):
    kx, kj, kg, kn = jax.random.split(key, 4)
    X = jax.random.normal(kx, (n, L, 2), dtype=jnp.float64)
    J0 = jax.random.randint(kj, (n,), 0, L)
    signal = jnp.array([jnp.sqrt(d / 2.0), 0.0]) + gamma * jax.random.normal(kg, (n, 2), dtype=jnp.float64)
    X = X.at[jnp.arange(n), J0].set(signal)
    y = signal[:, 1] + eps * jax.random.normal(kn, (n,), dtype=jnp.float64)
    e1, e2 = jnp.array([1.0, 0.0]), jnp.array([0.0, 1.0])
    return jax.lax.map(lambda lam: jnp.square(y - predictor(X, e1, e2, lam)), lams)
