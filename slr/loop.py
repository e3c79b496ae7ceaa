"""The loop engine of :mod:`slr.pgd`, :mod:`slr.sgd`, :mod:`slr.manifold` and the other trainers.

:func:`run_chunks` runs ``steps`` iterations of a traceable step inside one ``jax.lax.scan`` over the
logging chunks (logging after each chunk), unrolling the inner loop and, for stochastic steps, drawing
the random numbers of ``block`` steps at once; :func:`run_one_copy` runs the same steps with one copy of
the step in the compiled program (no unrolling, no blocks of draws). :func:`schedule` and
:func:`log_steps` give the static chunk count and the logged step numbers; :func:`lam_fn` turns an
inverse-temperature schedule into a traceable ``t -> lam_t``. :func:`pad_to_block` pads a batch of
parameters to a fixed block size, so that a jitted function compiles once for every batch size.
``CLASSIC_EMITTERS`` is the XLA:CPU compiler option of the frame-coordinates trainer (:mod:`slr.coordinates`).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["run_chunks", "run_one_copy", "schedule", "log_steps", "lam_fn", "pad_to_block", "BLOCK",
           "draw_block", "CLASSIC_EMITTERS"]

#: XLA:CPU option of the frame-coordinates trainer (``slr.coordinates.core``, Figures 5 and 9 and the angle
#: sweep): the classic fusion emitters instead of the newer ones. Its program for the angle sweep compiled in
#: 7.2-7.6 s instead of 8.8-9.8 s (three A/B pairs, 2026-11-26), with the same numbers bit for bit (every output
#: of Figure 5, of Figure 9 with both token noises and seeds 0 and 1, and of the sweep); with the option set
#: process-wide, 20 000 of its steps ran in 4.9 s against 4.7 s. Not set on exact PGD or the Transformer's
#: program: set process-wide it changed the last bits of the temperature map, the dimension sweep and Figure 8.
CLASSIC_EMITTERS = {"xla_cpu_use_fusion_emitters": False}

#: steps whose random draws :func:`run_chunks` makes at once (the reduced samplers: 50 and 200 measured alike)
BLOCK = 50


def draw_block(steps, block=BLOCK):
    """The block for a run of ``steps`` steps: ``min(block, steps)``. With ``one_loop`` :func:`run_chunks`
    draws a whole block even for a shorter run (a 1-step run drew 50 steps' noise: 2.6 s against 0.42 s
    for 4000 runs of the coordinates sampler); a run of at least ``block`` steps keeps its program."""
    return min(int(block), int(steps))


def lam_fn(fn, lam0, c, dt):
    """``t -> lam_t`` in dtype ``dt``: ``fn(t)`` for a user callable, else lam0 / (1 + c t) (traced)."""
    if fn is None:
        return lambda t: jnp.asarray(lam0 / (1.0 + c * t), dt)
    return lambda t: jnp.asarray(fn(t), dt)


def pad_to_block(x, block):
    """``x`` flattened and padded with its last value to a multiple of ``block``: a jitted function of
    the result compiles once per block count, not once per size (keep its first ``x.size`` results)."""
    flat = np.ravel(x)
    return np.pad(flat, (0, -flat.size % block), mode="edge")


def in_blocks(fn, args, block):
    """``fn`` at the points of ``args`` (arrays broadcast, as float64), evaluated on blocks of ``block`` points.

    ``fn`` (jitted) maps arrays of shape (block,), one per argument, to an array or a tuple of arrays with a
    leading axis of length ``block`` (one row per point). Returns the same structure with the leading axis
    replaced by the broadcast shape of ``args``. Every call has the same shapes, so ``fn`` compiles once
    for any shape and any mix of scalars and arrays, where a call on the arguments themselves compiles a
    program per combination of shapes and dtypes. The blocks are NumPy slices (``jnp.asarray`` would compile
    a small program per shape). Each value is that of ``fn`` at its own point up to round-off (XLA compiles
    a block and a single point differently), not bit for bit."""
    arrs = np.broadcast_arrays(*(np.asarray(a, np.float64) for a in args))
    flat = [pad_to_block(a, block) for a in arrs]
    outs = [fn(*(a[i:i + block] for a in flat)) for i in range(0, flat[0].size, block)]
    n, shape = arrs[0].size, arrs[0].shape
    join = lambda parts: (lambda x: x[:n].reshape(shape + x.shape[1:]))(np.concatenate([np.asarray(p) for p in parts]))
    return tuple(join(parts) for parts in zip(*outs)) if isinstance(outs[0], tuple) else join(outs)


def log_steps(steps, log_every):
    """Logged steps: 0, log_every, 2 log_every, ..., and ``steps`` itself."""
    s = list(range(0, steps + 1, log_every))
    if s[-1] != steps:
        s.append(steps)
    return np.asarray(s, dtype=np.int64)


def schedule(steps, log_every):
    """(n_chunks, rem or None) for :func:`run_chunks`."""
    n, r = divmod(steps, log_every)
    return n, (r if r else None)


def run_chunks(body, carry, log_fn, n_chunks, log_every, rem, unroll, noise=None, block=64, one_loop=False):
    """Run n_chunks * log_every + rem steps of ``body(carry, t) -> carry``, logging ``log_fn(carry)``
    at step 0, after every chunk, and at the end when rem > 0 (``rem`` None: no remainder).
    ``log_every`` and ``rem`` may be traced: only ``n_chunks`` (the number of logs) is static.

    With ``noise`` (a function step -> pytree of that step's random draws), the body is
    ``body(carry, t, noise(t))`` and the draws are made ``block`` steps at a time, vectorised over the
    steps (one large random-number kernel instead of ``block`` small ones): the same numbers as drawing
    them inside each step, since each step's draws depend only on its index. With ``one_loop`` (and
    ``unroll`` 1) a partial last block is run from a whole block's draws too: one loop over the
    blocks, so one copy of the step in the compiled program (less compilation); the numbers of a run
    whose chunks are whole blocks are unchanged, a partial block's may differ in round-off (its draws
    are the same numbers, but XLA may fuse them into the step differently)."""
    if noise is None and unroll == 1 and not isinstance(log_every, int):
        # rolled, chunk length traced (the unit suite's loops, conftest): run_one_copy's loop, the same steps
        # and logs with one copy of the step instead of four (loop, empty remainder loop, and both again for rem)
        return run_one_copy(body, carry, log_fn, n_chunks + (rem is not None), log_every,
                            log_every if rem is None else rem)
    if noise is not None:
        step = body
        body = lambda cc, t: step(cc, t, noise(t))

    def steps_from(t0, n, c):
        """n steps from step t0; the loop body does ``unroll`` steps (n may be traced)."""
        if noise is not None:
            def blk(j, cc, m=None):  # a whole block (unrolled), or its first m steps (m traced: rolled)
                tb = t0 + j * block
                nz = jax.vmap(noise)(tb + jnp.arange(block))
                one = lambda u, c2: step(c2, tb + u, jax.tree_util.tree_map(lambda a: a[u], nz))
                if m is None:
                    return jax.lax.fori_loop(0, block, one, cc, unroll=unroll)
                return jax.lax.fori_loop(0, m, one, cc)
            if one_loop and unroll == 1:
                return jax.lax.fori_loop(0, -(-n // block), lambda j, cc: blk(
                    j, cc, jnp.minimum(block, n - j * block)), c)
            q = n // block
            static = isinstance(n, int)  # a loop of no step (static counts) is left out of the program
            if not (static and q == 0):
                c = jax.lax.fori_loop(0, q, blk, c)
            if static and n == q * block:
                return c
            return jax.lax.fori_loop(q * block, n, lambda j, cc: body(cc, t0 + j), c)

        def many(j, cc):
            for u in range(unroll):
                cc = body(cc, t0 + j * unroll + u)
            return cc
        if isinstance(n, int):  # static trip count: let XLA see the unrolled loop
            return jax.lax.fori_loop(0, n, lambda j, cc: body(cc, t0 + j), c, unroll=unroll)
        q = n // unroll
        c = jax.lax.fori_loop(0, q, many, c)
        return jax.lax.fori_loop(q * unroll, n, lambda j, cc: body(cc, t0 + j), c)

    def chunk(c, i):
        return (c := steps_from(i * log_every, log_every, c)), log_fn(c)

    first = log_fn(carry)
    carry, logs = jax.lax.scan(chunk, carry, jnp.arange(n_chunks))
    out = jax.tree_util.tree_map(lambda a, b: jnp.concatenate([a[None], b]), first, logs)
    if rem is not None:
        t0 = n_chunks * log_every
        carry = steps_from(t0, rem, carry)
        out = jax.tree_util.tree_map(lambda a, b: jnp.concatenate([a, b[None]]), out, log_fn(carry))
    return out


def run_one_copy(body, carry, log_fn, n_logs, log_every, last):
    """``body(carry, t) -> carry`` for steps t = 0, 1, ...: n_logs chunks of ``log_every`` steps, the last
    one of ``last`` steps (both may be traced), logging ``log_fn(carry)`` at step 0 and after each chunk.
    The steps of :func:`run_chunks` (same step indices, same arithmetic) with one copy of the step in
    the compiled program, the remainder included (the loop of :mod:`slr.pgd`: for the four exact figures
    each copy cost about as much compilation as it saved in running; measured: unrolled 2x plus a
    remainder loop, three copies, ran 8% faster and compiled about 1 s longer)."""
    def chunk(c, i):
        n = jnp.where(i == n_logs - 1, last, log_every)
        c = jax.lax.fori_loop(0, n, lambda j, cc: body(cc, i * log_every + j), c)
        return c, log_fn(c)

    first = log_fn(carry)
    _, logs = jax.lax.scan(chunk, carry, jnp.arange(n_logs))
    return jax.tree_util.tree_map(lambda a, b: jnp.concatenate([a[None], b]), first, logs)
