"""slr.cache.memoize with experiments.run: bit-identical arrays, keys that follow the config."""
import dataclasses

import numpy as np

from slr import cache, experiments as E


def test_memoize_bit_identical(tmp_path, monkeypatch):
    monkeypatch.setenv("SLR_CACHE_DIR", str(tmp_path))
    kw = dict(steps=400, repeats=3, log_every=10)
    first = E.run("fig7b", **kw)            # computed, then stored
    files = list(tmp_path.glob("*.npz"))
    assert len(files) == 1
    second = E.run("fig7b", **kw)           # read back from disk
    monkeypatch.setenv("SLR_CACHE", "0")
    fresh = E.run("fig7b", **kw)            # recomputed, the cache bypassed
    assert len(list(tmp_path.glob("*.npz"))) == 1
    for f in ("step", "kappa", "nu", "theta", "eta", "rho", "excess_risk"):
        a, b, c = (np.asarray(getattr(t, f)) for t in (first, second, fresh))
        assert a.dtype == b.dtype == c.dtype
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, c)
    # memoize itself with use_cache=False returns the computed arrays
    out = cache.memoize("x", {"a": 1}, lambda: first.to_dict(), use_cache=False)
    np.testing.assert_array_equal(out["kappa"], first.kappa)


def test_cache_reads_disk(tmp_path, monkeypatch):
    """The second call really comes from disk: a doctored file is returned as is."""
    monkeypatch.setenv("SLR_CACHE_DIR", str(tmp_path))
    kw = dict(steps=200, repeats=3, log_every=5)
    E.run("fig7b", **kw)
    (path,) = tmp_path.glob("*.npz")
    data = dict(np.load(path))
    data["kappa"] = data["kappa"] + 1.0
    np.savez(path, **data)
    again = E.run("fig7b", **kw)
    np.testing.assert_array_equal(again.kappa, data["kappa"])


def test_key_changes_with_config():
    base = dataclasses.asdict(E.config("fig4a"))
    k0 = cache.cache_key("dynamics-fig4a", dict(base, seed=0))
    assert k0 == cache.cache_key("dynamics-fig4a", dict(base, seed=0))
    assert k0 != cache.cache_key("dynamics-fig4a", dict(base, seed=1))
    assert k0 != cache.cache_key("dynamics-fig4a", dict(dataclasses.asdict(E.config("fig4a", steps=2000)), seed=0))
    assert k0 != cache.cache_key("dynamics-fig4a", dict(dataclasses.asdict(E.config("fig4a", alpha=1e-3)), seed=0))
