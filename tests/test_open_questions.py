import math

import jax
import numpy as np
import pytest

from slr import dynamics, task
from slr import open_questions as oq


def test_pgd_sweep_matches_dynamics_pgd():
    ko, ki = jax.random.split(jax.random.key(0))
    ks, vs = task.sample_oracle(ko, 50)
    k0, v0 = dynamics.init_sphere(ki, 50, 3)
    ref = dynamics.pgd(k0, v0, ks, vs, lam=dynamics.InverseTime(1.0, 1e-3), alpha=1e-3, steps=400,
                       gamma=math.sqrt(0.5), L=10, log_every=100)
    o = (k0 @ ks, v0 @ vs, v0 @ ks, k0 @ vs, np.sum(k0 * v0, -1))
    out = oq.pgd_sweep(o, lam0=1.0, c=1e-3, alpha=1e-3, d=50, steps=400, gamma=math.sqrt(0.5), L=10, log_every=100)
    for f in ("kappa", "nu", "theta", "eta", "rho", "excess_risk"):
        np.testing.assert_allclose(out[f], np.asarray(getattr(ref, f)), atol=1e-12)


def test_frame_vectors_overlaps():
    o = (0.3, -0.2, 0.1, 0.05, -0.4)
    k, v = oq.frame_vectors(*o)
    np.testing.assert_allclose([k[0], v[1], v[0], k[1], k @ v], o, atol=1e-14)
    np.testing.assert_allclose([np.linalg.norm(k), np.linalg.norm(v)], 1.0, atol=1e-14)


def test_oracle_at_angle():
    ks, vs = oq.oracle_at_angle(jax.random.key(1), 20, math.pi / 3)
    assert abs(float(ks[0] @ ks[1]) - 0.5) < 1e-12
    assert abs(float(vs[0] @ vs[1])) < 1e-12 and np.max(np.abs(np.asarray(ks @ vs.T))) < 1e-12
    with pytest.raises(ValueError, match="which"):
        oq.oracle_at_angle(jax.random.key(1), 20, 1.0, which="q")


def test_separation():
    A, s = oq.separation(np.array([[0.1, 0.9], [0.95, 0.0]]))
    np.testing.assert_allclose(np.diag(A), [0.9, 0.95])
    assert abs(s - (0.925 - 0.05)) < 1e-12


def test_pgd_sweep_validates():
    with pytest.raises(ValueError, match="alpha"):
        oq.pgd_sweep((0.1,) * 5, lam0=1.0, c=0.0, alpha=-1.0, d=10, steps=10, gamma=0.7, L=3, log_every=5)
    with pytest.raises(ValueError, match="multiple"):
        oq.pgd_sweep((0.1,) * 5, lam0=1.0, c=0.0, alpha=1.0, d=10, steps=11, gamma=0.7, L=3, log_every=5)
