"""slr.dynamics: PGD (Definition 1), its 4-D reduction, Lemma 4, Lemma 7, Props. 9-12, SGD."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from slr import dynamics as D
from slr import task
from slr.risk import closed_form, risk

GAMMA = math.sqrt(0.5)
SETTING = dict(gamma=GAMMA, L=10)


@pytest.fixture(scope="module")
def oracle400():
    return task.sample_oracle(jax.random.key(0), 400)


def test_reduced_matches_full(oracle400):
    """MATH.md section 6: the 4-D simulation reproduces full-d PGD (stable config, d = 400)."""
    ks, vs = oracle400
    k0, v0 = D.init_sphere(jax.random.key(1), 400, 3)
    kw = dict(lam=0.1, alpha=4e-3, steps=2000, log_every=50, **SETTING)
    red = D.pgd(k0, v0, ks, vs, reduced=True, **kw)
    full = D.pgd(k0, v0, ks, vs, reduced=False, **kw)
    assert red.kappa.shape == (3, 41) and red.step.shape == (41,)
    for f in ("kappa", "nu", "theta", "eta", "rho", "excess_risk"):
        assert np.max(np.abs(np.asarray(getattr(red, f)) - np.asarray(getattr(full, f)))) < 1e-12, f
    # and the run moves: the test is not trivially satisfied by a frozen trajectory
    assert np.max(np.abs(np.asarray(red.kappa[:, -1] - red.kappa[:, 0]))) > 0.5


def test_single_run_shapes_and_steps(oracle400):
    ks, vs = oracle400
    k0, v0 = D.init_sphere(jax.random.key(2), 400, 1)
    tr = D.pgd(k0[0], v0[0], ks, vs, lam=lambda t: 1.0 / (1.0 + 1e-4 * t), alpha=4e-3, steps=105,
               log_every=10, **SETTING)
    assert tr.kappa.shape == (12,)
    np.testing.assert_array_equal(tr.step, list(range(0, 101, 10)) + [105])
    np.testing.assert_allclose(tr.kappa[0], k0[0] @ ks, atol=1e-15)
    np.testing.assert_allclose(tr.rho[0], k0[0] @ v0[0], atol=1e-15)
    # step 0 excess risk equals the closed form at lam_0 = 1
    r0 = risk(k0[0] @ ks, v0[0] @ vs, v0[0] @ ks, k0[0] @ vs, k0[0] @ v0[0], lam=1.0, d=400, **SETTING)
    np.testing.assert_allclose(tr.excess_risk[0], r0, rtol=1e-13)


def test_pgd_step_matches_definition_1(oracle400):
    """One PGD step against a direct transcription of Definition 1 with jax.grad in R^d."""
    ks, vs = oracle400
    K0, V0 = D.init_sphere(jax.random.key(3), 400, 3)
    k0, v0 = K0[0], V0[0]
    f = lambda k, v: closed_form(k @ ks, v @ vs, v @ ks, k @ vs, k @ v, 0.3, GAMMA, 400.0, 10, 0.0)
    gk, gv = jax.grad(f, argnums=(0, 1))(k0, v0)
    k1 = k0 - 0.01 * (gk - (k0 @ gk) * k0)
    v1 = v0 - 0.01 * (gv - (v0 @ gv) * v0)
    k1, v1 = k1 / jnp.linalg.norm(k1), v1 / jnp.linalg.norm(v1)
    tr = D.pgd(K0, V0, ks, vs, lam=0.3, alpha=0.01, steps=40, log_every=1, **SETTING)
    tr = jax.tree_util.tree_map(lambda x: x[0], tr._replace(step=None))
    np.testing.assert_allclose([tr.kappa[1], tr.nu[1], tr.theta[1], tr.eta[1], tr.rho[1]],
                               [k1 @ ks, v1 @ vs, v1 @ ks, k1 @ vs, k1 @ v1], atol=1e-14)


def test_risk_gradient_finite_differences():
    """jax.grad of the closed form (Prop. 15) against central finite differences."""
    x = np.array([0.3, -0.5, 0.2, -0.1, 0.25])
    kw = (0.7, GAMMA, 400.0, 10, 0.1)
    g = np.asarray(jax.grad(lambda z: closed_form(*z, *kw))(jnp.asarray(x)))
    h = 1e-6
    fd = [(float(closed_form(*(x + h * e), *kw)) - float(closed_form(*(x - h * e), *kw))) / (2 * h) for e in np.eye(5)]
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8)


def test_manifold_invariance_float64_and_float32(oracle400):
    """Lemma 4: from M, PGD stays on M; float64 keeps the distance at roundoff (Fig. 4(b) config)."""
    ks, vs = oracle400
    k0, v0 = D.init_manifold(jax.random.key(4), ks, vs, 3)
    kw = dict(lam=0.1, alpha=4e-3, steps=20000, log_every=500, **SETTING)
    t64 = D.pgd(k0, v0, ks, vs, **kw)
    # float32 in full d: the 4-D frame is aligned with k*, v* and keeps exact zeros, hiding the roundoff
    t32 = D.pgd(k0, v0, ks, vs, dtype=jnp.float32, reduced=False, **kw)
    assert t32.kappa.dtype == jnp.float32 and t64.kappa.dtype == jnp.float64
    d64 = float(np.max(t64.dist_manifold))
    d32 = float(np.max(t32.dist_manifold))
    assert d64 <= 1e-13
    assert d32 > 10 * d64 and d32 > 1e-9
    # the run moves on M towards a corner (the test does not pass on a frozen trajectory)
    assert np.all(np.abs(np.asarray(t64.nu[:, -1])) > 0.99)


def test_init_manifold_and_sphere(oracle400):
    ks, vs = oracle400
    k, v = D.init_manifold(jax.random.key(5), ks, vs, 4)
    assert k.shape == (4, 400)
    np.testing.assert_allclose(np.linalg.norm(k, axis=1), 1, atol=1e-14)
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1, atol=1e-14)
    assert np.max(np.abs(np.concatenate([k @ vs, v @ ks, np.sum(k * v, 1)]))) < 1e-15
    k, v = D.init_sphere(jax.random.key(5), 400, 4)
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1, atol=1e-14)
    assert np.max(np.abs(np.sum(k * v, 1))) < 0.3


def test_lemma7_map_reproduces_pgd_on_m(oracle400):
    ks, vs = oracle400
    k0, v0 = D.init_manifold(jax.random.key(6), ks, vs, 3)
    kw = dict(lam=0.1, alpha=4e-3, steps=5000, log_every=125, **SETTING)
    tr = D.pgd(k0, v0, ks, vs, **kw)
    step, ka, nu = D.manifold_pgd(np.asarray(k0 @ ks), np.asarray(v0 @ vs), d=400, **kw)
    np.testing.assert_array_equal(step, tr.step)
    assert np.max(np.abs(ka - tr.kappa)) < 1e-12 and np.max(np.abs(nu - tr.nu)) < 1e-12
    k1, n1 = D.manifold_map(0.2, -0.3, lam=0.1, alpha=4e-3, d=400, **SETTING)
    km, vm = _on_m_point(ks, vs, 0.2, -0.3)
    t1 = D.pgd(jnp.stack([km] * 3), jnp.stack([vm] * 3), ks, vs, lam=0.1, alpha=4e-3, steps=40, log_every=1,
               **SETTING)
    np.testing.assert_allclose([k1, n1], [t1.kappa[0, 1], t1.nu[0, 1]], atol=1e-15)


def _on_m_point(ks, vs, kappa, nu):
    frame = task.orthonormal_frame(jax.random.key(9), ks.shape[0], 4)
    u = frame[2] - (frame[2] @ ks) * ks - (frame[2] @ vs) * vs
    u = u / jnp.linalg.norm(u)
    w = frame[3] - (frame[3] @ ks) * ks - (frame[3] @ vs) * vs - (frame[3] @ u) * u
    w = w / jnp.linalg.norm(w)
    return kappa * ks + math.sqrt(1 - kappa ** 2) * u, nu * vs + math.sqrt(1 - nu ** 2) * w


def test_fixed_points_props_9_10():
    fps = D.fixed_points(lam=0.1, d=400, **SETTING)
    got = {(fp.kappa, fp.nu): fp for fp in fps}
    assert set(got) == {(0.0, 0.0), (1.0, 1.0), (-1.0, -1.0), (1.0, -1.0), (-1.0, 1.0)}
    assert got[(1.0, 1.0)].kind == got[(-1.0, -1.0)].kind == "minimum"
    assert got[(1.0, -1.0)].kind == got[(-1.0, 1.0)].kind == "maximum"
    assert got[(0.0, 0.0)].kind == "saddle"
    np.testing.assert_allclose(got[(1.0, 1.0)].hessian_eigenvalues, [0.01069, 0.95342], atol=5e-6)
    np.testing.assert_allclose(got[(1.0, -1.0)].hessian_eigenvalues, [-0.95342, -0.42769], atol=5e-6)
    np.testing.assert_allclose(got[(0.0, 0.0)].hessian_eigenvalues, [-0.7715, 3.2679], atol=5e-5)
    np.testing.assert_allclose(got[(1.0, 1.0)].risk, 0.113498, atol=5e-7)
    np.testing.assert_allclose(got[(0.0, 0.0)].risk, 0.615504, atol=5e-7)
    # they are fixed points of the map
    for fp in fps:
        k1, n1 = D.manifold_map(fp.kappa, fp.nu, lam=0.1, alpha=4e-3, d=400, **SETTING)
        assert abs(k1 - fp.kappa) < 1e-15 and abs(n1 - fp.nu) < 1e-15


def test_jacobian_at_saddle_prop_12():
    J = np.asarray(D.map_jacobian(0.0, 0.0, lam=0.1, alpha=4e-3, d=400, **SETTING))
    ev = np.sort(np.linalg.eigvals(J).real)
    np.testing.assert_allclose(ev, [0.98693, 1.00309], atol=5e-6)
    assert 0 < ev[0] < 1 < ev[1]


def test_hessian_top_eigenvalue():
    """On M at a corner, the Riemannian Hessian's tangent spectrum contains the angle-chart ones; its top
    eigenvalue is a curvature in theta of order d (MATH.md section 9.3), above 2 / alpha for lam = 1."""
    top_small = float(D.hessian_top_eigenvalue_overlaps(1.0, 1.0, 0.0, 0.0, 0.0, lam=0.1, d=400, **SETTING))
    assert top_small >= 0.95342 - 1e-6
    # against the finite-difference Hessian of R along geodesics of S^5 x S^5, in a tangent basis
    ks, vs = np.eye(6)[0], np.eye(6)[1]
    k = np.array([0.6, 0.1, 0.5, 0.3, -0.2, 0.0]); k = k / np.linalg.norm(k)
    v = np.array([0.2, -0.4, 0.1, 0.5, 0.3, 0.4]); v = v / np.linalg.norm(v)
    top = float(D.hessian_top_eigenvalue(k, v, ks, vs, lam=1.0, L=10, gamma=GAMMA))
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


def test_sgd_decreases_excess_risk():
    ks, vs = task.sample_oracle(jax.random.key(10), 20)
    k0, v0 = D.init_sphere(jax.random.key(11), 20, 3)
    tr = D.sgd(jax.random.key(12), k0, v0, ks, vs, lam=0.3, alpha=5e-2, steps=3000, batch=5,
               gamma=GAMMA, L=2, eps=0.1, log_every=600, n_test=500)
    assert tr.excess_risk.shape == tr.excess_risk_closed.shape == (3, 6)
    assert np.median(tr.excess_risk[:, -1]) < 0.5 * np.median(tr.excess_risk[:, 0])
    assert np.median(tr.excess_risk_closed[:, -1]) < 0.5 * np.median(tr.excess_risk_closed[:, 0])
    # the test-batch estimate tracks the closed form
    assert np.max(np.abs(tr.excess_risk - tr.excess_risk_closed)) < 0.5


def test_trajectory_pytree_and_dict(oracle400):
    ks, vs = oracle400
    k0, v0 = D.init_sphere(jax.random.key(1), 400, 3)
    tr = D.pgd(k0, v0, ks, vs, lam=0.1, alpha=4e-3, steps=40, log_every=1, **SETTING)
    leaves = jax.tree_util.tree_leaves(tr)
    assert len(leaves) == 7
    back = D.Trajectory.from_dict(tr.to_dict())
    for f in D.Trajectory._fields[:-1]:
        np.testing.assert_array_equal(getattr(back, f), getattr(tr, f))
    assert back.excess_risk_closed is None
    np.testing.assert_allclose(tr.dist_manifold, np.sqrt(tr.theta ** 2 + tr.eta ** 2 + tr.rho ** 2))
    with pytest.raises(ValueError, match="missing"):
        D.Trajectory.from_dict({"step": np.arange(3)})


# -------------------------------------------------------------------------------------- validation

def _base(oracle):
    ks, vs = oracle
    k0, v0 = D.init_sphere(jax.random.key(1), 400, 2)
    return (k0, v0, ks, vs), dict(lam=0.1, alpha=4e-3, steps=10, log_every=5, **SETTING)


@pytest.mark.parametrize("field,value,match", [
    ("lam", 0.0, "lam"), ("lam", -1.0, "lam"), ("lam", lambda t: 0.5 - 0.1 * t, r"lam\(t\)"),
    ("alpha", 0.0, "alpha"), ("steps", 0, "steps"), ("steps", 2.5, "steps"), ("gamma", -1.0, "gamma"),
    ("L", 0, "L"), ("L", 2.0, "L"), ("eps", -0.1, "eps"), ("log_every", 0, "log_every"),
    ("lam", float("nan"), "lam"),
])
def test_pgd_validation(oracle400, field, value, match):
    args, kw = _base(oracle400)
    kw[field] = value
    with pytest.raises(ValueError, match=match):
        D.pgd(*args, **kw)


def test_pgd_vector_validation(oracle400):
    (k0, v0, ks, vs), kw = _base(oracle400)
    with pytest.raises(ValueError, match="k0 must have unit norm"):
        D.pgd(2 * k0, v0, ks, vs, **kw)
    with pytest.raises(ValueError, match="orthogonal"):
        D.pgd(k0, v0, ks, (ks + vs) / math.sqrt(2), **kw)
    with pytest.raises(ValueError, match="length d=400"):
        D.pgd(k0[:, :10], v0, ks, vs, **kw)
    with pytest.raises(ValueError, match="dtype"):
        D.pgd(k0, v0, ks, vs, dtype=jnp.int32, **kw)
    with pytest.raises(ValueError, match="batch"):
        D.sgd(jax.random.key(0), k0, v0, ks, vs, batch=0, eps=0.1, **kw)
    with pytest.raises(ValueError, match="n_test"):
        D.sgd(jax.random.key(0), k0, v0, ks, vs, batch=2, eps=0.1, n_test=0, **kw)
    with pytest.raises(ValueError, match="d must be >= 1"):
        D.manifold_map(0.1, 0.1, lam=0.1, alpha=1e-3, d=0.5, **SETTING)
    with pytest.raises(ValueError, match="kappa"):
        D.manifold_map(1.5, 0.1, lam=0.1, alpha=1e-3, d=400, **SETTING)
    with pytest.raises(ValueError, match="R must be"):
        D.init_sphere(jax.random.key(0), 10, 0)
    with pytest.raises(ValueError, match="d must be"):
        D.init_sphere(jax.random.key(0), 0, 3)
    with pytest.raises(ValueError, match="key"):
        D.init_sphere(0, 10, 3)


@settings(max_examples=25, deadline=None)
@given(kappa=st.floats(-1, 1), nu=st.floats(-1, 1), lam=st.floats(0.01, 3), alpha=st.floats(1e-4, 1e-2))
def test_manifold_map_stays_in_square(kappa, nu, lam, alpha):
    """The Lemma 7 map sends [-1, 1]^2 into itself and never returns NaN."""
    k1, n1 = D.manifold_map(kappa, nu, lam=lam, alpha=alpha, d=400, **SETTING)
    assert np.isfinite(k1) and np.isfinite(n1)
    assert abs(float(k1)) <= 1 + 1e-12 and abs(float(n1)) <= 1 + 1e-12


def test_hessian_top_eigenvalue_lam_array():
    """lam may be an array (a schedule at logged steps): same values as one call per lam; lam <= 0 refused."""
    lams = np.array([0.1, 0.5, 1.0])
    pts = (np.array([1.0, 0.3, 0.5]), np.array([1.0, 0.2, -0.4]), np.zeros(3), np.zeros(3), np.array([0.0, 0.1, 0.0]))
    many = np.asarray(D.hessian_top_eigenvalue_overlaps(*pts, lam=lams, d=400, **SETTING))
    one = [float(D.hessian_top_eigenvalue_overlaps(*(p[i] for p in pts), lam=float(lams[i]), d=400, **SETTING))
           for i in range(3)]
    np.testing.assert_allclose(many, one, rtol=1e-12)
    with pytest.raises(ValueError, match="lam"):
        D.hessian_top_eigenvalue_overlaps(*pts, lam=np.array([0.1, -1.0, 1.0]), d=400, **SETTING)

# ----------------------------------------------------------------------------------------------
# the reduced SGD sampler: exact in distribution (gradients and trajectories)


def _one_step_grads(sampler, key, k, v, ks, vs, n, *, lam, L, eps, batch):
    """n independent draws of the mini-batch gradient (gk, gv) at (k, v), each shape (n, d)."""
    d = ks.shape[0]
    w = jax.random.normal(jax.random.key(D._FALLBACK_SEED), (2, d), dtype=jnp.float64)
    grad = jax.grad(D._loss, argnums=(0, 1))

    def one(kk):
        if sampler == "reduced":
            return D._reduced_grads(D._reduced_noise(kk, d, L, batch), k, v, ks, vs, w, lam, GAMMA, L, eps,
                                    batch)
        X, y, _ = task.assemble(task.draws(kk, batch, L=L, d=ks.shape[0]), ks[None], vs[None], gamma=GAMMA, eps=eps)
        return grad(k, v, X, y, lam)

    return jax.jit(jax.vmap(one))(jax.random.split(key, n))


def test_reduced_sampler_one_step_gradient_law():
    """At a generic (k, v) off M, mean and covariance of the mini-batch gradient, projected on
    directions in and out of span{k, v, k*, v*}, agree between the samplers (|z| < 5, 20000 draws)."""
    d, L, n = 12, 4, 20000
    ks, vs = task.sample_oracle(jax.random.key(20), d)
    g = jax.random.normal(jax.random.key(21), (4, d))
    k = 0.6 * ks + 0.3 * vs + g[0] / np.linalg.norm(g[0]) * 0.5
    k = k / jnp.linalg.norm(k)
    v = -0.2 * ks + 0.5 * vs + g[1] / np.linalg.norm(g[1]) * 0.7
    v = v / jnp.linalg.norm(v)
    Q, _ = jnp.linalg.qr(jnp.stack([ks, vs, k, v], axis=1))
    out = g[2:] - (g[2:] @ Q) @ Q.T
    out = out / jnp.linalg.norm(out, axis=1, keepdims=True)
    dirs = jnp.concatenate([Q.T, out, (Q[:, 2] + out[0])[None] / math.sqrt(2)])  # 4 in, 2 out, 1 mixed
    stats = {}
    for sampler, seed in (("reduced", 22), ("full", 23)):
        gk, gv = _one_step_grads(sampler, jax.random.key(seed), k, v, ks, vs, n, lam=0.8, L=L, eps=0.3,
                                 batch=3)
        P = np.asarray(jnp.concatenate([gk @ dirs.T, gv @ dirs.T], axis=1))  # (n, 14)
        assert np.all(np.isfinite(P))
        stats[sampler] = P
    a, b = stats["reduced"], stats["full"]
    # means
    z_mean = (a.mean(0) - b.mean(0)) / np.sqrt(a.var(0) / n + b.var(0) / n)
    # second moments (variances and a set of covariances between projections)
    idx = [(i, j) for i in range(a.shape[1]) for j in range(i, a.shape[1])]
    ca = np.stack([(a[:, i] - a[:, i].mean()) * (a[:, j] - a[:, j].mean()) for i, j in idx], 1)
    cb = np.stack([(b[:, i] - b[:, i].mean()) * (b[:, j] - b[:, j].mean()) for i, j in idx], 1)
    z_cov = (ca.mean(0) - cb.mean(0)) / np.sqrt(ca.var(0) / n + cb.var(0) / n)
    assert np.max(np.abs(z_mean)) < 5, np.max(np.abs(z_mean))
    assert np.max(np.abs(z_cov)) < 5, np.max(np.abs(z_cov))
    # the out-of-span parts are not degenerate: their variance is that of the in-span noise scale
    assert a[:, 4].var() > 0.1 * b[:, 4].var() and a[:, 4].var() < 10 * b[:, 4].var()


def test_reduced_sampler_short_trajectories_match_full():
    """kappa, nu and the excess risks after 300 steps (128 repeats): means and variances agree."""
    d, R = 10, 128
    ks, vs = task.sample_oracle(jax.random.key(30), d)
    k0, v0 = D.init_sphere(jax.random.key(31), d, R)
    kw = dict(lam=D.InverseTime(1.0, 1e-3), alpha=5e-2, steps=300, batch=3, gamma=GAMMA, L=3, eps=0.1,
              log_every=150, n_test=100)
    red = D.sgd(jax.random.key(32), k0, v0, ks, vs, sampler="reduced", **kw)
    full = D.sgd(jax.random.key(33), k0, v0, ks, vs, sampler="full", **kw)
    for f in ("kappa", "nu", "theta", "rho", "excess_risk_closed"):
        a, b = np.asarray(getattr(red, f))[:, -1], np.asarray(getattr(full, f))[:, -1]
        assert np.all(np.isfinite(a))
        z = (a.mean() - b.mean()) / np.sqrt(a.var() / R + b.var() / R)
        assert abs(z) < 4.5, (f, z)
        # the runs moved: a real comparison, not two copies of the start
        assert np.mean(np.abs(a - np.asarray(getattr(red, f))[:, 0])) > 1e-2, f
        ra = np.log(a.var() / b.var())  # log variance ratio, sd ~ sqrt(4 / R) for near-Gaussian data
        assert abs(ra) < 5 * math.sqrt(4.0 / R) + 0.3, (f, ra)


@pytest.mark.parametrize("d", [4, 5])
def test_reduced_sampler_degenerate_span_no_nan(d):
    """k0 = k*, v0 = v* (span{k, v, k*, v*} of dimension 2) and small d: finite, unit iterates."""
    ks, vs = task.sample_oracle(jax.random.key(40), d)
    k0 = jnp.stack([ks, -ks, vs])
    v0 = jnp.stack([vs, vs, ks])
    tr = D.sgd(jax.random.key(41), k0, v0, ks, vs, lam=1.0, alpha=1e-2, steps=50, batch=5, gamma=GAMMA,
               L=3, eps=0.1, log_every=10, n_test=50)
    for f in ("kappa", "nu", "theta", "eta", "rho", "excess_risk", "excess_risk_closed"):
        assert np.all(np.isfinite(np.asarray(getattr(tr, f)))), f
    assert np.all(np.abs(np.asarray(tr.kappa)) <= 1 + 1e-12)
    # the fallback directions are orthonormal to k*, v* and the step still moves off span{k*, v*}
    assert np.max(np.abs(np.asarray(tr.kappa[0, 1:]))) < 1.0


def test_sgd_sampler_validation(oracle400):
    ks, vs = oracle400
    k0, v0 = D.init_sphere(jax.random.key(1), 400, 2)
    kw = dict(lam=0.1, alpha=1e-3, steps=2, batch=2, gamma=GAMMA, L=3, eps=0.1, log_every=1)
    with pytest.raises(ValueError, match="sampler"):
        D.sgd(jax.random.key(0), k0, v0, ks, vs, sampler="fast", **kw)
    with pytest.raises(ValueError, match="sampler"):
        D.sgd(jax.random.key(0), k0, v0, ks, vs, sampler=None, **kw)
