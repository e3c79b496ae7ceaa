import jax
import numpy as np

from slr import icl, icl_check


def test_gd_coefficients_reproduce_the_gd_prediction():
    G = np.arange(9.0).reshape(3, 3) / 10
    X, y, xq, _, _ = icl.sample_icl(jax.random.key(0), 50, cov=np.eye(3), n=7)
    F = np.asarray(icl_check.span_features(X, y, xq))
    assert F.shape == (50, 10 * 3)      # (d+1)(d+2)/2 pairs times d
    np.testing.assert_allclose(F @ icl_check.gd_coefficients(G), icl.gd_predict(X, y, xq, G), atol=1e-12)


def test_span_features_reproduce_any_layer():
    rng = np.random.default_rng(1)
    params = {"p": rng.standard_normal(4), "Q": rng.standard_normal((4, 3))}
    X, y, xq, _, _ = icl.sample_icl(jax.random.key(1), 30, cov=np.eye(3), n=6)
    F = np.asarray(icl_check.span_features(X, y, xq))
    coef = np.linalg.lstsq(F, np.asarray(icl.lsa_predict(params, X, y, xq)), rcond=None)[0]
    np.testing.assert_allclose(F @ coef, icl.lsa_predict(params, X, y, xq), atol=1e-9)


def test_span_fit_finds_the_optimum_and_rejects_a_wrong_step():
    d, n = 3, 8
    refs = {"opt": icl.step_star(d=d, n=n, noise=0.1) * np.eye(d), "wrong": 0.9 * np.eye(d)}
    out = icl_check.span_fit(jax.random.key(2), 60_000, refs, cov=np.eye(d), n=n, noise=0.1, chunk=20_000)
    assert np.abs(out["opt_z"]).max() < 4.5 < np.abs(out["wrong_z"]).max()
    exact = icl.gd_risk(refs["opt"], np.eye(d), n=n, noise=0.1)
    assert abs(out["opt_risk"] - exact) < 4.5 * out["opt_risk_se"]


def test_a_short_last_chunk_is_the_same_as_whole_chunks():
    refs = {"opt": icl.gamma_star(np.eye(2), n=4, noise=0.1)}
    kw = dict(cov=np.eye(2), n=4, noise=0.1)
    a = icl_check.span_fit(jax.random.key(2), 250, refs, chunk=100, **kw)   # 100, 100, 50
    X, y, xq, yq, _ = icl.sample_icl(jax.random.fold_in(jax.random.key(2), 2), 50, **kw)
    Xf, yf, xqf, yqf, _ = icl.sample_icl(jax.random.fold_in(jax.random.key(2), 2), 100, **kw)
    assert np.array_equal(X, Xf[:50]) and np.array_equal(yq, yqf[:50])   # the prefix of a longer draw
    F = np.concatenate([np.asarray(icl_check.span_features(*icl.sample_icl(
        jax.random.fold_in(jax.random.key(2), i), m, **kw)[:3])) for i, m in enumerate((100, 100, 50))])
    Y = np.concatenate([np.asarray(icl.sample_icl(jax.random.fold_in(jax.random.key(2), i), m, **kw)[3])
                        for i, m in enumerate((100, 100, 50))])
    np.testing.assert_allclose(a["coef"], np.linalg.lstsq(F, Y, rcond=None)[0], atol=1e-9)
