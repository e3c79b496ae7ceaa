"""Every public function of slr.task, slr.risk and slr.predictors refuses bad arguments with a
ValueError that names the argument (CONTRIBUTING: no silent NaN)."""
import math
import re

import jax
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import slr  # noqa: F401  (float64)
from slr import montecarlo as MC, predictors as P, risk as R, task

G = math.sqrt(0.5)
KEY = jax.random.key(0)
D = 6
KS = np.eye(D)[0]
VS = np.eye(D)[1]
K = np.eye(D)[2]
V = np.eye(D)[3]
NOT_UNIT = 1.1 * KS
NAN_VEC = np.full(D, np.nan)
BAD_INTS = [0, -3, 2.0, 2.5, True, False, "3", None, np.nan, np.inf]
BAD_POS = [0.0, -1.0, -1e-300, np.nan, np.inf, -np.inf, "x", None, [1.0, 2.0]]
BAD_NONNEG = [-1e-9, -1.0, np.nan, np.inf, "x", None]


def raises_naming(name):
    return pytest.raises(ValueError, match=rf"(?<![A-Za-z_]){re.escape(name)}(?![A-Za-z_])")


# ---------- call builders: each returns a thunk with one argument replaced ----------

def call_sample(**kw):
    args = dict(key=KEY, n=5, k_star=KS, v_star=VS, L=3, gamma=G, eps=0.1, p=None)
    args.update(kw)
    return lambda: task.sample(args["key"], args["n"], args["k_star"], args["v_star"], L=args["L"],
                               gamma=args["gamma"], eps=args["eps"], p=args["p"])


def call_sample_multi(**kw):
    args = dict(key=KEY, n=5, k_stars=np.eye(D)[:2], v_stars=np.eye(D)[2:4], L=3, gamma=G, eps=0.1)
    args.update(kw)
    return lambda: task.sample_multi(args["key"], args["n"], args["k_stars"], args["v_stars"], L=args["L"],
                                     gamma=args["gamma"], eps=args["eps"])


def call_risk(**kw):
    args = dict(kappa=0.5, nu=0.5, theta=0.1, eta=0.1, rho=0.1, lam=0.3, gamma=G, d=100, L=5, eps=0.1)
    args.update(kw)
    return lambda: R.risk(args["kappa"], args["nu"], args["theta"], args["eta"], args["rho"], lam=args["lam"],
                          gamma=args["gamma"], d=args["d"], L=args["L"], eps=args["eps"])


def call_excess(**kw):
    args = dict(kappa=0.5, nu=0.5, theta=0.1, eta=0.1, rho=0.1, lam=0.3, gamma=G, d=100, L=5, eps=0.1)
    args.update(kw)
    return lambda: R.excess_risk(args["kappa"], args["nu"], args["theta"], args["eta"], args["rho"],
                                 lam=args["lam"], gamma=args["gamma"], d=args["d"], L=args["L"], eps=args["eps"])


def call_oracle(**kw):
    args = dict(lam=0.3, gamma=G, d=100, L=5, eps=0.1)
    args.update(kw)
    return lambda: R.oracle_risk(**args)


def call_risk_at(**kw):
    args = dict(k=K, v=V, k_star=KS, v_star=VS, lam=0.3, gamma=G, L=5, eps=0.1)
    args.update(kw)
    return lambda: R.risk_at(args["k"], args["v"], args["k_star"], args["v_star"], lam=args["lam"],
                             gamma=args["gamma"], L=args["L"], eps=args["eps"])


def call_mc(**kw):
    args = dict(key=KEY, k=K, v=V, k_star=KS, v_star=VS, lam=0.3, gamma=G, L=5, eps=0.1, n=10, chunk=10)
    args.update(kw)
    return lambda: MC.risk(args["key"], args["k"], args["v"], args["k_star"], args["v_star"],
                           lam=args["lam"], gamma=args["gamma"], L=args["L"], eps=args["eps"],
                           n=args["n"], chunk=args["chunk"])


def call_linear_risk(**kw):
    args = dict(gamma=G, L=5, eps=0.1, p=None)
    args.update(kw)
    return lambda: R.linear_risk(**args)


def call_linear_weights(**kw):
    args = dict(v_star=VS, gamma=G, L=5, p=None)
    args.update(kw)
    return lambda: R.linear_weights(args["v_star"], gamma=args["gamma"], L=args["L"], p=args["p"])


def call_null(**kw):
    args = dict(gamma=G, eps=0.1)
    args.update(kw)
    return lambda: R.null_risk(**args)


def call_predictor(fn):
    def build(**kw):
        args = dict(X=np.ones((2, 3, D)), k=KS, v=VS, lam=0.5)
        args.update(kw)
        return lambda: fn(args["X"], args["k"], args["v"], args["lam"])
    return build


def call_sample_oracle(**kw):
    args = dict(key=KEY, d=4)
    args.update(kw)
    return lambda: task.sample_oracle(args["key"], args["d"])


def call_sample_oracle_multi(**kw):
    args = dict(key=KEY, d=6, H=2)
    args.update(kw)
    return lambda: task.sample_oracle_multi(args["key"], args["d"], args["H"])


def call_frame(**kw):
    args = dict(key=KEY, d=6, m=2)
    args.update(kw)
    return lambda: task.orthonormal_frame(args["key"], args["d"], args["m"])


ALL_BUILDERS = {
    "sample": call_sample, "sample_multi": call_sample_multi, "risk": call_risk, "excess_risk": call_excess,
    "oracle_risk": call_oracle, "risk_at": call_risk_at, "monte_carlo_risk": call_mc,
    "linear_risk": call_linear_risk, "linear_weights": call_linear_weights, "null_risk": call_null,
    "attention_erf": call_predictor(P.attention_erf), "attention_softmax": call_predictor(P.attention_softmax),
    "sample_oracle": call_sample_oracle, "sample_oracle_multi": call_sample_oracle_multi,
    "orthonormal_frame": call_frame,
}


@pytest.mark.parametrize("name", sorted(ALL_BUILDERS))
def test_valid_call_runs(name):
    out = ALL_BUILDERS[name]()()
    leaves = jax.tree_util.tree_leaves(out)
    assert leaves and all(np.all(np.isfinite(np.asarray(x, float))) for x in leaves)


# (function, argument, bad values)
CASES = []
for fn in ("sample", "sample_multi"):
    CASES += [(fn, "n", BAD_INTS), (fn, "L", BAD_INTS), (fn, "gamma", BAD_POS), (fn, "eps", BAD_NONNEG),
              (fn, "key", [0, np.array([1, 2, 3], np.uint32), "k"])]
CASES += [("sample", "k_star", [NOT_UNIT, NAN_VEC, np.eye(D)[:2], np.zeros(D)]),
          ("sample", "v_star", [NOT_UNIT, NAN_VEC, np.eye(D + 1)[1]]),
          ("sample", "p", [np.ones(3), np.array([0.5, 0.5]), np.array([1.5, -0.5, 0.0]),
                           np.array([np.nan, 0.5, 0.5])])]
for fn in ("risk", "excess_risk"):
    for ov in ("kappa", "nu", "theta", "eta", "rho"):
        CASES.append((fn, ov, [1.0001, -1.5, np.nan, np.inf, np.array([0.0, 2.0])]))
for fn in ("risk", "excess_risk", "oracle_risk"):
    CASES += [(fn, "lam", BAD_POS[:7]), (fn, "gamma", BAD_POS[:7]), (fn, "eps", BAD_NONNEG[:4]),
              (fn, "d", [0, 0.5, -3, np.nan, np.inf, True]), (fn, "L", [0, -1, 2.5, True, np.nan, np.inf])]
for fn in ("risk_at", "monte_carlo_risk"):
    # both broadcast over an array of lam (a grid); monte_carlo_risk wants a scalar gamma
    bad_pos = BAD_POS if fn == "monte_carlo_risk" else BAD_POS[:8]
    CASES += [(fn, "lam", BAD_POS[:8]), (fn, "gamma", bad_pos), (fn, "eps", BAD_NONNEG),
              (fn, "k", [NOT_UNIT, NAN_VEC]), (fn, "v", [NOT_UNIT, NAN_VEC]),
              (fn, "k_star", [NOT_UNIT, NAN_VEC]), (fn, "v_star", [NOT_UNIT, NAN_VEC]),
              (fn, "L", [0, 2.5, True, -1])]
CASES += [("monte_carlo_risk", "n", BAD_INTS), ("monte_carlo_risk", "chunk", [0, 1.5, True]),
          ("monte_carlo_risk", "key", [0, "k"]),
          ("monte_carlo_risk", "v", [np.eye(D + 1)[3]])]
CASES += [("linear_risk", "gamma", BAD_POS[:7]), ("linear_risk", "eps", BAD_NONNEG),
          ("linear_risk", "L", [0, -2, 2.5, True, np.array([2, 0])]),
          ("linear_risk", "p", [np.array([0.2, 0.2, 0.2, 0.2, 0.3]), np.ones(4) / 4, -np.ones(5)]),
          ("linear_weights", "gamma", BAD_POS[:7]), ("linear_weights", "v_star", [NOT_UNIT, NAN_VEC]),
          ("linear_weights", "L", [0, 2.5, True]), ("linear_weights", "p", [np.ones(4) / 4]),
          ("null_risk", "gamma", BAD_POS[:7]), ("null_risk", "eps", BAD_NONNEG)]
for fn in ("attention_erf", "attention_softmax"):
    CASES.append((fn, "lam", [0.0, -1.0, np.nan, np.inf, np.array([1.0, -1.0])]))
CASES += [("sample_oracle", "d", [0, 1, 2.0, True, "4"]), ("sample_oracle", "key", [1, "k"]),
          ("sample_oracle_multi", "H", [0, 1.0, True]), ("sample_oracle_multi", "d", [3, 0, 6.0, True]),
          ("orthonormal_frame", "d", [0, 2.5, True]), ("orthonormal_frame", "m", [0, 7, 1.0, True]),
          ("orthonormal_frame", "key", [1])]

PARAMS = [pytest.param(fn, arg, bad, id=f"{fn}-{arg}-{i}") for fn, arg, bads in CASES for i, bad in enumerate(bads)]


@pytest.mark.parametrize("fn,arg,bad", PARAMS)
def test_bad_argument_named(fn, arg, bad):
    with raises_naming(arg):
        ALL_BUILDERS[fn](**{arg: bad})()


def test_non_orthogonal_targets():
    bad_v = (KS + VS) / math.sqrt(2)
    with raises_naming("v_star"):
        call_sample(v_star=bad_v)()
    with raises_naming("v_star"):
        call_risk_at(v_star=bad_v)()
    with raises_naming("v_star"):
        call_mc(v_star=bad_v)()
    with raises_naming("k_stars"):
        call_sample_multi(v_stars=np.eye(D)[1:3])()
    with raises_naming("k_stars"):
        call_sample_multi(v_stars=np.eye(D)[2:5])()


def test_sample_multi_needs_enough_positions():
    with raises_naming("L"):
        call_sample_multi(L=1)()


# ---------- property-based: any bad scalar is refused, any good one gives a finite value ----------

nonpositive = st.one_of(st.floats(max_value=0.0, allow_nan=False), st.just(float("nan")),
                        st.just(float("inf")))
# overlaps may exceed [-1, 1] by round-off (1e-9 is tolerated); anything beyond is refused
outside = st.one_of(st.floats(min_value=1.0 + 1e-8, allow_infinity=True),
                    st.floats(max_value=-1.0 - 1e-8, allow_infinity=True))


@settings(max_examples=20, deadline=None, database=None)
@given(lam=nonpositive)
def test_hyp_lam_refused(lam):
    with raises_naming("lam"):
        call_risk(lam=lam)()
    with raises_naming("lam"):
        call_oracle(lam=lam)()


@settings(max_examples=20, deadline=None, database=None)
@given(gamma=nonpositive, eps=st.one_of(st.floats(max_value=-1e-300), st.just(float("nan"))))
def test_hyp_gamma_eps_refused(gamma, eps):
    with raises_naming("gamma"):
        call_oracle(gamma=gamma)()
    with raises_naming("gamma"):
        call_linear_risk(gamma=gamma)()
    with raises_naming("eps"):
        call_oracle(eps=eps)()
    with raises_naming("eps"):
        call_null(eps=eps)()


@settings(max_examples=20, deadline=None, database=None)
@given(x=outside, which=st.sampled_from(["kappa", "nu", "theta", "eta", "rho"]))
def test_hyp_overlap_refused(x, which):
    with raises_naming(which):
        call_risk(**{which: x})()


@settings(max_examples=30, deadline=None, database=None)
@given(ov=st.lists(st.floats(-1.0, 1.0), min_size=5, max_size=5),
       lam=st.floats(1e-6, 1e3), gamma=st.floats(1e-3, 1e2), logd=st.floats(0.0, 12.0),
       L=st.integers(1, 10_000), eps=st.floats(0.0, 10.0))
def test_hyp_valid_risk_is_finite(ov, lam, gamma, logd, L, eps):
    r = float(R.risk(*ov, lam=lam, gamma=gamma, d=10.0 ** logd, L=L, eps=eps))
    assert math.isfinite(r)
    assert math.isfinite(float(R.oracle_risk(lam=lam, gamma=gamma, d=10.0 ** logd, L=L, eps=eps)))
