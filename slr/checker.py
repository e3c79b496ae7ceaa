"""Comparing an answer with a reference value within a stated tolerance, without revealing the reference.

A :class:`Checker` holds one exercise's reference computation and tolerance; :mod:`slr.exercises`
registers one per exercise and prints the verdict. An answer ``a`` is right when
``|a - e| <= atol + rtol |e|`` entry by entry (``e`` the expected value, of the same shape), or within a
one-sided interval where the tolerance says so; a formula answer is evaluated at fixed test points
(:func:`formula_values`) and compared there.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

__all__ = ["Checker", "answer_array", "formula_values"]


@dataclass(frozen=True)
class Checker:
    """One exercise's checker.

    ``expected(**given)`` returns the reference array (shape ``shape``) computed with :mod:`slr`;
    ``evaluate(answer, **given)`` turns a valid answer into the array compared with it (identity for a
    number or an array; evaluation at test points for a formula). ``given`` names the keyword inputs
    the exercise needs. ``upper_only``: the answer may exceed the expected value by the tolerance but
    not fall below it by more than ``atol`` (a risk that cannot be below its minimum)."""
    label: str
    answer: str
    shape: tuple
    expected: Callable
    rtol: float = 0.0
    atol: float = 0.0
    given: tuple = ()
    evaluate: Callable | None = None
    upper_only: bool = False

    @property
    def tolerance(self) -> str:
        """The tolerance in words (printed by :func:`slr.exercises.check`, without the expected value)."""
        if self.upper_only:
            return f"from {self.atol:g} below the reference to {self.rtol:g} (relative) above it"
        parts = [f"relative {self.rtol:g}"] if self.rtol else []
        return " + ".join(parts + ([f"absolute {self.atol:g}"] if self.atol else []))

    def verdict(self, answer, **given) -> np.ndarray:
        """Entry by entry, whether a valid ``answer`` is within the tolerance of the reference
        (at least 1-D). ValueError for an answer that is not finite or has the wrong shape."""
        a = answer_array(answer, self.shape) if self.evaluate is None else self.evaluate(answer, **given)
        e = np.asarray(self.expected(**given), dtype=np.float64)
        if self.upper_only:
            ok = (a >= e - self.atol) & (a <= e + self.atol + self.rtol * np.abs(e))
        else:
            ok = np.abs(a - e) <= self.atol + self.rtol * np.abs(e)
        return np.atleast_1d(ok)


def answer_array(answer, shape, name="answer"):
    """``answer`` as a finite float64 array of the given shape (None: any length on that axis);
    ValueError naming the argument otherwise."""
    try:
        a = np.asarray(answer, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number or an array of numbers, got {answer!r}") from None
    if a.ndim != len(shape) or any(n is not None and n != m for n, m in zip(shape, a.shape)):
        raise ValueError(f"{name} must have shape {tuple(shape)}, got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} must be finite, got {answer!r}")
    return a


def formula_values(f, points):
    """A formula answer (a callable) evaluated at the checker's test points (tuples of arguments)."""
    if not callable(f):
        raise ValueError(f"answer must be a function (a formula), got {f!r}")
    vals = []
    for args in points:
        try:
            vals.append(float(f(*args)))
        except (TypeError, ValueError) as err:
            raise ValueError(f"answer must map {len(args)} numbers to a number: {err}") from None
    return answer_array(vals, (len(points),))
