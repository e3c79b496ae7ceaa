"""Stochastic projected gradient descent on the sphere: THE trainer of the book (Definition 1 with
mini-batch gradients; Figures 5 and 9, and every attention predictor of :mod:`slr.predictors`).

:func:`train` runs R runs of H heads (k_h, v_h), each head on the unit sphere, for the predictor
sum_h f(X, k_h, v_h, lam) (f from :mod:`slr.predictors`: erf gives Eq. (31), and Eq. (3) for H = 1),
on data with n_loc informative tokens (:mod:`slr.task`: Section 2.1 for n_loc = 1, Eq. (30) else).
Each step draws ``batch`` fresh samples (:func:`slr.task.draws`, turned into samples of each run's
oracle by :func:`slr.task.assemble`; with ``shared_draws`` one draw per step serves every run) and
takes the Riemannian step of Definition 1 (:func:`slr.pgd.projected_step`) head by head on their mean
squared error. For erf heads (and one head of any predictor of ``READS_PROJECTIONS``),
``sampler="reduced"`` draws the mini-batch gradient exactly in law at a
fraction of the cost (:mod:`slr.reduced`). :func:`sgd` is Figure 5's entry: one head, one oracle.

Key use: ``key`` splits into the test key (one test draw shared by every run, assembled with each
run's oracle) and the training key (split into one stream per run, or used as is when shared); step t
of a stream draws from ``jax.random.fold_in(stream, t)`` (:func:`batch_keys`, :func:`fresh_draws`).
"""
from __future__ import annotations

from functools import partial
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from slr import coordinates, loop, reduced, task
from slr._threads import pool_map
from slr._validate import check_heads, check_int, check_key, check_lam, check_run, check_vectors
from slr.pgd import Trajectory, projected_step, split_lam
from slr.predictors import READS_PROJECTIONS, attention_erf, attention_multihead, get_predictor, sum_of_heads
from slr.risk import closed_form

__all__ = ["train", "sgd", "TrainLog", "batch_keys", "fresh_draws", "SAMPLERS", "TOKEN_NOISE"]

SAMPLERS = ("reduced", "full", "coordinates")
TOKEN_NOISE = ("independent", "shared")
UNROLL = 4  # inner-loop unrolling of the steps (fig5: 0.33 ms per step of 30 repeats, 1: 0.44 ms)
UNROLL_MULTI = 1  # several heads, reduced: unrolling multiplies the compilation time
#: runs x steps from which :func:`train` runs the two halves of an even number of runs on two threads
#: (XLA releases the GIL; measured cold: Figure 9's cell 96 -> 70 s, Figure 5 50 -> 42 s). The same
#: numbers for oracles per run; with one oracle shared by the runs, the test losses move at round-off
#: (1e-15): their product with the shared test batch is one matrix product whose summation order
#: depends on the number of runs.
HALVES_MIN = 100_000
_LOGS = ("kappa", "nu", "theta", "eta", "rho", "excess_risk")


class TrainLog(NamedTuple):
    """The log of :func:`train` (R runs, H heads, n_loc oracle directions, T logged steps).

    step (T,); lam (T,) the inverse temperature at those steps; kappa, nu, theta, eta (R, T, H, n_loc):
    <k_h, k*_j>, <v_h, v*_j>, <v_h, k*_j>, <k_h, v*_j>; rho (R, T, H): <k_h, v_h>; excess_risk (R, T):
    test-batch mean squared error minus eps^2; k, v (R, H, d): the final heads; excess_risk_closed
    (R, T): the closed form (Proposition 15) for one erf head on one location, else None.
    """
    step: np.ndarray
    lam: np.ndarray
    kappa: np.ndarray
    nu: np.ndarray
    theta: np.ndarray
    eta: np.ndarray
    rho: np.ndarray
    excess_risk: np.ndarray
    k: np.ndarray
    v: np.ndarray
    excess_risk_closed: Optional[np.ndarray] = None

    def to_dict(self) -> dict:
        """The fields as a dict of NumPy arrays (``None`` fields left out), for :mod:`slr.cache`."""
        return {k: np.asarray(v) for k, v in self._asdict().items() if v is not None}

    @classmethod
    def from_dict(cls, data) -> "TrainLog":
        """Inverse of :meth:`to_dict`."""
        return cls(**{k: np.asarray(data[k]) for k in cls._fields if k in data})


def batch_keys(key, repeats, shared_draws=False):
    """(test key, training streams) of :func:`train`: the streams are one key per run, shape
    (repeats,), or with ``shared_draws`` the one key every run reads."""
    key_test, key_train = jax.random.split(key)
    return key_test, (key_train if shared_draws else jax.random.split(key_train, repeats))


def fresh_draws(stream, t, *, batch, L, d, n_loc=1, dtype=jnp.float64):
    """The draws of step t of a training stream (:func:`slr.task.draws`; turn them into samples with
    :func:`slr.task.assemble`). The Gaussians are drawn in ``dtype`` and returned in float64 (float32 draws
    are another stream, of the law up to float32 resolution). Traceable, no checks."""
    Z, J, G, xi = task.draws(jax.random.fold_in(stream, t), batch, L=L, d=d, H=n_loc, dtype=dtype)
    return Z.astype(jnp.float64), J, G.astype(jnp.float64), xi.astype(jnp.float64)


def _loss(f, k, v, X, y, lam):
    return jnp.mean(jnp.square(y - sum_of_heads(f, X, k, v, lam)))


def _heads_step(k, v, gk, gv, alpha):
    """Definition 1 head by head, on (H, d) arrays. Traceable."""
    if k.shape[0] == 1:  # one head: the single-head step itself (the same round-off)
        return tuple(x[None] for x in projected_step(k[0], v[0], gk[0], gv[0], alpha))
    return jax.vmap(projected_step, in_axes=(0, 0, 0, 0, None))(k, v, gk, gv, alpha)


def _one_run(key, k0, v0, ks, vs, lam_t, alpha, gamma, eps, log_every, rem, *, f, sampler, n_chunks,
             batch, L, tied, block, draws="float64"):
    """One run: the iterates (T, H, d) at the logged steps."""
    (H, d), n = k0.shape, ks.shape[0]
    if sampler == "reduced" and d >= 2 * (n + H):  # else no frame: the full draw is as cheap
        grads, noise = reduced.sampler(key, ks, vs, lam_t, gamma, L, eps, batch, tied, H, f)
        step = lambda cr, t, nz: _heads_step(cr[0], cr[1], *grads(cr[0], cr[1], t, nz), alpha)
        unroll = UNROLL if H == n == 1 else UNROLL_MULTI
        return loop.run_chunks(step, (k0, v0), lambda cr: cr, n_chunks, log_every, rem, unroll, noise, block,
                               one_loop=True)  # unroll 1 (several heads; the suite's rolled loops): one step copy
    grad = jax.grad(partial(_loss, f), argnums=(0, 1))

    def body(cr, t):
        dr = task.tie(fresh_draws(key, t, batch=batch, L=L, d=d, n_loc=n, dtype=jnp.dtype(draws)), tied)
        X, y, _ = task.assemble(dr, ks, vs, gamma=gamma, eps=eps)
        return _heads_step(cr[0], cr[1], *grad(cr[0], cr[1], X, y, lam_t(t)), alpha)

    return loop.run_chunks(body, (k0, v0), lambda cr: cr, n_chunks, log_every, rem, UNROLL)


@partial(jax.jit, static_argnames=("f", "sampler", "fn", "n_chunks", "batch", "n_test", "L", "has_rem",
                                   "shared", "per_run", "batched", "tied_static", "block", "draws"))
def _core(key_test, keys, k0, v0, ks, vs, lam0, c, alpha, gamma, eps, log_every, rem, t_log, tied, *, f,
          sampler, fn, n_chunks, batch, n_test, L, has_rem, shared, per_run, batched=True, tied_static=None,
          block=loop.BLOCK, draws="float64"):
    tied = tied if tied_static is None else tied_static  # traced for the reduced sampler: one compilation
    lam_t = loop.lam_fn(fn, lam0, c, jnp.float64)
    run = lambda kk, a, b, s, u: _one_run(kk, a, b, s, u, lam_t, alpha, gamma, eps, log_every,
                                          rem if has_rem else None, f=f, sampler=sampler, n_chunks=n_chunks,
                                          batch=batch, L=L, tied=tied, block=block, draws=draws)
    o = 0 if per_run else None
    if batched:
        K, V = jax.vmap(run, in_axes=(None if shared else 0, 0, 0, o, o))(keys, k0, v0, ks, vs)  # (R, T, H, d)
    else:  # one run without vmap (sgd from vectors (d,): the same round-off as before the vmap existed)
        K, V = (x[None] for x in run(keys[0], k0[0], v0[0], ks, vs))
    lam = lam_t(t_log.astype(jnp.float64))
    R_, d = K.shape[0], K.shape[-1]
    KS, VS = (x if per_run else jnp.broadcast_to(x, (R_,) + x.shape) for x in (ks, vs))  # (R, n, d)
    dot = lambda a, b: jnp.sum(a[:, :, :, None, :] * b[:, None, None, :, :], axis=-1)  # (R, T, H, n)
    logs = (dot(K, KS), dot(V, VS), dot(V, KS), dot(K, VS), jnp.sum(K * V, axis=-1))
    # one test draw shared by the runs, each assembling its own oracle's samples
    tdraws = task.tie(task.draws(key_test, n_test, L=L, d=d, H=ks.shape[-2]), tied)
    test_set = lambda a, b: task.assemble(tdraws, a, b, gamma=gamma, eps=eps)[:2]
    Xt, yt = jax.vmap(test_set)(ks, vs) if per_run else test_set(ks, vs)

    def test_loss(args):  # one logged step, every run
        Kt, Vt, l = args
        return jax.vmap(partial(_loss, f), in_axes=(0, 0, o, o, None))(Kt, Vt, Xt, yt, l)

    if per_run:  # the predictions run by run (its test set stays in cache: 2.5x faster), the losses
        # step by step as in test_loss (the same numbers: the same reductions in the same layout)
        pred = lambda a: jax.lax.map(lambda b: sum_of_heads(f, a[2], b[0], b[1], b[2]), (a[0], a[1], lam))
        P = jax.lax.map(pred, (K, V, Xt))  # (R, T, n_test)
        test = jax.lax.map(lambda p: jnp.mean(jnp.square(yt - p), axis=-1), jnp.moveaxis(P, 1, 0)).T
    else:
        test = jax.lax.map(test_loss, (jnp.moveaxis(K, 1, 0), jnp.moveaxis(V, 1, 0), lam)).T  # (R, T)
    closed = None
    if f in (attention_erf, attention_multihead) and K.shape[-2] == 1 and ks.shape[-2] == 1:
        r = slice(None) if batched else 0  # (the unbatched shapes of sgd from vectors: the same round-off)
        closed = closed_form(*(x[r, :, 0, 0] for x in logs[:4]), logs[4][r, :, 0], lam, gamma, float(d), float(L),
                             eps) - eps ** 2
        closed = closed if batched else closed[None]
    return lam, logs, test - eps ** 2, K[:, -1], V[:, -1], closed


def train(key, k0, v0, k_stars, v_stars, *, lam, alpha, steps, batch, gamma, L, eps, log_every,
          predictor="erf", n_test=1000, shared_draws=False, sampler="full", token_noise="independent",
          draws="float64") -> TrainLog:
    """Stochastic projected gradient descent on the sphere (Definition 1 on fresh mini-batches): a
    :class:`TrainLog` of NumPy arrays.

    Args:
        key: JAX PRNG key (:func:`batch_keys`: a test key and the training streams).
        k0, v0: unit starts, shape (R, H, d): R runs of H heads (:func:`slr.pgd.init_sphere` with ``H``).
        k_stars, v_stars: unit oracle directions, shape (n_loc, d) shared by the runs, or (R, n_loc, d)
            one oracle per run (e.g. :func:`slr.task.oracle_at_angle`); n_loc informative tokens.
        lam: a float > 0, an :class:`slr.pgd.InverseTime` (``freeze`` to hold it after a step) or a
            traceable callable step -> lam.
        alpha: step size > 0. steps, batch, n_test, log_every: integers >= 1 (step 0 and the last step
            are always logged). gamma (> 0), eps (>= 0): standard deviations. L >= n_loc: tokens.
        predictor: a name of :data:`slr.predictors.PREDICTORS` or a callable f(X, k, v, lam); the model
            is sum_h f(X, k_h, v_h, lam) (:func:`slr.predictors.sum_of_heads`).
        shared_draws: one draw per step for every run (each assembles its own oracle's samples) instead
            of one independent stream per run (the reduced and coordinates samplers: the same frame
            coordinates in each run's own frame; every run's law is exact, the coupling is not the
            full draw's).
        sampler: ``"full"`` (the B L d token entries), ``"reduced"`` (erf heads: the same law, not the
            same draws; :mod:`slr.reduced`) or ``"coordinates"`` (erf heads, d >= 2 n_loc + 4H: the
            overlaps' law at a cost free of d; its test error and final heads as
            :mod:`slr.coordinates` says).
        token_noise: ``"independent"`` (Eq. 30: each informative token has its own noise) or
            ``"shared"`` (the n_loc informative tokens of a sequence share one noise draw, as in the
            authors' code for Figures 9 and 10), in training and in the test batch.
        draws: ``"float64"`` or ``"float32"``: the precision in which the training batches' Gaussians
            are drawn (:func:`fresh_draws`; used in float64 either way: float32 draws are another stream
            of the same law up to float32 resolution, as in :mod:`slr.appendix_f`). The full sampler only;
            the test batch is drawn in float64.

    An even number of runs with runs x steps >= ``HALVES_MIN`` (the chapters' figures) runs as two
    halves on two threads, one per core: the same program and the same numbers (with one oracle shared
    by the runs, the test losses to round-off, 1e-15).
    """
    check_key("key", key)
    lam = check_lam(lam, check_int("steps", steps, lo=1))
    check_run(alpha=alpha, gamma=gamma, L=L, eps=eps, log_every=log_every)
    check_int("batch", batch, lo=1), check_int("n_test", n_test, lo=1)
    f = get_predictor(predictor, name="predictor")
    if not isinstance(shared_draws, bool):
        raise ValueError(f"shared_draws must be a bool, got {shared_draws!r}")
    if not isinstance(sampler, str) or sampler not in SAMPLERS:
        raise ValueError(f"sampler must be one of {SAMPLERS}, got {sampler!r}")
    k0, v0, ks, vs = check_heads(k0, v0, k_stars, v_stars)
    R, H, d = k0.shape
    check_int("L", L, lo=ks.shape[-2])
    if sampler == "reduced" and f not in (attention_erf, attention_multihead) and not (
            f in READS_PROJECTIONS and H == ks.shape[-2] == 1):
        raise ValueError("sampler 'reduced' needs erf heads (Eq. 3 or 31), or one head of erf, sigmoid, "
                         f"relu, softmax or linear on one location, got predictor={predictor!r}")
    if sampler == "coordinates" and (f not in (attention_erf, attention_multihead) or d < 2 * ks.shape[-2] + 4 * H):
        raise ValueError(f"sampler 'coordinates' needs erf heads and d >= 2 n_loc + 4 H, got predictor={predictor!r}, "
                         f"d={d}, n_loc={ks.shape[-2]}, H={H}")
    if token_noise not in TOKEN_NOISE:
        raise ValueError(f"token_noise must be one of {TOKEN_NOISE}, got {token_noise!r}")
    if draws not in ("float64", "float32"):
        raise ValueError(f"draws must be 'float64' or 'float32', got {draws!r}")
    if draws != "float64" and sampler != "full":
        raise ValueError(f"draws={draws!r} needs sampler 'full' (the reduced and coordinates samplers draw in "
                         f"float64), got sampler={sampler!r}")
    key_test, keys = batch_keys(key, R, shared_draws)
    return _train(key_test, keys, k0, v0, ks, vs, lam, alpha=alpha, steps=steps, batch=batch, gamma=gamma, L=L,
                  eps=eps, log_every=log_every, f=f, n_test=n_test, shared=shared_draws, sampler=sampler,
                  tied=token_noise == "shared" and ks.shape[-2] > 1, draws=draws)


def _train(key_test, keys, k0, v0, ks, vs, lam, *, alpha, steps, batch, gamma, L, eps, log_every, f, n_test,
           shared, sampler, batched=True, tied=False, draws="float64"):
    fn, lam0, c = split_lam(lam)
    n_chunks, rem = loop.schedule(int(steps), int(log_every))
    t_log = loop.log_steps(int(steps), int(log_every))
    per_run = np.ndim(ks) == 3
    args = lambda kk, a, b, s, u: (key_test, kk, *map(jnp.asarray, (a, b, s, u)), lam0, c, float(alpha),
                                   float(gamma), float(eps), int(log_every), int(rem or 0), jnp.asarray(t_log),
                                   bool(tied))
    # the reduced and coordinates samplers' draws, a block of steps at a time (loop.draw_block); the full
    # draw has no blocks: one program for every step count
    static = dict(fn=fn, n_chunks=n_chunks, batch=int(batch), n_test=int(n_test), L=int(L),
                  has_rem=rem is not None, per_run=per_run,
                  block=loop.BLOCK if sampler == "full" else loop.draw_block(steps))
    if sampler == "coordinates":  # the overlaps in frame coordinates (slr.coordinates)
        core = lambda *a: coordinates.core(*args(*a), shared_draws=shared, **static)
    else:
        core = lambda *a: _core(*args(*a), f=f, sampler=sampler, shared=shared, batched=batched,
                                tied_static=None if sampler == "reduced" else bool(tied), draws=draws,
                                **static)
    R = np.shape(k0)[0]
    if batched and R % 2 == 0 and R * int(steps) >= HALVES_MIN:
        # two halves of the runs, one per core (one program: the halves have one shape)
        cut = lambda x, s, by_run=True: x[s] if by_run else x
        halves = pool_map(lambda s: core(cut(keys, s, not shared), k0[s], v0[s], cut(ks, s, per_run),
                                         cut(vs, s, per_run)), (slice(0, R // 2), slice(R // 2, R)))
        join = lambda *xs: None if xs[0] is None else jnp.concatenate(xs)
        lam_log, (logs, test, k, v, closed) = halves[0][0], (
            jax.tree_util.tree_map(join, *(h[1:] for h in halves), is_leaf=lambda x: x is None))
    else:
        lam_log, logs, test, k, v, closed = core(keys, k0, v0, ks, vs)
    out = dict(zip(_LOGS, logs + (test,)), k=k, v=v, lam=lam_log, excess_risk_closed=closed)
    return TrainLog(step=t_log, **{name: None if x is None else np.asarray(x) for name, x in out.items()})


def sgd(key, k0, v0, k_star, v_star, *, lam, alpha, steps, batch, gamma, L, eps, log_every,
        n_test=1000, sampler="reduced") -> Trajectory:
    """Figure 5's stochastic PGD: :func:`train` with one erf head and one oracle (k_star, v_star).

    Args:
        key: JAX PRNG key (the fixed test batch, shared by the repeats, and one training stream per repeat).
        k0, v0: unit vectors, shape (d,) or (R, d) (repeats vectorised with ``vmap``).
        k_star, v_star: orthonormal vectors (d,), d >= 2. batch, n_test: integers >= 1.
        lam, alpha, steps, gamma, L, eps, log_every: as in :func:`slr.pgd.pgd`.
        sampler: ``"reduced"`` (default, :mod:`slr.reduced`: exactly the law of the full draw, not the
            same draws; a degenerate span is completed by fixed directions; d < 4 uses the full draw)
            or ``"full"``.

    Returns:
        A :class:`slr.pgd.Trajectory` whose ``excess_risk`` is the test-batch estimate of R - eps^2
        (Figure 5 convention) and ``excess_risk_closed`` the closed form (Proposition 15).
    """
    check_key("key", key)
    lam = check_lam(lam, check_int("steps", steps, lo=1))
    check_run(alpha=alpha, gamma=gamma, L=L, eps=eps, log_every=log_every)
    check_int("batch", batch, lo=1)
    check_int("n_test", n_test, lo=1)
    if not isinstance(sampler, str) or sampler not in SAMPLERS:
        raise ValueError(f"sampler must be one of {SAMPLERS}, got {sampler!r}")
    k0, v0, ks, vs, d = check_vectors(k0, v0, k_star, v_star)
    if d < 2:
        raise ValueError(f"d must be >= 2 for sgd (k_star and v_star orthogonal), got {d}")
    one = k0.ndim == 1
    key_test, keys = batch_keys(key, 1 if one else k0.shape[0])
    if one:  # a single run reads the training key itself
        keys = jax.random.split(key)[1][None]
    k0, v0 = (np.reshape(x, (-1, 1, d)) for x in (k0, v0))
    log = _train(key_test, keys, k0, v0, ks[None], vs[None], lam, alpha=alpha, steps=steps, batch=batch,
                 gamma=gamma, L=L, eps=eps, log_every=log_every, f=attention_erf, n_test=n_test, shared=False,
                 sampler=sampler, batched=not one)
    sq = (lambda x: x[0]) if one else (lambda x: x)
    ov = [sq(getattr(log, n)[:, :, 0, 0]) for n in _LOGS[:4]] + [sq(log.rho[:, :, 0])]
    return Trajectory(log.step, *ov, sq(log.excess_risk), sq(log.excess_risk_closed))
