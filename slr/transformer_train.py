"""The training program of the Transformer layer (:func:`slr.transformer.train`, Eq. 29): the
runs' setup, the logged metrics, the jitted SGD loop (:func:`program`), and the gradient of the
training risk, its backward pass written by hand (:func:`risk_grad`).

The arithmetic is jax.grad's up to round-off (``tests/test_transformer.py`` compares them to 1e-13 in
float64), with every product a plain row-major matrix product, which XLA:CPU runs on its fast GEMM
kernels, and the informative tokens' layer norm computed from moments whose parts the runs of a step
share: Figure 8's training step went from 15.0 to 11.2 ms of CPU.
"""
from __future__ import annotations

import math
from functools import partial

import jax
import jax.numpy as jnp
import optax

import slr.transformer as T  # (attributes read at call time: slr.transformer imports this module)
from slr.task import draws, sample_oracle_multi, tie

__all__ = ["init", "setup", "metrics", "step_grad", "program", "signal_ln", "risk_grad"]


def signal_ln(k_stars, G, alpha, gamma):
    """LN(alpha k_star_j + gamma G_j) (B, n, d) for G (B, n, d), k_stars (n, d), from the moments of
    the centred parts: the mean and variance of a sum (the same numbers as layer_norm up to round-off;
    the draws' parts G - mean(G), |G - mean(G)|^2 are shared by every run of a step)."""
    d = G.shape[-1]
    Gc = G @ (jnp.eye(d, dtype=G.dtype) - 1.0 / d)  # a product: G's draw computed once
    kc = k_stars - jnp.mean(k_stars, axis=-1, keepdims=True)
    var = (alpha**2 * jnp.mean(kc**2, axis=-1) + (2 * alpha * gamma / d) * jnp.einsum("bjd,jd->bj", Gc, kc)
           + gamma**2 * jnp.mean(Gc**2, axis=-1))
    return (alpha * kc + gamma * Gc) * jax.lax.rsqrt(var + T.LN_EPS)[..., None]


def risk_grad(params, c, N, y, M, S):
    """The gradient of :func:`slr.transformer.test_risk` (normed, with M and S) in params, written by
    hand: the backward pass of :func:`slr.transformer.predict`'s register row, the same arithmetic as
    ``jax.grad`` up to round-off, with every product a plain matrix product (training only; tested
    against jax.grad)."""
    p = params["K"].shape[-1]
    K, Q, V, W1, W2, th = (params[k] for k in ("K", "Q", "V", "W1", "W2", "theta"))
    n0 = T.layer_norm(c)                                              # (d,)
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


def init(key, d, p, m, H, dtype, o_variance, q_scale):
    """:func:`slr.transformer.init_params` unchecked; ``q_scale`` the std of Q's entries: None (Q = 0)
    or a number, traced or not (> 0: N(0, q_scale^2) entries, else Q = 0), so one program serves every
    ``q_std``."""
    dv = d // H
    kK, kV, kO, k1, k2, kt = jax.random.split(key, 6)
    gauss = lambda k, shape, var: jax.random.normal(k, shape, dtype=dtype) * math.sqrt(var)
    O = jnp.eye(d, dtype=dtype)[None] if H == 1 else gauss(kO, (H, dv, d), o_variance or 2.0 / (dv + d))
    Q = jnp.zeros((H, d, p), dtype=dtype)
    if q_scale is not None:
        Q = jnp.where(q_scale > 0, jax.random.normal(jax.random.fold_in(kK, 1), Q.shape, dtype=dtype) * q_scale, Q)
    return {"K": gauss(kK, (H, d, p), 2.0 / (d + p)), "Q": Q,
            "V": gauss(kV, (H, d, dv), 2.0 / (d + dv)), "O": O,
            "W1": gauss(k1, (d, m), 2.0 / (d + m)), "b1": jnp.zeros((m,), dtype=dtype),
            "W2": gauss(k2, (m, d), 2.0 / (m + d)), "b2": jnp.zeros((d,), dtype=dtype),
            "theta": gauss(kt, (d,), 1.0 / d**2)}


def metrics(params, c, Xt, yt, k_stars, v_stars, eps, n_jac):
    """The logged quantities of one run (the fields of :func:`slr.transformer.train`)."""
    khat, ratio = T.key_directions(params)
    vhat, vhat_id = (T.value_directions(params, c, Xt[:n_jac], linearise=m) for m in ("jacobian", "identity"))
    return {"excess_risk": T.test_risk(params, c, Xt, yt) - eps**2,
            "k_align": jnp.abs(khat @ k_stars.T),  # (H heads, n_locations)
            "v_align": vhat @ v_stars.T, "v_align_identity": vhat_id @ v_stars.T, "sv_ratio": ratio}


def setup(key, q_scale, cfg):
    """One run's oracle, initial parameters, register token and test batch."""
    dt = jnp.dtype(cfg.dtype)
    k_oracle, k_init, k_reg, k_test = jax.random.split(key, 4)
    k_stars, v_stars = (x.astype(dt) for x in sample_oracle_multi(k_oracle, cfg.d, cfg.n_locations))
    params = init(k_init, cfg.d, cfg.p, cfg.m, cfg.H, dt, cfg.o_variance, q_scale)
    c = T.register_token(k_reg, cfg.d, dtype=dt)
    Xt, yt = T.draw_batch(k_test, cfg.n_test, k_stars, v_stars, L=cfg.L, gamma=cfg.gamma, eps=cfg.eps, dtype=dt,
                        shared=cfg.token_noise == "shared")
    return params, c, k_stars, v_stars, Xt, yt


def step_grad(tr, c, ks, vs, NZ, dr, cfg):
    """The risk's gradient on one step's draws ``dr`` (:func:`slr.task.draws`, with the noise tokens' layer
    norms NZ in place of Z: only J, G and xi are read here) for one run (oracle ks, vs (n, d)): the
    samples of :func:`slr.task.assemble` without X (the informative rows LN(X[J]) = S stand in for
    LN(Z)'s rows at the one-hot positions M (B, L, n)), by :func:`risk_grad`."""
    _, J, G, xi = dr
    alpha = math.sqrt(cfg.d / 2.0)
    y = (jnp.sum(alpha * jnp.sum(ks * vs, axis=-1) + cfg.gamma * jnp.einsum("bjd,jd->bj", G, vs), axis=-1)
         + cfg.eps * xi)   # sum_j X[J_j].v_star_j + eps xi: assemble's y, expanded (round-off)
    S = signal_ln(ks, G, alpha, cfg.gamma)                     # LN(X[J]) (B, n, d)
    M = (J[:, None, :] == jnp.arange(cfg.L)[:, None]).astype(G.dtype)
    return risk_grad(tr, c, NZ, y, M, S)


@partial(jax.jit, static_argnums=3)
def program(run_keys, data_key, q_scale, cfg):
    """The runs of ``cfg`` (static: its seed and q_std unread, 0; ``q_scale`` is the std of Q's entries)."""
    dt = jnp.dtype(cfg.dtype)
    params, c, k_stars, v_stars, Xt, yt = jax.vmap(lambda k: setup(k, q_scale, cfg))(run_keys)
    params = {k: v for k, v in params.items() if not (k == "O" and cfg.H == 1)}  # O = I: not stored
    opt = optax.sgd(cfg.lr)
    n_jac = min(cfg.n_test, 256)

    logged = lambda tr: jax.vmap(lambda *a: metrics(*a, cfg.eps, n_jac))(tr, c, Xt, yt, k_stars, v_stars)
    def one_update(tr, st, c, ks, vs, NZ, dr):  # NZ = LN(Z): the noise tokens' norms, once a step
        updates, st = opt.update(step_grad(tr, c, ks, vs, NZ, dr, cfg), st, tr)
        return optax.apply_updates(tr, updates), st

    one_draw = lambda k: tie(draws(k, cfg.batch, L=cfg.L, d=cfg.d, H=cfg.n_locations, dtype=dt),
                             cfg.token_noise == "shared")

    def step_draws(key):  # a step's draws, with the noise tokens' layer norms in place of Z
        dr = one_draw(key) if cfg.shared_draws else jax.vmap(one_draw)(jax.random.split(key, cfg.repeats))
        return (T.layer_norm(dr[0]),) + tuple(dr[1:])

    def step(carry, x):  # x: the step's draws (shared by the runs) or its key (a draw per run)
        dr = x if cfg.shared_draws else step_draws(x)
        axes = (0, 0, 0, 0, 0) + (None if cfg.shared_draws else 0,) * 2
        return jax.vmap(one_update, in_axes=axes)(*carry, c, k_stars, v_stars, dr[0], dr), None

    def block(carry, key):
        # shared draws: the block's draws made at once, before its steps (each step reads its draws instead
        # of XLA computing them again inside several of their consumers; Figures 8 and 10)
        keys = jax.random.split(key, cfg.log_every)
        carry, _ = jax.lax.scan(step, carry, jax.vmap(step_draws)(keys) if cfg.shared_draws else keys)
        return carry, logged(carry[0])

    (trained, _), logs = jax.lax.scan(block, (params, jax.vmap(opt.init)(params)),
                                      jax.random.split(data_key, cfg.steps // cfg.log_every))
    logs = jax.tree.map(lambda a, b: jnp.concatenate([a[:, None], jnp.swapaxes(b, 0, 1)], axis=1),
                        logged(params), logs)
    vhat = jax.vmap(lambda tr, c, Xt: T.value_directions(tr, c, Xt[:n_jac]))(trained, c, Xt)
    return {**logs, "Q_singular_values": T.singular_values(trained["Q"]), "Q": trained["Q"],
            "k_stars": k_stars, "v_stars": v_stars, "k_hat": T.key_directions(trained)[0], "v_hat": vhat}
