"""On-disk memoisation of expensive results, keyed by configuration *and* code.

A chapter that trains for a minute should not train twice in one CI run (nbval executes each chapter,
then the book build executes it again). :func:`memoize` stores a dict of arrays as ``.npz`` under
:func:`cache_dir`, under a key that hashes the result's name, its configuration and the source of
every module of :mod:`slr`: any change to the code or to a parameter recomputes. The cache lives in
``_build/slr-cache`` of a source checkout (never committed), else in ``~/.cache/slr``; set
``SLR_CACHE_DIR`` to move it and ``SLR_CACHE=0`` to disable it.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Callable, Mapping

import numpy as np

__all__ = ["cache_dir", "code_hash", "cache_key", "memoize", "enabled"]

_PKG = Path(__file__).resolve().parent


def cache_dir() -> Path:
    env = os.environ.get("SLR_CACHE_DIR")
    if env:
        return Path(env)
    repo = _PKG.parent
    if (repo / "_config.yml").exists() and (repo / "_toc.yml").exists():
        return repo / "_build" / "slr-cache"
    return Path.home() / ".cache" / "slr"


def enabled() -> bool:
    return os.environ.get("SLR_CACHE", "1") not in ("0", "false", "no", "")


def code_hash(modules=None) -> str:
    """SHA-256 of the source of every module of the package, or only of ``modules`` (names such as
    ``"probe"``; this module is always included) when a result depends on those alone."""
    h = hashlib.sha256()
    paths = sorted(_PKG.rglob("*.py"))
    if modules is not None:
        wanted = {f"{m}.py" for m in modules} | {"cache.py"}
        missing = wanted - {p.name for p in paths}
        if missing:
            raise ValueError(f"modules must name modules of slr, got unknown {sorted(missing)}")
        paths = [p for p in paths if p.name in wanted and p.parent == _PKG]
    for path in paths:
        h.update(str(path.relative_to(_PKG)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def _jsonable(x):
    if isinstance(x, Mapping):
        return {str(k): _jsonable(v) for k, v in sorted(x.items())}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, (np.generic,)):
        return x.item()
    if isinstance(x, np.ndarray):
        return x.tolist()
    if callable(x):
        return getattr(x, "__qualname__", repr(x))
    return x


def cache_key(name: str, config: Mapping, modules=None) -> str:
    blob = json.dumps({"name": name, "config": _jsonable(config), "code": code_hash(modules)},
                      sort_keys=True, default=repr)
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def memoize(name: str, config: Mapping, compute: Callable[[], Mapping[str, np.ndarray]],
            *, use_cache: bool | None = None, modules=None) -> dict[str, np.ndarray]:
    """Return ``compute()`` (a dict of arrays), from disk when this (name, config, code) was computed before.

    The arrays come back as NumPy arrays, bit-identical to the ones computed. ``modules`` narrows the
    code part of the key to the named modules of :mod:`slr` (default: all of them).
    """
    use = enabled() if use_cache is None else use_cache
    if not use:
        return {k: np.asarray(v) for k, v in compute().items()}
    path = cache_dir() / f"{name}-{cache_key(name, config, modules)}.npz"
    if path.exists():
        with np.load(path, allow_pickle=False) as f:
            return {k: f[k] for k in f.files}
    out = {k: np.asarray(v) for k, v in compute().items()}
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".npz")
    os.close(fd)
    np.savez(tmp, **out)
    os.replace(tmp, path)
    return out
