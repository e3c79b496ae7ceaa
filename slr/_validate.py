"""Argument checks shared by the public functions of :mod:`slr`.

Each check raises ``ValueError`` naming the argument, its value and the accepted range. Checks are
skipped for abstract (traced) values, so public functions stay usable under ``jax.jit``.
"""
from __future__ import annotations

import math
import numbers

import numpy as np
from jax.core import Tracer

__all__ = [
    "check_int", "check_positive", "check_nonneg", "check_interval", "check_unit",
    "check_orthogonal", "check_key", "is_traced",
]


def is_traced(x) -> bool:
    return isinstance(x, Tracer)


def _scalar(name, value):
    if is_traced(value):
        return None
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a real number, got {value!r}") from None
    if arr.ndim != 0:
        raise ValueError(f"{name} must be a scalar, got an array of shape {arr.shape}")
    x = float(arr)
    if not math.isfinite(x):
        raise ValueError(f"{name} must be finite, got {x!r}")
    return x


def check_int(name: str, value, lo: int = 1, hi: int | None = None) -> int:
    """An integer in [lo, hi] (hi=None: no upper bound). Booleans and non-integral floats are refused."""
    ok = isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if not ok and isinstance(value, (float, np.floating)) and float(value).is_integer():
        ok = False  # 10.0 is not accepted where an integer count is expected
    if not ok:
        raise ValueError(f"{name} must be an integer >= {lo}, got {value!r}")
    if value < lo or (hi is not None and value > hi):
        rng = f">= {lo}" if hi is None else f"in [{lo}, {hi}]"
        raise ValueError(f"{name} must be an integer {rng}, got {value!r}")
    return int(value)


def check_positive(name: str, value):
    x = _scalar(name, value)
    if x is not None and not x > 0:
        raise ValueError(f"{name} must be > 0, got {x!r}")
    return value


def check_nonneg(name: str, value):
    x = _scalar(name, value)
    if x is not None and not x >= 0:
        raise ValueError(f"{name} must be >= 0, got {x!r}")
    return value


def check_interval(name: str, value, lo: float, hi: float, atol: float = 0.0):
    """Every entry of ``value`` (scalar or array) in the closed interval [lo, hi] (widened by ``atol``
    for round-off), all finite."""
    if is_traced(value):
        return value
    arr = np.asarray(value, dtype=float)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite and in [{lo}, {hi}], got {value!r}")
    if np.any(arr < lo - atol) or np.any(arr > hi + atol):
        bad = arr[(arr < lo - atol) | (arr > hi + atol)].ravel()[0]
        raise ValueError(f"{name} must be in [{lo}, {hi}], got {bad!r}")
    return value


def _vector(name, value, d=None):
    arr = np.asarray(value, dtype=float)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a vector of shape (d,), got shape {arr.shape}")
    if d is not None and arr.shape[0] != d:
        raise ValueError(f"{name} must have length d={d}, got length {arr.shape[0]}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite")
    return arr


def check_unit(name: str, value, d: int | None = None, tol: float = 1e-6):
    """A finite vector of shape (d,) with unit Euclidean norm (within ``tol``)."""
    if is_traced(value):
        return value
    arr = _vector(name, value, d)
    norm = float(np.linalg.norm(arr))
    if abs(norm - 1.0) > tol:
        raise ValueError(f"{name} must have unit norm (|norm - 1| <= {tol}), got norm {norm!r}")
    return value


def check_orthogonal(name_a: str, a, name_b: str, b, tol: float = 1e-6):
    """<a, b> within ``tol`` of zero."""
    if is_traced(a) or is_traced(b):
        return
    ip = float(np.dot(np.asarray(a, float), np.asarray(b, float)))
    if abs(ip) > tol:
        raise ValueError(f"{name_a} and {name_b} must be orthogonal (|<{name_a}, {name_b}>| <= {tol}), got {ip!r}")


def check_key(name: str, key):
    """A JAX PRNG key (new-style typed key or legacy uint32 pair)."""
    if is_traced(key):
        return key
    import jax
    import jax.numpy as jnp

    if hasattr(key, "dtype") and jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        return key
    arr = np.asarray(key)
    if arr.shape != (2,) or arr.dtype != np.uint32:
        raise ValueError(f"{name} must be a JAX PRNG key (jax.random.key(seed) or PRNGKey(seed)), got {key!r}")
    return key


# --- arrays: parameters that broadcast (lam grids), probabilities, rows of unit vectors ---------------

def check_positive_array(name: str, value):
    """Every entry of ``value`` (scalar or array) a finite real > 0; skipped for traced values."""
    if not is_traced(value):
        entries = np.asarray(value, dtype=object).ravel()
        if not all(isinstance(x, numbers.Real) and math.isfinite(x) and x > 0 for x in entries):
            raise ValueError(f"{name} must be > 0 and finite, got {value!r}")
    return value


def check_probs(name: str, value, L: int):
    """A probability vector of shape (L,): entries in [0, 1] summing to 1 (within 1e-9)."""
    p = np.asarray(value, dtype=float)
    if p.shape != (L,):
        raise ValueError(f"{name} must have shape (L,) = ({L},), got shape {p.shape}")
    check_interval(name, p, 0.0, 1.0)
    if abs(p.sum() - 1.0) > 1e-9:
        raise ValueError(f"{name} must sum to 1, got sum {p.sum()!r}")
    return p


def check_unit_rows(name: str, value, d: int | None = None, tol: float = 1e-6):
    """A finite array of shape (..., d) whose rows have unit norm (within ``tol``)."""
    if is_traced(value):
        return value
    arr = np.asarray(value, dtype=float)
    if arr.ndim == 0 or (d is not None and arr.shape[-1] != d) or not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite rows of length d={d}, got shape {arr.shape}")
    norms = np.linalg.norm(arr, axis=-1)
    if np.any(np.abs(norms - 1.0) > tol):
        bad = norms[np.abs(norms - 1.0) > tol].ravel()[0]
        raise ValueError(f"{name} must have rows of unit norm (|norm - 1| <= {tol}), got norm {float(bad)!r}")
    return value
