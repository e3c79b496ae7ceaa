"""Private: the BLAS thread pool limited to one thread for the duration of a ``with`` block.

On the book's 2-core machine, small BLAS and LAPACK calls lose much to OpenBLAS's thread hand-offs
(measured: the SVDs that :mod:`slr.transformer` logs for Figure 8, 0.1 to 3 s of CPU each on two threads
against 0.01 s on one; the probe's logistic-regression fits in :mod:`slr.probe`, 5x the CPU time), with
the same numbers bit for bit. ``threadpoolctl`` comes with scikit-learn (the book's extras); without it
the threads are left as they are.
"""
from __future__ import annotations

import contextlib

__all__ = ["one_blas_thread"]


def one_blas_thread():
    """A context manager: OpenBLAS (numpy's, scipy's and the one jaxlib's LAPACK calls on CPU) on one
    thread inside, restored after."""
    import scipy.linalg  # noqa: F401  (loads the OpenBLAS that jaxlib's LAPACK calls, before it is limited)
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover
        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")
