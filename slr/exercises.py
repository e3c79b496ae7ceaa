"""Self-checking exercises: ``check(label, answer)`` says whether a student's answer is right.

Each computational exercise with a numerical answer (a number, an array, or a formula given as a Python
function) has a *checker*: it computes the expected value **at call time** from the library's own
functions (never from a number typed here), compares the answer with it within a stated tolerance, and
prints ``right`` or ``wrong`` without printing the expected value. In a chapter::

    from slr import exercises
    exercises.check("oracle_ex2", [lam_400, lam_1e4, lam_1e6])     # -> True or False, and a line
    exercises.describe("oracle_ex2")                                # what to pass, and the tolerance

Some answers depend on the exercise's inputs (random matrices, the probe's sizes): they are passed
as keyword arguments, e.g. ``exercises.check("probe_ex4", x, n=n, p=p)``. An unknown label, a
missing or unexpected input, or an answer that is not finite or has the wrong shape raises
``ValueError`` naming the argument.

How an answer is compared with the reference (tolerances, formula answers) is :mod:`slr.checker`'s;
this module registers one :class:`slr.checker.Checker` per exercise, with its reference computation.
"""
from __future__ import annotations

import functools
import math

import jax
import numpy as np
from scipy import special

from slr import baselines, gaussian, landscape, manifold, predictors, risk, task
from slr._validate import check_int
from slr.checker import Checker, answer_array, formula_values

__all__ = ["Checker", "CHECKERS", "check", "describe", "labels"]

_GAMMA = math.sqrt(0.5)   # the paper's gamma^2 = 1/2
_N = 4001                 # points of the lam grids (one array shape: jax compiles each op once)


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
    ok = chk.verdict(answer, **given)
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


CHECKERS: dict = {}   # label -> Checker, filled by the decorator below


def _checker(label, answer, shape=(), *, given=(), **options):
    """Register the decorated reference computation as ``label``'s checker (memoised when it has no
    inputs: a reference is deterministic)."""
    def register(f):
        CHECKERS[label] = Checker(label, answer, shape, f if given else functools.cache(f), given=given,
                                  **options)
        return f
    return register


# ---- reference computations (all at call time, from slr's functions) ----

_checker("linear_ex3", "the exact risk of the fitted affine predictor (a float)", rtol=0.02, atol=1e-9,
         upper_only=True)(   # Proposition 3: the minimum of every affine predictor's risk (linear_ex1)
    lambda: risk.linear_risk(gamma=_GAMMA, L=4, eps=0.1, p=np.array([0.55, 0.25, 0.15, 0.05])))
_checker("task_ex2", "the 5 recovery rates for d = 2, 4, 8, 16, 32", (5,), atol=0.015)(  # quadrature
    lambda: 1.0 - task.argmax_failure(d=np.array([2.0, 4.0, 8.0, 16.0, 32.0]), L=10, gamma=_GAMMA))
_checker("task_ex4", "the rate at which the longest token is J0 (a float)", atol=0.005)(  # quadrature
    lambda: task.norm_rule_rates(d=400, L=10, gamma=1.0)[0])
_checker("beyond_open_ex1", "the limiting median ratio (a float)", rtol=0.005)(  # sqrt(3/2 F_{3,2})
    lambda: math.sqrt(1.5 * special.fdtri(3, 2, 0.5)))


def _oracle(lams, *, d, L, eps):
    """Theorem 1's oracle risk eps^2 + signal(lam) + (L - 1) zeta(0; lam) from slr's two parts (the
    signal part by quadrature, without cancellation)."""
    signal = risk.oracle_signal_part(lam=lams, gamma=_GAMMA, d=d)
    return eps ** 2 + signal + (L - 1) * np.asarray(gaussian.zeta0(np.asarray(lams)))


def _bisect(below, lo, hi):
    """The largest integer in [lo, hi) where the monotone predicate ``below`` holds (it holds at lo)."""
    while hi - lo > 1:
        lo, hi = ((lo + hi) // 2, hi) if below((lo + hi) // 2) else (lo, (lo + hi) // 2)
    return lo


@_checker("landscape_ex1", "lambda_c at d = 400 (a float)", rtol=0.02)
def _lambda_c(d=400):
    """The exact crossover lam_c(400): where the role-swapped point's risk (landscape's closed form at
    theta*, without the (L - 1) zeta(0; lam) common to both) meets the oracle's; the last sign change
    on a grid, refined on finer grids."""
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


@_checker("linear_ex4", "the largest L (an integer)", rtol=0.02)
def _largest_L(d=1e4, eps=0.1):
    """The largest L with min_lam R_lam(k*, v*) < R_lin / 2 (fine lam grid; the oracle risk is affine
    in L, and the gap between the two sides grows with L)."""
    lams = np.geomspace(1e-4, 10.0, _N)
    base = _oracle(lams, d=d, L=1, eps=eps)
    noise = _oracle(lams, d=d, L=2, eps=eps) - base                    # zeta(0; lam), one noise token
    lin = lambda L: risk.linear_risk(gamma=_GAMMA, L=L, eps=eps)
    return _bisect(lambda L: np.min(base + (L - 1) * noise) < lin(L) / 2, 1, 1_000_000)


@_checker("oracle_ex2", "[lambda* at d = 400, 1e4, 1e6] (3 floats)", (3,), rtol=0.01)
def _lam_star():
    """argmin of the oracle risk for d = 400, 1e4, 1e6: a grid, then finer grids around its minimum."""
    out = []
    for d in (400.0, 1e4, 1e6):
        lams = np.geomspace(1e-4, 3.0, _N)
        for _ in range(2):
            i = int(np.argmin(_oracle(lams, d=d, L=10, eps=0.1)))
            lams = np.geomspace(lams[max(i - 1, 0)], lams[min(i + 1, lams.size - 1)], _N)
        out.append(lams[_N // 2])
    return np.array(out)


@_checker("pgd_ex2", "the number of steps (an integer)", rtol=0.06)
def _pgd_steps():
    """The first step at which the exact map of Lemma 7 (lam = 0.1, alpha = 4e-3) from (0.98, 1)
    reaches kappa >= 0.999."""
    _, ka, _ = manifold.manifold_pgd(0.98, 1.0, lam=0.1, alpha=4e-3, steps=60_000, gamma=_GAMMA, d=400,
                                     L=10, log_every=1)
    return float(np.argmax(np.asarray(ka) >= 0.999))


@_checker("probe_ex4", "log10 of the probability of separability at the probe's n and p", atol=0.05,
          given=("n", "p"))
def _cover_log10(n, p):
    """log10 of Cover's probability 2 sum_{k <= p} C(n - 1, k) / 2^n, summed in logs."""
    n, p = check_int("n", n, lo=2), check_int("p", p)
    k = np.arange(min(p, n - 1) + 1)
    logc = special.gammaln(n) - special.gammaln(k + 1) - special.gammaln(n - k)
    return (math.log(2) + special.logsumexp(logc) - n * math.log(2)) / math.log(10)


def _cls_inputs(W_Q, W_K, W_V, W_O, c, lam):
    """attention_ex2's inputs, checked, and fixed Gaussian test sequences X of shape (64, 10, d)."""
    d, p = answer_array(W_Q, (None, None), "W_Q").shape
    mats = [answer_array(W, (d, p), name) for W, name in ((W_Q, "W_Q"), (W_K, "W_K"), (W_V, "W_V"))]
    mats += [answer_array(W_O, (p, 1), "W_O"), answer_array(c, (d,), "c")]
    if not answer_array(lam, (), "lam") > 0:
        raise ValueError(f"lam must be > 0, got {lam!r}")
    return np.random.default_rng(0).standard_normal((64, 10, d)), mats, float(lam)


def _cls_softmax(answer, **given):
    """The softmax predictor with the answer's (k, lam', v) on the test sequences (NaN, i.e. wrong,
    when k is not a unit vector)."""
    X, (W_Q, *_), _ = _cls_inputs(**given)
    if not isinstance(answer, (tuple, list)) or len(answer) != 3:
        raise ValueError(f"answer must be a tuple (k, lam, v), got {type(answer).__name__}")
    shapes = ((W_Q.shape[0],), (), (W_Q.shape[0],))
    k, lam, v = (answer_array(x, s, f"answer[{i}]") for i, (x, s) in enumerate(zip(answer, shapes)))
    if abs(np.linalg.norm(k) - 1) > 1e-8:
        return np.full(X.shape[0], np.nan)
    return np.asarray(predictors.attention_softmax(X, k, v, float(lam)))


@_checker("attention_ex2", "the effective (k, lam, v) of the [CLS] row, k a unit vector", (64,),
          rtol=1e-7, atol=1e-9, given=("W_Q", "W_K", "W_V", "W_O", "c", "lam"), evaluate=_cls_softmax)
def _cls_row(**given):
    """The [CLS] row of attention_layer (Eq. 5) on the test sequences."""
    X, (W_Q, W_K, W_V, W_O, c), lam = _cls_inputs(**given)
    H = np.broadcast_to(c, (X.shape[0], 1, c.size))
    return np.asarray(predictors.attention_layer(H, X, W_Q, W_K, W_V, W_O, lam)[:, 0, 0])


@_checker("beyond_icl_ex3", "the ratio L/d (a float)", rtol=0.02)
def _half_null_ratio(d=1_000_000):
    """L/d at which linear attention's best excess risk reaches gamma^2 / 2, at a large d."""
    excess = lambda L: risk.linear_attention_best(gamma=_GAMMA, d=d, L=L)[1]
    return _bisect(lambda L: excess(L) < _GAMMA ** 2 / 2, 1, 100 * d) / d


_ERF_POINTS = ((0.0, 0.5), (0.7, 0.3), (-1.2, 1.0), (2.0, 0.1), (0.3, 2.0))
_HESS_POINTS = ((0.1, _GAMMA, 400.0), (0.5, 1.0, 50.0), (0.05, 2.0, 1000.0))


@_checker("proofs_ex1", "a function f(a, b) = E[erf'(a + b Z)^2]", (5,), rtol=1e-8,
          evaluate=lambda f: formula_values(f, _ERF_POINTS))
def _erf_prime_sq():
    """E[erf'(a + b Z)^2] by adaptive quadrature at the test points."""
    sq = lambda x: (2 / math.sqrt(math.pi) * math.exp(-x * x)) ** 2
    return np.array([gaussian.expect_normal(lambda z: sq(a + b * z)) for a, b in _ERF_POINTS])


def _h_kk(lam, g, d):
    """d^2 R / d kappa^2 at (0, 0) on M: by Lemma 6, R depends on kappa through
    g^2 zeta(lam sqrt(d/2) kappa; lam g), so it is g^2 lam^2 (d/2) zeta_aa(0; lam g) (G7)."""
    return g ** 2 * lam ** 2 * d / 2 * float(gaussian.zeta2(0.0, lam * g))


_checker("proofs_ex2", "a function f(lam, gamma, d) = d^2 R / d kappa^2 at the saddle", (3,), rtol=1e-8,
         evaluate=lambda f: formula_values(f, _HESS_POINTS))(
    lambda: np.array([_h_kk(*pt) for pt in _HESS_POINTS]))


@_checker("pgd_ex3", "[1 - alpha h_+, 1 - alpha h_-] at lam = 0.1, alpha = 4e-3 (ascending)", (2,),
          atol=1e-6)
def _saddle_first_order(lam=0.1, alpha=4e-3, d=400):
    """1 - alpha h for the eigenvalues h of the Hessian of R on M at (0, 0), with
    h_kn = -2 gamma^2 lam sqrt(d/2) phi_a(0; lam gamma) (Lemma 6's -2 nu gamma^2 phi; G2). The exact
    Jacobian of the map (manifold.map_jacobian) agrees to about 1e-8."""
    h_kn = -2 * _GAMMA ** 2 * lam * math.sqrt(d / 2) * float(gaussian.phi1(0.0, lam * _GAMMA))
    H = np.array([[_h_kk(lam, _GAMMA, d), h_kn], [h_kn, 0.0]])
    return np.sort(1 - alpha * np.linalg.eigvalsh(H))


@_checker("related_ex3", "the number of parameters of the tied MLP (an integer)", atol=0.5,
          given=("d", "width"))
def _tied_mlp_size(d, width):
    """The parameters of one block of slr.baselines' diagonal MLP, shared by all tokens."""
    d, width = check_int("d", d), check_int("width", width)
    return baselines.n_params(baselines.diag_mlp_init(jax.random.key(0), L=1, d=d, width=width))
