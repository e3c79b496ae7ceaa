"""Every predictor of the book, batched over the leading axes of ``X`` (shape (..., L, d)) -> (...).

Section 3 of the paper:

- Eq. (1) :func:`oracle_argmax`: ``X_{argmax_l X_l^T k_star}^T v_star``
- Eq. (2) :func:`attention_softmax`: ``sum_l softmax(lam X k)_l X_l^T v``
- Eq. (3) :func:`attention_erf`, the paper's operational model: ``sum_l erf(lam X_l^T k) X_l^T v``
- Eq. (4) :func:`attention_layer`: a single-head attention layer with matrices (its [CLS] row, Eq. (5),
  with p = o = 1 is :func:`attention_softmax`)
- Eq. (31) :func:`attention_multihead`: ``sum_h sum_l erf(lam X_l^T k_h) X_l^T v_h``, k, v of shape (H, d)

Other component-wise activations, with ``s_l = lam X_l^T k`` (the chapter on activations):

- :func:`attention_sigmoid`: ``sum_l tanh(2 s_l / sqrt(pi)) X_l^T v`` (the logistic sigmoid centred and
  rescaled, 2 sigma(4 s / sqrt(pi)) - 1: odd, values in (-1, 1), slope 2/sqrt(pi) at 0, like erf)
- :func:`attention_relu`: ``sum_l max(s_l, 0) X_l^T v`` (unbounded: no saturation)
- :func:`attention_linear`: ``sum_l s_l X_l^T v`` (linear attention: a quadratic form in X)

and :func:`bayes`, the Bayes predictor E[Y | X] of the task, the best predictor of all (risk eps^2 +
E Var(X_{J0}^T v_star | X)).

Every predictor of :data:`PREDICTORS` has the signature ``f(X, k, v, lam)``; ``lam`` (scalar or array that
broadcasts with the batch) must be finite and > 0 (``ValueError`` naming ``lam``; skipped under
``jax.jit`` / ``jax.grad`` / ``jax.vmap``, so the predictors stay traceable).
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax.scipy.special import erf

from slr._validate import check_positive_array

__all__ = ["oracle_argmax", "attention_softmax", "attention_erf", "attention_sigmoid", "attention_relu",
           "attention_linear", "attention_multihead", "attention_layer", "bayes", "PREDICTORS", "READS_PROJECTIONS",
           "get_predictor", "sum_of_heads"]

_SIGMOID_SCALE = 2.0 / math.sqrt(math.pi)


def _scores(X, k, v, lam):
    """(lam X k, X v) after the check of lam: two arrays of shape (..., L)."""
    check_positive_array("lam", lam)
    X = jnp.asarray(X)
    return lam * (X @ k), X @ v


def oracle_argmax(X, k_star, v_star, lam=None):
    """Eq. (1): X_J^T v_star with J = argmax_l X_l^T k_star.  X: (..., L, d) -> (...).

    ``lam`` is accepted (and checked when given) so that the signature is that of :data:`PREDICTORS`;
    the predictor does not depend on it (it is the limit lam -> infinity of Eq. (2))."""
    if lam is not None:
        check_positive_array("lam", lam)
    X = jnp.asarray(X)
    j = jnp.argmax(X @ k_star, axis=-1)
    return jnp.take_along_axis(X @ v_star, j[..., None], axis=-1)[..., 0]


def attention_softmax(X, k, v, lam):
    """Eq. (2): T_lam^soft(X) = sum_l softmax_l(lam X k) X_l^T v.  X: (..., L, d) -> (...)."""
    s, xv = _scores(X, k, v, lam)
    return jnp.sum(jax.nn.softmax(s, axis=-1) * xv, axis=-1)


def attention_erf(X, k, v, lam):
    """Eq. (3): T_lam(X) = sum_l erf(lam X_l^T k) X_l^T v.  X: (..., L, d) -> (...)."""
    s, xv = _scores(X, k, v, lam)
    return jnp.sum(erf(s) * xv, axis=-1)


def attention_sigmoid(X, k, v, lam):
    """sum_l tanh(2 lam X_l^T k / sqrt(pi)) X_l^T v: a centred logistic sigmoid matched to erf at 0.

    tanh(2x/sqrt(pi)) = 2 sigma(4x/sqrt(pi)) - 1 has the range and the slope at the origin of erf; it
    differs in its tails (exponential instead of Gaussian)."""
    check_positive_array("lam", lam)
    s, xv = _scores(X, k, v, _SIGMOID_SCALE * lam)  # (scale * lam) X k: the association of 9be0e2e
    return jnp.sum(jnp.tanh(s) * xv, axis=-1)


def attention_relu(X, k, v, lam):
    """sum_l max(lam X_l^T k, 0) X_l^T v (ReLU attention).  X: (..., L, d) -> (...)."""
    s, xv = _scores(X, k, v, lam)
    return jnp.sum(jax.nn.relu(s) * xv, axis=-1)


def attention_linear(X, k, v, lam):
    """lam sum_l (X_l^T k)(X_l^T v) (linear attention, identity activation).  X: (..., L, d) -> (...)."""
    check_positive_array("lam", lam)
    X = jnp.asarray(X)
    return lam * jnp.sum((X @ k) * (X @ v), axis=-1)


def attention_layer(H_query, H_key, W_Q, W_K, W_V, W_O, lam):
    """Single-head attention (Eq. 4) with matrices: softmax(lam (H_q W_Q)(H_k W_K)^T) (H_k W_V) W_O.

    H_query: (..., m, d) the querying tokens; H_key: (..., L, d) the attended tokens (self-attention,
    Eq. 4, is H_query = H_key = X). W_Q, W_K, W_V: (d, p); W_O: (p, o). Returns (..., m, o). The
    softmax is taken row by row; no checks (traceable)."""
    scores = lam * (H_query @ W_Q) @ jnp.swapaxes(H_key @ W_K, -1, -2)     # (..., m, L)
    return jax.nn.softmax(scores, axis=-1) @ (H_key @ W_V) @ W_O


def attention_multihead(X, k, v, lam):
    """Eq. (31): sum_h sum_l erf(lam X_l^T k_h) X_l^T v_h.  X: (..., L, d); k, v: (H, d) -> (...).

    For H = 1 it is :func:`attention_erf` (Eq. 3)."""
    check_positive_array("lam", lam)
    X = jnp.asarray(X)
    k = jnp.atleast_2d(jnp.asarray(k))
    v = jnp.atleast_2d(jnp.asarray(v))
    if k.shape != v.shape:
        raise ValueError(f"k and v must have the same shape (H, d), got {k.shape} and {v.shape}")
    if X.shape[-1] != k.shape[-1]:
        raise ValueError(f"X must have last dimension d={k.shape[-1]}, got shape {X.shape}")
    return jnp.sum(erf(lam * (X @ k.T)) * (X @ v.T), axis=(-1, -2))


attention_multihead.heads = True  # k and v are (H, d): slr.montecarlo reads one point as two axes


def bayes(X, k_star, v_star, *, gamma, p=None):
    """The Bayes predictor E[Y | X] of SLR(k_star, v_star) (Section 2.1): a softmax attention.

    Derivation. Given J0 = l the tokens are independent, X_l ~ N(mu, gamma^2 I_d) with
    mu = sqrt(d/2) k_star and X_m ~ N(0, I_d) for m != l. By Bayes' rule
    P(J0 = l | X) is proportional to p_l N(X_l; mu, gamma^2 I) / N(X_l; 0, I) (the other factors are
    common to every l), whose logarithm is, up to a constant independent of l,

        s_l = log p_l + sqrt(d/2) X_l^T k_star / gamma^2 + (1 - 1/gamma^2) |X_l|^2 / 2.

    Since E[Y | X, J0 = l] = X_l^T v_star (the noise xi is centred and independent of X),

        E[Y | X] = sum_l softmax_l(s) X_l^T v_star,

    Eq. (2) with key k_star at lam = sqrt(d/2) / gamma^2 plus a quadratic score (absent when gamma = 1,
    where this is exactly ``attention_softmax(X, k_star, v_star, sqrt(d/2))``). Its risk is
    eps^2 + E[Var(X_{J0}^T v_star | X)] >= eps^2, the smallest of all predictors.

    The score reads |X_l|^2, every coordinate of the tokens: a Monte Carlo risk must sample it in the
    full dimension (``slr.montecarlo.risk(..., reduce=False)``). X: (..., L, d); p: location
    probabilities of shape (L,), uniform when None. Traceable; ``gamma`` must be > 0.
    """
    check_positive_array("gamma", gamma)
    X = jnp.asarray(X)
    d = X.shape[-1]
    s = (math.sqrt(d / 2) * (X @ k_star) / gamma ** 2
         + 0.5 * (1 - 1 / gamma ** 2) * jnp.sum(X ** 2, axis=-1))
    if p is not None:
        s = s + jnp.log(jnp.asarray(p))
    return jnp.sum(jax.nn.softmax(s, axis=-1) * (X @ v_star), axis=-1)


#: The attention predictors ``f(X, k, v, lam)`` by name ("argmax" ignores lam).
PREDICTORS = {
    "erf": attention_erf,
    "sigmoid": attention_sigmoid,
    "relu": attention_relu,
    "softmax": attention_softmax,
    "linear": attention_linear,
    "multihead": attention_multihead,
    "argmax": oracle_argmax,
}


#: Predictors that read the tokens only through X k and X v (the reduced sampler of :mod:`slr.reduced`
#: applies to one head of each).
READS_PROJECTIONS = (attention_erf, attention_sigmoid, attention_relu, attention_softmax, attention_linear)


def sum_of_heads(f, X, k, v, lam):
    """The model of H heads, sum_h f(X, k_h, v_h, lam) (Eq. 31 for erf), for heads k, v of shape (H, d);
    a predictor that reads all heads at once (``f.heads``, e.g. :func:`attention_multihead`) is called
    as is. Traceable."""
    if getattr(f, "heads", False):
        return f(X, k, v, lam)
    return sum((f(X, k[h], v[h], lam) for h in range(1, k.shape[0])), f(X, k[0], v[0], lam))  # in order


def get_predictor(activation, name="activation"):
    """The predictor ``f(X, k, v, lam)`` named ``activation`` (a key of :data:`PREDICTORS`), or a callable
    as is; else ValueError naming the argument ``name``."""
    if callable(activation):
        return activation
    if not isinstance(activation, str) or activation not in PREDICTORS:
        raise ValueError(f"{name} must be one of {sorted(PREDICTORS)} or a callable, got {activation!r}")
    return PREDICTORS[activation]
