"""Vectorised helpers for the paper's open questions (chapter ``book/beyond_open_questions.ipynb``).

- :func:`sphere_overlaps`: the five overlaps (kappa, nu, theta, eta, rho) of R uniform starts on the
  sphere against a sampled oracle (the starts of sweeps run by :func:`slr.pgd.pgd_overlaps`).
- :func:`oracle_at_angle`: two-location oracles (Eq. 30, H = 2) whose key (or value) directions make an
  angle phi; :func:`train_multihead`: stochastic PGD on the two-head predictor (Eq. 31, via
  :func:`slr.multihead.predict`) with one oracle per run, so several angles train in one vmap;
  :func:`separation`: the alignment matrix |<k_h, k*_j>| and a permutation-matched separation score.
"""
from __future__ import annotations

import itertools
import math
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from slr import task
from slr._validate import check_int, check_interval, check_key
from slr.pgd import init_sphere

__all__ = ["sphere_overlaps", "oracle_at_angle", "train_multihead", "separation"]


def sphere_overlaps(key, d: int, R: int):
    """R independent starts (k0, v0) uniform on S^{d-1} x S^{d-1} against one oracle (k*, v*) drawn by
    :func:`slr.task.sample_oracle`: the five overlaps as a tuple of arrays of shape (R,)."""
    check_key("key", key)
    d = check_int("d", d, lo=2)
    R = check_int("R", R)
    k_or, k_init = jax.random.split(key)
    ks, vs = task.sample_oracle(k_or, d)
    k0, v0 = init_sphere(k_init, d, R)
    return (k0 @ ks, v0 @ vs, v0 @ ks, k0 @ vs, jnp.sum(k0 * v0, axis=-1))


# ----------------------------------------------------------------------------------------------
# multiple heads


def oracle_at_angle(key, d: int, phi: float, which: str = "k"):
    """Two-location oracle (Eq. 30, H = 2) with an angle ``phi`` (radians) between the two key
    directions (``which="k"``) or the two value directions (``which="v"``); every other pair of the
    four directions is orthogonal. From an orthonormal frame e1..e4 (:func:`slr.task.orthonormal_frame`):
    k*_1 = e1, k*_2 = cos(phi) e1 + sin(phi) e2, v*_1 = e3, v*_2 = e4 (roles of k and v swapped for
    ``which="v"``). phi = pi/2 is the library's orthonormal oracle. Returns (k_stars, v_stars), (2, d)."""
    check_key("key", key)
    d = check_int("d", d, lo=4)
    check_interval("phi", phi, 0.0, math.pi)
    if which not in ("k", "v"):
        raise ValueError(f"which must be 'k' or 'v', got {which!r}")
    e = task.orthonormal_frame(key, d, 4)
    return _angled(e, phi, which)


def _angled(e, phi, which):
    a = jnp.stack([e[0], jnp.cos(phi) * e[0] + jnp.sin(phi) * e[1]])
    b = jnp.stack([e[2], e[3]])
    return (a, b) if which == "k" else (b, a)


def _draws(key, n, L, d):
    """The standard Gaussian draws and the two distinct uniform positions of n samples (Eq. 30, H = 2)."""
    return task.draws(key, n, L=L, d=d, H=2)


def _assemble(draws, ks, vs, gamma, eps):
    """Samples (X, y) of Eq. (30) for the oracle (ks, vs) from the draws of :func:`_draws`."""
    X, y, _ = task.assemble(draws, ks, vs, gamma=gamma, eps=eps)
    return X, y


def _draw(key, n, ks, vs, L, gamma, eps):
    return _assemble(_draws(key, n, L, ks.shape[-1]), ks, vs, gamma, eps)


@partial(jax.jit, static_argnames=("cfg", "which"))
def _train(key, phis, cfg, which):
    from slr.multihead import init_heads, lam_schedule, predict

    n = phis.shape[0]
    k_or, k_init, k_test, k_data = jax.random.split(key, 4)
    frames = jax.vmap(lambda kk: task.orthonormal_frame(kk, cfg.d, 4))(jax.random.split(k_or, n))
    ks, vs = jax.vmap(lambda e, p: _angled(e, p, which))(frames, phis)
    k0, v0 = jax.vmap(lambda kk: init_heads(kk, cfg.d, cfg.H))(jax.random.split(k_init, n))
    Xt, yt = jax.vmap(lambda kk, a, b: _draw(kk, cfg.n_test, a, b, cfg.L, cfg.gamma, cfg.eps))(
        jax.random.split(k_test, n), ks, vs)

    def loss(kv, X, y, lam):
        return jnp.mean((predict(X, kv[0], kv[1], lam) - y) ** 2)

    proj = lambda a: a / jnp.linalg.norm(a, axis=-1, keepdims=True)

    def update(kv, a, b, draws, lam):
        X, y = _assemble(draws, a, b, cfg.gamma, cfg.eps)
        gk, gv = jax.grad(loss)(kv, X, y, lam)
        return proj(kv[0] - cfg.lr * gk), proj(kv[1] - cfg.lr * gv)

    def metrics(kv, t):
        lam = lam_schedule(t, cfg.lam0, cfg.lam_decay, cfg.lam_freeze)
        ex = jax.vmap(lambda kv, X, y: loss(kv, X, y, lam))(kv, Xt, yt) - cfg.eps ** 2
        return ex, jnp.einsum("nhd,njd->nhj", kv[0], ks), jnp.einsum("nhd,njd->nhj", kv[1], vs)

    def step(kv, inp):
        t, kk = inp
        lam = lam_schedule(t, cfg.lam0, cfg.lam_decay, cfg.lam_freeze)
        draws = _draws(kk, cfg.batch, cfg.L, cfg.d)  # shared by the runs (each has its own oracle)
        return jax.vmap(update, in_axes=(0, 0, 0, None, None))(kv, ks, vs, draws, lam), None

    def block(kv, inp):
        b, kk = inp
        ts = b * cfg.log_every + jnp.arange(cfg.log_every)
        kv, _ = jax.lax.scan(step, kv, (ts, jax.random.split(kk, cfg.log_every)))
        return kv, metrics(kv, (b + 1) * cfg.log_every)

    n_logs = cfg.steps // cfg.log_every
    m0 = metrics((k0, v0), 0)
    _, logs = jax.lax.scan(block, (k0, v0), (jnp.arange(n_logs), jax.random.split(k_data, n_logs)))
    return tuple(jnp.concatenate([a[:, None], jnp.swapaxes(b, 0, 1)], axis=1) for a, b in zip(m0, logs))


def train_multihead(cfg, phis, which: str = "k"):
    """Stochastic PGD on the multi-head predictor (Eq. 31, :func:`slr.multihead.predict`) for
    multiple-location regression with H = n_locations = 2, one run per entry of ``phis``, each with
    its own oracle from :func:`oracle_at_angle` (angle phis[i] between the key or value directions),
    its own start (:func:`slr.multihead.init_heads`); the standard Gaussian draws of each step's fresh
    batch are shared by the runs, each turning them into samples of its own oracle; one vmap.
    ``cfg`` is a :class:`slr.multihead.MultiHeadConfig` (fields used: L, d, H, gamma, eps, batch, steps,
    lr, lam0, lam_decay, lam_freeze, log_every, n_test, seed; ``reps`` and ``shared_draws`` are not).

    Returns NumPy arrays: ``excess_risk`` (N, T) on a fixed test batch per run, ``kappa`` and ``nu``
    (N, T, H, 2) the signed overlaps <k_h, k*_j> and <v_h, v*_j>, ``steps`` (T,).
    """
    from slr.multihead import MultiHeadConfig

    if not isinstance(cfg, MultiHeadConfig):
        raise ValueError(f"cfg must be a MultiHeadConfig, got {type(cfg).__name__}")
    cfg.validate()
    if cfg.H != 2 or cfg.n_locations != 2:
        raise ValueError(f"cfg.H and cfg.n_locations must be 2, got H={cfg.H}, n_locations={cfg.n_locations}")
    if which not in ("k", "v"):
        raise ValueError(f"which must be 'k' or 'v', got {which!r}")
    phis = np.atleast_1d(np.asarray(phis, dtype=float))
    check_interval("phis", phis, 0.0, math.pi)
    ex, ka, nu = _train(jax.random.key(cfg.seed), jnp.asarray(phis), cfg, which)
    return {"excess_risk": np.asarray(ex), "kappa": np.asarray(ka), "nu": np.asarray(nu),
            "steps": np.arange(0, cfg.steps + 1, cfg.log_every)}


def separation(overlap):
    """Separation of heads from an overlap matrix <x_h, x*_j> of shape (..., H, H).

    Returns (A, score): A = |overlap| with its columns permuted to the best matching of heads to
    oracle directions (the permutation maximising the trace), and score = mean |diag| - mean |offdiag|
    of that matched matrix (1 for perfectly separated orthonormal heads; 0 when every head is equally
    aligned with every direction)."""
    A = np.abs(np.asarray(overlap, dtype=float))
    if A.ndim < 2 or A.shape[-1] != A.shape[-2]:
        raise ValueError(f"overlap must have shape (..., H, H), got {A.shape}")
    H = A.shape[-1]
    perms = list(itertools.permutations(range(H)))
    traces = np.stack([sum(A[..., h, p[h]] for h in range(H)) for p in perms], axis=-1)
    best = np.argmax(traces, axis=-1)
    P = np.asarray(perms)[best]  # (..., H)
    Am = np.take_along_axis(A, P[..., None, :], axis=-1)
    diag = np.trace(Am, axis1=-2, axis2=-1) / H
    off = (Am.sum(axis=(-1, -2)) - diag * H) / (H * (H - 1)) if H > 1 else 0.0
    return Am, diag - off
