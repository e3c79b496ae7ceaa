"""slr.pgd: exact PGD (Definition 1), its 4-D reduction, Lemma 4, the per-run sweep entry, validation."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from slr import task
from slr import pgd as P
from slr.risk import closed_form, risk

GAMMA = math.sqrt(0.5)
SETTING = dict(gamma=GAMMA, L=10)


@pytest.fixture(scope="module")
def oracle400():
    return task.sample_oracle(jax.random.key(0), 400)


def test_reduced_matches_full(oracle400):
    """The 4-D simulation reproduces full-d PGD (stable config, d = 400): grad_k R = R_kappa k* + R_eta v*
    + R_rho v and grad_v R = R_nu v* + R_theta k* + R_rho k (chain rule through the five overlaps), so
    the iterates stay in span{k0, v0, k*, v*} and PGD in an orthonormal frame of it is the same map."""
    ks, vs = oracle400
    k0, v0 = P.init_sphere(jax.random.key(1), 400, 3)
    kw = dict(lam=0.1, alpha=4e-3, steps=2000, log_every=50, **SETTING)
    red = P.pgd(k0, v0, ks, vs, reduced=True, **kw)
    full = P.pgd(k0, v0, ks, vs, reduced=False, **kw)
    assert red.kappa.shape == (3, 41) and red.step.shape == (41,)
    for f in ("kappa", "nu", "theta", "eta", "rho", "excess_risk"):
        assert np.max(np.abs(np.asarray(getattr(red, f)) - np.asarray(getattr(full, f)))) < 1e-12, f
    # and the run moves: the test is not trivially satisfied by a frozen trajectory
    assert np.max(np.abs(np.asarray(red.kappa[:, -1] - red.kappa[:, 0]))) > 0.5


def test_single_run_shapes_and_steps(oracle400):
    ks, vs = oracle400
    k0, v0 = P.init_sphere(jax.random.key(2), 400, 1)
    tr = P.pgd(k0[0], v0[0], ks, vs, lam=lambda t: 1.0 / (1.0 + 1e-4 * t), alpha=4e-3, steps=105,
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
    K0, V0 = P.init_sphere(jax.random.key(3), 400, 3)
    k0, v0 = K0[0], V0[0]
    f = lambda k, v: closed_form(k @ ks, v @ vs, v @ ks, k @ vs, k @ v, 0.3, GAMMA, 400.0, 10, 0.0)
    gk, gv = jax.grad(f, argnums=(0, 1))(k0, v0)
    k1 = k0 - 0.01 * (gk - (k0 @ gk) * k0)
    v1 = v0 - 0.01 * (gv - (v0 @ gv) * v0)
    k1, v1 = k1 / jnp.linalg.norm(k1), v1 / jnp.linalg.norm(v1)
    tr = P.pgd(K0, V0, ks, vs, lam=0.3, alpha=0.01, steps=40, log_every=1, **SETTING)
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
    k0, v0 = P.init_manifold(jax.random.key(4), ks, vs, 3)
    kw = dict(lam=0.1, alpha=4e-3, steps=20000, log_every=500, **SETTING)
    t64 = P.pgd(k0, v0, ks, vs, **kw)
    # float32 in full d: the 4-D frame is aligned with k*, v* and keeps exact zeros, hiding the roundoff
    t32 = P.pgd(k0, v0, ks, vs, dtype=jnp.float32, reduced=False, **kw)
    assert t32.kappa.dtype == jnp.float32 and t64.kappa.dtype == jnp.float64
    d64 = float(np.max(t64.dist_manifold))
    d32 = float(np.max(t32.dist_manifold))
    assert d64 <= 1e-13
    assert d32 > 10 * d64 and d32 > 1e-9
    # the run moves on M towards a corner (the test does not pass on a frozen trajectory)
    assert np.all(np.abs(np.asarray(t64.nu[:, -1])) > 0.99)


def test_init_manifold_and_sphere(oracle400):
    ks, vs = oracle400
    k, v = P.init_manifold(jax.random.key(5), ks, vs, 4)
    assert k.shape == (4, 400)
    np.testing.assert_allclose(np.linalg.norm(k, axis=1), 1, atol=1e-14)
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1, atol=1e-14)
    assert np.max(np.abs(np.concatenate([k @ vs, v @ ks, np.sum(k * v, 1)]))) < 1e-15
    k, v = P.init_sphere(jax.random.key(5), 400, 4)
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1, atol=1e-14)
    assert np.max(np.abs(np.sum(k * v, 1))) < 0.3


def test_trajectory_pytree_and_dict(oracle400):
    ks, vs = oracle400
    k0, v0 = P.init_sphere(jax.random.key(1), 400, 3)
    tr = P.pgd(k0, v0, ks, vs, lam=0.1, alpha=4e-3, steps=40, log_every=1, **SETTING)
    leaves = jax.tree_util.tree_leaves(tr)
    assert len(leaves) == 7
    back = P.Trajectory.from_dict(tr.to_dict())
    for f in P.Trajectory._fields[:-1]:
        np.testing.assert_array_equal(getattr(back, f), getattr(tr, f))
    assert back.excess_risk_closed is None
    np.testing.assert_allclose(tr.dist_manifold, np.sqrt(tr.theta ** 2 + tr.eta ** 2 + tr.rho ** 2))
    with pytest.raises(ValueError, match="missing"):
        P.Trajectory.from_dict({"step": np.arange(3)})


def _base(oracle):
    ks, vs = oracle
    k0, v0 = P.init_sphere(jax.random.key(1), 400, 2)
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
        P.pgd(*args, **kw)


def test_pgd_vector_validation(oracle400):
    (k0, v0, ks, vs), kw = _base(oracle400)
    with pytest.raises(ValueError, match="k0 must have unit norm"):
        P.pgd(2 * k0, v0, ks, vs, **kw)
    with pytest.raises(ValueError, match="orthogonal"):
        P.pgd(k0, v0, ks, (ks + vs) / math.sqrt(2), **kw)
    with pytest.raises(ValueError, match="length d=400"):
        P.pgd(k0[:, :10], v0, ks, vs, **kw)
    with pytest.raises(ValueError, match="dtype"):
        P.pgd(k0, v0, ks, vs, dtype=jnp.int32, **kw)
    with pytest.raises(ValueError, match="R must be"):
        P.init_sphere(jax.random.key(0), 10, 0)
    with pytest.raises(ValueError, match="d must be"):
        P.init_sphere(jax.random.key(0), 0, 3)
    with pytest.raises(ValueError, match="key"):
        P.init_sphere(0, 10, 3)


# ----------------------------------------------------------------------------------------------
# pgd_overlaps: per-run parameters in one program


def test_pgd_overlaps_matches_pgd(oracle400):
    """Runs started from the overlaps of d-dim vectors follow pgd from those vectors (the 4-D frames
    differ, the iterates' overlaps agree to round-off); per-run lam0, c, alpha, d reproduce separate runs.
    (d = 400, R = 3 and 40 logs: pgd runs the compiled program of the tests above.)"""
    ks, vs = oracle400
    k0, v0 = P.init_sphere(jax.random.key(6), 400, 3)
    run = dict(steps=400, gamma=GAMMA, L=10, log_every=10)
    kw = dict(alpha=1e-3, **run)
    ref = P.pgd(k0, v0, ks, vs, lam=P.InverseTime(1.0, 1e-3), **kw)
    o = (k0 @ ks, v0 @ vs, v0 @ ks, k0 @ vs, np.sum(k0 * v0, -1))
    out = P.pgd_overlaps(o, lam0=1.0, c=1e-3, d=400, **kw)
    assert out.kappa.shape == (3, 41)
    np.testing.assert_array_equal(out.step, ref.step)
    for f in ("kappa", "nu", "theta", "eta", "rho", "excess_risk"):
        np.testing.assert_allclose(getattr(out, f), np.asarray(getattr(ref, f)), atol=1e-12)
    # per-run parameters: run 1 with its own (lam0, c, alpha, d) equals a single run with those
    per = P.pgd_overlaps(o, lam0=np.array([1.0, 0.5, 1.0]), c=np.array([1e-3, 0.0, 1e-3]),
                         alpha=np.array([1e-3, 2e-3, 1e-3]), d=np.array([400.0, 80.0, 400.0]), **run)
    # (three runs that all take run 1's parameters: the same program as `per`, no new compilation)
    one = P.pgd_overlaps(o, lam0=0.5, c=0.0, alpha=2e-3, d=80.0, **run)
    np.testing.assert_allclose(per.kappa[1], one.kappa[1], atol=1e-14)
    assert np.max(np.abs(per.kappa[0] - one.kappa[0])) > 1e-3  # the parameters do differ between the runs
    np.testing.assert_allclose(per.kappa[0], out.kappa[0], atol=1e-14)


@pytest.mark.parametrize("field,value", [
    ("lam0", -1.0), ("lam0", 0.0), ("c", -1e-3), ("alpha", 0.0), ("d", 0.5), ("steps", 0), ("gamma", 0.0),
    ("L", 0), ("log_every", 0), ("eps", -1.0), ("alpha", np.array([1e-3, np.nan])),
])
def test_pgd_overlaps_validation(field, value):
    kw = dict(lam0=1.0, c=0.0, alpha=1e-3, d=10, steps=10, gamma=0.7, L=3, log_every=5)
    kw[field] = value
    with pytest.raises(ValueError, match=field):
        P.pgd_overlaps([np.full(2, 0.1)] * 5, **kw)
    with pytest.raises(ValueError, match="kappa"):
        P.pgd_overlaps([np.full(2, 1.5)] + [np.full(2, 0.1)] * 4, lam0=1.0, alpha=1e-3, d=10, steps=10, gamma=0.7,
                       L=3, log_every=5)
    with pytest.raises(ValueError, match="overlaps0"):
        P.pgd_overlaps([np.full(2, 0.1)] * 4, lam0=1.0, alpha=1e-3, d=10, steps=10, gamma=0.7, L=3, log_every=5)


# ----------------------------------------------------------------------------------------------
# properties


def _unit(x):
    x = np.asarray(x, dtype=float)
    return x / np.linalg.norm(x)


vec = st.lists(st.floats(-1, 1), min_size=6, max_size=6).filter(lambda x: np.linalg.norm(x) > 1e-3)


@settings(max_examples=40, deadline=None)
@given(k=vec, v=vec, gk=st.lists(st.floats(-1e3, 1e3), min_size=6, max_size=6),
       gv=st.lists(st.floats(-1e3, 1e3), min_size=6, max_size=6), alpha=st.floats(1e-6, 1.0))
def test_hyp_projected_step_keeps_unit_norms(k, v, gk, gv, alpha):
    """Definition 1 renormalises: both iterates are unit vectors whatever the gradients and step."""
    k1, v1 = P.projected_step(jnp.asarray(_unit(k)), jnp.asarray(_unit(v)), jnp.asarray(gk), jnp.asarray(gv), alpha)
    assert abs(float(jnp.linalg.norm(k1)) - 1) < 1e-14 and abs(float(jnp.linalg.norm(v1)) - 1) < 1e-14


@settings(max_examples=30, deadline=None)
@given(field=st.sampled_from(["lam0", "alpha", "d", "c"]), bad=st.floats(-1e6, 0.0, exclude_max=True))
def test_hyp_pgd_overlaps_refuses_out_of_range(field, bad):
    """Every negative lam0, alpha, d, c (and zero for lam0, alpha) is refused, naming the argument."""
    kw = dict(lam0=1.0, c=0.0, alpha=1e-3, d=10.0, steps=2, gamma=0.7, L=3, log_every=1)
    kw[field] = bad
    with pytest.raises(ValueError, match=field):
        P.pgd_overlaps([np.full(1, 0.1)] * 5, **kw)


@settings(max_examples=30, deadline=None)
@given(field=st.sampled_from(["alpha", "gamma", "lam"]), bad=st.floats(-1e6, 0.0))
def test_hyp_pgd_refuses_out_of_range(field, bad):
    ks, vs = np.eye(6)[0], np.eye(6)[1]
    kw = dict(lam=0.1, alpha=1e-3, steps=2, gamma=0.7, L=3, log_every=1)
    kw[field] = bad
    with pytest.raises(ValueError, match=field):
        P.pgd(np.eye(6)[2], np.eye(6)[3], ks, vs, **kw)


def test_final_summary_median_min_max_of_the_last_step():
    step = np.arange(3)
    z = np.zeros((5, 3))
    kappa = z.copy()
    kappa[:, -1] = [-1.0, 0.5, 0.2, 0.9, 0.1]
    traj = P.Trajectory(step, kappa, z + 1.0, z, z, z + 0.3, z + 2.0)
    s = P.final_summary(traj)
    assert s["kappa"][0] == 0.5 and s["nu"] == (1.0, 1.0, 1.0) and s["risk"][0] == 2.0
    assert np.isclose(s["dist"][0], 0.3) and s["kappa"][1:] == (0.1, 1.0)
    with pytest.raises(ValueError, match="repeat axis"):
        P.final_summary(P.Trajectory(step, *(np.zeros(3),) * 6))


def test_inverse_time_freeze():
    """lam0 / (1 + c min(t, freeze)); without freeze the plain schedule, and a traced pair (lam0, c)."""
    t = np.array([0, 100, 200, 1000])
    np.testing.assert_allclose(np.asarray(P.InverseTime(2.0, 1e-2, 200)(t)), [2.0, 1.0, 2 / 3, 2 / 3])
    np.testing.assert_allclose(np.asarray(P.InverseTime(2.0, 1e-2)(t)), 2.0 / (1 + 1e-2 * t))
    assert P.split_lam(P.InverseTime(2.0, 1e-2))[0] is None
    frozen = P.InverseTime(2.0, 1e-2, 200)
    assert P.split_lam(frozen) == (frozen, 1.0, 0.0)


def test_init_sphere_heads():
    """H heads: every row a unit vector; the numbers of init_sphere(key, d, R * H) reshaped."""
    k, v = P.init_sphere(jax.random.key(4), 12, 3, H=2)
    assert k.shape == v.shape == (3, 2, 12)
    np.testing.assert_allclose(np.linalg.norm(k, axis=-1), 1, atol=1e-14)
    k6, v6 = P.init_sphere(jax.random.key(4), 12, 6)
    np.testing.assert_array_equal(k.reshape(6, 12), k6)
    np.testing.assert_array_equal(v.reshape(6, 12), v6)
    with pytest.raises(ValueError, match="H"):
        P.init_sphere(jax.random.key(4), 12, 3, H=0)


@pytest.mark.parametrize("steps,log_every", [(40 * 51, 51), (40 * 51 + 7, 51), (5, 10)])
def test_one_copy_loop_is_run_chunks(steps, log_every):
    """pgd's loop (one copy of the step, the remainder as a last chunk) takes the steps of
    slr.loop.run_chunks unrolled (the other trainers' loop): the same step indices in the same order and
    the same logs, chunk lengths traced. The step reads its index (a skipped, repeated or reordered step
    changes the carry) and an odd chunk length exercises run_chunks' remainder loop."""
    from slr import loop

    body = lambda c, t: c * (1.0 + 1e-3 * jnp.sin(t.astype(jnp.float64))) + jnp.cos(3.0 * t)
    log = lambda c: c
    n_chunks, rem = loop.schedule(steps, log_every)
    ours = jax.jit(lambda every, last: loop.run_one_copy(body, jnp.float64(0.5), log, n_chunks + (rem is not None),
                                                        every, last))(log_every, rem or log_every)
    theirs = jax.jit(lambda every, r: loop.run_chunks(body, jnp.float64(0.5), log, n_chunks, every,
                                                      None if rem is None else r, 2))(log_every, rem or 0)
    assert ours.shape == (len(loop.log_steps(steps, log_every)),)
    np.testing.assert_array_equal(ours, theirs)
    # the body is not trivially invariant: a skipped step changes the carry
    skipped = jax.jit(lambda every, last: loop.run_one_copy(body, jnp.float64(0.5), log, n_chunks + (rem is not None),
                                                           every, last))(log_every, (rem or log_every) - 1)
    assert skipped[-1] != ours[-1]
