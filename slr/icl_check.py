"""Monte Carlo checks of the optima of one linear self-attention layer on in-context regression
(:mod:`slr.icl`; the chapter ``book/beyond_linear_attention.ipynb``).

The layer's prediction p^T G Q x_q is a linear combination of the ``(d+1)(d+2)/2 * d`` *span features*
G_ij x_qk (i <= j: G is symmetric), with the coefficient p_i Q_jk + p_j Q_ik (i < j) or p_i Q_ik (i = j).
Every layer lies in this linear span, and one step of GD preconditioned by Gamma is the point with
coefficient Gamma_ka on the feature G_{a,y} x_qk and 0 elsewhere. :func:`span_fit` fits the best
predictor of the whole span by least squares on Monte Carlo prompts: if it is (within Monte Carlo
error) the point of a preconditioner Gamma, then that one-step-GD layer is the best layer of all, since
no layer does better than the best element of the span. The z-scores use the sandwich (heteroscedastic)
covariance of the least-squares coefficients, centred at the reference.
"""
from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from slr import cache, icl
from slr._validate import check_int, check_key, check_nonneg

__all__ = ["span_features", "gd_coefficients", "span_fit", "check_setting"]


def span_features(X, y, x_q):
    """The span features G_ij x_qk (i <= j) of prompts X (m, n, d), y (m, n), x_q (m, d): (m, F). Traceable."""
    Z = jnp.concatenate([X, y[..., None]], axis=-1)
    G = jnp.einsum("mni,mnj->mij", Z, Z) / X.shape[-2]
    iu = np.triu_indices(Z.shape[-1])
    return (G[:, iu[0], iu[1], None] * x_q[:, None, :]).reshape(X.shape[0], -1)


def gd_coefficients(Gamma):
    """The span coefficients (F,) of one step of GD preconditioned by Gamma (d, d)."""
    Gamma = np.asarray(Gamma, dtype=float)
    d = Gamma.shape[0]
    iu = np.triu_indices(d + 1)
    coef = np.zeros((len(iu[0]), d))
    for row, (i, j) in enumerate(zip(*iu)):
        if j == d and i < d:        # the feature G_{a,y} x_q, a = i
            coef[row] = Gamma[:, i]
    return coef.ravel()


@partial(jax.jit, static_argnames=("m", "n", "response"))
def _moments(key, chol, chol_w, noise, refs, valid, *, m, n, response):
    """The sums of one chunk over its first ``valid`` (traced) of ``m`` prompts: the first rows of a
    draw of ``m`` prompts are the draw of ``valid`` prompts (JAX numbers the entries by their flat
    index), so a shorter last chunk reuses the program compiled for full chunks."""
    X, y, x_q, y_q, _ = icl.sample(key, chol, chol_w, noise, batch=m, n=n, response=response)
    keep = jnp.arange(m) < valid
    F = jnp.where(keep[:, None], span_features(X, y, x_q), 0.0)
    y_q = jnp.where(keep, y_q, 0.0)
    E = y_q[None, :] - refs @ F.T                                   # (R, m) residuals at the references
    FE = E[:, :, None] * F[None]                                    # (R, m, F)
    return (F.T @ F, F.T @ y_q, jnp.einsum("rmi,rmj->rij", FE, FE), FE.sum(1), (E ** 2).sum(1),
            (E ** 4).sum(1))


def span_fit(key, prompts: int, references, *, cov, n: int, noise: float = 0.0, w_cov=None,
             response="linear", chunk: int = 20_000) -> dict:
    """Least squares of y_q on the span features over ``prompts`` Monte Carlo prompts, against references.

    Args:
        key: JAX PRNG key (chunk i draws from ``fold_in(key, i)``). prompts: the number of prompts.
        references: a dict name -> preconditioner Gamma (d, d): the one-step-GD layers to test.
        cov, n, noise, w_cov, response: the task (:func:`slr.icl.sample_icl`). chunk: prompts per chunk.

    Returns:
        A dict of NumPy arrays: ``coef`` (F,) the fitted coefficients; ``<name>_z`` (F,) their z-scores
        against the reference's coefficients (sandwich covariance); ``<name>_risk`` and
        ``<name>_risk_se`` the Monte Carlo risk of the reference and its standard error (the same
        prompts for every reference: common random numbers).
    """
    check_key("key", key)
    prompts, n, chunk = check_int("prompts", prompts), check_int("n", n), check_int("chunk", chunk)
    check_nonneg("noise", noise)
    cov, w_cov, response = icl.check_task(cov, w_cov, response)
    names = list(references)
    refs = jnp.asarray(np.stack([gd_coefficients(references[k]) for k in names]))
    chols = [jnp.asarray(np.linalg.cholesky(c)) for c in (cov, w_cov)]
    total, done, i = None, 0, 0
    while done < prompts:
        m = min(chunk, prompts - done)
        size = min(chunk, prompts)  # every chunk is drawn at the full size: one compiled program
        out = _moments(jax.random.fold_in(key, i), *chols, float(noise), refs, m, m=size, n=n, response=response)
        out = [np.asarray(x) for x in out]
        total = out if total is None else [a + b for a, b in zip(total, out)]
        done, i = done + m, i + 1
    FF, Fy, M, S, E2, E4 = (x / prompts for x in total)
    Hinv = np.linalg.inv(FF)
    coef = Hinv @ Fy
    res = {"coef": coef}
    for r, name in enumerate(names):
        meat = M[r] - np.outer(S[r], S[r])
        se = np.sqrt(np.diag(Hinv @ meat @ Hinv) / prompts)
        res[name + "_z"] = (coef - np.asarray(refs[r])) / se
        res[name + "_risk"] = E2[r]
        res[name + "_risk_se"] = np.sqrt(max(E4[r] - E2[r] ** 2, 0.0) / prompts)
    return res


@cache.memoized
def check_setting(setting: str, references: dict, *, spectrum, n: int, noise: float, prompts: int,
                  seed: int = 0) -> dict:
    """:func:`span_fit` in a setting of :data:`slr.icl.SETTINGS` from ``jax.random.key(seed)``, memoised."""
    return span_fit(jax.random.key(seed), prompts, references, n=n, noise=noise,
                    **icl.task_of(setting, spectrum))
