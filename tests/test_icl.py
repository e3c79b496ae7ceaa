import jax
import numpy as np
import pytest

from slr import icl, icl_train


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
    out = icl_train.train_lsa(jax.random.key(0), cov=np.eye(3), n=10, steps=400, batch=128, lr=1e-2, repeats=1)
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


SPEC = (4.0, 2.0, 1.0, 0.5, 0.25)


def test_optimum_of_each_setting():
    S = np.diag(SPEC)
    eta = icl.step_star(d=5, n=20, noise=0.1)
    # setting (ii): exactly eta* Sigma^-1 with the isotropic step (whitening argument)
    np.testing.assert_allclose(icl.optimum("preconditioned", SPEC, n=20, noise=0.1), eta * np.linalg.inv(S), rtol=1e-12)
    # setting (iv), Ahn et al.: n [(n+1) Sigma + (tr Sigma + noise^2) I]^-1
    np.testing.assert_allclose(icl.optimum("ahn", SPEC, n=20, noise=0.1),
                               20 * np.linalg.inv(21 * S + (np.trace(S) + 0.01) * np.eye(5)), rtol=1e-12)
    np.testing.assert_allclose(icl.optimum("isotropic", SPEC, n=20, noise=0.1), eta * np.eye(5), rtol=1e-12)
    # ReLU response: n / (n + 2d + 3 + 4 noise^2)
    np.testing.assert_allclose(icl.optimum("relu", SPEC, n=20, noise=0.1), 20 / (20 + 13.04) * np.eye(5))


@pytest.mark.parametrize("setting", ["preconditioned", "ahn"])
def test_gd_risk_is_minimal_at_the_optimum(setting):
    task = icl.task_of(setting, SPEC)
    G = icl.optimum(setting, SPEC, n=20, noise=0.1)
    r0 = icl.gd_risk(G, task["cov"], n=20, noise=0.1, w_cov=task["w_cov"])
    rng = np.random.default_rng(0)
    for _ in range(5):   # a strictly convex quadratic: every perturbation increases it
        D = rng.standard_normal((5, 5)) * 1e-3
        assert icl.gd_risk(G + D, task["cov"], n=20, noise=0.1, w_cov=task["w_cov"]) > r0
    # and the first-order change vanishes: R(G + hD) + R(G - hD) - 2 R(G) ~ h^2, R(G + hD) - R(G - hD) ~ 0
    D = rng.standard_normal((5, 5))
    rp, rm = (icl.gd_risk(G + s * 1e-4 * D, task["cov"], n=20, noise=0.1, w_cov=task["w_cov"]) for s in (1, -1))
    assert abs(rp - rm) < 1e-10


def test_gd_risk_matches_monte_carlo():
    task = icl.task_of("ahn", SPEC)
    G = icl.optimum("preconditioned", SPEC, n=10, noise=0.3)   # any matrix: here the wrong setting's optimum
    X, y, xq, yq, _ = icl.sample_icl(jax.random.key(3), 100_000, n=10, noise=0.3, **task)
    e = (np.asarray(yq) - np.asarray(icl.gd_predict(X, y, xq, G))) ** 2
    exact = icl.gd_risk(G, task["cov"], n=10, noise=0.3, w_cov=task["w_cov"])
    assert abs(e.mean() - exact) < 4.5 * e.std() / np.sqrt(e.size)


def test_relu_step_matches_monte_carlo():
    X, y, xq, yq, _ = icl.sample_icl(jax.random.key(4), 100_000, cov=np.eye(4), n=10, noise=0.2, response="relu")
    s = np.asarray(icl.gd_predict(X, y, xq, 1.0))
    assert abs(s @ np.asarray(yq) / (s @ s) - icl.step_star(d=4, n=10, noise=0.2, response="relu")) < 0.01


def test_gd_start_is_a_one_step_gd_layer():
    # (lr 1e-20: steps far below the start's round-off, so this reads the start's layer; 30 steps of batch 16
    # are the program of one start in test_both_starts_in_one_program_are_the_separate_runs)
    out = icl_train.train_lsa(jax.random.key(0), cov=np.eye(3), n=5, steps=30, batch=16, lr=1e-20, init="gd",
                              repeats=2)
    A, res = icl.effective_preconditioner(out)
    assert np.all(np.asarray(res) < 1e-12)
    for a in np.asarray(A):   # p_y Q_x = 0.1^2 Theta Theta^T / |Theta Theta^T|: symmetric, PSD, norm 0.01
        np.testing.assert_allclose(a, a.T, atol=1e-12)
        assert np.linalg.eigvalsh(a).min() > -1e-12 and abs(np.linalg.norm(a) - 0.01) < 1e-9


@pytest.mark.parametrize("kwargs,name", [({"setting": "cube"}, "setting"), ({"spectrum": (1.0, -1.0)}, "spectrum")])
def test_task_of_validation(kwargs, name):
    args = dict(setting="ahn", spectrum=(1.0, 2.0))
    args.update(kwargs)
    with pytest.raises(ValueError, match=name):
        icl.task_of(**args)


def test_train_validation():
    with pytest.raises(ValueError, match="init"):
        icl_train.train_lsa(jax.random.key(0), cov=np.eye(2), n=3, steps=1, batch=2, lr=0.1, init="zeros")
    with pytest.raises(ValueError, match="response"):
        icl.sample_icl(jax.random.key(0), 2, cov=np.eye(2), n=3, response="cubic")


def test_both_starts_in_one_program_are_the_separate_runs():
    kw = dict(cov=np.diag([2.0, 1.0, 0.5]), n=5, noise=0.1, steps=30, batch=16, lr=1e-2, repeats=2)
    both = icl_train.train_lsa(jax.random.key(3), init=("gd", "random"), **kw)
    for init in ("gd", "random"):
        one = icl_train.train_lsa(jax.random.key(3), init=init, **kw)
        for name in ("p", "Q", "loss"):
            np.testing.assert_allclose(both[init][name], one[name], rtol=0, atol=1e-13)
    assert not np.allclose(both["gd"]["Q"], both["random"]["Q"])


def test_train_setting_reads_its_start_of_train_starts(result_cache):
    kw = dict(spectrum=(2.0, 1.0), n=4, noise=0.1, steps=5, batch=8, lr=1e-2, repeats=2, init_scale=0.1)
    both = icl_train.train_starts("ahn", **kw)
    for init in icl_train.INITS:
        one = icl_train.train_setting("ahn", init=init, **kw)
        assert set(one) == {"p", "Q", "loss", "A", "residual"}
        assert all(np.array_equal(one[k], both[f"{init}_{k}"]) for k in one)
    with pytest.raises(ValueError, match="init"):
        icl_train.train_setting("ahn", init="zeros", **kw)


def test_train_settings_on_two_threads_are_the_separate_runs(result_cache):
    """train_settings runs the settings on two threads: the numbers of train_setting called one by one."""
    kw = dict(spectrum=(2.0, 1.0), n=4, noise=0.1, steps=5, batch=8, lr=1e-2, repeats=2, init_scale=0.1)
    both = icl_train.train_settings(("preconditioned", "ahn", "isotropic"), use_cache=False, **kw)
    assert set(both) == {"preconditioned", "ahn", "isotropic"}
    for s, runs in both.items():
        for init in icl_train.INITS:
            one = icl_train.train_setting(s, init=init, use_cache=False, **kw)
            assert set(runs[init]) == set(one) and all(np.array_equal(runs[init][k], one[k]) for k in one)
    assert not np.array_equal(both["ahn"]["gd"]["A"], both["preconditioned"]["gd"]["A"])
    with pytest.raises(ValueError, match="setting"):
        icl_train.train_settings(("cube",), **kw)
