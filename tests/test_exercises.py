"""slr.exercises: every checker accepts the right answer, obtained here by an independent route (the
solution's own computation, another formula, quadrature, finite differences or Monte Carlo), rejects
the answer perturbed by ten times its tolerance (the negative control), and refuses bad input.

The independent routes are written with numpy/scipy (no jax program to compile), to keep the file fast.
"""
import math

import numpy as np
import pytest
from scipy import integrate, optimize, special

from slr import exercises as ex

G = math.sqrt(0.5)


def oracle_np(lam, *, d, L, eps, kappa=1.0):
    """Theorem 1 by quadrature: eps^2 + gamma^2 E[(1 - erf(lam sqrt(d/2) + lam gamma Z))^2]
    + (L - 1) (2/pi) arcsin(2 lam^2 / (1 + 2 lam^2))  (G9). With kappa: the risk on M at (kappa, 1)
    (Lemma 6 with nu = 1: the signal token's argument is lam sqrt(d/2) kappa)."""
    a, b = lam * math.sqrt(d / 2) * kappa, lam * G
    f = lambda z: special.erfc(a + b * z) ** 2 * math.exp(-z * z / 2) / math.sqrt(2 * math.pi)
    signal = integrate.quad(f, -40, 40, points=[-a / b], epsabs=1e-15, epsrel=1e-12, limit=200)[0]
    return eps ** 2 + G ** 2 * signal + (L - 1) * 2 / math.pi * math.asin(2 * lam ** 2 / (1 + 2 * lam ** 2))


def best_oracle_np(*, d, L, eps):
    """(lam*, min risk) by bounded minimisation in log lam."""
    r = optimize.minimize_scalar(lambda u: oracle_np(math.exp(u), d=d, L=L, eps=eps),
                                 bounds=(math.log(1e-4), math.log(3.0)), method="bounded",
                                 options=dict(xatol=1e-9))
    return math.exp(r.x), r.fun


def sample_np(rng, n, *, d, L, gamma, eps, p):
    """The task with k* = e_1, v* = e_2 (numpy): X_l ~ N(0, I), X_J0 = sqrt(d/2) k* + gamma N(0, I),
    Y = X_J0^T v* + eps xi, J0 ~ p."""
    X = rng.standard_normal((n, L, d))
    J0 = rng.choice(L, size=n, p=p)
    X[np.arange(n), J0] *= gamma
    X[np.arange(n), J0, 0] += math.sqrt(d / 2)
    y = X[np.arange(n), J0, 1] + eps * rng.standard_normal(n)
    return X, y, J0


def cover_exact(n, p):
    """log10 of 2 sum_{k <= p} C(n - 1, k) / 2^n with Python's exact integers."""
    return math.log10(2 * sum(math.comb(n - 1, k) for k in range(p + 1))) - n * math.log10(2)


def right_landscape_ex1():
    # the solution's leading-order equation erfc(x)^2 = 8 gamma^2 x^2 / (pi d), lam_c = x / sqrt(d/2)
    x = optimize.brentq(lambda x: special.erfc(x) ** 2 - 8 * G ** 2 * x ** 2 / (math.pi * 400), 1e-6, 10)
    return x / math.sqrt(200)


def right_linear_ex3():
    # the solution: least squares with an intercept on 50 000 sequences (as sklearn's LinearRegression,
    # here by numpy's lstsq), then the exact risk of the fitted affine predictor
    from slr import risk
    p = np.array([0.55, 0.25, 0.15, 0.05])
    X, y, _ = sample_np(np.random.default_rng(8), 50_000, d=10, L=4, gamma=G, eps=0.1, p=p)
    coef = np.linalg.lstsq(np.column_stack([np.ones(50_000), X.reshape(50_000, -1)]), y, rcond=None)[0]
    ks, vs = np.eye(10)[0], np.eye(10)[1]
    return risk.affine_risk(coef[1:].reshape(4, 10), coef[0], ks, vs, gamma=G, eps=0.1, p=p)


def right_linear_ex4():
    # the answer L is the last L where the best oracle risk is below half the linear risk: check both
    # sides of it with quadrature and a bounded minimiser (another route than the checker's grid)
    L = ex.CHECKERS["linear_ex4"].expected()
    lin = lambda L: 0.01 + G ** 2 * (L - 1) / (L + G ** 2 - 1)          # Proposition 3, uniform p
    assert best_oracle_np(d=1e4, L=L, eps=0.1)[1] < lin(L) / 2
    assert best_oracle_np(d=1e4, L=L + 1, eps=0.1)[1] >= lin(L + 1) / 2
    return L


def right_oracle_ex2():
    return [best_oracle_np(d=d, L=10, eps=0.1)[0] for d in (400, 1e4, 1e6)]


def right_pgd_ex2():
    # the solution's linearisation phi_{t+1} = (1 - alpha h_phi) phi_t, with h_phi the second derivative
    # of R(cos phi, 1) at phi = 0 by central finite differences of the risk on M (quadrature)
    h = 1e-3
    r = [oracle_np(0.1, d=400, L=10, eps=0.0, kappa=math.cos(x)) for x in (-h, 0, h)]
    h_phi = (r[0] - 2 * r[1] + r[2]) / h ** 2
    return math.log(math.acos(0.98) / math.acos(0.999)) / -math.log1p(-4e-3 * h_phi)


def right_task_ex2():
    # the solution: Gauss-Hermite quadrature of E_Z[Phi(sqrt(d/2) + gamma Z)^(L-1)]
    z, w = np.polynomial.hermite_e.hermegauss(80)
    w = w / w.sum()
    return [np.sum(w * special.ndtr(math.sqrt(d / 2) + G * z) ** 9) for d in (2, 4, 8, 16, 32)]


def right_task_ex4():
    # the solution's Monte Carlo: 2000 sequences at gamma = 1, d = 400
    X, _, J0 = sample_np(np.random.default_rng(1), 2000, d=400, L=10, gamma=1.0, eps=0.0,
                         p=np.full(10, 0.1))
    return np.mean(np.argmax((X ** 2).sum(-1), axis=1) == J0)


def right_beyond_open_ex1():
    # Monte Carlo of sqrt(chi2_3 / chi2_2): the median's standard error is about 1.3e-3 (0.1%)
    rng = np.random.default_rng(0)
    return np.median(np.sqrt(rng.chisquare(3, 400_000) / rng.chisquare(2, 400_000)))


def right_beyond_icl_ex3():
    # the solution: L - 1 + gamma^4 = gamma^2 d / 2 at d = 400
    return (1 - G ** 4 + G ** 2 * 400 / 2) / 400


def right_pgd_ex3():
    # 1 - alpha h_+- with the Hessian of R on M at (0, 0) by finite differences of quadratures: on M,
    # R = const + gamma^2 (1 - 2 nu E[erf(a + b Z)] + E[erf(a + b Z)^2]), a = lam sqrt(d/2) kappa
    lam, d, h = 0.1, 400, 1e-3

    def r(kappa, nu):
        a, b = lam * math.sqrt(d / 2) * kappa, lam * G
        e = lambda f: integrate.quad(lambda z: f(a + b * z) * math.exp(-z * z / 2) / math.sqrt(2 * math.pi),
                                     -40, 40, epsabs=1e-15, epsrel=1e-13, limit=200)[0]
        return G ** 2 * (1 - 2 * nu * e(special.erf) + e(lambda x: special.erf(x) ** 2))

    h_kk = (r(h, 0) - 2 * r(0, 0) + r(-h, 0)) / h ** 2
    h_kn = (r(h, h) - r(h, -h) - r(-h, h) + r(-h, -h)) / (4 * h * h)
    return np.sort(1 - 4e-3 * np.linalg.eigvalsh(np.array([[h_kk, h_kn], [h_kn, 0.0]])))


def right_proofs_ex1():
    # the solution's closed form (2 / sqrt(pi)) erf'(sqrt(2) a / c_b) / c_b, c_b = sqrt(1 + 4 b^2)
    derf = lambda x: 2 / math.sqrt(math.pi) * math.exp(-x * x)
    return lambda a, b: 2 / math.sqrt(math.pi) / math.sqrt(1 + 4 * b * b) * derf(
        math.sqrt(2) * a / math.sqrt(1 + 4 * b * b))


def right_proofs_ex2():
    # the solution: 4 gamma^2 lam^2 d / (pi (1 + 2 lam^2 gamma^2) sqrt(1 + 4 lam^2 gamma^2))
    return lambda lam, g, d: (4 * g ** 2 * lam ** 2 * d
                              / (math.pi * (1 + 2 * lam ** 2 * g ** 2) * math.sqrt(1 + 4 * lam ** 2 * g ** 2)))


RIGHT = {name[len("right_"):]: f for name, f in globals().items() if name.startswith("right_")}
SCALAR_OR_ARRAY = sorted(set(RIGHT) - {"proofs_ex1", "proofs_ex2"})


def test_every_checker_is_tested():
    assert set(RIGHT) | {"probe_ex4", "attention_ex2", "related_ex3"} == set(ex.labels())


@pytest.mark.parametrize("label", SCALAR_OR_ARRAY)
def test_right_passes_wrong_fails(label, capsys):
    chk = ex.CHECKERS[label]
    right = np.asarray(RIGHT[label](), dtype=float)
    assert ex.check(label, right) is True
    out = capsys.readouterr().out
    assert "right" in out and all(f"{e:.4g}" not in out for e in np.ravel(chk.expected()))
    # negative control: ten times the tolerance away from the reference
    e = np.asarray(chk.expected(), dtype=float)
    assert ex.check(label, e + 10 * (chk.atol + chk.rtol * np.abs(e))) is False
    if not chk.upper_only:
        assert ex.check(label, e - 10 * (chk.atol + chk.rtol * np.abs(e))) is False
    else:                                  # a risk below the minimum is wrong, however close
        assert ex.check(label, e - 10 * chk.atol - 1e-6) is False
    assert "wrong" in capsys.readouterr().out


@pytest.mark.parametrize("label", ["proofs_ex1", "proofs_ex2"])
def test_formula_answers(label):
    f = RIGHT[label]()
    assert ex.check(label, f) is True
    assert ex.check(label, lambda *args: f(*args) * (1 + 10 * ex.CHECKERS[label].rtol)) is False
    with pytest.raises(ValueError, match="answer"):
        ex.check(label, 1.0)                                   # a number, not a formula
    with pytest.raises(ValueError, match="answer"):
        ex.check(label, lambda *args: math.nan)


def test_proofs_ex2_reference_is_the_risk_curvature():
    # on M at nu = 0 the risk depends on kappa through gamma^2 E[erf(lam sqrt(d/2) kappa + lam gamma Z)^2]
    # (Lemma 6): its second derivative in kappa at 0 by finite differences of a quadrature
    h, lam, d = 1e-3, 0.1, 400

    def r(kappa):
        a, b = lam * math.sqrt(d / 2) * kappa, lam * G
        f = lambda z: special.erf(a + b * z) ** 2 * math.exp(-z * z / 2) / math.sqrt(2 * math.pi)
        return G ** 2 * integrate.quad(f, -40, 40, epsabs=1e-15, epsrel=1e-13, limit=200)[0]

    fd = (r(-h) - 2 * r(0.0) + r(h)) / h ** 2
    assert fd == pytest.approx(ex.CHECKERS["proofs_ex2"].expected()[0], rel=1e-5)


def test_probe_ex4():
    for n, p in ((16_000, 384), (2 * 385, 384), (50, 3)):
        right = cover_exact(n, p)
        assert ex.check("probe_ex4", right, n=n, p=p) is True
        assert ex.check("probe_ex4", right + 10 * 0.05, n=n, p=p) is False
    assert ex.check("probe_ex4", math.log10(0.5), n=2 * 385, p=384) is True   # Cover: exactly 1/2
    with pytest.raises(ValueError, match="p is required"):
        ex.check("probe_ex4", -3.0, n=100)
    with pytest.raises(ValueError, match="n must be an integer"):
        ex.check("probe_ex4", -3.0, n=100.5, p=3)


def test_related_ex3():
    # the solution: one shared block W (p, d), b (p,), a (p,) and the output bias c: p d + 2 p + 1
    assert ex.check("related_ex3", 16 * 32 + 2 * 16 + 1, d=32, width=16) is True
    assert ex.check("related_ex3", 16 * 32 + 2 * 16 + 1 + 10 * 0.5, d=32, width=16) is False
    assert ex.check("related_ex3", 20 * (16 * 32 + 2 * 16) + 1, d=32, width=16) is False  # untied, L = 20
    with pytest.raises(ValueError, match="width"):
        ex.check("related_ex3", 545, d=32, width=0)
    with pytest.raises(ValueError, match="answer"):
        ex.check("related_ex3", [545, 545], d=32, width=16)


def test_attention_ex2():
    # the solution: k = u / |u|, lam' = lam |u|, v = W_V W_O with u = W_K W_Q^T c
    rng = np.random.default_rng(10)
    d, p = 40, 4
    W_Q, W_K, W_V = (rng.standard_normal((d, p)) / math.sqrt(d) for _ in range(3))
    W_O, c = rng.standard_normal((p, 1)), rng.standard_normal(d) / math.sqrt(d)
    given = dict(W_Q=W_Q, W_K=W_K, W_V=W_V, W_O=W_O, c=c, lam=1 / math.sqrt(p))
    u = W_K @ (W_Q.T @ c)
    k, lam_eff, v = u / np.linalg.norm(u), np.linalg.norm(u) / math.sqrt(p), (W_V @ W_O)[:, 0]
    assert ex.check("attention_ex2", (k, lam_eff, v), **given) is True
    assert ex.check("attention_ex2", (k, 1.1 * lam_eff, v), **given) is False       # wrong temperature
    assert ex.check("attention_ex2", (k, lam_eff, W_V[:, 0]), **given) is False     # wrong value
    assert ex.check("attention_ex2", (u, 1 / math.sqrt(p), v), **given) is False    # k not unit
    with pytest.raises(ValueError, match="answer"):
        ex.check("attention_ex2", k, **given)
    with pytest.raises(ValueError, match="W_O"):
        ex.check("attention_ex2", (k, lam_eff, v), **{**given, "W_O": W_O.T})
    with pytest.raises(ValueError, match="answer\\[1\\]"):
        ex.check("attention_ex2", (k, math.inf, v), **given)


@pytest.mark.parametrize("bad", [math.nan, math.inf, "a lot", [1.0, 2.0, 3.0, 4.0]])
def test_bad_answers_raise(bad):
    for label in ("landscape_ex1", "oracle_ex2", "task_ex2"):
        with pytest.raises(ValueError, match="answer"):
            ex.check(label, bad)


def test_bad_label_and_inputs():
    with pytest.raises(ValueError, match="label"):
        ex.check("linear_ex99", 1.0)
    with pytest.raises(ValueError, match="label"):
        ex.describe(3)
    with pytest.raises(ValueError, match="n is not an input"):
        ex.check("linear_ex4", 1000, n=3)
    assert "tolerance" in ex.describe("oracle_ex2").lower() and "n, p" in ex.describe("probe_ex4")
