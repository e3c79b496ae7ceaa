"""slr.experiments: the paper's figures as frozen configs, run by name with overrides."""
import dataclasses
import math
import types

import numpy as np
import pytest

from slr import cache
from slr import experiments as E


def test_configs_match_the_paper():
    c = E.CONFIGS
    assert {"fig4a", "fig4b", "fig5", "fig7a", "fig7b"} <= set(c)
    for cfg in (c[n] for n in ("fig4a", "fig4b", "fig5", "fig7a", "fig7b")):
        assert cfg.L == 10 and cfg.gamma == math.sqrt(0.5) and cfg.repeats == 30
    assert (c["fig4a"].init, c["fig4a"].d, c["fig4a"].lam0, c["fig4a"].lam_decay, c["fig4a"].alpha,
            c["fig4a"].steps) == ("sphere", 400, 1.0, 1e-4, 4e-3, 120_000)
    assert (c["fig4b"].init, c["fig4b"].lam0, c["fig4b"].lam_decay, c["fig4b"].steps) == ("manifold", 0.1, 0.0, 20_000)
    assert (c["fig5"].d, c["fig5"].lam0, c["fig5"].alpha, c["fig5"].steps, c["fig5"].batch, c["fig5"].eps) == \
        (80, 2.0, 1e-3, 200_000, 5, 0.1)
    assert (c["fig7a"].lam0, c["fig7a"].lam_decay, c["fig7a"].alpha, c["fig7a"].steps) == (0.9, 0.0, 1e-3, 120_000)
    assert (c["fig7b"].lam0, c["fig7b"].alpha, c["fig7b"].steps) == (0.1, 4e-3, 20_000)
    with pytest.raises(dataclasses.FrozenInstanceError):
        c["fig4a"].steps = 3
    assert c["fig4a"].lam()(10_000.0) == pytest.approx(0.5)


def test_run_small_override(tmp_path, monkeypatch):
    monkeypatch.setenv("SLR_CACHE_DIR", str(tmp_path))
    # 3 runs and 5 logs: the compiled program of exact PGD that test_run_many_gives_the_runs_one_at_a_time
    # and test_seed_offset_shifts_every_seed reuse (the chunk length is traced; the numbers of logs and of
    # runs are not)
    tr = E.run("fig7b", steps=400, repeats=3, log_every=100)
    assert tr.kappa.shape == (3, 5) and tr.step[-1] == 400
    assert np.all(np.isfinite(tr.excess_risk))
    assert np.all(tr.excess_risk[:, -1] < tr.excess_risk[:, 0])
    tr4b = E.run("fig4b", steps=400, repeats=3, log_every=100)
    assert np.max(tr4b.dist_manifold) < 1e-14


def test_run_many_gives_the_runs_one_at_a_time(result_cache):
    reqs = [("fig7b", dict(steps=40, repeats=3, log_every=10)),
            ("fig4b", dict(steps=40, repeats=3, log_every=10))]
    many = E.run_many(*reqs)
    with cache.bypass():
        one = [E.run(name, **over) for name, over in reqs]
    assert all(np.array_equal(a.kappa, b.kappa) and np.array_equal(a.excess_risk, b.excess_risk)
               for a, b in zip(many, one))
    with pytest.raises(ValueError, match="unknown override"):
        E.run_many(("fig7b", dict(nope=1)))


def test_run_sgd_override(tmp_path, monkeypatch):
    monkeypatch.setenv("SLR_CACHE_DIR", str(tmp_path))
    tr = E.run("fig5", steps=200, repeats=2, log_every=100, n_test=50)
    assert tr.excess_risk_closed is not None and tr.excess_risk.shape == (2, 3)


@pytest.mark.parametrize("name,over,match", [
    ("fig99", {}, "name must be one of"),
    ("fig4a", {"stepz": 3}, "unknown override"),
    ("fig4a", {"steps": 0}, "steps"),
    ("fig4a", {"alpha": -1.0}, "alpha"),
    ("fig4a", {"lam0": 0.0}, "lam0"),
    ("fig4a", {"eps": -0.1}, "eps"),
    ("fig4a", {"init": "cube"}, "init"),
    ("fig4a", {"d": 0}, "d must be"),
    ("fig4a", {"L": 0}, "L must be"),
    ("fig4a", {"repeats": 0}, "repeats"),
    ("fig5", {"dtype": "float32"}, "dtype"),
])
def test_run_validation(name, over, match):
    with pytest.raises(ValueError, match=match):
        E.run(name, **over)


def test_run_timed_stores_the_seconds_of_the_computation(result_cache):
    kw = dict(steps=400, repeats=3, log_every=10)  # test_run_small_override's program (compiled once)
    first, t1 = E.run_timed("fig7b", **kw)
    second, t2 = E.run_timed("fig7b", **kw)          # read back: the stored seconds, not the read time
    assert t1 == t2 and t1 > 0
    assert np.array_equal(first.kappa, second.kappa)
    assert np.array_equal(first.kappa, E.run("fig7b", **kw).kappa)   # the same result as run()


# --- beyond_open_questions and related (helper "open") ---
def test_open_configs_are_the_stated_settings():
    a = E.config("open-angle")  # Figure 9's settings; the chapter's angles and runs
    assert (a.d, a.L, a.gamma ** 2, a.eps, a.batch, a.steps, a.alpha, a.lam0, a.lam_decay, a.lam_freeze) == \
        (80, 10, pytest.approx(0.5), 0.1, 5, 100_000, 1e-3, 2.0, 2e-4, 25_000)
    assert (a.phis_deg, a.repeats, a.sampler) == ((90.0, 60.0, 45.0, 30.0), 48, "coordinates")
    t, d = E.config("open-temperature"), E.config("open-dimension")
    assert t.horizon >= 480 and t.d == 400 and d.ell / math.sqrt(400) == pytest.approx(0.1)  # Figure 7(b)'s lam
    assert d.alpha_d / 400 == pytest.approx(4e-3)


@pytest.mark.parametrize("name,over,match", [
    ("open-angle", {"which": "w"}, "which"),
    ("open-angle", {"phis_deg": (0.0,)}, "phis_deg"),
    ("open-angle", {"sampler": "fast"}, "sampler"),
    ("open-temperature", {"lam0s": (0.0,)}, "lam0s"),
    ("open-dimension", {"ds": (2,)}, "ds"),
    ("related-diag-mlp", {"seeds": 0}, "seeds"),
])
def test_open_validation(name, over, match):
    with pytest.raises(ValueError, match=match):
        E.config(name, **over)


def test_seed_offset_shifts_every_seed(tmp_path, monkeypatch):
    """SLR_SEED=k adds k to the seed of every run (benchmarks/audit_seeds.py): run(name, seed=s) under it is
    run(name, seed=s + k) without it; control: without it, seed 0 and seed 3 differ. A value that is not
    an integer >= 0 raises ValueError naming SLR_SEED."""
    monkeypatch.setenv("SLR_CACHE_DIR", str(tmp_path))
    kw = dict(steps=40, repeats=3, log_every=10)
    base, s3, s4 = (E.run("fig7b", seed=s, **kw).kappa for s in (0, 3, 4))
    assert not np.array_equal(base, s3) and not np.array_equal(s3, s4)
    monkeypatch.setenv("SLR_SEED", "3")
    assert E.seed_offset() == 3 and np.array_equal(E.run("fig7b", **kw).kappa, s3)
    assert np.array_equal(E.run("fig7b", seed=1, **kw).kappa, s4)
    for bad in ("-1", "x", "1.5"):
        monkeypatch.setenv("SLR_SEED", bad)
        with pytest.raises(ValueError, match="SLR_SEED"):
            E.run("fig7b", **kw)


def test_audit_keys_cell_shifts_every_integer_seed(monkeypatch):
    """benchmarks/audit_seeds.py --keys: its first cell makes jax.random.key(s) and PRNGKey(s) the keys of
    s + SLR_SEED (also under jit, with a traced seed); control: other seeds give other keys. The patched
    functions are restored after the test."""
    import importlib.util

    import jax
    from pathlib import Path
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "audit_seeds.py"
    spec = importlib.util.spec_from_file_location("audit_seeds", path)
    audit = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(audit)
    key, prng = jax.random.key, jax.random.PRNGKey
    data = lambda k: np.asarray(jax.random.key_data(k))
    monkeypatch.setattr(jax.random, "key", key)     # restored at teardown
    monkeypatch.setattr(jax.random, "PRNGKey", prng)
    monkeypatch.setenv("SLR_SEED", "7")
    exec(audit.SHIFT_KEYS, {})
    assert np.array_equal(data(jax.random.key(3)), data(key(10)))
    assert np.array_equal(np.asarray(jax.random.PRNGKey(3)), np.asarray(prng(10)))
    assert np.array_equal(data(jax.jit(jax.random.key)(3)), data(key(10)))
    assert not np.array_equal(data(jax.random.key(3)), data(key(3)))   # control


def test_open_small_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("SLR_CACHE_DIR", str(tmp_path))
    tm = E.run("open-temperature", lam0s=(0.1, 3.0), decays=(0.0,), horizon=2.0, repeats=2, n_logs=4)
    assert tm["kappa"].shape == (1, 2, 2, 5) and tm["lam"].shape == (1, 2, 5)
    assert tm["time"][-1] == pytest.approx(2.0)
    # 4 starts per d, as the temperature map's 1 x 2 cells of 2: the same compiled program of exact PGD
    dm = E.run("open-dimension", ds=(100, 400), horizon=1.0, repeats=4, n_logs=4)
    assert dm["kappa"].shape == (2, 4, 5) and np.all(np.isfinite(dm["excess_risk"]))
    mh = E.run("open-angle", steps=20, repeats=1, log_every=10, lam_freeze=10, n_test=20, d=12)
    assert mh["kappa"].shape == (4, 3, 2, 2) and list(mh["phi_deg"]) == [90.0, 60.0, 45.0, 30.0]


# --- Appendix E.3 (the transformer chapter) ---------------------------------------------------------

def test_fig9_is_the_authors_setting():
    """Figure 9 as in the authors' notebook toy-multihead.ipynb (commit 14e2b06)."""
    c = E.config("fig9")
    assert (c.H, c.n_locations, c.d, c.L, c.gamma ** 2, c.eps) == (2, 2, 80, 10, pytest.approx(0.5), 0.1)
    assert (c.batch, c.steps, c.alpha, c.repeats, c.sampler, c.shared_draws) == (5, 100_000, 1e-3, 20, "coordinates", False)
    # lambda_t = 2 / (1 + 2e-4 t) up to t = 25 000, then 2 / 6 = 1/3
    assert (c.lam0, c.lam_decay, c.lam_freeze) == (2.0, 2e-4, 25_000)
    with pytest.raises(ValueError, match="token_noise"):
        E.config("fig9", token_noise="tied")


@pytest.mark.parametrize("token_noise", ["independent", "shared"])
def test_run_fig9_small_override(tmp_path, monkeypatch, token_noise):
    monkeypatch.setenv("SLR_CACHE_DIR", str(tmp_path))
    log = E.run("fig9", d=12, steps=300, repeats=2, log_every=100, n_test=64, token_noise=token_noise)
    assert log.kappa.shape == (2, 4, 2, 2) and log.k.shape == (2, 2, 12)
    assert np.all(np.isfinite(log.excess_risk))


def oracle_quad(lam, *, gamma, d, L, eps):
    """Theorem 1 by quadrature (numpy/scipy, no slr): eps^2 + gamma^2 E[(1 - erf(lam sqrt(d/2)
    + lam gamma Z))^2] + (L - 1) (2/pi) arcsin(2 lam^2 / (1 + 2 lam^2))."""
    from scipy import integrate, special
    a, b = lam * math.sqrt(d / 2), lam * gamma
    f = lambda z: special.erfc(a + b * z) ** 2 * math.exp(-z * z / 2) / math.sqrt(2 * math.pi)
    signal = integrate.quad(f, -40, 40, points=[-a / b], epsabs=1e-15, epsrel=1e-12, limit=200)[0]
    return eps ** 2 + gamma ** 2 * signal + (L - 1) * 2 / math.pi * math.asin(2 * lam ** 2 / (1 + 2 * lam ** 2))


def test_fig3_is_corollary_2s_scaling(result_cache):
    """Figure 3: L from 3 to 1000, d = L^4, lam = d^(-3/8), gamma^2 = 1/2, eps = 0.1; the curves are
    Theorem 1 (checked by quadrature) and Proposition 3 (its uniform closed form)."""
    cfg = E.CONFIGS["fig3"]
    assert (cfg.L_min, cfg.L_max, cfg.d_power, cfg.lam_power, cfg.gamma ** 2, cfg.eps) == \
        (3, 1000, 4.0, 0.375, pytest.approx(0.5), 0.1)
    out = E.run("fig3")
    L, d, lam = out["L"], out["d"], out["lam"]
    assert L.dtype.kind == "i" and L[0] == 3 and L[-1] == 1000 and np.all(np.diff(L) > 0)
    assert len(L) == len(np.unique(np.round(np.geomspace(3, 1000, 60))))
    assert np.array_equal(d, L.astype(float) ** 4) and np.allclose(lam, d ** -0.375, rtol=1e-15)
    for i in (0, len(L) // 2, -1):
        assert out["oracle"][i] == pytest.approx(oracle_quad(lam[i], gamma=cfg.gamma, d=d[i], L=L[i],
                                                             eps=0.1), rel=1e-9)
        assert out["linear"][i] == pytest.approx(0.01 + 0.5 * (L[i] - 1) / (L[i] - 0.5), rel=1e-14)  # Prop. 3
    assert out["null"] == pytest.approx(0.51)
    # the figure's message: the oracle falls towards eps^2 while the linear risk climbs towards the null
    assert np.all(np.diff(out["oracle"]) < 0) and np.all(np.diff(out["linear"]) > 0)
    assert np.all(out["oracle"] < out["linear"])


@pytest.mark.parametrize("over,match", [({"L_min": 0}, "L_min"), ({"L_max": 2}, "L_max"),
                                        ({"points": 1}, "points"), ({"lam_power": 0.0}, "lam_power"),
                                        ({"eps": -1.0}, "eps"), ({"max_iter": 3}, "unknown override")])
def test_fig3_validation(over, match):
    with pytest.raises(ValueError, match=match):
        E.config("fig3", **over)


def test_fig1b_runs_the_probe_keyed_by_the_encoder_weights(result_cache, monkeypatch):
    """fig1b calls slr.probe.cached_probe_accuracies on the five sentence sets with the config's fields,
    and its cache key holds the encoder's fingerprint: new weights recompute, the same ones do not."""
    from slr import probe
    # a namespace, not a list: the key encodes the data the compute function reads (a growing list
    # would change it), and a namespace is not encoded as data
    seen, weights = types.SimpleNamespace(calls=[]), ["w1"]
    calls = seen.calls

    def fake(sets, encoder, **kw):
        seen.calls.append((list(sets), encoder, kw))
        return {"accuracy": np.full((7, 5), 0.5)}

    monkeypatch.setattr(probe, "cached_probe_accuracies", fake)
    monkeypatch.setattr(probe, "encoder_fingerprint", lambda encoder: f"{encoder}:{weights[0]}")
    cfg = E.config("fig1b")
    assert (cfg.encoder, cfg.C, cfg.max_iter, cfg.batch_size) == (probe.DEFAULT_ENCODER, 1.0, 2000, 256)
    assert E.run("fig1b", C=0.5)["accuracy"].shape == (7, 5)
    assert calls == [(list(probe.SET_NAMES), probe.DEFAULT_ENCODER,
                      {"C": 0.5, "max_iter": 2000, "batch_size": 256})]
    E.run("fig1b", C=0.5)
    assert len(calls) == 1                       # the stored result
    weights[0] = "w2"
    E.run("fig1b", C=0.5)
    assert len(calls) == 2                       # other weights: computed again
    for over, match in (({"C": 0.0}, "C"), ({"max_iter": 0}, "max_iter"), ({"encoder": ""}, "encoder")):
        with pytest.raises(ValueError, match=match):
            E.config("fig1b", **over)
