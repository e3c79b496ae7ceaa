"""The claims helper: a true claim passes, a false one raises, a control that passes fails the claim."""
import json
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from scipy.stats import binom

from slr import claims


@pytest.fixture(autouse=True)
def claims_tmp(tmp_path, monkeypatch):
    monkeypatch.setenv("SLR_CLAIMS_DIR", str(tmp_path))
    claims.start("unit")
    yield tmp_path
    claims.stop()  # no later test of this worker records into the chapter "unit" (slr.figcheck)


def square_close_to_four(**kw):
    id = kw.pop("id", "square")
    base = dict(measure=lambda x: x * x, on=2.0, control=3.0, control_note="x = 3 instead of 2",
                test=claims.close(4.0, atol=1e-12), method="exact")
    base.update(kw)
    return claims.check(id, "2 squared is 4.", **base)


def test_true_claim_passes_and_is_recorded(claims_tmp):
    c = square_close_to_four(supports="thm-1", error_rate="none: exact arithmetic")
    assert c.ok and c.value == 4.0 and c.control_value == 9.0
    rec = json.loads((claims_tmp / "unit.json").read_text())
    assert [r["id"] for r in rec] == ["square"] and rec[0]["supports"] == ["thm-1"]
    assert claims.load(claims_tmp)[0].control_note == "x = 3 instead of 2"


def test_false_claim_raises_and_is_recorded_as_failing(claims_tmp):
    with pytest.raises(claims.ClaimError, match="does not hold"):
        square_close_to_four(on=2.1)
    assert claims.load(claims_tmp)[0].holds is False


def test_audit_mode_records_failing_claims_without_raising(claims_tmp, monkeypatch):
    """SLR_CLAIMS_AUDIT=1 (benchmarks/audit_seeds.py): a false claim and a passing control are recorded as
    failing and returned, not raised; control: without it the same claims raise."""
    monkeypatch.setenv("SLR_CLAIMS_AUDIT", "1")
    c1, c2 = square_close_to_four(on=2.1), square_close_to_four(id="ctrl", control=-2.0)
    assert not c1.holds and c2.holds and not c2.control_fails
    assert [r.ok for r in claims.load(claims_tmp)] == [False, False]
    monkeypatch.setenv("SLR_CLAIMS_AUDIT", "0")
    with pytest.raises(claims.ClaimError, match="does not hold"):
        square_close_to_four(id="again", on=2.1)


def test_a_control_that_passes_fails_the_claim():
    with pytest.raises(claims.ClaimError, match="cannot fail"):
        square_close_to_four(control=-2.0)  # (-2)^2 = 4: this control cannot show anything


def test_nan_never_passes():
    for t in (claims.below(1.0), claims.above(0.0), claims.abs_below(3.0), claims.between(0, 1)):
        assert not t(np.nan) and not t([0.5, np.inf])


def test_arrays_pass_only_when_every_entry_passes():
    assert claims.abs_below(4)([-3.9, 0.0, 3.9]) and not claims.abs_below(4)([0.0, 4.0])
    assert claims.close([1.0, 2.0], rtol=1e-9)([1.0, 2.0]) and not claims.close([1.0, 2.0], rtol=1e-9)([1.0, 2.1])


def test_keyword_and_tuple_arguments():
    c = claims.check("kw", "a - b is 1.", measure=lambda a, b: a - b, on=dict(a=3, b=2), control=(2, 2),
                     control_note="a = b", test=claims.close(1, atol=0.5), method="exact")
    assert c.value == 1 and c.control_value == 0


def test_misuse_is_refused():
    with pytest.raises(ValueError, match="unique"):
        square_close_to_four(id="twice")
        square_close_to_four(id="twice")
    with pytest.raises(ValueError, match="id"):
        square_close_to_four(id="Bad Id")
    with pytest.raises(ValueError, match="test"):
        square_close_to_four(id="t2", test=lambda v: True)
    with pytest.raises(ValueError, match="control_note"):
        square_close_to_four(id="t3", control_note=" ")
    with pytest.raises(ValueError, match="atol"):
        claims.close(1.0)
    with pytest.raises(ValueError, match="lo"):
        claims.between(2, 1)


def test_start_resets_the_chapter(claims_tmp):
    square_close_to_four()
    claims.start("unit")
    assert claims.load(claims_tmp) == []
    square_close_to_four()  # the same id is allowed again after a restart


def test_check_before_start_is_refused():
    claims.start("unit")
    claims.stop()
    with pytest.raises(ValueError, match="start"):
        square_close_to_four()


def test_normal_tail_is_the_gaussian_union_bound():
    # P(|Z| > 1.959964) = 0.05 and P(Z > 1.644854) = 0.05, from scipy's normal quantiles
    from scipy.stats import norm
    assert claims.normal_tail(norm.ppf(0.975)) == pytest.approx(0.05, rel=1e-12)
    assert claims.normal_tail(norm.ppf(0.95), sides=1) == pytest.approx(0.05, rel=1e-12)
    assert claims.normal_tail(4.0, 30) == pytest.approx(30 * 2 * norm.sf(4.0), rel=1e-12)
    # simulated: the share of 200 000 draws of 5 z-scores with some |z| > 2.5 is below the bound, above 0.8 of it
    z = np.random.default_rng(0).standard_normal((200_000, 5))
    share = (np.abs(z) > 2.5).any(axis=1).mean()
    assert share <= claims.normal_tail(2.5, 5) and share > 0.8 * claims.normal_tail(2.5, 5)
    for bad in ({"z": 0.0}, {"z": float("nan")}, {"z": 3.0, "n": 0}, {"z": 3.0, "n": 2.5},
                {"z": 3.0, "sides": 3}):
        z0 = bad.pop("z")
        with pytest.raises(ValueError):
            claims.normal_tail(z0, **bad)


def test_wilson_interval_known_values():
    # 0 of 10: the upper end is z^2 / (n + z^2) = 3.8415 / 13.8415
    lo, hi = claims.wilson(0, 10)
    assert lo == 0.0 and math.isclose(hi, 1.959963984540054**2 / (10 + 1.959963984540054**2), rel_tol=1e-12)
    lo, hi = claims.wilson(5, 10)
    assert math.isclose(lo + hi, 1.0, rel_tol=1e-12) and 0.23 < lo < 0.24
    with pytest.raises(ValueError, match="k"):
        claims.wilson(11, 10)
    for z in (0.0, -1.96, math.nan, math.inf):  # a z <= 0 would flip or empty the interval
        with pytest.raises(ValueError, match="^z must"):
            claims.wilson(5, 10, z)


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 200), st.integers(1, 200))
def test_wilson_contains_the_proportion(k, n):
    k = min(k, n)
    lo, hi = claims.wilson(k, n)
    assert 0.0 <= lo <= k / n <= hi <= 1.0


def test_wilson_outside_is_the_binomial_rate_of_intervals_leaving_a_range():
    """claims.wilson_outside: 0 when the range is [0, 1] (every interval is inside), 1 when it is a point
    (no interval of positive width fits: the control); at n = 40, p = 0.3 against [0.2, 0.8], the share
    of 20 000 seeded Binomial(40, 0.3) draws whose interval leaves the range is within 4.5 binomial
    standard errors of it (a true claim fails with probability 7e-6). Bad input raises."""
    assert claims.wilson_outside(30, 0.4, 0.0, 1.0) == 0.0
    assert claims.wilson_outside(30, 0.4, 0.5, 0.5) == pytest.approx(1.0, abs=1e-12)
    q = claims.wilson_outside(40, 0.3, 0.2, 0.8)
    ks = np.random.default_rng(0).binomial(40, 0.3, 20_000)
    freq = np.mean([not 0.2 <= a <= b <= 0.8 for a, b in (claims.wilson(int(k), 40) for k in ks)])
    assert 0.05 < q < 0.95 and abs(freq - q) < 4.5 * math.sqrt(q * (1 - q) / 20_000)
    for args, name in (((0, 0.5, 0.2, 0.8), "^n must"), ((10, 1.5, 0.2, 0.8), "^p must"),
                       ((10, 0.5, 0.8, 0.2), "^lo must"), ((10, 0.5, math.nan, 0.8), "^lo must")):
        with pytest.raises(ValueError, match=name):
            claims.wilson_outside(*args)


def test_all_pass_share_is_the_exception_share_missed_with_probability_alpha():
    """claims.all_pass_share(n, alpha): (1 - q)^n = alpha (n = 30: q = 0.0950, n = 1: q = 1 - alpha); in
    20 000 seeded sets of 30 runs with that share of exceptions, the share of sets without exception is
    within 4.5 binomial standard errors of 0.05 (a true claim fails with probability 7e-6), and at half
    that share of exceptions it is not (the control: 0.23 expected, 29 standard errors away). claims.all_of
    states n and q. Bad input raises."""
    q = claims.all_pass_share(30)
    assert q == pytest.approx(0.09503, abs=1e-5) and (1 - q) ** 30 == pytest.approx(0.05, rel=1e-12)
    assert claims.all_pass_share(1, 0.01) == pytest.approx(0.99, rel=1e-12)
    rng = np.random.default_rng(0)
    se = 4.5 * math.sqrt(0.05 * 0.95 / 20_000)
    clean = lambda share: np.mean(np.all(rng.random((20_000, 30)) >= share, axis=1))
    assert abs(clean(q) - 0.05) < se
    assert abs(clean(q / 2) - 0.05) > se
    text = claims.all_of(30, "runs")
    assert "30 of 30 runs" in text and "q >= 0.095" in text and "(1 - q)^30" in text
    # allowed exceptions: at most 3 of 384 fail with probability alpha at q3 (exact binomial sum, and the
    # same simulation); allowed=0 is the closed form above, and the control share q3 / 2 is not missed at 0.05
    q3 = claims.all_pass_share(384, 0.05, allowed=3)
    assert binom.cdf(3, 384, q3) == pytest.approx(0.05, rel=1e-9) and 0.015 < q3 < 0.025
    assert claims.all_pass_share(30, 0.05, allowed=0) == q
    few = lambda share: np.mean(rng.binomial(384, share, 20_000) <= 3)
    assert abs(few(q3) - 0.05) < se
    assert abs(few(q3 / 2) - 0.05) > se
    text3 = claims.all_of(384, "runs", allowed=3)
    assert "at least 381 of 384 runs" in text3 and f"q >= {q3:.2g}" in text3 and "<= 3)" in text3
    for args, name in (((0,), "^n must"), ((10, 0.0), "^alpha must"), ((10, 1.0), "^alpha must"),
                       ((10, math.nan), "^alpha must"), ((10, 0.05, 10), "^allowed must"),
                       ((10, 0.05, -1), "^allowed must")):
        with pytest.raises(ValueError, match=name):
            claims.all_pass_share(*args)
    with pytest.raises(ValueError, match="^noun must"):
        claims.all_of(10, " ")


def test_median_of_bounds_the_chance_that_a_median_fails():
    """claims.median_of(k, n): the median of n values fails a threshold only if at most n/2 pass it; in
    20 000 seeded sets of 20 runs, each passing with probability p (the low end of the 95% Wilson interval
    of 14 of 20), the share of sets whose median fails is at most the stated bound plus 4.5 binomial
    standard errors (a true statement fails with probability 7e-6), and it is at least P(Binomial <
    n/2) minus as much: the bound is tight to one term. The control: the bound at the interval's
    high end is far below the simulated share. Bad input raises."""
    from scipy.stats import binom
    lo, hi = claims.wilson(14, 20)
    text = claims.median_of(14, 20)
    bound = float(binom.cdf(10, 20, lo))
    assert f"14 of 20 runs" in text and f"at most {bound:.1g} at the interval's low end" in text
    assert f"{float(binom.cdf(10, 20, 0.7)):.1g} at the measured share" in text
    assert "measured share" not in claims.median_of(20, 20)             # 0 there: not stated
    rng = np.random.default_rng(1)
    x = np.where(rng.random((20_000, 20)) < lo, 1.0, -1.0)       # pass: 1 > 0, fail: -1
    share = np.mean(np.median(x, axis=1) <= 0)
    se = 4.5 * math.sqrt(bound * (1 - bound) / 20_000)
    assert float(binom.cdf(9, 20, lo)) - se < share <= bound + se
    assert share > float(binom.cdf(10, 20, hi)) + se               # control
    for args, name in (((3, 2), "^k must"), ((1, 0), "^n must"), ((-1, 5), "^k must")):
        with pytest.raises(ValueError, match=name):
            claims.median_of(*args)
    with pytest.raises(ValueError, match="^noun must"):
        claims.median_of(1, 2, "")


def test_mean_of_is_the_student_predictive_chance_of_crossing():
    """claims.mean_of(x, t): z = |mean - t| / (s / sqrt n) and P(T_{n-1} < -z / sqrt 2). A new mean m' of
    n runs crosses t = m - z s / sqrt n iff u = (m' - m) / (s sqrt(2 / n)) < -z / sqrt 2, and u is a
    Student t with n - 1 degrees of freedom. Simulated: 200 000 seeded pairs of Gaussian samples of 10:
    the share of u below -2 / sqrt 2 is within 4.5 binomial standard errors of the stated probability
    at z = 2 (a true statement fails with probability 7e-6). The control: the plug-in normal P(Z < -z)
    at z = 2, which ignores the measured mean's own error and the error of s, is not. Bad input raises."""
    from scipy.stats import norm, t as student
    x = np.array([0.8, 0.9, 0.85, 0.95, 0.75, 0.88, 0.92, 0.81, 0.9, 0.86])
    z = abs(x.mean() - 0.7) / (x.std(ddof=1) / math.sqrt(10))
    text = claims.mean_of(x, 0.7)
    assert f"{z:.1f} standard errors" in text and f"{student.cdf(-z / math.sqrt(2), 9):.0e}" in text
    a, b = np.random.default_rng(2).normal(size=(2, 200_000, 10))
    u = (b.mean(1) - a.mean(1)) / (a.std(1, ddof=1) * math.sqrt(2 / 10))
    share = np.mean(u < -2 / math.sqrt(2))
    p = float(student.cdf(-2 / math.sqrt(2), 9))
    se = 4.5 * math.sqrt(p * (1 - p) / u.size)
    assert abs(share - p) < se
    assert abs(share - float(norm.cdf(-2.0))) > se             # control
    for args, name in (((np.ones(3), 0.5), "^x must not be constant"), ((np.ones(1), 0.5), "^x must be"),
                       ((np.array([1.0, np.nan]), 0.5), "^x must be finite"),
                       ((np.array([1.0, 2.0]), math.inf), "^threshold must")):
        with pytest.raises(ValueError, match=name):
            claims.mean_of(*args)


def test_more_than_half_states_both_error_rates():
    """claims.more_than_half(k, n, what): at n = 30 and z = 1.96 the Wilson lower bound exceeds 1/2 from
    k = 21 on, so a share of 1/2 passes with P(Binomial(30, 1/2) >= 21) = 0.021 and, at the measured share
    23 of 30, another 30 runs fail with P(Binomial(30, 23/30) <= 20) = 0.14, and with at most that sum at
    the low end of the share's 95% Wilson interval (all exact; at 30 of 30 only the latter, the former
    being 0); the control: the rates of the 99.9% bound (z = 3.29, passing from k = 25) differ. Bad input
    raises."""
    from scipy.stats import binom
    assert claims.wilson(20, 30)[0] < 0.5 < claims.wilson(21, 30)[0]
    text = claims.more_than_half(23, 30, "recovered")
    fp, tf = float(binom.sf(20, 30, 0.5)), float(binom.cdf(20, 30, 23 / 30))
    assert "95.0% Wilson lower bound" in text and "if only half of the runs recovered" in text
    assert f"probability {fp:.2g};" in text and f"probability {tf:.2g} at the measured share" in text
    strict = claims.more_than_half(23, 30, "recovered", z=3.29)
    assert "99.9% Wilson" in strict and f"{float(binom.sf(24, 30, 0.5)):.2g};" in strict
    assert f"probability {tf:.2g} at the measured share" not in strict        # control
    lo = claims.wilson(23, 30)[0]
    assert f"at most {float(binom.cdf(20, 30, lo)):.2g} at {lo:.2f}" in text
    full = claims.more_than_half(30, 30, "recovered")
    lo = claims.wilson(30, 30)[0]
    assert "measured share" not in full and f"at most {float(binom.cdf(20, 30, lo)):.2g} at {lo:.2f}" in full
    for args, name in (((31, 30, "x"), "^k must"), ((3, 0, "x"), "^n must"), ((3, 30, " "), "^what must")):
        with pytest.raises(ValueError, match=name):
            claims.more_than_half(*args)


def test_newcombe_published_values_and_coverage():
    """claims.newcombe against Newcombe (1998), Stat. Med. 17, 873-890, Table II, method 10 (hybrid score
    without continuity correction), quoted to 4 decimals: 56/70 - 48/80, 9/10 - 3/10, 5/56 - 0/29,
    0/10 - 0/20; control: the Wald interval of 56/70 - 48/80 misses the published ends by 6e-3. Its
    coverage, computed exactly by summing over the 49 x 49 outcomes at p1 = 0.5, p2 = 0.3, n = 48, is
    near 95%; control: the same interval at z = 1 (a 68% interval) covers far less. Bad input raises."""
    from scipy import stats
    published = {(56, 70, 48, 80): (0.0524, 0.3339), (9, 10, 3, 10): (0.1705, 0.8090),
                 (5, 56, 0, 29): (-0.0381, 0.1926), (0, 10, 0, 20): (-0.1611, 0.2775)}
    for args, ends in published.items():
        assert np.allclose(claims.newcombe(*args), ends, atol=5e-5, rtol=0), args
    p1, p2, n1, n2 = 0.8, 0.6, 70, 80
    wald = (p1 - p2) + np.array([-1, 1]) * 1.959963984540054 * math.sqrt(p1 * (1 - p1) / n1
                                                                        + p2 * (1 - p2) / n2)
    assert not np.allclose(wald, published[(56, 70, 48, 80)], atol=5e-5, rtol=0)
    lo, hi = claims.newcombe(0, 10, 0, 10)
    assert lo == -hi and claims.newcombe(3, 10, 9, 10) == pytest.approx((-0.8090, -0.1705), abs=5e-5)

    def coverage(z, n=48, q1=0.5, q2=0.3):
        w = stats.binom.pmf(np.arange(n + 1), n, q1)[:, None] * stats.binom.pmf(np.arange(n + 1), n, q2)
        hit = np.array([[lo <= q1 - q2 <= hi for lo, hi in (claims.newcombe(a, n, b, n, z)
                                                            for b in range(n + 1))]
                        for a in range(n + 1)])
        return float((w * hit).sum())

    assert 0.93 < coverage(1.959963984540054) < 0.97 and coverage(1.0) < 0.75
    for args, name in (((11, 10, 0, 10), "^k1 must"), ((1, 10, 0, 0), "^n2 must"),
                       ((1, 10, 1.5, 10), "^k2 must"), ((1, 0, 0, 10), "^n1 must")):
        with pytest.raises(ValueError, match=name):
            claims.newcombe(*args)


def test_trend_power_of_a_kendall_test():
    """claims.trend_power: a strong trend (shares 0.9 to 0.1, 30 runs per level) is found nearly always;
    control: with no trend (equal shares) the test rejects at about its level (1000 sets: within 4.5
    binomial standard deviations of 0.05, or below: ties make Kendall's test conservative). Seeded:
    the same value twice. Bad input raises ValueError naming the argument."""
    lv = [90.0, 60.0, 45.0, 30.0]
    strong = claims.trend_power(lv, [0.9, 0.6, 0.4, 0.1], 30, 0.05)
    flat = claims.trend_power(lv, [0.5] * 4, 30, 0.05)
    assert strong > 0.99 and flat < 0.05 + 4.5 * math.sqrt(0.05 * 0.95 / 1000)
    assert claims.trend_power(lv, [0.1, 0.4, 0.6, 0.9], 30, 0.05, alternative="less") > 0.99
    assert claims.trend_power(lv, [0.7, 0.5, 0.5, 0.3], 10, 0.01, seed=3) == \
        claims.trend_power(lv, [0.7, 0.5, 0.5, 0.3], 10, 0.01, seed=3)
    for kw, name in (({"shares": [0.5, 1.2, 0.5, 0.5]}, "^shares"), ({"n": 0}, "^n must"),
                     ({"alpha": 1.0}, "^alpha"), ({"alternative": "two"}, "^alternative"),
                     ({"levels": [1.0]}, "^levels"), ({"sims": 0}, "^sims must"),
                     ({"levels": [90.0, math.nan, 45.0, 30.0]}, "^levels must be finite")):
        args = dict(levels=lv, shares=[0.5] * 4, n=5, alpha=0.05)
        args.update(kw)
        with pytest.raises(ValueError, match=name):
            claims.trend_power(args.pop("levels"), args.pop("shares"), args.pop("n"),
                               args.pop("alpha"), **args)


def test_fisher_greater_and_its_power():
    """13 of 20 against 1 of 20: the p-value by the hypergeometric sum written out (one-sided: tables
    at least as extreme, a = 13..14 with 14 successes in all); the power of the test equals the
    monte-carlo frequency of p < alpha, and with equal rates it is at most alpha (the control)."""
    from math import comb
    direct = sum(comb(20, a) * comb(20, 14 - a) for a in range(13, 15)) / comb(40, 14)
    assert claims.fisher_greater(13, 20, 1, 20) == pytest.approx(direct, rel=1e-12)
    assert claims.fisher_greater(1, 20, 13, 20) > 0.99  # the swapped test
    rng = np.random.default_rng(0)
    a, b = rng.binomial(12, 0.6, 4000), rng.binomial(12, 0.1, 4000)
    freq = np.mean([claims.fisher_greater(int(x), 12, int(y), 12) < 0.05 for x, y in zip(a, b)])
    power = claims.fisher_power(12, 0.6, 0.1, 0.05)
    assert abs(freq - power) < 4 * math.sqrt(power * (1 - power) / 4000)  # 4 s.e.: error rate 6e-5
    assert claims.fisher_power(12, 0.3, 0.3, 0.05) <= 0.05 < power
    with pytest.raises(ValueError, match="alpha"):
        claims.fisher_power(12, 0.6, 0.1, 1.5)
    for args, name in (((21, 20, 1, 20), "^k1 must"), ((1, 20, 1, 0), "^n0 must"),
                       ((1, 20, -1, 20), "^k0 must")):
        with pytest.raises(ValueError, match=name):
            claims.fisher_greater(*args)
    with pytest.raises(ValueError, match="^n must"):
        claims.fisher_power(0, 0.6, 0.1, 0.05)
