"""Private: the gradient of the Transformer layer's training risk (:mod:`slr.transformer`, Eq. 29), its
backward pass written by hand.

The arithmetic is jax.grad's up to round-off (``tests/test_transformer.py`` compares them to 1e-13 in
float64), with every product a plain row-major matrix product, which XLA:CPU runs on its fast GEMM
kernels, and the informative tokens' layer norm computed from moments whose parts the runs of a step
share: Figure 8's training step went from 15.0 to 11.2 ms of CPU.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp

__all__ = ["signal_ln", "risk_grad"]


def signal_ln(k_stars, G, alpha, gamma):
    """LN(alpha k_star_j + gamma G_j) (B, n, d) for G (B, n, d), k_stars (n, d), from the moments of
    the centred parts: the mean and variance of a sum (the same numbers as layer_norm up to round-off;
    the draws' parts G - mean(G), |G - mean(G)|^2 are shared by every run of a step)."""
    from slr.transformer import LN_EPS  # (imported here: slr.transformer imports this module)

    d = G.shape[-1]
    Gc = G @ (jnp.eye(d, dtype=G.dtype) - 1.0 / d)  # a product: G's draw computed once
    kc = k_stars - jnp.mean(k_stars, axis=-1, keepdims=True)
    var = (alpha**2 * jnp.mean(kc**2, axis=-1) + (2 * alpha * gamma / d) * jnp.einsum("bjd,jd->bj", Gc, kc)
           + gamma**2 * jnp.mean(Gc**2, axis=-1))
    return (alpha * kc + gamma * Gc) * jax.lax.rsqrt(var + LN_EPS)[..., None]


def risk_grad(params, c, N, y, M, S):
    """The gradient of :func:`slr.transformer.test_risk` (normed, with M and S) in params, written by
    hand: the backward pass of :func:`slr.transformer.predict`'s register row, the same arithmetic as
    ``jax.grad`` up to round-off, with every product a plain matrix product (training only; tested
    against jax.grad)."""
    from slr.transformer import layer_norm  # (imported here: slr.transformer imports this module)

    p = params["K"].shape[-1]
    K, Q, V, W1, W2, th = (params[k] for k in ("K", "Q", "V", "W1", "W2", "theta"))
    n0 = layer_norm(c)                                              # (d,)
    kn = jnp.einsum("hep,e->hp", K, n0) / math.sqrt(p)            # (H, p)
    u = jnp.einsum("hdp,hp->hd", Q, kn)                             # (H, d)
    m = (jnp.sum(M, axis=-1) > 0)[..., None, :]                     # (B, 1, L)
    s_tok = jnp.where(m, jnp.einsum("blj,bjh->bhl", M, S @ u.T), jnp.einsum("bld,hd->bhl", N, u))
    s_reg = jnp.broadcast_to((u @ n0)[:, None], s_tok.shape[:-1] + (1,))
    a = jax.nn.softmax(jnp.concatenate([s_reg, s_tok], axis=-1), axis=-1)        # (B, H, L+1)
    al = a[..., 1:]
    avg = (a[..., :1] * n0 + jnp.einsum("bhl,bld->bhd", jnp.where(m, 0.0, al), N)
           + jnp.einsum("bhj,bjd->bhd", jnp.einsum("bhl,blj->bhj", al, M), S))  # (B, H, d)
    av = jnp.einsum("bhd,hde->bhe", avg, V)                         # (B, H, d_v)
    z = c + (jnp.einsum("bhe,hef->bf", av, params["O"]) if "O" in params else av[:, 0])
    pre = z @ W1 + params["b1"]
    act, w = jax.nn.relu(pre), W2 @ th
    r = 2.0 * (z @ th + act @ w + params["b2"] @ th - y) / y.shape[0]          # dloss / dy_hat
    gh = jnp.where(pre > 0, r[:, None] * w, 0.0)                    # (B, m)
    ra = r @ act
    g = {"theta": z.T @ r + W2.T @ ra + params["b2"] * jnp.sum(r), "b2": th * jnp.sum(r),
         "W2": ra[:, None] * th, "W1": z.T @ gh, "b1": jnp.sum(gh, axis=0)}
    dz = r[:, None] * th + gh @ W1.T                                # (B, d)
    if "O" in params:
        g["O"] = jnp.einsum("bhe,bf->hef", av, dz)
        dav = jnp.einsum("bf,hef->bhe", dz, params["O"])
    else:
        dav = dz[:, None, :]
    g["V"] = jnp.einsum("bhd,bhe->hde", avg, dav)
    davg = jnp.einsum("bhe,hde->bhd", dav, V)                       # (B, H, d)
    dal = (jnp.where(m, 0.0, jnp.einsum("bhd,bld->bhl", davg, N))
           + jnp.einsum("bhj,blj->bhl", jnp.einsum("bhd,bjd->bhj", davg, S), M))
    da = jnp.concatenate([(davg @ n0)[..., None], dal], axis=-1)
    ds = a * (da - jnp.sum(a * da, axis=-1, keepdims=True))         # softmax backward
    dsl = ds[..., 1:]
    du = (jnp.sum(ds[..., 0], axis=0)[:, None] * n0 + jnp.einsum("bhl,bld->hd", jnp.where(m, 0.0, dsl), N)
          + jnp.einsum("bhj,bjd->hd", jnp.einsum("bhl,blj->bhj", dsl, M), S))          # (H, d)
    g["Q"] = du[:, :, None] * kn[:, None, :]
    g["K"] = n0[None, :, None] * (jnp.einsum("hdp,hd->hp", Q, du) / math.sqrt(p))[:, None, :]
    return g
