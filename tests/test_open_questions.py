import math

import jax
import numpy as np
import pytest

from slr import open_questions as oq


def test_sphere_overlaps_shapes_and_scale():
    """Uniform starts in R^d: each overlap is one coordinate of a uniform point of S^{d-1}, variance 1/d."""
    o = oq.sphere_overlaps(jax.random.key(0), 400, 2000)
    assert len(o) == 5 and all(x.shape == (2000,) for x in o)
    for x in o:
        assert abs(float(np.mean(np.square(x))) * 400 - 1.0) < 0.15


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
