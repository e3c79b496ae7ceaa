"""slr.cache: the key is complete (config, code, versions), arrays never collide, results are bit-identical."""
import dataclasses
import importlib
import os
import sys

import jax
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

from slr import cache, experiments as E


def key(config, compute=None):
    return cache.cache_key("result", config, compute)


# --- configurations ------------------------------------------------------------------------------
def _changed(value):
    """A different value of the same kind."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value * 2 + 1
    if isinstance(value, str):
        return value + "x"
    if value is None:
        return 1
    if isinstance(value, tuple):
        return value + (1,)
    raise AssertionError(type(value))


def test_every_field_of_a_config_changes_the_key():
    for name in ("fig4a", "fig5", "fig7b"):
        cfg = E.config(name)
        k0 = key(cfg)
        assert k0 == key(E.config(name))                       # deterministic
        for f in dataclasses.fields(cfg):
            other = dataclasses.replace(cfg, **{f.name: _changed(getattr(cfg, f.name))})
            assert key(other) != k0, (name, f.name)


def test_key_changes_with_config():
    base = dataclasses.asdict(E.config("fig4a"))
    k0 = key(dict(base, seed=0))
    assert k0 == key(dict(base, seed=0))
    assert k0 != key(dict(base, seed=1))
    assert k0 != key(dict(dataclasses.asdict(E.config("fig4a", steps=2000)), seed=0))


def test_types_are_part_of_the_key():
    # 1 == 1.0 == True in Python, but a JAX computation treats them differently (weak types, dtypes)
    keys = {key(v) for v in (1, 1.0, True, np.float64(1.0), np.float32(1.0), np.int64(1), "1", (1,), [1])}
    assert len(keys) == 9
    assert key(0.0) != key(-0.0) and key(float("nan")) == key(float("nan"))


json_like = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=10)


@settings(max_examples=150, deadline=None)
@given(json_like, json_like)
def test_distinct_plain_configs_have_distinct_keys(a, b):
    def norm(x):      # the value with its type at every level, dicts in key order (repr tells 1.0 from 1)
        if isinstance(x, dict):
            return ("dict", sorted((k, norm(v)) for k, v in x.items()))
        if isinstance(x, list):
            return ("list", [norm(v) for v in x])
        return (type(x).__name__, repr(x))

    assert (cache.canonical(a) == cache.canonical(b)) == (norm(a) == norm(b))


# --- arrays --------------------------------------------------------------------------------------
def test_arrays_with_the_same_truncated_repr_differ():
    a = np.zeros(5000)
    b = a.copy()
    b[2500] = 1.0
    assert repr(a) == repr(b)                                  # numpy elides the middle
    assert key({"x": a}) != key({"x": b})
    assert key({"x": a}) == key({"x": a.copy()})
    assert key({"x": jax.numpy.asarray(b)}) == key({"x": b})   # a jax array keys as its values


def test_arrays_differing_only_in_dtype_or_shape_differ():
    z = [np.zeros(4, np.float64), np.zeros(8, np.float32), np.zeros(32, np.uint8), np.zeros((2, 2)),
         np.zeros((4, 1)), np.zeros(4, np.int64), np.zeros(4, ">f8")]
    assert len({z_.tobytes() for z_ in z}) == 1                # the same 32 bytes
    assert len({key(z_) for z_ in z}) == len(z)


@settings(max_examples=100, deadline=None)
@given(hnp.arrays(st.sampled_from([np.float64, np.float32, np.int32, np.bool_]), hnp.array_shapes(max_dims=3, max_side=4)),
       hnp.arrays(st.sampled_from([np.float64, np.float32, np.int32, np.bool_]), hnp.array_shapes(max_dims=3, max_side=4)))
def test_two_different_arrays_never_share_a_key(a, b):
    same = a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    assert (cache.canonical(a) == cache.canonical(b)) == same


def test_prng_keys_key_by_their_data():
    k0, k1 = jax.random.key(0), jax.random.key(1)
    assert key(k0) != key(k1) and key(k0) == key(jax.random.key(0))
    assert key(k0) != key(jax.random.PRNGKey(0))               # typed key vs raw uint32 key
    assert key(jax.random.PRNGKey(0)) != key(jax.random.PRNGKey(1))


# --- callables -----------------------------------------------------------------------------------
def module_level(x):
    return x + 1


class Holder:
    def method(self):
        return 0


def test_lambdas_closures_and_methods_are_refused():
    def local(x):
        return x

    class Callable:
        def __call__(self):
            return 0

    for bad in (lambda x: x, local, Holder().method, Callable()):
        with pytest.raises(ValueError, match="module-level"):
            key({"f": bad})
    with pytest.raises(ValueError, match="object"):
        key(np.array([object()]))


def test_module_level_functions_key_by_name_and_source():
    assert key({"f": module_level}) == key({"f": module_level})
    assert key({"f": module_level}) != key({"f": np.sin})
    assert key({"f": np.sin}) != key({"f": np.cos})


def _write(path, body):
    path.write_text(body)
    os.utime(path, (1e9, 1e9 + len(body)))                    # a fresh mtime even within one second


def test_the_compute_functions_source_and_globals_change_the_key(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    mod = tmp_path / "slr_cache_probe_mod.py"
    _write(mod, "import numpy as np\nG = 1\n\ndef helper():\n    return G\n\n"
                "def compute():\n    return {'x': np.array(helper())}\n")
    m = importlib.import_module("slr_cache_probe_mod")
    try:
        k0 = key({}, m.compute)
        assert k0 == key({}, m.compute)
        monkeypatch.setattr(m, "G", 2)                         # a module-level value read by a helper
        assert key({}, m.compute) != k0
        monkeypatch.undo()
        monkeypatch.syspath_prepend(str(tmp_path))
        assert key({}, m.compute) == k0
        _write(mod, "import numpy as np\nG = 1\n\ndef helper():\n    return G + 0\n\n"
                    "def compute():\n    return {'x': np.array(helper())}\n")
        importlib.reload(m)
        assert key({}, m.compute) != k0                        # the helper's source changed
    finally:
        sys.modules.pop("slr_cache_probe_mod", None)
    # lambdas given as compute (the older memoize form) key by their source and what they read
    n = 3
    assert key({}, lambda: module_level(1)) != key({}, lambda: module_level(2))
    k_n = key({}, lambda: module_level(n))
    n = 4
    assert key({}, lambda: module_level(n)) != k_n


@pytest.mark.parametrize("lib", ["python", "jax", "jaxlib", "numpy", "slr"])
def test_a_library_version_changes_the_key(monkeypatch, lib):
    k0 = key({"a": 1})
    versions = dict(cache.library_versions())
    monkeypatch.setattr(cache, "library_versions", lambda: dict(versions, **{lib: versions[lib] + ".post1"}))
    assert key({"a": 1}) != k0


def test_the_slr_modules_in_the_key():
    assert cache.covered_modules() == sorted(set(cache.covered_modules()))
    probe_mods = cache.covered_modules(["probe"])
    assert {"probe", "_validate", "cache", "__init__"} <= set(probe_mods)    # probe imports _validate
    assert "dynamics" not in probe_mods
    assert cache.code_hash(["probe"]) != cache.code_hash()
    with pytest.raises(ValueError, match="nosuchmodule"):
        cache.code_hash(["nosuchmodule"])


# --- memoisation ---------------------------------------------------------------------------------
CALLS = []


@cache.memoized
def draws(seed, n=4, *, scale=1.0, dtype="float64"):
    CALLS.append(seed)
    x = np.asarray(jax.random.normal(jax.random.key(seed), (n,), dtype=dtype)) * scale
    return {"x": x, "n": np.int64(n)}


def test_memoized_keys_on_all_bound_arguments(result_cache):
    CALLS.clear()
    first = draws(0)
    assert draws(0, 4, scale=1.0)["x"].tobytes() == first["x"].tobytes()    # defaults applied: a hit
    assert len(list(result_cache.glob("*.npz"))) == 1 and CALLS == [0]
    for variant in (dict(seed=1), dict(seed=0, n=5), dict(seed=0, scale=2.0), dict(seed=0, dtype="float32")):
        draws(**variant)
    assert len(list(result_cache.glob("*.npz"))) == 5 and len(CALLS) == 5
    fresh = draws(0, use_cache=False)
    env = dict(os.environ)
    with cache.bypass():
        bypassed = draws(0)
        assert not cache.enabled()
    assert cache.enabled() and dict(os.environ) == env
    assert len(CALLS) == 7 and len(list(result_cache.glob("*.npz"))) == 5
    again = draws(0)
    for other in (fresh, bypassed, again):
        assert other["x"].dtype == first["x"].dtype
        np.testing.assert_array_equal(other["x"], first["x"])
    with pytest.raises(ValueError, match="module-level"):
        draws(lambda: 0)


def test_memoize_bit_identical(result_cache):
    kw = dict(steps=400, repeats=3, log_every=10)
    first = E.run("fig7b", **kw)            # computed, then stored
    assert len(list(result_cache.glob("*.npz"))) == 1
    second = E.run("fig7b", **kw)           # read back from disk
    with cache.bypass():
        fresh = E.run("fig7b", **kw)        # recomputed, the cache bypassed
    assert len(list(result_cache.glob("*.npz"))) == 1
    for f in ("step", "kappa", "nu", "theta", "eta", "rho", "excess_risk"):
        a, b, c = (np.asarray(getattr(t, f)) for t in (first, second, fresh))
        assert a.dtype == b.dtype == c.dtype
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, c)
    out = cache.memoize("x", {"a": 1}, lambda: first.to_dict(), use_cache=False)
    np.testing.assert_array_equal(out["kappa"], first.kappa)


def test_cache_reads_disk(result_cache):
    """The second call really comes from disk: a doctored file is returned as is."""
    kw = dict(steps=200, repeats=3, log_every=5)
    E.run("fig7b", **kw)
    (path,) = result_cache.glob("*.npz")
    data = dict(np.load(path))
    data["kappa"] = data["kappa"] + 1.0
    np.savez(path, **data)
    again = E.run("fig7b", **kw)
    np.testing.assert_array_equal(again.kappa, data["kappa"])
