"""slr.appendix_f: the best constant lambda of the oracle risk, and the attention vs diagonal MLP runs."""
import math

import numpy as np
import pytest

from slr import appendix_f as AF, tuning
from slr.risk import oracle_risk

G = math.sqrt(0.5)


def test_best_lambda_is_a_minimum_of_the_risk_with_noise():
    """best_lambda is tuning.erf_best (the one minimiser) with eps^2 added back to its excess risk."""
    lam, r = AF.best_lambda(gamma=G, d=32, L=10, eps=0.1)
    lam_t, excess = tuning.erf_best(gamma=G, d=32, L=10)
    assert (lam, r) == (lam_t, excess + 0.1 ** 2)
    for x in (lam * 0.97, lam * 1.03):
        assert float(oracle_risk(lam=x, gamma=G, d=32, L=10, eps=0.1)) > r
    assert r == pytest.approx(float(oracle_risk(lam=lam, gamma=G, d=32, L=10, eps=0.1)), rel=1e-12)
    with pytest.raises(ValueError, match="eps"):
        AF.best_lambda(gamma=G, d=32, L=10, eps=-0.1)


def test_diag_mlp_comparison_small():
    cfg = AF.DiagMLPConfig(d=8, Ls=(3,), steps=20, batch=8, width=2, lrs_attention=(0.1,), lrs_mlp=(1e-2,),
                           seeds=2, n_test=50, n_eval=2, tied_Ls=()).validate()
    out = AF.diag_mlp_comparison(cfg, 0)
    assert out["att_mse"].shape == (1, 2, 3) and out["mlp_mse"].shape == (1, 2, 3)
    assert out["n_mlp"][0] == 3 * (2 * 8 + 2 * 2) + 1  # L (p d + 2 p) + 1
    assert np.all(np.isfinite(out["att_exact"]))
    assert out["tied_mse"].shape == (0, 3) and out["tied_n"].shape == (0,)
    with pytest.raises(ValueError, match="Ls"):
        AF.DiagMLPConfig(Ls=(0,)).validate()
    with pytest.raises(ValueError, match="tied_Ls"):
        AF.DiagMLPConfig(Ls=(5, 20), tied_Ls=(10,)).validate()


def test_comparison_runs_are_the_runs_alone():
    """The runs made as tasks on two threads are the runs made one by one: the tuned steps of _tune, each
    evaluation seed's _pair and closed-form risk, and the tied MLP trained alone by
    baselines.train_diag_mlp(tied=True) on the first evaluation seed's keys with the tuned MLP step."""
    import jax

    from slr import baselines, task
    from slr import risk as R
    cfg = AF.DiagMLPConfig(d=8, Ls=(3, 4), steps=20, batch=8, width=2, lrs_attention=(0.01, 0.3),
                           lrs_mlp=(1e-3, 3e-2), seeds=2, n_test=50, n_eval=2, tied_Ls=(4,)).validate()
    out = AF.diag_mlp_comparison(cfg, 5)
    for i, L in enumerate(cfg.Ls):
        lam = AF.best_lambda(gamma=cfg.gamma, d=cfg.d, L=L, eps=cfg.eps)[0]
        lrs = AF._tune(cfg, L, lam)
        assert (out["lr_att"][i], out["lr_mlp"][i]) == lrs
        for s in range(cfg.seeds):
            att, mlp, o, _ = AF._pair(cfg, L, 5 + s, (lrs[0],), (lrs[1],), lam)
            assert np.array_equal(out["att_mse"][i, s], att[:, 0])
            assert np.array_equal(out["mlp_mse"][i, s], mlp[:, 0])
            exact = R.closed_form(*(x[0] for x in o), lam, cfg.gamma, float(cfg.d), float(L), cfg.eps)
            assert out["att_exact"][i, s] == float(exact)
    k_oracle, _, k_mlp, k_train = jax.random.split(jax.random.key(5 * 1000 + 4), 4)
    ks, vs = task.sample_oracle(k_oracle, cfg.d)
    run = baselines.train_diag_mlp(k_train, k_mlp, ks, vs, L=4, gamma=cfg.gamma, eps=cfg.eps, width=cfg.width,
                                   lr=out["lr_mlp"][1], steps=cfg.steps, batch=cfg.batch, n_test=cfg.n_test,
                                   log_every=cfg.steps // cfg.n_eval, tied=True)
    assert np.array_equal(out["tied_mse"][0], run["excess_risk"] + cfg.eps ** 2)
    assert out["tied_n"][0] == run["n_params"] == 8 * 2 + 2 * 2 + 1  # p d + 2 p + 1, whatever L


def test_tuning_picks_each_models_best_step_of_its_grid():
    """_tune trains the grids' pairs one run each (the shorter grid padded with its last value) and picks
    per model the step size of the smallest final test error: the choice of one run of every step size
    of both grids on the tuning seed's batches."""
    cfg = AF.DiagMLPConfig(d=8, Ls=(3,), steps=20, batch=8, width=2, lrs_attention=(0.01, 0.3),
                           lrs_mlp=(1e-3, 3e-2, 1e-1), n_test=50, n_eval=2, tied_Ls=()).validate()
    lam = 0.3
    att, mlp, _, _ = AF._pair(cfg, 3, cfg.tune_seed, cfg.lrs_attention, cfg.lrs_mlp, lam)
    best = (cfg.lrs_attention[int(np.argmin(att[-1]))], cfg.lrs_mlp[int(np.argmin(mlp[-1]))])
    assert AF._tune(cfg, 3, lam) == best
    assert best != (cfg.lrs_attention[0], cfg.lrs_mlp[0])  # not the first of each grid by default


def test_joint_training_is_each_model_trained_alone():
    """_pair trains every model on one draw of the batches: the numbers of sgd.train (attention) and
    baselines.train_diag_mlp (MLP) run alone on the same key, for each step size of the grids."""
    import jax

    from slr import baselines, pgd, sgd, task
    cfg = AF.DiagMLPConfig(d=8, Ls=(3,), steps=20, batch=8, width=2, n_test=50, n_eval=2,
                           tied_Ls=()).validate()
    L, seed, lam = 3, 7, 0.3
    att, mlp, o, n = AF._pair(cfg, L, seed, (0.03, 0.1), (1e-2, 3e-2), lam)
    k_oracle, k_init, k_mlp, k_train = jax.random.split(jax.random.key(seed * 1000 + L), 4)
    ks, vs = task.sample_oracle(k_oracle, cfg.d)
    run = dict(L=L, gamma=cfg.gamma, eps=cfg.eps, steps=cfg.steps, batch=cfg.batch, n_test=cfg.n_test,
               log_every=10)
    for j, a in enumerate((0.03, 0.1)):
        alone = sgd.train(k_train, *pgd.init_sphere(k_init, cfg.d, 1, H=1), ks[None], vs[None], lam=lam,
                          alpha=a, **run)
        np.testing.assert_allclose(att[:, j], alone.excess_risk[0] + cfg.eps ** 2, rtol=1e-12)
        np.testing.assert_allclose(o[0][j], alone.kappa[0, -1, 0, 0], atol=1e-12)
    for j, m in enumerate((1e-2, 3e-2)):
        alone = baselines.train_diag_mlp(k_train, k_mlp, ks, vs, width=cfg.width, lr=m, **run)
        np.testing.assert_allclose(mlp[:, j], alone["excess_risk"] + cfg.eps ** 2, rtol=1e-12)
        assert n == alone["n_params"]
    assert not np.allclose(att[:, 0], att[:, 1])  # the step sizes differ: so do the runs
