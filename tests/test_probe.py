"""slr.probe and slr.encoder: the sentence sets of Appendix E.1, the offline encoder loading path and its
[CLS] states (slr.encoder), the cache round trip (slr.probe)."""
import json
import warnings
from collections import Counter

import numpy as np
import pytest

from slr import encoder, probe


@pytest.fixture(scope="module")
def sets():
    return probe.sentence_sets()


def test_set_sizes_are_the_papers(sets):
    assert list(sets) == list(probe.SET_NAMES)
    assert {n: len(s) for n, s in sets.items()} == probe.SET_SIZES
    assert probe.SET_SIZES == {"train": 15552, "test": 4608, "ood_tokens": 3072,
                               "ood_structure": 144, "ood_structure_tokens": 96}


def test_labels_are_balanced(sets):
    for name, s in sets.items():
        assert set(np.unique(s.labels)) == {-1, 1}, name
        assert int(np.sum(s.labels == 1)) == len(s) // 2, name


def test_sentences_are_distinct_within_and_across_sets(sets):
    for name, s in sets.items():
        assert len(set(s.sentences)) == len(s), name
    train = set(sets["train"].sentences)
    for name in probe.SET_NAMES[1:]:
        assert not train & set(sets[name].sentences), name


def test_no_double_spaces_and_sentence_shape(sets):
    for s in sets.values():
        for sent in s.sentences[:: max(1, len(s) // 300)]:
            assert "  " not in sent and sent == sent.strip()


def test_label_is_set_by_the_sentiment_word_at_its_template_position(sets):
    # Pattern A: S ends the sentence; pattern B: S follows pronoun/colour (train, test) or pronoun (OOD tokens).
    for name, s in sets.items():
        for sent, y, adj, pat in zip(s.sentences, s.labels, s.sentiment, s.pattern):
            vocab = probe.SENTIMENT_OOD if "tokens" in name else probe.SENTIMENT
            assert vocab[adj] == y
            words = sent.split()
            if pat == "A":
                assert words[-1] == adj
            else:
                assert words[-1] in probe.TRAIN_WORDS["size"] + probe.TEST_WORDS["size"]
                assert adj in words[5:-3]


def test_test_patterns_differ_and_each_holds_half(sets):
    c = Counter(sets["test"].pattern)
    assert c == {"A": 2304, "B": 2304}
    assert Counter(sets["ood_tokens"].pattern) == {"A": 1536, "B": 1536}
    assert Counter(sets["train"].pattern) == {"A": 5184, "B": 10368}


def test_word_choice_splits(sets):
    train_words = set(" ".join(sets["train"].sentences).split())
    for w in ("their", "your", "purple", "gray", "cat", "eagle", "goat", "especially"):
        assert w not in train_words
    for w in probe.SENTIMENT_OOD:
        assert w not in train_words
        assert w not in set(" ".join(sets["test"].sentences).split())
    assert all(s.startswith("Hello, how are you? Good evening,") for s in sets["ood_structure"].sentences)


def test_build_rejects_an_unknown_slot():
    with pytest.raises(ValueError, match="slot"):
        probe.build(("<nope>", "S"), probe.TRAIN_WORDS, probe.SENTIMENT)


def test_resolve_encoder_rejects_empty():
    with pytest.raises(ValueError, match="encoder"):
        encoder.resolve_encoder("")


def test_packaged_minilm_is_located():
    d = encoder.minilm_dir()
    assert (d / "model.safetensors").exists() and (d / "vocab.txt").exists()
    cfg = json.loads((d / "config.json").read_text())
    assert cfg["num_hidden_layers"] == 6 and cfg["hidden_size"] == 384


# --- the offline loading path on a tiny random BERT ---------------------------------------------------
WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "city", "is", "nice", "mean", "my", "dog",
         "very", ".", ",", "blue"]


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory):
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    d = tmp_path_factory.mktemp("tiny-bert")
    (d / "vocab.txt").write_text("\n".join(WORDS) + "\n")
    tok = BertTokenizerFast(vocab_file=str(d / "vocab.txt"), do_lower_case=True)
    tok.save_pretrained(d)
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=len(WORDS), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=32, max_position_embeddings=64)
    BertModel(cfg).eval().save_pretrained(d, safe_serialization=True)
    assert (d / "model.safetensors").exists()
    assert not list(d.glob("*.bin"))
    return d


def test_loading_and_encoding_leave_the_process_settings_alone(tiny_bert):
    import os

    import torch
    from transformers.utils import logging as hf_logging

    from huggingface_hub import utils as hub_utils

    env, threads, level = dict(os.environ), torch.get_num_threads(), hf_logging.get_verbosity()
    bars = hf_logging.is_progress_bar_enabled(), hub_utils.are_progress_bars_disabled()
    tok, model = encoder.load_encoder(tiny_bert)
    encoder.cls_states(["the city is nice"], tok, model, num_threads=1)
    assert dict(os.environ) == env
    assert torch.get_num_threads() == threads and hf_logging.get_verbosity() == level
    assert (hf_logging.is_progress_bar_enabled(), hub_utils.are_progress_bars_disabled()) == bars


def test_loading_shows_no_progress_bar(tiny_bert, capfd):
    """Nothing written to stdout or stderr while the encoder loads (the probe chapter's page showed
    Hugging Face "Loading weights" bars)."""
    encoder.load_encoder(tiny_bert)
    out, err = capfd.readouterr()
    assert "%|" not in out + err and "Loading" not in out + err, (out + err)[:300]


def test_tiny_bert_loads_offline_and_gives_cls_states(tiny_bert):
    tok, model = encoder.load_encoder(tiny_bert)
    sents = ["The city is nice.", "my very blue dog is mean", "The city is nice. my dog is very nice"]
    h = encoder.cls_states(sents, tok, model, batch_size=2)
    assert h.shape == (3, 3, 16) and h.dtype == np.float32
    # Layer 0: the [CLS] input embedding does not depend on the sentence.
    np.testing.assert_allclose(h[:, 0], np.broadcast_to(h[:1, 0], h[:, 0].shape), atol=1e-6)
    assert np.ptp(h[:, 2], axis=0).max() > 1e-4
    # Padding and length sorting do not change the states: one sentence at a time gives the same rows.
    for i, s in enumerate(sents):
        np.testing.assert_allclose(encoder.cls_states([s], tok, model)[0], h[i], atol=1e-5)


def test_bert_cls_is_the_whole_model_bit_for_bit(tiny_bert, monkeypatch):
    """The hand-made padding is the tokenizer's, and the [CLS]-only last block gives the states of the
    whole model run on the tokenizer's padded batch, with and without padding in the batch."""
    import torch

    tok, model = encoder.load_encoder(tiny_bert)
    assert encoder.is_bert(model)
    for sents in (["The city is nice.", "my very blue dog is mean", "the dog . , is nice very mean"],
                  ["the city is nice", "the city is mean"]):
        ref = tok(sents, padding=True, return_tensors="pt")
        enc = tok(sents, return_token_type_ids=True)
        mine = encoder.padded(enc["input_ids"], enc["token_type_ids"], tok.pad_token_id, "right")
        for key in ("input_ids", "token_type_ids", "attention_mask"):
            assert torch.equal(mine[key], ref[key]), key
        with torch.inference_mode():
            whole = torch.stack([h[:, 0] for h in model(**ref, output_hidden_states=True).hidden_states], 1)
            mine_cls, whole = encoder.bert_cls(model, mine).numpy(), whole.numpy()
            # every layer but the last bit for bit; the last to float32 rounding (its GEMMs have
            # fewer rows, which may select another kernel: exact on the chapter's batches)
            np.testing.assert_array_equal(mine_cls[:, :-1], whole[:, :-1])
            np.testing.assert_allclose(mine_cls, whole, rtol=0, atol=1e-6 * np.abs(whole).max())
            assert not np.allclose(mine_cls[:, -1], whole[:, -2], atol=1e-3)
    # cls_states: the BERT path equals the whole-model path, on one thread or two
    sents = ["The city is nice.", "my very blue dog is mean", "the dog is nice", "very mean", "my city"]
    fast = encoder.cls_states(sents, tok, model, batch_size=2, num_threads=2)
    np.testing.assert_array_equal(encoder.cls_states(sents, tok, model, batch_size=2, num_threads=1), fast)
    # a batch in chunks padded to the batch's width: the states of the batch run whole
    monkeypatch.setattr(encoder, "CHUNK", 1)
    chunked = encoder.cls_states(sents, tok, model, batch_size=2, num_threads=2)
    np.testing.assert_array_equal(chunked[:, :-1], fast[:, :-1])
    np.testing.assert_allclose(chunked, fast, rtol=0, atol=1e-6 * np.abs(fast).max())
    monkeypatch.setattr(encoder, "is_bert", lambda model: False)
    whole = encoder.cls_states(sents, tok, model, batch_size=2)
    np.testing.assert_array_equal(whole[:, :-1], fast[:, :-1])
    np.testing.assert_allclose(whole, fast, rtol=0, atol=1e-6 * np.abs(whole).max())


def test_an_older_transformers_runs_the_whole_model(tiny_bert, monkeypatch):
    """bert_cls calls transformers 5 internals: with an older release (e.g. a Colab's) the encoder runs
    whole (is_bert False), as with any other model."""
    import transformers

    _, model = encoder.load_encoder(tiny_bert)
    assert encoder.is_bert(model)
    monkeypatch.setattr(transformers, "__version__", "4.57.1")
    assert not encoder.is_bert(model)


def test_fingerprint_tracks_the_weights(tiny_bert, tmp_path):
    import shutil

    f1 = encoder.encoder_fingerprint(tiny_bert)
    assert f1 == encoder.encoder_fingerprint(str(tiny_bert))
    other = tmp_path / "copy"
    shutil.copytree(tiny_bert, other)
    assert encoder.encoder_fingerprint(other) == f1
    with open(other / "model.safetensors", "ab") as f:
        f.write(b"\0")
    assert encoder.encoder_fingerprint(other) != f1
    assert encoder.encoder_fingerprint("bert-base-uncased") == "hub:bert-base-uncased"


class CountingLoader(list):
    def __init__(self, load):
        super().__init__()
        self.load = load

    def __call__(self, *args, **kwargs):
        self.append(1)
        return self.load(*args, **kwargs)


def test_cache_round_trip(tiny_bert, tmp_path, monkeypatch):
    monkeypatch.setenv("SLR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("SLR_CACHE", "1")
    small = {n: probe.SentenceSet(n, s.sentences[:5], s.labels[:5], s.sentiment[:5], s.pattern[:5])
             for n, s in probe.sentence_sets().items() if n in ("train", "ood_structure")}
    calls = CountingLoader(probe.load_encoder)     # an object, not a closure over a list: data a compute
    monkeypatch.setattr(probe, "load_encoder", calls)  # function reads enters its key, and this list grows
    a = probe.cached_cls_states(small, tiny_bert)
    b = probe.cached_cls_states(small, tiny_bert)
    assert len(calls) == 1, "the second call must come from the cache"
    assert set(a) == set(small) and a["train"].shape == (5, 3, 16)
    for n in a:
        np.testing.assert_array_equal(a[n], b[n])
    assert len(list((tmp_path / "cache").glob("probe-cls-*.npz"))) == 1
    # the whole pipeline: computed once, then read back bit for bit; another C is another result
    r1 = probe.cached_probe_accuracies(small, tiny_bert, max_iter=50)
    r2 = probe.cached_probe_accuracies(small, tiny_bert, max_iter=50)
    fresh = probe.probe_accuracies(a, {n: s.labels for n, s in small.items()}, max_iter=50)
    for k in fresh:
        np.testing.assert_array_equal(r1[k], fresh[k])
        np.testing.assert_array_equal(r2[k], fresh[k])
    probe.cached_probe_accuracies(small, tiny_bert, C=0.5, max_iter=50)
    assert len(list((tmp_path / "cache").glob("probe-accuracy-*.npz"))) == 2
    assert len(calls) == 1, "the states come from the cache"


def test_probe_accuracies_on_synthetic_states():
    rng = np.random.default_rng(0)
    n, d = 400, 8
    y = np.repeat([-1, 1], n // 2)
    x = rng.normal(size=(n, 2, d))
    x[:, 0, :] = 1.0                       # layer 0: constant, like the [CLS] input embedding
    x[:, 1, 0] += 3 * y                    # layer 1: separable along one direction
    states = {"train": x, "test": x[::2]}
    labels = {"train": y, "test": y[::2]}
    out = probe.probe_accuracies(states, labels)
    acc = out["accuracy"]
    assert acc.shape == (2, 2) and list(out["sets"]) == ["train", "test"]
    assert acc[0, 0] == pytest.approx(0.5) and acc[1, 0] > 0.99 and acc[1, 1] > 0.99
    assert out["auc"][0, 0] == pytest.approx(0.5) and out["auc"][1, 1] > 0.99
    # Shifting the test states along the signal puts every sentence in one class: chance accuracy,
    # but the ranking, hence the AUC, is unchanged.
    moved = x.copy()
    moved[:, 1, 0] += 100.0
    shifted = probe.probe_accuracies({"train": x, "test": moved}, {"train": y, "test": y})
    assert shifted["accuracy"][1, 1] == pytest.approx(0.5)
    assert shifted["auc"][1, 1] > 0.99
    from threadpoolctl import threadpool_info
    blas = lambda: [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]
    before = blas()
    probe.probe_accuracies(states, labels)
    assert blas() == before, "the BLAS thread count is restored"
    with pytest.raises(ValueError, match="train"):
        probe.probe_accuracies(states, labels, train="nope")
    with pytest.raises(ValueError, match="C"):
        probe.probe_accuracies(states, labels, C=0.0)


def test_random_direction_aucs_are_roc_aucs_of_random_directions():
    """Each row holds the AUCs of the same random directions in the train-standardised space; they are
    sklearn's roc_auc_score of x @ w, centred on 1/2 when the states ignore the labels, and spread
    far from 1/2 when the labels move the states along a direction of large variance (the control)."""
    from sklearn.metrics import roc_auc_score
    from sklearn.preprocessing import StandardScaler
    rng = np.random.default_rng(1)
    n, d = 300, 6
    y = np.repeat([-1, 1], n // 2)
    x = rng.normal(size=(n, 2, d))
    x[:, 1, 0] += 4 * y                                   # layer 1: the labels move coordinate 0
    states, labels = {"train": x, "test": x[::3]}, {"train": y, "test": y[::3]}
    pairs = [(0, "test"), (1, "test"), (1, "train")]
    a = probe.random_direction_aucs(states, labels, pairs, n_directions=400, seed=3)
    assert a.shape == (3, 400) and np.all((a >= 0) & (a <= 1))
    w = np.random.default_rng(3).standard_normal((d, 400))
    for i, (layer, name) in enumerate(pairs):
        z = StandardScaler().fit(x[:, layer, :]).transform(states[name][:, layer, :]) @ w[:, :5]
        assert a[i, :5] == pytest.approx([roc_auc_score(labels[name], z[:, j]) for j in range(5)])
    # layer 0 ignores the labels: AUCs centred on 1/2 (std of the mean of 400 AUCs < 0.01)
    assert abs(a[0].mean() - 0.5) < 0.04 and np.mean(np.abs(a[0] - 0.5) > 0.25) < 0.05
    # layer 1: directions that lean on coordinate 0 order the sentences (expected share about 0.3;
    # 400 directions: standard error 0.023)
    assert np.mean(np.abs(a[1] - 0.5) > 0.25) > 0.2
    same = probe.random_direction_aucs(states, labels, pairs[:1], n_directions=400, seed=3)
    assert np.array_equal(same[0], a[0])                   # same seed, same directions
    for kw, name in (({"n_directions": 0}, "n_directions"), ({"seed": -1}, "seed"),
                     ({"train": "nope"}, "train")):
        with pytest.raises(ValueError, match=name):
            probe.random_direction_aucs(states, labels, pairs, **kw)
    for bad in ([(2, "test")], [(0, "nope")]):
        with pytest.raises(ValueError, match="pairs"):
            probe.random_direction_aucs(states, labels, bad)
    with pytest.raises(ValueError, match="labels"):
        probe.random_direction_aucs(states, {**labels, "test": np.ones(100)}, [(0, "test")])


def test_probe_convergence_is_read_layer_by_layer():
    """The layers are fitted on two threads: each layer's convergence flag is its own. A layer of
    constant features converges at once (balanced labels: the intercept 0 is optimal); the noisy and the
    informative layers need more L-BFGS iterations than 3. No ConvergenceWarning reaches the caller.
    Control: with enough iterations every layer converges."""
    rng = np.random.default_rng(2)
    n, d = 300, 5
    y = np.repeat([-1, 1], n // 2)
    x = rng.normal(size=(n, 3, d))
    x[:, 2, 0] += 2 * y
    x[:, 1, :] = 1.0                                          # layer 1: constant features
    states, labels = {"train": x, "test": x[::2]}, {"train": y, "test": y[::2]}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        short = probe.probe_accuracies(states, labels, max_iter=3)
    assert list(short["converged"]) == [False, True, False] and not caught
    assert probe.probe_accuracies(states, labels)["converged"].all()


def test_probe_fit_is_the_probe_at_given_layers_memoised_on_its_labels(tmp_path, monkeypatch):
    """probe_fit: probe_accuracies at the given layers (rows bit for bit those of the full fit), with
    each sentence's class and decision value, memoised on all its inputs: a second call reads the
    cache, a shuffle of the training labels (the chapter's control) is another result."""
    monkeypatch.setenv("SLR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("SLR_CACHE", "1")
    rng = np.random.default_rng(2)
    n, d = 300, 5
    y = np.repeat([-1, 1], n // 2)
    x = rng.normal(size=(n, 3, d))
    x[:, 2, 0] += 2 * y
    states, labels = {"train": x, "test": x[::2]}, {"train": y, "test": y[::2]}
    full = probe.probe_accuracies(states, labels)
    assert "layers" not in full and "decision_test" not in full     # the default output is unchanged
    calls = CountingLoader(probe.probe_accuracies)
    monkeypatch.setattr(probe, "probe_accuracies", calls)
    fit = probe.probe_fit(states, labels, layers=[2, 0])
    assert list(fit["layers"]) == [2, 0] and fit["accuracy"].shape == (2, 2)
    for k in ("accuracy", "auc", "converged"):
        np.testing.assert_array_equal(fit[k], full[k][[2, 0]])
    for name in states:
        assert fit[f"decision_{name}"].shape == fit[f"predicted_{name}"].shape == (2, len(states[name]))
        np.testing.assert_array_equal(fit[f"predicted_{name}"], np.where(fit[f"decision_{name}"] > 0, 1, -1))
        np.testing.assert_array_equal(np.mean(fit[f"predicted_{name}"] == labels[name], axis=1),
                                      fit["accuracy"][:, list(states).index(name)])
    again = probe.probe_fit(states, labels, layers=[2, 0])
    assert len(calls) == 1, "the second call must come from the cache"
    for k in fit:
        np.testing.assert_array_equal(again[k], fit[k])
    shuffled = {**labels, "train": rng.permutation(y)}
    control = probe.probe_fit(states, shuffled, layers=[2, 0])
    assert len(calls) == 2, "other training labels are another result"
    assert not np.array_equal(control["decision_test"], fit["decision_test"])
    assert control["accuracy"][0, 0] < 0.7 < fit["accuracy"][0, 0]    # layer 2, scored on its own labels
    assert np.array_equal(probe.probe_fit(states, labels)["layers"], [0, 1, 2]) and len(calls) == 3
    for bad in ([3], [-1], []):
        with pytest.raises(ValueError, match="layers"):
            probe.probe_accuracies(states, labels, layers=bad)
    with pytest.raises(ValueError, match="train"):       # a missing train set, before its shape is read
        probe.probe_fit(states, labels, train="missing", layers=[2, 0])
