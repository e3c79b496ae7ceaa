"""Linear probing of the [CLS] token of a pretrained encoder: the motivating experiment of Section 2.2.

Chapter ``book/probe.ipynb`` (Figure 1(b) and Appendix E.1 of the paper). Three steps:

1. :func:`sentence_sets` (:mod:`slr.sentences`, re-exported here with its word lists): the five sets of
   Appendix E.1 (train, test, OOD tokens, OOD structure, OOD structure + tokens), of sizes
   15552 / 4608 / 3072 / 144 / 96, each sentence labelled by one sentiment adjective whose position
   varies: the single informative token.
2. :func:`slr.encoder.load_encoder` loads a Hugging Face encoder offline (safetensors only);
   :func:`slr.encoder.cls_states` returns the hidden state of [CLS] at every layer,
   ``(n, num_layers + 1, width)``, memoised on disk by :func:`cached_cls_states` (both re-exported here).
3. :func:`probe_accuracies`: one logistic regression per layer fitted on the train set, its accuracy on
   every set, ``(num_layers + 1, num_sets)``; :func:`cached_probe_accuracies` memoises steps 2 and 3,
   :func:`probe_fit` the fit with its predictions on given states and labels (e.g. shuffled ones).

The encoders it can load are listed in :mod:`slr.encoder`.
"""
from __future__ import annotations

import os
import threading
import warnings
from dataclasses import dataclass
from typing import Mapping

import numpy as np

from . import _validate, cache
from ._threads import one_blas_thread, pool_map
from .encoder import (DEFAULT_ENCODER, cls_states, encoder_fingerprint, load_encoder, minilm_dir,  # noqa: F401
                      resolve_encoder)
from .sentences import (SENTIMENT, SENTIMENT_OOD, SET_NAMES, SET_SIZES, TEMPLATES, TEST_WORDS,  # noqa: F401
                        TRAIN_WORDS, SentenceSet, build, sentence_sets)

__all__ = ["SENTIMENT", "SENTIMENT_OOD", "TRAIN_WORDS", "TEST_WORDS", "TEMPLATES", "SET_NAMES", "SET_SIZES",
           "SentenceSet", "build", "sentence_sets", "DEFAULT_ENCODER", "minilm_dir", "resolve_encoder",
           "encoder_fingerprint", "load_encoder", "cls_states", "cached_cls_states", "probe_accuracies",
           "probe_fit", "cached_probe_accuracies", "random_direction_aucs", "ProbeConfig", "layer_accuracies",
           "encoder_inputs"]


# --- The [CLS] states, memoised ------------------------------------------------------------------
def cached_cls_states(sets: Mapping[str, SentenceSet], encoder: str | os.PathLike = DEFAULT_ENCODER, *,
                      allow_download: bool = False, batch_size: int = 256,
                      use_cache: bool | None = None) -> dict[str, np.ndarray]:
    """:func:`slr.encoder.cls_states` of every set in one pass (one model load), memoised on disk, keyed by the
    encoder's fingerprint and the sets. Returns set name -> array ``(len(set), num_layers + 1, width)``."""
    names = list(sets)

    def compute():
        tokenizer, model = load_encoder(encoder, allow_download=allow_download)
        allsent = [s for n in names for s in sets[n].sentences]
        states = cls_states(allsent, tokenizer, model, batch_size=batch_size)
        bounds = np.cumsum([0] + [len(sets[n]) for n in names])
        return {n: states[bounds[i]:bounds[i + 1]] for i, n in enumerate(names)}

    config = {"encoder": encoder_fingerprint(encoder), "sets": dict(sets), "batch_size": batch_size}
    return cache.memoize("probe-cls", config, compute, use_cache=use_cache, modules=("probe",))


def cached_probe_accuracies(sets: Mapping[str, SentenceSet], encoder: str | os.PathLike = DEFAULT_ENCODER, *,
                            C: float = 1.0, max_iter: int = 2000, use_cache: bool | None = None,
                            **encode) -> dict[str, np.ndarray]:
    """:func:`probe_accuracies` on :func:`cached_cls_states` ``(sets, encoder, **encode)``, memoised on
    the encoder's fingerprint, the sets, ``C`` and ``max_iter`` (the states are read only on a miss)."""
    def compute():
        states = cached_cls_states(sets, encoder, use_cache=use_cache, **encode)
        return probe_accuracies(states, {n: s.labels for n, s in sets.items()}, C=C, max_iter=max_iter)

    config = {"encoder": encoder_fingerprint(encoder), "sets": dict(sets), "C": C, "max_iter": max_iter}
    return cache.memoize("probe-accuracy", config, compute, use_cache=use_cache, modules=("probe",))


# --- The probe -----------------------------------------------------------------------------------
def probe_accuracies(states: Mapping[str, np.ndarray], labels: Mapping[str, np.ndarray], *,
                     train: str = "train", C: float = 1.0, max_iter: int = 2000, layers=None,
                     decisions: bool = False) -> dict[str, np.ndarray]:
    """One logistic regression per layer on the [CLS] states of ``train``; its accuracy on every set.

    Features are standardised with the mean and standard deviation of the train set (a constant
    feature keeps scale 1), then ``sklearn.linear_model.LogisticRegression(C=C, max_iter=max_iter)``
    (L2 penalty, lbfgs) is fitted, on one BLAS thread (restored after): its matrix-vector products
    and L-BFGS updates are too small to gain from a second thread and lose much to thread hand-offs
    (5x the CPU time on a busy 2-core machine), and the fit is the same bit for bit. Two layers are
    fitted at once, one per core (the chapter's shuffled-label control, 6 layers: 16.7 s -> 12.2 s,
    the same numbers; 2026-11-29). Returns
    ``{"accuracy": (num_layers + 1, num_sets), "auc": same shape, "sets": names,
    "converged": (num_layers + 1,)}``, rows = layers, columns in the order of ``states``.
    The AUC of the probe's decision values ignores its threshold: it measures whether the direction
    still ranks the sentences where a shifted threshold puts them all in one class.

    ``layers`` (default: all) fits the probe at these layers only; the rows then follow ``layers``
    and a key ``"layers"`` gives them. The training labels are ``labels[train]``, whatever they are
    (a shuffled copy fits the shuffled-label control). ``decisions=True`` also returns, for every
    set ``n``, ``"predicted_" + n`` and ``"decision_" + n``, ``(len(layers), len(states[n]))``: the
    probe's classes and decision values for each sentence (:func:`probe_fit` memoises them).
    """
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score
    from sklearn.preprocessing import StandardScaler

    _validate.check_positive("C", C)
    max_iter = _validate.check_int("max_iter", max_iter, 1)
    if train not in states:
        raise ValueError(f"train={train!r} is not one of the sets {list(states)}")
    names = list(states)
    n_all = states[train].shape[1]
    fit_layers = list(range(n_all)) if layers is None else [
        _validate.check_int("layers", layer, 0, n_all - 1) for layer in layers]
    if not fit_layers:
        raise ValueError("layers must name at least one layer")
    n_layers = len(fit_layers)
    acc, auc = np.zeros((2, n_layers, len(names)))
    converged = np.zeros(n_layers, dtype=bool)
    predicted = {n: np.zeros((n_layers, len(states[n])), dtype=np.asarray(labels[train]).dtype)
                 for n in names} if decisions else {}
    decision = {n: np.zeros((n_layers, len(states[n]))) for n in names} if decisions else {}
    def fit(layer):  # one layer's probe: [(its classes, its decision values) on each set]
        x_train = states[train][:, layer, :].astype(np.float64)
        scaler = StandardScaler().fit(x_train)
        clf = LogisticRegression(C=C, max_iter=max_iter)
        warned.layer = layer
        clf.fit(scaler.transform(x_train), labels[train])
        xs = [scaler.transform(states[n][:, layer, :].astype(np.float64)) for n in names]
        return [(clf.predict(x), clf.decision_function(x)) for x in xs]

    # The layers' fits on the two cores (pool_map; the numbers of one at a time). catch_warnings is not
    # thread-safe, so one recorder, set up before the threads, notes the layer each ConvergenceWarning
    # comes from (thread-local); a warning from a thread that is not fitting a layer here is shown.
    warned, unconverged = threading.local(), set()
    with one_blas_thread(), warnings.catch_warnings():
        warnings.simplefilter("always", ConvergenceWarning)
        show = warnings.showwarning
        warnings.showwarning = lambda message, category, *a, **k: (
            unconverged.add(warned.layer)
            if issubclass(category, ConvergenceWarning) and hasattr(warned, "layer")
            else show(message, category, *a, **k))
        fits = pool_map(fit, fit_layers)
    for row, (layer, per_set) in enumerate(zip(fit_layers, fits)):
        converged[row] = layer not in unconverged
        for j, (n, (pred, score)) in enumerate(zip(names, per_set)):
            acc[row, j] = np.mean(pred == labels[n])
            auc[row, j] = roc_auc_score(labels[n], score)
            if decisions:
                predicted[n][row], decision[n][row] = pred, score
    out = {"accuracy": acc, "auc": auc, "sets": np.asarray(names), "converged": converged}
    if layers is not None:
        out["layers"] = np.asarray(fit_layers)
    out.update({f"predicted_{n}": p for n, p in predicted.items()})
    out.update({f"decision_{n}": d for n, d in decision.items()})
    return out


@cache.memoized(modules=("probe",))
def probe_fit(states: Mapping[str, np.ndarray], labels: Mapping[str, np.ndarray], *,
              train: str = "train", C: float = 1.0, max_iter: int = 2000,
              layers=None) -> dict[str, np.ndarray]:
    """:func:`probe_accuracies` with ``decisions=True`` and ``"layers"`` always given, memoised on disk
    (:func:`slr.cache.memoized`) on *all* its inputs: every array of ``states`` and ``labels`` by its
    bytes (so another shuffle of the training labels is another result), ``train``, ``C``,
    ``max_iter``, ``layers`` and the code. Takes one more keyword, ``use_cache``."""
    if train not in states:        # before reading its shape: the same error as probe_accuracies
        raise ValueError(f"train={train!r} is not one of the sets {list(states)}")
    n_all = states[train].shape[1]
    layers = list(range(n_all)) if layers is None else layers
    return probe_accuracies(states, labels, train=train, C=C, max_iter=max_iter, layers=layers,
                            decisions=True)


def random_direction_aucs(states: Mapping[str, np.ndarray], labels: Mapping[str, np.ndarray], pairs, *,
                          train: str = "train", n_directions: int = 1000, seed: int = 0) -> np.ndarray:
    """The AUCs of random directions, the baseline for a probe's AUC, at each (layer, set) of ``pairs``.

    The directions are ``n_directions`` standard normal vectors (the same ones at every pair, drawn with
    ``numpy.random.default_rng(seed)``) in the space the probe of :func:`probe_accuracies` is fitted in:
    the [CLS] states of the layer standardised with the train set's mean and standard deviation. Each
    direction's decision values ``x @ w`` are scored against the labels by the area under the ROC curve
    (ties get average ranks, as ``sklearn.metrics.roc_auc_score``). Returns ``(len(pairs),
    n_directions)``: the share of a row at or above a probe's AUC is the one-sided p-value of "the
    probe's direction orders the sentences no better than a random direction".
    """
    from scipy.stats import rankdata
    from sklearn.preprocessing import StandardScaler

    n_directions = _validate.check_int("n_directions", n_directions, 1)
    seed = _validate.check_int("seed", seed, 0)
    if train not in states:
        raise ValueError(f"train={train!r} is not one of the sets {list(states)}")
    n_layers, width = states[train].shape[1:]
    pairs = [(layer, name) for layer, name in pairs]
    for layer, name in pairs:
        if name not in states:
            raise ValueError(f"pairs: the set {name!r} is not one of {list(states)}")
        _validate.check_int("pairs (layer)", layer, 0, n_layers - 1)
        if set(np.unique(labels[name])) != {-1, 1}:
            raise ValueError(f"labels[{name!r}] must hold both labels -1 and 1")
    w = np.random.default_rng(seed).standard_normal((width, n_directions))
    out = np.empty((len(pairs), n_directions))
    scalers = {layer: StandardScaler().fit(states[train][:, layer, :].astype(np.float64))
               for layer in {layer for layer, _ in pairs}}
    for i, (layer, name) in enumerate(pairs):
        scores = scalers[layer].transform(states[name][:, layer, :].astype(np.float64)) @ w
        pos = np.asarray(labels[name]) == 1
        n1, n0 = int(pos.sum()), int((~pos).sum())
        out[i] = (rankdata(scores, axis=0)[pos].sum(axis=0) - n1 * (n1 + 1) / 2) / (n1 * n0)
    return out


# --- Figure 1(b) as a named experiment (slr.experiments: run("fig1b")) ---------------------------
@dataclass(frozen=True)
class ProbeConfig:
    """Figure 1(b): the probe of :func:`cached_probe_accuracies` on the five sets of
    :func:`sentence_sets`, layer by layer, for ``encoder`` (the paper: ``"bert-base-uncased"``), with
    the logistic regression's ``C`` and ``max_iter`` and the encoder's ``batch_size``."""
    encoder: str = DEFAULT_ENCODER
    C: float = 1.0
    max_iter: int = 2000
    batch_size: int = 256

    def validate(self) -> "ProbeConfig":
        resolve_encoder(self.encoder)
        _validate.check_positive("C", self.C)
        _validate.check_int("max_iter", self.max_iter)
        _validate.check_int("batch_size", self.batch_size)
        return self


def layer_accuracies(cfg: ProbeConfig, seed: int) -> dict:
    """:func:`cached_probe_accuracies` for :class:`ProbeConfig` (``seed`` unused: the fit is
    deterministic): ``accuracy`` and ``auc`` (num_layers + 1, 5 sets), ``sets``, ``converged``."""
    return cached_probe_accuracies(sentence_sets(), cfg.encoder, C=cfg.C, max_iter=cfg.max_iter,
                                   batch_size=cfg.batch_size)


def encoder_inputs(cfg: ProbeConfig) -> dict:
    """What a :class:`ProbeConfig`'s result reads besides the code: the encoder's weights, by
    :func:`encoder_fingerprint` (so that ``run("fig1b")`` recomputes when they change)."""
    return {"encoder": encoder_fingerprint(cfg.encoder)}
