"""In-context linear regression and one layer of linear self-attention (LSA).

Defined for the chapter ``book/beyond_linear_attention.ipynb`` (a contrast with single-location
regression: a task that a *linear* attention layer does solve).

The task (Garg et al. 2022; von Oswald et al. 2023; Ahn et al. 2023; Mahankali et al. 2024): a
prompt holds ``n`` pairs (x_i, y_i) and a query x_q, with

    w ~ N(0, I_d),   x_i, x_q ~ N(0, Sigma),   y_i = w^T x_i + noise * xi_i,   y_q = w^T x_q + noise * xi_q.

The layer. Stack the tokens z_i = (x_i, y_i) and z_q = (x_q, 0) in R^{d+1}. One layer of linear
self-attention with the query's own key masked out reads, at the query position,

    yhat = p^T G Q x_q,     G = (1/n) sum_i z_i z_i^T  (the (d+1) x (d+1) context second moment),

with ``p`` (d+1,) the last row of the value-projection matrix and ``Q`` (d+1, d) the first d columns of
the key-query matrix (the last column meets the 0 of z_q). One step of gradient descent from w = 0
on (1/2n) sum_i (y_i - w^T x_i)^2, preconditioned by Gamma, predicts x_q^T Gamma wbar with
wbar = (1/n) sum_i y_i x_i: the layer with p = e_{d+1}, Q = [Gamma^T; 0] computes exactly that.

The theory: the LSA minimising the population loss is one step of preconditioned GD with

    Gamma* = n [ (n + 1) Sigma + (tr Sigma + noise^2) I ]^{-1}

(Ahn et al. 2023, Theorem 1, and Mahankali et al. 2024: eta* = n / (n + d + 1 + noise^2) when
Sigma = I). :func:`gamma_star` computes it, :func:`effective_preconditioner` reads the learned one.
"""
from __future__ import annotations

import math
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import optax

from slr._validate import check_int, check_key, check_nonneg, check_positive

__all__ = ["sample_icl", "lsa_predict", "gd_predict", "gamma_star", "step_star", "lsa_params_from_gamma",
           "effective_preconditioner", "lsa_loss", "train_lsa"]


def _check_cov(cov, d=None):
    cov = np.asarray(cov, dtype=float)
    if cov.ndim != 2 or cov.shape[0] != cov.shape[1]:
        raise ValueError(f"cov must be a square matrix of shape (d, d), got shape {cov.shape}")
    if d is not None and cov.shape[0] != d:
        raise ValueError(f"cov must have shape ({d}, {d}), got shape {cov.shape}")
    if not np.all(np.isfinite(cov)) or np.max(np.abs(cov - cov.T)) > 1e-10:
        raise ValueError("cov must be a finite symmetric matrix")
    if np.linalg.eigvalsh(cov).min() <= 0:
        raise ValueError(f"cov must be positive definite, got smallest eigenvalue {np.linalg.eigvalsh(cov).min()!r}")
    return cov


def sample_icl(key, batch: int, *, cov, n: int, noise: float = 0.0):
    """``batch`` prompts of in-context linear regression with covariate covariance ``cov`` (d, d).

    Returns X (batch, n, d), y (batch, n), x_q (batch, d), y_q (batch,), w (batch, d).
    """
    check_key("key", key)
    batch = check_int("batch", batch)
    n = check_int("n", n)
    check_nonneg("noise", noise)
    cov = _check_cov(cov)
    return _sample(key, jnp.asarray(np.linalg.cholesky(cov)), float(noise), batch=batch, n=n)


@partial(jax.jit, static_argnames=("batch", "n"))
def _sample(key, chol, noise, *, batch, n):
    d = chol.shape[0]
    kw, kx, ke = jax.random.split(key, 3)
    w = jax.random.normal(kw, (batch, d), dtype=jnp.float64)
    Xall = jax.random.normal(kx, (batch, n + 1, d), dtype=jnp.float64) @ chol.T
    yall = jnp.einsum("bnd,bd->bn", Xall, w) + noise * jax.random.normal(ke, (batch, n + 1), dtype=jnp.float64)
    return Xall[:, :n], yall[:, :n], Xall[:, n], yall[:, n], w


def lsa_predict(params, X, y, x_q):
    """One layer of linear self-attention read at the query: yhat = p^T G Q x_q (module docstring).

    params: {"p": (d+1,), "Q": (d+1, d)}; X (..., n, d), y (..., n), x_q (..., d) -> (...).
    """
    Z = jnp.concatenate([X, y[..., None]], axis=-1)                 # (..., n, d+1)
    G = jnp.einsum("...ni,...nj->...ij", Z, Z) / X.shape[-2]       # (..., d+1, d+1)
    return jnp.einsum("i,...ij,jk,...k->...", params["p"], G, params["Q"], x_q)


def gd_predict(X, y, x_q, precond):
    """One step of (preconditioned) GD from w = 0 on (1/2n) sum_i (y_i - w^T x_i)^2, then predict:
    x_q^T Gamma wbar, wbar = (1/n) sum_i y_i x_i. ``precond``: a scalar step eta or a (d, d) matrix."""
    wbar = jnp.einsum("...n,...nd->...d", y, X) / X.shape[-2]
    P = jnp.asarray(precond)
    w1 = P * wbar if P.ndim == 0 else wbar @ P.T
    return jnp.sum(w1 * x_q, axis=-1)


def gamma_star(cov, *, n: int, noise: float = 0.0):
    """The optimal preconditioner Gamma* = n [(n + 1) Sigma + (tr Sigma + noise^2) I]^{-1} (d, d)."""
    n = check_int("n", n)
    check_nonneg("noise", noise)
    cov = _check_cov(cov)
    d = cov.shape[0]
    return n * np.linalg.inv((n + 1) * cov + (np.trace(cov) + noise ** 2) * np.eye(d))


def step_star(*, d: int, n: int, noise: float = 0.0):
    """The optimal GD step for isotropic covariates: eta* = n / (n + d + 1 + noise^2)."""
    d = check_int("d", d)
    n = check_int("n", n)
    check_nonneg("noise", noise)
    return n / (n + d + 1 + noise ** 2)


def lsa_params_from_gamma(Gamma):
    """The LSA weights that compute one step of GD preconditioned by Gamma: p = e_{d+1}, Q = [Gamma^T; 0]."""
    Gamma = jnp.asarray(Gamma, dtype=jnp.float64)
    if Gamma.ndim != 2 or Gamma.shape[0] != Gamma.shape[1]:
        raise ValueError(f"Gamma must be a square matrix (d, d), got shape {Gamma.shape}")
    d = Gamma.shape[0]
    p = jnp.zeros(d + 1).at[d].set(1.0)
    return {"p": p, "Q": jnp.concatenate([Gamma.T, jnp.zeros((1, d))], axis=0)}


def effective_preconditioner(params):
    """The learned layer as a preconditioner, and what is left over.

    yhat = wbar^T A x_q + (1/n) sum_i (p_x^T x_i)(x_i^T Q_x x_q) + p_y ((1/n) sum_i y_i^2) q_y^T x_q with
    A = p_y Q_x + p_x q_y^T (p = (p_x, p_y), Q = [Q_x; q_y^T]). Returns (Gamma = A^T, residual), the
    residual being the Frobenius norm of the two other terms' coefficients (p_x Q_x, p_y q_y):
    zero for an exact preconditioned-GD layer.
    """
    p, Q = jnp.asarray(params["p"]), jnp.asarray(params["Q"])
    px, py, Qx, qy = p[:-1], p[-1], Q[:-1], Q[-1]
    A = py * Qx + jnp.outer(px, qy)
    residual = jnp.sqrt(jnp.sum(px ** 2) * jnp.sum(Qx ** 2) + py ** 2 * jnp.sum(qy ** 2))
    return A.T, residual


def lsa_loss(params, X, y, x_q, y_q):
    """Mean squared error of the layer on a batch of prompts."""
    return jnp.mean(jnp.square(y_q - lsa_predict(params, X, y, x_q)))


def train_lsa(key, *, cov, n: int, noise: float = 0.0, steps: int, batch: int, lr: float,
              repeats: int = 1, init_scale: float = 0.1):
    """Train the LSA layer (p, Q) by Adam (cosine-decayed step from lr to 0) on fresh prompts at each step; repeats vmapped, lax.scan.

    Returns NumPy arrays: ``p`` (repeats, d+1), ``Q`` (repeats, d+1, d), ``loss`` (repeats, steps).
    """
    check_key("key", key)
    n = check_int("n", n)
    check_nonneg("noise", noise)
    steps = check_int("steps", steps)
    batch = check_int("batch", batch)
    repeats = check_int("repeats", repeats)
    check_positive("lr", lr)
    check_positive("init_scale", init_scale)
    cov = _check_cov(cov)
    out = _train(key, jnp.asarray(np.linalg.cholesky(cov)), float(noise), float(lr), float(init_scale),
                 n=n, steps=steps, batch=batch, repeats=repeats)
    return {name: np.asarray(x) for name, x in out.items()}


@partial(jax.jit, static_argnames=("n", "steps", "batch", "repeats"))
def _train(key, chol, noise, lr, init_scale, *, n, steps, batch, repeats):
    d = chol.shape[0]
    opt = optax.adam(optax.cosine_decay_schedule(lr, steps))

    def one_run(kr):
        kp, kq, kdata = jax.random.split(kr, 3)
        params = {"p": init_scale * jax.random.normal(kp, (d + 1,), dtype=jnp.float64),
                  "Q": init_scale * jax.random.normal(kq, (d + 1, d), dtype=jnp.float64)}

        def step(carry, kb):
            params, state = carry
            X, y, x_q, y_q, _ = _sample(kb, chol, noise, batch=batch, n=n)
            loss, g = jax.value_and_grad(lsa_loss)(params, X, y, x_q, y_q)
            upd, state = opt.update(g, state, params)
            return (optax.apply_updates(params, upd), state), loss

        (params, _), loss = jax.lax.scan(step, (params, opt.init(params)), jax.random.split(kdata, steps))
        return {"p": params["p"], "Q": params["Q"], "loss": loss}

    return jax.vmap(one_run)(jax.random.split(key, repeats))
