"""Tests of slr.baselines: the diagonal and tied MLPs, and the trained activations."""
import math

import jax
import numpy as np
import pytest

from slr import baselines, pgd, sgd, task


def test_tied_mlp_counts_and_is_permutation_invariant():
    d, width, L = 6, 4, 5
    params = baselines.tied_mlp_init(jax.random.key(0), d=d, width=width)
    assert baselines.n_params(params) == width * d + 2 * width + 1
    untied = baselines.diag_mlp_init(jax.random.key(0), L=L, d=d, width=width)
    assert baselines.n_params(untied) == L * (width * d + 2 * width) + 1
    X = jax.random.normal(jax.random.key(1), (3, L, d))
    out = np.asarray(baselines.tied_mlp(params, X))
    perm = np.asarray(baselines.tied_mlp(params, X[:, ::-1]))
    np.testing.assert_allclose(out, perm, rtol=1e-12)
    # the diagonal MLP reads positions: reversing the tokens changes its output
    assert not np.allclose(baselines.diag_mlp(untied, X), baselines.diag_mlp(untied, X[:, ::-1]))


def test_train_diag_mlp_tied_learns():
    ks, vs = task.sample_oracle(jax.random.key(0), 8)
    run = dict(L=3, gamma=math.sqrt(0.5), eps=0.1, width=8, lr=1e-2, steps=200, batch=32,
               log_every=100, n_test=500)
    tied = baselines.train_diag_mlp(jax.random.key(1), jax.random.key(2), ks, vs, tied=True, **run)
    untied = baselines.train_diag_mlp(jax.random.key(1), jax.random.key(2), ks, vs, **run)
    assert tied["n_params"] == 8 * 8 + 2 * 8 + 1
    assert untied["n_params"] == 3 * (8 * 8 + 2 * 8) + 1
    assert tied["params"]["W"].shape == (8, 8)
    assert tied["excess_risk"][-1] < tied["excess_risk"][0]


def test_train_activations_shapes_and_checks(result_cache):
    out = baselines.train_activations(["erf", "linear"], [0.1, 0.1], d=6, L=3, gamma=math.sqrt(0.5),
                                      eps=0.1, alpha=0.02, steps=20, batch=4, repeats=3, log_every=10)
    assert out["step"].tolist() == [0, 10, 20]
    for name in ("erf", "linear"):
        for f in ("kappa", "nu", "theta", "eta", "excess"):
            assert out[f"{name}_{f}"].shape == (3, 3)
        assert np.all(np.abs(out[f"{name}_kappa"]) <= 1 + 1e-9)
    # the same starts for every activation
    np.testing.assert_allclose(out["erf_kappa"][:, 0], out["linear_kappa"][:, 0])
    with pytest.raises(ValueError, match="same length"):
        baselines.train_activations(["erf"], [0.1, 0.2], d=6, L=3, gamma=0.7, eps=0.1, alpha=0.02,
                                    steps=2, batch=2, repeats=1, log_every=1)
    with pytest.raises(ValueError, match="alpha"):
        baselines.train_activations(["erf"], [0.1], d=6, L=3, gamma=0.7, eps=0.1, alpha=-1.0,
                                    steps=2, batch=2, repeats=1, log_every=1)


def test_train_activations_is_sgd_train_for_each_activation(result_cache):
    """The one program for every activation gives the numbers of separate sgd.train calls (reduced
    sampler, same starts and keys), with a remainder chunk and steps not a multiple of the block."""
    names, lams = ["erf", "softmax", "relu"], [0.3, 2.0, 0.2]
    kw = dict(d=8, L=4, gamma=math.sqrt(0.5), eps=0.1, alpha=0.05, batch=5, repeats=3, n_test=50)
    out = baselines.train_activations(names, lams, steps=130, log_every=60, **kw)
    ks, vs = task.sample_oracle(jax.random.key(0), 8)
    k0, v0 = pgd.init_sphere(jax.random.key(1), 8, 3, H=1)
    for name, lam in zip(names, lams):
        run = sgd.train(jax.random.key(2), k0, v0, ks[None], vs[None], lam=lam, alpha=0.05, steps=130,
                        batch=5, gamma=kw["gamma"], L=4, eps=0.1, log_every=60, predictor=name, n_test=50,
                        sampler="reduced")
        for f in ("kappa", "nu", "theta", "eta"):
            np.testing.assert_allclose(out[f"{name}_{f}"], getattr(run, f)[..., 0, 0], atol=1e-12)
        np.testing.assert_allclose(out[f"{name}_excess"], run.excess_risk, rtol=1e-10)
    with pytest.raises(ValueError, match="names"):
        baselines.train_activations(["argmax"], [0.1], steps=2, log_every=1, **kw)
