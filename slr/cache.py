"""On-disk memoisation of expensive results, under a key that is complete by construction.

A result (a dict of arrays) is stored as ``.npz`` under :func:`cache_dir`, keyed by the SHA-256 of

- the result's name and its configuration in the canonical encoding of :func:`canonical` (every field of
  a dataclass, dict, list or tuple; arrays by dtype, shape and *all* their bytes; floats by ``repr``;
  JAX PRNG keys by their key data; a callable only if it is a module-level function, by its module,
  qualified name and source: a lambda or a closure in a configuration raises ``ValueError``);
- the code: the source of the compute function (with its defaults, closure and the module-level
  names it reads, followed through the functions of its own module) and of the :mod:`slr` package;
- the versions of Python, jax, jaxlib, numpy and slr (:func:`library_versions`).

:func:`memoized` decorates a public function returning a dict of arrays: its key is the function's
qualified name and *all* its bound arguments, so no caller writes a key (:func:`memoize`: the older
``memoize(name, config, compute)`` form). :func:`cache_dir` says where; ``SLR_CACHE=0`` or
``with cache.bypass():`` (which leaves ``os.environ`` alone) turns it off.
"""
from __future__ import annotations

import ast
import contextlib
import contextvars
import dataclasses
import enum
import functools
import hashlib
import inspect
import os
import sys
import tempfile
import types
from pathlib import Path, PurePath
from typing import Callable, Mapping

import numpy as np

__all__ = ["cache_dir", "enabled", "bypass", "library_versions", "covered_modules", "code_hash", "canonical",
           "function_fingerprint", "cache_key", "memoize", "memoized"]

_PKG = Path(__file__).resolve().parent
_BYPASS = contextvars.ContextVar("slr_cache_bypass", default=False)


def cache_dir() -> Path:
    """``SLR_CACHE_DIR``, else ``_build/slr-cache`` of a source checkout, else ``~/.cache/slr``."""
    if os.environ.get("SLR_CACHE_DIR"):
        return Path(os.environ["SLR_CACHE_DIR"])
    repo = _PKG.parent
    if (repo / "_config.yml").exists() and (repo / "_toc.yml").exists():
        return repo / "_build" / "slr-cache"
    return Path.home() / ".cache" / "slr"


def enabled() -> bool:
    """False inside :func:`bypass` or when ``SLR_CACHE`` is 0/false/no/empty."""
    return not _BYPASS.get() and os.environ.get("SLR_CACHE", "1") not in ("0", "false", "no", "")


@contextlib.contextmanager
def bypass():
    """Within this block every memoised call computes afresh and stores nothing (os.environ untouched)."""
    token = _BYPASS.set(True)
    try:
        yield
    finally:
        _BYPASS.reset(token)


@functools.lru_cache(maxsize=None)
def library_versions() -> dict[str, str]:
    """The versions that enter every key: Python, jax, jaxlib, numpy and slr."""
    import jax
    import jaxlib

    from . import __version__
    return {"python": sys.version, "jax": jax.__version__, "jaxlib": jaxlib.__version__,
            "numpy": np.__version__, "slr": __version__}


def _imports(name: str) -> set[str]:
    """The modules of slr that module ``name`` imports with ``from . import x`` or ``from .x import y``."""
    out = set()
    for node in ast.walk(ast.parse((_PKG / f"{name}.py").read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            out |= {node.module} if node.module else {a.name for a in node.names}
    return {m.split(".")[0] for m in out if (_PKG / f"{m.split('.')[0]}.py").exists()}


def covered_modules(modules=None) -> list[str]:
    """The slr modules whose source enters a key: all of them, or ``modules`` (names such as ``"probe"``)
    and every slr module they import, transitively (``cache`` and ``__init__`` always included)."""
    if modules is None:
        return sorted(str(p.relative_to(_PKG).with_suffix("")) for p in _PKG.rglob("*.py"))
    todo, wanted = list(modules) + ["cache", "__init__"], set()
    missing = sorted(m for m in todo if not (_PKG / f"{m}.py").exists())
    if missing:
        raise ValueError(f"modules must name modules of slr, got unknown {missing}")
    while todo:
        m = todo.pop()
        if m not in wanted:
            wanted.add(m)
            todo += sorted(_imports(m))
    return sorted(wanted)


def code_hash(modules=None) -> str:
    """SHA-256 of the source of the modules of :func:`covered_modules`."""
    h = hashlib.sha256()
    for path in (_PKG / f"{m}.py" for m in covered_modules(modules)):
        h.update(str(path.relative_to(_PKG)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


# --- canonical encoding ----------------------------------------------------------------------------
def _tok(tag: str, *parts: bytes) -> bytes:
    """Tagged, length-prefixed: no two different token sequences share an encoding."""
    return tag.encode() + b"".join(b"%d:" % len(p) + p for p in parts) + b";"


def _array(x) -> bytes:
    import jax
    if isinstance(x, jax.Array) and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
        return _tok("K", str(jax.random.key_impl(x)).encode(), _array(jax.random.key_data(x)))
    a = np.asarray(x)
    if a.dtype.hasobject:
        raise ValueError(f"cannot key an array of dtype object (shape {a.shape}); use numeric arrays")
    return _tok("a", a.dtype.str.encode(), repr(a.shape).encode(), np.ascontiguousarray(a).tobytes())


def _qualified(obj) -> bytes:
    return f"{getattr(obj, '__module__', None)}:{getattr(obj, '__qualname__', None)}".encode()


def _module_level(fn) -> bool:
    qual, mod = getattr(fn, "__qualname__", ""), sys.modules.get(getattr(fn, "__module__", None) or "")
    if mod is None or not qual or "<" in qual:
        return False
    obj = functools.reduce(lambda o, part: getattr(o, part, None), qual.split("."), mod)
    return obj is fn or (obj is not None and inspect.unwrap(obj) is fn)


def _source(fn) -> bytes:
    """The source (when readable) and the bytecode: two lambdas on one line differ by their code."""
    try:
        text = inspect.getsource(fn).encode()
    except (OSError, TypeError):
        text = b""
    return _tok("S", text, _code(fn.__code__))


def _const(c) -> bytes:
    if isinstance(c, types.CodeType):
        return _code(c)
    if isinstance(c, (tuple, frozenset)):      # a frozenset's order follows the (salted) string hashes
        items = [_const(x) for x in c]
        return _tok("k", *(sorted(items) if isinstance(c, frozenset) else items))
    return _tok("k", type(c).__name__.encode(), repr(c).encode())


def _code(code: types.CodeType) -> bytes:
    """Bytecode, constants and names; not line numbers, so moving a function keeps its key."""
    return _tok("C", code.co_code, *map(_const, code.co_consts), repr(code.co_names).encode())


def _callable(fn) -> bytes:
    if isinstance(fn, functools.partial):
        return _tok("P", _callable(fn.func), canonical(fn.args), canonical(fn.keywords))
    fn = inspect.unwrap(fn)
    if isinstance(fn, type):
        return _tok("T", _qualified(fn))
    if not _module_level(fn):
        raise ValueError(f"cannot key the callable {fn!r}: only module-level functions are keyed "
                         "(by module, qualified name and source); pass a named function or plain data")
    if isinstance(fn, types.FunctionType):
        return _tok("F", _qualified(fn), _source(fn))
    return _tok("B", _qualified(fn))      # builtins and ufuncs: their code is pinned by the versions


def canonical(obj) -> bytes:
    """The canonical encoding of a configuration; ValueError for what cannot be keyed honestly."""
    if obj is None or isinstance(obj, (bool, enum.Enum)):
        return _tok("n", repr(obj).encode())
    if isinstance(obj, (int, float, complex)) and not isinstance(obj, np.generic):
        return _tok(type(obj).__name__[0], repr(obj).encode())
    if isinstance(obj, (str, bytes)):
        return _tok("s", obj.encode()) if isinstance(obj, str) else _tok("y", obj)
    if isinstance(obj, (np.ndarray, np.generic)) or type(obj).__module__.startswith("jax"):
        if hasattr(obj, "dtype") and hasattr(obj, "shape"):
            return _array(obj)
    if isinstance(obj, np.dtype):
        return _tok("d", obj.str.encode())
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        fields = [_tok("f", f.name.encode(), canonical(getattr(obj, f.name))) for f in dataclasses.fields(obj)]
        return _tok("D", _qualified(type(obj)), *fields)
    if isinstance(obj, Mapping):
        items = sorted((canonical(k), canonical(v)) for k, v in obj.items())
        return _tok("m", *(k + v for k, v in items))
    if isinstance(obj, (list, tuple)):
        return _tok("l" if isinstance(obj, list) else "t", _qualified(type(obj)), *map(canonical, obj))
    if isinstance(obj, (set, frozenset)):
        return _tok("e", *sorted(map(canonical, obj)))
    if isinstance(obj, (PurePath, range, slice)):
        return _tok("r", type(obj).__name__.encode(), repr(obj).encode())
    if callable(obj):
        return _callable(obj)
    raise ValueError(f"cannot key a value of type {type(obj).__qualname__}: {obj!r:.80}")


def _names(code: types.CodeType) -> set[str]:
    """The global names a code object and the code objects nested in it read."""
    return set(code.co_names).union(*(_names(c) for c in code.co_consts if isinstance(c, types.CodeType)))


def _loose(value, module: dict, seen: set) -> bytes:
    """A value a compute function reads: a function of the same module is followed, modules and
    objects of other modules are pinned by the code hash and the versions, data is encoded."""
    if isinstance(value, types.ModuleType):
        return b""
    inner = inspect.unwrap(value) if callable(value) else value
    if isinstance(inner, types.FunctionType):
        if inner.__globals__ is module or "<" in inner.__qualname__:
            return function_fingerprint(inner, seen)
        return _tok("G", _qualified(inner))
    if isinstance(value, type) or callable(value):
        return _tok("G", _qualified(value))
    try:
        return canonical(value)
    except (ValueError, TypeError):
        return _tok("u", _qualified(type(value)))


def function_fingerprint(fn, seen: set | None = None) -> bytes:
    """What the code of a compute function is: its source, its defaults and closure, and the module-level
    names it reads (functions of its own module followed recursively, data encoded)."""
    fn = inspect.unwrap(fn)
    if isinstance(fn, functools.partial):
        return _tok("P", function_fingerprint(fn.func, seen), canonical(fn.args), canonical(fn.keywords))
    if not isinstance(fn, types.FunctionType):
        return canonical(fn)
    seen = set() if seen is None else seen
    if id(fn) in seen:
        return _tok("R", _qualified(fn))
    seen.add(id(fn))
    g = fn.__globals__
    parts = [_qualified(fn), _source(fn), _loose(fn.__defaults__, g, seen), _loose(fn.__kwdefaults__, g, seen)]
    parts += [_loose(c.cell_contents, g, seen) for c in fn.__closure__ or () if c.cell_contents is not fn]
    parts += [_tok("g", n.encode(), _loose(g[n], g, seen)) for n in sorted(_names(fn.__code__)) if n in g]
    return _tok("F", *parts)


def cache_key(name: str, config, compute: Callable | None = None, modules=None, *, follow: bool = True) -> str:
    """The key of result ``name`` of ``config`` computed by ``compute`` (see the module docstring);
    ``follow=False`` keys a module-level ``compute`` by its own source alone, not what it reads."""
    code = b"" if compute is None else function_fingerprint(compute) if follow else canonical(compute)
    parts = [canonical(name), canonical(config), code, code_hash(modules).encode(), canonical(library_versions())]
    return hashlib.sha256(b"".join(parts)).hexdigest()[:32]


def _memo(name: str, config, compute, keyed, *, use_cache, modules, follow) -> dict[str, np.ndarray]:
    """``compute()`` as NumPy arrays, read from (or written to) the file of its key when the cache is on."""
    if not (enabled() if use_cache is None else use_cache):
        return {k: np.asarray(v) for k, v in compute().items()}
    path = cache_dir() / f"{name}-{cache_key(name, config, keyed, modules, follow=follow)}.npz"
    if path.exists():
        with np.load(path, allow_pickle=False) as f:
            return {k: f[k] for k in f.files}
    out = {k: np.asarray(v) for k, v in compute().items()}
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=path.parent, suffix=".npz", delete=False) as tmp:
        np.savez(tmp, **out)
    os.replace(tmp.name, path)     # atomic: concurrent writers (pytest -n, nbval + build) never tear a file
    return out


def memoize(name: str, config, compute: Callable[[], Mapping[str, np.ndarray]],
            *, use_cache: bool | None = None, modules=None) -> dict[str, np.ndarray]:
    """Return ``compute()`` (a dict of arrays), from disk when this (name, config, code) was computed before:
    NumPy arrays, bit-identical to the ones computed. ``modules`` narrows the slr part of the key to the
    named modules and those they import (default: the whole package)."""
    return _memo(name, config, compute, compute, use_cache=use_cache, modules=modules, follow=True)


def memoized(fn=None, *, modules=None):
    """Decorator for a public function returning a dict of arrays: memoised on its qualified name and
    *all* its bound arguments (defaults applied), its source and the slr source (``modules`` narrows it
    as in :func:`memoize`), not the values of the globals it reads: a module's constants are in its
    source, its mutable state is no part of a result. The wrapper takes one more keyword, ``use_cache``."""
    if fn is None:
        return functools.partial(memoized, modules=modules)
    sig = inspect.signature(fn)
    name = f"{fn.__module__}.{fn.__qualname__}"

    @functools.wraps(fn)
    def wrapper(*args, use_cache: bool | None = None, **kwargs):
        bound = sig.bind(*args, **kwargs)
        bound.apply_defaults()
        return _memo(name, dict(bound.arguments), lambda: fn(*bound.args, **bound.kwargs), fn,
                     use_cache=use_cache, modules=modules, follow=False)

    return wrapper
