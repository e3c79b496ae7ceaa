"""The predictors of Section 3, batched over the leading axis of ``X`` (shape (..., L, d)).

- Eq. (1) oracle argmax: ``X_{argmax_l X_l^T k_star}^T v_star``
- Eq. (2) softmax relaxation: ``sum_l softmax(lam X k)_l X_l^T v``
- Eq. (3) the erf predictor, the paper's operational model: ``sum_l erf(lam X_l^T k) X_l^T v``
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import erf

from slr._validate import is_traced

__all__ = ["attention_erf", "attention_softmax", "oracle_argmax"]


def _check_lam(lam):
    """lam (scalar or array) finite and > 0; skipped for traced values (jit, grad, vmap)."""
    if is_traced(lam):
        return
    try:
        arr = np.asarray(lam, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"lam must be > 0 and finite, got {lam!r}") from None
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ValueError(f"lam must be > 0 and finite, got {lam!r}")


def attention_erf(X, k, v, lam):
    """Eq. (3): T_lam(X) = sum_l erf(lam X_l^T k) X_l^T v.  X: (..., L, d) -> (...)."""
    _check_lam(lam)
    X = jnp.asarray(X)
    return jnp.sum(erf(lam * (X @ k)) * (X @ v), axis=-1)


def attention_softmax(X, k, v, lam):
    """Eq. (2): T_lam^soft(X) = sum_l softmax_l(lam X k) X_l^T v.  X: (..., L, d) -> (...)."""
    _check_lam(lam)
    X = jnp.asarray(X)
    return jnp.sum(jax.nn.softmax(lam * (X @ k), axis=-1) * (X @ v), axis=-1)


def oracle_argmax(X, k_star, v_star):
    """Eq. (1): X_{J}^T v_star with J = argmax_l X_l^T k_star.  X: (..., L, d) -> (...)."""
    X = jnp.asarray(X)
    j = jnp.argmax(X @ k_star, axis=-1)
    return jnp.take_along_axis(X @ v_star, j[..., None], axis=-1)[..., 0]
