"""Private: many scipy BFGS minimisations at once, their function evaluations batched (used by
:func:`slr.landscape.global_minimum`).

Each minimisation runs scipy's own BFGS in a thread of its own; only one thread runs at a time, and
once every live minimisation waits for a function evaluation they are all answered by one call of a
compiled function on a block of rows. The iterates are those of one ``minimize`` after another
whenever the batched evaluation computes each row as a single call would (``lax.map`` over the
unbatched program does; ``vmap`` would change the last bits).
"""
from __future__ import annotations

import collections
import threading
import warnings

import numpy as np
from scipy.optimize import minimize

try:
    from scipy.optimize._linesearch import LineSearchWarning  # the class scipy's BFGS silences
except ImportError:  # pragma: no cover (another scipy layout)
    LineSearchWarning = RuntimeWarning

__all__ = ["bfgs_together"]


class _Batcher:
    """Runs many minimisations, one thread each, one thread at a time (a baton passed from thread to
    thread), and answers their function evaluations together: once every live minimisation waits for
    one, in blocks of ``block`` rows of ``evaluate``. A thread that asks for an evaluation, or ends, wakes
    the next thread in the queue (each sleeps on a lock of its own), so only one runs at any time.
    An error of the evaluation is raised in every thread that waits for it."""

    def __init__(self, evaluate, params, block):
        self.evaluate, self.params, self.block = evaluate, params, block
        self.wake = [threading.Lock() for _ in params]
        for w in self.wake:
            w.acquire()
        self.queue = collections.deque(range(len(params)))  # first, every thread's start
        self.pending, self.results, self.alive = {}, {}, len(params)

    def start(self, i):
        self.wake[i].acquire()

    def __call__(self, i, x):
        self.pending[i] = np.array(x, dtype=float)
        if len(self.pending) == self.alive:
            self._flush()
        j = self.queue.popleft()
        if j != i:
            self.wake[j].release()
            self.wake[i].acquire()
        out = self.results.pop(i)
        if isinstance(out, BaseException):
            raise out
        return out

    def done(self):
        self.alive -= 1
        if self.pending and len(self.pending) == self.alive:
            self._flush()
        if self.queue:
            self.wake[self.queue.popleft()].release()

    def _flush(self):
        idx = list(self.pending)
        try:
            rows = np.arange(-len(idx) % self.block + len(idx)) % len(idx)  # padded with repeated rows
            X = np.stack([self.pending[i] for i in idx])[rows]
            P = self.params[np.asarray(idx)][rows]
            out = {}
            for s in range(0, len(rows), self.block):
                v, g = (np.asarray(a) for a in self.evaluate(X[s:s + self.block], P[s:s + self.block]))
                for j in range(s, min(s + self.block, len(idx))):
                    out[idx[j]] = (np.asarray(v[j - s], float), np.array(g[j - s], float))
        except BaseException as e:  # noqa: BLE001 (raised in each waiting thread)
            out = dict.fromkeys(idx, e)
        self.results.update(out)
        self.pending.clear()
        self.queue.extend(idx)


def bfgs_together(evaluate, x0, params, options, block=64):
    """scipy's BFGS from each row of ``x0`` (n, k), the i-th minimising x -> f(x, params[i]); returns
    the n ``OptimizeResult``. ``evaluate(X, P)`` gives the values (b,) and gradients (b, k) of f at
    ``block`` rows X with parameters P: the same iterates as n sequential calls of ``minimize`` when
    each row of ``evaluate`` is computed as the sequential calls would (each thread runs scipy's own
    BFGS; only the function evaluations are batched). The first error is raised."""
    batcher = _Batcher(evaluate, np.asarray(params, dtype=np.float64), block)
    res, errors = [None] * len(x0), []

    def run(i):
        batcher.start(i)
        try:
            res[i] = minimize(lambda x: batcher(i, x), x0[i], jac=True, method="BFGS", options=options)
        except BaseException as e:  # noqa: BLE001 (re-raised below)
            errors.append(e)
        finally:
            batcher.done()

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(len(x0))]
    # scipy's BFGS silences LineSearchWarning in a catch_warnings block around its second line search,
    # which saves and restores the global filters: threads that leave such blocks in another order
    # than they entered them would restore stale filters. With the same filter set around them all,
    # every saved list holds the same filters, whatever the order.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LineSearchWarning)
        for t in threads:
            t.start()
        batcher.wake[batcher.queue.popleft()].release()
        for t in threads:
            t.join()
    if errors:
        raise errors[0]
    return res
