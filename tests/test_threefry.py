"""slr.threefry: the unrolled threefry lowering on CPU gives the bits of JAX's rolled loop."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax._src.random import threefry2x32 as tf

from slr import threefry


def test_unrolled_threefry_equals_the_rolled_loop():
    assert threefry.UNROLLED
    k1, k2 = jnp.uint32(0x12345678), jnp.uint32(0x9ABCDEF0)
    x = jax.random.bits(jax.random.key(3), (2, 1000), dtype=jnp.uint32)
    rolled = jax.jit(lambda *a: tf._threefry2x32_lowering(*a, use_rolled_loops=True))(k1, k2, x[0], x[1])
    unrolled = jax.jit(lambda *a: tf.threefry2x32_p.bind(*a))(k1, k2, x[0], x[1])  # the registered rule
    for a, b in zip(rolled, unrolled):
        np.testing.assert_array_equal(a, b)
    wrong = jax.jit(lambda *a: tf._threefry2x32_lowering(*a, use_rolled_loops=True))(k2, k1, x[0], x[1])
    assert np.mean(np.asarray(wrong[0]) == np.asarray(unrolled[0])) < 0.01  # the check can fail


@pytest.mark.skipif(jax.__version__ != "0.10.2", reason="the reference numbers of JAX 0.10.2")
def test_known_normals():
    """jax.random.normal of a fixed key: the numbers JAX 0.10.2's own (rolled) CPU lowering gives."""
    z = np.asarray(jax.random.normal(jax.random.fold_in(jax.random.key(0), 7), (4,), dtype=jnp.float64))
    np.testing.assert_array_equal(z, [float.fromhex(h) for h in REFERENCE])


REFERENCE = ("-0x1.ac21a470e329bp-1", "-0x1.8269b2e559a9cp-2", "0x1.729702faffae2p-2", "0x1.806f00f106aa8p-2")
