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
    with pytest.raises(ValueError, match="dtype"):
        baselines.train_diag_mlp(jax.random.key(1), jax.random.key(2), ks, vs, dtype=np.int32, **run)
    with pytest.raises(ValueError, match="dtype"):   # not a dtype at all: ValueError too, not TypeError
        baselines.train_diag_mlp(jax.random.key(1), jax.random.key(2), ks, vs, dtype="no dtype", **run)


def test_train_diag_mlp_float32_draws():
    """dtype=float32 draws the batches' Gaussians in float32 (used in float64): another stream than the
    float64 draws' (JAX draws each dtype from its own bits), of the same law up to the float32 resolution.
    The dtype may be given as a NumPy type or a name (the same run); both runs learn. (The setting of the test
    above: its float64 program serves here.)"""
    ks, vs = task.sample_oracle(jax.random.key(0), 8)
    run = dict(L=3, gamma=math.sqrt(0.5), eps=0.1, width=8, lr=1e-2, steps=200, batch=32, log_every=100,
               n_test=500)
    f64 = baselines.train_diag_mlp(jax.random.key(1), jax.random.key(2), ks, vs, **run)
    f32 = baselines.train_diag_mlp(jax.random.key(1), jax.random.key(2), ks, vs, dtype=np.float32, **run)
    again = baselines.train_diag_mlp(jax.random.key(1), jax.random.key(2), ks, vs, dtype="float32", **run)
    np.testing.assert_array_equal(f32["excess_risk"], again["excess_risk"])
    assert f32["excess_risk"][0] == f64["excess_risk"][0]  # the same start and test batch (float64)
    assert not np.array_equal(f32["excess_risk"][1:], f64["excess_risk"][1:])  # other batches
    for r in (f32, f64):
        assert r["excess_risk"][-1] < 0.5 * r["excess_risk"][0]


def test_train_activations_logs_the_five_overlaps():
    """The five overlaps of every run are logged, <k, v> (rho) included: at step 0 they are those of the
    uniform starts, and at every step they are the Gram entries of unit vectors (k*, v*, k, v), a
    positive semidefinite matrix; a run's rho is not one of the four overlaps with the oracle."""
    # (erf and linear, batch 4, 1000 test samples: the compiled program of the next test, which reuses it)
    names, d, R, seed = ("erf", "linear"), 6, 3, 4
    out = baselines.train_activations(names, [0.5, 0.3], d=d, L=3, gamma=math.sqrt(0.5), eps=0.1,
                                      alpha=0.05, steps=20, batch=4, repeats=R, log_every=10, seed=seed,
                                      n_test=1000, use_cache=False)
    ks, vs = task.sample_oracle(jax.random.key(seed), d)
    k0, v0 = (np.asarray(a[:, 0]) for a in pgd.init_sphere(jax.random.key(seed + 1), d, R, H=1))
    want = {"kappa": k0 @ ks, "nu": v0 @ vs, "theta": v0 @ ks, "eta": k0 @ vs, "rho": np.sum(k0 * v0, -1)}
    for name in names:
        for o, w in want.items():
            assert out[f"{name}_{o}"].shape == (R, 3)
            np.testing.assert_allclose(out[f"{name}_{o}"][:, 0], w, atol=1e-12)
        kap, nu, th, eta, rho = (out[f"{name}_{o}"] for o in ("kappa", "nu", "theta", "eta", "rho"))
        one, zero = np.ones_like(kap), np.zeros_like(kap)
        G = np.stack([np.stack(r, -1) for r in ([one, zero, kap, th], [zero, one, eta, nu],
                                                [kap, eta, one, rho], [th, nu, rho, one])], -2)
        assert np.linalg.eigvalsh(G).min() > -1e-9       # (runs, steps, 4, 4): a Gram matrix
        assert not np.allclose(rho[:, 1:], kap[:, 1:] * th[:, 1:] + eta[:, 1:] * nu[:, 1:])  # not in span
    # control: rho replaced by a value no unit vectors realise breaks the Gram matrix
    bad = G.copy()
    bad[..., 2, 3] = bad[..., 3, 2] = -np.sign(kap * th + eta * nu + 1e-3)
    assert np.linalg.eigvalsh(bad).min() < -1e-3


def test_train_activations_shapes_and_checks(result_cache):
    out = baselines.train_activations(["erf", "linear"], [0.1, 0.1], d=6, L=3, gamma=math.sqrt(0.5),
                                      eps=0.1, alpha=0.02, steps=20, batch=4, repeats=3, log_every=10)
    assert out["step"].tolist() == [0, 10, 20]
    for name in ("erf", "linear"):
        for f in ("kappa", "nu", "theta", "eta", "rho", "excess"):
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
    sampler, same starts and keys), with a remainder chunk and steps not a multiple of the block; the five
    overlaps, rho included."""
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
        np.testing.assert_allclose(out[f"{name}_rho"], run.rho[..., 0], atol=1e-12)
        np.testing.assert_allclose(out[f"{name}_excess"], run.excess_risk, rtol=1e-10)
    with pytest.raises(ValueError, match="names"):
        baselines.train_activations(["argmax"], [0.1], steps=2, log_every=1, **kw)
