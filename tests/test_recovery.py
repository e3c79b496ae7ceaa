"""slr.recovery: uniform starts, the temperature map and the dimension sweep, first passage, the log law."""
import math

import jax
import numpy as np
import pytest

from slr import recovery as RC
from slr.risk import oracle_risk

G = math.sqrt(0.5)


def test_sphere_overlaps_have_variance_one_over_d():
    # each overlap of independent uniform unit vectors has mean 0 and variance 1/d
    o = np.array(RC.sphere_overlaps(jax.random.key(0), 50, 4000))
    assert o.shape == (5, 4000)
    z = (np.mean(o ** 2, axis=1) * 50 - 1) / (np.std(o ** 2 * 50, axis=1) / math.sqrt(4000))
    assert np.all(np.abs(z) < 5), z


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
