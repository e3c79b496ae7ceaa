"""Appendix F's comparison: the attention predictor of Eq. (3) against the diagonal MLP, both tuned,
several seeds (the appendix on related models), and the tuned risks of erf, linear and softmax
attention at the oracle as the sequence grows.

- :func:`best_lambda`: the constant lam minimising the oracle risk (Theorem 1), by :func:`slr.tuning.erf_best`.
- :class:`DiagMLPConfig`, :func:`diag_mlp_comparison`: the step size of each model chosen on a tuning
  seed from a grid, then both trained on the same fresh batches for ``seeds`` evaluation seeds (and the
  tied MLP of exercise ``related_ex3`` on the first one); every run a task on both cores.
"""
from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import optax

from slr import _loop, baselines, pgd, sgd, task, tuning
from slr import risk as R
from slr._validate import check_int, check_nonneg, check_positive
from slr.overlaps import overlaps
from slr.predictors import attention_erf

__all__ = ["best_lambda", "DiagMLPConfig", "diag_mlp_comparison"]


def best_lambda(*, gamma, d, L, eps=0.0):
    """(lam*, R(lam*)): the constant inverse temperature minimising the oracle risk of Theorem 1 and
    that risk, eps^2 + the excess risk of :func:`slr.tuning.erf_best` (the one minimiser)."""
    lam, excess = tuning.erf_best(gamma=gamma, d=d, L=L)
    return lam, excess + check_nonneg("eps", eps) ** 2


@dataclass(frozen=True)
class DiagMLPConfig:
    """Attention (projected SGD on the spheres at lam = :func:`best_lambda`, :func:`slr.sgd.train`)
    against the diagonal MLP of Appendix F (Adam, :func:`slr.baselines.train_diag_mlp`), on the same
    fresh batches, at each L of ``Ls``. Each model's step size is the best of its grid on a tuning
    seed (``tune_seed``), then ``seeds`` evaluation seeds are run with it. At each L of ``tied_Ls`` (a
    subset of ``Ls``) the tied MLP (Deep Sets, exercise ``related_ex3``) is also trained on the first
    evaluation seed's samples with the diagonal MLP's tuned step."""
    d: int = 32
    gamma: float = math.sqrt(0.5)
    eps: float = 0.1
    Ls: tuple = (5, 20)
    steps: int = 1500
    batch: int = 128
    width: int = 16
    lrs_attention: tuple = (0.01, 0.03, 0.1)
    lrs_mlp: tuple = (3e-3, 1e-2, 3e-2)
    seeds: int = 4
    tune_seed: int = 1000
    n_test: int = 4000
    n_eval: int = 15
    tied_Ls: tuple = (20,)

    def validate(self) -> "DiagMLPConfig":
        for name in ("d", "steps", "batch", "width", "seeds", "n_test", "n_eval"):
            check_int(name, getattr(self, name))
        check_int("tune_seed", self.tune_seed, lo=0)
        for x in self.Ls:
            check_int("Ls", x)
        for x in self.tied_Ls:
            if x not in self.Ls:
                raise ValueError(f"tied_Ls must be a subset of Ls {self.Ls!r}, got {self.tied_Ls!r}")
        for x in self.lrs_attention + self.lrs_mlp:
            check_positive("lrs", x)
        check_positive("gamma", self.gamma)
        check_nonneg("eps", self.eps)
        return self


@partial(jax.jit, static_argnames=("n_chunks", "log_every", "batch", "n_test", "L", "has_rem"))
def _joint(key_test, stream, k0, v0, params, ks, vs, lam, alphas, lrs, gamma, eps, rem, *, n_chunks, log_every,
           batch, n_test, L, has_rem):
    """One training stream (:func:`slr.sgd.batch_keys`) read by several models at once: attention (Eq. 3,
    projected SGD as :func:`slr.sgd.train`) at each step size of ``alphas`` (A,) and the diagonal MLP
    (Adam as :func:`slr.baselines.train_diag_mlp`) at each of ``lrs`` (M,). Each step's fresh batch is
    drawn once for all of them (the same numbers each would draw alone). Returns the test mean squared
    errors at the logs, (T, A) and (T, M), and the attention iterates there, (T, A, d) twice. ``log_every``
    is static: the step is compiled once (a traced chunk length adds a second copy for its remainder)."""
    d = ks.shape[-1]
    Xt, yt, _ = task.assemble(task.draws(key_test, n_test, L=L, d=d), ks[None], vs[None], gamma=gamma, eps=eps)
    att_loss = lambda k, v, X, y: jnp.mean(jnp.square(y - attention_erf(X, k, v, lam)))
    mlp_loss = lambda p, X, y: jnp.mean(jnp.square(y - baselines.diag_mlp(p, X)))

    def att_step(k, v, X, y, a):
        return pgd.projected_step(k, v, *jax.grad(att_loss, argnums=(0, 1))(k, v, X, y), a)

    def mlp_step(p, st, X, y, lr):
        upd, st = optax.adam(lr).update(jax.grad(mlp_loss)(p, X, y), st, p)
        return optax.apply_updates(p, upd), st

    def body(carry, t):
        (k, v), (p, st) = carry
        X, y, _ = task.assemble(sgd.fresh_draws(stream, t, batch=batch, L=L, d=d), ks[None], vs[None],
                                gamma=gamma, eps=eps)
        return (jax.vmap(att_step, (0, 0, None, None, 0))(k, v, X, y, alphas),
                jax.vmap(mlp_step, (0, 0, None, None, 0))(p, st, X, y, lrs))

    def log(carry):
        (k, v), (p, _) = carry
        return (jax.vmap(att_loss, (0, 0, None, None))(k, v, Xt, yt),
                jax.vmap(mlp_loss, (0, None, None))(p, Xt, yt), k, v)

    many = lambda x, n: jnp.broadcast_to(x, (n,) + x.shape)
    p0 = jax.tree_util.tree_map(lambda x: many(x, lrs.shape[0]), params)
    carry = ((many(k0, alphas.shape[0]), many(v0, alphas.shape[0])),
             (p0, jax.vmap(lambda p, lr: optax.adam(lr).init(p))(p0, lrs)))
    return _loop.run_chunks(body, carry, log, n_chunks, log_every, rem if has_rem else None, 1)


def _pair(cfg, L, seed, alphas, lrs, lam):
    """One seed at one L: attention at each step size of ``alphas`` and the MLP at each of ``lrs``, all
    on the same fresh batches and test batch: ``(att_mse (T, A), mlp_mse (T, M), final overlaps
    (kappa, nu, theta, eta, rho) each (A,), n_params)``."""
    k_oracle, k_init, k_mlp, k_train = jax.random.split(jax.random.key(seed * 1000 + L), 4)
    k_star, v_star = task.sample_oracle(k_oracle, cfg.d)
    k0, v0 = (x[0, 0] for x in pgd.init_sphere(k_init, cfg.d, 1, H=1))
    params = baselines.diag_mlp_init(k_mlp, L=L, d=cfg.d, width=cfg.width)
    key_test, streams = sgd.batch_keys(k_train, 1)
    n_chunks, rem = _loop.schedule(cfg.steps, cfg.steps // cfg.n_eval)
    att, mlp, K, V = _joint(key_test, streams[0], k0, v0, params, k_star, v_star, float(lam),
                            jnp.asarray(alphas, float), jnp.asarray(lrs, float), float(cfg.gamma),
                            float(cfg.eps), int(rem or 0), n_chunks=n_chunks, log_every=cfg.steps // cfg.n_eval,
                            batch=cfg.batch, n_test=cfg.n_test, L=int(L), has_rem=rem is not None)
    return np.asarray(att), np.asarray(mlp), overlaps(K[-1], V[-1], k_star, v_star), baselines.n_params(params)


def _tune_runs(cfg, L, lam):
    """The tuning runs of :func:`_tune` at one L, one per pair of the grids: ``[(L, seed, alphas, lrs,
    lam)]``, the arguments of :func:`_pair` (each run on its own: the program of the evaluation seeds)."""
    A, M = len(cfg.lrs_attention), len(cfg.lrs_mlp)
    return [(L, cfg.tune_seed, (cfg.lrs_attention[min(i, A - 1)],), (cfg.lrs_mlp[min(i, M - 1)],), lam)
            for i in range(max(A, M))]


def _pick(cfg, runs):
    """(lr_att, lr_mlp): each model's step size of the smallest final test error over the runs of
    :func:`_tune_runs`."""
    eps2, A, M = cfg.eps ** 2, len(cfg.lrs_attention), len(cfg.lrs_mlp)
    return (cfg.lrs_attention[int(np.argmin([a[-1, 0] - eps2 for a, _, _, _ in runs[:A]]))],
            cfg.lrs_mlp[int(np.argmin([m[-1, 0] - eps2 for _, m, _, _ in runs[:M]]))])


def _tune(cfg, L, lam):
    """The step sizes of :func:`diag_mlp_comparison` at one L: the grids' pairs (``lrs_attention[i]``,
    ``lrs_mlp[i]``, the shorter grid padded with its last value) trained on the tuning seed one pair per
    run, with the program of the evaluation seeds (one model of each kind: one compilation per L, not
    two), then each model's best final test error. Returns (lr_att, lr_mlp)."""
    return _pick(cfg, [_pair(cfg, *args) for args in _tune_runs(cfg, L, lam)])


def _evaluate(cfg, L, seed, lrs, lam):
    """One evaluation run of :func:`_pair` at the tuned step sizes ``lrs``, with the closed-form risk of
    its learnt (k, v) (Prop. 15)."""
    att, mlp, o, n = _pair(cfg, L, seed, (lrs[0],), (lrs[1],), lam)
    exact = float(R.closed_form(*(x[0] for x in o), lam, cfg.gamma, float(cfg.d), float(L), cfg.eps))
    return att, mlp, o, n, exact


def _tied(cfg, L, seed, lr):
    """The tied MLP (:func:`slr.baselines.tied_mlp`) trained on the samples of the evaluation seed ``seed``
    at L (its keys, oracle and batches, :func:`_pair`) with Adam at step ``lr``: (test mean squared
    errors at the logs, number of parameters)."""
    k_oracle, _, k_mlp, k_train = jax.random.split(jax.random.key(seed * 1000 + L), 4)
    ks, vs = task.sample_oracle(k_oracle, cfg.d)
    run = baselines.train_diag_mlp(k_train, k_mlp, ks, vs, L=L, gamma=cfg.gamma, eps=cfg.eps, width=cfg.width,
                                   lr=lr, steps=cfg.steps, batch=cfg.batch, n_test=cfg.n_test,
                                   log_every=cfg.steps // cfg.n_eval, tied=True)
    return run["excess_risk"] + cfg.eps ** 2, run["n_params"]


def _collect(cfg, L, lam, oracle, lrs, runs):
    """The outputs of :func:`diag_mlp_comparison` at one L from its evaluation runs (:func:`_evaluate`)."""
    out = {"att_mse": [a[:, 0] for a, _, _, _, _ in runs], "mlp_mse": [m[:, 0] for _, m, _, _, _ in runs],
           "att_exact": [e for _, _, _, _, e in runs]}
    for i, f in enumerate(("kappa", "nu", "theta", "eta")):
        out[f] = [float(o[i][0]) for _, _, o, _, _ in runs]
    return {**out, "n_mlp": runs[0][3], "lr_att": lrs[0], "lr_mlp": lrs[1], "lam": lam, "oracle": oracle,
            "linear": R.linear_risk(gamma=cfg.gamma, L=L, eps=cfg.eps)}


def diag_mlp_comparison(cfg: DiagMLPConfig, seed: int) -> dict:
    """For each L (axis 0): the tuned step sizes ``lr_att``, ``lr_mlp``; over the evaluation seeds
    (seed, ..., seed + seeds - 1; axis 1) the test mean squared errors ``att_mse``, ``mlp_mse`` at the
    logged ``step`` (axis 2), the closed-form risk of the learnt (k, v) ``att_exact``, its ``kappa``,
    ``nu``, ``theta``, ``eta``; per L the ``lam`` used, the ``oracle`` and best ``linear`` risks, ``n_mlp`` parameters.
    For each L of ``cfg.tied_Ls`` (axis 0): the tied MLP's test mean squared errors ``tied_mse`` at the logged
    steps on the first evaluation seed (seed) with ``lr_mlp``, and its ``tied_n`` parameters.

    Every run is a task on two threads (both cores), the longest first so that the two threads end
    together: each L's first tuning run (its compilation; the longest L first), the other tuning runs,
    the tied MLP's runs, then the evaluation runs from the longest L. A task that needs a tuning waits
    for it (every tuning run was submitted before it)."""
    best = {L: best_lambda(gamma=cfg.gamma, d=cfg.d, L=L, eps=cfg.eps) for L in cfg.Ls}
    Ls = sorted(cfg.Ls, reverse=True)
    with ThreadPoolExecutor(max_workers=2) as pool:
        args = {L: _tune_runs(cfg, L, best[L][0]) for L in cfg.Ls}
        tune = {L: [pool.submit(_pair, cfg, *args[L][0])] for L in Ls}
        for L in Ls:
            tune[L] += [pool.submit(_pair, cfg, *a) for a in args[L][1:]]
        tuned = lambda L: _pick(cfg, [f.result() for f in tune[L]])
        tied = [pool.submit(lambda L: _tied(cfg, L, seed, tuned(L)[1]), L) for L in cfg.tied_Ls]
        jobs = {L: [pool.submit(lambda L, s: _evaluate(cfg, L, seed + s, tuned(L), best[L][0]), L, s)
                    for s in range(cfg.seeds)] for L in Ls}
        per_L = [_collect(cfg, L, *best[L], tuned(L), [r.result() for r in jobs[L]]) for L in cfg.Ls]
        tied = [t.result() for t in tied]
    out = {k: [r[k] for r in per_L] for k in per_L[0]}
    out["step"] = _loop.log_steps(cfg.steps, cfg.steps // cfg.n_eval)
    out = {k: np.asarray(v, dtype=float) for k, v in out.items()}
    T = out["step"].size
    out["tied_mse"] = np.asarray([m for m, _ in tied], dtype=float).reshape(len(tied), T)
    out["tied_n"] = np.asarray([n for _, n in tied], dtype=float)
    return out
