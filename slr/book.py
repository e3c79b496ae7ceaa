"""Notebook helpers for the chapters: glue many values in one line, small tables, timings.

- :func:`glue` glues any number of values at once, hidden (``display=False``), after turning NumPy and
  JAX scalars into plain Python numbers (:func:`plain`), so that ``{glue:text}`name:.3f``` formats them.
- :func:`bound` rounds a value outwards in the last digit a format shows, for a bound quoted in prose
  ("at most {glue:text}`x:.2f`" must not show 0.48 for 0.4823).
- :func:`table` renders a small dict of rows as a Markdown table (no pandas).
- :func:`timed` runs a computation with the result cache bypassed (:func:`slr.cache.bypass`, which
  leaves ``os.environ`` alone) and returns its result and the seconds it took; :func:`timed_parts` also
  the seconds of XLA compilation among them, so that two computations compare without it.
"""
from __future__ import annotations

import decimal
import numbers
import re
import time
from typing import Any, Callable, Mapping, Sequence

import jax
import numpy as np

from . import cache

__all__ = ["plain", "glue", "bound", "table", "markdown_table", "timed", "timed_parts"]


def plain(value: Any) -> Any:
    """A NumPy/JAX scalar or 0-d array as a Python ``bool``, ``int``, ``float`` or ``complex``; a
    string, a Python number or anything else (a figure, a larger array) unchanged."""
    if isinstance(value, (str, bytes, bool, int, float, complex)) and not isinstance(value, np.generic):
        return value
    if isinstance(value, np.generic) or (hasattr(value, "shape") and hasattr(value, "dtype") and value.shape == ()):
        return np.asarray(value).item()
    return value


def glue(values: Mapping[str, Any] | None = None, /, *, prefix: str = "", **named: Any) -> None:
    """Glue every value of ``values`` and of the keywords, hidden, under ``prefix + name``.

    ``book.glue(n_rec=int(k), risk=r)`` or ``book.glue({"a": 1.0}, prefix="fig4a_")``. Each value goes
    through :func:`plain` first. Returns None, so that a cell ending with a glue shows nothing.
    """
    from myst_nb import glue as myst_glue

    items = {**(values or {}), **named}
    if not isinstance(prefix, str):
        raise ValueError(f"prefix must be a string, got {prefix!r}")
    out = {}
    for name, value in items.items():
        if not isinstance(name, str) or not (prefix + name).replace("_", "a").isalnum():
            raise ValueError(f"glue names must be letters, digits and _, got {prefix + str(name)!r}")
        out[prefix + name] = plain(value)
        myst_glue(prefix + name, out[prefix + name], display=False)


_BOUND_FMT = re.compile(r"\.(\d+)([fe%])")
_SIDES = {"at most": decimal.ROUND_CEILING, "at least": decimal.ROUND_FLOOR}


def bound(value, fmt: str, side: str) -> float:
    """``value`` rounded outwards in the last digit that ``format(., fmt)`` shows, so that the prose
    "at most {glue:text}`x:fmt`" (``side="at most"``, rounded up) or "at least ..." (``side="at
    least"``, rounded down) stays true: ``bound(0.4823, ".2f", "at most")`` is 0.49, ``bound(6.97,
    ".1f", "at least")`` 6.9, ``bound(3.2e-10, ".0e", "at most")`` 4e-10. ``fmt``: ``.Nf``, ``.Ne``
    or ``.N%``, the format of the glue role that quotes the value."""
    m = _BOUND_FMT.fullmatch(fmt) if isinstance(fmt, str) else None
    if m is None:
        raise ValueError(f"fmt must be a format such as '.2f', '.1e' or '.0%', got {fmt!r}")
    if side not in _SIDES:
        raise ValueError(f"side must be one of {tuple(_SIDES)}, got {side!r}")
    x = plain(value)
    if isinstance(x, bool) or not isinstance(x, numbers.Real) or not np.isfinite(x):
        raise ValueError(f"value must be a finite real number, got {value!r}")
    digits, kind = int(m.group(1)), m.group(2)
    d = decimal.Decimal(repr(float(x))) * (100 if kind == "%" else 1)
    exp = -digits if kind in "f%" or d == 0 else d.adjusted() - digits
    out = d.quantize(decimal.Decimal(1).scaleb(exp), rounding=_SIDES[side])
    if kind == "e" and out != 0 and out.adjusted() != d.adjusted():   # 9.96e-5 up to 1.0e-4
        out = out.quantize(decimal.Decimal(1).scaleb(out.adjusted() - digits), rounding=_SIDES[side])
    return float(out / 100) if kind == "%" else float(out)


def _cell(value: Any, fmt: str) -> str:
    value = plain(value)
    if isinstance(value, numbers.Real) and not isinstance(value, (bool, numbers.Integral)):
        text = fmt.format(value)
    else:
        text = str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_table(rows: Mapping[Any, Mapping[str, Any] | Sequence[Any]], *, columns: Sequence[str] | None = None,
                   index: str = "", fmt: str = "{:.3f}") -> str:
    """The Markdown source of a table: one line per item of ``rows`` (label -> cells), the label first.

    A row is a mapping column -> value (``columns`` defaults to the keys of the first row) or a sequence
    in the order of ``columns``. Floats are written with ``fmt`` (a ``str.format`` pattern, e.g.
    ``"{:.3f}"`` or ``"**{:.2%}**"``), integers and strings as they are; a missing cell stays empty.
    """
    if not rows:
        raise ValueError("rows must hold at least one row, got none")
    first = next(iter(rows.values()))
    if columns is None:
        if not isinstance(first, Mapping):
            raise ValueError("columns must be given when the rows are sequences")
        columns = list(first)
    columns = list(columns)
    lines = ["| " + " | ".join([index] + columns) + " |", "|---" * (len(columns) + 1) + "|"]
    for label, row in rows.items():
        if isinstance(row, Mapping):
            cells = [_cell(row[c], fmt) if c in row else "" for c in columns]
        else:
            if len(row) != len(columns):
                raise ValueError(f"row {label!r} has {len(row)} cells for {len(columns)} columns")
            cells = [_cell(v, fmt) for v in row]
        lines.append("| " + " | ".join([_cell(label, fmt)] + cells) + " |")
    return "\n".join(lines)


def table(rows, *, columns=None, index: str = "", fmt: str = "{:.3f}"):
    """:func:`markdown_table` as an ``IPython.display.Markdown`` object, which a chapter shows as a table."""
    from IPython.display import Markdown

    return Markdown(markdown_table(rows, columns=columns, index=index, fmt=fmt))


def timed(fn: Callable, *args, **kwargs) -> tuple[Any, float]:
    """``(fn(*args, **kwargs), seconds)``, computed with the result cache bypassed so that the time is
    the computation's (compilation included), never that of reading a stored result."""
    with cache.bypass():
        t0 = time.perf_counter()
        result = jax.block_until_ready(fn(*args, **kwargs))
        seconds = time.perf_counter() - t0
    return result, seconds


_COMPILING: list[float] = []  # the compilation seconds of each open timed_parts call, innermost last


def _on_event(event: str, seconds: float, **_) -> None:
    if event == "/jax/core/compile/backend_compile_duration" and _COMPILING:
        _COMPILING[-1] += seconds


jax.monitoring.register_event_duration_secs_listener(_on_event)


def timed_parts(fn: Callable, *args, **kwargs) -> tuple[Any, float, float]:
    """``(fn(*args, **kwargs), seconds, compile_seconds)``: :func:`timed`, and the seconds of XLA
    compilation within (JAX's compile events, :mod:`jax.monitoring`, from every thread). A program
    compiled earlier in the process, or read from JAX's persistent compilation cache, adds no compilation:
    ``seconds - compile_seconds`` is the time of the computation itself either way."""
    _COMPILING.append(0.0)
    try:
        result, seconds = timed(fn, *args, **kwargs)
    finally:
        compile_seconds = _COMPILING.pop()
    return result, seconds, compile_seconds
