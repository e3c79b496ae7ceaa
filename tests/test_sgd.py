"""slr.sgd: the one stochastic PGD trainer (train) and Figure 5's entry (sgd)."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from slr import task
from slr import pgd as P, predictors, sgd as S

GAMMA = math.sqrt(0.5)
SETTING = dict(gamma=GAMMA, L=10)

# test_sgd_decreases_excess_risk's setting (3 runs in R^20, one erf head, L = 2, batch 5), whose reduced program
# the unrolling test below reuses for its rolled run
DECREASE = dict(lam=0.3, alpha=5e-2, batch=5, gamma=GAMMA, L=2, eps=0.1, n_test=500)


@pytest.fixture(scope="module")
def oracle400():
    return task.sample_oracle(jax.random.key(0), 400)


def test_sgd_decreases_excess_risk():
    ks, vs = task.sample_oracle(jax.random.key(10), 20)
    k0, v0 = P.init_sphere(jax.random.key(11), 20, 3)
    tr = S.sgd(jax.random.key(12), k0, v0, ks, vs, steps=3000, log_every=600, **DECREASE)
    assert tr.excess_risk.shape == tr.excess_risk_closed.shape == (3, 6)
    assert np.median(tr.excess_risk[:, -1]) < 0.5 * np.median(tr.excess_risk[:, 0])
    assert np.median(tr.excess_risk_closed[:, -1]) < 0.5 * np.median(tr.excess_risk_closed[:, 0])
    # the test-batch estimate tracks the closed form
    assert np.max(np.abs(tr.excess_risk - tr.excess_risk_closed)) < 0.5


def test_sgd_sampler_validation(oracle400):
    ks, vs = oracle400
    k0, v0 = P.init_sphere(jax.random.key(1), 400, 2)
    kw = dict(lam=0.1, alpha=1e-3, steps=2, batch=2, gamma=GAMMA, L=3, eps=0.1, log_every=1)
    with pytest.raises(ValueError, match="batch"):
        S.sgd(jax.random.key(0), k0, v0, ks, vs, **dict(kw, batch=0))
    with pytest.raises(ValueError, match="n_test"):
        S.sgd(jax.random.key(0), k0, v0, ks, vs, n_test=0, **kw)
    with pytest.raises(ValueError, match="sampler"):
        S.sgd(jax.random.key(0), k0, v0, ks, vs, sampler="fast", **kw)
    with pytest.raises(ValueError, match="sampler"):
        S.sgd(jax.random.key(0), k0, v0, ks, vs, sampler=None, **kw)


# ----------------------------------------------------------------------------------------------
# the one trainer: sgd.train

KW = dict(lam=0.8, alpha=5e-2, steps=40, batch=4, gamma=GAMMA, L=4, eps=0.1, log_every=20, n_test=64)


@pytest.fixture(scope="module")
def small():
    """An oracle in R^8 (one location) and two-location oracles, with 3 starts of 1 and 2 heads."""
    ks, vs = task.sample_oracle(jax.random.key(50), 8)
    ks2, vs2 = task.sample_oracle_multi(jax.random.key(51), 8, 2)
    return dict(ks=ks, vs=vs, ks2=ks2, vs2=vs2, one=P.init_sphere(jax.random.key(52), 8, 3, H=1),
                two=P.init_sphere(jax.random.key(53), 8, 3, H=2))


def test_train_one_erf_head_is_sgd_full_sampler(small):
    """sgd.sgd is train with one erf head: the same numbers; Eq. (31) with H = 1 (another code path:
    all heads read at once) equals it to round-off."""
    k0, v0 = small["one"]
    ks, vs = small["ks"], small["vs"]
    ref = S.sgd(jax.random.key(54), k0[:, 0], v0[:, 0], ks, vs, sampler="full", **KW)
    for predictor, tol in (("erf", 0.0), ("multihead", 1e-12)):
        out = S.train(jax.random.key(54), k0, v0, ks[None], vs[None], predictor=predictor, **KW)
        for name in ("kappa", "nu", "theta", "eta"):
            np.testing.assert_allclose(getattr(out, name)[..., 0, 0], getattr(ref, name), rtol=0, atol=tol)
        np.testing.assert_allclose(out.rho[..., 0], ref.rho, rtol=0, atol=tol)
        np.testing.assert_allclose(out.excess_risk, ref.excess_risk, rtol=0, atol=10 * tol)
        np.testing.assert_allclose(out.excess_risk_closed, ref.excess_risk_closed, rtol=0, atol=10 * tol)


def test_train_step_is_definition_1_head_by_head(small):
    """Two steps from given starts equal the projected step of Definition 1 applied to each head, with
    the gradient of the batch that fresh_draws gives for each step of the run's stream; heads stay unit.
    (Two steps logged at 0, 1, 2: the program of KW's two logs, which the tests below reuse.)"""
    k0, v0 = small["two"]
    ks, vs = small["ks2"], small["vs2"]
    kw = dict(KW, steps=2, log_every=1, alpha=0.3)
    out = S.train(jax.random.key(55), k0, v0, ks, vs, **kw)
    _, streams = S.batch_keys(jax.random.key(55), 3)

    @jax.jit
    def by_hand(k, v):  # Definition 1 written out, head by head, step by step (one program)
        for t in range(2):
            X, y, _ = task.assemble(S.fresh_draws(streams[1], t, batch=4, L=4, d=8, n_loc=2), ks, vs,
                                    gamma=GAMMA, eps=0.1)
            loss = lambda a, b: jnp.mean(jnp.square(y - predictors.sum_of_heads(predictors.attention_erf, X, a, b, 0.8)))
            gk, gv = jax.grad(loss, argnums=(0, 1))(k, v)
            k, v = (jnp.stack(x) for x in zip(*(P.projected_step(k[h], v[h], gk[h], gv[h], 0.3) for h in range(2))))
        return k, v

    k2, v2 = by_hand(k0[1], v0[1])
    np.testing.assert_allclose(out.k[1], k2, atol=1e-14)
    np.testing.assert_allclose(out.v[1], v2, atol=1e-14)
    assert np.max(np.abs(out.k[1] - k0[1])) > 1e-2  # the heads moved
    np.testing.assert_allclose(np.linalg.norm(out.k, axis=-1), 1.0, atol=1e-14)


def test_float32_draws_are_fresh_draws_in_float32(small):
    """draws="float32": a step is Definition 1 on the batch of fresh_draws(dtype=float32), used in
    float64 (as slr.appendix_f trains); control: the default float64 draws give another step. The
    reduced sampler, which draws in float64, refuses it."""
    k0, v0 = small["one"]
    ks, vs = small["ks"], small["vs"]
    kw = dict(KW, steps=1, log_every=1, alpha=0.3)
    out = {dr: S.train(jax.random.key(56), k0, v0, ks[None], vs[None], draws=dr, **kw)
           for dr in ("float32", "float64")}
    _, streams = S.batch_keys(jax.random.key(56), 3)

    @jax.jit
    def by_hand(k, v):  # Definition 1 on the float32 batch, written out (one program)
        X, y, _ = task.assemble(S.fresh_draws(streams[0], 0, batch=4, L=4, d=8, dtype=jnp.float32),
                                ks[None], vs[None], gamma=GAMMA, eps=0.1)
        loss = lambda a, b: jnp.mean(jnp.square(y - predictors.attention_erf(X, a, b, 0.8)))
        return X, P.projected_step(k, v, *jax.grad(loss, argnums=(0, 1))(k, v), 0.3)[0]

    X, k1 = by_hand(k0[0, 0], v0[0, 0])
    assert X.dtype == jnp.float64
    np.testing.assert_allclose(out["float32"].k[0, 0], k1, atol=1e-14)
    assert np.max(np.abs(out["float64"].k[0, 0] - k1)) > 1e-6
    with pytest.raises(ValueError, match="draws"):
        S.train(jax.random.key(56), k0, v0, ks[None], vs[None], draws="float32", sampler="reduced", **kw)


@settings(max_examples=4, deadline=None)
@given(H=st.integers(1, 2), alpha=st.floats(1e-3, 5.0), seed=st.integers(0, 2 ** 31))
def test_hyp_train_keeps_every_head_on_the_sphere(small, H, alpha, seed):
    """(alpha is traced: every example reuses the compiled programs of the tests above and below.)"""
    k0, v0 = small["one" if H == 1 else "two"]
    ks, vs = (small["ks"][None], small["vs"][None]) if H == 1 else (small["ks2"], small["vs2"])
    out = S.train(jax.random.key(seed), k0, v0, ks, vs, **dict(KW, alpha=alpha))
    assert out.k.shape == out.v.shape == (3, H, 8)
    np.testing.assert_allclose(np.linalg.norm(out.k, axis=-1), 1.0, atol=1e-13)
    np.testing.assert_allclose(np.linalg.norm(out.v, axis=-1), 1.0, atol=1e-13)


def test_shared_draws_give_identical_batches(small):
    """With shared draws, runs with the same start and oracle see the same batches (identical logs);
    with their own streams they differ. Per-run oracles equal to the shared one change nothing."""
    k0, v0 = small["two"]
    k0, v0 = np.repeat(k0[:1], 3, axis=0), np.repeat(v0[:1], 3, axis=0)
    ks, vs = small["ks2"], small["vs2"]
    shared = S.train(jax.random.key(59), k0, v0, ks, vs, shared_draws=True, **KW)
    for name in ("kappa", "nu", "excess_risk", "k"):
        a = getattr(shared, name)
        assert np.array_equal(a[0], a[1]) and np.array_equal(a[0], a[2]), name
    own = S.train(jax.random.key(59), k0, v0, ks, vs, **KW)
    assert not np.array_equal(own.k[0], own.k[1])
    per_run = S.train(jax.random.key(59), k0, v0, np.repeat(ks[None], 3, 0), np.repeat(vs[None], 3, 0),
                      shared_draws=True, **KW)
    np.testing.assert_allclose(per_run.kappa, shared.kappa, atol=1e-13)
    assert shared.kappa.shape == (3, 3, 2, 2) and shared.rho.shape == (3, 3, 2)
    assert shared.excess_risk_closed is None


def test_frozen_schedule_is_logged(small):
    k0, v0 = small["one"]
    lam = P.InverseTime(2.0, 0.1, 20)
    out = S.train(jax.random.key(60), k0, v0, small["ks"][None], small["vs"][None], **dict(KW, lam=lam))
    np.testing.assert_allclose(out.lam, [2.0, 2.0 / 3.0, 2.0 / 3.0])
    assert list(out.step) == [0, 20, 40]


def test_any_predictor_lowers_the_risk():
    """Softmax attention (Eq. 2), two heads on one location: the test risk falls."""
    ks, vs = task.sample_oracle(jax.random.key(61), 20)
    k0, v0 = P.init_sphere(jax.random.key(62), 20, 2, H=1)
    out = S.train(jax.random.key(63), k0, v0, ks[None], vs[None], lam=1.0, alpha=0.05, steps=300, batch=32,
                  gamma=GAMMA, L=5, eps=0.1, log_every=100, predictor="softmax", n_test=500)
    assert np.all(out.excess_risk[:, -1] < 0.7 * out.excess_risk[:, 0])
    log = S.TrainLog.from_dict(out.to_dict())
    assert log.excess_risk_closed is None and np.array_equal(log.kappa, out.kappa)


_BAD = {"alpha": [0.0, -1.0, float("nan")], "batch": [0, 2.5, True], "steps": [0, -3, 1.5],
        "log_every": [0, 2.0], "n_test": [0, -1], "gamma": [0.0, -0.5, float("inf")], "eps": [-0.1],
        "L": [0, 1], "predictor": ["gelu", 3], "sampler": ["fast", None], "shared_draws": [1, "yes"],
        "token_noise": ["tied", None], "draws": ["float16", 32, None]}


@settings(max_examples=30, deadline=None)
@given(field=st.sampled_from(sorted(_BAD)), data=st.data())
def test_hyp_train_validation_names_the_argument(small, field, data):
    bad = data.draw(st.sampled_from(_BAD[field]))
    k0, v0 = small["two"]
    kw = dict(KW, L=4)
    kw[field] = bad  # L = 1 < n_loc = 2 is out of range too
    with pytest.raises(ValueError, match=field):
        S.train(jax.random.key(0), k0, v0, small["ks2"], small["vs2"], **kw)


def test_train_shape_validation(small):
    k0, v0 = small["two"]
    ks, vs = small["ks2"], small["vs2"]
    with pytest.raises(ValueError, match="k0"):
        S.train(jax.random.key(0), k0[0], v0[0], ks, vs, **KW)
    with pytest.raises(ValueError, match="k_stars"):
        S.train(jax.random.key(0), k0, v0, np.repeat(ks[None], 2, 0), np.repeat(vs[None], 2, 0), **KW)
    with pytest.raises(ValueError, match="unit norm"):
        S.train(jax.random.key(0), 2 * k0, v0, ks, vs, **KW)
    with pytest.raises(ValueError, match="reduced"):  # the reduced samplers know erf heads only
        S.train(jax.random.key(0), k0, v0, ks, vs, sampler="reduced", predictor="relu", **KW)


def _unrolling_setting(small, sampler):
    if sampler == "full":
        (k0, v0), ks, vs = small["one"], small["ks"][None], small["vs"][None]
        return k0, v0, ks, vs, dict(KW, steps=122, log_every=61, sampler=sampler)
    ks, vs = (x[None] for x in task.sample_oracle(jax.random.key(10), 20))
    k0, v0 = (x[:, None] for x in P.init_sphere(jax.random.key(11), 20, 3))
    return k0, v0, ks, vs, dict(DECREASE, steps=305, log_every=61, sampler=sampler)


@pytest.fixture(scope="module")
def rolled_runs(small):
    """The rolled runs of both samplers, made before the first test below clears the compiled programs."""
    out = {}
    for smp in ("full", "reduced"):
        k0, v0, ks, vs, kw = _unrolling_setting(small, smp)
        out[smp] = S.train(jax.random.key(64), k0, v0, ks, vs, **kw)
    return out


@pytest.mark.parametrize("sampler", ["full", "reduced"])
def test_chapters_unrolling_is_the_rolled_loop(small, rolled_runs, monkeypatch, sampler):
    """The suite rolls the step loops (conftest: half the compilation time); the chapters unroll them
    (slr.sgd.UNROLL = 4): the same iterates. Chunks of 61 steps (the chunk length is traced, so the
    rolled programs are those of the tests above: KW's two logs for the full sampler, the five logs of
    test_sgd_decreases_excess_risk for the reduced one; both rolled runs are made before the first
    jax.clear_caches below, which drops every compiled program) run the unrolled loop and its
    remainder (full), the 50-step noise block and the rest (reduced). The compiled programs differ, so they may round
    differently (measured: 3e-13 on kappa after 122 steps of the full sampler, 4e-16 on every field after 305
    of the reduced one); a step that read another step's batch or skipped one would change the iterates by ~1e-1."""
    from conftest import CHAPTER_UNROLL
    name, unroll = CHAPTER_UNROLL[S.__name__]
    assert unroll > 1
    k0, v0, ks, vs, kw = _unrolling_setting(small, sampler)
    rolled = rolled_runs[sampler]
    monkeypatch.setattr(S, name, unroll)
    jax.clear_caches()  # the unrolling is read when tracing: trace again
    try:
        unrolled = S.train(jax.random.key(64), k0, v0, ks, vs, **kw)
    finally:
        jax.clear_caches()
    for f in ("kappa", "nu", "theta", "eta", "rho", "excess_risk", "k", "v"):
        np.testing.assert_allclose(getattr(unrolled, f), getattr(rolled, f), rtol=0, atol=1e-10, err_msg=f)
    assert np.max(np.abs(rolled.kappa[:, -1] - rolled.kappa[:, 0])) > 1e-2  # the runs moved


@pytest.mark.parametrize("per_run", [True, False])
def test_two_halves_are_the_one_program(small, monkeypatch, per_run):
    """From ``HALVES_MIN`` runs x steps, train runs the two halves of an even number of runs on two
    threads (one per core): the numbers of the one program, bit for bit with an oracle per run (Figure 9,
    Question 3); with one oracle shared by the runs (Figure 5) the test losses to round-off (measured
    2.7e-15 on Figure 5's 30 runs; 0 in this small setting), every iterate bit for bit. Control: the
    halves joined in the wrong order differ (measured: by 0.86 in kappa with an oracle per run, 1.26
    with the shared one), so the check sees a misplaced half."""
    k0, v0 = P.init_sphere(jax.random.key(70), 8, 4, H=2)
    if per_run:
        ks, vs = jax.vmap(lambda k: task.sample_oracle_multi(k, 8, 2))(jax.random.split(jax.random.key(71), 4))
    else:
        ks, vs = small["ks2"], small["vs2"]
    kw = dict(KW, sampler="reduced")
    one = S.train(jax.random.key(72), k0, v0, ks, vs, **kw)
    calls = []
    monkeypatch.setattr(S, "HALVES_MIN", 1)
    monkeypatch.setattr(S, "pool_map", lambda fn, items: calls.append(len(items)) or [fn(x) for x in items])
    two = S.train(jax.random.key(72), k0, v0, ks, vs, **kw)
    assert calls == [2]
    for f in ("kappa", "nu", "theta", "eta", "rho", "k", "v", "lam"):
        np.testing.assert_array_equal(getattr(two, f), getattr(one, f), err_msg=f)
    np.testing.assert_allclose(two.excess_risk, one.excess_risk, rtol=0, atol=0 if per_run else 1e-13)
    swapped = np.concatenate([two.kappa[2:], two.kappa[:2]])
    assert np.max(np.abs(swapped - one.kappa)) > 1e-2
