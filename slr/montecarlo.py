"""The one Monte Carlo estimator of a risk E[(Y - T(X))^2], batched over points and over lam.

:func:`risk` returns the mean squared error of a predictor ``T = f(X, k, v, lam)`` (any of
:data:`slr.predictors.PREDICTORS`, or a callable) with its standard error, at every point (k, v) of a
batch and every lam of a grid. Two devices make it cheap and precise:

- **Common random numbers.** Every point and every lam uses the same draws (a given ``key`` always
  gives the same draws, whatever the predictor and the batch): the curve in lam is smooth, the
  difference of two entries has a much smaller standard error than each (:func:`squared_errors` and
  :func:`mean_se` give paired differences), and a batch of points equals separate calls.
- **Sampling in a frame.** A predictor that reads the tokens through X k and X v, and the label
  Y = X_{J0}^T v_star + xi, depend on the tokens only through their coordinates in
  span{k_star, v_star, k, v}. The tokens are drawn exactly in an orthonormal frame of that span,
  one frame per point (:func:`frame`): the other coordinates are standard Gaussian and independent of what is read, so the
  estimate has the law of a full d-dimensional one at a cost independent of d. Only the mean of the
  informative token, sqrt(d/2) k_star, remembers the ambient dimension ``d`` (``task.assemble(d=)``).
  Vectors may also be given directly as coordinates in such a frame, with the ambient ``d`` passed
  explicitly (for instance unit vectors of R^4 with prescribed overlaps, and d = 400).
  A predictor that reads more than these projections (the Bayes predictor reads |X_l|^2) needs
  ``reduce=False``: the draw is then in the full dimension.

The samples come from the library's one sampler body, :func:`slr.task.draws` + :func:`slr.task.assemble`
(``k_star`` of shape (H, d) gives the multiple-location task of Eq. (30)).

:func:`multihead_oracle_sq_errors` gives the squared errors of the two-head attention of Eq. (31) at its
oracle directions, with the two keys at any angle and independent or shared token noise (its exact
excess risk at 90 degrees: :func:`slr.risk.multihead_oracle_excess`).
"""
from __future__ import annotations

import math
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from slr import task
from slr._validate import (check_int, check_key, check_nonneg, check_positive, check_positive_array,
                           check_unit_rows, is_traced)
from slr.predictors import attention_multihead, get_predictor

__all__ = ["risk", "squared_errors", "mean_se", "frame", "risk_at_overlaps", "least_squares",
           "sandwich_cov", "multihead_oracle_sq_errors"]


def frame(vectors, reduce: bool = True):
    """Orthonormal basis Q, shape (d, r), of a space holding the rows of ``vectors`` (m, d): the QR
    factor of their span (r = m) when m < d and ``reduce``, else the identity (r = d)."""
    vectors = jnp.asarray(vectors)
    m, d = vectors.shape
    if not reduce or m >= d:
        return jnp.eye(d)
    q, _ = jnp.linalg.qr(vectors.T)
    return q


@partial(jax.jit, static_argnames=("m", "L", "r", "H"))
def _draws(key, *, m, L, r, H):
    """The m shared draws of one chunk (:func:`slr.task.draws` in r coordinates): compiled once per
    shape, whatever the predictor, the points and the lam grid (the random-number code is most of a
    chunk's compilation)."""
    return task.draws(key, m, L=L, d=r, H=H)


@partial(jax.jit, static_argnames=("d", "predictor"))
def _errors(draws, K, V, KS, VS, lams, gamma, eps, *, d, predictor):
    """Squared errors (P, len(lams), m) on one chunk of shared draws, for P points given by their
    coordinates (K, V, KS, VS) in their own frames: the draws are assembled once per point."""
    def one_point(a):
        k, v, ks, vs = a
        X, y, _ = task.assemble(draws, ks, vs, gamma=gamma, eps=eps, d=d)
        return jax.lax.map(lambda lam: jnp.square(y - predictor(X, k, v, lam)), lams)

    return jax.lax.map(one_point, (K, V, KS, VS))


def _chunk_errors(key, K, V, KS, VS, lams, gamma, eps, *, m, L, d, predictor):
    """Squared errors (P, len(lams), m) on one chunk of m shared draws (:func:`_draws`, :func:`_errors`)."""
    H, r = KS.shape[1:]
    return _errors(_draws(key, m=m, L=L, r=r, H=H), K, V, KS, VS, lams, gamma, eps, d=d, predictor=predictor)


def _oracle(k_star, v_star):
    ks = np.atleast_2d(np.asarray(k_star, dtype=float))
    vs = np.atleast_2d(np.asarray(v_star, dtype=float))
    if ks.ndim != 2 or ks.shape != vs.shape:
        raise ValueError(f"k_star and v_star must have the same shape (d,) or (H, d), got "
                         f"{np.shape(k_star)} and {np.shape(v_star)}")
    both = np.concatenate([ks, vs])
    if not np.all(np.isfinite(both)) or np.max(np.abs(both @ both.T - np.eye(len(both)))) > 1e-6:
        raise ValueError("k_star and v_star must be mutually orthonormal (rows)")
    return ks, vs


def _chunks(key, k, v, k_star, v_star, *, lam, gamma, L, eps, n, d, predictor, chunk, reduce):
    """Checks, the frame, then the squared errors chunk by chunk: (generator of (G, m) arrays, shape)."""
    n, chunk, L = (check_int(name, val) for name, val in (("n", n), ("chunk", chunk), ("L", L)))
    check_positive_array("lam", lam), check_positive("gamma", gamma), check_nonneg("eps", eps)
    check_key("key", key)
    predictor = get_predictor(predictor)
    ks, vs = _oracle(k_star, v_star)
    r0 = ks.shape[1]
    per_point = 2 if getattr(predictor, "heads", False) else 1
    k, v = np.asarray(k, dtype=float), np.asarray(v, dtype=float)
    if k.shape != v.shape or k.ndim < per_point or k.shape[-1] != r0:
        raise ValueError(f"k and v must have the same shape (..., {'H, ' * (per_point - 1)}d={r0}), got "
                         f"{k.shape} and {v.shape}")
    check_unit_rows("k", k, d=r0, max_ndim=None)
    check_unit_rows("v", v, d=r0, max_ndim=None)
    d = r0 if d is None else check_int("d", d, lo=r0)
    if reduce is False and d != r0:
        raise ValueError(f"d must equal the vectors' length {r0} when reduce=False, got {d!r}")
    points, head = k.shape[:k.ndim - per_point], k.shape[k.ndim - per_point:-1]
    red = lambda Q, a: jnp.stack([Q.T @ jnp.asarray(x) for x in a.reshape(-1, r0)])  # frame coordinates
    K, V, KS, VS = [], [], [], []
    for kp, vp in zip(k.reshape(-1, *head, r0), v.reshape(-1, *head, r0)):  # one frame per point
        Q = frame(np.concatenate([ks, vs, kp.reshape(-1, r0), vp.reshape(-1, r0)]), reduce)
        K.append(red(Q, kp).reshape(*head, -1))
        V.append(red(Q, vp).reshape(*head, -1))
        KS.append(red(Q, ks))
        VS.append(red(Q, vs))
    K, V, KS, VS = map(jnp.stack, (K, V, KS, VS))
    lams = np.asarray(lam, dtype=float)
    lam_grid = jnp.asarray(lams.ravel())
    m = min(chunk, n)

    def gen():
        for i, kk in enumerate(jax.random.split(key, -(-n // m))):
            err = _chunk_errors(kk, K, V, KS, VS, lam_grid, gamma, eps, m=m, L=L, d=d, predictor=predictor)
            yield np.asarray(err).reshape(-1, m)[:, : min(m, n - i * m)]

    return gen(), points + lams.shape


def risk(key, k, v, k_star, v_star, *, lam, gamma, L, eps=0.0, n, d=None, predictor="erf",
         chunk: int = 200_000, reduce: bool = True):
    """Monte Carlo estimate of E[(Y - f(X, k, v, lam))^2] with its standard error: (mean, stderr).

    Args:
        key: JAX PRNG key; the samples depend on it alone (common random numbers).
        k, v: unit vectors of shape (..., d) (the leading axes are a batch of points), or (..., H, d)
            for the multi-head predictor of Eq. (31).
        k_star, v_star: the oracle, orthonormal, shape (d,) (or (H, d): the task of Eq. (30)).
        lam: inverse temperature, a scalar or an array of any shape (a grid), every entry > 0.
        gamma, eps: standard deviations of the informative token and of the label noise.
        L: tokens per sequence; n: samples per entry (>= 1), drawn ``chunk`` at a time.
        d: ambient dimension when the vectors are coordinates in an orthonormal frame of a
            subspace of R^d holding them all (default: their length).
        predictor: a name of :data:`slr.predictors.PREDICTORS` or a callable ``f(X, k, v, lam)``.
        reduce: sample in the frame of span{k_star, v_star, k, v} (False: in all d coordinates).

    Returns:
        mean and stderr, arrays of shape ``points + lam.shape`` (NumPy scalars for one point, one lam).
        The risk includes the noise: its expectation is >= eps^2.
    """
    chunks, shape = _chunks(key, k, v, k_star, v_star, lam=lam, gamma=gamma, L=L, eps=eps, n=n, d=d,
                            predictor=predictor, chunk=chunk, reduce=reduce)
    total, total2, count = 0.0, 0.0, 0
    for err in chunks:
        total = total + err.sum(axis=1)
        total2 = total2 + np.square(err).sum(axis=1)
        count += err.shape[1]
    mean = total / count
    var = np.maximum(total2 / count - mean ** 2, 0.0) * count / max(count - 1, 1)
    return mean.reshape(shape)[()], np.sqrt(var / count).reshape(shape)[()]


def squared_errors(key, k, v, k_star, v_star, *, lam, gamma, L, eps=0.0, n, d=None, predictor="erf",
                   chunk: int = 200_000, reduce: bool = True):
    """The squared errors behind :func:`risk` (same arguments, same samples): an array of shape
    ``points + lam.shape + (n,)``, for paired comparisons (:func:`mean_se` of a difference)."""
    chunks, shape = _chunks(key, k, v, k_star, v_star, lam=lam, gamma=gamma, L=L, eps=eps, n=n, d=d,
                            predictor=predictor, chunk=chunk, reduce=reduce)
    return np.concatenate(list(chunks), axis=1).reshape(*shape, -1)


def mean_se(errors, axis: int = -1):
    """Sample mean and standard error of the mean along ``axis``: (mean, std(ddof=1) / sqrt(n))."""
    errors = np.asarray(errors)
    n = errors.shape[axis]
    return errors.mean(axis=axis), errors.std(axis=axis, ddof=1) / np.sqrt(n)


def risk_at_overlaps(key, points, *, lam, d, gamma, L, eps=0.0, n, predictor="erf",
                     chunk: int = 200_000):
    """:func:`risk` at points given by their five overlaps (kappa, nu, theta, eta, rho), one row each:
    the vectors are :func:`slr.overlaps.oracle_frame_vectors` in the frame (k*, v*, e3, e4) of R^4 and
    ``d`` is the ambient dimension; ``predictor`` as in :func:`risk`. Returns (mean, stderr) of shape
    ``(len(points),) + lam.shape``."""
    from slr.overlaps import oracle_frame_vectors

    K, V = map(np.stack, zip(*[oracle_frame_vectors(*p) for p in points]))
    e = np.eye(4)
    return risk(key, K, V, e[0], e[1], lam=lam, d=d, gamma=gamma, L=L, eps=eps, n=n,
                predictor=predictor, chunk=chunk)


def least_squares(seed: int, k_star, v_star, *, L: int, gamma, eps=0.0, p=None, n_train: int = 40_000,
                  n_test: int = 60_000, robust: bool = False):
    """Ordinary least squares of Y on the stacked tokens (L d coefficients, no intercept), fitted on
    ``n_train`` sequences of SLR drawn with ``jax.random.key(seed)`` and tested on ``n_test`` fresh ones
    (``key(seed + 1)``). Returns ``(W, W_se, mse, se)``: the weights (L, d), their standard errors
    (residual variance times the diagonal of the inverse Gram matrix; :func:`sandwich_cov` gives the
    heteroscedasticity-robust ones, returned instead with ``robust=True``), the test mean squared error
    and its standard error. Compare with
    :func:`slr.risk.linear_weights` and :func:`slr.risk.linear_risk`."""
    d = np.shape(k_star)[-1]
    X, y, _ = task.sample(jax.random.key(seed), n_train, k_star, v_star, L=L, gamma=gamma, eps=eps, p=p)
    X, y = np.asarray(X).reshape(n_train, -1), np.asarray(y)
    gram_inv = np.linalg.inv(X.T @ X)
    W = gram_inv @ (X.T @ y)
    resid = y - X @ W
    W_se = np.sqrt(np.diag(sandwich_cov(X, resid)) if robust
                   else np.mean(resid ** 2) * np.diag(gram_inv)).reshape(L, d)
    W = W.reshape(L, d)
    Xt, yt, _ = task.sample(jax.random.key(seed + 1), n_test, k_star, v_star, L=L, gamma=gamma, eps=eps,
                            p=p)
    err = (np.asarray(yt) - np.einsum("nld,ld->n", np.asarray(Xt), W)) ** 2
    return W, W_se, err.mean(), err.std(ddof=1) / np.sqrt(n_test)


def sandwich_cov(X, residuals):
    """Heteroscedasticity-robust (HC0, sandwich) covariance of least-squares weights fitted on the design
    ``X`` (n, p) with the given ``residuals`` (n,): ``(X^T X)^-1 X^T diag(e^2) X (X^T X)^-1``. Unlike
    the textbook ``s^2 (X^T X)^-1`` it does not assume a constant residual variance: in SLR the linear
    predictor errs more on some sequences than on others. The square roots of its diagonal are the
    weights' standard errors (:func:`least_squares` returns the textbook ones)."""
    X, e = np.asarray(X, dtype=float), np.asarray(residuals, dtype=float)
    if X.ndim != 2 or X.shape[0] <= X.shape[1]:
        raise ValueError(f"X must be a 2-D design (n, p) with n > p, got shape {X.shape}")
    if e.shape != X.shape[:1]:
        raise ValueError(f"residuals must have shape ({X.shape[0]},) like the rows of X, got {e.shape}")
    if not (np.all(np.isfinite(X)) and np.all(np.isfinite(e))):
        raise ValueError("X and residuals must be finite")
    bread = np.linalg.inv(X.T @ X)
    Xe = X * e[:, None]
    return bread @ (Xe.T @ Xe) @ bread


def multihead_oracle_sq_errors(key, m, *, lam, gamma, d, L, eps=0.0, phi_deg=90.0, shared_noise=(False,)):
    """Squared errors (len(shared_noise), m) of the two-head attention of Eq. (31) at the oracle
    directions (k_h = k*_h, v_h = v*_h) on m sequences of Eq. (30) with two informative locations.

    The predictor reads a token only through its coordinates on k*_1, k*_2, v*_1, v*_2, so only these
    are drawn, in the frame e_1, ..., e_4 of R^4: k*_1 = e_1, k*_2 = cos(phi) e_1 + sin(phi) e_2 (phi =
    ``phi_deg`` degrees; exactly e_2 at 90), v*_h = e_{2+h} (orthogonal to both keys); the informative
    tokens' mean keeps its norm sqrt(d/2) (``task.assemble(d=d)``). One draw :func:`slr.task.draws`
    (key, m, L=L, d=4, H=2) serves every entry of ``shared_noise``: row i has the two informative
    tokens' noise shared (:func:`slr.task.tie`) when ``shared_noise[i]`` is True, as in the authors'
    code, independent (Eq. 30) when False. Rows include the label noise: their mean less eps^2
    estimates the excess risk, :func:`slr.risk.multihead_oracle_excess` at phi = 90.

    Traceable in ``key``, ``lam``, ``gamma`` and ``eps`` (checked when not traced); ``m``, ``L``, ``d``,
    ``phi_deg`` and ``shared_noise`` (a tuple of bools) must be concrete: under :func:`jax.jit` make
    ``m`` static and close over the others, e.g.
    ``jax.jit(lambda k, lam, m: multihead_oracle_sq_errors(k, m, lam=lam, ...), static_argnames="m")``.
    """
    check_key("key", key)
    m, L = check_int("m", m), check_int("L", L, lo=2)
    check_positive_array("lam", lam), check_positive("gamma", gamma), check_nonneg("eps", eps)
    if (is_traced(d) or isinstance(d, (bool, np.bool_)) or not isinstance(d, (int, float, np.number))
            or not np.isfinite(d) or d < 4):
        raise ValueError(f"d must be a concrete finite number >= 4, got {d!r}")
    if (is_traced(phi_deg) or not isinstance(phi_deg, (int, float, np.number))
            or isinstance(phi_deg, (bool, np.bool_)) or not 0.0 < float(phi_deg) <= 180.0):
        raise ValueError(f"phi_deg must be a concrete angle in (0, 180], got {phi_deg!r}")
    if (not isinstance(shared_noise, (tuple, list)) or not shared_noise
            or not all(isinstance(t, (bool, np.bool_)) for t in shared_noise)):
        raise ValueError(f"shared_noise must be a non-empty tuple of bools, got {shared_noise!r}")
    e, r = jnp.eye(4), math.radians(phi_deg)
    ks = e[:2] if phi_deg == 90 else jnp.array([[1.0, 0.0, 0.0, 0.0], [math.cos(r), math.sin(r), 0.0, 0.0]])
    vs = e[2:]
    dr = task.draws(key, m, L=L, d=4, H=2)
    out = []
    for tied in shared_noise:
        X, y, _ = task.assemble(task.tie(dr, bool(tied)), ks, vs, gamma=gamma, eps=eps, d=d)
        out.append(jnp.square(y - attention_multihead(X, ks, vs, lam)))
    return jnp.stack(out)
