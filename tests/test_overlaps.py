"""slr.overlaps: the five overlaps, the distance to M, the 4-D frame, vectors with given overlaps."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import slr  # noqa: F401  (float64)
from slr import overlaps as O


def test_overlaps_and_dist_manifold():
    ks, vs, k, v = np.eye(5)[0], np.eye(5)[1], np.array([0.6, 0.0, 0.8, 0, 0]), np.array([0.0, 0.6, 0.0, 0.8, 0])
    np.testing.assert_allclose(O.overlaps(k, v, ks, vs), (0.6, 0.6, 0.0, 0.0, 0.0))
    assert float(O.dist_manifold(0.3, 0.4, 1.2)) == pytest.approx(1.3)


def test_frame_spans_the_four_vectors():
    g = np.asarray(jax.random.normal(jax.random.key(0), (4, 30)))
    Q = np.asarray(O.frame(*g))
    np.testing.assert_allclose(Q.T @ Q, np.eye(4), atol=1e-14)
    np.testing.assert_allclose(Q @ (Q.T @ g.T), g.T, atol=1e-13)


def test_frame_vectors_at_a_corner_and_batched():
    """Degenerate Gram matrices (k = k*, v = v*) are handled; arrays broadcast to (..., dim)."""
    ks, vs, k, v = O.frame_vectors(1.0, 1.0, 0.0, 0.0, 0.0, dim=5)
    assert k.shape == (5,) and np.all(np.isfinite(np.asarray(k)))
    np.testing.assert_allclose(O.overlaps(k, v, ks, vs), (1, 1, 0, 0, 0), atol=1e-7)  # sqrt(eps) at a rank-2 G
    ks, vs, k, v = O.frame_vectors(np.array([0.3, -0.2]), -0.2, 0.1, 0.05, -0.4)
    assert k.shape == (2, 4)
    with pytest.raises(ValueError, match="theta"):
        O.frame_vectors(0.3, 0.2, 1.5, 0.0, 0.0)
    with pytest.raises(ValueError, match="dim"):
        O.frame_vectors(0.3, 0.2, 0.1, 0.0, 0.0, dim=3)


unit6 = st.lists(st.floats(-1, 1), min_size=6, max_size=6).filter(lambda x: np.linalg.norm(x) > 1e-2)


@settings(max_examples=40, deadline=None)
@given(k=unit6, v=unit6)
def test_hyp_frame_vectors_realise_the_overlaps(k, v):
    """The overlaps of unit vectors k, v of R^6 against k* = e1, v* = e2 are realised by frame_vectors:
    unit k, v, orthonormal k*, v*, the same five overlaps (the Gram matrix determines them)."""
    k, v = (np.asarray(x) / np.linalg.norm(x) for x in (k, v))
    o = O.overlaps(k, v, np.eye(6)[0], np.eye(6)[1])
    ks, vs, k4, v4 = (np.asarray(x) for x in O.frame_vectors(*o))
    G = np.stack([ks, vs, k4, v4]) @ np.stack([ks, vs, k4, v4]).T
    np.testing.assert_allclose(np.diag(G), 1.0, atol=1e-12)
    assert abs(G[0, 1]) < 1e-12
    # eigen-square-root of a (near) singular Gram matrix: error up to sqrt(machine eps) * |entries|
    np.testing.assert_allclose(O.overlaps(k4, v4, ks, vs), o, atol=1e-7)


@settings(max_examples=20, deadline=None)
@given(bad=st.one_of(st.floats(1.0 + 1e-8, 1e6), st.floats(-1e6, -1.0 - 1e-8)),
       i=st.integers(0, 4))
def test_hyp_frame_vectors_refuses_out_of_range(bad, i):
    """Beyond the round-off tolerance 1e-9 every overlap outside [-1, 1] is refused, by name."""
    o = [0.1] * 5
    o[i] = bad
    with pytest.raises(ValueError, match=("kappa", "nu", "theta", "eta", "rho")[i]):
        O.frame_vectors(*o)


def test_oracle_frame_vectors_realise_the_overlaps():
    e = np.eye(4)
    for pt in [(1.0, 1.0, 0.0, 0.0, 0.0), (0.5, 0.3, 0.6, -0.4, 0.2), (-0.3, 0.6, -0.5, 0.1, -0.3)]:
        k, v = O.oracle_frame_vectors(*pt)
        np.testing.assert_allclose([k @ k, v @ v], 1.0, atol=1e-14)
        np.testing.assert_allclose(np.array(O.overlaps(k, v, e[0], e[1])), pt, atol=1e-14)
    with pytest.raises(ValueError, match="kappa"):
        O.oracle_frame_vectors(1.5, 0.0, 0.0, 0.0, 0.0)


def test_trajectory_gap_is_the_largest_overlap_difference_per_step():
    from types import SimpleNamespace
    import numpy as np
    from slr.overlaps import trajectory_gap
    a = SimpleNamespace(**{n: np.zeros((2, 3)) for n in ("kappa", "nu", "theta", "eta", "rho")})
    b = SimpleNamespace(**{n: np.zeros((2, 3)) for n in ("kappa", "nu", "theta", "eta", "rho")})
    b.eta = np.array([[0.0, -0.5, 0.0], [0.1, 0.0, 0.0]])
    b.rho = np.array([[0.0, 0.0, 0.0], [0.0, 0.2, 1e-9]])
    assert np.array_equal(trajectory_gap(a, b), [0.1, 0.5, 1e-9])
    assert np.array_equal(trajectory_gap(a, b, per_run=True), [0.5, 0.2])   # run 0: eta; run 1: rho
    b.nu = np.zeros((2, 4))
    with pytest.raises(ValueError, match="same shapes"):
        trajectory_gap(a, b)


def test_separation():
    """Head matching: the columns permuted to the best matching; score = mean diag - mean offdiag."""
    A, s = O.separation(np.array([[0.1, 0.9], [0.95, 0.0]]))
    np.testing.assert_allclose(np.diag(A), [0.9, 0.95])
    assert abs(s - (0.925 - 0.05)) < 1e-12
    _, s = O.separation(np.stack([np.eye(3), np.full((3, 3), 0.5)]))  # batched: separated, mixed
    np.testing.assert_allclose(s, [1.0, 0.0], atol=1e-15)
    with pytest.raises(ValueError, match="overlap"):
        O.separation(np.ones((2, 3)))


def test_matching_is_separations_matching():
    """matching gives each head its oracle direction under separation's matching: the columns it selects
    are those of separation's matched matrix; a tie goes to the identity."""
    o = np.array([[0.1, -0.9], [0.95, 0.0]])
    assert O.matching(o).tolist() == [1, 0]
    assert O.matching(o[:, ::-1]).tolist() == [0, 1]                   # control: keys swapped
    assert O.matching(np.full((2, 2), 0.5)).tolist() == [0, 1]        # a tie: the identity
    # the best of the six permutations for three heads, not the greedy choice per head: head 0 prefers
    # key 0 (0.9) but the sum is larger with head 0 on key 1 and head 1 on key 0
    o3 = np.array([[0.9, 0.8, 0.0], [0.85, 0.1, 0.0], [0.0, 0.0, 1.0]])
    assert O.matching(o3).tolist() == [1, 0, 2]
    g = np.asarray(jax.random.normal(jax.random.key(3), (50, 3, 3)))
    P = O.matching(g)
    np.testing.assert_array_equal(np.take_along_axis(np.abs(g), P[..., None, :], -1), O.separation(g)[0])
    assert sorted(map(tuple, np.sort(P, axis=-1))) == [(0, 1, 2)] * 50  # one key per head
    with pytest.raises(ValueError, match="overlap"):
        O.matching(np.ones((2, 3)))
