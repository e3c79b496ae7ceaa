"""Shared test setup: JAX's persistent compilation cache, and a private result cache per test.

The compilation cache lives in ``_build/jax-cache`` of the repository (never committed; ``make clean``
removes it), so a second run of the suite reuses every compiled program instead of compiling it again:
``min_compile_time_secs = 0`` and ``min_entry_size_bytes = 0`` cache the small programs too, which are
most of this suite's. ``SLR_JAX_CACHE=0`` turns it off (to time a cold run); ``JAX_COMPILATION_CACHE_DIR``
(set by the Makefile for the chapters too) takes precedence over the default directory.
"""
import os
from pathlib import Path

import jax
import pytest

REPO = Path(__file__).resolve().parents[1]


def _enable_compilation_cache():
    if os.environ.get("SLR_JAX_CACHE", "1") in ("0", "false", "no", ""):
        return
    where = os.environ.get("JAX_COMPILATION_CACHE_DIR") or str(REPO / "_build" / "jax-cache")
    jax.config.update("jax_compilation_cache_dir", where)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


_enable_compilation_cache()


@pytest.fixture
def result_cache(tmp_path, monkeypatch):
    """An empty, private slr result cache (slr.cache) for one test: its directory."""
    where = tmp_path / "slr-cache"
    monkeypatch.setenv("SLR_CACHE_DIR", str(where))
    monkeypatch.setenv("SLR_CACHE", "1")
    return where
