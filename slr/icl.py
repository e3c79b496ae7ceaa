"""In-context linear regression and one layer of linear self-attention (LSA).

Defined for the chapter ``book/beyond_linear_attention.ipynb`` (a contrast with single-location
regression: a task that a *linear* attention layer does solve); its training is :mod:`slr.icl_train`.

The task: a prompt holds ``n`` pairs (x_i, y_i) and a query x_q, with x_i, x_q ~ N(0, Sigma),
w ~ N(0, Omega) (``w_cov``; the identity when None) and y = f(x) + noise * xi, where f(x) = w^T x
(``response="linear"``) or f(x) = ReLU(w^T x) (``response="relu"``, a nonlinear response).

The layer. Stack the tokens z_i = (x_i, y_i) and z_q = (x_q, 0) in R^{d+1}. One layer of linear
self-attention with the query's own key masked out reads, at the query position,

    yhat = p^T G Q x_q,     G = (1/n) sum_i z_i z_i^T  (the (d+1) x (d+1) context second moment),

with ``p`` (d+1,) the last row of the value-projection matrix and ``Q`` (d+1, d) the first d columns of
the key-query matrix (the last column meets the 0 of z_q). One step of gradient descent from w = 0
on (1/2n) sum_i (y_i - w^T x_i)^2, preconditioned by Gamma, predicts x_q^T Gamma wbar with
wbar = (1/n) sum_i y_i x_i: the layer with p = e_{d+1}, Q = [Gamma^T; 0] computes exactly that.

The optimum (:func:`gamma_star`, derived in the chapter). For a linear response the risk of one step
preconditioned by Gamma is the quadratic :func:`gd_risk`; its minimiser is

    Gamma* = n Omega Sigma [ (n + 1) Sigma Omega Sigma + (tr(Sigma Omega) + noise^2) Sigma ]^{-1},

which is eta* I with eta* = n / (n + d + 1 + noise^2) for Sigma = Omega = I (Mahankali et al. 2024),
eta* Sigma^{-1} with the same eta* for Omega = Sigma^{-1} (Mahankali et al. 2024), and
n [(n + 1) Sigma + (tr Sigma + noise^2) I]^{-1} for Omega = I (Ahn et al. 2023, noise-free there).
For the ReLU response with Sigma = Omega = I it is n / (n + 2d + 3 + 4 noise^2) I (:func:`step_star`).
"""
from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from slr._validate import check_int, check_key, check_nonneg

__all__ = ["RESPONSES", "SETTINGS", "task_of", "optimum", "sample_icl", "sample", "lsa_predict", "gd_predict",
           "gamma_star", "step_star", "gd_risk", "lsa_params_from_gamma", "effective_preconditioner",
           "lsa_loss", "check_task"]

RESPONSES = ("linear", "relu")
#: The settings of the chapter: name -> (covariates anisotropic, weights' covariance, response).
#: "isotropic": Sigma = Omega = I; "preconditioned": Omega = Sigma^{-1} (Mahankali et al.);
#: "ahn": Omega = I under anisotropic Sigma (Ahn et al.); "relu": Sigma = Omega = I, y = ReLU(w^T x) + noise.
SETTINGS = {"isotropic": (False, "identity", "linear"), "preconditioned": (True, "inverse", "linear"),
            "ahn": (True, "identity", "linear"), "relu": (False, "identity", "relu")}


def check_cov(name, cov, d=None):
    """A symmetric positive definite (d, d) matrix as a NumPy array (ValueError naming ``name``)."""
    cov = np.asarray(cov, dtype=float)
    if cov.ndim != 2 or cov.shape[0] != cov.shape[1]:
        raise ValueError(f"{name} must be a square matrix of shape (d, d), got shape {cov.shape}")
    if d is not None and cov.shape[0] != d:
        raise ValueError(f"{name} must have shape ({d}, {d}), got shape {cov.shape}")
    if not np.all(np.isfinite(cov)) or np.max(np.abs(cov - cov.T)) > 1e-10:
        raise ValueError(f"{name} must be a finite symmetric matrix")
    if np.linalg.eigvalsh(cov).min() <= 0:
        raise ValueError(f"{name} must be positive definite, got smallest eigenvalue "
                         f"{np.linalg.eigvalsh(cov).min()!r}")
    return cov


def check_task(cov, w_cov, response):
    """(Sigma, Omega, response) checked; Omega defaults to the identity."""
    cov = check_cov("cov", cov)
    w_cov = np.eye(cov.shape[0]) if w_cov is None else check_cov("w_cov", w_cov, cov.shape[0])
    if response not in RESPONSES:
        raise ValueError(f"response must be one of {RESPONSES}, got {response!r}")
    return cov, w_cov, response


def task_of(setting: str, spectrum) -> dict:
    """The keyword arguments cov, w_cov, response of a setting of :data:`SETTINGS`, with
    Sigma = diag(spectrum) where the setting is anisotropic (else the identity of the same size)."""
    if setting not in SETTINGS:
        raise ValueError(f"setting must be one of {sorted(SETTINGS)}, got {setting!r}")
    aniso, weights, response = SETTINGS[setting]
    spec = np.asarray(spectrum, dtype=float)
    if spec.ndim != 1 or spec.size < 1 or not np.all(spec > 0):
        raise ValueError(f"spectrum must be a non-empty 1-D array of positive numbers, got {spectrum!r}")
    cov = np.diag(spec) if aniso else np.eye(spec.size)
    return {"cov": cov, "w_cov": np.linalg.inv(cov) if weights == "inverse" else None, "response": response}


def optimum(setting: str, spectrum, *, n: int, noise: float = 0.0):
    """The closed-form optimal preconditioner (d, d) of a setting of :data:`SETTINGS`: :func:`gamma_star`
    for a linear response, :func:`step_star` times the identity for the ReLU response."""
    task = task_of(setting, spectrum)
    if task["response"] == "relu":
        d = task["cov"].shape[0]
        return step_star(d=d, n=n, noise=noise, response="relu") * np.eye(d)
    return gamma_star(task["cov"], n=n, noise=noise, w_cov=task["w_cov"])


def sample_icl(key, batch: int, *, cov, n: int, noise: float = 0.0, w_cov=None, response="linear"):
    """``batch`` prompts of in-context regression (module docstring).

    Returns X (batch, n, d), y (batch, n), x_q (batch, d), y_q (batch,), w (batch, d).
    """
    check_key("key", key)
    batch, n = check_int("batch", batch), check_int("n", n)
    check_nonneg("noise", noise)
    cov, w_cov, response = check_task(cov, w_cov, response)
    return sample(key, *map(jnp.asarray, map(np.linalg.cholesky, (cov, w_cov))), float(noise), batch=batch,
                  n=n, response=response)


@partial(jax.jit, static_argnames=("batch", "n", "response"))
def sample(key, chol, chol_w, noise, *, batch, n, response="linear"):
    """The traceable sampler of :func:`sample_icl` from the Cholesky factors of Sigma and Omega (no checks)."""
    d = chol.shape[0]
    kw, kx, ke = jax.random.split(key, 3)
    w = jax.random.normal(kw, (batch, d), dtype=jnp.float64) @ chol_w.T
    Xall = jax.random.normal(kx, (batch, n + 1, d), dtype=jnp.float64) @ chol.T
    f = jnp.einsum("bnd,bd->bn", Xall, w)
    f = jax.nn.relu(f) if response == "relu" else f
    yall = f + noise * jax.random.normal(ke, (batch, n + 1), dtype=jnp.float64)
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


def gamma_star(cov, *, n: int, noise: float = 0.0, w_cov=None):
    """The optimal preconditioner for a linear response (module docstring), a (d, d) array:
    n Omega Sigma [(n + 1) Sigma Omega Sigma + (tr(Sigma Omega) + noise^2) Sigma]^{-1}."""
    n = check_int("n", n)
    check_nonneg("noise", noise)
    S, W, _ = check_task(cov, w_cov, "linear")
    M = (n + 1) * S @ W @ S + (np.trace(S @ W) + noise ** 2) * S
    return n * np.linalg.solve(M.T, (W @ S).T).T


def step_star(*, d: int, n: int, noise: float = 0.0, response="linear"):
    """The optimal GD step for Sigma = Omega = I: n / (n + d + 1 + noise^2) for a linear response,
    n / (n + 2d + 3 + 4 noise^2) for the ReLU response (eta* = n b / ((n - 1) b + m) with
    b = E|E_x[f(x) x]|^2 and m = E[y^2 |x|^2]: b = d, m = d (d + 2 + noise^2) for f = w^T x;
    b = d / 4, m = d (d + 2) / 2 + noise^2 d for f = ReLU(w^T x))."""
    d, n = check_int("d", d), check_int("n", n)
    check_nonneg("noise", noise)
    check_task(np.eye(1), None, response)
    if response == "relu":
        return n / (n + 2 * d + 3 + 4 * noise ** 2)
    return n / (n + d + 1 + noise ** 2)


def gd_risk(Gamma, cov, *, n: int, noise: float = 0.0, w_cov=None):
    """Exact risk E[(y_q - x_q^T Gamma wbar)^2] of one step of GD preconditioned by Gamma, linear response:
    noise^2 + tr(S W) - 2 tr(S G S W) + (n+1)/n tr(S G^T S G S W) + (tr(S W) + noise^2)/n tr(G^T S G S)
    with S = Sigma, W = Omega, G = Gamma (from E[S_n M S_n] = (n+1)/n S M S + tr(M S) S / n for the
    sample second moment S_n of n Gaussian vectors and a symmetric M)."""
    n = check_int("n", n)
    check_nonneg("noise", noise)
    S, W, _ = check_task(cov, w_cov, "linear")
    G = np.asarray(Gamma, dtype=float)
    if G.shape != S.shape:
        raise ValueError(f"Gamma must have shape {S.shape}, got shape {G.shape}")
    tSW = np.trace(S @ W)
    return float(noise ** 2 + tSW - 2 * np.trace(S @ G @ S @ W) + (n + 1) / n * np.trace(S @ G.T @ S @ G @ S @ W)
                 + (tSW + noise ** 2) / n * np.trace(G.T @ S @ G @ S))


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
    zero for an exact preconditioned-GD layer. Accepts a leading batch axis (runs).
    """
    p, Q = jnp.asarray(params["p"]), jnp.asarray(params["Q"])
    px, py, Qx, qy = p[..., :-1], p[..., -1], Q[..., :-1, :], Q[..., -1, :]
    A = py[..., None, None] * Qx + px[..., :, None] * qy[..., None, :]
    residual = jnp.sqrt(jnp.sum(px ** 2, -1) * jnp.sum(Qx ** 2, (-2, -1)) + py ** 2 * jnp.sum(qy ** 2, -1))
    return jnp.swapaxes(A, -1, -2), residual


def lsa_loss(params, X, y, x_q, y_q):
    """Mean squared error of the layer on a batch of prompts."""
    return jnp.mean(jnp.square(y_q - lsa_predict(params, X, y, x_q)))
