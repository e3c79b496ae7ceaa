"""The five overlaps of Section 3 and the vectors that realise them.

The risk R_lam(k, v) depends on (k, v) only through kappa = k.k*, nu = v.v*, theta = v.k*,
eta = k.v*, rho = k.v (Proposition 15), and PGD keeps k, v in span{k0, v0, k*, v*} (its gradients
are combinations of k*, v*, k, v: see :mod:`slr.pgd`). Hence:

- :func:`overlaps`: the five scalars of vectors (k, v, k*, v*) (broadcast over leading axes);
- :func:`dist_manifold`: the distance sqrt(theta^2 + eta^2 + rho^2) to M = {theta = eta = rho = 0};
- :func:`frame`: an orthonormal frame Q (d, 4) of span{k*, v*, k0, v0} (exact reduction of PGD to R^4);
- :func:`trajectory_gap`: the largest difference of the five overlaps between two logged runs;
- :func:`separation`: head matching, the heads of a multi-head run matched to the oracle directions
  (:func:`matching`: the matching itself, each head's oracle direction);
- :func:`frame_vectors`: vectors (k*, v*, k, v) in R^dim (dim >= 4) with given overlaps, from a square
  root of their Gram matrix. It is the one construction used both for PGD started from overlaps
  (:func:`slr.pgd.pgd_overlaps`) and for the Riemannian Hessian in R^5 (:mod:`slr.manifold`).
"""
from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np

from slr._validate import check_int, check_interval

__all__ = ["overlaps", "dist_manifold", "frame", "frame_vectors", "oracle_frame_vectors",
           "trajectory_gap", "matching", "separation"]

NAMES = ("kappa", "nu", "theta", "eta", "rho")


def overlaps(k, v, k_star, v_star):
    """The five scalars (kappa, nu, theta, eta, rho) = (k.k*, v.v*, v.k*, k.v*, k.v); vectors (..., d).
    Traceable."""
    k, v, k_star, v_star = map(jnp.asarray, (k, v, k_star, v_star))
    dot = lambda x, y: jnp.sum(x * y, axis=-1)
    return dot(k, k_star), dot(v, v_star), dot(v, k_star), dot(k, v_star), dot(k, v)


def dist_manifold(theta, eta, rho):
    """Distance to M = {theta = eta = rho = 0}: sqrt(theta^2 + eta^2 + rho^2) (broadcasts; traceable).
    JAX arrays (or tracers) in, a JAX array out; NumPy arrays or floats in, NumPy out, with no program
    to compile (the same numbers: each operation is correctly rounded either way)."""
    xp = jnp if any(isinstance(x, jax.Array) for x in (theta, eta, rho)) else np
    return xp.sqrt(xp.square(theta) + xp.square(eta) + xp.square(rho))


def trajectory_gap(a, b, *, per_run=False):
    """Largest |difference| of the five overlaps between two logged runs ``a``, ``b`` (objects with
    ``kappa``, ``nu``, ``theta``, ``eta``, ``rho`` of one shape (..., T), e.g. two
    :class:`slr.pgd.Trajectory` from the same starts), per logged step: shape (T,), the max over the
    overlaps and the leading (repeat) axes. With ``per_run=True``, per run instead: shape (...), the max
    over the overlaps and the logged steps."""
    diffs = []
    for name in NAMES:
        x, y = np.asarray(getattr(a, name)), np.asarray(getattr(b, name))
        if x.shape != y.shape:
            raise ValueError(f"a and b must log the same shapes, got {name} of shapes {x.shape} and {y.shape}")
        diffs.append(np.abs(x - y))
    if per_run:
        return np.max(np.stack(diffs), axis=(0, -1))
    return np.max(np.concatenate([x.reshape(-1, x.shape[-1]) for x in diffs], axis=0), axis=0)


def frame(k_star, v_star, k0, v0):
    """Orthonormal Q (d, 4) with span{k*, v*, k0, v0} in its range (Householder QR: Q orthonormal even
    when the four vectors are dependent, and then still spans them). Needs d >= 4; no checks."""
    q, _ = jnp.linalg.qr(jnp.stack([k_star, v_star, k0, v0], axis=1))
    return q


def gram_vectors(kappa, nu, theta, eta, rho, dim):
    """Traceable kernel of :func:`frame_vectors` (no checks; scalars, vmap it for arrays)."""
    G = jnp.array([[1.0, 0.0, kappa, theta],
                   [0.0, 1.0, eta, nu],
                   [kappa, eta, 1.0, rho],
                   [theta, nu, rho, 1.0]])
    w, U = jnp.linalg.eigh(G)
    B = U * jnp.sqrt(jnp.clip(w, 0.0))
    if dim > 4:
        B = jnp.concatenate([B, jnp.zeros((4, dim - 4))], axis=1)
    return B[0], B[1], B[2] / jnp.linalg.norm(B[2]), B[3] / jnp.linalg.norm(B[3])


def frame_vectors(kappa, nu, theta, eta, rho, *, dim: int = 4):
    """Vectors k*, v*, k, v in R^dim, each of shape (..., dim), with k*.k* = v*.v* = 1, k*.v* = 0 and
    the given overlaps (k.k*, v.v*, v.k*, k.v*, k.v) = (kappa, nu, theta, eta, rho).

    Construction: the rows of B = U sqrt(W) (G = U W U^T the eigendecomposition of the 4x4 Gram matrix
    G of (k*, v*, k, v)) have Gram matrix G; rows k, v are renormalised against round-off. Works for any
    realisable overlaps, degenerate ones included (e.g. the corner k = k*, v = v*); coordinates beyond
    the fourth are zero (``dim = 5`` leaves one direction orthogonal to all four, as the Riemannian
    Hessian needs). Overlaps within 1e-9 outside [-1, 1] (round-off) are clipped; overlaps that no
    unit vectors realise (an indefinite G) are not detected.
    """
    for name, val in zip(NAMES, (kappa, nu, theta, eta, rho)):
        check_interval(name, val, -1.0, 1.0, atol=1e-9)  # overlaps of unit vectors: allow round-off
    dim = check_int("dim", dim, lo=4)
    args = jnp.broadcast_arrays(*(jnp.clip(jnp.asarray(x, jnp.float64), -1.0, 1.0)
                                  for x in (kappa, nu, theta, eta, rho)))
    fn = jnp.vectorize(lambda *o: gram_vectors(*o, dim), signature="(),(),(),(),()->(n),(n),(n),(n)")
    return fn(*args)


def oracle_frame_vectors(kappa, nu, theta, eta, rho):
    """Unit k, v of R^4 with the five overlaps, written in the fixed frame (k*, v*, e3, e4) = the standard
    basis (so k* = e1, v* = e2): k = (kappa, eta, alpha, 0), v = (theta, nu, beta, sqrt(1 - theta^2 -
    nu^2 - beta^2)) with alpha = sqrt(1 - kappa^2 - eta^2) and beta = (rho - kappa theta - eta nu) / alpha
    (beta = 0 when alpha = 0). Scalars (NumPy); overlaps that no unit vectors realise are not detected."""
    for name, val in zip(NAMES, (kappa, nu, theta, eta, rho)):
        check_interval(name, val, -1.0, 1.0, atol=1e-9)
    alpha = np.sqrt(max(1 - kappa ** 2 - eta ** 2, 0.0))
    beta = (rho - kappa * theta - eta * nu) / alpha if alpha > 0 else 0.0
    return (np.array([kappa, eta, alpha, 0.0]),
            np.array([theta, nu, beta, np.sqrt(1 - theta ** 2 - nu ** 2 - beta ** 2)]))


def _abs_square(overlap):
    """|overlap| as float64, checked to have shape (..., H, H)."""
    A = np.abs(np.asarray(overlap, dtype=float))
    if A.ndim < 2 or A.shape[-1] != A.shape[-2]:
        raise ValueError(f"overlap must have shape (..., H, H), got {A.shape}")
    return A


def _best_permutation(A):
    """The permutation of the columns of A (..., H, H) maximising its trace: (..., H) indices; on a
    tie the first in lexicographic order (the identity first)."""
    H = A.shape[-1]
    perms = list(itertools.permutations(range(H)))
    traces = np.stack([sum(A[..., h, p[h]] for h in range(H)) for p in perms], axis=-1)
    return np.asarray(perms)[np.argmax(traces, axis=-1)]  # (..., H)


def matching(overlap):
    """Head matching from an overlap matrix <x_h, x*_j> of shape (..., H, H): P of shape (..., H), P[..., h]
    the oracle direction j matched to head h, under the one-to-one matching that maximises the sum of
    the matched |<x_h, x*_j>| (ties: the first permutation in lexicographic order, so the identity
    wins a tie). It is the matching of :func:`separation`: ``separation(o)[0]`` is
    ``np.take_along_axis(abs(o), matching(o)[..., None, :], -1)``. ValueError unless square."""
    return _best_permutation(_abs_square(overlap))


def separation(overlap):
    """Separation of heads from an overlap matrix <x_h, x*_j> of shape (..., H, H).

    Returns (A, score): A = |overlap| with its columns permuted to the best matching of heads to
    oracle directions (:func:`matching`: the permutation maximising the trace), and score = mean |diag|
    - mean |offdiag| of that matched matrix (1 for perfectly separated orthonormal heads; 0 when every
    head is equally aligned with every direction)."""
    A = _abs_square(overlap)
    H = A.shape[-1]
    P = _best_permutation(A)
    Am = np.take_along_axis(A, P[..., None, :], axis=-1)
    diag = np.trace(Am, axis1=-2, axis2=-1) / H
    off = (Am.sum(axis=(-1, -2)) - diag * H) / (H * (H - 1)) if H > 1 else 0.0
    return Am, diag - off
