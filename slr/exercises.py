"""Self-checking exercises: ``check(label, answer)`` says whether a student's answer is right.

Each computational exercise with a numerical answer (a number, a vector, a small array, or a formula
given as a Python function) has a *checker*: it computes the expected value **at call time** from the
library's own functions (never from a number typed here), compares the answer with it within a stated
tolerance, and prints ``right`` or ``wrong`` without printing the expected value. In a chapter::

    from slr import exercises
    exercises.check("oracle_ex2", [lam_400, lam_1e4, lam_1e6])     # -> True or False, and a line
    exercises.describe("oracle_ex2")                                # what to pass, and the tolerance

Some answers depend on the exercise's inputs (random matrices, the probe's sizes): they are passed
as keyword arguments, e.g. ``exercises.check("probe_ex4", x, n=n, p=p)``. An unknown label, a
missing or unexpected input, or an answer that is not finite or has the wrong shape raises
``ValueError`` naming the argument.

A scalar or array answer ``a`` is right when ``|a - e| <= atol + rtol |e|`` entry by entry (``e`` the
expected value; the shape must match). A few checkers accept a one-sided interval instead (said in
their tolerance); a formula answer is evaluated at fixed test points and compared there.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from slr._validate import check_int

__all__ = ["Checker", "CHECKERS", "check", "describe", "labels"]

_GAMMA = math.sqrt(0.5)   # the paper's gamma^2 = 1/2
_N = 4001                 # points of the lam grids (one array shape: jax compiles each op once)


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
        parts = [f"relative {self.rtol:g}"] if self.rtol else []
        parts += [f"absolute {self.atol:g}"] if self.atol else []
        tol = " + ".join(parts)
        return f"{tol}, above the reference only" if self.upper_only else tol


def _answer_array(answer, shape, name="answer"):
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


def _formula_values(f, points):
    """A formula answer (a callable) evaluated at the checker's test points (tuples of arguments)."""
    if not callable(f):
        raise ValueError(f"answer must be a function (a formula), got {f!r}")
    vals = []
    for args in points:
        try:
            vals.append(float(f(*args)))
        except (TypeError, ValueError) as err:
            raise ValueError(f"answer must map {len(args)} numbers to a number: {err}") from None
    return _answer_array(vals, (len(points),))


def _verdict(chk: Checker, a, e):
    if chk.upper_only:
        ok = (a >= e - chk.atol) & (a <= e + chk.atol + chk.rtol * np.abs(e))
    else:
        ok = np.abs(a - e) <= chk.atol + chk.rtol * np.abs(e)
    return np.atleast_1d(ok)


def check(label, answer, **given) -> bool:
    """Print and return whether ``answer`` to exercise ``label`` is right within the checker's
    tolerance, without revealing the expected value. ``given``: the exercise's inputs, if it has any
    (see :func:`describe`). ValueError for an unknown label, a missing or unexpected input, or an
    answer that is not finite or has the wrong shape."""
    chk = _get(label)
    missing, extra = set(chk.given) - set(given), set(given) - set(chk.given)
    if missing or extra:
        name = sorted(missing or extra)[0]
        raise ValueError(f"{name} is {'required' if missing else 'not an input'} for {label}: its "
                         f"inputs are {list(chk.given) or 'none'}")
    if chk.evaluate is not None:
        a = chk.evaluate(answer, **given)
    else:
        a = _answer_array(answer, chk.shape)
    e = np.asarray(chk.expected(**given), dtype=np.float64)
    ok = _verdict(chk, a, e)
    right = bool(np.all(ok))
    where = "" if right or not 1 < ok.size <= 10 else f" (entries {np.flatnonzero(~ok).tolist()} are off)"
    print(f"{label}: {'right' if right else 'wrong'}{where}; tolerance {chk.tolerance}.")
    return right


def describe(label) -> str:
    """What to pass to :func:`check` for exercise ``label``, its inputs and its tolerance."""
    chk = _get(label)
    inputs = f" Inputs: {', '.join(chk.given)}." if chk.given else ""
    return f"{label}: pass {chk.answer}.{inputs} Tolerance: {chk.tolerance}."


def labels() -> list:
    """The labels of the exercises that have a checker."""
    return sorted(CHECKERS)


def _get(label):
    if not isinstance(label, str) or label not in CHECKERS:
        raise ValueError(f"label must be one of {labels()}, got {label!r}")
    return CHECKERS[label]


CHECKERS: dict = {}   # label -> Checker, filled below


# ---- reference computations (all at call time, from slr's functions) ----

def _oracle(lams, *, d, L, eps):
    """Theorem 1's oracle risk eps^2 + signal(lam) + (L - 1) zeta(0; lam), from slr's two parts (the
    signal part by quadrature without cancellation); L may be an array broadcasting against lams."""
    from slr import gaussian, risk
    signal = risk.oracle_signal_part(lam=lams, gamma=_GAMMA, d=d)
    return eps ** 2 + signal + (np.asarray(L, float) - 1) * np.asarray(gaussian.zeta0(np.asarray(lams)))


@functools.cache
def _lambda_c(d=400):
    """landscape_ex1: the exact crossover lam_c(400), where the role-swapped point's risk (landscape's
    closed form at theta*, the (L - 1) zeta(0; lam) term left out on both sides) meets the oracle's:
    the last sign change on a grid, refined twice on finer grids."""
    from slr import gaussian, landscape
    r = math.sqrt(d / 2)

    def gap(lams):
        theta, b = landscape.swap_theta(lams, gamma=_GAMMA, d=d), lams * _GAMMA
        z0, p1 = np.asarray(gaussian.zeta0(b)), np.asarray(gaussian.phi1(0.0, b))
        swap = _GAMMA ** 2 * (1 + z0 - 2 * lams * r * theta * p1) + r ** 2 * theta ** 2 * z0
        return swap - _oracle(lams, d=d, L=1, eps=0.0)

    lams = np.geomspace(1e-2, 20.0, _N) / r
    for _ in range(3):
        i = np.flatnonzero(gap(lams) < 0)[-1]
        lams = np.linspace(lams[i], lams[i + 1], _N)
    return float(lams[0])


@functools.cache
def _linear_ex3():
    """linear_ex3: Proposition 3's risk, the minimum of every affine predictor's risk (linear_ex1)."""
    from slr import risk
    return risk.linear_risk(gamma=_GAMMA, L=4, eps=0.1, p=np.array([0.55, 0.25, 0.15, 0.05]))


@functools.cache
def _largest_L(d=1e4, eps=0.1):
    """linear_ex4: the largest L with min_lam R_lam(k*, v*) < R_lin / 2 (on a fine lam grid); the gap
    between the two sides grows with L, so bisection finds the crossing."""
    from slr import risk
    lams = np.geomspace(1e-4, 10.0, _N)
    base, noise = _oracle(lams, d=d, L=1, eps=eps), _oracle(lams, d=d, L=2, eps=0.0) - _oracle(lams, d=d, L=1, eps=0.0)
    below = lambda L: np.min(base + (L - 1) * noise) < risk.linear_risk(gamma=_GAMMA, L=L, eps=eps) / 2
    lo, hi = 1, 1_000_000
    while hi - lo > 1:
        lo, hi = ((lo + hi) // 2, hi) if below((lo + hi) // 2) else (lo, (lo + hi) // 2)
    return lo


@functools.cache
def _lam_star():
    """oracle_ex2: argmin of the oracle risk for d = 400, 1e4, 1e6 (a grid, then a finer grid between
    the neighbours of the grid minimum)."""
    out = []
    for d in (400.0, 1e4, 1e6):
        lams = np.geomspace(1e-4, 3.0, _N)
        for _ in range(2):
            i = int(np.argmin(_oracle(lams, d=d, L=10, eps=0.1)))
            lams = np.geomspace(lams[max(i - 1, 0)], lams[min(i + 1, lams.size - 1)], _N)
        out.append(lams[_N // 2])
    return np.array(out)


@functools.cache
def _pgd_steps():
    """pgd_ex2: the first step at which the exact map of Lemma 7 (lam = 0.1, alpha = 4e-3) started at
    (kappa, nu) = (0.98, 1) reaches kappa >= 0.999."""
    from slr import manifold
    _, ka, _ = manifold.manifold_pgd(0.98, 1.0, lam=0.1, alpha=4e-3, steps=60_000, gamma=_GAMMA, d=400,
                                     L=10, log_every=1)
    return float(np.argmax(np.asarray(ka) >= 0.999))


@functools.cache
def _recovery():
    """task_ex2: P(argmax_l X_l^T k* = J0) for d = 2, 4, 8, 16, 32, L = 10 (exact quadrature)."""
    from slr import task
    return 1.0 - task.argmax_failure(d=np.array([2.0, 4.0, 8.0, 16.0, 32.0]), L=10, gamma=_GAMMA)


@functools.cache
def _longest():
    """task_ex4: P(the longest token is J0) at gamma^2 = 1, d = 400, L = 10 (exact quadrature)."""
    from slr import task
    return task.norm_rule_rates(d=400, L=10, gamma=1.0)[0]


def _cover_log10(n, p):
    """probe_ex4: log10 of Cover's probability 2 sum_{k <= p} C(n - 1, k) / 2^n, summed in logs."""
    from scipy.special import gammaln, logsumexp
    n, p = check_int("n", n, lo=2), check_int("p", p)
    k = np.arange(min(p, n - 1) + 1)
    logc = gammaln(n) - gammaln(k + 1) - gammaln(n - k)
    return (math.log(2) + logsumexp(logc) - n * math.log(2)) / math.log(10)


def _cls_inputs(W_Q, W_K, W_V, W_O, c, lam):
    d, p = _answer_array(W_Q, (None, None), "W_Q").shape
    mats = [_answer_array(W, (d, p), name) for W, name in ((W_Q, "W_Q"), (W_K, "W_K"), (W_V, "W_V"))]
    mats += [_answer_array(W_O, (p, 1), "W_O"), _answer_array(c, (d,), "c")]
    if not _answer_array(lam, (), "lam") > 0:
        raise ValueError(f"lam must be > 0, got {lam!r}")
    import jax
    X = jax.random.normal(jax.random.key(0), (64, 10, d))    # fixed test sequences
    return X, mats, float(lam)


def _cls_row(**given):
    """attention_ex2: the [CLS] row of attention_layer (Eq. 5) on fixed Gaussian sequences."""
    from slr import predictors
    X, (W_Q, W_K, W_V, W_O, c), lam = _cls_inputs(**given)
    H = np.broadcast_to(c, (X.shape[0], 1, c.size))
    return np.asarray(predictors.attention_layer(H, X, W_Q, W_K, W_V, W_O, lam)[:, 0, 0])


def _cls_softmax(answer, **given):
    """attention_ex2: the softmax predictor with the answer's (k, lam', v) on the same sequences;
    NaN (wrong) when k is not a unit vector."""
    from slr import predictors
    X, (W_Q, *_), _ = _cls_inputs(**given)
    if not isinstance(answer, (tuple, list)) or len(answer) != 3:
        raise ValueError(f"answer must be a tuple (k, lam, v), got {type(answer).__name__}")
    d = W_Q.shape[0]
    k, lam, v = (_answer_array(x, s, f"answer[{i}]") for i, (x, s) in enumerate(zip(answer, ((d,), (), (d,)))))
    if abs(np.linalg.norm(k) - 1) > 1e-8:
        return np.full(X.shape[0], np.nan)
    return np.asarray(predictors.attention_softmax(X, k, v, float(lam)))


@functools.cache
def _chi_ratio_median():
    """beyond_open_ex1: the median of sqrt(chi2_3 / chi2_2) = sqrt(3/2 F_{3,2})."""
    from scipy.special import fdtri
    return math.sqrt(1.5 * fdtri(3, 2, 0.5))


@functools.cache
def _half_null_ratio(d=1_000_000):
    """beyond_icl_ex3: L/d at which linear attention's best excess risk is gamma^2 / 2, at large d
    (bisection on the integer L; the excess grows with L)."""
    from slr import risk
    excess = lambda L: risk.linear_attention_best(gamma=_GAMMA, d=d, L=L)[1]
    lo, hi = 1, 100 * d
    while hi - lo > 1:
        lo, hi = ((lo + hi) // 2, hi) if excess((lo + hi) // 2) < _GAMMA ** 2 / 2 else (lo, (lo + hi) // 2)
    return lo / d


_ERF_POINTS = ((0.0, 0.5), (0.7, 0.3), (-1.2, 1.0), (2.0, 0.1), (0.3, 2.0))


@functools.cache
def _erf_prime_sq():
    """proofs_ex1: E[erf'(a + b Z)^2] by adaptive quadrature at the test points."""
    from slr import gaussian
    sq = lambda x: (2 / math.sqrt(math.pi) * math.exp(-x * x)) ** 2
    return np.array([gaussian.expect_normal(lambda z: sq(a + b * z)) for a, b in _ERF_POINTS])


_HESS_POINTS = ((0.1, _GAMMA, 400.0), (0.5, 1.0, 50.0), (0.05, 2.0, 1000.0))


@functools.cache
def _kappa_curvature():
    """proofs_ex2: d^2 R / d kappa^2 at the saddle. On M (Lemma 6) the risk depends on kappa only
    through gamma^2 zeta(lam sqrt(d/2) kappa; lam gamma), so it is gamma^2 lam^2 (d/2) times
    (G7) d^2 zeta / da^2 at a = 0 (slr.gaussian.zeta2)."""
    from slr import gaussian
    return np.array([g ** 2 * lam ** 2 * d / 2 * float(gaussian.zeta2(0.0, lam * g)) for lam, g, d in _HESS_POINTS])


for _chk in (
    Checker("landscape_ex1", "lambda_c at d = 400 (a float)", (), _lambda_c, rtol=0.02),
    Checker("linear_ex3", "the exact risk of the fitted affine predictor (a float)", (), _linear_ex3,
            rtol=0.02, atol=1e-9, upper_only=True),
    Checker("linear_ex4", "the largest L (an integer)", (), _largest_L, rtol=0.02),
    Checker("oracle_ex2", "[lambda* at d = 400, 1e4, 1e6] (3 floats)", (3,), _lam_star, rtol=0.01),
    Checker("pgd_ex2", "the number of steps (an integer)", (), _pgd_steps, rtol=0.06),
    Checker("task_ex2", "the 5 recovery rates for d = 2, 4, 8, 16, 32", (5,), _recovery, atol=0.015),
    Checker("task_ex4", "the rate at which the longest token is J0 (a float)", (), _longest, atol=0.005),
    Checker("probe_ex4", "log10 of the probability of separability at the probe's n and p", (),
            _cover_log10, atol=0.05, given=("n", "p")),
    Checker("attention_ex2", "the effective (k, lam, v) of the [CLS] row, k a unit vector", (64,),
            _cls_row, rtol=1e-7, atol=1e-9, given=("W_Q", "W_K", "W_V", "W_O", "c", "lam"),
            evaluate=_cls_softmax),
    Checker("beyond_open_ex1", "the limiting median ratio (a float)", (), _chi_ratio_median, rtol=0.005),
    Checker("beyond_icl_ex3", "the ratio L/d (a float)", (), _half_null_ratio, rtol=0.02),
    Checker("proofs_ex1", "a function f(a, b) = E[erf'(a + b Z)^2]", (len(_ERF_POINTS),), _erf_prime_sq,
            rtol=1e-8, evaluate=lambda f: _formula_values(f, _ERF_POINTS)),
    Checker("proofs_ex2", "a function f(lam, gamma, d) = d^2 R / d kappa^2 at the saddle",
            (len(_HESS_POINTS),), _kappa_curvature, rtol=1e-8,
            evaluate=lambda f: _formula_values(f, _HESS_POINTS)),
):
    CHECKERS[_chk.label] = _chk
