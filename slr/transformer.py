"""A Transformer layer with a register token (Appendix E.3, Eq. 29), trained on (multiple-)location
regression (``book/transformer.ipynb``). Eq. (29) with tokens as rows and ``X~ = [c; X]`` (L+1, d):

    N = LN(X~)                                   layer norm of every token, no learned gain or bias
    A_h = softmax_rows(N K_h Q_h^T N^T / sqrt(p))                      (L+1, L+1), h = 1..H
    Z = X~ + sum_h A_h N V_h O_h                 skip connection around attention
    T(X) = Z + ReLU(Z W1 + 1 b1^T) W2 + 1 b2^T   MLP with a skip connection, no second layer norm
    prediction  y_hat = theta^T T(X)_0          linear read-out of the register row

``c`` is the register ([CLS]) token: i.i.d. N(0, 1/d) entries, drawn once and never trained. Layer norm
is ``(x - mean(x)) / sqrt(var(x) + 1e-5)`` over one token. ``K`` (d, p) multiplies the querying row and
``Q`` (d, p) the attended tokens (zero at initialisation): its first left singular vector is ``k_hat``,
the direction in which the layer selects tokens. Shapes: ``K_h, Q_h`` (d, p),
``V_h`` (d, d_v), ``O_h`` (d_v, d) with ``d_v = d / H``; ``W1`` (d, m), ``b1`` (m,), ``W2`` (m, d),
``b2`` (d,), ``theta`` (d,). For H = 1, ``O = I`` and it is not trained (the paper's single-head setting);
initialisation as in Appendix E.3 (:func:`init_params`).

Only the register row enters the prediction: :func:`predict` computes it alone from one score vector
``u_h = Q_h K_h^T LN(c) / sqrt(p)`` per head (:func:`forward_full`: the whole output, for checking).
:func:`train`: plain SGD (optax) on the matrices, as in Appendix E.3, not Definition 1's sphere step;
fresh samples (:func:`slr.task.draws`) at every step of one jitted ``lax.scan``, runs vmapped; float32.
The training program is :mod:`slr.transformer_train`, with the step's gradient written by hand (jax.grad's
arithmetic up to round-off, tested to 1e-13 in float64): every product a plain row-major matrix product, and the
informative tokens' layer norm from moments shared by the runs (``signal_ln``): Figure 8's step 15.0 ->
11.2 ms of CPU.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np

from slr import transformer_train
from slr._threads import matrix_by_matrix, one_blas_thread
from slr._validate import check_int, check_key, check_nonneg, check_positive
from slr.task import assemble, draws, tie

__all__ = ["TransformerConfig", "FIGURE_8", "FIGURE_10", "init_params", "register_token", "layer_norm",
           "predict", "forward_full", "draw_batch", "test_risk", "key_directions", "value_directions",
           "train", "singular_values", "AUTHORS_FIG10_FINALS", "AUTHORS_FIG10_LAST_RISK"]

LN_EPS = 1e-5


@dataclasses.dataclass(frozen=True)
class TransformerConfig:
    """One training experiment of Appendix E.3 (a named, frozen configuration).

    ``H`` is the number of attention heads and ``n_locations`` the number of informative tokens in the
    data (1: single-location regression, Section 2; 2: multiple-location regression, Eq. 30).
    ``gamma`` and ``eps`` are standard deviations.
    """
    L: int = 10                      # tokens per sequence (plus the register token)
    d: int = 80                      # model width = token dimension
    p: int = 80                      # width of the key and query factors K_h, Q_h
    m: int = 200                     # MLP width
    H: int = 1                       # attention heads
    n_locations: int = 1             # informative tokens (Eq. 30)
    gamma: float = math.sqrt(0.5)    # std of an informative token
    eps: float = 0.1                 # std of the label noise
    batch: int = 128                 # fresh samples per step
    steps: int = 8000
    lr: float = 0.01                 # plain SGD step on the matrices (not a sphere step)
    repeats: int = 20                # independent layers, each with its own oracle
    log_every: int = 100
    n_test: int = 1000               # test samples per run
    seed: int = 0
    dtype: str = "float32"
    shared_draws: bool = True        # one draw per step for all runs
    token_noise: str = "independent"  # "shared": the informative tokens share one noise draw
    o_variance: Optional[float] = None  # variance of O_h's entries (H > 1); None: 2 / (d / H + d)
    q_std: float = 0.0               # std of Q's entries at initialisation (the paper's: Q = 0)

    def validate(self):
        check_int("L", self.L, lo=self.n_locations)
        check_int("d", self.d, lo=2 * self.n_locations)
        for name in ("p", "m", "H", "n_locations", "batch", "steps", "repeats", "log_every", "n_test"):
            check_int(name, getattr(self, name))
        if self.d % self.H:
            raise ValueError(f"d must be a multiple of H, got d={self.d!r} and H={self.H!r}")
        check_positive("gamma", self.gamma)
        check_nonneg("eps", self.eps)
        check_positive("lr", self.lr)
        if self.steps % self.log_every:
            raise ValueError(f"steps must be a multiple of log_every, got steps={self.steps!r}, "
                             f"log_every={self.log_every!r}")
        check_int("seed", self.seed, lo=0)
        for name, ok in (("dtype", ("float32", "float64")), ("token_noise", ("independent", "shared"))):
            if getattr(self, name) not in ok:
                raise ValueError(f"{name} must be one of {ok}, got {getattr(self, name)!r}")
        if self.o_variance is not None:
            check_positive("o_variance", self.o_variance)
        check_nonneg("q_std", self.q_std)
        return self


#: Figure 8: single-head layer on single-location regression, the paper's parameters.
FIGURE_8 = TransformerConfig()
#: Figure 10: two-head layer on two-location regression at the authors' settings (their notebook
#: transformer-multihead.ipynb, PierreMarion23/single-location-regression commit 14e2b06): d = 80, two
#: heads of width 40, O ~ N(0, 1/d), lr 2e-2, 10 000 steps, 10 runs, shared token noise.
FIGURE_10 = TransformerConfig(d=80, p=40, H=2, n_locations=2, repeats=10, lr=0.02, steps=10_000,
                              token_noise="shared", o_variance=1.0 / 80)

#: The authors' printed final |<k_hat_h, k*_j>| of their 10 runs of Figure 10: the last logged values
#: (step 9 901) that their notebook transformer-multihead.ipynb (PierreMarion23/single-location-regression,
#: commit 14e2b06) prints after each run, in the order kappa_11, kappa_12, kappa_21, kappa_22; shape
#: (10 runs, 2 heads, 2 keys), as printed (float32 values).
AUTHORS_FIG10_FINALS = np.array([
    0.9659146070480347, 0.32907894253730774, 0.7930362820625305, 0.7471031546592712,
    0.7367873787879944, 0.7281736135482788, 0.5080698132514954, 0.8625034093856812,
    0.245935320854187, 0.9451683163642883, 0.8170254230499268, 0.5589680671691895,
    0.6692841053009033, 0.7274284362792969, 0.7986310124397278, 0.5666179060935974,
    0.5742200016975403, 0.7646355032920837, 0.9039565920829773, 0.21456338465213776,
    0.6336734294891357, 0.7483533620834351, 0.9361979961395264, 0.1372678428888321,
    0.9533933997154236, 0.11087561398744583, 0.7059841156005859, 0.7069129347801208,
    0.7331149578094482, 0.6113662719726562, 0.5703354477882385, 0.7612024545669556,
    0.4740767180919647, 0.9113096594810486, 0.9148527383804321, 0.3180564343929291,
    0.37473610043525696, 0.8684998750686646, 0.8800456523895264, 0.3420928716659546,
]).reshape(10, 2, 2)
#: The only excess risk of Figure 10 that the same notebook prints: its last run's, at step 9 901
#: (the last row of its log table).
AUTHORS_FIG10_LAST_RISK = 0.014869


def register_token(key, d: int, dtype=jnp.float64):
    """The register ([CLS]) token c: i.i.d. N(0, 1/d) entries, shape (d,). Never trained."""
    return jax.random.normal(key, (d,), dtype=dtype) / math.sqrt(d)


def init_params(key, *, d: int, p: int, m: int, H: int = 1, dtype=jnp.float64, o_variance=None,
                q_std=0.0):
    """Initial parameters of Eq. (29) (Appendix E.3), a dict of arrays.

    K_h, V_h, W1, W2 ~ N(0, 2/(d_in + d_out)) entrywise; Q = 0 (``q_std`` > 0: N(0, q_std^2), a
    control); b1 = b2 = 0; theta ~ N(0, 1/d^2); O_h = I when H = 1 (stored, not trained), else
    N(0, o_variance) (default 2/(d_v + d)). Leading axis of K, Q, V, O: heads.
    """
    check_key("key", key)
    d, p, m, H = (check_int(name, x) for name, x in (("d", d), ("p", p), ("m", m), ("H", H)))
    if d % H:
        raise ValueError(f"d must be a multiple of H, got d={d!r} and H={H!r}")
    check_nonneg("q_std", q_std)
    # sqrt(q_std ** 2): the scale of N(0, q_std^2) entries as gauss() computes it (the same bits as before)
    return transformer_train.init(key, d, p, m, H, dtype, o_variance, math.sqrt(q_std ** 2) if q_std else None)


def layer_norm(x):
    """Layer normalisation of each token (last axis), without learned gain or bias."""
    mu = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean((x - mu) ** 2, axis=-1, keepdims=True)
    return (x - mu) / jnp.sqrt(var + LN_EPS)


def _register_row(params, c, X, normed=False, M=None, S=None):
    """Register row z0 (..., d) after attention + skip. X: (..., L, d), or LN(X) if ``normed``; S (..., n, d)
    replaces LN(X)'s rows at the one-hot positions M (..., L, n), with no copy of X (training)."""
    p = params["K"].shape[-1]
    n0 = layer_norm(c)                                       # (d,)
    N = X if normed else layer_norm(X)                       # (..., L, d)
    u = jnp.einsum("hdp,hep,e->hd", params["Q"], params["K"], n0) / math.sqrt(p)   # (H, d)
    s_tok = jnp.einsum("...ld,hd->...hl", N, u)             # (..., H, L)
    if M is not None:
        m = (jnp.sum(M, axis=-1) > 0)[..., None, :]          # (..., 1, L): the replaced positions
        s_tok = jnp.where(m, jnp.einsum("...lj,...jh->...hl", M, S @ u.T), s_tok)
    s_reg = jnp.broadcast_to((u @ n0)[..., None], s_tok.shape[:-1] + (1,))   # (..., H, 1)
    a = jax.nn.softmax(jnp.concatenate([s_reg, s_tok], axis=-1), axis=-1)      # (..., H, L+1)
    at = a[..., 1:] if M is None else jnp.where(m, 0.0, a[..., 1:])
    avg = a[..., :1] * n0 + jnp.einsum("...hl,...ld->...hd", at, N)          # (..., H, d)
    if M is not None:
        avg = avg + jnp.einsum("...hj,...jd->...hd", jnp.einsum("...hl,...lj->...hj", a[..., 1:], M), S)
    return c + _value(params, avg)


def _value(params, a):
    """sum_h a_h V_h O_h for a (..., H, d): head by head, (a_h V_h) O_h; no ``O`` in params: O = I."""
    av = jnp.einsum("...hd,hde->...he", a, params["V"])                       # (..., H, d_v)
    return jnp.einsum("...he,hef->...f", av, params["O"]) if "O" in params else av[..., 0, :]


def _mlp(params, z):
    return z + jax.nn.relu(z @ params["W1"] + params["b1"]) @ params["W2"] + params["b2"]


def predict(params, c, X, normed=False, M=None, S=None):
    """y_hat = theta^T T(X)_0 (Eq. 29 and the read-out of Appendix E.3), register row only.

    params: from :func:`init_params` (without ``O``: one head, O = I); c: (d,); X: (..., L, d) (LN(X)
    if ``normed``; M, S: as in ``_register_row``). Returns shape (...). The read-out is linear:
    theta^T ReLU(.) W2 = ReLU(.) (W2 theta), a matrix-vector product per sample (rank-one W2 gradient)."""
    z, th = _register_row(params, c, X, normed, M, S), params["theta"]
    return z @ th + jax.nn.relu(z @ params["W1"] + params["b1"]) @ (params["W2"] @ th) + params["b2"] @ th


def forward_full(params, c, X):
    """The full layer output T(X) of Eq. (29), shape (..., L+1, d): every row, for checking."""
    p = params["K"].shape[-1]
    Xt = jnp.concatenate([jnp.broadcast_to(c, X.shape[:-2] + (1, c.shape[0])), X], axis=-2)
    N = layer_norm(Xt)
    S = jnp.einsum("...id,hdp,hep,...je->...hij", N, params["K"], params["Q"], N) / math.sqrt(p)
    return _mlp(params, Xt + _value(params, jnp.einsum("...hij,...jd->...ihd", jax.nn.softmax(S, -1), N)))


def draw_batch(key, n: int, k_stars, v_stars, *, L: int, gamma, eps, dtype=jnp.float32, shared=False):
    """(Multiple-)location regression samples X (n, L, d), y (n,) for k_stars, v_stars (H, d), traceable:
    with ``dtype=float64`` and the same key :func:`slr.task.sample_multi`'s ``X, y``, exactly when both are
    compiled (sample_multi is one jitted program; called outside a jit this function's operations may round
    differently in the last bit); with ``shared`` the informative tokens share one noise draw
    (:func:`slr.task.tie`)."""
    dr = tie(draws(key, n, L=L, d=k_stars.shape[1], H=k_stars.shape[0], dtype=dtype), shared)
    return assemble(dr, k_stars, v_stars, gamma=gamma, eps=eps)[:2]


def test_risk(params, c, X, y, normed=False, M=None, S=None):
    """Empirical squared risk of :func:`predict` on a batch (X (n, L, d), y (n,))."""
    return jnp.mean((predict(params, c, X, normed, M, S) - y) ** 2)


#: SVDs one matrix at a time (slr._threads.matrix_by_matrix: the same numbers): a batched SVD that jaxlib
#: splits over XLA's thread pool can deadlock when another such call runs at once, and the training
#: program holds two (the logged singular values and k_hat); a script training Figures 8 and 10 in turn
#: once stopped at 4% CPU for 10 minutes (2026-11-26).
_svd = matrix_by_matrix(lambda a: jnp.linalg.svd(a, full_matrices=False))
singular_values = matrix_by_matrix(lambda a: jnp.linalg.svd(a, compute_uv=False))


def key_directions(params):
    """k_hat_h: first left singular vector of Q_h (d, p), and sigma_1 / sigma_2 of Q_h. Shapes (H, d), (H,)."""
    U, s, _ = _svd(params["Q"])
    return U[..., :, 0], s[..., 0] / s[..., 1]


def value_directions(params, c, X, *, linearise="jacobian"):
    """v_hat_h (H, d): the direction through which head h's value path maps the attended token to y_hat.

    A token attended by head h with weight a adds ``a LN(x) V_h O_h`` to the register row; with
    g = E[grad_{z0} y_hat] = theta + W1 diag(P[z0 W1 + b1 > 0]) W2 theta over the batch X
    (``linearise="jacobian"``) its contribution is ``a LN(x)^T (V_h O_h g)``: v_hat_h = V_h O_h g normalised.
    ``linearise="identity"`` reads ReLU as the identity (g = (I + W1 W2) theta), as the authors' code.
    """
    if linearise not in ("jacobian", "identity"):
        raise ValueError(f"linearise must be 'jacobian' or 'identity', got {linearise!r}")
    w = params["W2"] @ params["theta"]                                    # (m,)
    if linearise == "jacobian":  # weighted by the ReLU's probability of being active on the batch
        z0 = _register_row(params, c, X)                                  # (n, d)
        w = jnp.mean((z0 @ params["W1"] + params["b1"] > 0).astype(z0.dtype), axis=0) * w
    g = params["theta"] + params["W1"] @ w
    v = jnp.einsum("hde,hef,f->hd", params["V"], params["O"], g) if "O" in params else params["V"] @ g
    return v / jnp.linalg.norm(v, axis=-1, keepdims=True)


def train(cfg: TransformerConfig = FIGURE_8, seed=None):
    """Train ``cfg.repeats`` independent layers by single-pass SGD (optax.sgd) on fresh samples.

    With ``cfg.shared_draws`` the draws of a step (and the noise tokens' layer norms) are shared by the
    runs, each turning them into samples of its own oracle (the runs' data streams are coupled).
    Returns a dict of NumPy arrays with a leading axis of repetitions: ``steps`` (n_logs,) and, at
    each logged step (every ``log_every`` steps, step 0 included), ``excess_risk`` (test risk minus
    eps^2 on a fixed test batch of ``n_test`` samples), ``k_align`` |<k_hat_h, k_star_j>| (H, n_locations),
    ``v_align`` <v_hat_h, v_star_j> (signed), ``v_align_identity`` and ``sv_ratio`` sigma_1/sigma_2 of
    Q_h; at the end ``Q_singular_values`` (H, min(d, p)), ``Q`` (H, d, p), ``k_hat`` and ``v_hat`` (H, d).
    ``seed`` replaces ``cfg.seed`` (:func:`slr.experiments.run` calls ``train(cfg, seed)``).
    """
    if not isinstance(cfg, TransformerConfig):
        raise ValueError(f"cfg must be a TransformerConfig, got {type(cfg).__name__}")
    cfg = (cfg if seed is None else dataclasses.replace(cfg, seed=int(seed))).validate()
    run_key, data_key = jax.random.split(jax.random.key(cfg.seed))
    q_scale = np.asarray(math.sqrt(cfg.q_std ** 2) if cfg.q_std else 0.0, dtype=cfg.dtype)
    # OpenBLAS on one thread (slr._threads): the SVD logged for Figure 8's nearly rank-one Q took 0.1 to 3 s
    # of CPU per log with two threads, 0.01 s with one, the same numbers bit for bit (Figures 8 and 10)
    with one_blas_thread():  # seed and q_std enter as data: one program for all of them
        out = transformer_train.program(jax.random.split(run_key, cfg.repeats), data_key, q_scale,
                                        dataclasses.replace(cfg, seed=0, q_std=0.0))
        out = jax.tree.map(np.asarray, out)
    out["steps"] = np.arange(0, cfg.steps + 1, cfg.log_every)
    return out
