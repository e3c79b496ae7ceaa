"""slr.manifold: the Lemma 7 map, fixed points (Props. 9-10), Jacobian (Prop. 12), Riemannian Hessian."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from slr import task
from slr import manifold as M, pgd as P
from slr.risk import closed_form

GAMMA = math.sqrt(0.5)
SETTING = dict(gamma=GAMMA, L=10)


def test_lemma7_map_reproduces_pgd_on_m():
    ks, vs = task.sample_oracle(jax.random.key(0), 400)
    k0, v0 = P.init_manifold(jax.random.key(6), ks, vs, 3)
    kw = dict(lam=0.1, alpha=4e-3, steps=5000, log_every=125, **SETTING)
    tr = P.pgd(k0, v0, ks, vs, **kw)
    step, ka, nu = M.manifold_pgd(np.asarray(k0 @ ks), np.asarray(v0 @ vs), d=400, **kw)
    np.testing.assert_array_equal(step, tr.step)
    assert np.max(np.abs(ka - tr.kappa)) < 1e-12 and np.max(np.abs(nu - tr.nu)) < 1e-12
    k1, n1 = M.manifold_map(0.2, -0.3, lam=0.1, alpha=4e-3, d=400, **SETTING)
    km, vm = _on_m_point(ks, vs, 0.2, -0.3)
    t1 = P.pgd(jnp.stack([km] * 3), jnp.stack([vm] * 3), ks, vs, lam=0.1, alpha=4e-3, steps=40, log_every=1,
               **SETTING)
    np.testing.assert_allclose([k1, n1], [t1.kappa[0, 1], t1.nu[0, 1]], atol=1e-15)


def _on_m_point(ks, vs, kappa, nu):
    frame = task.orthonormal_frame(jax.random.key(9), ks.shape[0], 4)
    u = frame[2] - (frame[2] @ ks) * ks - (frame[2] @ vs) * vs
    u = u / jnp.linalg.norm(u)
    w = frame[3] - (frame[3] @ ks) * ks - (frame[3] @ vs) * vs - (frame[3] @ u) * u
    w = w / jnp.linalg.norm(w)
    return kappa * ks + math.sqrt(1 - kappa ** 2) * u, nu * vs + math.sqrt(1 - nu ** 2) * w


@jax.jit
def _on_m_hessian_jit(x, lam, d):  # one compiled program for every point (not one per eager operation)
    f = lambda x: closed_form(x[0], x[1], 0.0, 0.0, 0.0, lam, GAMMA, d, 10, 0.0)
    return jax.hessian(f)(x), jax.grad(f)(x)


def _on_m_hessian(kappa, nu, lam=0.1, d=400.0):
    """Hessian of the risk on M in (kappa, nu), and its gradient, by jax (Lemma 6 = Prop. 15 on M)."""
    return tuple(np.asarray(a) for a in _on_m_hessian_jit(jnp.asarray([kappa, nu]), lam, d))


def test_fixed_points_props_9_10():
    fps = M.fixed_points(lam=0.1, d=400, **SETTING)
    got = {(fp.kappa, fp.nu): fp for fp in fps}
    assert set(got) == {(0.0, 0.0), (1.0, 1.0), (-1.0, -1.0), (1.0, -1.0), (-1.0, 1.0)}
    assert got[(1.0, 1.0)].kind == got[(-1.0, -1.0)].kind == "minimum"
    assert got[(1.0, -1.0)].kind == got[(-1.0, 1.0)].kind == "maximum"
    assert got[(0.0, 0.0)].kind == "saddle"
    # angle chart kappa = cos(phi), nu = cos(psi): d^2R/dphi^2 = R_kk sin^2 phi - R_k cos phi and
    # d^2R/dphi dpsi = R_kn sin phi sin psi. At a corner (sin = 0, cos = s = +-1) the Hessian is
    # diag(-s_k R_k, -s_n R_n); at (0, 0) (cos = 0, sin = 1) it is the (kappa, nu) Hessian itself.
    for (ka, nu), fp in got.items():
        H, g = _on_m_hessian(ka, nu)
        want = H if ka == 0.0 else np.diag([-ka * g[0], -nu * g[1]])
        np.testing.assert_allclose(fp.hessian_eigenvalues, np.linalg.eigvalsh(want), rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(fp.risk, float(closed_form(ka, nu, 0.0, 0.0, 0.0, 0.1, GAMMA, 400.0, 10, 0.0)),
                                   rtol=1e-14)
    # they are fixed points of the map
    for fp in fps:
        k1, n1 = M.manifold_map(fp.kappa, fp.nu, lam=0.1, alpha=4e-3, d=400, **SETTING)
        assert abs(k1 - fp.kappa) < 1e-15 and abs(n1 - fp.nu) < 1e-15


def test_jacobian_at_saddle_prop_12():
    """At (0, 0) the gradient vanishes, so differentiating the Lemma 7 map gives J = I - alpha H with H the
    (kappa, nu) Hessian of the risk (the square-root factor contributes alpha^2 R_k R_kk = 0)."""
    J = np.asarray(M.map_jacobian(0.0, 0.0, lam=0.1, alpha=4e-3, d=400, **SETTING))
    H, g = _on_m_hessian(0.0, 0.0)
    assert np.max(np.abs(g)) < 1e-15
    np.testing.assert_allclose(J, np.eye(2) - 4e-3 * H, rtol=1e-12, atol=1e-15)
    ev = np.sort(np.linalg.eigvals(J).real)
    assert 0 < ev[0] < 1 < ev[1]


_TRACES = []  # JAX's trace events (one per jit cache miss), recorded by a listener (public jax.monitoring)
jax.monitoring.register_event_duration_secs_listener(
    lambda event, secs, **_: _TRACES.append(event) if event == "/jax/core/compile/jaxpr_trace_duration" else None)


def test_step_size_bound_and_no_recompilation():
    o = (1.0, 1.0, 0.0, 0.0, 0.0)
    h = float(M.hessian_top_eigenvalue_overlaps(*o, lam=1.0, d=400, **SETTING))
    assert float(M.stable_step_size(*o, lam=1.0, d=400, **SETTING)) == pytest.approx(2.0 / h, rel=1e-15)
    # jits are module level: a second call with the same static parameters compiles nothing
    M.manifold_pgd(0.1, 0.2, lam=0.1, alpha=1e-3, steps=20, d=400, log_every=10, **SETTING)
    M.fixed_points(lam=0.1, d=400, **SETTING)
    _TRACES.clear()
    M.manifold_pgd(0.3, -0.2, lam=0.1, alpha=1e-3, steps=20, d=400, log_every=10, **SETTING)
    M.fixed_points(lam=0.1, d=400, **SETTING)
    M.hessian_top_eigenvalue_overlaps(*o, lam=1.0, d=400, **SETTING)
    assert _TRACES == []
    M.manifold_pgd(0.3, -0.2, lam=0.1, alpha=1e-3, steps=30, d=400, log_every=10, **SETTING)
    assert _TRACES  # control: another number of logs is another static parameter, traced anew


def test_manifold_validation():
    with pytest.raises(ValueError, match="d must be >= 1"):
        M.manifold_map(0.1, 0.1, lam=0.1, alpha=1e-3, d=0.5, **SETTING)
    with pytest.raises(ValueError, match="kappa"):
        M.manifold_map(1.5, 0.1, lam=0.1, alpha=1e-3, d=400, **SETTING)
    with pytest.raises(ValueError, match="kappa0"):
        M.manifold_pgd(1.5, 0.1, lam=0.1, alpha=1e-3, steps=3, log_every=1, d=400, **SETTING)
    with pytest.raises(ValueError, match="log_every"):
        M.manifold_pgd(0.5, 0.1, lam=0.1, alpha=1e-3, steps=3, log_every=0, d=400, **SETTING)


def test_hessian_top_eigenvalue():
    """On M at a corner, the Riemannian Hessian's tangent spectrum contains the angle-chart ones; its top
    eigenvalue is a curvature in theta: theta enters the risk through m = sqrt(d/2) theta, so its
    second derivative is of order d (large for lam = 1)."""
    top_small = float(M.hessian_top_eigenvalue_overlaps(1.0, 1.0, 0.0, 0.0, 0.0, lam=0.1, d=400, **SETTING))
    assert top_small >= 0.95342 - 1e-6
    # against the finite-difference Hessian of R along geodesics of S^5 x S^5, in a tangent basis
    ks, vs = np.eye(6)[0], np.eye(6)[1]
    k = np.array([0.6, 0.1, 0.5, 0.3, -0.2, 0.0]); k = k / np.linalg.norm(k)
    v = np.array([0.2, -0.4, 0.1, 0.5, 0.3, 0.4]); v = v / np.linalg.norm(v)
    top = float(M.hessian_top_eigenvalue(k, v, ks, vs, lam=1.0, L=10, gamma=GAMMA))
    f = jax.jit(lambda a, b: closed_form(a @ ks, b @ vs, b @ ks, a @ vs, a @ b, 1.0, GAMMA, 6.0, 10, 0.0))
    basis = lambda x: np.linalg.svd(x[None, :])[2][1:]
    T = [(e, np.zeros(6)) for e in basis(k)] + [(np.zeros(6), e) for e in basis(v)]

    def pt(s, xk, xv):
        out = []
        for x, u in ((k, xk), (v, xv)):
            n = np.linalg.norm(u)
            out.append(x if n == 0 else np.cos(s * n) * x + np.sin(s * n) * u / n)
        return out

    h = 1e-4
    q = lambda xk, xv: float(f(*pt(h, xk, xv)) - 2 * f(k, v) + f(*pt(-h, xk, xv))) / h ** 2
    H = np.array([[(q(a[0] + b[0], a[1] + b[1]) - q(a[0] - b[0], a[1] - b[1])) / 4 for b in T] for a in T])
    np.testing.assert_allclose(np.linalg.eigvalsh((H + H.T) / 2)[-1], top, rtol=1e-4)
    assert top * 4e-3 > 0.2  # a sizeable curvature at lam = 1 (d = 6 here, so well below 2 / alpha)


@settings(max_examples=25, deadline=None)
@given(kappa=st.floats(-1, 1), nu=st.floats(-1, 1), lam=st.floats(0.01, 3), alpha=st.floats(1e-4, 1e-2))
def test_manifold_map_stays_in_square(kappa, nu, lam, alpha):
    """The Lemma 7 map sends [-1, 1]^2 into itself and never returns NaN."""
    k1, n1 = M.manifold_map(kappa, nu, lam=lam, alpha=alpha, d=400, **SETTING)
    assert np.isfinite(k1) and np.isfinite(n1)
    assert abs(float(k1)) <= 1 + 1e-12 and abs(float(n1)) <= 1 + 1e-12


def test_hessian_top_eigenvalue_lam_array():
    """lam may be an array (a schedule at logged steps): same values as one call per lam; lam <= 0 refused."""
    lams = np.array([0.1, 0.5, 1.0])
    pts = (np.array([1.0, 0.3, 0.5]), np.array([1.0, 0.2, -0.4]), np.zeros(3), np.zeros(3), np.array([0.0, 0.1, 0.0]))
    many = np.asarray(M.hessian_top_eigenvalue_overlaps(*pts, lam=lams, d=400, **SETTING))
    one = [float(M.hessian_top_eigenvalue_overlaps(*(p[i] for p in pts), lam=float(lams[i]), d=400, **SETTING))
           for i in range(3)]
    np.testing.assert_allclose(many, one, rtol=1e-12)
    with pytest.raises(ValueError, match="lam"):
        M.hessian_top_eigenvalue_overlaps(*pts, lam=np.array([0.1, -1.0, 1.0]), d=400, **SETTING)


def test_closed_form_gradients_match_automatic_differentiation():
    # Lemma 7's formulas against jax.grad of the closed-form risk on M, on a grid of the square
    from slr.risk import risk as risk_fn
    K, N = np.meshgrid(np.linspace(-1, 1, 9), np.linspace(-1, 1, 9))
    kw = dict(lam=0.3, gamma=math.sqrt(0.5), d=50, L=5)
    gk, gn = M.gradients(K, N, **kw)
    ad = jax.jit(jax.vmap(jax.grad(lambda a, b: risk_fn(a, b, 0.0, 0.0, 0.0, **kw), argnums=(0, 1))))(K.ravel(),
                                                                                                    N.ravel())
    assert np.allclose(gk.ravel(), ad[0], atol=1e-13) and np.allclose(gn.ravel(), ad[1], atol=1e-13)
    with pytest.raises(ValueError, match="kappa"):
        M.gradients(1.5, 0.0, **kw)


def test_map_jacobians_batched_equal_map_jacobian():
    kw = dict(lam=0.1, alpha=0.04, gamma=math.sqrt(0.5), d=400, L=10)
    pts = np.array([[0.0, 0.0], [0.3, -0.7], [0.9, 0.2]])
    J = np.asarray(M.map_jacobians(pts[:, 0], pts[:, 1], **kw))
    assert J.shape == (3, 2, 2)
    for p, j in zip(pts, J):
        assert np.allclose(j, M.map_jacobian(p[0], p[1], **kw), atol=1e-14)


def test_curvature_on_m_is_the_largest_hessian_norm_on_the_square():
    """curvature_on_m = max |eigenvalue| of the Hessian of R on M over the grid (here checked against
    finite differences of manifold.gradients at the grid's corner region and by monotonicity in lam:
    the kappa-curvature scales like lam^2 d / 2 for small lam)."""
    kw = dict(gamma=math.sqrt(0.5), d=400, L=10)
    h = M.curvature_on_m(lam=0.1, grid=21, **kw)
    x = np.linspace(-1, 1, 21)
    K, N = np.meshgrid(x, x)
    e = 1e-6
    fd = []
    for dk, dn in ((e, 0.0), (0.0, e)):
        gp = np.stack(M.gradients(np.clip(K + dk, -1, 1), np.clip(N + dn, -1, 1), lam=0.1, **kw))
        gm = np.stack(M.gradients(np.clip(K - dk, -1, 1), np.clip(N - dn, -1, 1), lam=0.1, **kw))
        fd.append((gp - gm) / (2 * e))
    Hfd = np.stack(fd, axis=1)  # (2 grads, 2 directions, grid, grid)
    inner = (np.abs(K) < 1) & (np.abs(N) < 1)
    norms = [np.max(np.abs(np.linalg.eigvals(Hfd[:, :, i, j]))) for i, j in zip(*np.nonzero(inner))]
    assert max(norms) <= h * (1 + 1e-5) and max(norms) > 0.5 * h
    assert M.curvature_on_m(lam=2.0, grid=21, **kw) > 10 * h
    with pytest.raises(ValueError, match="grid"):
        M.curvature_on_m(lam=0.1, grid=1, **kw)


def test_hessian_top_in_blocks_is_one_program_for_every_shape(traced):
    """hessian_top_eigenvalue_overlaps evaluates its points in blocks of 64: after one call, points of
    other shapes (1, 70 = two blocks, 3 x 5) trace nothing new, and each value is the value of that
    point evaluated alone, to round-off (measured at most 2.9e-15 relative). Control: another static
    setting (d) traces the program again, so the listener sees it."""
    o = np.random.default_rng(3).uniform(-0.6, 0.6, (5, 70))
    lam = np.geomspace(0.05, 2.0, 70)
    M.hessian_top_eigenvalue_overlaps(*o[:, :3], lam=lam[:3], d=400, **SETTING)
    traced.clear()
    many = M.hessian_top_eigenvalue_overlaps(*o, lam=lam, d=400, **SETTING)
    grid = M.hessian_top_eigenvalue_overlaps(*o[:, :15].reshape(5, 3, 5), lam=lam[:15].reshape(3, 5), d=400,
                                             **SETTING)
    one = [float(M.hessian_top_eigenvalue_overlaps(*o[:, i], lam=lam[i], d=400, **SETTING)) for i in (0, 63, 64, 69)]
    assert "_hess_top" not in traced
    assert many.shape == (70,) and grid.shape == (3, 5)
    np.testing.assert_allclose(grid.ravel(), many[:15], rtol=1e-13)
    np.testing.assert_allclose(many[[0, 63, 64, 69]], one, rtol=1e-13)
    M.hessian_top_eigenvalue_overlaps(*o[:, 0], lam=lam[0], d=401, **SETTING)
    assert "_hess_top" in traced
