"""The reduced sampler for predictors other than erf (slr.reduced.projection_coefficients): exactly the
erf formulas when given erf, and the law of the full draw's mini-batch gradient for softmax and ReLU."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from slr import pgd, predictors, reduced, sgd, task

D, L, B, LAM, GAMMA, EPS = 12, 4, 6, 0.4, math.sqrt(0.5), 0.1


@pytest.fixture(scope="module", autouse=True)
def _oracle_and_start():
    """The oracle, the start and the fallback directions, made when the file runs (not at collection, where
    every xdist worker imports every file)."""
    global KS, VS, K0, V0, K, V, W
    KS, VS = task.sample_oracle(jax.random.key(0), D)
    K0, V0 = pgd.init_sphere(jax.random.key(1), D, 1)
    K, V = K0[0], V0[0]
    W = reduced.fallback_directions(D)


def test_differentiated_coefficients_are_erfs_written_out():
    # one program for both (eagerly, each operation of the gradients compiles alone)
    @jax.jit
    def both(key):
        nz = reduced.reduced_noise(key, D, L, B)
        return (reduced.reduced_grads(nz, K, V, KS, VS, W, LAM, GAMMA, L, EPS, B),
                reduced.reduced_grads(nz, K, V, KS, VS, W, LAM, GAMMA, L, EPS, B, predictors.attention_erf))

    a, b = both(jax.random.key(3))
    for x, y in zip(a, b):
        np.testing.assert_allclose(x, y, atol=1e-14)


def _full(f, key):
    X, y = task.sample(key, B, KS, VS, L=L, gamma=GAMMA, eps=EPS)[:2]
    mse = lambda k, v: jnp.mean(jnp.square(y - f(X, k, v, LAM)))
    return jnp.concatenate(jax.grad(mse, argnums=(0, 1))(K, V))


def _reduced(f, key):
    nz = reduced.reduced_noise(key, D, L, B)
    return jnp.concatenate(reduced.reduced_grads(nz, K, V, KS, VS, W, LAM, GAMMA, L, EPS, B, f))


@pytest.mark.parametrize("name", ["softmax", "relu"])
def test_the_reduced_gradient_has_the_law_of_the_full_draw(name):
    """Means and second moments of the 2d gradient entries, over N = 6000 draws of each sampler: every
    |z| < 5 (60 + 60 two-sample z-scores: a false alarm has probability < 1e-4). The control: the
    reduced gradient of another predictor (erf) against the full draw of this one fails."""
    f = predictors.PREDICTORS[name]
    keys = jax.random.split(jax.random.key(7), 2 * 6000)
    full = np.asarray(jax.jit(jax.vmap(lambda k: _full(f, k)))(keys[:6000]))
    red = np.asarray(jax.jit(jax.vmap(lambda k: _reduced(f, k)))(keys[6000:]))
    wrong = np.asarray(jax.jit(jax.vmap(lambda k: _reduced(predictors.attention_erf, k)))(keys[6000:]))

    def zmax(a, b):
        zs = []
        for g in (lambda x: x, np.square):
            x, y = g(a), g(b)
            zs.append((x.mean(0) - y.mean(0)) / np.sqrt(x.var(0) / len(x) + y.var(0) / len(y)))
        return float(np.max(np.abs(np.concatenate(zs))))
    assert zmax(full, red) < 5
    assert zmax(full, wrong) > 5


def test_sgd_trains_softmax_with_the_reduced_sampler_and_refuses_two_heads():
    ks, vs = KS[None], VS[None]
    log = sgd.train(jax.random.key(4), K0[:, None], V0[:, None], ks, vs, lam=LAM, alpha=0.05, steps=20,
                    batch=B, gamma=GAMMA, L=L, eps=EPS, log_every=10, predictor="softmax",
                    sampler="reduced")
    assert np.all(np.isfinite(log.kappa))
    with pytest.raises(ValueError, match="sampler"):
        sgd.train(jax.random.key(4), K0[:, None], V0[:, None], ks, vs, lam=LAM, alpha=0.05, steps=20,
                  batch=B, gamma=GAMMA, L=L, eps=EPS, log_every=10, predictor="argmax", sampler="reduced")
