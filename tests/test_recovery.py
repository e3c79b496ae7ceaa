"""slr.recovery: uniform starts, the temperature map and the dimension sweep, first passage, the log law."""
import math

import jax
import numpy as np
import pytest

from slr import flow as FL
from slr import recovery as RC
from slr.risk import oracle_risk

G = math.sqrt(0.5)


def test_sphere_overlaps_have_variance_one_over_d():
    # each overlap of independent uniform unit vectors has mean 0 and variance 1/d
    o = np.array(RC.sphere_overlaps(jax.random.key(0), 50, 4000))
    assert o.shape == (5, 4000)
    z = (np.mean(o ** 2, axis=1) * 50 - 1) / (np.std(o ** 2 * 50, axis=1) / math.sqrt(4000))
    assert np.all(np.abs(z) < 5), z


def test_sphere_overlaps_law_is_the_law_of_the_direct_draw():
    # the d-free sampler against the d-dimensional draw: KS tests of each overlap (and of kappa^2 +
    # eta^2, rho kappa, which see the joint law), at d = 4 (the smallest) and d = 12, 4000 draws each
    from scipy import stats
    p = []
    for d in (4, 12):
        a, b = (np.array(f(jax.random.key(d), d, 4000)) for f in (RC.sphere_overlaps_law, RC.sphere_overlaps))
        for x, y in zip((*a, a[0] ** 2 + a[3] ** 2, a[4] * a[0]), (*b, b[0] ** 2 + b[3] ** 2, b[4] * b[0])):
            p.append(stats.ks_2samp(x, y).pvalue)
    assert min(p) > 1e-4, p  # 14 tests: a true law fails one with probability < 1.4e-3
    o = np.array(RC.sphere_overlaps_law(jax.random.key(0), 100000, 4000))
    assert np.all(np.abs(np.mean(o ** 2, axis=1) * 100000 - 1) < 0.12)  # variance 1/d (4000 draws)
    assert not np.all(np.abs(np.mean(o ** 2, axis=1) * 10000 - 1) < 0.12)
    with pytest.raises(ValueError, match="d must"):
        RC.sphere_overlaps_law(jax.random.key(0), 3, 10)


def test_first_passage():
    t = np.array([0.0, 1.0, 2.0, 3.0])
    hit = np.array([[False, False, True, True], [False, False, False, False], [True, True, True, True]])
    assert list(RC.first_passage(t, hit)) == [2.0, np.inf, 0.0]


def test_log_law_recovers_a_known_law():
    ds = np.array([100, 1000, 10_000])
    times = 3.0 + 2.0 * np.log(ds)[:, None] + np.zeros((3, 5))
    times[0, 0] = np.inf  # a run that never passes is left out of the median
    (A, B), boot = RC.log_law(ds, times, n_boot=20)
    assert A == pytest.approx(3.0) and B == pytest.approx(2.0) and boot.shape == (20, 2)


def test_end_kinds_reads_the_oracle_and_the_swap():
    from slr.landscape import swap_theta
    lam, d, L = 0.1, 400, 10
    ts = float(swap_theta(lam, gamma=G, d=d))
    pts = np.array([[1.0, 1.0, 0, 0, 0], [0.5, 1.0, 0, 0, 0], [0, 0, ts, 1.0, 0]])
    data = {f: pts[:, i][:, None] for i, f in enumerate(("kappa", "nu", "theta", "eta", "rho"))}
    data["excess_risk"] = np.asarray(oracle_risk(lam=lam, gamma=G, d=d, L=L))[None, None] + np.zeros((3, 1))
    data["lam"] = np.array(lam)
    kinds, gap = RC.end_kinds(data, gamma=G, d=d, L=L)
    assert list(kinds) == ["recovered", "other", "role-swapped"]  # |kappa| = 0.5 < 0.9 is not recovered
    assert np.allclose(gap, 0.0)


def test_temperature_map_is_exact_pgd_and_validates():
    cfg = RC.TemperatureConfig(lam0s=(0.1,), decays=(0.0, 0.25), horizon=4.0, repeats=2, n_logs=4).validate()
    out = RC.temperature_map(cfg, 0)
    assert out["kappa"].shape == (2, 1, 2, 5)
    assert np.allclose(out["lam"][1, 0], 0.1 / (1 + 0.25 * out["time"]))
    assert np.all(out["excess_risk"][..., -1] <= out["excess_risk"][..., 0] + 1e-12)  # gradient descent
    with pytest.raises(ValueError, match="horizon"):
        RC.TemperatureConfig(horizon=0.0).validate()


def test_two_threads_give_the_numbers_of_one_call():
    """The temperature map's halves and the dimension sweep's d, run on two threads, are bit for bit
    the runs of one call per sweep and of one call per d."""
    o = RC.sphere_overlaps(jax.random.key(3), 50, 32)
    kw = dict(alpha=1e-2, d=50.0, horizon=2.0, n_logs=4, gamma=G, L=10)
    lam0, c = np.linspace(0.1, 1.0, 32), np.linspace(0.0, 0.5, 32)
    one, two = RC.run_to(o, lam0=lam0, c_time=c, **kw), RC.run_halves(o, lam0=lam0, c_time=c, **kw)
    assert all(np.array_equal(one[k], two[k]) for k in one)
    cfg = RC.DimensionConfig(ds=(20, 50), horizon=1.0, repeats=4, n_logs=4)
    dm = RC.dimension_sweep(cfg, 0)
    for i, d in enumerate(cfg.ds):
        ref = RC.run_to(RC.sphere_overlaps(jax.random.fold_in(jax.random.key(0), d), d, 4),
                        lam0=cfg.ell / np.sqrt(d), c_time=0.0, alpha=cfg.alpha_d / d, d=float(d),
                        horizon=1.0, n_logs=4, gamma=cfg.gamma, L=cfg.L)
        assert np.array_equal(dm["kappa"][i], ref["kappa"]) and np.array_equal(dm["time_d"][i], ref["time"])


def test_overlap_flow_is_the_small_step_limit_of_one_pgd_step():
    from slr.overlaps import NAMES
    from slr.pgd import pgd_overlaps
    o = np.array(RC.sphere_overlaps(jax.random.key(1), 50, 4))
    a = 1e-7
    # the 4 starts in one run of 4 logged steps (the compiled program of the temperature map above: 4 runs,
    # 4 logs); the first step of each is read
    tr = pgd_overlaps(o, lam0=0.3, alpha=a, d=50.0, steps=4, gamma=G, L=10, log_every=1)
    for i in range(4):
        fd = (np.array([getattr(tr, f)[i, 1] for f in NAMES]) - o[:, i]) / a
        flow = FL.overlap_flow(o[:, i], lam=0.3, d=50.0, gamma=G, L=10)
        assert np.allclose(fd, flow, rtol=1e-4, atol=1e-5), (fd, flow)
    with pytest.raises(ValueError, match="lam"):
        FL.overlap_flow(o[:, 0], lam=0.0, d=50.0, gamma=G, L=10)
    with pytest.raises(ValueError, match="d must"):
        FL.flow_overlaps(o, lam=0.3, d=0.5, horizon=1.0, n_logs=2, gamma=G, L=10)
    with pytest.raises(ValueError, match="method"):
        RC.DimensionConfig(method="euler").validate()


@pytest.fixture
def flow_block_32(monkeypatch):
    """flow_overlaps pads its runs to a multiple of FL.FLOW_BLOCK (256: one compilation for every
    sweep of the chapter); the tests below solve 4 to 32 runs, so a block of 32 evaluates the field
    and its Jacobian on 8 to 64 times fewer rows. Each run is its own row of a vmap (the padding
    rows are dropped), so the solution does not depend on the block."""
    monkeypatch.setattr(FL, "FLOW_BLOCK", 32)


def test_flow_is_the_trajectory_of_pgd_at_small_steps(flow_block_32):
    # exact PGD converges to the flow at rate O(alpha): the gap shrinks tenfold with alpha
    d = 316
    o = RC.sphere_overlaps(jax.random.fold_in(jax.random.key(0), d), d, 4)
    kw = dict(d=float(d), horizon=2.0, n_logs=4, gamma=G, L=10)
    fl = FL.flow_overlaps(o, lam=2 / math.sqrt(d), rtol=1e-10, atol=1e-12, **kw)
    gap = []
    for a in (0.1 / d, 0.01 / d):
        pg = RC.run_to(o, lam0=2 / math.sqrt(d), c_time=0.0, alpha=a, **kw)
        assert np.allclose(pg["time"], fl["time"])
        gap.append(max(np.abs(pg[f] - fl[f]).max() for f in ("kappa", "nu", "theta", "eta", "rho")))
    assert gap[1] < 1e-4 and 5 < gap[0] / gap[1] < 20, gap


def _passage(data, ds, time_d):
    out = []
    for i, d in enumerate(ds):
        run = dict({f: data[f][i] for f in ("kappa", "nu", "theta", "eta", "rho", "excess_risk")},
                   lam=data["lam"][i])
        kinds, _ = RC.end_kinds(run, gamma=G, d=d, L=10, index=None)
        out.append((RC.first_passage(time_d[i], kinds == "recovered"), kinds[:, -1]))
    return out


def test_flow_first_passage_matches_pgd_at_the_chapter_step(flow_block_32):
    # alpha = 1.6 / d: the same runs recover, to the same end points, within one log (0.2 in tau);
    # the flow at a wrong lam (ell = 2.4) or a wrong d (x 2) from the same starts does not
    ds = (316, 1000)
    base = RC.DimensionConfig(ds=ds, repeats=8, horizon=40.0, n_logs=200)
    pg = RC.dimension_sweep(base, 0)
    fl = RC.dimension_sweep(RC.DimensionConfig(**{**base.__dict__, "method": "flow"}), 0)
    assert fl["kappa"].shape == pg["kappa"].shape and np.allclose(fl["time_d"], fl["time"])

    def gap(other, time_o):
        worst = 0.0
        for (tp, kp), (tf, kf) in zip(_passage(pg, ds, pg["time_d"]), _passage(other, ds, time_o)):
            if not (np.array_equal(kp, kf) and np.array_equal(np.isfinite(tp), np.isfinite(tf))):
                return np.inf
            ok = np.isfinite(tp)
            worst = max(worst, np.abs(tp[ok] - tf[ok]).max(initial=0.0))
        return worst

    assert sum(np.isfinite(t).sum() for t, _ in _passage(pg, ds, pg["time_d"])) >= 4
    assert gap(fl, fl["time_d"]) <= 0.21
    # the two wrong flows of both d from the same starts, in one solver call (its runs are independent
    # systems; one call instead of four: a quarter of the field evaluations)
    cases, starts = ((2.4, 1.0), (2.0, 2.0)), [RC.sphere_overlaps(jax.random.fold_in(jax.random.key(0), d), d, 8)
                                               for d in ds]
    o = np.concatenate([np.stack(s) for _ in cases for s in starts], axis=1)
    lam, dd = (np.repeat([f(ell, scale, d) for ell, scale in cases for d in ds], 8)
               for f in (lambda ell, scale, d: ell / math.sqrt(d), lambda ell, scale, d: scale * d))
    r = FL.flow_overlaps(tuple(o), lam=lam, d=dd, horizon=40.0, n_logs=200, gamma=G, L=10)
    for c, (ell, scale) in enumerate(cases):
        wrong = {k: v.reshape(len(cases), len(ds), 8, -1)[c] for k, v in r.items() if k != "time"}
        wrong["lam"] = pg["lam"]
        assert gap(wrong, np.broadcast_to(fl["time"], fl["time_d"].shape)) > 0.5, (ell, scale)
