"""Private: threads. :func:`one_blas_thread` limits the BLAS thread pool to one thread for the duration of
a ``with`` block; :func:`pool_map` runs independent JAX computations on the machine's two cores.

On the book's 2-core machine, small BLAS and LAPACK calls lose much to OpenBLAS's thread hand-offs
(measured: the SVDs that :mod:`slr.transformer` logs for Figure 8, 0.1 to 3 s of CPU each on two threads
against 0.01 s on one; the probe's logistic-regression fits in :mod:`slr.probe`, 5x the CPU time), with
the same numbers bit for bit. ``threadpoolctl`` comes with scikit-learn (the book's extras); without it
the threads are left as they are.
"""
from __future__ import annotations

import contextlib
import contextvars
import os
from concurrent.futures import ThreadPoolExecutor

__all__ = ["one_blas_thread", "pool_map", "matrix_by_matrix"]


def one_blas_thread():
    """A context manager: OpenBLAS (numpy's, scipy's and the one jaxlib's LAPACK calls on CPU) on one
    thread inside, restored after."""
    import scipy.linalg  # noqa: F401  (loads the OpenBLAS that jaxlib's LAPACK calls, before it is limited)
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover
        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


def pool_map(fn, items, cost=None):
    """``[fn(x) for x in items]`` on up to two threads, each call in a copy of the caller's context (so
    :func:`slr.cache.bypass` applies in it). XLA releases the GIL while it compiles and runs, so
    independent computations use both cores; the same programs and inputs as one at a time, so the same
    numbers, and a program needed by several calls compiles once. The costliest items (``cost``, one
    number per item) start first.

    Two programs that both make a batched LAPACK call (QR, SVD, Cholesky, eigh...) large enough for
    jaxlib 0.10 to split it over XLA's thread pool deadlock: each blocks one of the pool's two threads
    waiting for chunks queued on it (measured: Figure 10's layer, whose logs take an SVD of each run's
    Q, hung as two halves on two threads; so did the reduced sampler's QR with 32 runs of d = 80 per
    half). Call such factorisations through :func:`matrix_by_matrix` in programs run here."""
    items = list(items)
    workers = min(2, len(items), os.cpu_count() or 1)
    if workers <= 1:
        return [fn(x) for x in items]
    order = sorted(range(len(items)), key=lambda i: -cost[i]) if cost is not None else range(len(items))
    with ThreadPoolExecutor(workers) as ex:
        futures = {i: ex.submit(contextvars.copy_context().run, fn, items[i]) for i in order}
        return [futures[i].result() for i in range(len(items))]


def matrix_by_matrix(fn):
    """``fn`` (a LAPACK factorisation of one matrix (m, n), traceable) on arrays (..., m, n), vmapped or
    not, calling LAPACK on one matrix at a time (``lax.map``) instead of once on the whole batch: the
    same numbers (jaxlib factorises a batch matrix by matrix), and never jaxlib 0.10's split of a large
    batch over XLA's thread pool, which deadlocks when two programs both do it at once (:func:`pool_map`;
    measured: sgd.train's halves of 32 runs of d = 80 hung). Jitted: called eagerly, ``lax.map`` would
    trace and compile its scan again at every call (a new closure each time; measured: the 49 oracles of
    the related-models experiment, 7.2 s of compilation); jitted, once per shape and dtype."""
    import jax

    def each(a):
        out = jax.lax.map(fn, a.reshape((-1,) + a.shape[-2:]))
        return jax.tree.map(lambda o: o.reshape(a.shape[:-2] + o.shape[1:]), out)

    wrapped = jax.custom_batching.custom_vmap(each)

    @wrapped.def_vmap
    def _rule(axis_size, in_batched, x):  # the batch axis leads: one more leading dimension
        out = wrapped(x)
        return out, jax.tree.map(lambda _: bool(in_batched[0]), out)

    return jax.jit(wrapped)
