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
    for bad in (0.0, 1.5, float("nan")):
        with pytest.raises(ValueError, match="anneal"):
            AF.DiagMLPConfig(anneal=bad).validate()
    for bad in (-0.1, 1.1):
        with pytest.raises(ValueError, match="anneal_from"):
            AF.DiagMLPConfig(anneal_from=bad).validate()
    for bad in (0.0, 0.5, float("nan")):
        with pytest.raises(ValueError, match="cut_tol"):
            AF.DiagMLPConfig(cut_tol=bad).validate()
    with pytest.raises(ValueError, match="cut_at_point"):
        AF.DiagMLPConfig(cut_at_point=1).validate()
    assert AF.DiagMLPConfig().anneal_at == 1000   # 2/3 of 1500 steps: a run may be cut from step 1000 on


def test_chunks_pad_the_last_call_to_the_shape_of_the_first():
    cfg = AF.DiagMLPConfig(chunk=4)
    runs = [(s, 0.1, 0.01) for s in range(6)]
    parts = AF.chunk_runs(cfg, runs)
    assert [n for _, n in parts] == [4, 2] and all(len(c) == 4 for c, _ in parts)
    assert parts[1][0] == runs[4:] + [runs[5]] * 2
    assert AF.chunk_runs(cfg, runs[:3]) == [(runs[:3], 3)]  # fewer runs than a chunk: no padding


def test_comparison_runs_are_the_runs_alone():
    """The runs made in chunks, as tasks on two threads, are the runs made one by one: the tuned steps
    of pick_step_sizes on every tuning run, each evaluation seed's run and closed-form risk at every log,
    and the tied MLP trained alone by baselines.train_diag_mlp(tied=True) on the first evaluation seed's keys
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
        tune = [AF.call_runs(cfg, L, lam, [r]) for r in AF.tune_runs(cfg, 5)]
        lrs = AF.pick_step_sizes(cfg, [t["att"][0, -1] for t in tune], [t["mlp"][0, -1] for t in tune])
        assert (out["lr_att"][i], out["lr_mlp"][i]) == lrs
        for s in range(cfg.seeds):
            one = AF.call_runs(cfg, L, lam, [(5 + s, *lrs)])
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
    """tune_runs pairs the grids (the shorter padded with its last value) on each tuning seed, and
    pick_step_sizes takes per model the step size of the smallest mean final test error over the tuning seeds."""
    cfg = AF.DiagMLPConfig(lrs_attention=(0.01, 0.3), lrs_mlp=(1e-3, 3e-2, 1e-1), tune_seeds=2, tune_seed=7)
    runs = AF.tune_runs(cfg)
    assert runs == [(7, 0.01, 1e-3), (7, 0.3, 3e-2), (7, 0.3, 1e-1),
                    (8, 0.01, 1e-3), (8, 0.3, 3e-2), (8, 0.3, 1e-1)]
    att = [1.0, 2.0, 2.0, 3.0, 1.0, 1.0]     # means 2.0 and 1.5: the second step
    mlp = [1.0, 5.0, 0.5, 1.0, 0.5, 2.0]     # means 1.0, 2.75, 1.25: the first, though seed 7 prefers 1e-1
    assert AF.pick_step_sizes(cfg, att, mlp) == (0.3, 1e-3)
    assert AF.pick_step_sizes(cfg, att[:3] + [1.0, 9.0, 9.0], mlp) == (0.01, 1e-3)  # control: the means decide
    # the tuning seeds move with the experiment's seed, away from its evaluation seeds (seed, ..., seed + 15)
    assert [r[0] for r in AF.tune_runs(cfg, 1000)] == [1007] * 3 + [1008] * 3
    ev = set(range(1000, 1000 + AF.DiagMLPConfig().seeds))   # the evaluation seeds under SLR_SEED=1000
    assert not ev & {r[0] for r in AF.tune_runs(AF.DiagMLPConfig(), 1000)}
    assert {r[0] for r in AF.tune_runs(AF.DiagMLPConfig(), 0)} == {1000, 1001}  # seed 0: as before
    assert ev & {r[0] for r in AF.tune_runs(AF.DiagMLPConfig(), 0)}  # control: absolute seeds overlap them


def test_joint_training_is_each_model_trained_alone():
    """call_runs trains both models on one draw of the batches (float32 Gaussians used in float64): its
    attention is the library's trainer, slr.sgd.train (one erf head, sampler "full", lam constant,
    draws "float32") run alone on the same keys, and its MLP is baselines.train_diag_mlp (dtype float32)
    run alone on the same key, for two step sizes each. Attention's step is not annealed here (anneal 1):
    test_annealing checks the annealed step."""
    import jax

    from slr import baselines, pgd, sgd, task
    cfg = AF.DiagMLPConfig(d=8, Ls=(3,), steps=20, batch=8, width=2, n_test=50, n_eval=2,
                           tied_Ls=(), anneal=1.0).validate()
    L, seed, lam = 3, 7, 0.3
    res = AF.call_runs(cfg, L, lam, [(seed, 0.03, 1e-2), (seed, 0.1, 3e-2)])
    k_oracle, k_init, k_mlp, k_train = jax.random.split(jax.random.key(seed * 1000 + L), 4)
    ks, vs = task.sample_oracle(k_oracle, cfg.d)
    k0, v0 = pgd.init_sphere(k_init, cfg.d, 1, H=1)   # (1, 1, d): one run of one head

    def train(a, draws=np.dtype(AF.DRAWS).name):
        log = sgd.train(k_train, k0, v0, ks[None], vs[None], lam=lam, alpha=a, steps=cfg.steps,
                        batch=cfg.batch, gamma=cfg.gamma, L=L, eps=cfg.eps, log_every=10,
                        predictor="erf", n_test=cfg.n_test, sampler="full", draws=draws)
        o = [getattr(log, n)[0, :, 0, 0] for n in ("kappa", "nu", "theta", "eta")] + [log.rho[0, :, 0]]
        return log.excess_risk[0] + cfg.eps ** 2, np.stack(o)

    for j, a in enumerate((0.03, 0.1)):
        mse, o = train(a)
        # the same numbers under the suite's XLA flags (conftest); 1.1e-16 apart on the overlaps
        # under the chapters' XLA flags (SLR_TEST_XLA_OPT=1 SLR_TEST_UNROLL=1), measured
        np.testing.assert_allclose(res["att"][j], mse, rtol=1e-12)
        np.testing.assert_allclose(res["o"][:, j], o, rtol=0, atol=1e-14)
        # controls: a step size 1% off (2.7e-3 and 5.5e-3 apart at the logs, relative) and the
        # library's own float64 draws (0.12 and 0.39) give other runs
        assert not np.allclose(res["att"][j], train(a * 1.01)[0], rtol=1e-6)
        assert not np.allclose(res["att"][j], train(a, draws="float64")[0], rtol=1e-6)
    run = dict(L=L, gamma=cfg.gamma, eps=cfg.eps, steps=cfg.steps, batch=cfg.batch, n_test=cfg.n_test,
               log_every=10)
    for j, m in enumerate((1e-2, 3e-2)):
        alone = baselines.train_diag_mlp(k_train, k_mlp, ks, vs, width=cfg.width, lr=m, dtype=AF.DRAWS, **run)
        np.testing.assert_allclose(res["mlp"][j], alone["excess_risk"] + cfg.eps ** 2, rtol=1e-12)
        assert res["n"] == alone["n_params"]
        f64 = baselines.train_diag_mlp(k_train, k_mlp, ks, vs, width=cfg.width, lr=m, **run)
        assert not np.allclose(res["mlp"][j], f64["excess_risk"] + cfg.eps ** 2)  # control: draws differ
    assert not np.allclose(res["att"][0], res["att"][1])  # the step sizes differ: so do the runs


def test_annealing():
    """With cut_at_point False, attention's step is alpha before step anneal_at and anneal * alpha from it
    on, wherever the run is: annealing from step 0 is the constant step anneal * alpha; annealing from the
    10th of 20 steps leaves the logs up to step 10 as the constant run's and changes those after; the MLP
    is not annealed."""
    from dataclasses import replace
    cfg = AF.DiagMLPConfig(d=8, Ls=(3,), steps=20, batch=8, width=2, n_test=50, n_eval=4, tied_Ls=(),
                           anneal=1.0, cut_at_point=False).validate()
    L, lam = 3, 0.3
    run = lambda c, a: AF.call_runs(c, L, lam, [(7, a, 1e-2)])
    const, small = run(cfg, 0.1), run(cfg, 0.1 * 0.25)
    from_0 = run(replace(cfg, anneal=0.25, anneal_from=0.0), 0.1)
    half = run(replace(cfg, anneal=0.25, anneal_from=0.5), 0.1)   # logs at steps 0, 5, 10, 15, 20
    np.testing.assert_array_equal(from_0["att"], small["att"])
    np.testing.assert_array_equal(half["att"][:, :3], const["att"][:, :3])
    np.testing.assert_array_equal(half["mlp"], const["mlp"])
    assert (from_0["cut"][0], half["cut"][0], const["cut"][0]) == (0, 10, 13)   # all cut at anneal_at
    assert not np.allclose(half["att"][:, 3:], const["att"][:, 3:], rtol=1e-6)   # annealed after step 10
    assert not np.allclose(half["att"][:, 3:], run(replace(cfg, anneal=0.25, anneal_from=0.55), 0.1)["att"][:, 3:],
                           rtol=1e-6)   # control: annealed from step 11, another run


def test_cut_at_point():
    """With cut_at_point (the default), each run's step is cut at the first step t >= anneal_at at which its
    overlaps are at the oracle or the role-swapped point (slr.landscape.classify's rule, tolerance cut_tol),
    read here on a log at every step of the constant-step run: the cut run is that run up to step t and
    another after; a run that reaches no point in the budget is never cut. Control: cut_at_point False
    cuts at anneal_at."""
    from dataclasses import replace
    from slr import landscape
    L, lam = 3, 0.3
    cfg = AF.DiagMLPConfig(d=8, Ls=(L,), steps=80, batch=8, width=2, n_test=50, n_eval=80, tied_Ls=(),
                           anneal=1.0, anneal_from=0.5).validate()   # anneal_at = 40, a log at every step
    cut_cfg = replace(cfg, anneal=0.25)
    runs = [(1, 0.1, 1e-2), (2, 0.1, 1e-2), (0, 0.01, 1e-2)]   # (seed, alpha, lr)
    const, cut = AF.call_runs(cfg, L, lam, runs), AF.call_runs(cut_cfg, L, lam, runs)
    kinds = np.array([[str(landscape.classify(*const["o"][:, r, t], lam=lam, gamma=cfg.gamma, d=cfg.d,
                                              tol=cfg.cut_tol)) for t in range(81)] for r in range(3)])
    first = [next((t for t in range(40, 80) if kinds[r, t] != "other"), 80) for r in range(3)]
    # the first run reaches the oracle point after anneal_at, the second the role-swapped one, the third none
    assert 40 < first[0] < 80 and 40 < first[1] < 80 and first[2] == 80
    assert (kinds[0, first[0]], kinds[1, first[1]]) == ("oracle", "role-swapped")
    np.testing.assert_array_equal(cut["cut"], first)
    for r in range(2):
        np.testing.assert_array_equal(cut["att"][r, :first[r] + 1], const["att"][r, :first[r] + 1])
        assert not np.allclose(cut["att"][r, first[r] + 2:], const["att"][r, first[r] + 2:], rtol=1e-6)
    np.testing.assert_array_equal(cut["att"][2], const["att"][2])   # never at a point: never cut
    np.testing.assert_array_equal(cut["mlp"], const["mlp"])
    every = AF.call_runs(replace(cut_cfg, cut_at_point=False), L, lam, runs)   # control: cut at anneal_at
    np.testing.assert_array_equal(every["cut"], [40, 40, 40])
    assert not np.allclose(every["att"][2, 42:], const["att"][2, 42:], rtol=1e-6)
