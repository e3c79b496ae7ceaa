"""The single-location regression task (Section 2.1) and multiple-location regression (Eq. 30).

SLR(k_star, v_star): tokens X_1, ..., X_L in R^d; a latent location J0 drawn from p (uniform by
default); given J0 the tokens are independent with

    X_{J0} ~ N(sqrt(d/2) k_star, gamma^2 I_d),     X_l ~ N(0, I_d) for l != J0,

and the label is Y = X_{J0}^T v_star + xi with xi ~ N(0, eps^2). Here ``gamma`` is the standard
deviation of the informative token (the paper's experiments use gamma^2 = 1/2) and ``eps`` the noise
standard deviation. Locations are 0-based in code (the paper writes 1..L).
"""
from __future__ import annotations

import math
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from slr._threads import matrix_by_matrix
from slr._validate import (check_int, check_interval, check_key, check_nonneg, check_orthogonal, check_positive,
                           check_probs, check_unit)

__all__ = ["sample_oracle", "sample", "sample_oracle_multi", "sample_multi", "draws", "tie", "tie_tokens", "assemble",
           "orthonormal_frame", "norm_rule_rates", "argmax_failure", "oracle_at_angle", "normal"]


def normal(key, shape, dtype=jnp.float64):
    """``jax.random.normal(key, shape, dtype)``, the same numbers bit for bit, drawn as one flat vector
    and reshaped: JAX's counter-based generator numbers the entries by their flat index. On the book's
    CPU the flat draw of :func:`draws`' (n, L, d) normals was about three times faster; under ``vmap``
    (the block of draws of :func:`slr.reduced.multi_noise`) no difference was measured, so the other
    samplers keep ``jax.random.normal``. Traceable."""
    return jax.random.normal(key, (math.prod(shape),), dtype=dtype).reshape(shape)


#: QR one matrix at a time, vmapped or not (slr._threads.matrix_by_matrix: the same numbers): a batch of
#: oracles drawn under vmap (a Transformer run's setup) never hands jaxlib a batched QR, which it may split over
#: XLA's thread pool and deadlock when two programs run at once (experiments.run_many of Figures 8 and 10).
_qr = matrix_by_matrix(jnp.linalg.qr)


def orthonormal_frame(key, d: int, m: int):
    """``m`` orthonormal vectors of R^d, uniform (Haar) in distribution: an array of shape (m, d)."""
    check_key("key", key)
    d = check_int("d", d)
    m = check_int("m", m, lo=1, hi=d)
    g = jax.random.normal(key, (d, m), dtype=jnp.float64)
    q, r = _qr(g)
    q = q * jnp.sign(jnp.diag(r))  # Haar measure: fix the signs of the QR factorisation
    return q.T


def sample_oracle(key, d: int):
    """A pair (k_star, v_star) of orthonormal vectors of R^d, each uniform on the sphere S^{d-1}.

    Requires d >= 2 (two orthogonal unit vectors must exist).
    """
    check_key("key", key)
    check_int("d", d, lo=2)
    k_star, v_star = orthonormal_frame(key, d, 2)
    return k_star, v_star


def sample_oracle_multi(key, d: int, H: int):
    """H pairs (k_star_h, v_star_h): 2H mutually orthonormal vectors, as two arrays of shape (H, d)."""
    check_key("key", key)
    check_int("H", H, lo=1)
    check_int("d", d, lo=2 * H)
    frame = orthonormal_frame(key, d, 2 * H)
    return frame[:H], frame[H:]


def oracle_at_angle(key, d: int, phi, which: str = "k"):
    """Two-location oracles (Eq. 30, H = 2) with an angle ``phi`` (radians) between the two key
    directions (``which="k"``) or the two value directions (``which="v"``); every other pair of the
    four directions is orthogonal. From an orthonormal frame e1..e4 (:func:`orthonormal_frame`):
    k*_1 = e1, k*_2 = cos(phi) e1 + sin(phi) e2, v*_1 = e3, v*_2 = e4 (k and v swapped for ``which="v"``);
    phi = pi/2 is an orthonormal oracle. A scalar ``phi`` gives (k_stars, v_stars) of shape (2, d); an
    array of N angles gives N oracles, shape (N, 2, d), each from its own frame (keys split(key, N))."""
    check_key("key", key)
    d = check_int("d", d, lo=4)
    check_interval("phi", phi, 0.0, math.pi)
    if which not in ("k", "v"):
        raise ValueError(f"which must be 'k' or 'v', got {which!r}")
    phi = jnp.asarray(phi, dtype=jnp.float64)
    if phi.ndim > 1:
        raise ValueError(f"phi must be a scalar or an array of shape (N,), got shape {phi.shape}")
    frames = (orthonormal_frame(key, d, 4) if phi.ndim == 0 else
              jax.vmap(lambda k: orthonormal_frame(k, d, 4))(jax.random.split(key, phi.shape[0])))
    e = jnp.moveaxis(frames, -2, 0)  # (4, ..., d)
    c, s = jnp.cos(phi)[..., None], jnp.sin(phi)[..., None]
    a = jnp.stack([e[0], c * e[0] + s * e[1]], axis=-2)
    b = jnp.stack([e[2], e[3]], axis=-2)
    return (a, b) if which == "k" else (b, a)


def sample(key, n: int, k_star, v_star, *, L: int, gamma: float, eps: float = 0.0, p=None):
    """Draw ``n`` i.i.d. samples of SLR(k_star, v_star) (Section 2.1).

    Args:
        key: JAX PRNG key.
        n: number of sequences (>= 1).
        k_star, v_star: orthonormal vectors of shape (d,).
        L: number of tokens per sequence (>= 1).
        gamma: standard deviation of the informative token (> 0).
        eps: standard deviation of the label noise (>= 0).
        p: optional location probabilities of shape (L,); uniform when None.

    Returns:
        X of shape (n, L, d), y of shape (n,), J0 of shape (n,) (0-based locations).
    """
    check_key("key", key)
    n = check_int("n", n)
    L = check_int("L", L)
    check_positive("gamma", gamma)
    check_nonneg("eps", eps)
    check_unit("k_star", k_star)
    d = int(np.shape(k_star)[0])
    check_unit("v_star", v_star, d=d)
    check_orthogonal("k_star", k_star, "v_star", v_star)
    probs = None if p is None else jnp.asarray(check_probs("p", p, L))
    X, y, J = _sample(key, jnp.asarray(k_star)[None], jnp.asarray(v_star)[None], gamma, eps, probs, n=n, L=L, d=d,
                      H=1)
    return X, y, J[:, 0]


@partial(jax.jit, static_argnames=("n", "L", "d", "H"))
def _sample(key, k_stars, v_stars, gamma, eps, p, *, n, L, d, H):
    """:func:`assemble` of :func:`draws`, compiled once per (n, L, d, H): called outside a jit, the draws
    and the assembly are one program, not one per operation."""
    return assemble(draws(key, n, L=L, d=d, H=H, p=p), k_stars, v_stars, gamma=gamma, eps=eps)


def sample_multi(key, n: int, k_stars, v_stars, *, L: int, gamma: float, eps: float = 0.0):
    """Multiple-location regression (Appendix E.3, Eq. 30) with H = len(k_stars) heads.

    Y = sum_h X_{J_h}^T v_star_h + xi, the (J_1, ..., J_H) distinct and uniform over ordered tuples of
    distinct positions, X_{J_h} ~ N(sqrt(d/2) k_star_h, gamma^2 I), the other tokens N(0, I).

    Args:
        k_stars, v_stars: arrays of shape (H, d), all 2H rows mutually orthonormal.

    Returns:
        X of shape (n, L, d), y of shape (n,), J of shape (n, H).
    """
    check_key("key", key)
    n = check_int("n", n)
    k_stars = np.atleast_2d(np.asarray(k_stars, dtype=float))
    v_stars = np.atleast_2d(np.asarray(v_stars, dtype=float))
    if k_stars.shape != v_stars.shape:
        raise ValueError(f"k_stars and v_stars must have the same shape (H, d), got {k_stars.shape} and {v_stars.shape}")
    H, d = k_stars.shape
    L = check_int("L", L, lo=H)
    check_positive("gamma", gamma)
    check_nonneg("eps", eps)
    frame = np.concatenate([k_stars, v_stars])
    gram = frame @ frame.T
    if np.max(np.abs(gram - np.eye(2 * H))) > 1e-6:
        raise ValueError("k_stars and v_stars must be 2H mutually orthonormal vectors (rows)")
    return _sample(key, jnp.asarray(k_stars), jnp.asarray(v_stars), gamma, eps, None, n=n, L=L, d=d, H=H)


def draws(key, n: int, *, L: int, d: int, H: int = 1, p=None, dtype=jnp.float64):
    """The randomness of ``n`` samples of SLR (H = 1, Section 2.1) or of Eq. (30) (H >= 2), independent of
    the oracle: standard Gaussian tokens Z (n, L, d), the locations J (n, H), the informative tokens'
    noise G (n, H, d) and the label noise xi (n,).

    For H = 1 the location is uniform on 0..L-1 (or drawn from the probabilities ``p``, shape (L,));
    for H >= 2 the H locations are distinct, the first H entries of a uniform random permutation.
    Traceable (no checks: ``n``, ``L``, ``d``, ``H`` static): the one sampler body of the library.
    :func:`assemble` turns the draws into samples of a given oracle, so several runs with their own
    oracles can share one draw; :func:`sample` and :func:`sample_multi` are the checked entry points.
    """
    kx, kj, kg, kn = jax.random.split(key, 4)
    Z = normal(kx, (n, L, d), dtype=dtype)
    if H == 1:
        J = (jax.random.randint(kj, (n,), 0, L) if p is None
             else jax.random.choice(kj, L, (n,), p=p))[:, None]
    else:
        J = jnp.argsort(jax.random.uniform(kj, (n, L)), axis=1)[:, :H]
    G = normal(kg, (n, H, d), dtype=dtype)
    xi = jax.random.normal(kn, (n,), dtype=dtype)
    return Z, J, G, xi


def tie_tokens(G, n, shared):
    """The token draws G (B, L, ...) with the n informative tokens (positions 0..n-1) given token 0's
    draw when ``shared`` (a bool, traced or not): one noise source for them, as in the authors' code
    (Figures 9 and 10). Traceable, no checks."""
    return jnp.where(shared & (jnp.arange(G.shape[1]) < n)[:, None], G[:, :1], G)


def tie(dr, tied):
    """The draws of :func:`draws` with the informative tokens' noise shared when ``tied`` (a bool,
    traced or not): :func:`tie_tokens` on their noise G (B, n, d). Traceable, no checks."""
    Z, J, G, xi = dr
    if isinstance(tied, bool):  # static: the independent draws untouched (the same program as before)
        return (Z, J, jnp.broadcast_to(G[:, :1], G.shape), xi) if tied else dr
    return Z, J, tie_tokens(G, G.shape[1], tied), xi


def assemble(draws, k_stars, v_stars, *, gamma, eps, d=None):
    """Samples (X, y, J) for the oracle (k_stars, v_stars), shapes (H, r), from the output of
    :func:`draws`: X_{J_h} = sqrt(d/2) k_star_h + gamma G_h, y = sum_h X_{J_h}.v_star_h + eps xi.

    ``d`` is the ambient dimension (static), by default the tokens' length r = Z.shape[-1]. Draws of
    r < d coordinates are the tokens' coordinates in an orthonormal frame of a subspace of R^d that
    holds the oracle (as :mod:`slr.montecarlo` samples): the signal's mean keeps its norm sqrt(d/2).
    Traceable, no checks."""
    Z, J, G, xi = draws
    d = Z.shape[-1] if d is None else d
    signal = math.sqrt(d / 2.0) * k_stars[None].astype(G.dtype) + gamma * G
    X = Z.at[jnp.arange(Z.shape[0])[:, None], J].set(signal)
    v_stars = v_stars.astype(G.dtype)
    if J.shape[1] == 1:  # one location: a matrix-vector product (the same numbers as Section 2.1's y)
        y = signal[:, 0] @ v_stars[0] + eps * xi
    else:
        y = jnp.einsum("nhd,hd->n", signal, v_stars) + eps * xi
    return X, y, J


def norm_rule_rates(*, d: int, L: int, gamma: float):
    """Exact probabilities that two rules reading only the squared norms find J0 (uniform J0):
    ``(longest, closest)``, for "the longest token" and "the token whose squared norm is closest to d".

    Derivation. Given J0, the squared norms are independent: S_l = |X_l|^2 ~ chi2_d for l != J0
    (cdf F, density f), and S_0 = |X_{J0}|^2 = gamma^2 W with W noncentral chi2_d of noncentrality
    |sqrt(d/2) k*|^2 / gamma^2 = d / (2 gamma^2) (density f0(s) = f_W(s / gamma^2) / gamma^2). Ties have
    probability 0. Conditioning on S_0 = s, the L - 1 others must all lie below s (longest) or farther
    from d than |s - d| (closest), so

        longest = int f0(s) F(s)^(L-1) ds,   closest = int f0(s) (1 - F(d + |s-d|) + F(d - |s-d|))^(L-1) ds,

    two 1-D integrals computed by adaptive quadrature (relative accuracy about 1e-10).
    """
    from scipy import integrate, stats

    d, L = check_int("d", d), check_int("L", L)
    check_positive("gamma", gamma)
    g2 = float(gamma) ** 2
    sig = stats.ncx2(d, d / (2 * g2), scale=g2)
    noise = stats.chi2(d)
    lo, hi = max(sig.mean() - 40 * sig.std(), 0.0), sig.mean() + 40 * sig.std()

    def rate(tail):
        val, _ = integrate.quad(lambda s: sig.pdf(s) * tail(s) ** (L - 1), lo, hi, points=[d, sig.mean()],
                                limit=400, epsabs=0.0, epsrel=1e-11)
        return val

    longest = rate(noise.cdf)
    closest = rate(lambda s: noise.sf(d + abs(s - d)) + noise.cdf(d - abs(s - d)))
    return longest, closest


def argmax_failure(*, d, L: int, gamma: float):
    """Exact probability that the argmax of X_l^T k* misses J0: 1 - E_Z[Phi(sqrt(d/2) + gamma Z)^(L-1)].

    Given J0, X_{J0}^T k* = sqrt(d/2) + gamma Z and the L - 1 other projections are independent N(0, 1),
    each below it with probability Phi(sqrt(d/2) + gamma Z). The integrand is written
    -expm1((L-1) log Phi(.)) so that tiny probabilities keep their relative precision; adaptive
    quadrature over Z (relative accuracy about 1e-10). ``d`` may be an array."""
    from scipy import integrate, special

    L = check_int("L", L)
    check_positive("gamma", gamma)
    out = []
    for dd in np.atleast_1d(np.asarray(d, dtype=float)).ravel():
        if not dd >= 1:
            raise ValueError(f"d must be >= 1, got {dd!r}")
        mu = math.sqrt(dd / 2)
        f = lambda z: -math.expm1((L - 1) * special.log_ndtr(mu + gamma * z)) * math.exp(-z * z / 2)
        peak = -mu * gamma / (1 + gamma ** 2)            # where the integrand is largest
        val, _ = integrate.quad(f, -60.0, 60.0, points=[peak, 0.0], limit=400, epsabs=0.0, epsrel=1e-11)
        out.append(val / math.sqrt(2 * math.pi))
    return np.asarray(out).reshape(np.shape(d))[()]
