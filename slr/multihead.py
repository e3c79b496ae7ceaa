"""Two heads of Eq. (31) on two-location regression (Eq. 30): Figure 9's configurations, the
classification of a run's end state, the authors' printed final key alignments, and the open question
of the angle between the two keys (:class:`AngleConfig`, experiment ``open-angle``).

The predictor is :func:`slr.predictors.attention_multihead` (Eq. 31); the trainer is the book's one
stochastic PGD, :func:`slr.sgd.train` (the Riemannian step of Definition 1, head by head), with the
exact-in-law reduced sampler of :mod:`slr.reduced` or the simulation in frame coordinates of
:mod:`slr.coordinates` where the configuration asks for it.
"""
from __future__ import annotations

import dataclasses
import math

import jax
import numpy as np

from slr import pgd, sgd, task
from slr._validate import check_int, check_nonneg, check_positive

__all__ = ["MultiHeadConfig", "SHORT_SCHEDULE", "AUTHORS", "train", "simulate", "PATTERNS", "ALIGNED",
           "OFF", "end_states", "STATES", "end_state", "AUTHORS_FIG9_FINALS", "AngleConfig", "angle_heads"]


@dataclasses.dataclass(frozen=True)
class MultiHeadConfig:
    """Stochastic PGD on Eq. (31) for multiple-location regression (Eq. 30).

    The inverse temperature is ``lam_t = lam0 / (1 + lam_decay min(t, lam_freeze))`` (the paper's
    Figure 9 holds lambda constant after some step). ``gamma``, ``eps`` are standard deviations;
    ``batch`` fresh samples per step, step size ``alpha``. With ``shared_draws`` the draws of a step
    are shared by the repetitions, each turning them into samples of its own oracle. ``token_noise``
    and ``sampler``: as in :func:`slr.sgd.train`.
    """
    L: int = 10                      # tokens per sequence
    d: int = 80                      # dimension of the tokens
    H: int = 2                       # heads (k_h, v_h) of Eq. (31)
    n_locations: int = 2             # informative tokens of Eq. (30)
    gamma: float = math.sqrt(0.5)    # std of an informative token (gamma^2 = 1/2)
    eps: float = 0.1                 # std of the label noise
    batch: int = 20                  # fresh samples per step
    steps: int = 30000
    alpha: float = 3e-3              # step size of Definition 1
    lam0: float = 2.0                # lam_t = lam0 / (1 + lam_decay min(t, lam_freeze))
    lam_decay: float = 3e-4
    lam_freeze: int = 10000
    repeats: int = 10                # runs, each with its own oracle and start
    log_every: int = 500
    n_test: int = 1000               # test samples per run
    seed: int = 0
    shared_draws: bool = True        # one draw per step for all runs
    token_noise: str = "independent"  # "shared": the informative tokens share one noise draw
    sampler: str = "full"            # "reduced": exact in law, B L (2n + 2H) + B + 2H d normals a step;
    #                                  "coordinates": the overlaps exactly in law, B L (2n + 2H) + B + 4H^2

    def validate(self) -> "MultiHeadConfig":
        """Every field in range (ValueError naming the field otherwise); returns the configuration."""
        for name in ("H", "n_locations", "batch", "steps", "repeats", "log_every", "n_test"):
            check_int(name, getattr(self, name))
        check_int("L", self.L, lo=self.n_locations)
        check_int("d", self.d, lo=2 * self.n_locations)
        check_int("lam_freeze", self.lam_freeze, lo=0)
        check_int("seed", self.seed, lo=0)
        for name in ("gamma", "alpha", "lam0"):
            check_positive(name, getattr(self, name))
        check_nonneg("eps", self.eps)
        check_nonneg("lam_decay", self.lam_decay)
        if self.token_noise not in sgd.TOKEN_NOISE:
            raise ValueError(f"token_noise must be one of {sgd.TOKEN_NOISE}, got {self.token_noise!r}")
        if self.sampler not in sgd.SAMPLERS:
            raise ValueError(f"sampler must be one of {sgd.SAMPLERS}, got {self.sampler!r}")
        return self


#: The book's earlier short schedule (batch 20, alpha 3e-3, lambda frozen after 10 000 steps, 30 000
#: steps, 10 runs): the base of the sweeps of the chapter on open questions.
SHORT_SCHEDULE = MultiHeadConfig()
#: Figure 9 at the authors' settings (their notebook ``toy-multihead.ipynb``, repository
#: PierreMarion23/single-location-regression, commit 14e2b06): batch 5, alpha 1e-3, 100 000 steps,
#: lambda_t = 2 / (1 + 2e-4 t) frozen after step 25 000, 20 runs with independent data streams;
#: simulated in frame coordinates (:mod:`slr.coordinates`: the overlaps exactly in law, at a cost free
#: of d). The paper's independent token noise; ``token_noise="shared"`` is the authors' code.
AUTHORS = MultiHeadConfig(batch=5, steps=100_000, alpha=1e-3, lam_decay=2e-4, lam_freeze=25_000,
                          repeats=20, log_every=1000, shared_draws=False, sampler="coordinates")


def train(cfg: MultiHeadConfig = SHORT_SCHEDULE, oracles=None) -> sgd.TrainLog:
    """``cfg.repeats`` runs of :func:`slr.sgd.train` with the predictor of Eq. (31) (float64).

    Each run has its own oracle (2 n_locations orthonormal directions, :func:`slr.task.sample_oracle_multi`)
    unless ``oracles`` = (k_stars, v_stars) of shape (repeats, n_locations, d) is given (e.g.
    :func:`slr.task.oracle_at_angle`), and its own start (:func:`slr.pgd.init_sphere` with H heads).
    """
    if not isinstance(cfg, MultiHeadConfig):
        raise ValueError(f"cfg must be a MultiHeadConfig, got {type(cfg).__name__}")
    cfg.validate()
    k_oracle, k_init, k_train = jax.random.split(jax.random.key(cfg.seed), 3)
    if oracles is None:
        oracles = jax.vmap(lambda k: task.sample_oracle_multi(k, cfg.d, cfg.n_locations))(
            jax.random.split(k_oracle, cfg.repeats))
    k0, v0 = pgd.init_sphere(k_init, cfg.d, cfg.repeats, H=cfg.H)
    lam = pgd.InverseTime(cfg.lam0, cfg.lam_decay, cfg.lam_freeze)
    return sgd.train(k_train, k0, v0, *oracles, lam=lam, alpha=cfg.alpha, steps=cfg.steps, batch=cfg.batch,
                     gamma=cfg.gamma, L=cfg.L, eps=cfg.eps, log_every=cfg.log_every, predictor="erf",
                     n_test=cfg.n_test, shared_draws=cfg.shared_draws, sampler=cfg.sampler,
                     token_noise=cfg.token_noise)


def simulate(cfg: MultiHeadConfig, seed: int) -> dict:
    """:func:`train` from ``seed`` (the experiment registry's compute: :func:`slr.experiments.run`), as
    the dict of :meth:`slr.sgd.TrainLog.to_dict`. The seed fixes the oracles, the starts and the data
    streams, so two configurations that differ only in ``token_noise`` start from the same points."""
    return train(dataclasses.replace(cfg, seed=int(seed))).to_dict()


#: The four end states of a two-head run, in the order :func:`end_states` numbers them.
PATTERNS = ("separated", "collapsed", "no alignment", "mixed")
ALIGNED = 0.3   # |<k_h, k*_j>| >= ALIGNED: head h is aligned with k*_j
OFF = 0.15      # |<k_h, k*_j>| < OFF: head h is off k*_j (a random unit vector: |.| ~ 1/sqrt(d) = 0.11)


def end_states(kappa) -> np.ndarray:
    """The end state of each run from its final |<k_h, k*_j>|, shape (..., 2 heads, 2 locations):
    0 separated (each head aligned with a different k*_j and off the other), 1 collapsed (both heads
    aligned with the same k*_j and off the other), 2 no alignment (every |kappa| < OFF), 3 mixed
    (anything else). Aligned: |kappa| >= ALIGNED; off: |kappa| < OFF (:data:`PATTERNS`)."""
    A = np.abs(np.asarray(kappa, dtype=float))
    if A.shape[-2:] != (2, 2):
        raise ValueError(f"kappa must have shape (..., 2, 2), got {A.shape}")
    al, off = A >= ALIGNED, A < OFF
    diag = lambda M, s: M[..., 0, s[0]] & M[..., 1, s[1]]
    separated = (diag(al, (0, 1)) & diag(off, (1, 0))) | (diag(al, (1, 0)) & diag(off, (0, 1)))
    col = lambda M, j: M[..., 0, j] & M[..., 1, j]
    collapsed = (col(al, 0) & col(off, 1)) | (col(al, 1) & col(off, 0))
    none = np.all(off, axis=(-1, -2))
    return np.select([separated, collapsed, none], [0, 1, 2], default=3)


#: The five end states of :func:`end_state`: those of :data:`PATTERNS`, the mixed one split in two.
STATES = ("separated", "collapsed", "without alignment", "symmetric", "other mixed")


def end_state(kappa) -> np.ndarray:
    """The end state of each run among the five of :data:`STATES`, from its final |<k_h, k*_j>|, shape
    (..., 2 heads, 2 locations): 0 separated, 1 collapsed, 2 without alignment, as :func:`end_states`;
    its mixed runs are split into 3 symmetric (all four |kappa| >= ALIGNED: each head aligned with
    both keys) and 4 other mixed (the rest). A symmetric run is never separated, collapsed or without
    alignment (those need an overlap below OFF < ALIGNED). ValueError for another shape."""
    state = end_states(kappa)                                         # checks the shape; 3: mixed
    sym = np.all(np.abs(np.asarray(kappa, dtype=float)) >= ALIGNED, axis=(-1, -2))
    return np.where(sym, 3, np.where(state == 3, 4, state))


#: The authors' printed final |<k_h, k*_j>| of their 20 runs of Figure 9 (step 100 000; notebook
#: ``toy-multihead.ipynb`` of PierreMarion23/single-location-regression, commit 14e2b06; shared token
#: noise), shape (20, heads, locations), to three decimals.
AUTHORS_FIG9_FINALS = np.array([
    0.504, 0.058, 0.065, 0.466, 0.760, 0.039, 0.755, 0.006, 0.077, 0.461, 0.546, 0.045,
    0.754, 0.017, 0.764, 0.003, 0.094, 0.054, 0.003, 0.030, 0.745, 0.014, 0.737, 0.003,
    0.725, 0.093, 0.765, 0.011, 0.030, 0.760, 0.000, 0.728, 0.123, 0.112, 0.109, 0.103,
    0.003, 0.761, 0.031, 0.760, 0.028, 0.728, 0.004, 0.751, 0.208, 0.428, 0.388, 0.221,
    0.521, 0.044, 0.066, 0.459, 0.088, 0.741, 0.018, 0.769, 0.101, 0.739, 0.033, 0.756,
    0.045, 0.083, 0.051, 0.017, 0.745, 0.056, 0.752, 0.044, 0.052, 0.467, 0.447, 0.065,
    0.119, 0.042, 0.008, 0.005, 0.463, 0.077, 0.050, 0.521]).reshape(20, 2, 2)


# --- The open question of the angle between the keys (beyond_open_questions; run("open-angle")) ------
@dataclasses.dataclass(frozen=True)
class AngleConfig:
    """Two heads of Eq. (31) trained by stochastic PGD (:func:`slr.sgd.train`, H = 2) on two-location
    regression (Eq. 30) whose two key (``which="k"``) or value (``"v"``) directions meet at an angle phi
    (:func:`slr.task.oracle_at_angle`), ``repeats`` runs per angle, each with its own oracle and start.
    The defaults are Figure 9's settings: d = 80, L = 10, gamma^2 = 1/2, eps = 0.1, batch 5, 100 000
    steps, alpha = 1e-3, lam_t = 2 / (1 + 2e-4 min(t, 25 000)), and the book's experiment: 48 runs at each
    of 90, 60, 45 and 30 degrees. ``sampler`` is passed to sgd.train."""
    phis_deg: tuple = (90.0, 60.0, 45.0, 30.0)
    which: str = "k"
    d: int = 80
    L: int = 10
    gamma: float = math.sqrt(0.5)
    eps: float = 0.1
    batch: int = 5
    steps: int = 100_000
    alpha: float = 1e-3
    lam0: float = 2.0
    lam_decay: float = 2e-4
    lam_freeze: int = 25_000
    repeats: int = 48
    log_every: int = 1000
    n_test: int = 1000
    sampler: str = "coordinates"             # exact in law, free of d (slr.coordinates)

    def validate(self) -> "AngleConfig":
        if self.which not in ("k", "v"):
            raise ValueError(f"which must be 'k' or 'v', got {self.which!r}")
        if self.sampler not in sgd.SAMPLERS:
            raise ValueError(f"sampler must be one of {sgd.SAMPLERS}, got {self.sampler!r}")
        for x in self.phis_deg:
            if not 0 < x <= 90:
                raise ValueError(f"phis_deg must be in (0, 90], got {x!r}")
        for name in ("d", "L", "batch", "steps", "repeats", "log_every", "n_test", "lam_freeze"):
            check_int(name, getattr(self, name))
        for name in ("gamma", "alpha", "lam0"):
            check_positive(name, getattr(self, name))
        check_nonneg("eps", self.eps)
        check_nonneg("lam_decay", self.lam_decay)
        return self


def angle_heads(cfg: AngleConfig, seed: int) -> dict:
    """``cfg.repeats`` runs per angle of :class:`AngleConfig` (angle-major): the :class:`slr.sgd.TrainLog`
    as a dict (overlaps of shape (R, T, H, H), test excess risk (R, T)) and ``phi_deg`` (R,)."""
    k_oracle, k_init, k_train = jax.random.split(jax.random.key(seed), 3)
    phis = np.repeat(np.asarray(cfg.phis_deg, dtype=float), cfg.repeats)
    oracles = task.oracle_at_angle(k_oracle, cfg.d, np.deg2rad(phis), which=cfg.which)
    k0, v0 = pgd.init_sphere(k_init, cfg.d, len(phis), H=2)
    lam = pgd.InverseTime(cfg.lam0, cfg.lam_decay, cfg.lam_freeze)
    log = sgd.train(k_train, k0, v0, *oracles, lam=lam, alpha=cfg.alpha, steps=cfg.steps, batch=cfg.batch,
                    gamma=cfg.gamma, L=cfg.L, eps=cfg.eps, log_every=cfg.log_every, n_test=cfg.n_test,
                    sampler=cfg.sampler)
    return dict(log.to_dict(), phi_deg=phis)
