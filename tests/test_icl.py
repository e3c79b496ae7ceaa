import jax
import numpy as np
import pytest

from slr import icl


def test_shapes():
    X, y, xq, yq, w = icl.sample_icl(jax.random.key(0), 7, cov=np.eye(3), n=11, noise=0.1)
    assert X.shape == (7, 11, 3) and y.shape == (7, 11) and xq.shape == (7, 3) and yq.shape == (7,) and w.shape == (7, 3)
    X, y, xq, yq, w = icl.sample_icl(jax.random.key(0), 7, cov=np.eye(3), n=11, noise=0.0)
    np.testing.assert_allclose(y, np.einsum("bnd,bd->bn", X, w), atol=1e-12)


@pytest.mark.parametrize("cov", [np.eye(4), np.diag([3.0, 1.0, 0.5, 0.2])])
def test_lsa_with_theory_weights_is_one_step_of_preconditioned_gd(cov):
    G = icl.gamma_star(cov, n=10, noise=0.1)
    params = icl.lsa_params_from_gamma(G)
    X, y, xq, _, _ = icl.sample_icl(jax.random.key(1), 50, cov=cov, n=10, noise=0.1)
    np.testing.assert_allclose(icl.lsa_predict(params, X, y, xq), icl.gd_predict(X, y, xq, G), rtol=1e-12, atol=1e-12)
    A, res = icl.effective_preconditioner(params)
    np.testing.assert_allclose(A, G, atol=1e-14)
    assert float(res) == 0.0


def test_gamma_star_isotropic_is_eta_star():
    np.testing.assert_allclose(icl.gamma_star(np.eye(5), n=20, noise=0.3), icl.step_star(d=5, n=20, noise=0.3) * np.eye(5))


def test_training_approaches_gamma_star():
    out = icl.train_lsa(jax.random.key(0), cov=np.eye(3), n=10, steps=400, batch=128, lr=1e-2, repeats=1)
    assert out["loss"][0, -50:].mean() < 0.6 * out["loss"][0, :50].mean()
    A, _ = icl.effective_preconditioner({"p": out["p"][0], "Q": out["Q"][0]})
    G = icl.gamma_star(np.eye(3), n=10)
    assert np.linalg.norm(A - G) / np.linalg.norm(G) < 0.3


@pytest.mark.parametrize("kwargs,name", [({"n": 0}, "n"), ({"noise": -1.0}, "noise"), ({"cov": np.ones((2, 3))}, "cov"),
                                         ({"cov": -np.eye(2)}, "cov")])
def test_validation(kwargs, name):
    args = dict(cov=np.eye(2), n=5, noise=0.0)
    args.update(kwargs)
    with pytest.raises(ValueError, match=name):
        icl.sample_icl(jax.random.key(0), 3, **args)
