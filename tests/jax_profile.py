"""Opt-in pytest plugin: where a test's CPU goes. ``-p tests.jax_profile`` appends one line per test to
``$SLR_JAX_PROFILE`` (default ``_build/jax-profile.tsv``): node id, wall seconds, process CPU seconds,
and JAX's own durations (``jax.monitoring``), summed over the test: XLA backend compilation, tracing,
lowering to MLIR, and the number of programs compiled. Run it on a cold compilation cache (an empty
``JAX_COMPILATION_CACHE_DIR``) to see compilation; the durations are wall time, so under contention
read the CPU column. A test that compiles many small programs (eager jnp operations, an eager
``jax.grad``) or one large one (a trainer's program at new static sizes) shows here."""
import collections
import os
import time
from pathlib import Path

import jax.monitoring
import pytest

_KEYS = ("/jax/core/compile/backend_compile_duration", "/jax/core/compile/jaxpr_trace_duration",
         "/jax/core/compile/jaxpr_to_mlir_module_duration")
_total = collections.Counter()
_count = collections.Counter()


def _listen(event, duration, **_):
    _total[event] += duration
    _count[event] += 1


jax.monitoring.register_event_duration_secs_listener(_listen)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    _total.clear()
    _count.clear()
    cpu, wall = time.process_time(), time.perf_counter()
    yield
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    out = Path(os.environ.get("SLR_JAX_PROFILE") or Path(__file__).resolve().parents[1] / "_build" / "jax-profile.tsv")
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "a") as fh:
        fh.write("\t".join([item.nodeid, f"{wall:.3f}", f"{cpu:.3f}", *(f"{_total[k]:.3f}" for k in _KEYS),
                            str(_count[_KEYS[0]])]) + "\n")
