"""Appendix F's comparison: the attention predictor of Eq. (3) against the diagonal MLP, both tuned,
several seeds (the appendix on related models), and the tuned risks of erf, linear and softmax
attention at the oracle as the sequence grows.

- :func:`best_lambda`: the constant lam minimising the oracle risk (Theorem 1), by :func:`slr.tuning.erf_best`.
- :class:`DiagMLPConfig`, :func:`diag_mlp_comparison`: the step size of each model chosen on tuning
  seeds from a grid, then both trained on the same fresh batches for ``seeds`` evaluation seeds (and the
  tied MLP of exercise ``related_ex3`` on the first one); the runs made a chunk at a time, one compiled
  call per chunk that runs them in turn (``jax.lax.map``), every chunk a task on one of the two cores.

**Precision.** The Gaussian draws of the training batches are made in float32 (JAX's inverse-CDF
normals, :data:`DRAWS`) and used in float64, like every other operation: at L = 20 the float64 draws
were 0.66 s of a run's 1.05 s on the book's 2-core CPU, the float32 ones 0.27 s. The law changes only by
the float32 resolution of the draws, as in :mod:`slr.coordinates` ("Precision"): each is one of 2^23
values, all in [-5.42, 5.22] (:func:`slr.coordinates.draw_range`; a Gaussian puts 1.2e-7 of its mass
outside). The test batches stay float64. Attention alone, trained so at a constant step
(``anneal = 1``), is :func:`slr.sgd.train` with ``draws="float32"`` (``tests/test_appendix_f.py`` checks
the numbers are the same).
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

from slr import baselines, landscape, loop, pgd, sgd, task, tuning
from slr import risk as R
from slr._validate import check_int, check_interval, check_nonneg, check_open_interval, check_positive
from slr.overlaps import overlaps
from slr.predictors import attention_erf

__all__ = ["best_lambda", "DiagMLPConfig", "diag_mlp_comparison", "DRAWS", "call_runs", "tune_runs",
           "pick_step_sizes", "chunk_runs"]

DRAWS = jnp.float32  # the dtype of the training batches' Gaussian draws (module docstring, "Precision")


def best_lambda(*, gamma, d, L, eps=0.0):
    """(lam*, R(lam*)): the constant inverse temperature minimising the oracle risk of Theorem 1 and
    that risk, eps^2 + the excess risk of :func:`slr.tuning.erf_best` (the one minimiser)."""
    lam, excess = tuning.erf_best(gamma=gamma, d=d, L=L)
    return lam, excess + check_nonneg("eps", eps) ** 2


@dataclass(frozen=True)
class DiagMLPConfig:
    """Attention (projected SGD on the spheres at lam = :func:`best_lambda`, the step of
    :func:`slr.sgd.train`) against the diagonal MLP of Appendix F (Adam, as
    :func:`slr.baselines.train_diag_mlp`), on the same fresh batches, at each L of ``Ls``. The pairs of the
    grids (``lrs_attention[i]``, ``lrs_mlp[i]``, the shorter grid padded with its last value) are trained on
    ``tune_seeds`` tuning seeds (``seed + tune_seed``, ``seed + tune_seed + 1``, ...: :func:`tune_runs`);
    each model's step size is the one of the smallest mean final test error over them. Then ``seeds``
    evaluation seeds are run with it. The runs are made ``chunk`` at a time, one compiled call per chunk
    (a task on one of the two threads).
    At each L of ``tied_Ls`` (a subset of ``Ls``) the tied MLP (Deep Sets, exercise ``related_ex3``) is
    also trained on the first evaluation seed's samples with the diagonal MLP's tuned step.

    Attention's step is cut from ``alpha`` to ``anneal * alpha`` at the first step ``t >= anneal_at``
    (``anneal_from`` of the ``steps``) at which the run is at one of its two points, the oracle or the
    role-swapped one (the rule of :func:`slr.landscape.classify` with tolerance ``cut_tol``, read at every
    step by :func:`slr.landscape.point_masks`), and stays cut; a run at neither keeps ``alpha``. At a
    constant step the iterate hovers around the point it reaches (each step adds the step size times a
    mini-batch gradient, whose noise does not vanish there), and the appendix on related models asks where
    it ends. The rule reads the oracle's ``k*``, ``v*``: it is a way to measure where a run settles, not a
    schedule a learner without the oracle could follow. With ``cut_at_point=False`` every run is cut at
    ``anneal_at``, wherever it is (a run still on its way to a point then moves ``anneal`` times as far a
    step). ``anneal = 1`` keeps the step constant. The MLP's Adam step is constant."""
    d: int = 32
    gamma: float = math.sqrt(0.5)
    eps: float = 0.1
    Ls: tuple = (5, 20)
    steps: int = 1500
    batch: int = 128
    width: int = 16
    lrs_attention: tuple = (0.003, 0.01, 0.03, 0.1)
    lrs_mlp: tuple = (1e-3, 3e-3, 1e-2, 3e-2)
    seeds: int = 16
    tune_seed: int = 1000
    tune_seeds: int = 2
    chunk: int = 4
    n_test: int = 4000
    n_eval: int = 15
    tied_Ls: tuple = (20,)
    anneal: float = 0.1
    anneal_from: float = 2 / 3
    cut_at_point: bool = True
    cut_tol: float = 0.2

    def validate(self) -> "DiagMLPConfig":
        for name in ("d", "steps", "batch", "width", "seeds", "tune_seeds", "chunk", "n_test", "n_eval"):
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
        check_interval("anneal", self.anneal, 0.0, 1.0)
        check_positive("anneal", self.anneal)
        check_interval("anneal_from", self.anneal_from, 0.0, 1.0)
        check_open_interval("cut_tol", self.cut_tol, 0.0, 0.5)   # slr.landscape.classify's tol
        if not isinstance(self.cut_at_point, bool):
            raise ValueError(f"cut_at_point must be True or False, got {self.cut_at_point!r}")
        return self

    @property
    def anneal_at(self) -> int:
        """The first step (0-based) at which attention's step may be cut to ``anneal * alpha``."""
        return int(round(self.anneal_from * self.steps))


@partial(jax.jit, static_argnames=("n_chunks", "log_every", "batch", "n_test", "L", "has_rem"))
def _runs(key_test, stream, k0, v0, params, ks, vs, alpha, lr, lam, gamma, eps, rem, anneal, anneal_at, theta_star,
          cut_tol, cut_all, *, n_chunks, log_every, batch, n_test, L, has_rem):
    """Runs (axis 0 of every array argument, N), each reading its own training stream and test batch
    (:func:`slr.sgd.batch_keys`): attention (Eq. 3, the projected step of Definition 1 on the mini-batch
    loss, as :func:`slr.sgd.train`) at step ``alpha``, then ``anneal * alpha`` from the first step
    ``t >= anneal_at`` (0-based) at which its overlaps with ``ks``, ``vs`` are at the oracle point or at the
    role-swapped point of ``theta_star`` (:func:`slr.landscape.point_masks`, tolerance ``cut_tol``; with
    ``cut_all`` from step ``anneal_at`` wherever it is), and the diagonal MLP (Adam) at step ``lr``, both on
    the same fresh batch at every step (drawn once, in float32: module docstring, "Precision"). Returns
    the test mean squared errors at the logs, (N, T) twice, the attention iterates there, (N, T, d)
    twice, and the step at which each run's step was cut as seen at each log, (N, T) (the number of steps
    of the budget while it is not). ``log_every`` is static: the step is compiled once (a traced chunk
    length adds a copy). The runs are made in turn (``jax.lax.map``), not vectorised: ``vmap`` over them
    was slower on the book's 2-core CPU (8 runs at L = 20: 6.4 s against 5.2 s)."""
    d = ks.shape[-1]

    def one(key_test, stream, k0, v0, params, ks, vs, alpha, lr):
        Xt, yt, _ = task.assemble(task.draws(key_test, n_test, L=L, d=d), ks[None], vs[None], gamma=gamma,
                                  eps=eps)
        att_loss = lambda k, v, X, y: jnp.mean(jnp.square(y - attention_erf(X, k, v, lam)))
        mlp_loss = lambda p, X, y: jnp.mean(jnp.square(y - baselines.diag_mlp(p, X)))
        opt = optax.adam(lr)

        def body(carry, t):
            (k, v, t_cut), (p, st) = carry
            X, y, _ = task.assemble(sgd.fresh_draws(stream, t, batch=batch, L=L, d=d, dtype=DRAWS), ks[None],
                                    vs[None], gamma=gamma, eps=eps)
            at_oracle, at_swap = landscape.point_masks(*overlaps(k, v, ks, vs), theta_star=theta_star,
                                                       tol=cut_tol)
            cut_now = (t >= anneal_at) & (cut_all | at_oracle | at_swap)
            t_cut = jnp.where(cut_now & (t < t_cut), t, t_cut).astype(t_cut.dtype)
            a = jnp.where(t >= t_cut, anneal * alpha, alpha)
            k, v = pgd.projected_step(k, v, *jax.grad(att_loss, argnums=(0, 1))(k, v, X, y), a)
            upd, st = opt.update(jax.grad(mlp_loss)(p, X, y), st, p)
            return (k, v, t_cut), (optax.apply_updates(p, upd), st)

        def log(carry):
            (k, v, t_cut), (p, _) = carry
            return att_loss(k, v, Xt, yt), mlp_loss(p, Xt, yt), k, v, t_cut

        never = jnp.asarray(n_chunks * log_every + (rem if has_rem else 0), jnp.int32)
        return loop.run_chunks(body, ((k0, v0, never), (params, opt.init(params))), log, n_chunks, log_every,
                               rem if has_rem else None, 1)

    return jax.lax.map(lambda a: one(*a), (key_test, stream, k0, v0, params, ks, vs, alpha, lr))


def _keys(L, seed):
    """The keys of one run (seed, L): oracle, attention's start, the MLP's initialisation, training."""
    return jax.random.split(jax.random.key(seed * 1000 + L), 4)


def call_runs(cfg, L, lam, runs):
    """The runs ``[(seed, alpha, lr)]`` at one L, in one compiled call of :func:`_runs`: a dict with the
    test mean squared errors ``att`` and ``mlp`` (N, T), the overlaps (kappa, nu, theta, eta, rho) of the
    attention iterates at the logs ``o`` (5, N, T), the step at which attention's step was cut ``cut`` (N,;
    ``cfg.steps`` if never: :class:`DiagMLPConfig`) and the MLP's number of parameters ``n``."""
    rows = []
    for seed, _, _ in runs:
        k_oracle, k_init, k_mlp, k_train = _keys(L, seed)
        ks, vs = task.sample_oracle(k_oracle, cfg.d)
        k0, v0 = (x[0, 0] for x in pgd.init_sphere(k_init, cfg.d, 1, H=1))
        key_test, streams = sgd.batch_keys(k_train, 1)
        rows.append((key_test, streams[0], k0, v0, baselines.diag_mlp_init(k_mlp, L=L, d=cfg.d, width=cfg.width),
                     ks, vs))
    stack = lambda *xs: jax.tree_util.tree_map(lambda *a: jnp.stack(a), *xs)
    args = stack(*rows)
    n_chunks, rem = loop.schedule(cfg.steps, cfg.steps // cfg.n_eval)
    theta_star = float(landscape.swap_theta(lam, gamma=cfg.gamma, d=cfg.d))
    att, mlp, K, V, cut = _runs(*args, jnp.asarray([a for _, a, _ in runs], float),
                                jnp.asarray([m for _, _, m in runs], float), float(lam), float(cfg.gamma),
                                float(cfg.eps), int(rem or 0), float(cfg.anneal), cfg.anneal_at, theta_star,
                                float(cfg.cut_tol), not cfg.cut_at_point, n_chunks=n_chunks,
                                log_every=cfg.steps // cfg.n_eval, batch=cfg.batch, n_test=cfg.n_test, L=int(L),
                                has_rem=rem is not None)
    o = overlaps(K, V, args[5][:, None], args[6][:, None])
    return {"att": np.asarray(att), "mlp": np.asarray(mlp), "o": np.asarray(o), "cut": np.asarray(cut)[:, -1],
            "n": baselines.n_params(rows[0][4])}


def tune_runs(cfg, seed=0):
    """The tuning runs ``[(seed, alpha, lr)]``: every pair of the grids (``lrs_attention[i]``, ``lrs_mlp[i]``,
    the shorter grid padded with its last value) on each tuning seed, seed by seed. The tuning seeds are
    ``seed + tune_seed``, ``seed + tune_seed + 1``, ...: relative to the experiment's ``seed``, so that under
    another seed (``SLR_SEED``) they move with the evaluation seeds and never coincide with them (absolute,
    they did: evaluation seeds 1000, 1001 under ``SLR_SEED=1000`` were the tuning runs themselves)."""
    A, M = len(cfg.lrs_attention), len(cfg.lrs_mlp)
    pairs = [(cfg.lrs_attention[min(i, A - 1)], cfg.lrs_mlp[min(i, M - 1)]) for i in range(max(A, M))]
    return [(seed + cfg.tune_seed + j, a, m) for j in range(cfg.tune_seeds) for a, m in pairs]


def pick_step_sizes(cfg, att, mlp):
    """(lr_att, lr_mlp): each model's step size of the smallest mean final test error over the tuning
    seeds, from the final test errors ``att``, ``mlp`` of the runs of :func:`tune_runs` (in their order)."""
    A, M = len(cfg.lrs_attention), len(cfg.lrs_mlp)
    mean = lambda x: np.asarray(x, dtype=float).reshape(cfg.tune_seeds, max(A, M)).mean(axis=0)
    return (cfg.lrs_attention[int(np.argmin(mean(att)[:A]))], cfg.lrs_mlp[int(np.argmin(mean(mlp)[:M]))])


def chunk_runs(cfg, runs):
    """``runs`` cut into calls of ``cfg.chunk`` runs (the last one padded with copies of its last run, so
    that every call has the shape of the first: one compilation per L): [(runs of the call, how many are
    real)]."""
    out = []
    for i in range(0, len(runs), cfg.chunk):
        part = runs[i:i + cfg.chunk]
        out.append((part + [part[-1]] * (min(cfg.chunk, len(runs)) - len(part)), len(part)))
    return out


def _join(parts):
    """The outputs of several :func:`call_runs` (with the number of real runs of each) along the runs."""
    return {"att": np.concatenate([p["att"][:n] for p, n in parts]),
            "mlp": np.concatenate([p["mlp"][:n] for p, n in parts]),
            "o": np.concatenate([p["o"][:, :n] for p, n in parts], axis=1),
            "cut": np.concatenate([p["cut"][:n] for p, n in parts]), "n": parts[0][0]["n"]}


def _tied(cfg, L, seed, lr):
    """The tied MLP (:func:`slr.baselines.tied_mlp`) trained on the samples of the evaluation seed ``seed``
    at L (its oracle, batches and test batch, :func:`call_runs`) with Adam at step ``lr``: (test mean squared
    errors at the logs, number of parameters)."""
    k_oracle, _, k_mlp, k_train = _keys(L, seed)
    ks, vs = task.sample_oracle(k_oracle, cfg.d)
    run = baselines.train_diag_mlp(k_train, k_mlp, ks, vs, L=L, gamma=cfg.gamma, eps=cfg.eps, width=cfg.width,
                                   lr=lr, steps=cfg.steps, batch=cfg.batch, n_test=cfg.n_test,
                                   log_every=cfg.steps // cfg.n_eval, tied=True, dtype=DRAWS)
    return run["excess_risk"] + cfg.eps ** 2, run["n_params"]


def _collect(cfg, L, lam, oracle, lrs, ev):
    """The outputs of :func:`diag_mlp_comparison` at one L from its evaluation runs (:func:`_join`)."""
    exact = np.asarray(R.closed_form(*ev["o"], lam, cfg.gamma, float(cfg.d), float(L), cfg.eps))
    out = {"att_mse": ev["att"], "mlp_mse": ev["mlp"], "att_exact_t": exact, "att_exact": exact[:, -1]}
    for i, f in enumerate(("kappa", "nu", "theta", "eta", "rho")):
        out[f] = ev["o"][i, :, -1]
    out["overlaps_t"] = ev["o"]
    out["cut_step"] = ev["cut"]
    return {**out, "n_mlp": ev["n"], "lr_att": lrs[0], "lr_mlp": lrs[1], "lam": lam, "oracle": oracle,
            "linear": R.linear_risk(gamma=cfg.gamma, L=L, eps=cfg.eps)}


def diag_mlp_comparison(cfg: DiagMLPConfig, seed: int) -> dict:
    """For each L (axis 0): the tuned step sizes ``lr_att``, ``lr_mlp``; over the evaluation seeds
    (seed, ..., seed + seeds - 1; axis 1) the test mean squared errors ``att_mse``, ``mlp_mse`` at the
    logged ``step`` (axis 2), the closed-form risk (Prop. 15) of the attention iterate at the logs
    ``att_exact_t`` and at the end ``att_exact``, the final ``kappa``, ``nu``, ``theta``, ``eta``, ``rho``,
    and all five at the logs, ``overlaps_t`` (L, 5, seeds, T) in that order, the step at which attention's
    step was cut ``cut_step`` (``steps`` if never: :class:`DiagMLPConfig`);
    per L the ``lam`` used, the ``oracle`` and best ``linear`` risks, ``n_mlp`` parameters. For each L of
    ``cfg.tied_Ls`` (axis 0): the tied MLP's test mean squared errors ``tied_mse`` at the logged steps on
    the first evaluation seed (seed) with ``lr_mlp``, and its ``tied_n`` parameters.

    Every call of :func:`_runs` is a task on two threads (both cores), submitted in this order: each L's
    first tuning call, the longest L first (each compiles its L's program, the two at once), the other
    tuning calls, the tied MLP's runs, then the evaluation calls, the shortest L first (its tuning ends
    first). A task that needs a tuning waits for it (every tuning call was submitted before it)."""
    best = {L: best_lambda(gamma=cfg.gamma, d=cfg.d, L=L, eps=cfg.eps) for L in cfg.Ls}
    Ls = sorted(cfg.Ls, reverse=True)
    with ThreadPoolExecutor(max_workers=2) as pool:
        call = lambda L, runs: pool.submit(call_runs, cfg, L, best[L][0], runs)
        parts = {L: chunk_runs(cfg, tune_runs(cfg, seed)) for L in Ls}
        tune = {L: [(call(L, parts[L][0][0]), parts[L][0][1])] for L in Ls}
        for L in Ls:
            tune[L] += [(call(L, c), n) for c, n in parts[L][1:]]

        def tuned(L):
            t = _join([(f.result(), n) for f, n in tune[L]])
            return pick_step_sizes(cfg, t["att"][:, -1], t["mlp"][:, -1])

        tied = [pool.submit(lambda L: _tied(cfg, L, seed, tuned(L)[1]), L) for L in cfg.tied_Ls]
        evals = {L: [(pool.submit(lambda L, c: call_runs(cfg, L, best[L][0], [(s, *tuned(L)) for s, _, _ in c]),
                                  L, c), n)
                     for c, n in chunk_runs(cfg, [(seed + s, None, None) for s in range(cfg.seeds)])]
                 for L in reversed(Ls)}
        per_L = [_collect(cfg, L, *best[L], tuned(L), _join([(f.result(), n) for f, n in evals[L]]))
                 for L in cfg.Ls]
        tied = [t.result() for t in tied]
    out = {k: [r[k] for r in per_L] for k in per_L[0]}
    out["step"] = loop.log_steps(cfg.steps, cfg.steps // cfg.n_eval)
    out = {k: np.asarray(v, dtype=float) for k, v in out.items()}
    T = out["step"].size
    out["tied_mse"] = np.asarray([m for m, _ in tied], dtype=float).reshape(len(tied), T)
    out["tied_n"] = np.asarray([n for _, n in tied], dtype=float)
    return out
