"""The statistics of the book's "k of n" statements and of its checks' error rates: the Wilson and
Newcombe intervals, Fisher's exact test and its power, the power of a Kendall trend test, and the
Gaussian union bound. :mod:`slr.claims` re-exports them (chapters call ``claims.wilson``)."""
from __future__ import annotations

import math

import numpy as np

from slr._validate import check_finite, check_int, check_interval, check_positive, check_text

__all__ = ["normal_tail", "wilson", "wilson_outside", "newcombe", "fisher_greater", "fisher_power",
           "trend_power", "all_pass_share", "all_of", "median_of", "mean_of", "more_than_half"]


def normal_tail(z: float, n: int = 1, *, sides: int = 2) -> float:
    """Union bound on the chance that any of ``n`` standard normal z-scores lies beyond ``z``: ``n``
    times P(|Z| > z) = erfc(z / sqrt 2) (``sides=2``) or P(Z > z) = erfc(z / sqrt 2) / 2 (``sides=1``).
    It bounds the error rate of a check that fails when any of n Gaussian-jittered readings of a true claim
    strays beyond ``z`` standard deviations (a union bound, exact for n = 1); it may exceed 1 (then it bounds
    nothing)."""
    z = check_finite("z", z)
    if z <= 0:
        raise ValueError(f"z must be > 0, got {z!r}")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be an integer >= 1, got {n!r}")
    if sides not in (1, 2):
        raise ValueError(f"sides must be 1 or 2, got {sides!r}")
    return float(n * math.erfc(z / math.sqrt(2)) * sides / 2)


def wilson(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """The Wilson score interval for a proportion k of n (95% by default): for "k of n runs" statements."""
    n = check_int("n", n)
    k = check_int("k", k, lo=0, hi=n)
    z = check_positive("z", check_finite("z", z))
    p, z2 = k / n, z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    lo = 0.0 if k == 0 else max(0.0, centre - half)  # exact ends: no round-off past k/n
    hi = 1.0 if k == n else min(1.0, centre + half)
    return lo, hi


def wilson_outside(n: int, p: float, lo: float, hi: float, z: float = 1.959963984540054) -> float:
    """Probability that the :func:`wilson` interval of k of n, k ~ Binomial(n, p), is not inside
    [lo, hi]: the error rate of a check "the interval of the share lies inside [lo, hi]" if the true
    share is p (exact: a sum over the n + 1 outcomes)."""
    from scipy.stats import binom
    n = check_int("n", n)
    p = check_interval("p", check_finite("p", p), 0.0, 1.0)
    lo, hi = check_finite("lo", lo), check_finite("hi", hi)
    if not lo <= hi:
        raise ValueError(f"lo must be <= hi, got lo={lo!r}, hi={hi!r}")
    ks = np.arange(n + 1)
    out = np.array([not lo <= a <= b <= hi for a, b in (wilson(int(k), n, z) for k in ks)])
    return float(binom.pmf(ks, n, p)[out].sum())


def all_pass_share(n: int, alpha: float = 0.05, allowed: int = 0) -> float:
    """The share q of exceptions that a check "all n runs pass" misses with probability alpha: all n
    independent runs pass with probability (1 - q)^n, which is alpha at q = 1 - alpha^(1/n) and below alpha
    for every larger q (e.g. n = 30: q = 0.095). With ``allowed`` exceptions tolerated (the check "at most
    ``allowed`` of n runs fail"): the q at which P(Binomial(n, q) <= allowed) = alpha (it falls with q)."""
    n = check_int("n", n)
    allowed = check_int("allowed", allowed, lo=0, hi=n - 1)
    alpha = check_interval("alpha", check_finite("alpha", alpha), 0.0, 1.0)
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    if allowed == 0:
        return float(-math.expm1(math.log(alpha) / n))
    from scipy.optimize import brentq
    from scipy.stats import binom
    return float(brentq(lambda q: binom.cdf(allowed, n, q) - alpha, 0.0, 1.0, xtol=1e-14, rtol=1e-12))


def all_of(n: int, noun: str = "runs", alpha: float = 0.05, allowed: int = 0) -> str:
    """The error rate of a claim "every one of n independent runs passes" (or, with ``allowed``, "at most
    ``allowed`` of them fail"), as the chapters state it: a claim without exception cannot fail; a share q
    of exceptions passes with probability (1 - q)^n (P(Binomial(n, q) <= allowed)), at most ``alpha`` once
    q reaches :func:`all_pass_share`."""
    check_text("noun", noun)
    q = all_pass_share(n, alpha, allowed)
    if allowed == 0:
        return (f"{n} of {n} {noun} must pass: if a share q of such {noun} were exceptions, the check would "
                f"still pass with probability (1 - q)^{n}, at most {alpha:g} once q >= {q:.2g}; without "
                f"exceptions it cannot fail")
    return (f"at least {n - allowed} of {n} {noun} must pass: if a share q of such {noun} were exceptions, the "
            f"check would still pass with probability P(Binomial({n}, q) <= {allowed}), at most {alpha:g} once "
            f"q >= {q:.2g}; without exceptions it cannot fail")


def median_of(k: int, n: int, noun: str = "runs") -> str:
    """The error rate of a claim "the median of n independent runs passes a threshold", from the k runs
    that pass it one by one: the median passes only if at least n/2 runs do (more than n/2 for odd n), so
    another n runs fail it with probability at most P(Binomial(n, p) <= floor(n/2)); stated at the
    measured share p = k / n and at the low end of its 95% :func:`wilson` interval (exact binomial sums)."""
    from scipy.stats import binom
    n = check_int("n", n)
    k = check_int("k", k, lo=0, hi=n)
    check_text("noun", noun)
    lo, hi = wilson(k, n)
    rate, rate_hat = float(binom.cdf(n // 2, n, lo)), float(binom.cdf(n // 2, n, k / n))
    return (f"{k} of {n} {noun} pass one by one (95% Wilson interval {lo:.2f} to {hi:.2f}); the median "
            f"fails only if at most {n // 2} do: another {n} {noun} fail it with probability "
            + (f"at most {rate_hat:.1g} at the measured share and " if k < n else "")
            + f"at most {rate:.1g} at the interval's low end")


def mean_of(x, threshold: float) -> str:
    """The error rate of a claim "the mean of n independent runs' values x lies on its side of
    ``threshold``": the distance z of the mean from the threshold in standard errors s / sqrt(n), and the
    chance that another n runs put their mean across it, P(T < -z / sqrt 2) with T a Student t with
    n - 1 degrees of freedom (the predictive law of a new mean minus the measured one, both with the
    standard error s / sqrt(n))."""
    from scipy.stats import t as student
    x = np.asarray(x, dtype=float)
    if x.ndim != 1 or x.size < 2:
        raise ValueError(f"x must be a 1-D array of at least 2 values, got shape {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ValueError("x must be finite (no NaN or infinity)")
    threshold = check_finite("threshold", threshold)
    se = x.std(ddof=1) / math.sqrt(x.size)
    if se == 0:
        raise ValueError("x must not be constant (its standard error is 0)")
    z = abs(x.mean() - threshold) / se
    p = float(student.cdf(-z / math.sqrt(2), x.size - 1))
    return (f"the mean is {z:.1f} standard errors (s / sqrt n, n = {x.size} runs) from {threshold:g}: "
            f"another {x.size} runs put theirs across it with probability about {p:.0e} (Student t "
            f"predictive, {x.size - 1} degrees of freedom)")


def more_than_half(k: int, n: int, what: str, z: float = 1.959963984540054) -> str:
    """The error rates of a claim "more than half of the runs do ``what``" checked as "the :func:`wilson`
    lower bound (at ``z``) of k of n exceeds 1/2": the chance that it passes if only half of the runs
    did, and the chance that another n runs fail it at the measured share k / n (left out for k = n, where
    it is 0) and at the low end of the share's 95% Wilson interval (exact binomial sums,
    :func:`wilson_outside`)."""
    n = check_int("n", n)
    k = check_int("k", k, lo=0, hi=n)
    check_text("what", what)
    conf = 1 - math.erfc(check_positive("z", check_finite("z", z)) / math.sqrt(2))
    false_pass = 1 - wilson_outside(n, 0.5, 0.5, 1.0, z)
    lo = wilson(k, n)[0]
    at_lo = (f"at most {wilson_outside(n, lo, 0.5, 1.0, z):.2g} at {lo:.2f}, the low end of the share's 95% "
             f"Wilson interval")
    fail = (f"another {n} runs fail it with probability {wilson_outside(n, k / n, 0.5, 1.0, z):.2g} at the "
            f"measured share, {k} of {n}, and {at_lo}" if k < n
            else f"with {k} of {n} measured, another {n} runs fail it with probability {at_lo}")
    return (f"the test asks the {conf:.1%} Wilson lower bound to exceed 1/2: if only half of the runs "
            f"{what}, it would pass with probability {false_pass:.2g}; {fail}")


def newcombe(k1: int, n1: int, k2: int, n2: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """Newcombe's hybrid score interval for a difference of proportions p1 - p2 (k1 of n1 against k2 of
    n2, independent; 95% by default): from the :func:`wilson` intervals (l1, u1), (l2, u2) of the two,
    p1 - p2 - sqrt((p1 - l1)^2 + (u2 - p2)^2) to p1 - p2 + sqrt((u1 - p1)^2 + (p2 - l2)^2) (Newcombe 1998,
    Statistics in Medicine 17, 873-890, method 10): for "more runs at one setting than at another"."""
    n1, n2 = check_int("n1", n1), check_int("n2", n2)
    k1, k2 = check_int("k1", k1, lo=0, hi=n1), check_int("k2", k2, lo=0, hi=n2)
    (l1, u1), (l2, u2) = wilson(k1, n1, z), wilson(k2, n2, z)  # (wilson checks z)
    p1, p2 = k1 / n1, k2 / n2
    return p1 - p2 - math.hypot(p1 - l1, u2 - p2), p1 - p2 + math.hypot(u1 - p1, p2 - l2)


def fisher_greater(k1: int, n1: int, k0: int, n0: int) -> float:
    """One-sided Fisher exact p-value that k1 of n1 runs are more often a success than k0 of n0."""
    from scipy.stats import fisher_exact
    n1, n0 = check_int("n1", n1), check_int("n0", n0)
    k1, k0 = check_int("k1", k1, lo=0, hi=n1), check_int("k0", k0, lo=0, hi=n0)
    return float(fisher_exact([[k1, n1 - k1], [k0, n0 - k0]], alternative="greater").pvalue)


def fisher_power(n: int, p1: float, p0: float, alpha: float) -> float:
    """Probability that :func:`fisher_greater` on two variants of n runs each, with true success rates
    p1 and p0, falls below alpha (exact: a sum over all (n+1)^2 outcomes)."""
    from scipy.stats import binom
    n = check_int("n", n)
    for name, x in (("p1", p1), ("p0", p0), ("alpha", alpha)):
        if not 0 <= check_finite(name, x) <= 1:
            raise ValueError(f"{name} must be in [0, 1], got {x!r}")
    ks = np.arange(n + 1)
    hit = np.array([[fisher_greater(a, n, b, n) < alpha for b in ks] for a in ks])
    return float(binom.pmf(ks, n, p1) @ hit @ binom.pmf(ks, n, p0))


def trend_power(levels, shares, n: int, alpha: float, *, alternative: str = "greater", sims: int = 1000,
                seed: int = 0) -> float:
    """Probability that the one-sided Kendall tau test of a success against its level (``scipy.stats.
    kendalltau``, ``alternative`` "greater" or "less") falls below alpha, for n runs at each of the
    ``levels`` with true success rates ``shares`` (one per level): the share of ``sims`` simulated sets
    of runs (seeded) in which it does."""
    from scipy.stats import kendalltau
    n, sims = check_int("n", n), check_int("sims", sims)
    levels, shares = np.asarray(levels, dtype=float), np.asarray(shares, dtype=float)
    if levels.ndim != 1 or shares.shape != levels.shape or levels.size < 2:
        raise ValueError(f"levels and shares must be two 1-D arrays of one length >= 2, got shapes "
                         f"{levels.shape} and {shares.shape}")
    if not np.all(np.isfinite(levels)):
        raise ValueError(f"levels must be finite, got {levels!r}")
    if not np.all((shares >= 0) & (shares <= 1)):
        raise ValueError(f"shares must be in [0, 1], got {shares!r}")
    if not 0 < check_finite("alpha", alpha) < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    if alternative not in ("greater", "less"):
        raise ValueError(f"alternative must be 'greater' or 'less', got {alternative!r}")
    x = np.repeat(levels, n)
    runs = np.random.default_rng(seed).random((sims, levels.size, n)) < shares[:, None]
    return float(np.mean([kendalltau(x, r.ravel(), alternative=alternative).pvalue < alpha for r in runs]))
