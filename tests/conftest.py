"""Shared test setup: JAX's persistent compilation cache, and a private result cache per test.

The compilation cache lives in ``_build/jax-cache`` of the repository (never committed; ``make clean``
removes it), so a second run of the suite reuses every compiled program instead of compiling it again:
``min_compile_time_secs = 0`` and ``min_entry_size_bytes = 0`` cache the small programs too, which are
most of this suite's. ``SLR_JAX_CACHE=0`` turns it off (to time a cold run); ``JAX_COMPILATION_CACHE_DIR``
(set by the Makefile for the chapters too) takes precedence over the default directory.

Compilation, not arithmetic, is most of this suite's time (a cold run compiles about 2,000 XLA programs,
most of them small eager operations). The tests therefore ask XLA:CPU for its cheapest code generation
(``_FAST_COMPILE``: LLVM at -O0, the classic fusion emitters), which halves the compilation time. The
source under test and the IEEE semantics are the same (no fast-math), but the compiled code may round
differently in the last bit (measured: <= 1e-14 on every output compared), so no test may compare
against arrays computed by another process with other flags. ``SLR_TEST_XLA_OPT=1`` keeps
XLA's default optimisation (e.g. to time the chapters' configuration). ``_FAST_COMPILE`` also asks LLVM to
emit each program as one module (``--xla_cpu_parallel_codegen_split_count=1``; by default XLA:CPU splits it
into modules compiled on several threads): less CPU for the same programs, since the suite's two workers
already keep both cores busy (measured 2026-11-29, cold, pairs in alternation beside other jobs, load 2.5
to 6: test_risk.py with test_pgd.py 34.4 and 33.7 s of CPU against 30.8 and 31.2; test_transformer.py
with test_predictors.py 23.9 and 23.4 against 22.6 and 22.0; test_experiments.py 19.2 and 19.0 against
18.1 and 16.8). It too changes the last bits of some results (trajectories of 40 stochastic steps: up to
1e-9 after the dynamics amplify them), within the process only: the tests compare numbers computed under
the same flags.

For the same reason the suite traces the step loops of the trainers without unrolling them
(``slr.sgd.UNROLL`` and ``slr.pgd.UNROLL``, which ``slr.manifold``'s loop reads, set to 1 by
:func:`_roll_the_step_loops`; exact PGD itself compiles one copy of its step in the chapters too): an
unrolled loop body is compiled once per copy, and the stochastic trainer's programs (``slr.sgd._core``, a
third of this suite's compilation) compile in half the time rolled (measured 2.8 s -> 1.3 s each). A rolled
loop whose chunk length is traced runs ``slr.loop.run_one_copy`` (one copy of the step, remainder included:
the stochastic trainer's full-sampler programs: about 1 to 2 s of CPU less per test that compiles one,
measured under contention); the chapters' unrolled loops never take that branch.
The steps are the same either way: ``test_chapters_unrolling_is_the_rolled_loop`` (``test_sgd.py``) runs
the chapters' unrolling of the trainer and checks it against the rolled loop, and
``test_one_copy_loop_is_run_chunks`` (``test_pgd.py``) checks exact PGD's loop against the unrolled
``slr.loop.run_chunks``. ``SLR_TEST_UNROLL=1`` keeps the chapters' unrolling everywhere.

Where a test's time goes: ``-p tests.jax_profile`` (``tests/jax_profile.py``) writes each test's CPU
seconds, its XLA compilation, tracing and lowering seconds and the number of programs it compiled.
"""
import os
from pathlib import Path

_FAST_COMPILE = ("--xla_backend_optimization_level=0 --xla_cpu_use_fusion_emitters=false "
                 "--xla_cpu_parallel_codegen_split_count=1")
if (os.environ.get("SLR_TEST_XLA_OPT", "0") in ("0", "false", "no", "")
        and _FAST_COMPILE not in os.environ.get("XLA_FLAGS", "")):  # xdist workers inherit it
    # before jax creates its CPU backend (which reads XLA_FLAGS once)
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {_FAST_COMPILE}".strip()

import jax  # noqa: E402
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

CHAPTER_UNROLL = {}  # module -> (name, the chapters' unrolling), for the tests that run it


def _roll_the_step_loops():
    from slr import pgd, sgd
    for mod, name in ((sgd, "UNROLL"), (pgd, "UNROLL")):
        CHAPTER_UNROLL[mod.__name__] = (name, getattr(mod, name))
        if os.environ.get("SLR_TEST_UNROLL", "0") in ("0", "false", "no", ""):
            setattr(mod, name, 1)


_roll_the_step_loops()


@pytest.fixture(autouse=True)
def no_chapter():
    """Every test starts outside a chapter: a test that calls slr.claims.start leaves no chapter behind,
    so the figures later tests draw are never recorded as a chapter's (slr.figcheck)."""
    from slr import claims
    claims.stop()
    yield
    claims.stop()


_TRACED = []  # the names of the functions JAX traces (one per jit cache miss), from public jax.monitoring
jax.monitoring.register_event_duration_secs_listener(
    lambda event, secs, fun_name=None, **_: _TRACED.append(fun_name)
    if event == "/jax/core/compile/jaxpr_trace_duration" else None)


@pytest.fixture
def traced():
    """The names of the functions JAX traces from here to the test's end, in order (a list the test may
    clear): a jitted function that is not recompiled does not appear."""
    _TRACED.clear()
    return _TRACED


@pytest.fixture
def result_cache(tmp_path, monkeypatch):
    """An empty, private slr result cache (slr.cache) for one test: its directory."""
    where = tmp_path / "slr-cache"
    monkeypatch.setenv("SLR_CACHE_DIR", str(where))
    monkeypatch.setenv("SLR_CACHE", "1")
    return where


# Under `-n N --dist loadfile` a worker takes the next file when it is done with one: starting with the
# costliest files keeps the workers busy to the end instead of leaving one of them alone with a large file
# (longest-processing-time first). The order is the files' seconds in a cold run of the suite (2 workers,
# 2026-11-29: each file's test time with a filled compilation cache plus its XLA compilation time in a run
# with an empty one; test_coordinates.py 29 s, test_sgd.py 26 s ... test_tuning.py 1 s). test_nbval_cache.py,
# test_probe.py and test_kernel_wakeup.py (6 s, a kernel's start) wait on a subprocess or on imports (little
# CPU, long wall), so they start early, while the other worker computes. A file not listed (under 1 s) comes
# last; so did test_coordinates.py, the costliest, until 2026-11-29, when it was missing from this list. xdist keeps this order only with
# `--no-loadscope-reorder` (pyproject.toml): by default it sorts files by their number of tests.
COSTLIEST_FIRST = ("test_coordinates.py", "test_sgd.py", "test_reduced.py", "test_transformer.py", "test_risk.py",
                    "test_nbval_cache.py", "test_kernel_wakeup.py",
                    "test_baselines.py", "test_experiments.py", "test_appendix_f.py",
                    "test_recovery.py", "test_task.py", "test_pgd.py", "test_montecarlo.py", "test_icl.py",
                    "test_probe.py", "test_predictors.py", "test_landscape.py", "test_reduced_projections.py",
                    "test_manifold.py", "test_bench_authors.py", "test_icl_check.py", "test_gaussian.py",
                    "test_multihead.py", "test_validation.py", "test_nbval_order.py", "test_exercises.py",
                    "test_tuning.py", "test_overlaps.py", "test_plotting.py", "test_cache.py")
#: the files under 1 s in that run (the unit suite's every other file; test_browser.py runs apart):
#: ``tests/test_nbval_order.py`` checks that each test file is in one of the two lists
CHEAP_LAST = ("test_figcheck.py", "test_threefry.py", "test_book.py", "test_claims.py", "test_book_hygiene.py",
              "test_setup_cells.py", "test_diagrams.py", "test_reading_time.py", "test_binder_env.py",
              "test_colab_env.py", "test_ledger.py", "test_browser.py")


def pytest_collection_modifyitems(items):
    rank = {name: i for i, name in enumerate(COSTLIEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: order within a file kept
