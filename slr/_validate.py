"""Argument checks shared by the public functions of :mod:`slr`.

Each check raises ``ValueError`` naming the argument, its value and the accepted range. Checks are
skipped for abstract (traced) values, so public functions stay usable under ``jax.jit``; the exception is
:func:`check_finite`, for numbers that must be concrete (the statistics of :mod:`slr.stats`), which
raises on a traced value.
"""
from __future__ import annotations

import math
import numbers

import numpy as np
from jax.core import Tracer

__all__ = [
    "check_int", "check_positive", "check_nonneg", "check_interval", "check_open_interval", "check_unit",
    "check_orthogonal", "check_key", "is_traced",
    "check_lam", "check_run", "check_unit_rows", "check_positive_array", "check_probs", "check_oracle",
    "check_vectors", "check_float_dtype",
    "check_per_run", "check_finite", "as_float_array", "check_risk_args", "check_text",
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


def check_finite(name: str, value) -> float:
    """``value`` as a finite float (a real scalar, not traced); ValueError naming ``name`` otherwise."""
    x = _scalar(name, value)
    if x is None:
        raise ValueError(f"{name} must be a concrete number, got a traced value")
    return x


def check_text(name: str, value) -> str:
    """``value`` if it is a string with a non-blank character; ValueError naming ``name`` otherwise."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{name} must be a non-empty string, got {value!r}")
    return value


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


def check_open_interval(name: str, value, lo: float, hi: float) -> float:
    """A finite scalar in the open interval (lo, hi) (NaN fails)."""
    if not lo < value < hi:
        raise ValueError(f"{name} must be in ({lo:g}, {hi:g}), got {value!r}")
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


# ----------------------------------------------------------------------------------------------
# checks shared by the dynamics modules (pgd, sgd, manifold)


def check_lam(lam, steps: int):
    """lam: a float > 0, or a traceable callable step -> lam positive and finite on 0..steps."""
    if callable(lam):
        import jax.numpy as jnp

        t = np.arange(steps + 1, dtype=float)
        try:
            vals = np.asarray(lam(jnp.asarray(t)), dtype=float)
        except Exception as exc:  # noqa: BLE001 - report any failure of the user's schedule
            raise ValueError(f"lam must be a float > 0 or a traceable callable step -> lam, calling it "
                             f"on an array of steps failed: {exc}") from None
        vals = np.broadcast_to(vals, t.shape)
        bad = ~(np.isfinite(vals) & (vals > 0))
        if np.any(bad):
            i = int(np.argmax(bad))
            raise ValueError(f"lam(t) must be > 0 and finite for t in [0, {steps}], got lam({i}) = {vals[i]!r}")
        return lam
    check_positive("lam", lam)
    return float(lam)


def check_run(*, alpha=None, steps=None, gamma=None, L=None, eps=None, log_every=None, d=None):
    """The scalar arguments of a PGD/SGD run (each checked only when given)."""
    checks = (("alpha", alpha, check_positive), ("gamma", gamma, check_positive), ("eps", eps, check_nonneg),
              ("steps", steps, check_int), ("L", L, check_int), ("log_every", log_every, check_int))
    for name, value, check in checks:
        if value is not None:
            check(name, value)  # check_int: lo = 1
    if d is not None:
        check_positive("d", d)
        if float(d) < 1:
            raise ValueError(f"d must be >= 1, got {d!r}")


def check_unit_rows(name: str, x, d: int | None = None, tol: float = 1e-6, max_ndim: int | None = 2):
    """A finite array of shape (d,) or (R, d) (any (..., d) when ``max_ndim`` is None) whose rows have
    unit norm; returned as a NumPy array (a traced value is returned as is, unchecked)."""
    if is_traced(x):
        return x
    arr = np.asarray(x, dtype=float)
    if arr.ndim == 0 or (max_ndim is not None and arr.ndim > max_ndim):
        shapes = "(d,) or (R, d)" if max_ndim == 2 else "(..., d)"
        raise ValueError(f"{name} must have shape {shapes}, got shape {arr.shape}")
    if d is not None and arr.shape[-1] != d:
        raise ValueError(f"{name} must have length d={d} (the length of k_star), got {arr.shape[-1]}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite")
    norms = np.linalg.norm(arr, axis=-1)
    if np.any(np.abs(norms - 1.0) > tol):
        bad = norms.ravel()[np.argmax(np.abs(norms - 1.0).ravel())]
        raise ValueError(f"{name} must have unit norm (|norm - 1| <= {tol}), got norm {bad!r}")
    return arr


def check_heads(k0, v0, k_stars, v_stars):
    """Runs of heads and their oracles (:func:`slr.sgd.train`): unit rows k0, v0 of one shape (R, H, d),
    and k_stars, v_stars of one shape (n_loc, d) (shared) or (R, n_loc, d) (one oracle per run); returned
    as NumPy arrays (k0, v0, k_stars, v_stars)."""
    def rows(name, x, d=None):
        arr = check_unit_rows(name, x, d, max_ndim=3)
        if arr.ndim < 2:
            shape = "(R, H, d)" if name in ("k0", "v0") else "(n_loc, d) or (R, n_loc, d)"
            raise ValueError(f"{name} must have shape {shape}, got shape {arr.shape}")
        return arr
    k0, v0 = rows("k0", k0), rows("v0", v0)
    if k0.ndim != 3 or k0.shape != v0.shape:
        raise ValueError(f"k0 and v0 must have one shape (R, H, d), got {k0.shape} and {v0.shape}")
    R, _, d = k0.shape
    ks, vs = rows("k_stars", k_stars, d), rows("v_stars", v_stars, d)
    if ks.shape != vs.shape or (ks.ndim == 3 and ks.shape[0] != R):
        raise ValueError(f"k_stars and v_stars must have one shape (n_loc, d) or (R, n_loc, d) with R={R}, "
                         f"got {ks.shape} and {vs.shape}")
    return k0, v0, ks, vs


def check_oracle(k_star, v_star):
    """Orthonormal vectors k_star, v_star of shape (d,): returns (k_star, v_star, d) as NumPy."""
    ks = np.asarray(k_star, dtype=float)
    if ks.ndim != 1:
        raise ValueError(f"k_star must be a vector of shape (d,), got shape {ks.shape}")
    d = ks.shape[0]
    check_unit_rows("k_star", ks)
    vs = check_unit_rows("v_star", v_star, d)
    if vs.ndim != 1:
        raise ValueError(f"v_star must be a vector of shape (d,), got shape {vs.shape}")
    check_orthogonal("k_star", ks, "v_star", vs)
    return ks, vs, d


def check_vectors(k0, v0, k_star, v_star):
    """Unit k0, v0 of shape (d,) or (R, d) and an orthonormal oracle: (k0, v0, k_star, v_star, d)."""
    ks, vs, d = check_oracle(k_star, v_star)
    k0 = check_unit_rows("k0", k0, d)
    v0 = check_unit_rows("v0", v0, d)
    if k0.shape != v0.shape:
        raise ValueError(f"k0 and v0 must have the same shape, got {k0.shape} and {v0.shape}")
    return k0, v0, ks, vs, d


def check_float_dtype(dtype):
    """jnp.float32 or jnp.float64, returned as a jnp.dtype."""
    import jax.numpy as jnp

    dt = jnp.dtype(dtype)
    if dt not in (jnp.dtype(jnp.float32), jnp.dtype(jnp.float64)):
        raise ValueError(f"dtype must be jnp.float32 or jnp.float64, got {dtype!r}")
    return dt


def check_per_run(name: str, value, n: int, *, lo: float = 0.0, strict: bool = True):
    """A scalar or an array broadcasting to shape (n,), every entry finite and > lo (>= lo when
    ``strict`` is False); returned as a NumPy array of shape (n,)."""
    try:
        arr = np.broadcast_to(np.asarray(value, dtype=float), (n,))
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a scalar or an array of shape ({n},), got {value!r}") from None
    bad = ~np.isfinite(arr) | ((arr <= lo) if strict else (arr < lo))
    if np.any(bad):
        raise ValueError(f"{name} must be {'>' if strict else '>='} {lo} and finite, got {arr[np.argmax(bad)]!r}")
    return np.array(arr)


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


def as_float_array(name, val, accepted):
    """``val`` as a float array; ValueError naming ``name`` and what is ``accepted`` if it is not one."""
    try:
        return np.asarray(val, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be {accepted}, got {val!r}") from None


def check_risk_args(lam, gamma, d, L, eps):
    """The arguments every closed-form risk shares: lam and gamma > 0 (arrays allowed), eps >= 0, d >= 1
    (None: not used) and L an integer >= 1; traced values (inside jit) are not checked."""
    check_positive_array("lam", lam)
    check_positive_array("gamma", gamma)
    if not is_traced(eps):
        arr = as_float_array("eps", eps, ">= 0 and finite")
        if not np.all(np.isfinite(arr)) or np.any(arr < 0):
            raise ValueError(f"eps must be >= 0 and finite, got {eps!r}")
    if d is not None and not is_traced(d):
        arr = as_float_array("d", d, "a finite number >= 1")
        if (not np.all(np.isfinite(arr)) or np.any(arr < 1) or isinstance(d, (bool, np.bool_))
                or np.asarray(d).dtype == bool):
            raise ValueError(f"d must be a finite number >= 1, got {d!r}")
    if not is_traced(L):
        farr = as_float_array("L", L, "an integer >= 1")
        if (not np.all(np.isfinite(farr)) or np.any(farr < 1) or np.any(farr != np.round(farr))
                or np.asarray(L).dtype == bool):
            raise ValueError(f"L must be an integer >= 1, got {L!r}")
