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
                           seeds=3, tune_seeds=1, chunk=2, n_test=50, n_eval=2, tied_Ls=()).validate()
    out = AF.diag_mlp_comparison(cfg, 0)
    assert out["att_mse"].shape == (1, 3, 3) and out["mlp_mse"].shape == (1, 3, 3)
    assert out["att_exact_t"].shape == (1, 3, 3) and out["rho"].shape == (1, 3)
    np.testing.assert_array_equal(out["att_exact"], out["att_exact_t"][:, :, -1])
    assert out["n_mlp"][0] == 3 * (2 * 8 + 2 * 2) + 1  # L (p d + 2 p) + 1
    assert np.all(np.isfinite(out["att_exact"]))
    assert out["tied_mse"].shape == (0, 3) and out["tied_n"].shape == (0,)
    with pytest.raises(ValueError, match="Ls"):
        AF.DiagMLPConfig(Ls=(0,)).validate()
    with pytest.raises(ValueError, match="tied_Ls"):
        AF.DiagMLPConfig(Ls=(5, 20), tied_Ls=(10,)).validate()
    with pytest.raises(ValueError, match="tune_seeds"):
        AF.DiagMLPConfig(tune_seeds=0).validate()
    with pytest.raises(ValueError, match="chunk"):
        AF.DiagMLPConfig(chunk=0).validate()


def test_chunks_pad_the_last_call_to_the_shape_of_the_first():
    cfg = AF.DiagMLPConfig(chunk=4)
    runs = [(s, 0.1, 0.01) for s in range(6)]
    parts = AF._chunks(cfg, runs)
    assert [n for _, n in parts] == [4, 2] and all(len(c) == 4 for c, _ in parts)
    assert parts[1][0] == runs[4:] + [runs[5]] * 2
    assert AF._chunks(cfg, runs[:3]) == [(runs[:3], 3)]  # fewer runs than a chunk: no padding


def test_comparison_runs_are_the_runs_alone():
    """The runs made in chunks, as tasks on two threads, are the runs made one by one: the tuned steps
    of _pick on every tuning run, each evaluation seed's run and closed-form risk at every log, and the
    tied MLP trained alone by baselines.train_diag_mlp(tied=True) on the first evaluation seed's keys
    with the tuned MLP step (float32 draws, as the comparison's)."""
    import jax

    from slr import baselines, task
    from slr import risk as R
    cfg = AF.DiagMLPConfig(d=8, Ls=(3, 4), steps=20, batch=8, width=2, lrs_attention=(0.01, 0.3),
                           lrs_mlp=(1e-3, 3e-2), seeds=3, tune_seeds=2, chunk=2, n_test=50, n_eval=2,
                           tied_Ls=(4,)).validate()
    out = AF.diag_mlp_comparison(cfg, 5)
    for i, L in enumerate(cfg.Ls):
        lam = AF.best_lambda(gamma=cfg.gamma, d=cfg.d, L=L, eps=cfg.eps)[0]
        tune = [AF._call(cfg, L, lam, [r]) for r in AF._tune_runs(cfg, 5)]
        lrs = AF._pick(cfg, [t["att"][0, -1] for t in tune], [t["mlp"][0, -1] for t in tune])
        assert (out["lr_att"][i], out["lr_mlp"][i]) == lrs
        for s in range(cfg.seeds):
            one = AF._call(cfg, L, lam, [(5 + s, *lrs)])
            np.testing.assert_allclose(out["att_mse"][i, s], one["att"][0], rtol=1e-12)
            np.testing.assert_allclose(out["mlp_mse"][i, s], one["mlp"][0], rtol=1e-12)
            exact = R.closed_form(*one["o"][:, 0], lam, cfg.gamma, float(cfg.d), float(L), cfg.eps)
            np.testing.assert_allclose(out["att_exact_t"][i, s], exact, rtol=1e-12)
            np.testing.assert_allclose([out[f][i, s] for f in ("kappa", "nu", "theta", "eta", "rho")],
                                       one["o"][:, 0, -1], atol=1e-14)
    k_oracle, _, k_mlp, k_train = jax.random.split(jax.random.key(5 * 1000 + 4), 4)
    ks, vs = task.sample_oracle(k_oracle, cfg.d)
    run = baselines.train_diag_mlp(k_train, k_mlp, ks, vs, L=4, gamma=cfg.gamma, eps=cfg.eps, width=cfg.width,
                                   lr=out["lr_mlp"][1], steps=cfg.steps, batch=cfg.batch, n_test=cfg.n_test,
                                   log_every=cfg.steps // cfg.n_eval, tied=True, dtype=AF.DRAWS)
    assert np.array_equal(out["tied_mse"][0], run["excess_risk"] + cfg.eps ** 2)
    assert out["tied_n"][0] == run["n_params"] == 8 * 2 + 2 * 2 + 1  # p d + 2 p + 1, whatever L


def test_tuning_picks_each_models_best_mean_step_of_its_grid():
    """_tune_runs pairs the grids (the shorter padded with its last value) on each tuning seed, and _pick
    takes per model the step size of the smallest mean final test error over the tuning seeds."""
    cfg = AF.DiagMLPConfig(lrs_attention=(0.01, 0.3), lrs_mlp=(1e-3, 3e-2, 1e-1), tune_seeds=2, tune_seed=7)
    runs = AF._tune_runs(cfg)
    assert runs == [(7, 0.01, 1e-3), (7, 0.3, 3e-2), (7, 0.3, 1e-1),
                    (8, 0.01, 1e-3), (8, 0.3, 3e-2), (8, 0.3, 1e-1)]
    att = [1.0, 2.0, 2.0, 3.0, 1.0, 1.0]     # means 2.0 and 1.5: the second step
    mlp = [1.0, 5.0, 0.5, 1.0, 0.5, 2.0]     # means 1.0, 2.75, 1.25: the first, though seed 7 prefers 1e-1
    assert AF._pick(cfg, att, mlp) == (0.3, 1e-3)
    assert AF._pick(cfg, att[:3] + [1.0, 9.0, 9.0], mlp) == (0.01, 1e-3)  # control: the means decide
    # the tuning seeds move with the experiment's seed, away from its evaluation seeds (seed, ..., seed + 15)
    assert [r[0] for r in AF._tune_runs(cfg, 1000)] == [1007] * 3 + [1008] * 3
    ev = set(range(1000, 1000 + AF.DiagMLPConfig().seeds))   # the evaluation seeds under SLR_SEED=1000
    assert not ev & {r[0] for r in AF._tune_runs(AF.DiagMLPConfig(), 1000)}
    assert {r[0] for r in AF._tune_runs(AF.DiagMLPConfig(), 0)} == {1000, 1001}  # seed 0: as before
    assert ev & {r[0] for r in AF._tune_runs(AF.DiagMLPConfig(), 0)}  # control: absolute seeds overlap them


def test_joint_training_is_each_model_trained_alone():
    """_call trains both models on one draw of the batches (float32 Gaussians used in float64): the
    numbers of attention's projected step (Definition 1) on the mini-batch loss, taken step by step here,
    and of baselines.train_diag_mlp (dtype float32) run alone on the same key, for two step sizes each."""
    import jax
    import jax.numpy as jnp

    from slr import baselines, pgd, sgd, task
    from slr.predictors import attention_erf
    cfg = AF.DiagMLPConfig(d=8, Ls=(3,), steps=20, batch=8, width=2, n_test=50, n_eval=2,
                           tied_Ls=()).validate()
    L, seed, lam = 3, 7, 0.3
    res = AF._call(cfg, L, lam, [(seed, 0.03, 1e-2), (seed, 0.1, 3e-2)])
    k_oracle, k_init, k_mlp, k_train = jax.random.split(jax.random.key(seed * 1000 + L), 4)
    ks, vs = task.sample_oracle(k_oracle, cfg.d)
    key_test, streams = sgd.batch_keys(k_train, 1)
    Xt, yt, _ = task.assemble(task.draws(key_test, cfg.n_test, L=L, d=cfg.d), ks[None], vs[None],
                              gamma=cfg.gamma, eps=cfg.eps)
    loss = lambda k, v, X, y: jnp.mean(jnp.square(y - attention_erf(X, k, v, lam)))
    grad = jax.jit(jax.grad(loss, argnums=(0, 1)))
    for j, a in enumerate((0.03, 0.1)):
        k, v = (x[0, 0] for x in pgd.init_sphere(k_init, cfg.d, 1, H=1))
        logged = [loss(k, v, Xt, yt)]
        for t in range(cfg.steps):
            X, y, _ = task.assemble(sgd.fresh_draws(streams[0], t, batch=cfg.batch, L=L, d=cfg.d,
                                                    dtype=jnp.float32), ks[None], vs[None],
                                    gamma=cfg.gamma, eps=cfg.eps)
            assert X.dtype == jnp.float64
            k, v = pgd.projected_step(k, v, *grad(k, v, X, y), a)
            if (t + 1) % 10 == 0:
                logged.append(loss(k, v, Xt, yt))
        # 1e-8: under the suite's XLA flags (conftest) the program and the step-by-step loop differ by up
        # to 7.5e-10 (measured, step 0.1; 4e-16 with the default flags): a last-bit difference grown by
        # 20 steps of this noisy descent
        np.testing.assert_allclose(res["att"][j], logged, rtol=1e-8)
        np.testing.assert_allclose(res["o"][0, j, -1], k @ ks, atol=1e-12)
    run = dict(L=L, gamma=cfg.gamma, eps=cfg.eps, steps=cfg.steps, batch=cfg.batch, n_test=cfg.n_test,
               log_every=10)
    for j, m in enumerate((1e-2, 3e-2)):
        alone = baselines.train_diag_mlp(k_train, k_mlp, ks, vs, width=cfg.width, lr=m, dtype=AF.DRAWS, **run)
        np.testing.assert_allclose(res["mlp"][j], alone["excess_risk"] + cfg.eps ** 2, rtol=1e-12)
        assert res["n"] == alone["n_params"]
        f64 = baselines.train_diag_mlp(k_train, k_mlp, ks, vs, width=cfg.width, lr=m, **run)
        assert not np.allclose(res["mlp"][j], f64["excess_risk"] + cfg.eps ** 2)  # control: draws differ
    assert not np.allclose(res["att"][0], res["att"][1])  # the step sizes differ: so do the runs
