"""slr.task: the law of the samples of SLR(k_star, v_star) (Section 2.1) and of Eq. (30)."""
import math

import jax
import numpy as np
import pytest
from scipy import stats

import slr  # noqa: F401  (float64)
from slr import task

G_HALF = math.sqrt(0.5)


def test_sample_oracle_orthonormal():
    for d in (2, 3, 50, 400):
        ks, vs = task.sample_oracle(jax.random.key(d), d)
        ks, vs = np.asarray(ks), np.asarray(vs)
        assert ks.shape == vs.shape == (d,)
        assert np.linalg.norm(ks) == pytest.approx(1.0, abs=1e-13)
        assert np.linalg.norm(vs) == pytest.approx(1.0, abs=1e-13)
        assert abs(ks @ vs) < 1e-13


def test_sample_oracle_uniform_on_sphere():
    # Haar: the first coordinate of k_star has mean 0 and variance 1/d; both signs occur.
    d = 5
    keys = jax.random.split(jax.random.key(0), 400)
    frames = np.asarray(jax.vmap(lambda k: task.orthonormal_frame(k, d, 2))(keys))
    first = frames[:, 0, 0]
    ks, vs = task.sample_oracle(keys[3], d)
    np.testing.assert_array_equal(ks, frames[3, 0])
    np.testing.assert_array_equal(vs, frames[3, 1])
    assert abs(first.mean()) < 4 * math.sqrt(1 / d / 400)
    assert first.var() == pytest.approx(1 / d, rel=0.25)


def test_sample_oracle_multi():
    ks, vs = task.sample_oracle_multi(jax.random.key(0), 10, 3)
    frame = np.concatenate([np.asarray(ks), np.asarray(vs)])
    assert ks.shape == vs.shape == (3, 10)
    np.testing.assert_allclose(frame @ frame.T, np.eye(6), atol=1e-13)


def test_sample_shapes_and_determinism():
    ks, vs = task.sample_oracle(jax.random.key(0), 7)
    X, y, J0 = task.sample(jax.random.key(1), 13, ks, vs, L=4, gamma=G_HALF, eps=0.1)
    assert X.shape == (13, 4, 7) and y.shape == (13,) and J0.shape == (13,)
    assert X.dtype == np.float64 and y.dtype == np.float64
    X2, y2, J2 = task.sample(jax.random.key(1), 13, ks, vs, L=4, gamma=G_HALF, eps=0.1)
    np.testing.assert_array_equal(X, X2)
    np.testing.assert_array_equal(y, y2)
    np.testing.assert_array_equal(J0, J2)
    X3, _, _ = task.sample(jax.random.key(2), 13, ks, vs, L=4, gamma=G_HALF, eps=0.1)
    assert not np.allclose(X, X3)
    # legacy PRNGKey accepted too
    task.sample(jax.random.PRNGKey(1), 2, ks, vs, L=4, gamma=G_HALF)


@pytest.fixture(scope="module")
def big_sample():
    d, L, gamma, eps, n = 8, 5, G_HALF, 0.3, 40_000
    ks, vs = task.sample_oracle(jax.random.key(10), d)
    X, y, J0 = task.sample(jax.random.key(11), n, ks, vs, L=L, gamma=gamma, eps=eps)
    return dict(d=d, L=L, gamma=gamma, eps=eps, n=n, ks=np.asarray(ks), vs=np.asarray(vs),
                X=np.asarray(X), y=np.asarray(y), J0=np.asarray(J0))


def test_location_uniform(big_sample):
    s = big_sample
    counts = np.bincount(s["J0"], minlength=s["L"])
    assert counts.shape == (s["L"],) and s["J0"].min() >= 0
    assert stats.chisquare(counts).pvalue > 1e-4


def test_informative_token_law(big_sample):
    s = big_sample
    n, d = s["n"], s["d"]
    XJ = s["X"][np.arange(n), s["J0"]]
    mean = XJ.mean(axis=0)
    # mean sqrt(d/2) k_star, each coordinate within 5 standard errors (sd gamma)
    assert np.max(np.abs(mean - math.sqrt(d / 2) * s["ks"])) < 5 * s["gamma"] / math.sqrt(n)
    cov = np.cov((XJ - math.sqrt(d / 2) * s["ks"]).T)
    np.testing.assert_allclose(cov, s["gamma"] ** 2 * np.eye(d), atol=0.02)


def test_other_tokens_standard_normal(big_sample):
    s = big_sample
    mask = np.ones(s["X"].shape[:2], bool)
    mask[np.arange(s["n"]), s["J0"]] = False
    other = s["X"][mask]
    assert other.shape == (s["n"] * (s["L"] - 1), s["d"])
    assert np.max(np.abs(other.mean(axis=0))) < 5 / math.sqrt(other.shape[0])
    np.testing.assert_allclose(np.cov(other.T), np.eye(s["d"]), atol=0.02)
    # no mean along k_star: the informative token is the only one that carries it
    assert abs((other @ s["ks"]).mean()) < 5 / math.sqrt(other.shape[0])


def test_label_formula(big_sample):
    s = big_sample
    n = s["n"]
    XJ = s["X"][np.arange(n), s["J0"]]
    noise = s["y"] - XJ @ s["vs"]
    assert abs(noise.mean()) < 5 * s["eps"] / math.sqrt(n)
    assert noise.var() == pytest.approx(s["eps"] ** 2, rel=0.05)
    # noise independent of the tokens
    assert abs(np.corrcoef(noise, XJ @ s["vs"])[0, 1]) < 5 / math.sqrt(n)


def test_noiseless_label_exact():
    ks, vs = task.sample_oracle(jax.random.key(0), 6)
    X, y, J0 = task.sample(jax.random.key(1), 50, ks, vs, L=3, gamma=1.0, eps=0.0)
    X, y, J0 = map(np.asarray, (X, y, J0))
    np.testing.assert_allclose(y, X[np.arange(50), J0] @ np.asarray(vs), atol=1e-13)


def test_nonuniform_locations():
    ks, vs = task.sample_oracle(jax.random.key(0), 4)
    p = np.array([0.7, 0.0, 0.2, 0.1])
    _, _, J0 = task.sample(jax.random.key(1), 20_000, ks, vs, L=4, gamma=1.0, p=p)
    counts = np.bincount(np.asarray(J0), minlength=4)
    assert counts[1] == 0
    assert stats.chisquare(counts[[0, 2, 3]], 20_000 * p[[0, 2, 3]]).pvalue > 1e-4


def test_sample_multi():
    d, L, H, n, eps = 12, 6, 3, 20_000, 0.2
    ks, vs = task.sample_oracle_multi(jax.random.key(0), d, H)
    X, y, J = task.sample_multi(jax.random.key(1), n, ks, vs, L=L, gamma=G_HALF, eps=eps)
    X, y, J, ks, vs = map(np.asarray, (X, y, J, ks, vs))
    assert X.shape == (n, L, d) and y.shape == (n,) and J.shape == (n, H)
    assert all(len(set(row)) == H for row in J[:2000])
    assert np.all(np.sort(J, axis=1)[:, 1:] != np.sort(J, axis=1)[:, :-1])
    assert J.min() >= 0 and J.max() < L
    # label: y = sum_h X_{J_h} . v_star_h + noise of variance eps^2
    signal = np.einsum("nhd,hd->n", X[np.arange(n)[:, None], J], vs)
    noise = y - signal
    assert noise.var() == pytest.approx(eps ** 2, rel=0.05)
    assert abs(noise.mean()) < 5 * eps / math.sqrt(n)
    # the token at J_h has mean sqrt(d/2) k_star_h
    for h in range(H):
        m = X[np.arange(n), J[:, h]].mean(axis=0)
        assert np.max(np.abs(m - math.sqrt(d / 2) * ks[h])) < 5 * G_HALF / math.sqrt(n)
    # the ordered tuples are uniform: J_1 is uniform on 0..L-1
    assert stats.chisquare(np.bincount(J[:, 0], minlength=L)).pvalue > 1e-4
    X2, y2, J2 = task.sample_multi(jax.random.key(1), n, ks, vs, L=L, gamma=G_HALF, eps=eps)
    np.testing.assert_array_equal(y, y2)


def test_sample_multi_single_head_matches_sample_law():
    ks, vs = task.sample_oracle(jax.random.key(0), 5)
    X, y, J = task.sample_multi(jax.random.key(1), 30, ks, vs, L=4, gamma=1.0)
    assert J.shape == (30, 1)
    np.testing.assert_allclose(np.asarray(y), np.einsum("nd,d->n", np.asarray(X)[np.arange(30), np.asarray(J)[:, 0]],
                                                        np.asarray(vs)), atol=1e-13)


def test_multi_kernel_is_traceable_and_is_sample_multi():
    """draws + assemble (the kernel the Transformer, multi-head and open-questions code share) give
    exactly sample_multi's samples for the same key when compiled as sample_multi compiles them (gamma
    and eps traced), and the same up to round-off outside a jit (XLA's fused arithmetic may differ in
    the last bit from one operation at a time)."""
    ks, vs = task.sample_oracle_multi(jax.random.key(5), 9, 2)
    X, y, J = task.sample_multi(jax.random.key(6), 11, ks, vs, L=5, gamma=0.6, eps=0.2)

    def kernel(key, ks, vs, gamma=0.6, eps=0.2):
        return task.assemble(task.draws(key, 11, L=5, d=9, H=2), ks, vs, gamma=gamma, eps=eps)

    for X2, y2, J2, exact in (jax.jit(kernel)(jax.random.key(6), ks, vs, 0.6, 0.2) + (True,),
                              kernel(jax.random.key(6), ks, vs) + (False,)):
        assert np.array_equal(np.asarray(J), np.asarray(J2))
        if exact:
            assert np.array_equal(np.asarray(X), np.asarray(X2)) and np.array_equal(np.asarray(y), np.asarray(y2))
        else:
            np.testing.assert_allclose(np.asarray(X2), np.asarray(X), rtol=1e-13, atol=1e-13)
            np.testing.assert_allclose(np.asarray(y2), np.asarray(y), rtol=1e-13, atol=1e-13)


def test_norm_rule_rates_match_sampled_squared_norms():
    # Draw the squared norms from their laws: chi2_d for the noise tokens, gamma^2 x noncentral chi2_d
    # (noncentrality d / (2 gamma^2)) for the informative one (column 0); 4e5 sequences, |z| < 4.5.
    d, L, n = 400, 10, 400_000
    rng = np.random.default_rng(0)
    for gamma in (G_HALF, math.sqrt(0.6)):
        sq = rng.chisquare(d, size=(n, L))
        sq[:, 0] = gamma ** 2 * rng.noncentral_chisquare(d, d / (2 * gamma ** 2), size=n)
        longest, closest = task.norm_rule_rates(d=d, L=L, gamma=gamma)
        for rate, picked in ((longest, np.argmax(sq, axis=1)), (closest, np.argmin(np.abs(sq - d), axis=1))):
            mc = np.mean(picked == 0)
            assert abs(mc - rate) < 4.5 * math.sqrt(rate * (1 - rate) / n), (gamma, mc, rate)


def test_norm_rule_rates_validate():
    with pytest.raises(ValueError, match="gamma"):
        task.norm_rule_rates(d=10, L=3, gamma=0.0)
    with pytest.raises(ValueError, match="L"):
        task.norm_rule_rates(d=10, L=1.5, gamma=1.0)


def test_argmax_failure_matches_sampled_projections_and_bounds():
    # The projections on k*: N(sqrt(d/2), gamma^2) for the informative token (column 0), N(0, 1) else.
    L, n, rng = 10, 400_000, np.random.default_rng(1)
    for d in (4, 16):
        proj = rng.standard_normal((n, L))
        proj[:, 0] = math.sqrt(d / 2) + G_HALF * proj[:, 0]
        mc = np.mean(np.argmax(proj, axis=1) != 0)
        exact = task.argmax_failure(d=d, L=L, gamma=G_HALF)
        assert abs(mc - exact) < 4.5 * math.sqrt(exact * (1 - exact) / n), (d, mc, exact)
    # one noise token's miss probability <= the failure probability <= the union bound over L - 1 tokens
    pair = stats.norm.cdf(-math.sqrt(64 / (2 * 1.5)))
    assert pair < task.argmax_failure(d=64, L=L, gamma=G_HALF) < (L - 1) * pair
    assert task.argmax_failure(d=[16, 64], L=L, gamma=G_HALF).shape == (2,)
    with pytest.raises(ValueError, match="d"):
        task.argmax_failure(d=0.5, L=L, gamma=G_HALF)


def test_oracle_at_angle():
    ks, vs = task.oracle_at_angle(jax.random.key(1), 20, math.pi / 3)
    assert abs(float(ks[0] @ ks[1]) - 0.5) < 1e-12
    assert abs(float(vs[0] @ vs[1])) < 1e-12 and np.max(np.abs(np.asarray(ks @ vs.T))) < 1e-12
    vk, kv = task.oracle_at_angle(jax.random.key(1), 20, math.pi / 3, which="v")
    np.testing.assert_array_equal(vk, vs)
    np.testing.assert_array_equal(kv, ks)
    # one oracle per angle, each from its own frame
    K, V = task.oracle_at_angle(jax.random.key(2), 20, np.array([math.pi / 2, math.pi / 6]))
    assert K.shape == V.shape == (2, 2, 20)
    np.testing.assert_allclose(np.einsum("nd,nd->n", K[:, 0], K[:, 1]), [0.0, math.sqrt(3) / 2], atol=1e-12)
    with pytest.raises(ValueError, match="which"):
        task.oracle_at_angle(jax.random.key(1), 20, 1.0, which="q")
    with pytest.raises(ValueError, match="phi"):
        task.oracle_at_angle(jax.random.key(1), 20, 4.0)


@pytest.mark.parametrize("shape", [(7,), (3, 4), (5, 2, 3), (2, 1, 4, 3)])
def test_normal_is_jax_normal_bit_for_bit(shape):
    key = jax.random.key(11)
    assert np.array_equal(task.normal(key, shape), jax.random.normal(key, shape, dtype=np.float64))
    keys = jax.random.split(key, 3)   # and under vmap
    assert np.array_equal(jax.vmap(lambda k: task.normal(k, shape))(keys),
                          jax.vmap(lambda k: jax.random.normal(k, shape, dtype=np.float64))(keys))
