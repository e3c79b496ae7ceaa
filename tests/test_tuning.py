import math

import jax
import numpy as np

from slr import risk, tuning

G = math.sqrt(0.5)


def test_erf_best_is_the_minimum_of_the_closed_form():
    lam, val = tuning.erf_best(gamma=G, d=400, L=10)
    fine = np.linspace(0.5 * lam, 1.5 * lam, 2001)
    curve = np.asarray(risk.oracle_risk(lam=fine, gamma=G, d=400, L=10))
    assert val <= curve.min() + 1e-12 and abs(val - curve.min()) < 1e-7


def test_mc_best_finds_linear_attention_closed_form():
    lam, val, se = tuning.mc_best(jax.random.key(0), "linear", gamma=G, d=100, L=5, n=20_000)
    lam_c, best = risk.linear_attention_best(gamma=G, d=100, L=5)
    assert abs(val - best) < 5 * se and abs(lam / lam_c - 1) < 0.1


def test_grid_best():
    assert tuning.grid_best([3.0, 1.0, 2.0], [0.1, 0.2, 0.3]) == (0.2, 1.0)
