"""Checked claims: each statement the book supports by computation, with a negative control.

A claim is a measurement, a test the measurement must pass, and a *control*: the same measurement on
an input where the statement must be false (a perturbed parameter, the wrong sign, a shuffled label,
a step size past the stability bound, the null predictor...). The control is executed and must fail
the test; a claim whose control passes is itself a failure, since its check could not have failed.
A hidden cell of a chapter reads::

    claims.start("task")                          # once, in the chapter's setup cell
    claims.check("task-argmax-finds-J0",
                 "The argmax along k* finds the informative token of every sampled sequence.",
                 measure=lambda key_dir: recovery_rate(X, J0, key_dir), on=k_star,
                 control=v_star, control_note="the argmax along v* instead of k*",
                 test=claims.at_least(1.0), method="Monte Carlo, 2000 sequences", supports="sec-2.1")

:func:`check` raises :class:`ClaimError` (so the build and the notebook tests fail) unless the claim
holds and its control fails, and records the claim in ``<cache>/claims/<chapter>.json`` for the
book's "Claims and checks" page. Statistical claims say in ``error_rate`` how likely the check is to
pass when the claim is false, or to fail when it is true, with the seeds and sample sizes used.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from slr._validate import check_finite, check_text
from slr.stats import (all_of, all_pass_share, fisher_greater, fisher_power, mean_of, median_of,  # noqa: F401
                       more_than_half, newcombe, normal_tail, trend_power, wilson, wilson_outside)

__all__ = ["ClaimError", "Test", "close", "below", "above", "between", "at_least", "at_most",
           "abs_below", "normal_tail", "wilson", "wilson_outside", "newcombe", "fisher_greater", "fisher_power",
           "trend_power", "all_of", "all_pass_share", "median_of", "mean_of", "more_than_half", "start",
           "stop", "current_chapter", "check", "claims_dir", "load", "Claim"]

_ID = re.compile(r"^[a-z0-9][a-z0-9-]*$")


class ClaimError(AssertionError):
    """A claim that does not hold, or whose control does not fail."""


@dataclass(frozen=True)
class Test:
    """A named predicate on a measurement (a scalar or an array: every entry must pass)."""
    description: str
    predicate: Callable[[np.ndarray], np.ndarray]

    def __call__(self, value) -> bool:
        arr = np.asarray(value, dtype=float)
        if arr.size == 0 or not np.all(np.isfinite(arr)):
            return False
        return bool(np.all(self.predicate(arr)))


def close(target, *, atol: float = 0.0, rtol: float = 0.0) -> Test:
    """|value - target| <= atol + rtol |target| (target a scalar or an array)."""
    atol, rtol = check_finite("atol", atol), check_finite("rtol", rtol)
    if atol < 0 or rtol < 0 or atol + rtol == 0:
        raise ValueError(f"atol and rtol must be >= 0 and not both 0, got atol={atol!r}, rtol={rtol!r}")
    t = np.asarray(target, dtype=float)
    tol = f"{atol:.3g}" if rtol == 0 else (f"{rtol:.3g} |target|" if atol == 0 else
                                            f"{atol:.3g} + {rtol:.3g} |target|")
    shown = f"{float(t):.6g}" if t.ndim == 0 else "the reference array"
    return Test(f"|value - {shown}| <= {tol}", lambda v: np.abs(v - t) <= atol + rtol * np.abs(t))


def below(x) -> Test:
    """value < x."""
    x = check_finite("x", x)
    return Test(f"value < {x:.6g}", lambda v: v < x)


def above(x) -> Test:
    """value > x."""
    x = check_finite("x", x)
    return Test(f"value > {x:.6g}", lambda v: v > x)


def at_least(x) -> Test:
    """value >= x."""
    x = check_finite("x", x)
    return Test(f"value >= {x:.6g}", lambda v: v >= x)


def at_most(x) -> Test:
    """value <= x."""
    x = check_finite("x", x)
    return Test(f"value <= {x:.6g}", lambda v: v <= x)


def between(lo, hi) -> Test:
    """lo <= value <= hi."""
    lo, hi = check_finite("lo", lo), check_finite("hi", hi)
    if lo > hi:
        raise ValueError(f"lo must be <= hi, got lo={lo!r}, hi={hi!r}")
    return Test(f"{lo:.6g} <= value <= {hi:.6g}", lambda v: (v >= lo) & (v <= hi))


def abs_below(x) -> Test:
    """|value| < x (a z-score, a relative error, a residual)."""
    x = check_finite("x", x)
    if x <= 0:
        raise ValueError(f"x must be > 0, got {x!r}")
    return Test(f"|value| < {x:.6g}", lambda v: np.abs(v) < x)


@dataclass
class Claim:
    """One checked claim as recorded for the ledger."""
    id: str
    chapter: str
    statement: str
    supports: list
    method: str
    test: str
    value: Any
    control_value: Any
    control_note: str
    holds: bool
    control_fails: bool
    error_rate: str | None = None
    extra: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.holds and self.control_fails


def claims_dir() -> Path:
    """Where chapters record their claims: ``$SLR_CLAIMS_DIR``, else ``_build/claims`` of a source
    checkout, else ``~/.cache/slr/claims``."""
    env = os.environ.get("SLR_CLAIMS_DIR")
    if env:
        return Path(env)
    repo = Path(__file__).resolve().parent.parent
    if (repo / "_config.yml").exists() and (repo / "_toc.yml").exists():
        return repo / "_build" / "claims"
    return Path.home() / ".cache" / "slr" / "claims"


_state: dict[str, Any] = {"chapter": None, "ids": set()}


def start(chapter: str) -> Path:
    """Begin recording the claims of ``chapter`` (its file is emptied: a re-run replaces them)."""
    if not isinstance(chapter, str) or not _ID.match(chapter.replace("_", "-")):
        raise ValueError(f"chapter must be a chapter name such as 'task', got {chapter!r}")
    _state.update(chapter=chapter, ids=set())
    path = claims_dir() / f"{chapter}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("[]\n")
    (claims_dir() / "figures" / f"{chapter}.json").unlink(missing_ok=True)  # slr.figcheck's records
    return path


def stop() -> None:
    """Stop recording: claims and figure checks belong to no chapter until the next :func:`start`."""
    _state.update(chapter=None, ids=set())


def current_chapter() -> str | None:
    """The chapter whose claims are being recorded (:func:`start`), or None outside a chapter."""
    return _state["chapter"]


def _plain(x):
    arr = np.asarray(x)
    if arr.dtype.kind in "biuf":
        if arr.ndim == 0:
            return arr.item()
        if arr.size <= 16:
            return arr.tolist()
        return {"shape": list(arr.shape), "min": float(arr.min()), "max": float(arr.max())}
    return str(x)


def _measure(measure, args):
    if isinstance(args, dict):
        return measure(**args)
    if isinstance(args, tuple):
        return measure(*args)
    return measure(args)


def check(id: str, statement: str, *, measure: Callable, on, control, test: Test, method: str,
          control_note: str, supports=(), error_rate: str | None = None, **extra) -> Claim:
    """Check a claim and its negative control; record it; raise :class:`ClaimError` unless the
    measurement on ``on`` passes ``test`` and the same measurement on ``control`` does not. With the
    environment variable ``SLR_CLAIMS_AUDIT=1`` it records and never raises (an audit reads the records:
    the book's claims under other seeds, ``benchmarks/audit_seeds.py``); the ledger test fails on any
    record that does not hold.

    ``on`` and ``control`` are the arguments of ``measure`` (a tuple of positional arguments, a dict
    of keyword arguments, or a single argument). ``supports``: the paper's results the claim supports
    (e.g. ``"thm-1"`` or ``("prop-15", "fig-4a")``; empty for the book's own). Returns the
    :class:`Claim` (its ``value`` is the measurement, for glueing into the prose).
    """
    chapter = _state["chapter"]
    if chapter is None:
        raise ValueError("claims.start(chapter) must be called before claims.check")
    if not isinstance(id, str) or not _ID.match(id):
        raise ValueError(f"id must be lower-case words joined by '-', got {id!r}")
    if id in _state["ids"]:
        raise ValueError(f"id must be unique within the chapter, got {id!r} twice")
    for name, val in (("statement", statement), ("method", method), ("control_note", control_note)):
        check_text(name, val)
    if not isinstance(test, Test):
        raise ValueError(f"test must be a claims.Test (claims.close, claims.below, ...), got {test!r}")
    supports = [supports] if isinstance(supports, str) else list(supports)
    value = _measure(measure, on)
    control_value = _measure(measure, control)
    claim = Claim(id, chapter, statement.strip(), supports, method, test.description, _plain(value),
                  _plain(control_value), control_note, test(value), not test(control_value), error_rate,
                  {k: _plain(v) for k, v in extra.items()})
    _state["ids"].add(id)
    path = claims_dir() / f"{chapter}.json"
    records = json.loads(path.read_text()) if path.exists() else []
    records.append(asdict(claim))
    path.write_text(json.dumps(records, indent=1) + "\n")
    if os.environ.get("SLR_CLAIMS_AUDIT") == "1":  # record only: benchmarks/audit_seeds.py reads them
        return claim
    if not claim.holds:
        raise ClaimError(f"claim {id!r} does not hold: {test.description} fails for value {claim.value!r}")
    if not claim.control_fails:
        raise ClaimError(f"the control of claim {id!r} ({control_note}) passes the check "
                         f"({test.description}, value {claim.control_value!r}): the check cannot fail")
    return claim


def load(directory: str | os.PathLike | None = None) -> list[Claim]:
    """Every claim recorded under ``directory`` (default :func:`claims_dir`), chapter by chapter."""
    root = Path(directory) if directory is not None else claims_dir()
    out = []
    for path in sorted(root.glob("*.json")):
        out.extend(Claim(**rec) for rec in json.loads(path.read_text()))
    return out
