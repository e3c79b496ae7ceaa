"""slr.landscape: the role-swapped stationary point, lam_c(d), the Riemannian derivatives, the classifier."""
import math

import jax
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from scipy.optimize import minimize_scalar

from slr import landscape as LS, manifold
from slr.overlaps import gram_vectors
from slr.risk import closed_form

G, D, L = math.sqrt(0.5), 400, 10


def test_swap_theta_minimises_the_risk_along_theta():
    # theta* is the minimiser of the quadratic R(0, 0, theta, 1, 0): compare with a bounded 1-D search
    for lam in (0.077, 0.1, 0.9):
        res = minimize_scalar(lambda t: float(closed_form(0.0, 0.0, t, 1.0, 0.0, lam, G, D, L, 0.0)),
                              bounds=(0, 1), method="bounded", options=dict(xatol=1e-10))
        assert abs(LS.swap_theta(lam, gamma=G, d=D) - res.x) < 1e-7
        assert abs(LS.swap_risk(lam, gamma=G, d=D, L=L) - res.fun) < 1e-12


def test_swap_theta_is_clipped_at_one_and_linear_limit():
    # below lam = sqrt(pi)/(2 sqrt(d/2)) ~ 0.0627 the unconstrained optimum exceeds 1
    assert LS.swap_theta(0.03, gamma=G, d=D) == 1.0
    assert LS.swap_theta_linear(0.03, d=D) == 1.0
    lam = 1e-3 * 50 / math.sqrt(D / 2) * 10  # theta_lin < 1, lam small: both agree to O(lam^2)
    assert abs(LS.swap_theta(lam, gamma=G, d=D) / LS.swap_theta_linear(lam, d=D) - 1) < 0.01


def test_swap_risk_linear_is_first_order():
    # exact minus linear is O(lam^4): the ratio of the gaps at lam and lam/2 is ~ 16 (not ~ 4)
    gap = lambda lam: LS.swap_risk(lam, gamma=G, d=1e8, L=L) - LS.swap_risk_linear(lam, gamma=G, d=1e8, L=L)
    assert 12 < gap(0.02) / gap(0.01) < 20


def test_crossover_is_a_sign_change_and_independent_of_L():
    lc = LS.crossover(D, gamma=G, L=L)
    oracle = lambda lam: float(closed_form(1.0, 1.0, 0.0, 0.0, 0.0, lam, G, D, L, 0.0))
    assert LS.swap_risk(0.99 * lc, gamma=G, d=D, L=L) < oracle(0.99 * lc)
    assert LS.swap_risk(1.01 * lc, gamma=G, d=D, L=L) > oracle(1.01 * lc)
    # the noise tokens add (L - 1) zeta0(lam) to both risks: lam_c does not depend on L
    assert abs(LS.crossover(D, gamma=G, L=2) - lc) < 1e-10


def test_riemannian_derivatives_at_the_swap_point_and_the_oracle():
    th = LS.swap_theta(0.1, gamma=G, d=D)
    g, ev = LS.riemannian_derivatives(0.0, 0.0, th, 1.0, 0.0, lam=0.1, gamma=G, d=D, L=L)
    assert np.abs(g).max() < 1e-8
    # two zero eigenvalues (rotations of w), the others positive; the top one as in slr.manifold
    assert np.sum(np.abs(ev) < 1e-10) == 2 and np.all(ev[2:] > 0.1)
    top = manifold.hessian_top_eigenvalue_overlaps(0.0, 0.0, th, 1.0, 0.0, lam=0.1, gamma=G, d=D, L=L)
    assert abs(ev[-1] - float(top)) < 1e-8 * abs(float(top))
    g, _ = LS.riemannian_derivatives(0.0, 0.0, th + 0.1, 1.0, 0.0, lam=0.1, gamma=G, d=D, L=L)
    assert np.abs(g).max() > 1e-2  # off theta*: not stationary


def test_riemannian_gradient_matches_finite_differences_of_the_risk():
    # along the tangent curve k(t) = (k + t u)/|k + t u|, dR/dt at 0 is the gradient's component on u
    from slr.overlaps import frame_vectors
    o = (0.3, -0.2, 0.4, 0.1, 0.25)
    ks, vs, k, v = (np.asarray(x) for x in frame_vectors(*o, dim=5))
    g, _ = LS.riemannian_derivatives(*o, lam=0.3, gamma=G, d=D, L=L)
    u = np.linalg.qr(np.concatenate([k[:, None], np.eye(5)], 1))[0][:, 1]
    f = lambda t: float(closed_form(*(np.array([(k + t * u) @ ks / np.linalg.norm(k + t * u),
                                                  v @ vs, v @ ks, (k + t * u) @ vs / np.linalg.norm(k + t * u),
                                                  (k + t * u) @ v / np.linalg.norm(k + t * u)])), 0.3, G, D, L, 0.0))
    h = 1e-6
    assert abs((f(h) - f(-h)) / (2 * h) - g[0]) < 1e-6


def test_random_overlaps_are_realisable():
    o = LS.random_overlaps(jax.random.key(0), 50)
    assert all(x.shape == (50,) and np.all(np.abs(x) <= 1) for x in o)
    assert np.std(o[0]) > 0.3  # spread: one coordinate of a uniform point of S^3 has std 1/2


def test_classify_the_three_kinds():
    kinds = LS.classify([1, 0, 0.3, -0.98], [1, 0, 0.95, -1], [0, -0.63, -0.3, 0], [0, -1, 0.85, 0],
                        [0, 0, 0.73, 0], lam=0.1, gamma=G, d=D)
    assert list(kinds) == ["oracle", "role-swapped", "other", "oracle"]
    assert LS.classify(0, 0, 0.63, -1, 0, lam=0.1, gamma=G, d=D) == "other"  # theta eta < 0


def test_swap_deviation_reads_all_five_overlaps():
    ts = LS.swap_theta(0.1, gamma=G, d=D)
    # the point and its sign images (theta eta > 0) are at deviation 0
    for s in (1, -1):
        assert np.all(LS.swap_deviation(0, 0, s * ts, s, 0, lam=0.1, gamma=G, d=D) == 0)
    dev = LS.swap_deviation([0.01, 0, 0, 0, 0], [0, -0.02, 0, 0, 0], [ts, ts, -ts, ts, ts],
                            [1, 1, 1, 0.9, 1], [0, 0, 0, 0, 0.03], lam=0.1, gamma=G, d=D)
    assert dev.shape == (3, 5)
    np.testing.assert_allclose(dev[0], [0.01, 0.02, 0, 0, 0.03])
    np.testing.assert_allclose(dev[1], [0, 0, 2 * ts, 0, 0], atol=1e-15)  # theta eta < 0: far
    np.testing.assert_allclose(dev[2], [0, 0, 0, 0.1, 0], atol=1e-15)
    assert LS.swap_deviation(0, 0, ts, 1 + 1e-12, 0, lam=0.1, gamma=G, d=D)[2] > 0  # round-off
    # within classify's tolerance on all three: role-swapped
    rng = np.random.default_rng(5)
    pts = np.array([0, 0, ts, 1, 0])[:, None] + rng.uniform(-0.3, 0.3, (5, 400))
    pts = np.clip(pts, -1, 1)
    near = np.all(LS.swap_deviation(*pts, lam=0.1, gamma=G, d=D) <= 0.2, axis=0)
    assert 0 < near.sum() < near.size
    kinds = LS.classify(*pts, lam=0.1, gamma=G, d=D)
    assert np.all(kinds[near] == "role-swapped") and np.all(kinds[~near] != "role-swapped")
    with pytest.raises(ValueError, match="eta"):
        LS.swap_deviation(0, 0, 0, 1.5, 0, lam=0.1, gamma=G, d=D)


def test_global_minimum_finds_the_swap_point_below_lam_c():
    out = LS.global_minimum(np.array([0.063]), gamma=G, d=D, L=L, starts=8, use_cache=False)
    assert abs(out["risk"][0] - LS.swap_risk(0.063, gamma=G, d=D, L=L)) < 1e-9
    assert abs(abs(out["overlaps"][0, 3]) - 1) < 1e-4


def test_global_minimum_is_sequential_bfgs_bit_for_bit():
    # the batched evaluations of the threads (two blocks of risk8_value_grad_rows) give the very
    # numbers of one scipy BFGS after another on risk8_value_grad
    from scipy.optimize import minimize
    lams, starts = np.array([0.063, 0.9]), 33
    out = LS.global_minimum(lams, gamma=G, d=D, L=L, starts=starts, use_cache=False)
    x0 = np.random.default_rng(0).standard_normal((starts, 8))
    for j, lm in enumerate(lams):
        fg = lambda x: tuple(np.asarray(a, float) for a in LS.risk8_value_grad(x, lm, G, float(D), L, 0.0))
        res = [minimize(fg, x, jac=True, method="BFGS", options=dict(gtol=1e-10)) for x in x0]
        assert np.array_equal(out["ends"][j], [r.fun for r in res])
        best = res[int(np.argmin([r.fun for r in res]))]
        assert out["risk"][j] == best.fun
    rows = np.random.default_rng(1).standard_normal((64, 8))
    v, g = LS.risk8_value_grad_rows(rows, np.full(64, 0.3), G, float(D), L, 0.0)
    for x, vx, gx in zip(rows[:5], np.asarray(v), np.asarray(g)):
        v1, g1 = LS.risk8_value_grad(x, np.float64(0.3), G, float(D), L, 0.0)
        assert vx == v1 and np.array_equal(gx, g1)


def test_global_minimum_raises_an_evaluation_error_without_hanging(monkeypatch):
    import threading

    def broken(*a):
        raise RuntimeError("broken evaluation")
    monkeypatch.setattr(LS, "risk8_value_grad_rows", broken)
    err = []

    def call():
        try:
            LS.global_minimum(np.array([0.1, 0.2]), gamma=G, d=D, L=L, starts=3, use_cache=False)
        except RuntimeError as e:
            err.append(e)
    t = threading.Thread(target=call, daemon=True)
    t.start()
    t.join(timeout=60)
    assert not t.is_alive() and len(err) == 1 and "broken" in str(err[0])


@settings(max_examples=25, deadline=None)
@given(lam=st.one_of(st.floats(max_value=0.0), st.just(float("nan")), st.just(float("inf"))))
def test_bad_lam_is_refused(lam):
    with pytest.raises(ValueError, match="lam"):
        LS.swap_theta(lam, gamma=G, d=D)


@settings(max_examples=25, deadline=None)
@given(d=st.floats(max_value=0.999, allow_nan=False), gamma=st.floats(max_value=0.0, allow_nan=False))
def test_bad_d_and_gamma_are_refused(d, gamma):
    with pytest.raises(ValueError, match="d must"):
        LS.swap_risk(0.1, gamma=G, d=d, L=L)
    with pytest.raises(ValueError, match="gamma"):
        LS.swap_theta(0.1, gamma=gamma, d=D)


@settings(max_examples=25, deadline=None)
@given(x=st.floats(allow_nan=False).filter(lambda x: abs(x) > 1 + 1e-6))
def test_overlaps_out_of_range_are_refused(x):
    with pytest.raises(ValueError, match="kappa"):
        LS.classify(x, 0, 0, 0, 0, lam=0.1, gamma=G, d=D)
    with pytest.raises(ValueError, match="rho"):
        LS.riemannian_derivatives(0, 0, 0, 0, x, lam=0.1, gamma=G, d=D, L=L)


@settings(max_examples=25, deadline=None)
@given(tol=st.one_of(st.floats(max_value=0.0), st.floats(min_value=0.5)), L_=st.integers(max_value=0))
def test_bad_tol_and_L_are_refused(tol, L_):
    with pytest.raises(ValueError, match="tol"):
        LS.classify(0, 0, 0, 0, 0, lam=0.1, gamma=G, d=D, tol=tol)
    with pytest.raises(ValueError, match="L"):
        LS.swap_risk(0.1, gamma=G, d=D, L=L_)


def test_transverse_hessian_is_the_riemannian_hessian_block():
    # at the corner (1, 1) of M: the two eigenvalues of the transverse block are among the eight
    # eigenvalues of the full Riemannian Hessian (riemannian_derivatives), at a stable and an unstable lam
    for lam in (0.1, 3.0):
        ev2 = np.linalg.eigvalsh(LS.transverse_hessian(lam, gamma=G, d=D, L=L))
        _, ev8 = LS.riemannian_derivatives(1.0, 1.0, 0.0, 0.0, 0.0, lam=lam, gamma=G, d=D, L=L)
        assert all(np.min(np.abs(ev8 - e)) < 1e-6 * max(1.0, abs(e)) for e in ev2)
    assert np.linalg.eigvalsh(LS.transverse_hessian(0.1, gamma=G, d=D, L=L))[0] > 0
    assert np.linalg.eigvalsh(LS.transverse_hessian(3.0, gamma=G, d=D, L=L))[0] < 0
    assert LS.transverse_hessian(np.array([0.1, 0.2]), gamma=G, d=D, L=L).shape == (2, 2, 2)
    many = np.geomspace(0.01, 3.0, 70)  # padded to blocks of 64: each lam as if alone
    h = LS.transverse_hessian(many, gamma=G, d=D, L=L)
    assert h.shape == (70, 2, 2)
    np.testing.assert_allclose(h[[0, 63, 64, 69]], [LS.transverse_hessian(x, gamma=G, d=D, L=L)
                                                    for x in many[[0, 63, 64, 69]]], rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="corner"):
        LS.transverse_hessian(0.1, gamma=G, d=D, L=L, corner=(1, 0))


def test_pad_to_block_keeps_the_values_and_pads_with_the_last():
    from slr import loop
    x = np.arange(6.0).reshape(2, 3)
    p = loop.pad_to_block(x, 4)
    assert p.shape == (8,) and np.array_equal(p[:6], x.ravel()) and np.all(p[6:] == 5.0)
    assert loop.pad_to_block(np.arange(8.0), 4).shape == (8,)  # already a multiple: no padding


_TRACED = []  # JAX's trace events (one per jit cache miss), recorded by a listener (public jax.monitoring)
jax.monitoring.register_event_duration_secs_listener(
    lambda event, secs, **_: _TRACED.append(event) if event == "/jax/core/compile/jaxpr_trace_duration" else None)


def test_riemannian_derivatives_compile_once_for_every_shape():
    """riemannian_derivatives evaluates one compiled program on blocks of points: a scalar point, a grid of
    lam and 100 random points (two blocks) trace nothing new after a first call, and the values are those
    of the pulled-back derivatives computed point by point (an independent jax.grad / jax.hessian of
    closed_form through the retraction, at each point alone) up to round-off. Control: that pointwise
    program, jitted, traces anew for a new shape of its arguments."""
    kw = dict(gamma=math.sqrt(0.5), d=400, L=10)
    LS.riemannian_derivatives(1.0, 1.0, 0.0, 0.0, 0.0, lam=0.1, **kw)
    o = LS.random_overlaps(jax.random.key(1), 100)
    _TRACED.clear()
    scalar = LS.riemannian_derivatives(0.0, 0.0, 0.3, 1.0, 0.0, lam=0.1, **kw)
    grid = LS.riemannian_derivatives(1.0, 1.0, 0.0, 0.0, 0.0, lam=np.geomspace(0.02, 1.5, 60), **kw)
    rand = LS.riemannian_derivatives(*o, lam=0.3, **kw)
    assert _TRACED == []
    assert scalar[0].shape == scalar[1].shape == (8,) and grid[1].shape == (60, 8) and rand[0].shape == (100, 8)
    five = np.eye(5)

    def derivs(p, lam):   # the same pull-back, point by point, in the frame of gram_vectors
        ks, vs, k, v = gram_vectors(*p, 5)
        tk = np.linalg.qr(np.column_stack([k, five]))[0][:, 1:].T
        tv = np.linalg.qr(np.column_stack([v, five]))[0][:, 1:].T

        def pulled(x):
            kk, vv = k + x[:4] @ tk, v + x[4:] @ tv
            kk, vv = kk / jax.numpy.linalg.norm(kk), vv / jax.numpy.linalg.norm(vv)
            return closed_form(kk @ ks, vv @ vs, vv @ ks, kk @ vs, kk @ vv, lam, kw["gamma"], 400.0, 10.0, 0.0)

        z = np.zeros(8)
        return np.asarray(jax.grad(pulled)(z)), np.linalg.eigvalsh(np.asarray(jax.hessian(pulled)(z)))

    for i in (0, 37, 99):
        g, ev = derivs([x[i] for x in o], 0.3)
        np.testing.assert_allclose(rand[1][i], ev, rtol=1e-9, atol=1e-9)
        assert abs(np.linalg.norm(rand[0][i]) - np.linalg.norm(g)) < 1e-9   # the tangent bases may differ
    np.testing.assert_allclose(scalar[1], derivs((0.0, 0.0, 0.3, 1.0, 0.0), 0.1)[1], rtol=1e-9, atol=1e-9)
    _TRACED.clear()
    one = jax.jit(lambda x: x * 2.0)
    one(np.zeros(3)), one(np.zeros(4))
    assert len(_TRACED) == 2   # control: a jitted function traces once per new shape
